#include "lockstep/locks/segmented_stock.h"

#include <charconv>
#include <limits>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_script.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"

namespace lockstep {
namespace {

// The Lua scripts of the segmented stock. Each one sees the whole item (KEYS[1] = meta,
// KEYS[2 .. K+1] = segments 0 .. K-1, all under one hash tag) and runs atomically, so no other
// take, give-back or init of the item interleaves with it (that is what closes O1 inside O3).
//
// Every script answers a table whose first element is a status code:
constexpr long long kOk = 1;
constexpr long long kShort = 0;           // take: all segments together hold fewer than n
constexpr long long kNoStock = -2;        // no meta key: never initialised, or destroyed
constexpr long long kLayoutChanged = -3;  // the caller's segment count is not the stored one
constexpr long long kOverfull = -4;       // give_back: more units back than were ever taken
//
// Numbers: Lua numbers are doubles, exact for integers up to 2^53 (kMaxTotal is below that).
// A number computed in Lua is written back with string.format('%d', x), never passed to
// redis.call as a number: Redis 6 and older turn a Lua number argument into text with "%.14g"
// (2.6666666666667e+14, which DECRBY refuses), Redis 7 with 17 digits. Amounts that come from
// the caller are passed through as the ARGV strings.

// Shared prelude. ARGV[1] = the segment count the caller built KEYS for.
constexpr const char* kLayoutCheck = R"lua(
local k = tonumber(redis.call('hget', KEYS[1], 'segments'))
if not k then return {-2} end
-- A process that cached the layout of a destroyed and re-created stock would otherwise take
-- from (or miss) segments that are no longer part of it: it reloads and calls again.
if k ~= tonumber(ARGV[1]) or #KEYS ~= k + 1 then return {-3} end
)lua";

// init: ARGV[2] = total, ARGV[3 .. K+2] = the share of each segment (computed by
// SegmentedStock::initial_shares, so the spreading rule lives in one place).
const RedisScript& init_script() {
    static const RedisScript script(R"lua(
-- Two inits racing (two processes starting at once): the first creates the stock, the second
-- sees the meta key and changes nothing, so units are never created twice.
if redis.call('exists', KEYS[1]) == 1 then return {0} end
for i = 2, #KEYS do
  redis.call('set', KEYS[i], ARGV[i + 1])
end
-- The meta key last: until it exists no take uses the segments.
redis.call('hset', KEYS[1], 'total', ARGV[2], 'segments', ARGV[1])
return {1}
)lua");
    return script;
}

// take: ARGV[2] = n, ARGV[3] = start segment (0-based, chosen by the caller at random).
const RedisScript& take_script() {
    static const RedisScript script(std::string(kLayoutCheck) + R"lua(
local n = tonumber(ARGV[2])
local start = tonumber(ARGV[3])
local have = {}
local function units(i)
  if have[i] == nil then have[i] = tonumber(redis.call('get', KEYS[i + 2]) or '0') end
  return have[i]
end
-- O3: start at a random segment so concurrent orders spread over the segments, and move on
-- when it is short. O1: the check and the decrement are one atomic step, so two orders can
-- never both be granted the same units, and no segment goes below zero.
for step = 0, k - 1 do
  local i = (start + step) % k
  if units(i) >= n then
    redis.call('decrby', KEYS[i + 2], ARGV[2])
    return {1}
  end
end
-- Every segment has been read by now.
local sum = 0
for i = 0, k - 1 do sum = sum + have[i] end
-- O3 "refused clearly" / O1: fewer than n units in the whole item: take nothing at all.
if sum < n then return {0} end
-- O3 "split": no single segment holds n but together they do. Take from each in visit order
-- inside this one script: all-or-nothing, and no other take can run between the decrements.
local left = n
for step = 0, k - 1 do
  local i = (start + step) % k
  local t = math.min(have[i], left)
  if t > 0 then
    redis.call('decrby', KEYS[i + 2], string.format('%d', t))
    left = left - t
    if left == 0 then break end
  end
end
return {1}
)lua");
    return script;
}

// give_back: ARGV[2] = n.
const RedisScript& give_back_script() {
    static const RedisScript script(std::string(kLayoutCheck) + R"lua(
local n = tonumber(ARGV[2])
local total = tonumber(redis.call('hget', KEYS[1], 'total'))
local sum, emptiest, least = 0, 0, nil
for i = 0, k - 1 do
  local v = tonumber(redis.call('get', KEYS[i + 2]) or '0')
  sum = sum + v
  if least == nil or v < least then least, emptiest = v, i end
end
-- O1 via compensation: units given back beyond what was taken (an order cancelled twice, a
-- give-back for a take that failed) would be sold again: oversell. Refuse, atomically with
-- the sum, so two racing give-backs cannot both pass the check.
if sum + n > total then return {-4, string.format('%d', sum), string.format('%d', total)} end
-- O3: refill the emptiest segment, so orders that start there stop walking past it.
redis.call('incrby', KEYS[emptiest + 2], ARGV[2])
return {1}
)lua");
    return script;
}

// snapshot: total and every segment at one instant.
const RedisScript& read_script() {
    static const RedisScript script(std::string(kLayoutCheck) + R"lua(
local out = {1, redis.call('hget', KEYS[1], 'total')}
for i = 2, #KEYS do
  out[#out + 1] = redis.call('get', KEYS[i]) or '0'
end
return out
)lua");
    return script;
}

// destroy: deletes the meta key and every segment in one step, so no take sees half a stock.
const RedisScript& destroy_script() {
    static const RedisScript script(std::string(kLayoutCheck) + R"lua(
redis.call('del', unpack(KEYS))
return {1}
)lua");
    return script;
}

long long status_of(const RedisReply& reply) {
    const auto& e = reply.elements();
    if (e.empty()) throw ProtocolError("segmented stock script answered an empty array");
    return e[0].integer();
}

long long parse_integer(const std::string& s) {
    long long v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) {
        throw ProtocolError("segmented stock: '" + s + "' is not an integer");
    }
    return v;
}

// Redis answers numbers stored as strings (and Lua strings) as bulk strings.
long long to_integer(const RedisReply& r) {
    return r.type() == RedisReply::Type::Integer ? r.integer() : parse_integer(r.str());
}

}  // namespace

