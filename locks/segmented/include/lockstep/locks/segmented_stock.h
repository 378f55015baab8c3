// SegmentedStock: the stock of one item kept in Redis as K segments, so that orders for a hot
// item do not queue behind one per-item lock (docs/races.md O3). Every change to the segments is one
// atomic Lua script, so a take can never oversell (O1) and never half-happen.
//
//   lockstep::SegmentedStock stock(redis, "sku-42");
//   stock.init(200, 10);                    // 20 units in each of 10 segments
//   if (stock.take(3)) { ship(); }          // all 3 units, or none
//   stock.give_back(3);                     // the order was cancelled
//
// Rules (docs/segmented-stock.md has the reasoning):
// - `take(n)` starts at a segment chosen at random and, if that segment holds fewer than n units,
//   moves on through the others in order (wrapping around) to the first that holds n. If no one
//   segment holds n but all segments together do, the units are taken across several segments
//   in the same script: all-or-nothing, never partial. If all segments together hold fewer than
//   n, nothing is taken and take returns false.
// - `give_back(n)` puts n units back into the emptiest segment, and refuses (ConfigError) when
//   that would leave more units than `init` created: a compensation for an order that never
//   took, or one compensated twice, must not create stock.
// - Invariants, for every interleaving of any number of threads and processes: no segment goes
//   below zero, and the units taken never exceed the total (remaining + taken = total).
//
// Keys: every key of one item shares the hash tag `{stock:<item>}`, so each multi-key script is
// legal on Redis Cluster (and the whole item lives on one node):
//
//   <prefix>{stock:<item>}:meta      hash: total, segments (the layout; written once by init)
//   <prefix>{stock:<item>}:seg:<i>   integer: units left in segment i, 0 <= i < segments
//
// Thread safety: one object may be used from any number of threads, and any number of objects
// (in any number of processes) may work on the same item.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

class RedisClient;
class RedisReply;
class RedisScript;

struct SegmentedStockOptions {
    // Namespace of every key: "<prefix>{stock:<item>}:...". Must not contain '{' or '}' (a hash
    // tag in the prefix would put every item in one cluster slot).
    std::string prefix = "ls:";
    // The most segments `init` accepts. Every take sends all segment keys to its script, so a
    // huge K costs bandwidth on each call; this bound catches a typo.
    int max_segments = 1024;
    // Picks the segment a take starts at, in [0, segments). Empty: uniformly at random, from a
    // per-thread generator. Tests set it to force which segment a take tries first. Called by
    // every taking thread, so it must be safe to call concurrently; out of range is ConfigError.
    std::function<int(int segments)> choose_segment;
};

// A consistent view of all segments, read in one script.
struct StockSnapshot {
    long long total = 0;              // units created by init
    std::vector<long long> segments;  // units left in each segment
    long long remaining() const;      // sum of segments
};

class SegmentedStock {
public:
    // The largest total `init` accepts: Lua numbers are doubles, exact up to 2^53.
    static constexpr long long kMaxTotal = 1'000'000'000'000'000;  // 10^15

    // REQUIRES: `item` is not empty and has no '{' or '}'; `redis` outlives this object.
    // Throws ConfigError naming "item" or "prefix" otherwise. Talks to Redis only when used.
    SegmentedStock(RedisClient& redis, std::string item, SegmentedStockOptions options = {});

    const std::string& item() const noexcept { return item_; }

    // Creates the stock: `total` units spread evenly over `segments` segments, the remainder one
    // by one to the first segments (e.g. 23 in 5 -> 5 5 5 4 4). Returns false, changing
    // nothing, if the item already has a stock (call destroy() first to start over).
    // REQUIRES: 1 <= total <= kMaxTotal and 1 <= segments <= min(total, max_segments); else
    // ConfigError naming "total" or "segments".
    [[nodiscard]] bool init(long long total, int segments);

    // Takes exactly n units or none (see the rules above). True when taken.
    // REQUIRES: n >= 1 (ConfigError "n"). Throws ConfigError "item" if the item has no stock.
    [[nodiscard]] bool take(long long n);

    // Returns n units taken earlier (compensation, e.g. a cancelled order).
    // REQUIRES: n >= 1, and remaining() + n <= total, checked atomically; else ConfigError "n".
    void give_back(long long n);

    // Units left in all segments together.
    long long remaining();
    // Total and every segment, read atomically.
    StockSnapshot snapshot();

    // Deletes every key of the item. Returns false if there was no stock. Do it when no orders
    // are running: a take racing a destroy either runs before it or finds no stock.
    bool destroy();

    // The keys of this item (for tests and operations). REQUIRES: 0 <= i.
    std::string meta_key() const;
    std::string segment_key(int i) const;

    // How init spreads `total` over `segments` (exposed for tests). Same REQUIRES as init.
    static std::vector<long long> initial_shares(long long total, int segments);
    // The default segment choice: uniform over [0, segments), per-thread generator.
    static int random_segment(int segments);

private:
    // Segment count of the stored layout; loaded on first use, refreshed when a script reports
    // that the layout changed (another process destroyed and re-created the stock).
    int layout(bool reload);
    std::vector<std::string> layout_keys(int segments) const;
    int start_segment(int segments) const;
    // Runs one of the scripts (they all begin with a layout check) over the item's keys; when the
    // stored layout differs from the cached one, reloads it and calls again. `args(k)` gives the
    // ARGV that follows the segment count, for k segments.
    RedisReply call(const RedisScript& script, const std::function<std::vector<std::string>(int)>& args);

    RedisClient& redis_;
    std::string item_;
    SegmentedStockOptions options_;
    std::string stem_;              // "<prefix>{stock:<item>}"
    std::atomic<int> segments_{0};  // 0: not known yet
};

}  // namespace lockstep
