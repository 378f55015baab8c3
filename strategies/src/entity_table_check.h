// The entity checked against the live schema, once, when its repository is constructed: a typo
// in a column name, a key that is not BIGINT, a missing table is one ConfigError naming every
// problem, instead of a failure on the first miss (or none at all while a warm cache hides it).
#pragma once

#include "lockstep/strategies/repository_core.h"

namespace lockstep {
class MysqlPool;
}

namespace lockstep::detail {

// What the check learned that the repository uses.
struct TableFacts {
    // The key column is AUTO_INCREMENT: insert() of an id 0 lets the database choose it.
    bool generated_key = false;
};

// Throws ConfigError("entity '<name>'", "<problem>; <problem>; ...") listing every problem:
// table missing; a column missing; key, version or fence column not BIGINT NOT NULL; a column
// the database computes (GENERATED) listed as writable; a column listed twice.
TableFacts check_entity_table(const TableSpec& spec, MysqlPool& db);

}  // namespace lockstep::detail
