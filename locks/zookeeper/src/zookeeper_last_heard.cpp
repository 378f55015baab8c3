#include "lockstep/locks/zookeeper_last_heard.h"

#include <zookeeper/zookeeper.h>

#include "lockstep/core/mutex.h"

namespace lockstep::locks_detail {

struct ZooKeeperLastHeard::Shared {
    std::atomic<Clock::rep> heard{0};  // last_heard's time_since_epoch; only moves forward
    std::atomic<std::uint64_t> generation{0};
    Mutex callback_mu;  // held while on_heard runs, so that stop() can wait for it
    std::function<void()> on_heard GUARDED_BY(callback_mu);

    // Moves `heard` to `at` unless it is already later (a late reply never moves it back).
    bool advance(Clock::time_point at) {
        const Clock::rep proposed = at.time_since_epoch().count();
        Clock::rep current = heard.load();
        while (current < proposed) {
            if (heard.compare_exchange_weak(current, proposed)) return true;
        }
        return false;
    }
};

namespace {

// Owned by the client from zoo_aexists until its completion runs.
struct Probe {
    std::shared_ptr<ZooKeeperLastHeard::Shared> shared;
    ZooKeeperLastHeard::Clock::time_point sent;
    std::uint64_t generation = 0;
};

}  // namespace

ZooKeeperLastHeard::ZooKeeperLastHeard(std::function<void()> on_heard) : shared_(std::make_shared<Shared>()) {
    MutexLock g(shared_->callback_mu);
    shared_->on_heard = std::move(on_heard);
}

ZooKeeperLastHeard::~ZooKeeperLastHeard() { stop(); }

void ZooKeeperLastHeard::stop() {
    MutexLock g(shared_->callback_mu);
    shared_->on_heard = nullptr;
}

void ZooKeeperLastHeard::restart(Clock::time_point before_init, std::uint64_t generation) {
    shared_->generation.store(generation);
    shared_->advance(before_init);
}

void ZooKeeperLastHeard::probe(zhandle_t* zh, const std::string& path, std::uint64_t generation) {
    auto* p = new Probe{shared_, Clock::now(), generation};
    const int rc = zoo_aexists(
        zh, path.c_str(), 0,
        [](int rc, const Stat*, const void* data) {
            auto* p = static_cast<const Probe*>(data);
            // ZOK and ZNONODE are the server's answers; a connection loss, a closing handle or an
            // expired session are the client's own, and prove nothing.
            const bool answered = rc == ZOK || rc == ZNONODE;
            if (answered && p->generation == p->shared->generation.load() && p->shared->advance(p->sent)) {
                MutexLock g(p->shared->callback_mu);
                if (p->shared->on_heard) p->shared->on_heard();
            }
            delete p;
        },
        p);
    if (rc != ZOK) delete p;  // not queued: no completion will run
}

ZooKeeperLastHeard::Clock::time_point ZooKeeperLastHeard::last_heard() const {
    return Clock::time_point(Clock::duration(shared_->heard.load()));
}

ZooKeeperLastHeard::Clock::time_point ZooKeeperLastHeard::kept_until(std::chrono::milliseconds timeout,
                                                                     Clock::duration margin) const {
    return last_heard() + timeout - margin;
}

}  // namespace lockstep::locks_detail
