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
        const Item item = codec.decode(payload);
        const Item again = codec.decode(codec.encode(item));
        if (again.id != item.id || again.name != item.name || again.stock != item.stock || again.tags != item.tags)
            std::abort();
    } catch (const std::exception&) {
        // codec.h: an invalid encoding throws; the repository treats it as a miss.
    }
    return 0;
}
