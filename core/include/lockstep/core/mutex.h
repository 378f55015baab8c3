// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with clang thread-safety
// annotations (thread_annotations.h), so that state marked GUARDED_BY(m) is checked by the clang
// CI leg (-Wthread-safety -Werror=thread-safety). On GCC they are plain thin wrappers.
//
//   Mutex mutex_;
//   int count_ GUARDED_BY(mutex_) = 0;
//   CondVar changed_;
//
//   MutexLock lock(mutex_);                          // held until the end of the scope
//   while (count_ == 0) {                            // a predicate is a loop, visible to the analysis
//       if (changed_.wait_until(mutex_, deadline) == std::cv_status::timeout) break;
//   }
//
// Predicate lambdas (cv.wait(lock, [&]{ return ready_; })) are deliberately not offered: the
// analysis cannot see that the lambda runs with the mutex held, so it would reject the guarded
// reads inside. An explicit loop is checked.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "lockstep/core/thread_annotations.h"

namespace lockstep {

class CAPABILITY("mutex") Mutex {
public:
    Mutex() = default;
    Mutex(const Mutex&) = delete;
    Mutex& operator=(const Mutex&) = delete;

    void lock() ACQUIRE() { mutex_.lock(); }
    void unlock() RELEASE() { mutex_.unlock(); }
    bool try_lock() TRY_ACQUIRE(true) { return mutex_.try_lock(); }
    // Tells the analysis the caller holds this mutex (for code it cannot follow). No run-time check.
    void assert_held() const ASSERT_CAPABILITY(this) {}

    // For CondVar, which must hand the std::mutex to std::condition_variable.
    std::mutex& native() noexcept { return mutex_; }

private:
    std::mutex mutex_;
};

// Holds a Mutex for its scope, like std::lock_guard. unlock() / lock() allow a section in the
// middle to run without it (e.g. network I/O); the destructor releases only if held.
class SCOPED_CAPABILITY MutexLock {
public:
    explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
    ~MutexLock() RELEASE() {
        if (held_) mutex_.unlock();
    }
    MutexLock(const MutexLock&) = delete;
    MutexLock& operator=(const MutexLock&) = delete;

    void unlock() RELEASE() {
        mutex_.unlock();
        held_ = false;
    }
    void lock() ACQUIRE() {
        mutex_.lock();
        held_ = true;
    }

private:
    Mutex& mutex_;
    bool held_ = true;
};

// A reader-writer mutex (std::shared_mutex): state marked GUARDED_BY(m) may be read with
// ReaderMutexLock (shared) and written only with WriterMutexLock (exclusive).
class CAPABILITY("shared_mutex") SharedMutex {
public:
    SharedMutex() = default;
    SharedMutex(const SharedMutex&) = delete;
    SharedMutex& operator=(const SharedMutex&) = delete;

    void lock() ACQUIRE() { mutex_.lock(); }
    void unlock() RELEASE() { mutex_.unlock(); }
    void lock_shared() ACQUIRE_SHARED() { mutex_.lock_shared(); }
    void unlock_shared() RELEASE_SHARED() { mutex_.unlock_shared(); }

private:
    std::shared_mutex mutex_;
};

// Holds a SharedMutex exclusively for its scope (std::unique_lock<std::shared_mutex>).
class SCOPED_CAPABILITY WriterMutexLock {
public:
    explicit WriterMutexLock(SharedMutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
    ~WriterMutexLock() RELEASE() { mutex_.unlock(); }
    WriterMutexLock(const WriterMutexLock&) = delete;
    WriterMutexLock& operator=(const WriterMutexLock&) = delete;

private:
    SharedMutex& mutex_;
};

// Holds a SharedMutex shared for its scope (std::shared_lock).
class SCOPED_CAPABILITY ReaderMutexLock {
public:
    explicit ReaderMutexLock(SharedMutex& mutex) ACQUIRE_SHARED(mutex) : mutex_(mutex) { mutex_.lock_shared(); }
    ~ReaderMutexLock() RELEASE() { mutex_.unlock_shared(); }
    ReaderMutexLock(const ReaderMutexLock&) = delete;
    ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

private:
    SharedMutex& mutex_;
};

// A condition variable whose waits name the Mutex the caller holds (REQUIRES), so the analysis
// knows the guarded state may be read before and after the wait.
class CondVar {
public:
    void notify_one() noexcept { cv_.notify_one(); }
    void notify_all() noexcept { cv_.notify_all(); }

    void wait(Mutex& mutex) REQUIRES(mutex) {
        Adopted held(mutex);
        cv_.wait(held.lock);
    }

    template <class Clock, class Duration>
    std::cv_status wait_until(Mutex& mutex, const std::chrono::time_point<Clock, Duration>& deadline)
        REQUIRES(mutex) {
        Adopted held(mutex);
        return cv_.wait_until(held.lock, deadline);
    }

    template <class Rep, class Period>
    std::cv_status wait_for(Mutex& mutex, const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mutex) {
        return wait_until(mutex, std::chrono::steady_clock::now() + timeout);
    }

private:
    // Lends the caller's already-held mutex to std::condition_variable for one wait, and gives
    // it back (still held) however the wait ends.
    struct Adopted {
        explicit Adopted(Mutex& m) : lock(m.native(), std::adopt_lock) {}
        ~Adopted() { lock.release(); }
        std::unique_lock<std::mutex> lock;
    };
    std::condition_variable cv_;
};

}  // namespace lockstep
