// C11 and B2 (docs/races.md, docs/strategies.md "Versions"): for every versioned strategy
// (WriteThrough, Lease) x lock mode, forced with fault points:
//
//   RemoveAndReinsertUnderAPausedReader   R loads v5 and stops before its backfill; W removes the
//                                         row and inserts it again; R backfills.
//   RawSqlResetIsRepairedByTheNextWrite   the cache holds the row; an operator resets it by hand
//                                         (lower version, other data); one repository write.
//   VersionAboveTheClockIsRepaired...     as above with a cached version no clock reaches: the
//                                         refused set must delete it (never pin it).
//   EvictedNewerEntryBeforeAPausedBackfill R loads v1 and stops; W writes v2, whose entry is
//                                         then evicted; R backfills (B2, reader side).
//   EvictedNewerEntryBeforeAPausedSet     W1 commits and stops before its set; W2 commits and
//                                         sets; the entry is evicted; W1 sets (B2, writer side).
//
// After each: what a reader gets equals the database, and one more repository write leaves
// the cache agreeing with the database. On the old code (versions restarting at 1, fills
// compared only with what happened to be cached) the WriteThrough cases served the deleted or
// evicted data until the TTL.
#include <gtest/gtest.h>

#include "strategies_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

using Param = std::tuple<const char*, LockMode>;

class VersionOrder : public ::testing::TestWithParam<Param> {
protected:
    void SetUp() override {
        id_ = cleanup_.add(unique_id());
        RepositoryOptions o;
        o.key_prefix = unique_key_prefix();
        o.strategy = strategy_named(std::get<0>(GetParam()));
        o.lock_mode = std::get<1>(GetParam());
        o.lock_service = &lock_service();
        o.ttl = 60s;
        o.ttl_jitter = 0ms;
        o.guard_wait = 20s;
        o.lock_wait = 20s;
        o.marker_ttl = 20s;
        reader_ = std::make_unique<CachedRepository<Product>>(product_entity(), db(), redis(), o);
        writer_ = std::make_unique<CachedRepository<Product>>(product_entity(), db(), redis(), o);
        writer2_ = std::make_unique<CachedRepository<Product>>(product_entity(), db(), redis(), o);
        key_ = reader_->key_of(id_);
    }
    void TearDown() override { redis().del({key_}); }

    static std::function<std::uint64_t()> lock_waits_of(CachedRepository<Product>& r) {
        return [&r] { return r.metrics().lock_waits; };
    }

    // Every background delete has run; the cache agrees with the database now, and still after
    // one more repository write.
    void expect_agrees(const char* when) {
        for (auto* r : {reader_.get(), writer_.get(), writer2_.get()}) ASSERT_TRUE(r->settle(20s));
        auto entry = cached_entry(key_);
        auto got = reader_->get(id_);
        ASSERT_TRUE(got) << when;
        EXPECT_EQ(got->price, db_price(id_))
            << when << ": the cache holds " << (entry ? "v" + std::to_string(entry->version) : std::string("nothing"))
            << ", the database v" << db_version(id_).value_or(-1) << "\n  reader: " << to_string(reader_->metrics())
            << "\n  writer: " << to_string(writer_->metrics());
    }

    void expect_next_write_repairs() {
        writer_->update(id_, [](Product& p) { p.price = 777; });
        ASSERT_TRUE(writer_->settle(20s));
        auto got = reader_->get(id_);
        ASSERT_TRUE(got);
        EXPECT_EQ(got->price, 777) << "the next repository write repairs the cache";
        auto entry = cached_entry(key_);
        if (entry && entry->kind == CacheEntry::Kind::Value) {
            EXPECT_EQ(entry->version, db_version(id_));
        }
    }

