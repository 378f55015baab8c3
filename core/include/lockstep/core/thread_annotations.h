// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
//
// They let `clang -Wthread-safety` prove at compile time that mutex-protected state is only
// touched with its mutex held: a field marked GUARDED_BY(mutex_) read without `mutex_` held, or a
// function marked REQUIRES(mutex_) called without it, is a compile error in the CI leg that builds
// with -Werror=thread-safety (scripts/sanitize, docs/ci.md). On other compilers every macro
// expands to nothing, so GCC builds are unaffected.
//
// The macro names follow leveldb's port/thread_annotations.h and Abseil's, so they read the same
// as in those code bases. Use them with lockstep::Mutex / MutexLock / CondVar (mutex.h): the
// standard library's std::mutex carries no annotations, so state guarded by a plain std::mutex
// is not checked.
//
//   class Pool {
//       Mutex mutex_;
//       std::vector<Conn> idle_ GUARDED_BY(mutex_);
//       void drop_locked() REQUIRES(mutex_);   // caller holds mutex_
//       void refill() EXCLUDES(mutex_);        // takes mutex_ itself
//   };
#pragma once

#if defined(__clang__)
#define LOCKSTEP_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define LOCKSTEP_THREAD_ANNOTATION(x)
#endif

// On a class: objects of it are capabilities (mutexes). The string names it in diagnostics.
#ifndef CAPABILITY
#define CAPABILITY(x) LOCKSTEP_THREAD_ANNOTATION(capability(x))
#endif

// On a class: an RAII object that holds a capability from construction to destruction.
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY LOCKSTEP_THREAD_ANNOTATION(scoped_lockable)
#endif

// On a data member: reads and writes require the given mutex to be held.
#ifndef GUARDED_BY
#define GUARDED_BY(x) LOCKSTEP_THREAD_ANNOTATION(guarded_by(x))
#endif

// On a pointer member: the pointed-to data (not the pointer) requires the mutex.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) LOCKSTEP_THREAD_ANNOTATION(pt_guarded_by(x))
#endif

// On a mutex member: lock order. This mutex is taken after / before the listed ones.
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) LOCKSTEP_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#endif
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) LOCKSTEP_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#endif

// On a function: the caller must hold (exclusively / shared) the listed mutexes.
#ifndef REQUIRES
#define REQUIRES(...) LOCKSTEP_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) LOCKSTEP_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#endif

// On a function: it acquires / releases the listed mutexes (`this` when the list is empty).
#ifndef ACQUIRE
#define ACQUIRE(...) LOCKSTEP_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#endif
#ifndef ACQUIRE_SHARED
#define ACQUIRE_SHARED(...) LOCKSTEP_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) LOCKSTEP_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_SHARED
#define RELEASE_SHARED(...) LOCKSTEP_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#endif

// On a function: it tries to acquire; the first argument is the return value meaning success.
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) LOCKSTEP_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#endif

// On a function: the caller must NOT hold the listed mutexes (it takes them itself; catches
// self-deadlock).
#ifndef EXCLUDES
#define EXCLUDES(...) LOCKSTEP_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#endif

// On a function: it checks at run time that the mutex is held; afterwards the analysis assumes so.
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) LOCKSTEP_THREAD_ANNOTATION(assert_capability(x))
#endif

// On a function: it returns a reference to the given mutex (an accessor).
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) LOCKSTEP_THREAD_ANNOTATION(lock_returned(x))
#endif

// On a function: opt out of the analysis. Say in a comment why the code is nevertheless safe.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS LOCKSTEP_THREAD_ANNOTATION(no_thread_safety_analysis)
#endif
