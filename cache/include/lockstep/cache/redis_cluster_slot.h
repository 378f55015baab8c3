// Redis Cluster key routing: the hash slot of a key (CRC16/XMODEM of the key, or of its hash tag,
// modulo 16384) and the slot a command addresses. Pure functions, no I/O.
//
// Hash tags: when a key contains '{' followed later by '}' with at least one byte between them,
// only the bytes between the first '{' and the next '}' are hashed, so "a{user1}x" and
// "{user1}y" share a slot. lockstep puts every key of one lock name or one cache entry under one
// tag (locks/lock_keys.h), so each multi-key script touches one slot.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

inline constexpr int kRedisClusterSlots = 16384;

// CRC16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes with.
unsigned redis_crc16(std::string_view bytes) noexcept;

// The hash slot of `key`, 0..16383.
int redis_cluster_slot(std::string_view key) noexcept;

// The slot a command addresses: its first key (EVAL/EVALSHA/FCALL: the first key after
// numkeys; SPUBLISH/SSUBSCRIBE: the channel), or nullopt for a command without keys (PING,
// INFO, SCRIPT, PUBLISH, WAIT, ...), which any master may answer.
std::optional<int> redis_command_slot(const std::vector<std::string>& args);

}  // namespace lockstep