long long StockSnapshot::remaining() const {
    long long sum = 0;
    for (long long s : segments) sum += s;
    return sum;
}

SegmentedStock::SegmentedStock(RedisClient& redis, std::string item, SegmentedStockOptions options)
    : redis_(redis), item_(std::move(item)), options_(std::move(options)) {
    if (item_.empty()) throw ConfigError("item", "empty item name");
    if (item_.find_first_of("{}") != std::string::npos) {
        throw ConfigError("item",
                          "'" + item_ + "' contains '{' or '}', which would change the key's hash tag");
    }
    if (options_.prefix.find_first_of("{}") != std::string::npos) {
        throw ConfigError("prefix", "'" + options_.prefix +
                                        "' contains '{' or '}': a hash tag in the prefix " +
                                        "would put every item in one cluster slot");
    }
    if (options_.max_segments < 1) throw ConfigError("max_segments", "must be at least 1");
    stem_ = options_.prefix + "{stock:" + item_ + "}";
}

std::string SegmentedStock::meta_key() const {
    return stem_ + ":meta";
}

std::string SegmentedStock::segment_key(int i) const {
    if (i < 0) throw ConfigError("segment", "negative segment index " + std::to_string(i));
    return stem_ + ":seg:" + std::to_string(i);
}

std::vector<std::string> SegmentedStock::layout_keys(int segments) const {
    std::vector<std::string> keys;
    keys.reserve(static_cast<std::size_t>(segments) + 1);
    keys.push_back(meta_key());
    for (int i = 0; i < segments; ++i) keys.push_back(segment_key(i));
    return keys;
}

std::vector<long long> SegmentedStock::initial_shares(long long total, int segments) {
    if (total < 1 || total > kMaxTotal) {
        throw ConfigError(
            "total", "must be between 1 and " + std::to_string(kMaxTotal) + ", got " + std::to_string(total));
    }
    if (segments < 1 || segments > total) {
        throw ConfigError("segments", "must be between 1 and the total (" + std::to_string(total) +
                                          ") so that no segment starts empty, got " +
                                          std::to_string(segments));
    }
    std::vector<long long> shares(static_cast<std::size_t>(segments), total / segments);
    for (long long i = 0; i < total % segments; ++i) ++shares[static_cast<std::size_t>(i)];
    return shares;
}

int SegmentedStock::random_segment(int segments) {
    if (segments < 1) throw ConfigError("segments", "must be at least 1");
    thread_local std::mt19937 generator{std::random_device{}()};
    return std::uniform_int_distribution<int>(0, segments - 1)(generator);
}

int SegmentedStock::start_segment(int segments) const {
    if (!options_.choose_segment) return random_segment(segments);
    int s = options_.choose_segment(segments);
    if (s < 0 || s >= segments) {
        throw ConfigError("choose_segment",
                          "returned " + std::to_string(s) + ", outside 0.." + std::to_string(segments - 1));
    }
    return s;
}

