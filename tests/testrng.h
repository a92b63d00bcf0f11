/* tests/testrng.h - the suites' random numbers: xorshift64, deterministic.
 * The state test_rs starts at TEST_RNG_SEED (define it before including this
 * header to start elsewhere); a suite may reseed it by assignment. */
#ifndef BCG_TESTRNG_H
#define BCG_TESTRNG_H

#include <math.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 0x9E3779B97F4A7C15ull
#endif

static unsigned long long test_rs = TEST_RNG_SEED;

/* uniform in [0, 1) with 53 random bits */
static inline double urand(void) {
  test_rs ^= test_rs << 13;
  test_rs ^= test_rs >> 7;
  test_rs ^= test_rs << 17;
  return (double)(test_rs >> 11) / 9007199254740992.0;
}

/* standard normal (Box-Muller, one of the pair) */
static inline double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

#endif
