#include "key_space_claim.h"

#include <map>
#include <mutex>

#include "lockstep/core/error.h"

namespace lockstep::detail {

namespace {

struct Holder {
    std::string table;
    int count = 0;
};

std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}

std::map<std::string, Holder>& registry() {
    static std::map<std::string, Holder> r;
    return r;
}

}  // namespace

KeySpaceClaim::KeySpaceClaim(std::string prefix, std::string entity, std::string table)
    : space_(std::move(prefix) + "{" + entity + ":") {
    std::lock_guard lock(registry_mutex());
    auto& holder = registry()[space_];
    if (holder.count > 0 && holder.table != table) {
        throw ConfigError("entity.name", "'" + entity + "' already names table '" + holder.table +
                                             "' under this key prefix; table '" + table +
                                             "' would share its cache keys and locks: choose another name");
    }
    holder.table = std::move(table);
    ++holder.count;
}

KeySpaceClaim::~KeySpaceClaim() {
    std::lock_guard lock(registry_mutex());
    auto it = registry().find(space_);
    if (it != registry().end() && --it->second.count == 0) registry().erase(it);
}

}  // namespace lockstep::detail