    // Stops the calling reader after its database read, runs `race`, lets the reader backfill.
    void paused_reader(const std::function<void()>& race) {
        fault::Gate gate;
        Actor reader("reader", [&] {
            auto armed = arm_for_this_thread(repo_points::after_db_read, gate);
            auto p = reader_->get(id_);
            ASSERT_TRUE(p);
        });
        ASSERT_TRUE(gate.wait_arrivals(1, 10s));
        const auto waits = writer_->metrics().lock_waits;
        Actor writer("writer", race);
        wait_done_or_blocked(writer, lock_waits_of(*writer_), waits, 10s);
        gate.open();
        reader.join();
        writer.join();
    }

    std::int64_t id_ = 0;
    std::string key_;
    ProductCleanup cleanup_;
    std::unique_ptr<CachedRepository<Product>> reader_, writer_, writer2_;
};

TEST_P(VersionOrder, C11_RemoveAndReinsertUnderAPausedReader) {
    insert_product(id_, 100, 5);
    paused_reader([&] {
        ASSERT_TRUE(writer_->remove(id_));
        writer_->insert(Product{id_, "again", 300, 1});
    });
    ASSERT_EQ(db_price(id_), 300);
    expect_agrees("after remove + insert under a paused reader");
    EXPECT_GT(db_version(id_).value_or(0), 5) << "the re-inserted row continues above the deleted one";
    expect_next_write_repairs();
}

TEST_P(VersionOrder, C11_RawSqlResetIsRepairedByTheNextWrite) {
    insert_product(id_, 100, 5);
    ASSERT_EQ(reader_->get(id_)->price, 100);  // cached at v5
    // An operator restores the row by hand: lower version, other data. Nothing tells the cache
    // (C9); the claim is only that the library's next write repairs it.
    db().execute("DELETE FROM products WHERE id = ?", {id_});
    insert_product(id_, 300, 1);
    expect_next_write_repairs();
}

TEST_P(VersionOrder, C11_VersionAboveTheClockIsRepairedByTheNextWrite) {
    // A cached version no database clock reaches (a restore from a system with other versions):
    // the next write's version is below it. Its set must not be refused and leave it pinned.
    constexpr std::int64_t kFar = 4'000'000'000'000'000'000;
    insert_product(id_, 100, kFar);
    ASSERT_EQ(reader_->get(id_)->price, 100);
    db().execute("UPDATE products SET version = 3, price = 300 WHERE id = ?", {id_});
    expect_next_write_repairs();
}

TEST_P(VersionOrder, C2_EvictedNewerEntryBeforeAPausedBackfill) {
    insert_product(id_, 100, 1);
    paused_reader([&] {
        writer_->update(id_, [](Product& p) { p.price = 200; });
        redis().del({key_});  // maxmemory evicts the newer entry (or it expires, or a retry deletes it)
    });
    expect_agrees("after a paused backfill whose newer entry was evicted");
    expect_next_write_repairs();
}

TEST_P(VersionOrder, C1_EvictedNewerEntryBeforeAPausedSet) {
    insert_product(id_, 100, 1);
    fault::Gate gate;
    Actor first("writer 1", [&] {
        auto armed = arm_for_this_thread(repo_points::after_commit, gate);
        writer_->update(id_, [](Product& p) { p.price = 200; });
    });
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    const auto waits = writer2_->metrics().lock_waits;
    Actor second("writer 2", [&] {
        writer2_->update(id_, [](Product& p) { p.price = 300; });
        ASSERT_TRUE(reader_->get(id_));  // cached at the newest version...
        redis().del({key_});             // ...and evicted
    });
    wait_done_or_blocked(second, lock_waits_of(*writer2_), waits, 10s);
    gate.open();
    first.join();
    second.join();
    ASSERT_EQ(db_price(id_), 300);
    expect_agrees("after a paused set whose newer entry was evicted");
    expect_next_write_repairs();
}

INSTANTIATE_TEST_SUITE_P(VersionedStrategies, VersionOrder,
                         ::testing::Combine(::testing::Values("WriteThrough", "Lease"),
                                            ::testing::Values(LockMode::None, LockMode::Mutex, LockMode::ReadWrite)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                             return std::string(std::get<0>(info.param)) + "_" +
                                    std::string(to_string(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace lockstep::test
