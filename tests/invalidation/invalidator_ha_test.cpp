// lockstep-invalidator --ha as real processes: two instances of one follower, one active. Writes
// flow (each to a key of its own, so a skipped invalidation leaves a key behind); the active one
// is SIGKILLed mid-stream; the standby becomes active within the lease plus a second, starts from
// the position the dead one stored, and every key written before, during and after the takeover
// is gone. SIGSTOP of the active past its lease: the standby takes over, and the woken instance
// neither moves the stored position nor stays active (its epoch is fenced out).
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "invalidation_test_support.h"
#include "lockstep/core/uri.h"
#include "lockstep/invalidation/binlog_stream.h"
#include "lockstep/invalidation/gtid_state.h"
#include "lockstep/invalidation/position_store.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kLease = 2000ms;

std::string daemon_path() {
    auto self = std::filesystem::read_symlink("/proc/self/exe");
    return (self.parent_path().parent_path() / "invalidation" / "tools" / "lockstep-invalidator").string();
}

// Reads every progress line the instance printed so far (so its pipe never fills) and returns
// the latest one, or the one before when nothing new arrived.
struct Instance {
    std::unique_ptr<Child> child;
    std::optional<nlohmann::json> last;

    const std::optional<nlohmann::json>& latest() {
        while (auto line = child->expect("{", 5ms)) last = nlohmann::json::parse(*line);
        return last;
    }
    bool active() { return latest() && last->at("active").get<bool>(); }
};

class InvalidatorHaTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(std::filesystem::exists(daemon_path())) << "build lockstep-invalidator first";
        prefix_ = fresh_prefix();
        name_ = "ha-" + prefix_.substr(0, prefix_.size() - 1);
    }
    void TearDown() override {
        for (const auto& c : configs_) std::filesystem::remove(c);
        if (!ids_.empty()) {
            for (auto id : ids_) db().execute("DELETE FROM products WHERE id = ?", {id});
        }
        PositionStore(servers().mysql_options()).erase(name_);
    }

    Instance start_instance() {
        const auto path = std::filesystem::temp_directory_path() /
                          ("lsinv_ha_" + std::to_string(configs_.size()) + "_" + name_ + ".json");
        nlohmann::json c = {{"mysql", to_url(servers().mysql_options())},
                            {"redis", to_url(servers().redis_options())},
                            {"name", name_},
                            {"server_id", fresh_server_id()},
                            {"heartbeat_ms", 100},
                            {"read_timeout_ms", 1000},
                            {"save_interval_ms", 20},
                            {"flush_on_fresh_start", false},
                            {"ha", {{"lease_ms", kLease.count()}, {"latch", "invalidator/" + name_}}},
                            {"tables", {{{"table", "products"}, {"entity", "product"}, {"prefix", prefix_}}}}};
        std::ofstream(path) << c.dump();
        configs_.push_back(path);
        Instance i;
        i.child = std::make_unique<Child>(std::vector<std::string>{daemon_path(), "--config", path.string(), "--ha",
                                                                   "--progress", "0.05"});
        return i;
    }

    std::string key(std::int64_t id) const { return prefix_ + "{product:" + std::to_string(id) + "}"; }

    // `n` rows, each to be written once.
    void make_rows(int n) {
        for (int i = 0; i < n; ++i) ids_.push_back(fresh_id());
        for (auto id : ids_) db().execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, 'h', 1, 1, 1)", {id});
    }

    // Write i: its key is cached (a stale entry to be), then its row changes. Only the follower
    // can delete that key: a write the follower skipped leaves it.
    void write(int i) {
        redis().set(key(ids_[i]), "cached-before-the-write", 300s);
        db().execute("UPDATE products SET price = price + 1, version = version + 1 WHERE id = ?", {ids_[i]});
    }

    std::vector<std::string> stale_keys() {
        std::vector<std::string> out;
        for (auto id : ids_) {
            if (redis().command({"EXISTS", key(id)}).integer() != 0) out.push_back(key(id));
        }
        return out;
    }

    bool caught_up(Instance& i, const GtidState& target) {
        const auto& l = i.latest();
        return l && l->at("active").get<bool>() && GtidState::parse(l->at("applied_gtid").get<std::string>()).covers(target);
    }

    std::string prefix_, name_;
    std::vector<std::int64_t> ids_;
    std::vector<std::filesystem::path> configs_;
};

