// Fuzzes the cache entry envelope (strategies/cache_entry) and the default codec (JsonCodec) on
// the bytes a cache may hold: anything another process, an old version or an attacker wrote.
// Contract (cache_entry.h, codec.h): decode gives std::nullopt / throws a std::exception for
// anything invalid, never crashes; what decodes re-encodes to the same bytes.
// Read-only use of the strategies layer's public API.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/strategies/cache_entry.h"
#include "lockstep/strategies/codec.h"

namespace {

// An entity shaped like the demo's rows: numbers, text, a nested list.
struct Item {
    std::int64_t id = 0;
    std::string name;
    std::int64_t stock = 0;
    std::vector<std::string> tags;
    std::map<std::string, double> prices;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Item, id, name, stock, tags, prices)

std::string encode(const lockstep::CacheEntry& e) {
    switch (e.kind) {
    case lockstep::CacheEntry::Kind::Value:
        return lockstep::CacheEntry::encode_value(e.version, e.payload);
    case lockstep::CacheEntry::Kind::NotFound:
        return lockstep::CacheEntry::encode_not_found();
    case lockstep::CacheEntry::Kind::Marker:
        return lockstep::CacheEntry::encode_marker(e.payload);
    }
    std::abort();
}

// KNOWN FINDING (reported to the strategies layer, not fixed here): nlohmann-json's from_json
// into an integer field static_casts a JSON number that only fits a double (e.g. -1.7e22) to
// std::int64_t: undefined behaviour (UBSan: float-cast-overflow, nlohmann/detail/conversions/
// from_json.hpp:67), reached through JsonCodec<T>::decode on a cache entry like
// `v1:{"id":-17777777777777777777777}`. Until JsonCodec checks the range itself, the harness
// skips such payloads so the rest of the codec and the envelope keep being fuzzed in CI.
// Remove this filter to reproduce.
bool has_float_beyond_int64(const nlohmann::json& j) {
    if (j.is_number_float()) {
        const double d = j.get<double>();
        return !(d > -9.2e18 && d < 9.2e18);  // also true for NaN
    }
    if (j.is_structured()) {
        for (const auto& e : j) {
            if (has_float_beyond_int64(e)) return true;
        }
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    const auto entry = lockstep::CacheEntry::decode(bytes);
    if (entry) {
        // What decodes is canonical: encoding it gives back the same bytes.
        if (encode(*entry) != bytes) std::abort();
    }
    // The payload of a value (or, failing that, the raw bytes) through the default codec.
    const std::string_view payload =
        entry && entry->kind == lockstep::CacheEntry::Kind::Value ? std::string_view(entry->payload) : bytes;
    static const lockstep::JsonCodec<Item> codec;
    try {
        if (has_float_beyond_int64(nlohmann::json::parse(payload.begin(), payload.end()))) return 0;
        const Item item = codec.decode(payload);
        const Item again = codec.decode(codec.encode(item));
        if (again.id != item.id || again.name != item.name || again.stock != item.stock || again.tags != item.tags)
            std::abort();
    } catch (const std::exception&) {
        // codec.h: an invalid encoding throws; the repository treats it as a miss.
    }
    return 0;
}
