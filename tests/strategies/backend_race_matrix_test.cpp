// The race matrix's lock rows over every lock backend (typed tests: the same bodies, one
// instantiation per backend; the backend is chosen by URL through tests/lock_conformance/
// backends.h). race_matrix_test.cpp forces C1-C4 over Redis for every strategy; here the strategy
// is fixed to DelayedDoubleDelete:50 (C2 and C4 OPEN without a lock, and its before-commit delete
// makes C3's reader miss, so it too needs the lock) and each of Mutex and ReadWrite runs over each
// backend that has it (MySQL has no read-write lock: its ReadWrite rows are skipped).
//
// Each forced interleaving (a Gate holds the first actor at the racy step) asserts two things:
//   - the second actor BLOCKED on the key's lock (lock_waits grew): the backend excluded it while
//     the first held the lock, from another service, as another application server would;
//   - the cache is fresh after everything settled (closed, not just bounded).
// Without a lock, the same bodies leave C2 and C4 stale (race_matrix_test's None rows). With a
// lock, C2 and C4 are one interleaving: the writer cannot start its write, let alone its delayed
// delete, while the stopped reader holds the lock.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "backends.h"
#include "strategies_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

struct MemoryB { static constexpr const char* name = "memory"; };
struct RedisB { static constexpr const char* name = "redis"; };
struct RedisFairB { static constexpr const char* name = "redis-fair"; };
struct MysqlB { static constexpr const char* name = "mysql"; };
struct ZooKeeperB { static constexpr const char* name = "zookeeper"; };

struct BackendName {
    template <class B>
    static std::string GetName(int) {
        std::string n = B::name;
        std::replace(n.begin(), n.end(), '-', '_');
        return n;
    }
};

template <class B>
class BackendRaceMatrix : public ::testing::Test {
protected:
    void SetUp() override {
        if (backend_url(B::name).empty()) GTEST_SKIP() << B::name << " is not available here";
        prefix_ = unique_key_prefix();
        // One service per repository (three application servers), except memory, whose locks
        // exist only inside one service.
        for (int i = 0; i < 3; ++i) {
            if (i == 0 || backend_traits(B::name).cross_process) services_.push_back(open_backend(B::name, prefix_));
        }
    }

    LockService& service(int i) { return *services_[std::min<std::size_t>(i, services_.size() - 1)]; }

    // Fresh repositories and a fresh row for one lock mode; false when the backend lacks it.
    bool start(LockMode mode) {
        if (mode == LockMode::ReadWrite && !services_[0]->supports_read_write()) return false;
        reader_.reset();
        writer_.reset();
        writer2_.reset();
        id_ = cleanup_.add(unique_id());
        insert_product(id_, 100);
        auto make = [&](int i) {
            RepositoryOptions o;
            o.key_prefix = prefix_;
            o.strategy = strategy_named("DelayedDoubleDelete:50");
            o.lock_mode = mode;
            o.lock_service = &service(i);
            o.ttl = 60s;
            o.ttl_jitter = 0ms;
            o.guard_wait = 20s;
            o.lock_wait = 20s;
            o.marker_ttl = 20s;
            return std::make_unique<CachedRepository<Product>>(product_entity(), db(), redis(), o);
        };
        reader_ = make(0);
        writer_ = make(1);
        writer2_ = make(2);
        mode_ = mode;
        return true;
    }

    void TearDown() override {
        if (reader_) redis().del({reader_->key_of(id_)});
    }

    static std::function<std::uint64_t()> lock_waits_of(CachedRepository<Product>& r) {
        return [&r] { return r.metrics().lock_waits; };
    }

    void expect_blocked(ActorState s, const char* race) {
        EXPECT_EQ(s, ActorState::BlockedOnLock)
            << race << " over " << B::name << " x " << to_string(mode_) << ": the second actor was not held back by the lock";
    }

    void expect_fresh(const char* race) {
        for (auto* r : {reader_.get(), writer_.get(), writer2_.get()}) ASSERT_TRUE(r->settle(20s));
        const std::string key = reader_->key_of(id_);
        auto entry = cached_entry(key);
        EXPECT_EQ(freshness(key, id_), Freshness::Fresh)
            << race << " over " << B::name << " x " << to_string(mode_) << ": cache holds "
            << (entry ? "v" + std::to_string(entry->version) : std::string("nothing")) << ", database v"
            << db_version(id_).value_or(-1);
        auto next = reader_->get(id_);
        ASSERT_TRUE(next);
        EXPECT_EQ(next->price, db_price(id_));
    }