TEST_F(InvalidatorHaTest, ASigkilledActiveIsReplacedWithinTheLeaseAndNoWrittenKeyStaysStale) {
    constexpr int kWrites = 600;
    constexpr int kKillAt = 150;
    make_rows(kWrites);
    Instance a = start_instance();
    ASSERT_TRUE(eventually([&] { return a.active(); }, 30s)) << "the first instance never became active";
    Instance b = start_instance();
    ASSERT_TRUE(eventually([&] { return b.latest().has_value(); }, 30s));
    EXPECT_FALSE(b.active()) << "two active instances";
    EXPECT_TRUE(b.last->at("ha").at("leader") == false);
    const std::int64_t a_epoch = a.last->at("ha").at("epoch").get<std::int64_t>();

    std::atomic<int> written{0};
    std::thread writer([&] {
        for (int i = 0; i < kWrites; ++i) {
            write(i);
            written = i + 1;
            std::this_thread::sleep_for(5ms);  // a steady stream across the takeover
        }
    });
    ASSERT_TRUE(eventually([&] { return written.load() >= kKillAt; }, 30s));
    // A's last report before it dies: what its counters said it had applied.
    const std::uint64_t a_rows = a.latest()->at("rows").get<std::uint64_t>();
    a.child->kill_now();
    const auto killed = Clock::now();
    const int written_at_kill = written.load();
    // Nobody writes the position until the standby is elected: this is what it must resume from.
    const std::optional<std::string> stored = PositionStore(servers().mysql_options()).load(name_);
    ASSERT_TRUE(stored.has_value()) << "the active instance never stored a position";

    ASSERT_TRUE(eventually([&] { return b.active(); }, kLease + 10s)) << "the standby never took over";
    const auto takeover = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed);
    std::fprintf(stderr, "takeover after SIGKILL of the active: %lld ms (lease %lld ms)\n",
                 static_cast<long long>(takeover.count()), static_cast<long long>(kLease.count()));
    EXPECT_LE(takeover, kLease + 1s);
    EXPECT_GT(b.last->at("ha").at("epoch").get<std::int64_t>(), a_epoch) << "the new term's epoch is not newer";

    writer.join();
    const GtidState target = GtidState::parse(BinlogStream::current_gtid(servers().mysql_options()));
    ASSERT_TRUE(eventually([&] { return caught_up(b, target); }, 30s)) << "the new active never caught up";
    const nlohmann::json m = *b.last;
    EXPECT_EQ(m.at("start_gtid").get<std::string>(), *stored) << "the new active did not resume from the stored position";
    EXPECT_EQ(stale_keys(), std::vector<std::string>{}) << "writes whose invalidation was skipped";
    // The counters agree: the new active saw every write committed after the kill (and replays
    // some before it, at-least-once), and both together saw every write.
    const auto b_rows = m.at("rows").get<std::uint64_t>();
    EXPECT_GE(b_rows, static_cast<std::uint64_t>(kWrites - written_at_kill));
    EXPECT_GE(a_rows + b_rows, static_cast<std::uint64_t>(kWrites));
    EXPECT_EQ(m.at("positions_refused").get<int>(), 0);
    EXPECT_TRUE(eventually([&] { return b.latest()->at("saved_gtid") == b.last->at("applied_gtid"); }, 20s));
    EXPECT_EQ(b.child->terminate(20s), 0);
}

TEST_F(InvalidatorHaTest, AnActivePausedPastItsLeaseIsFencedOutWhenItWakes) {
    constexpr int kWrites = 40;
    make_rows(kWrites);
    Instance a = start_instance();
    ASSERT_TRUE(eventually([&] { return a.active(); }, 30s));
    Instance b = start_instance();
    ASSERT_TRUE(eventually([&] { return b.latest().has_value(); }, 30s));
    for (int i = 0; i < kWrites / 2; ++i) write(i);
    const GtidState half = GtidState::parse(BinlogStream::current_gtid(servers().mysql_options()));
    ASSERT_TRUE(eventually([&] { return caught_up(a, half); }, 20s));

    ASSERT_EQ(::kill(a.child->pid(), SIGSTOP), 0);
    ASSERT_TRUE(eventually([&] { return b.active(); }, kLease + 10s)) << "the standby never took over";
    const std::int64_t b_epoch = b.last->at("ha").at("epoch").get<std::int64_t>();
    for (int i = kWrites / 2; i < kWrites; ++i) write(i);
    const GtidState all = GtidState::parse(BinlogStream::current_gtid(servers().mysql_options()));
    ASSERT_TRUE(eventually([&] { return caught_up(b, all); }, 20s));
    ASSERT_TRUE(eventually([&] { return b.latest()->at("saved_gtid") == b.last->at("applied_gtid"); }, 20s));
    PositionStore store(servers().mysql_options());
    const std::string saved = *store.load(name_);

    ASSERT_EQ(::kill(a.child->pid(), SIGCONT), 0);
    // The woken instance learns its term is over (its hold was lost, or the fence refused its
    // position write), and stops following.
    ASSERT_TRUE(eventually([&] { return a.latest() && !a.last->at("active").get<bool>(); }, 20s))
        << "the paused instance is still active after it woke";
    EXPECT_TRUE(b.active());
    EXPECT_EQ(store.epoch(name_), b_epoch) << "the stored position's fence is not the new term's";
    EXPECT_TRUE(GtidState::parse(*store.load(name_)).covers(GtidState::parse(saved)))
        << "the stored position moved back";
    EXPECT_EQ(stale_keys(), std::vector<std::string>{});
    EXPECT_EQ(a.child->terminate(20s), 0);
    EXPECT_EQ(b.child->terminate(20s), 0);
}

}  // namespace
}  // namespace lockstep::test
