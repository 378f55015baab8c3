// The bytes of a cache entry: a small envelope, binary-safe and parseable by a Lua script.
//
//   v<version>:<payload>   a value read at row version <version> (decimal, no leading zeros);
//                          <payload> is the codec's bytes, any bytes
//   n:                     a cached "not found" (negative cache, C7); ranks below every value
//   L:<token>              a marker: one reader holds the load of this key (stampede guard,
//                          C6) and, under Lease, the right to fill it (C2, C4)
//
// Anything else does not decode: the repository treats it as a miss, deletes it (only if it
// still holds the same bytes), logs and counts it.
//
// Thread safety: plain functions and values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep {

struct CacheEntry {
    enum class Kind { Value, NotFound, Marker };

    Kind kind = Kind::NotFound;
    // Value: the row version the payload was read at.
    std::int64_t version = 0;
    // Value: the codec's bytes. Marker: the token.
    std::string payload;

    static std::string encode_value(std::int64_t version, std::string_view payload);
    static std::string encode_not_found();
    static std::string encode_marker(std::string_view token);

    // std::nullopt when `bytes` is not a valid envelope.
    static std::optional<CacheEntry> decode(std::string_view bytes);
};

}  // namespace lockstep
