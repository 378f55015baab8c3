#include "lockstep/coordination/multi_lock.h"

#include <algorithm>
#include <exception>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"

namespace lockstep {

MultiLock::MultiLock(LockService& service, std::vector<std::string> names, LockOptions options)
    : names_(std::move(names)), options_(std::move(options)) {
    if (names_.empty()) throw ConfigError("MultiLock names", "at least one name is required");
    // One global order for every MultiLock of every process: no two can wait for each other.
    std::sort(names_.begin(), names_.end());
    names_.erase(std::unique(names_.begin(), names_.end()), names_.end());
    mutexes_.reserve(names_.size());
    for (const auto& name : names_) mutexes_.push_back(service.make_mutex(name, options_));
}

MultiLock::~MultiLock() = default;

void MultiLock::lock() {
    if (options_.max_wait) {
        const auto deadline = detail::deadline_from_now(*options_.max_wait);
        if (!try_lock_until_steady(deadline)) {
            throw TimeoutError("MultiLock: not every name was free within max_wait (" +
                               std::to_string(options_.max_wait->count()) + " ms); holding none");
        }
        return;
    }
    std::size_t taken = 0;
    try {
        for (; taken < mutexes_.size(); ++taken) mutexes_[taken]->lock();
    } catch (...) {
        release_first(taken);
        throw;
    }
}

bool MultiLock::try_lock() { return try_lock_until_steady(std::chrono::steady_clock::now()); }

bool MultiLock::try_lock_until_steady(std::chrono::steady_clock::time_point deadline) {
    std::size_t taken = 0;
    try {
        // Every name gets what is left of the one deadline: a past deadline is one attempt each.
        for (; taken < mutexes_.size(); ++taken) {
            if (!mutexes_[taken]->try_lock_until_steady(deadline)) {
                release_first(taken);
                return false;
            }
        }
    } catch (...) {
        release_first(taken);
        throw;
    }
    return true;
}

MultiHold MultiLock::acquire() {
    if (options_.max_wait) {
        MultiHold all = try_acquire_until_steady(detail::deadline_from_now(*options_.max_wait));
        if (!all) {
            throw TimeoutError("MultiLock: not every name was free within max_wait (" +
                               std::to_string(options_.max_wait->count()) + " ms); holding none");
        }
        return all;
    }
    std::vector<Hold> taken;
    taken.reserve(mutexes_.size());
    try {
        for (auto& m : mutexes_) taken.push_back(m->acquire());
    } catch (...) {
        release_holds(taken);
        throw;
    }
    return MultiHold(names_, std::move(taken));
}

MultiHold MultiLock::try_acquire() { return try_acquire_until_steady(std::chrono::steady_clock::time_point::min()); }

MultiHold MultiLock::try_acquire_until_steady(std::chrono::steady_clock::time_point deadline) {
    std::vector<Hold> taken;
    taken.reserve(mutexes_.size());
    try {
        for (auto& m : mutexes_) {
            Hold part = m->try_acquire_until_steady(deadline);
            if (!part) {
                release_holds(taken);
                return MultiHold();
            }
            taken.push_back(std::move(part));
        }
    } catch (...) {
        release_holds(taken);
        throw;
    }
    return MultiHold(names_, std::move(taken));
}

void MultiLock::release_holds(std::vector<Hold>& holds) noexcept {
    for (std::size_t i = holds.size(); i-- > 0;) {
        try {
            holds[i].release();
        } catch (const std::exception& e) {
            logger()->warn("MultiLock: releasing '{}' failed: {}", names_[i], e.what());
        }
    }
    holds.clear();
}

void MultiLock::release_first(std::size_t count) noexcept {
    for (std::size_t i = count; i-- > 0;) {
        try {
            mutexes_[i]->unlock();
        } catch (const std::exception& e) {
            logger()->warn("MultiLock: releasing '{}' failed: {}", names_[i], e.what());
        }
    }
}

bool MultiLock::held_by_this_thread() const {
    return std::all_of(mutexes_.begin(), mutexes_.end(), [](const auto& m) { return m->held_by_this_thread(); });
}

void MultiLock::unlock() {
    if (!held_by_this_thread()) throw NotOwnerError("MultiLock: the calling thread does not hold every name");
    release_first(mutexes_.size());
}

void MultiLock::unlock_checked() {
    if (!held_by_this_thread()) throw NotOwnerError("MultiLock: the calling thread does not hold every name");
    std::string lost_names;
    std::exception_ptr other;
    for (std::size_t i = mutexes_.size(); i-- > 0;) {
        try {
            mutexes_[i]->unlock_checked();
        } catch (const LockLostError&) {
            lost_names += (lost_names.empty() ? "" : ", ") + names_[i];
        } catch (...) {
            if (!other) other = std::current_exception();
        }
    }
    if (!lost_names.empty()) throw LockLostError("MultiLock: lost before unlock: " + lost_names);
    if (other) std::rethrow_exception(other);
}

bool MultiLock::lost() const {
    return std::any_of(mutexes_.begin(), mutexes_.end(),
                       [](const auto& m) { return m->lost(); });
}

FenceToken MultiLock::fence_token(const std::string& name) const {
    const auto it = std::lower_bound(names_.begin(), names_.end(), name);
    if (it == names_.end() || *it != name) throw ConfigError("MultiLock name", "'" + name + "' is not one of its names");
    return mutexes_[static_cast<std::size_t>(it - names_.begin())]->fence_token();
}

}  // namespace lockstep
