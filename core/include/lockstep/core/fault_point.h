// Fault points: named hooks compiled into the library at the steps where races live (after the
// DB read and before the backfill, after commit and before the delete, inside a critical
// section, ...). Tests and the demo arm them to force an interleaving deterministically:
//
//   lockstep::fault::Gate gate;                                   // blocks whoever reaches it
//   auto armed = lockstep::fault::arm("repo.after_db_read", gate.action());
//   std::thread reader([&] { repo.get(42); });                    // stops at the point
//   ASSERT_TRUE(gate.wait_arrivals(1, 5s));                       // ...now it is paused there
//   repo.update(42, ...);                                         // the racing write
//   gate.open();                                                  // let the reader go on
//
// Disarmed, a fault point costs one relaxed atomic load. Armed points are looked up by name
// under a mutex, so arming is for tests and the demo, not for production traffic.
//
// Thread safety: everything here may be used from any thread. An Arming disarms its point when
// destroyed; actions may still be running in other threads at that moment (a Gate keeps its
// own state alive, so that is safe).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace lockstep::fault {

namespace detail {
extern std::atomic<int> g_armed_points;
void fire(std::string_view name);
}  // namespace detail

// Marks a fault point. Library code calls this at every racy step.
inline void point(std::string_view name) {
    if (detail::g_armed_points.load(std::memory_order_relaxed) != 0) [[unlikely]] {
        detail::fire(name);
    }
}

// What an armed point does when reached: sleep, block, throw, or anything else.
using Action = std::function<void()>;

// Which hits of an armed point run the action; the others pass through. With `only_thread` set,
// `skip` and `times` count only that thread's hits.
struct ArmOptions {
    // Pass through this many hits before acting.
    int skip = 0;
    // Act at most this many times, then pass through (-1: every time).
    int times = -1;
    // Act only in this thread (e.g. only the reader, not the writer that shares the code path).
    std::optional<std::thread::id> only_thread;
};

// Keeps a point armed while alive. Move-only.
class Arming {
public:
    Arming() = default;
    Arming(Arming&& other) noexcept;
    Arming& operator=(Arming&& other) noexcept;
    Arming(const Arming&) = delete;
    Arming& operator=(const Arming&) = delete;
    ~Arming();

    // Hits of this point while armed, acted on or passed through.
    int hits() const;
    // Hits that ran the action.
    int acted() const;
    // Disarms now (idempotent).
    void disarm();

    struct State;

private:
    friend Arming arm(std::string name, Action action, ArmOptions options);
    explicit Arming(std::shared_ptr<State> state) : state_(std::move(state)) {}
    std::shared_ptr<State> state_;
};

// Arms `name` with `action`. Arming a point that is already armed stacks: the newest arming acts.
[[nodiscard]] Arming arm(std::string name, Action action, ArmOptions options = {});

// Canned actions.
Action pause(std::chrono::milliseconds duration);
Action fail_with(std::exception_ptr error);
template <class E>
Action fail(std::string message) {
    return fail_with(std::make_exception_ptr(E(std::move(message))));
}

// A gate that a fault point waits at until the test opens it. Copies share one gate.
// A gate never blocks forever: after `max_block` the blocked thread throws a TimeoutError naming
// the gate, so a test that forgets to open it fails instead of hanging.
class Gate {
public:
    explicit Gate(std::chrono::milliseconds max_block = std::chrono::seconds(30));

    // The action to arm a point with: count the arrival, then wait until open.
    Action action() const;
    // Test side: wait until at least `n` threads have arrived. False on timeout.
    bool wait_arrivals(int n, std::chrono::milliseconds timeout) const;
    // Lets every waiting and future arrival through.
    void open() const;
    int arrivals() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

// A rendezvous of `parties` threads: each arrival waits until all have arrived, then all go on.
// Reusable for successive rounds. Copies share one barrier. Bounded by `max_block` like Gate.
class Barrier {
public:
    explicit Barrier(int parties, std::chrono::milliseconds max_block = std::chrono::seconds(30));
    Action action() const;
    // Callable directly from test code as one of the parties.
    void arrive_and_wait() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

}  // namespace lockstep::fault
