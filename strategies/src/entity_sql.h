// The SQL statements of one entity, built once from its TableSpec. Identifiers are validated
// and quoted; values always go through '?' placeholders.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "lockstep/strategies/repository_core.h"

namespace lockstep::detail {

struct EntitySql {
    explicit EntitySql(const TableSpec& spec);

    std::string select_one;    // key, version, columns WHERE key = ?
    std::string lock_row;      // same plus the database clock (kClockColumn), FOR UPDATE
    std::string lock_version;  // version WHERE key = ? FOR UPDATE
    std::string clock;         // the database clock (kClockColumn)
    std::string update;        // SET columns = ?, version = ? WHERE key = ?
    std::string update_fenced; // SET columns = ?, version = ?, fence = ? WHERE key = ? (fence column set)
    std::string insert;        // (key, version, columns) VALUES (?, ?, ?...)
    std::string insert_generated;  // (version, columns) VALUES (?, ?...): the database picks the key
    std::string last_insert_id;    // SELECT LAST_INSERT_ID() AS `id`
    std::string remove;        // DELETE WHERE key = ?

    // SELECT ... WHERE key IN (?, ..., ?) with `n` placeholders.
    std::string select_in(std::size_t n) const;

private:
    std::string select_prefix_;  // "SELECT ... FROM t WHERE key "
};

// The version source (C11). A row's version is max(version + 1, the database clock in
// microseconds since the epoch): strictly increasing per row as before, and an insert after a
// delete (or a row reset by hand to a small version) continues above every version the
// library wrote before, as long as the database server's clock does not step back. One clock
// (the database's, not each client's) so application servers' skew does not matter.
// UNIX_TIMESTAMP() and NOW(6) are both the statement's start time; this form does not depend
// on the session time zone (no DST ambiguity).
inline constexpr const char* kClockSql = "(UNIX_TIMESTAMP() * 1000000 + MICROSECOND(NOW(6)))";
inline constexpr const char* kClockColumn = "`lockstep_clock_us`";
inline constexpr const char* kClockName = "lockstep_clock_us";
std::int64_t next_version(std::int64_t current, std::int64_t clock_us);

// Rounds a batch size up to a power of two (at most kMaxInBatch), so that the number of
// distinct IN (...) statements the connection caches stays small.
inline constexpr std::size_t kMaxInBatch = 256;
std::size_t in_batch_size(std::size_t n);

}  // namespace lockstep::detail
