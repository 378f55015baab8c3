#include "thread_faults.h"

#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace lockstep::demo {

namespace {

struct Entry {
    long id;
    std::thread::id thread;
    fault::Action action;
    int remaining;
    int acted = 0;
};

struct Point {
    fault::Arming arming;
    std::vector<std::shared_ptr<Entry>> entries;
};

struct Registry {
    std::mutex mutex;
    std::map<std::string, Point> points;
    long next_id = 0;
};

Registry& registry() {
    static Registry* r = new Registry();  // never destroyed: a point may fire during teardown
    return *r;
}

void dispatch(const std::string& point) {
    auto& r = registry();
    std::shared_ptr<Entry> hit;
    {
        std::lock_guard lock(r.mutex);
        auto it = r.points.find(point);
        if (it == r.points.end()) return;
        for (auto& e : it->second.entries) {
            if (e->thread == std::this_thread::get_id() && e->remaining != 0) {
                if (e->remaining > 0) --e->remaining;
                ++e->acted;
                hit = e;
                break;
            }
        }
    }
    if (hit) hit->action();  // outside the lock: actions block
}

}  // namespace

ThreadFault::ThreadFault(std::string point, fault::Action action, int times) : point_(std::move(point)) {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    id_ = ++r.next_id;
    auto& p = r.points[point_];
    if (p.entries.empty()) p.arming = fault::arm(point_, [name = point_] { dispatch(name); });
    p.entries.push_back(std::make_shared<Entry>(Entry{id_, std::this_thread::get_id(), std::move(action), times}));
}

ThreadFault::~ThreadFault() {
    auto& r = registry();
    fault::Arming disarm_outside_lock;
    {
        std::lock_guard lock(r.mutex);
        auto it = r.points.find(point_);
        if (it == r.points.end()) return;
        auto& v = it->second.entries;
        std::erase_if(v, [&](const std::shared_ptr<Entry>& e) { return e->id == id_; });
        if (v.empty()) {
            disarm_outside_lock = std::move(it->second.arming);
            r.points.erase(it);
        }
    }
}

int ThreadFault::acted() const {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.points.find(point_);
    if (it == r.points.end()) return 0;
    for (auto& e : it->second.entries) {
        if (e->id == id_) return e->acted;
    }
    return 0;
}

}  // namespace lockstep::demo
