#include "lockstep/core/fault_point.h"

#include <map>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"

namespace lockstep::fault {

namespace detail {
std::atomic<int> g_armed_points{0};
}

struct Arming::State {
    std::string name;
    Action action;
    ArmOptions options;
    std::atomic<int> hits{0};
    std::atomic<int> acted{0};
    int eligible_hits = 0;  // hits in `options.only_thread` (all hits if unset); registry mutex
    bool armed = true;      // guarded by the registry mutex
};

namespace {

struct Registry {
    Mutex mutex;
    // Newest arming last: it is the one that acts.
    std::map<std::string, std::vector<std::shared_ptr<Arming::State>>, std::less<>> points GUARDED_BY(mutex);
};

Registry& registry() {
    static Registry* r = new Registry();  // never destroyed: points may fire during static teardown
    return *r;
}

}  // namespace

void detail::fire(std::string_view name) {
    std::shared_ptr<Arming::State> state;
    bool act = false;
    {
        auto& r = registry();
        MutexLock lock(r.mutex);
        auto it = r.points.find(name);
        if (it == r.points.end() || it->second.empty()) return;
        state = it->second.back();
        state->hits.fetch_add(1);
        const auto& o = state->options;
        // The thread filter comes first: `skip` and `times` count only the chosen thread's hits,
        // so another thread passing through the same point cannot shift which hit acts.
        if (!o.only_thread || *o.only_thread == std::this_thread::get_id()) {
            int eligible = ++state->eligible_hits;
            act = eligible > o.skip && (o.times < 0 || state->acted.load() < o.times);
        }
        if (act) state->acted.fetch_add(1);
    }
    if (act) {
        logger()->debug("fault point '{}' acting", name);
        state->action();  // outside the lock: actions block and may arm other points
    }
}

Arming arm(std::string name, Action action, ArmOptions options) {
    auto state = std::make_shared<Arming::State>();
    state->name = std::move(name);
    state->action = std::move(action);
    state->options = options;
    auto& r = registry();
    MutexLock lock(r.mutex);
    r.points[state->name].push_back(state);
    detail::g_armed_points.fetch_add(1, std::memory_order_relaxed);
    return Arming(state);
}

Arming::Arming(Arming&& other) noexcept : state_(std::move(other.state_)) {}

Arming& Arming::operator=(Arming&& other) noexcept {
    if (this != &other) {
        disarm();
        state_ = std::move(other.state_);
    }
    return *this;
}

Arming::~Arming() { disarm(); }

void Arming::disarm() {
    if (!state_) return;
    auto& r = registry();
    MutexLock lock(r.mutex);
    if (state_->armed) {
        state_->armed = false;
        auto it = r.points.find(state_->name);
        if (it != r.points.end()) {
            auto& v = it->second;
            for (auto s = v.begin(); s != v.end(); ++s) {
                if (*s == state_) {
                    v.erase(s);
                    break;
                }
            }
            if (v.empty()) r.points.erase(it);
        }
        detail::g_armed_points.fetch_sub(1, std::memory_order_relaxed);
    }
}

int Arming::hits() const { return state_ ? state_->hits.load() : 0; }
int Arming::acted() const { return state_ ? state_->acted.load() : 0; }

Action pause(std::chrono::milliseconds duration) {
    return [duration] { std::this_thread::sleep_for(duration); };
}

Action fail_with(std::exception_ptr error) {
    return [error] { std::rethrow_exception(error); };
}

struct Gate::State {
    Mutex mutex;
    CondVar cv;
    int arrivals GUARDED_BY(mutex) = 0;
    bool open GUARDED_BY(mutex) = false;
    std::chrono::milliseconds max_block;
};

Gate::Gate(std::chrono::milliseconds max_block) : state_(std::make_shared<State>()) {
    state_->max_block = max_block;
}

Action Gate::action() const {
    return [s = state_] {
        State& st = *s;
        MutexLock lock(st.mutex);
        ++st.arrivals;
        st.cv.notify_all();
        const auto deadline = std::chrono::steady_clock::now() + st.max_block;
        while (!st.open) {
            if (st.cv.wait_until(st.mutex, deadline) == std::cv_status::timeout && !st.open) {
                throw TimeoutError("fault gate was not opened within " + std::to_string(st.max_block.count()) +
                                   " ms");
            }
        }
    };
}

bool Gate::wait_arrivals(int n, std::chrono::milliseconds timeout) const {
    State& s = *state_;
    MutexLock lock(s.mutex);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (s.arrivals < n) {
        if (s.cv.wait_until(s.mutex, deadline) == std::cv_status::timeout) return s.arrivals >= n;
    }
    return true;
}

void Gate::open() const {
    State& s = *state_;
    MutexLock lock(s.mutex);
    s.open = true;
    s.cv.notify_all();
}

int Gate::arrivals() const {
    State& s = *state_;
    MutexLock lock(s.mutex);
    return s.arrivals;
}

struct Barrier::State {
    Mutex mutex;
    CondVar cv;
    int parties;
    int waiting GUARDED_BY(mutex) = 0;
    long generation GUARDED_BY(mutex) = 0;
    std::chrono::milliseconds max_block;
};

Barrier::Barrier(int parties, std::chrono::milliseconds max_block) : state_(std::make_shared<State>()) {
    if (parties < 1) throw ConfigError("Barrier parties", "must be at least 1");
    state_->parties = parties;
    state_->max_block = max_block;
}

void Barrier::arrive_and_wait() const {
    auto& s = *state_;
    MutexLock lock(s.mutex);
    long gen = s.generation;
    if (++s.waiting == s.parties) {
        s.waiting = 0;
        ++s.generation;
        s.cv.notify_all();
        return;
    }
    const auto deadline = std::chrono::steady_clock::now() + s.max_block;
    bool released = true;
    while (s.generation == gen) {
        if (s.cv.wait_until(s.mutex, deadline) == std::cv_status::timeout) {
            released = s.generation != gen;
            break;
        }
    }
    if (!released) {
        --s.waiting;
        throw TimeoutError("fault barrier: not all " + std::to_string(s.parties) + " parties arrived within " +
                           std::to_string(s.max_block.count()) + " ms");
    }
}

Action Barrier::action() const {
    return [self = *this] { self.arrive_and_wait(); };
}

}  // namespace lockstep::fault