int SegmentedStock::layout(bool reload) {
    if (!reload) {
        if (int k = segments_.load(std::memory_order_relaxed); k > 0) return k;
    }
    auto stored = redis_.command({"HGET", meta_key(), "segments"}).optional_string();
    const long long k = stored ? parse_integer(*stored) : 0;
    if (k < 0 || k > std::numeric_limits<int>::max()) {
        throw ProtocolError("segmented stock: " + meta_key() + " holds a bad segment count " + *stored);
    }
    segments_.store(static_cast<int>(k), std::memory_order_relaxed);
    return static_cast<int>(k);
}

bool SegmentedStock::init(long long total, int segments) {
    if (segments > options_.max_segments) {
        throw ConfigError("segments", std::to_string(segments) + " is more than max_segments (" +
                                          std::to_string(options_.max_segments) + ")");
    }
    std::vector<long long> shares = initial_shares(total, segments);
    std::vector<std::string> args;
    args.reserve(shares.size() + 2);
    args.push_back(std::to_string(segments));
    args.push_back(std::to_string(total));
    for (long long s : shares) args.push_back(std::to_string(s));
    RedisReply reply = redis_.eval(init_script(), layout_keys(segments), args);
    if (status_of(reply) != kOk) return false;
    segments_.store(segments, std::memory_order_relaxed);
    return true;
}

RedisReply SegmentedStock::call(const RedisScript& script,
                                const std::function<std::vector<std::string>(int)>& args) {
    // Three tries: a layout that changes again between our reload and our call means someone
    // is destroying and re-creating the stock in a loop, which is a bug worth surfacing.
    for (int attempt = 0; attempt < 3; ++attempt) {
        const int k = layout(attempt > 0);
        if (k == 0) return RedisReply::array({RedisReply::integer(kNoStock)});
        std::vector<std::string> argv{std::to_string(k)};
        for (auto& a : args(k)) argv.push_back(std::move(a));
        RedisReply reply = redis_.eval(script, layout_keys(k), argv);
        if (status_of(reply) != kLayoutChanged) return reply;
    }
    throw ProtocolError("segmented stock '" + item_ + "': the layout kept changing under the call");
}

bool SegmentedStock::take(long long n) {
    if (n < 1) throw ConfigError("n", "must take at least 1 unit, got " + std::to_string(n));
    RedisReply reply = call(take_script(), [&](int k) {
        std::vector<std::string> a{std::to_string(n), std::to_string(start_segment(k))};
        // After the start segment is chosen, before the script: lets tests hold takes here so
        // that others empty the chosen segment first (the held take must then move on).
        fault::point("stock.before_take");
        return a;
    });
    switch (status_of(reply)) {
        case kOk:
            return true;
        case kShort:
            return false;
        case kNoStock:
            throw ConfigError("item", "no stock for item '" + item_ + "' (call init first)");
        default:
            throw ProtocolError("segmented stock take: unexpected status " +
                                std::to_string(status_of(reply)));
    }
}

void SegmentedStock::give_back(long long n) {
    if (n < 1 || n > kMaxTotal) {
        throw ConfigError("n", "must give back between 1 and " + std::to_string(kMaxTotal) + " units, got " +
                                   std::to_string(n));
    }
    RedisReply reply =
        call(give_back_script(), [&](int) { return std::vector<std::string>{std::to_string(n)}; });
    switch (status_of(reply)) {
        case kOk:
            return;
        case kNoStock:
            throw ConfigError("item", "no stock for item '" + item_ + "' (call init first)");
        case kOverfull: {
            const auto& e = reply.elements();
            throw ConfigError("n", "giving back " + std::to_string(n) + " would leave " +
                                       std::to_string(to_integer(e.at(1)) + n) + " units, more than the " +
                                       std::to_string(to_integer(e.at(2))) +
                                       " created by init (was this order already compensated?)");
        }
        default:
            throw ProtocolError("segmented stock give_back: unexpected status " +
                                std::to_string(status_of(reply)));
    }
}

StockSnapshot SegmentedStock::snapshot() {
    RedisReply reply = call(read_script(), [](int) { return std::vector<std::string>{}; });
    if (status_of(reply) == kNoStock) {
        throw ConfigError("item", "no stock for item '" + item_ + "' (call init first)");
    }
    const auto& e = reply.elements();
    if (e.size() < 2) throw ProtocolError("segmented stock snapshot: short reply");
    StockSnapshot s;
    s.total = to_integer(e[1]);
    for (std::size_t i = 2; i < e.size(); ++i) s.segments.push_back(to_integer(e[i]));
    return s;
}

long long SegmentedStock::remaining() {
    return snapshot().remaining();
}

bool SegmentedStock::destroy() {
    RedisReply reply = call(destroy_script(), [](int) { return std::vector<std::string>{}; });
    segments_.store(0, std::memory_order_relaxed);
    return status_of(reply) == kOk;
}

}  // namespace lockstep
