// The SQL statements of one entity, built once from its TableSpec. Identifiers are validated
// and quoted; values always go through '?' placeholders.
#pragma once

#include <cstddef>
#include <string>

#include "lockstep/strategies/repository_core.h"

namespace lockstep::detail {

struct EntitySql {
    explicit EntitySql(const TableSpec& spec);

    std::string select_one;    // key, version, columns WHERE key = ?
    std::string lock_row;      // same, FOR UPDATE
    std::string lock_version;  // version WHERE key = ? FOR UPDATE
    std::string update;        // SET columns = ?, version = version + 1 WHERE key = ?
    std::string insert;        // (key, version, columns) VALUES (?, 1, ?...)
    std::string remove;        // DELETE WHERE key = ?

    // SELECT ... WHERE key IN (?, ..., ?) with `n` placeholders.
    std::string select_in(std::size_t n) const;

private:
    std::string select_prefix_;  // "SELECT ... FROM t WHERE key "
};

// Rounds a batch size up to a power of two (at most kMaxInBatch), so that the number of
// distinct IN (...) statements the connection caches stays small.
inline constexpr std::size_t kMaxInBatch = 256;
std::size_t in_batch_size(std::size_t n);

}  // namespace lockstep::detail
