// One entity name per key space in a process: two live repositories whose keys would collide
// (same key prefix and entity name) must be over the same table, or the second one is a
// ConfigError; otherwise they would read and delete each other's entries. Repositories of the
// same entity (several strategies, several instances, as tests and services have) are fine.
// Only this process is checked: another process using the same names for another table is
// not seen (docs/tables.md says to give every entity its own name per key prefix).
#pragma once

#include <string>

namespace lockstep::detail {

class KeySpaceClaim {
public:
    // Throws ConfigError when `prefix` + `entity` is held by a live repository over another table.
    KeySpaceClaim(std::string prefix, std::string entity, std::string table);
    ~KeySpaceClaim();
    KeySpaceClaim(const KeySpaceClaim&) = delete;
    KeySpaceClaim& operator=(const KeySpaceClaim&) = delete;

private:
    std::string space_;
};

}  // namespace lockstep::detail
