// DEMO ONLY -- DELIBERATELY BROKEN LOCKS. NEVER USE THESE FOR ANYTHING BUT SHOWING HOW THEY FAIL.
//
// These are the Redis locks of the source documents (seeds/redis-lock-versions.md,
// seeds/jedis-lock-walkthrough.md), translated to C++ as literally as possible, so that the
// lock-pitfalls scenario can show each one failing under a forced interleaving, next to
// lockstep's RedisMutex closing the same race. Each class names the docs/races.md pitfall it has.
//
// Fault points (armed by the demo with ThreadFault):
//   demo.broken.after_setnx         SetnxThenExpire: after SETNX, before EXPIRE          L1
//   demo.broken.between_get_and_del TokenLock(GetThenDel): after the owner check          L4
//
// Thread safety: one object per thread.
#pragma once

#include <chrono>
#include <string>

namespace lockstep {
class RedisClient;
}

namespace lockstep::demo::broken {

// Version 1: SETNX, then EXPIRE, as two commands (L1). A crash between them leaves a key without
// a TTL: nobody ever gets the lock again. Released with a plain DEL (L3). (PEXPIRE here, so that
// the demo can use leases shorter than a second; the flaw is the same.)
class SetnxThenExpire {
public:
    SetnxThenExpire(RedisClient& redis, std::string key, std::chrono::milliseconds ttl);
    bool try_lock();
    void unlock();

private:
    RedisClient& redis_;
    std::string key_;
    std::chrono::milliseconds ttl_;
};

// Version 2: SETNX with "now + lease" by the CLIENT's clock as the value; a client that finds the
// stored time in the past takes the lock over with GETSET (L2). Needs synchronised clocks; two
// clients racing on GETSET overwrite each other's expiry; the value names no owner, so unlock is
// a DEL that anyone can do. `clock_skew` shifts this client's clock (a badly synchronised host).
class SetnxGetset {
public:
    SetnxGetset(RedisClient& redis, std::string key, std::chrono::milliseconds lease,
                std::chrono::milliseconds clock_skew = std::chrono::milliseconds(0));
    bool try_lock();
    void unlock();
    // The expiry this client believes its hold has (its own clock), and whether it is in the future.
    bool believes_held() const;

private:
    long long now_ms() const;
    RedisClient& redis_;
    std::string key_;
    std::chrono::milliseconds lease_;
    std::chrono::milliseconds skew_;
    long long my_expiry_ = 0;
};

// Version 3 acquire: SET key token NX PX lease (atomic, with an owner token) -- with one of the
// wrong releases, or used re-entrantly.
class TokenLock {
public:
    enum class Release {
        Del,                      // DEL key, no owner check (L3)
        GetThenDel,               // GET == token, then DEL: two commands (L4)
        CompareAndDeleteIgnored,  // the right Lua compare-and-delete, but its "0" is ignored (L10)
    };

    TokenLock(RedisClient& redis, std::string key, std::chrono::milliseconds lease, Release release);
    bool try_lock();
    // Retries every 10 ms until `timeout`.
    bool try_lock_for(std::chrono::milliseconds timeout);
    // Returns normally whatever happened: that is the point.
    void unlock();
    const std::string& token() const noexcept { return token_; }

private:
    RedisClient& redis_;
    std::string key_;
    std::chrono::milliseconds lease_;
    Release release_;
    std::string token_;
};

}  // namespace lockstep::demo::broken
