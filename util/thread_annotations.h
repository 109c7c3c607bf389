// Clang thread-safety annotations (-Wthread-safety), no-ops elsewhere.
// Annotate what a lock guards (GUARDED_BY), what a function needs held
// (REQUIRES) or must not hold (EXCLUDES); util/mutex.h has a mutex the
// analysis understands. Same vocabulary as leveldb's port/thread_annotations.h
// and clang's documentation.
#pragma once

#if defined(__clang__)
#define PACSET_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PACSET_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) PACSET_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY PACSET_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) PACSET_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) PACSET_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) PACSET_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) PACSET_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) PACSET_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) PACSET_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) PACSET_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) PACSET_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) PACSET_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) PACSET_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) PACSET_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS PACSET_THREAD_ANNOTATION(no_thread_safety_analysis)
