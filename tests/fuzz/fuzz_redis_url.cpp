// Fuzzes parse_redis_url (core/uri): any bytes must give RedisOptions or a lockstep::Error (a
// ConfigError naming the part), never a crash, hang or other exception. A URL that parses must
// survive the round trip: to_url(parse(to_url(o))) == to_url(o).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view url(reinterpret_cast<const char*>(data), size);
    lockstep::RedisOptions options;
    try {
        options = lockstep::parse_redis_url(url);
    } catch (const lockstep::Error&) {
        return 0;  // the typed error is the contract
    }
    const std::string once = lockstep::to_url(options);
    std::string twice;
    try {
        twice = lockstep::to_url(lockstep::parse_redis_url(once));
    } catch (const lockstep::Error&) {
        std::abort();  // to_url produced a URL its own parser refuses
    }
    if (twice != once) std::abort();
    return 0;
}
