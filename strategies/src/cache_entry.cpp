#include "lockstep/strategies/cache_entry.h"

#include <charconv>

namespace lockstep {

std::string CacheEntry::encode_value(std::int64_t version, std::string_view payload) {
    std::string out = "v";
    out += std::to_string(version);
    out += ':';
    out.append(payload);
    return out;
}

std::string CacheEntry::encode_not_found() { return "n:"; }

std::string CacheEntry::encode_marker(std::string_view token) { return "L:" + std::string(token); }

std::optional<CacheEntry> CacheEntry::decode(std::string_view bytes) {
    if (bytes.size() < 2) return std::nullopt;
    CacheEntry e;
    switch (bytes[0]) {
        case 'n':
            if (bytes != "n:") return std::nullopt;
            e.kind = Kind::NotFound;
            return e;
        case 'L':
            if (bytes[1] != ':' || bytes.size() == 2) return std::nullopt;
            e.kind = Kind::Marker;
            e.payload = std::string(bytes.substr(2));
            return e;
        case 'v': {
            auto colon = bytes.find(':');
            if (colon == std::string_view::npos) return std::nullopt;
            std::string_view digits = bytes.substr(1, colon - 1);
            // Canonical decimal only (the Lua scripts compare versions as digit strings).
            if (digits.empty() || digits.size() > 19 || (digits[0] == '0' && digits.size() > 1)) return std::nullopt;
            for (char d : digits) {
                if (d < '0' || d > '9') return std::nullopt;
            }
            std::int64_t version = 0;
            auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), version);
            if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
            e.kind = Kind::Value;
            e.version = version;
            e.payload = std::string(bytes.substr(colon + 1));
            return e;
        }
        default:
            return std::nullopt;
    }
}

}  // namespace lockstep
