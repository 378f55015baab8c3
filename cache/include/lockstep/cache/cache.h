// Cache: the narrow interface the repository layer talks to, so a strategy can be unit-tested
// against an in-memory fake and run against Redis in integration tests. Values are bytes.
//
// A miss is std::nullopt. Implementations throw lockstep::Error subclasses on failure
// (ConnectionError when the backend is down); the repository decides what a failure means.
// Thread safety: implementations must be safe to call from many threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

class Cache {
public:
    virtual ~Cache() = default;

    virtual std::optional<std::string> get(std::string_view key) = 0;
    // REQUIRES: ttl > 0.
    virtual void set(std::string_view key, std::string_view value, std::chrono::milliseconds ttl) = 0;
    // True if the key existed.
    virtual bool remove(std::string_view key) = 0;
    // How many of the keys existed.
    virtual std::size_t remove_many(const std::vector<std::string>& keys) = 0;
};

// An in-memory Cache (TTL honoured on read) for fast unit tests of logic. Not for production.
std::unique_ptr<Cache> make_in_memory_cache();
// Same, reading time from `now` (a test clock), so TTL tests need not sleep.
std::unique_ptr<Cache> make_in_memory_cache(std::function<std::chrono::steady_clock::time_point()> now);

}  // namespace lockstep