    // C2 / C4: the reader stops after its database read, holding the key's lock (shared in
    // ReadWrite); the writer must block; the reader resumes and backfills; then the writer.
    void stale_backfill(const char* race) {
        fault::Gate gate;
        Actor reader("reader", [&] {
            auto armed = arm_for_this_thread(repo_points::after_db_read, gate);
            auto p = reader_->get(id_);
            ASSERT_TRUE(p);
            EXPECT_EQ(p->price, 100) << "the reader read before the write";
        });
        ASSERT_TRUE(gate.wait_arrivals(1, 20s));
        const auto waits = writer_->metrics().lock_waits;
        Actor writer("writer", [&] { writer_->update(id_, [](Product& p) { p.price = 200; }); });
        expect_blocked(wait_done_or_blocked(writer, lock_waits_of(*writer_), waits, 20s), race);
        gate.open();
        reader.join();
        writer.join();
        EXPECT_EQ(db_price(id_), 200);
        expect_fresh(race);
    }

    std::string prefix_;
    std::vector<std::unique_ptr<LockService>> services_;
    std::int64_t id_ = 0;
    LockMode mode_ = LockMode::Mutex;
    ProductCleanup cleanup_;
    std::unique_ptr<CachedRepository<Product>> reader_, writer_, writer2_;
};

using Backends = ::testing::Types<MemoryB, RedisB, RedisFairB, MysqlB, ZooKeeperB>;
TYPED_TEST_SUITE(BackendRaceMatrix, Backends, BackendName);

constexpr LockMode kModes[] = {LockMode::Mutex, LockMode::ReadWrite};

TYPED_TEST(BackendRaceMatrix, C1_TwoWritersSetTheCacheInTheWrongOrder) {
    for (LockMode mode : kModes) {
        if (!this->start(mode)) continue;
        fault::Gate gate;
        Actor first("writer 1", [&] {
            auto armed = arm_for_this_thread(repo_points::after_commit, gate);
            this->writer_->update(this->id_, [](Product& p) { p.price = 200; });
        });
        ASSERT_TRUE(gate.wait_arrivals(1, 20s));
        const auto waits = this->writer2_->metrics().lock_waits;
        Actor second("writer 2", [&] { this->writer2_->update(this->id_, [](Product& p) { p.price = 300; }); });
        this->expect_blocked(wait_done_or_blocked(second, this->lock_waits_of(*this->writer2_), waits, 20s), "C1");
        gate.open();
        first.join();
        second.join();
        ASSERT_EQ(db_price(this->id_), 300) << "writer 2 committed last";
        this->expect_fresh("C1");
    }
}

TYPED_TEST(BackendRaceMatrix, C2_SlowReaderBackfillsAfterTheWritersDelete) {
    for (LockMode mode : kModes) {
        if (this->start(mode)) this->stale_backfill("C2");
    }
}

TYPED_TEST(BackendRaceMatrix, C3_ReaderBackfillsBetweenDeleteAndCommit) {
    for (LockMode mode : kModes) {
        if (!this->start(mode)) continue;
        ASSERT_EQ(this->reader_->get(this->id_)->price, 100);  // cached v1
        fault::Gate gate;
        Actor writer("writer", [&] {
            auto armed = arm_for_this_thread(repo_points::before_commit, gate);
            this->writer_->update(this->id_, [](Product& p) { p.price = 200; });
        });
        ASSERT_TRUE(gate.wait_arrivals(1, 20s));
        const auto waits = this->reader_->metrics().lock_waits;
        Actor reader("reader", [&] {
            auto p = this->reader_->get(this->id_);
            ASSERT_TRUE(p);
            EXPECT_EQ(p->price, 200) << "the reader waited for the commit";
        });
        // The writer deleted v1 before stopping: the reader misses and must wait for the lock.
        this->expect_blocked(wait_done_or_blocked(reader, this->lock_waits_of(*this->reader_), waits, 20s), "C3");
        gate.open();
        writer.join();
        reader.join();
        this->expect_fresh("C3");
    }
}

TYPED_TEST(BackendRaceMatrix, C4_BackfillLandsAfterTheLastDelete) {
    for (LockMode mode : kModes) {
        if (this->start(mode)) this->stale_backfill("C4");
    }
}

}  // namespace
}  // namespace lockstep::test
