// RedisInvalidationChannel: what keeps a NearCache honest. Redis server-assisted client-side
// caching (CLIENT TRACKING) over RESP2, which is all Debian's hiredis 0.14 speaks:
//
//   - one dedicated subscriber connection (its own thread) does SUBSCRIBE __redis__:invalidate;
//     every key in a message is invalidated in the NearCache; a nil message (FLUSHALL,
//     FLUSHDB) drops it;
//   - Default mode: near misses read through "tracked readers", connections with
//     `CLIENT TRACKING on REDIRECT <subscriber id>`; Redis remembers the keys each of them read
//     and sends one invalidation when one changes. Broadcast mode: one beacon connection with
//     `CLIENT TRACKING on REDIRECT <id> BCAST PREFIX <p>...`; every write to a key under the
//     prefixes is announced, read or not.
//
// The drop rule (C12): the NearCache is dropped whenever the channel is not known intact:
//   - the subscriber connection breaks or goes silent (a PING every `heartbeat`; nothing heard
//     for 3 heartbeats while a PING has waited a heartbeat for its answer counts as broken: a
//     listener thread that ran late on a busy machine asks before it gives up), and again when it has reconnected and resubscribed (its new
//     client id makes every earlier redirect dead: the server would report
//     `tracking-redir-broken` only over RESP3, so readers made before are discarded, never reused);
//   - a tracked reader (Default) or the beacon (Broadcast) is lost: the server forgets the
//     keys a lost connection tracked, so their invalidations would never come. A reader lost in
//     use is seen at once; one lost while idle is seen at the next heartbeat.
// While the channel is down, intact() is false and tracked_get() throws: the repository reads
// Redis the ordinary way and fills nothing locally. Tracked readers are at most
// `RedisOptions::pool_size`, made on demand and never closed to make room (closing one would make
// the server forget what it tracked); a tracked_get() beyond them waits up to
// `pool_wait_timeout` for one, then throws TimeoutError.
//
// Topologies (docs/near-cache.md): tracking is per node, so the channel above exists once per
// node that serves keys, and the whole NearCache is dropped whenever that set may have changed:
//   - Sentinel: one channel on the master in use; on a switch (+switch-master, or a
//     rediscovery) the old one is closed, the NearCache dropped, a new one made on the new master;
//   - Cluster: one channel per master, each read sent to the master of its key's slot. Any
//     change of a slot's owner (a refresh of CLUSTER SLOTS, asked every second and after a
//     MOVED or ASK answer to a tracked read) drops the NearCache, closes the channels of nodes
//     that serve no slot and opens channels on new masters. A master's subscriber that breaks
//     drops the whole NearCache, as on one node.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/cache/near_cache.h"
#include "lockstep/core/redis_options.h"

namespace lockstep {

enum class TrackingMode {
    // Redis remembers the keys each tracked reader read: invalidations only for keys this
    // process holds (or held). Costs server memory per tracked key (tracking-table-max-keys;
    // when full, Redis evicts keys from it and sends their invalidations: safe).
    Default,
    // Every write under the prefixes is announced to every process, read or not: no server
    // memory per key, one message per write per process.
    Broadcast,
};

struct RedisTrackingOptions {
    TrackingMode mode = TrackingMode::Default;
    // Broadcast: the key prefixes to announce (a repository's are `<key_prefix>{<entity>:`).
    std::vector<std::string> prefixes;
    // How often the subscriber PINGs and idle readers are checked; silence for 3 heartbeats
    // (with a PING unanswered for at least one) breaks the channel.
    std::chrono::milliseconds heartbeat{100};
    // First wait before a reconnect; doubles up to 1 s.
    std::chrono::milliseconds reconnect_backoff{20};
};

class RedisInvalidationChannel {
public:
    // Connects and subscribes on every node before returning (ConnectionError / TimeoutError
    // otherwise). ConfigError for Broadcast without prefixes.
    // `near` is borrowed and must outlive the channel.
    RedisInvalidationChannel(RedisOptions redis, NearCache& near, RedisTrackingOptions options = {});
    ~RedisInvalidationChannel();
    RedisInvalidationChannel(const RedisInvalidationChannel&) = delete;
    RedisInvalidationChannel& operator=(const RedisInvalidationChannel&) = delete;

    // True while subscribed, heard from within 3 heartbeats, and tracking is armed.
    bool intact() const;
    // GET on a tracked reader (Default) or any reader (Broadcast): after it, a change of `key`
    // is announced. Throws ConnectionError when the channel is down or the reader failed (the
    // NearCache has been dropped then), ProtocolError on an error reply.
    std::optional<std::string> tracked_get(const std::string& key);

    // The subscriber connection's client id (tests: CLIENT KILL ID), 0 while down; on a Cluster
    // 0 (ask per key).
    std::int64_t subscriber_id() const;
    // The client id of the subscriber on the node serving `key`, 0 while it has none.
    std::int64_t subscriber_id(const std::string& key) const;
    // Subscriptions made so far on every node (1 per node after construction; +1 per reconnect;
    // +1 per channel opened after a topology change).
    std::uint64_t connects() const;
    // Invalidation messages received, and keys named in them.
    std::uint64_t messages() const;
    // Cluster slot-map changes and Sentinel switches seen (each dropped the NearCache).
    std::uint64_t topology_changes() const;
    const RedisTrackingOptions& options() const noexcept;

private:
    struct Impl;
    std::shared_ptr<Impl> impl_;
};

}  // namespace lockstep
