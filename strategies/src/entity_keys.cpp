#include "lockstep/strategies/entity_keys.h"

#include <charconv>

#include "lockstep/core/error.h"
#include "lockstep/core/names.h"

namespace lockstep {

EntityKeys::EntityKeys(std::string prefix, std::string entity_name)
    : prefix_(std::move(prefix)), name_(std::move(entity_name)) {
    if (prefix_.find_first_of("{}") != std::string::npos) {
        throw ConfigError("key_prefix", "must not contain '{' or '}' (it would replace the entity's hash tag)");
    }
    check_name("entity.name", name_);  // the one rule of every name (core/names.h)
}

// Every read builds its key: one allocation, no temporaries (the cache-hit path).
std::string EntityKeys::value(std::int64_t id) const {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, id).ptr;
    std::string key;
    key.reserve(prefix_.size() + name_.size() + 3 + static_cast<std::size_t>(end - digits));
    key.append(prefix_).append("{").append(name_).append(":").append(digits, end).append("}");
    return key;
}

std::string EntityKeys::lock_name(std::int64_t id) const { return name_ + ":" + std::to_string(id); }

std::string_view redis_hash_tag(std::string_view key) noexcept {
    auto open = key.find('{');
    if (open == std::string_view::npos) return key;
    auto close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1) return key;
    return key.substr(open + 1, close - open - 1);
}

}  // namespace lockstep
