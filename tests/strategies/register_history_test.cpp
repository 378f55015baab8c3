// One product's price as a register read and written by many clients, recorded and checked for
// linearizability (lockstep::testing's RegisterHistory: Wing & Gong's search as Knossos and
// Porcupine do). ReadWrite lock mode keeps the history linearizable under concurrent load; the
// Mutex mode's hit inside a write's commit-to-delete window is not, and the checker says so with
// the smallest history that shows it.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "lockstep/servers/register_history.h"
#include "strategies_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

class RegisterHistoryOfARepository : public ::testing::Test {
protected:
    std::unique_ptr<CachedRepository<Product>> repo(LockMode mode) {
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.lock_mode = mode;
        o.lock_service = &lock_service();
        o.lock_wait = 10s;
        return std::make_unique<CachedRepository<Product>>(product_entity(), db(), redis(), o);
    }
    std::string prefix_ = unique_key_prefix();
    ProductCleanup cleanup_;
};

TEST_F(RegisterHistoryOfARepository, ReadWriteModeKeepsConcurrentReadsAndWritesOfOneKeyLinearizable) {
    const auto id = cleanup_.add(unique_id());
    insert_product(id, 1);
    RegisterHistory history(1);
    constexpr int kWriters = 2, kReaders = 3, kOpsEach = 40;
    std::vector<std::thread> clients;
    for (int c = 0; c < kWriters + kReaders; ++c) {
        clients.emplace_back([&, c] {
            auto r = repo(LockMode::ReadWrite);  // each client its own repository, as separate services
            for (int i = 0; i < kOpsEach; ++i) {
                if (c < kWriters) {
                    const std::int64_t price = (c + 1) * 100000 + i;  // every written value is unique
                    const auto op = history.invoke_write(c, price);
                    r->update(id, [price](Product& p) { p.price = price; });
                    history.complete(op);
                } else {
                    const auto op = history.invoke_read(c);
                    const auto p = r->get(id);
                    history.complete(op, p ? p->price : -1);
                }
            }
        });
    }
    for (auto& t : clients) t.join();
    const RegisterCheck check = history.check();
    std::cout << "[ measure ] " << history.ops().size() << " operations, " << check.states << " states searched\n";
    ASSERT_FALSE(check.gave_up);
    EXPECT_TRUE(check.linearizable) << check.explanation;
}

// Forced: the writer stops between COMMIT and its DEL. Client X reads the row from the database
// (it sees the new price), then client Y reads through the repository. With Mutex, Y's hit takes
// no lock and returns the old price after X saw the new one: not linearizable. With ReadWrite, Y
// waits for the write and returns the new price.
TEST_F(RegisterHistoryOfARepository, AMutexHitInsideTheWriteWindowIsNotLinearizableAndReadWriteIs) {
    for (auto mode : {LockMode::Mutex, LockMode::ReadWrite}) {
        SCOPED_TRACE(std::string(to_string(mode)));
        auto reader = repo(mode);
        auto writer = repo(mode);
        const auto id = cleanup_.add(unique_id());
        insert_product(id, 1);
        ASSERT_EQ(reader->get(id)->price, 1);  // cached
        RegisterHistory history(1);
        fault::Gate gate;
        std::size_t write_op = 0;
        Actor w("writer", [&] {
            auto armed = arm_for_this_thread(repo_points::after_commit, gate);
            write_op = history.invoke_write(0, 2);
            writer->update(id, [](Product& p) { p.price = 2; });
        });
        ASSERT_TRUE(gate.wait_arrivals(1, 10s));
        const auto x = history.invoke_read(1);
        history.complete(x, db_price(id).value_or(-1));
        const auto waits = reader->metrics().lock_waits;
        std::size_t y = 0;
        Actor r("reader", [&] {
            y = history.invoke_read(2);
            history.complete(y, reader->get(id)->price);
        });
        wait_done_or_blocked(r, [&] { return reader->metrics().lock_waits; }, waits, 10s);
        gate.open();
        w.join();
        history.complete(write_op);
        r.join();
        const RegisterCheck check = history.check();
        if (mode == LockMode::Mutex) {
            EXPECT_FALSE(check.linearizable) << "the old price after the new one was seen";
            EXPECT_EQ(check.minimal.size(), 3u) << check.explanation;
            std::cout << check.explanation;
        } else {
            EXPECT_TRUE(check.linearizable) << check.explanation;
        }
        redis().del({reader->key_of(id)});
    }
}

}  // namespace
}  // namespace lockstep::test
