/* core/clock.h - private: the monotonic clock, and the process-wide time
 * accumulators behind bcg_env_time (core/env.c) and bcg_nn_time (core/nn.c):
 * nanoseconds summed with relaxed atomics, so calls from several threads add
 * up (thread-seconds). */
#ifndef BCG_CORE_CLOCK_H
#define BCG_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t bcg_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* *acc += now - t0 (ns) */
static inline void bcg_clock_add(uint64_t *acc, uint64_t t0) {
  __atomic_fetch_add(acc, bcg_mono_ns() - t0, __ATOMIC_RELAXED);
}

/* *acc in seconds */
static inline double bcg_clock_s(uint64_t *acc) { return 1e-9 * (double)__atomic_load_n(acc, __ATOMIC_RELAXED); }

#endif
