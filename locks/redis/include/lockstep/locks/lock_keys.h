// The Redis keys and pub/sub channels of one lock name. Every key of a name shares one hash tag
// (`{<name>}`), so each multi-key Lua script of locks/ is legal on Redis Cluster:
//
//   <prefix>{<name>}:lock            mutex: hash owner -> reentrant hold count, TTL = lease
//   <prefix>{<name>}:lock:q          mutex: waiters in arrival order (zset, score = arrival µs)
//   <prefix>{<name>}:lock:qx         mutex: waiters' expiry (zset, score = server ms)
//   <prefix>{<name>}:lock:ch:<cid>   mutex: wake-up channel of lock client <cid> (one per process)
//   <prefix>{<name>}:rw:w            read-write lock: writer hash owner -> count, TTL = lease
//   <prefix>{<name>}:rw:r            read-write lock: reader hash owner -> count
//   <prefix>{<name>}:rw:rx           read-write lock: each reader's own lease (zset, expiry ms)
//   <prefix>{<name>}:rw:wq           read-write lock: waiting writers' claims (zset, arrival µs)
//   <prefix>{<name>}:rw:rq           read-write lock: waiting readers' claims (zset, arrival µs)
//   <prefix>{<name>}:rw:qx           read-write lock: claims' expiry (zset, 'r:'/'w:' owner, ms)
//   <prefix>{<name>}:rw:ch           read-write lock: release channel
//   <prefix>{<name>}:fence           fencing-token counter, shared by the mutex and the rw lock
//
// Thread safety: a plain value.
#pragma once

#include <string>
#include <string_view>

namespace lockstep {

class LockKeys {
public:
    // REQUIRES: `name` follows the name rule of core/names.h (ConfigError otherwise).
    LockKeys(std::string_view prefix, std::string_view name);

    const std::string& name() const noexcept { return name_; }
    // "<prefix>{<name>}": every key below starts with it.
    const std::string& stem() const noexcept { return stem_; }

    std::string mutex() const { return stem_ + ":lock"; }
    std::string mutex_queue() const { return stem_ + ":lock:q"; }
    std::string mutex_queue_expiry() const { return stem_ + ":lock:qx"; }
    // The release script derives this from mutex() + ":ch:" + client id.
    std::string mutex_channel(std::string_view client_id) const {
        return stem_ + ":lock:ch:" + std::string(client_id);
    }

    std::string rw_writer() const { return stem_ + ":rw:w"; }
    std::string rw_readers() const { return stem_ + ":rw:r"; }
    std::string rw_reader_expiry() const { return stem_ + ":rw:rx"; }
    std::string rw_writer_claims() const { return stem_ + ":rw:wq"; }
    std::string rw_reader_claims() const { return stem_ + ":rw:rq"; }
    std::string rw_claim_expiry() const { return stem_ + ":rw:qx"; }
    std::string rw_channel() const { return stem_ + ":rw:ch"; }

    std::string fence() const { return stem_ + ":fence"; }

private:
    std::string name_;
    std::string stem_;
};

}  // namespace lockstep
