#include "lockstep/cache/redis_cluster_slot.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>

namespace lockstep {
namespace {

constexpr std::array<std::uint16_t, 256> make_crc16_table() {
    std::array<std::uint16_t, 256> table{};
    for (unsigned i = 0; i < 256; ++i) {
        std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
        for (int bit = 0; bit < 8; ++bit) {
            crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : static_cast<std::uint16_t>(crc << 1);
        }
        table[i] = crc;
    }
    return table;
}

constexpr auto kCrc16Table = make_crc16_table();

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::toupper(static_cast<unsigned char>(a[i])) != b[i]) return false;
    }
    return true;
}

}  // namespace

unsigned redis_crc16(std::string_view bytes) noexcept {
    std::uint16_t crc = 0;
    for (unsigned char c : bytes) crc = static_cast<std::uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
    return crc;
}

int redis_cluster_slot(std::string_view key) noexcept {
    if (const auto open = key.find('{'); open != std::string_view::npos) {
        const auto close = key.find('}', open + 1);
        // "{}" (an empty tag) hashes the whole key, as Redis does.
        if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
    }
    return static_cast<int>(redis_crc16(key) & (kRedisClusterSlots - 1));
}

std::optional<int> redis_command_slot(const std::vector<std::string>& args) {
    if (args.size() < 2) return std::nullopt;
    const std::string_view name = args[0];
    for (const char* scripted : {"EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO", "FCALL", "FCALL_RO"}) {
        if (!iequals(name, scripted)) continue;
        long long numkeys = 0;
        if (args.size() < 4) return std::nullopt;
        const auto [p, ec] = std::from_chars(args[2].data(), args[2].data() + args[2].size(), numkeys);
        if (ec != std::errc() || numkeys <= 0) return std::nullopt;
        return redis_cluster_slot(args[3]);
    }
    // Commands whose first argument is not a key: any node answers them.
    for (const char* keyless : {"PING", "ECHO", "INFO", "SCRIPT", "FUNCTION", "CLUSTER", "CONFIG", "CLIENT", "WAIT",
                                "PUBLISH", "SUBSCRIBE", "PSUBSCRIBE", "PUBSUB", "SCAN", "KEYS", "DBSIZE",
                                "FLUSHDB", "FLUSHALL", "TIME", "DEBUG", "COMMAND", "HELLO", "AUTH", "SELECT",
                                "ROLE", "MEMORY", "LATENCY", "SLOWLOG", "ACL", "RANDOMKEY", "READONLY",
                                "READWRITE", "ASKING", "MULTI", "EXEC", "DISCARD", "SAVE", "BGSAVE", "LASTSAVE",
                                "REPLICAOF", "SLAVEOF", "SHUTDOWN", "MONITOR", "RESET"}) {
        if (iequals(name, keyless)) return std::nullopt;
    }
    return redis_cluster_slot(args[1]);
}

}  // namespace lockstep
