// ProxiedLockService: a lock service whose every server endpoint sits behind a FaultProxy of its
// own, so that a test or the demo can cut, slow or reset one holder's network while its rivals
// reach the servers directly (RACES L11, docs/testing.md).
//
//   auto holder = lockstep::open_proxied_lock_service(redis_url, {.prefix = "t:"});
//   auto m = holder.service->make_mutex("job", {.lease = 1500ms});
//   m->lock();
//   holder.blackhole();      // every proxy of the service: packets dropped, connections open
//   ... m->lost() turns true at the hold's validity, before a rival can acquire ...
//   holder.pass();
//
// A Cluster or Sentinel URL (redis+cluster://, redis+sentinel://, and their redis-fair forms)
// works too: the seeds or sentinels of the URL sit behind proxies, and so does every data node
// they announce (asked directly when the service opens: CLUSTER NODES, or the Sentinel's master
// and replicas); the holder's client is told to use the proxies instead of the announced
// addresses (RedisOptions::address_map), so MOVED, ASK and failovers stay behind the proxies. A
// node that joins later is not proxied.
//
// The network deadlines the holder gets (its socket, connect and read timeouts) are set in the
// URL, shorter than any lease the caller uses, so that a call into a partition gives up in time:
// the Redis-based backends get `redis_timeout` for both; MySQL gets `mysql_timeout` as its read and
// write timeouts (a hold's pinned session uses a third of the lease, MysqlLockService); ZooKeeper
// is bounded by its session timeout.
//
// Thread safety: the setters may be called from any thread (FaultProxy's); the struct itself from
// its owner thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/locks/lock_service.h"
#include "lockstep/servers/fault_proxy.h"

namespace lockstep {

struct ProxiedLockService {
    std::vector<std::unique_ptr<FaultProxy>> proxies;  // one per server endpoint of the URL
    std::unique_ptr<LockService> service;

    void blackhole();
    void stall();
    void pass();
    void reset();
    void refuse();
    void latency(std::chrono::milliseconds fixed, FaultDirection direction = FaultDirection::Both);
};

struct ProxiedTimeouts {
    std::chrono::milliseconds redis_timeout{300};
    std::chrono::milliseconds mysql_timeout{5000};
};

// Opens `url` (any lock-service URL of open_lock_service) with each endpoint behind a new proxy.
// ConfigError when an endpoint is not on 127.0.0.0/8 (a proxy forwards to loopback only);
// ConnectionError when no seed of a Cluster or Sentinel URL answers.
ProxiedLockService open_proxied_lock_service(std::string url, LockServiceOptions options,
                                             ProxiedTimeouts timeouts = {});

}  // namespace lockstep
