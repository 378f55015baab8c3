// DEMO ONLY -- DELIBERATELY BROKEN LOCKS (see broken_locks.h).
#include "broken_locks.h"

#include <random>
#include <thread>

#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_script.h"
#include "lockstep/core/fault_point.h"

namespace lockstep::demo::broken {

namespace {

std::string random_token() {
    thread_local std::mt19937_64 rng(std::random_device{}());
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()));
    return buf;
}

}  // namespace

SetnxThenExpire::SetnxThenExpire(RedisClient& redis, std::string key, std::chrono::milliseconds ttl)
    : redis_(redis), key_(std::move(key)), ttl_(ttl) {}

bool SetnxThenExpire::try_lock() {
    if (redis_.command({"SETNX", key_, "locked"}).integer() != 1) return false;
    fault::point("demo.broken.after_setnx");  // L1: a crash here leaves the key without a TTL
    redis_.command({"PEXPIRE", key_, std::to_string(ttl_.count())});
    return true;
}

void SetnxThenExpire::unlock() { redis_.del({key_}); }

SetnxGetset::SetnxGetset(RedisClient& redis, std::string key, std::chrono::milliseconds lease,
                         std::chrono::milliseconds clock_skew)
    : redis_(redis), key_(std::move(key)), lease_(lease), skew_(clock_skew) {}

long long SetnxGetset::now_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch() + skew_)
        .count();
}

bool SetnxGetset::try_lock() {
    const std::string expiry = std::to_string(now_ms() + lease_.count());
    if (redis_.command({"SETNX", key_, expiry}).integer() == 1) {
        my_expiry_ = std::stoll(expiry);
        return true;
    }
    // "Expired" by THIS client's clock: take it over with GETSET (L2).
    auto current = redis_.get(key_);
    if (current && now_ms() > std::stoll(*current)) {
        auto old = redis_.command({"GETSET", key_, expiry}).optional_string();
        if (!old || *old == *current) {
            my_expiry_ = std::stoll(expiry);
            return true;
        }
    }
    return false;
}

void SetnxGetset::unlock() { redis_.del({key_}); }

bool SetnxGetset::believes_held() const { return my_expiry_ > now_ms(); }

TokenLock::TokenLock(RedisClient& redis, std::string key, std::chrono::milliseconds lease, Release release)
    : redis_(redis), key_(std::move(key)), lease_(lease), release_(release) {}

bool TokenLock::try_lock() {
    std::string token = random_token();
    auto reply = redis_.command({"SET", key_, token, "NX", "PX", std::to_string(lease_.count())});
    if (reply.is_nil()) return false;
    token_ = token;
    return true;
}

bool TokenLock::try_lock_for(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (try_lock()) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

void TokenLock::unlock() {
    switch (release_) {
        case Release::Del:
            redis_.del({key_});  // L3: whoever holds it now loses it
            break;
        case Release::GetThenDel: {
            auto current = redis_.get(key_);
            if (current && *current == token_) {
                fault::point("demo.broken.between_get_and_del");  // L4: the lease may end right here
                redis_.del({key_});
            }
            break;
        }
        case Release::CompareAndDeleteIgnored: {
            static const RedisScript compare_and_delete(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end");
            redis_.eval(compare_and_delete, {key_}, {token_});  // L10: a 0 ("not yours") is ignored
            break;
        }
    }
}

}  // namespace lockstep::demo::broken
