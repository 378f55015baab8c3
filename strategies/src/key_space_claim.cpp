#include "key_space_claim.h"

#include <map>

#include "lockstep/core/error.h"
#include "lockstep/core/mutex.h"

namespace lockstep::detail {

namespace {

struct Holder {
    std::string table;
    int count = 0;
};

// Key space -> the table claiming it, for every live repository of the process.
struct Registry {
    Mutex mutex;
    std::map<std::string, Holder> spaces GUARDED_BY(mutex);
};

Registry& registry() {
    static Registry r;
    return r;
}

}  // namespace

KeySpaceClaim::KeySpaceClaim(std::string prefix, std::string entity, std::string table)
    : space_(std::move(prefix) + "{" + entity + ":") {
    auto& r = registry();
    MutexLock lock(r.mutex);
    auto& holder = r.spaces[space_];
    if (holder.count > 0 && holder.table != table) {
        throw ConfigError("entity.name", "'" + entity + "' already names table '" + holder.table +
                                             "' under this key prefix; table '" + table +
                                             "' would share its cache keys and locks: choose another name");
    }
    holder.table = std::move(table);
    ++holder.count;
}

KeySpaceClaim::~KeySpaceClaim() {
    auto& r = registry();
    MutexLock lock(r.mutex);
    auto it = r.spaces.find(space_);
    if (it != r.spaces.end() && --it->second.count == 0) r.spaces.erase(it);
}

}  // namespace lockstep::detail
