// The example of docs/holds.md, verbatim, compiled and run: a reader can paste it.
#include <gtest/gtest.h>

#include <lockstep/locks/lock_service.h>

#include <thread>

namespace {

// ---- docs/holds.md, first snippet (keep the two identical)
void close_unpaid_orders() {
    auto locks = lockstep::open_lock_service("memory:");  // or redis://, mysql://, zookeeper://
    lockstep::LockOptions options;
    options.max_hold = std::chrono::seconds(5);  // at most 5 s, whatever the job does
    auto mutex = locks->make_mutex("job:close-unpaid-orders", options);

    lockstep::Hold hold = mutex->try_acquire();  // empty when another owner holds it
    if (!hold) return;
    std::thread worker([hold = std::move(hold)]() mutable {
        std::stop_token stop = hold.stop_token();  // requested on loss or at max_hold
        for (int batch = 0; batch < 3 && !stop.stop_requested(); ++batch) {
            // ... one batch, its writes fenced by hold.fence_token() (db/fenced_write.h)
        }
        hold.release();  // on this thread; a loss is reported, not thrown
    });
    worker.join();
}
// ---- end of the snippet

TEST(HoldsDocTest, TheExampleOfTheHoldsPageRuns) { EXPECT_NO_THROW(close_unpaid_orders()); }

}  // namespace
