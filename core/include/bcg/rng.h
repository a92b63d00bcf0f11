/* bcg/rng.h - counter-based random numbers (Philox-4x32-10), one source for CPU and GPU.
 *
 * Every random number in bcg is a pure function of
 *     (seed, purpose, env, step, index)
 * so the CPU and CUDA backends draw the same numbers in any order and a run is
 * reproducible bit for bit on one backend, whatever the thread count.
 *
 * Mapping onto Philox-4x32-10 (Salmon et al., SC'11; Random123):
 *     key     = { seed & 0xffffffff, seed >> 32 }
 *     counter = { index >> 2, step, env, purpose }
 * One Philox call yields four 32-bit words; value `index` uses word index & 3
 * (uniform) or the pair (index >> 1) & 1 of Box-Muller (normal). Uniform and
 * normal draws with the same (purpose, env, step) share words, so one purpose
 * must be used either for uniforms or for normals, not both; the registry of
 * purposes below keeps consumers apart. Plugins take purposes from
 * BCG_RNG_PURPOSE_USER upwards.
 *
 * Conversions are done in double and rounded to bcg_real once, so the double
 * and float builds draw the same values up to that rounding. */
#ifndef BCG_RNG_H
#define BCG_RNG_H

#include <stdint.h>
#include "bcg/real.h"

/* Purposes (counter word 3). Append only: changing a number changes runs. */
enum {
  BCG_RNG_INIT = 1,        /* network parameter initialisation */
  BCG_RNG_ACTION = 2,      /* policy exploration noise (Gaussian eps) */
  BCG_RNG_RESET = 3,       /* environment resets, reference-state init */
  BCG_RNG_BUNDLE = 4,      /* BCG branch perturbations */
  BCG_RNG_MINIBATCH = 5,   /* minibatch shuffling */
  BCG_RNG_DOMAIN = 6,      /* domain randomisation (friction, masses, ...) */
  BCG_RNG_PUSH = 7,        /* random pushes */
  BCG_RNG_REPLAY = 8,      /* replay-buffer sampling (ADD discriminator) */
  BCG_RNG_TEST = 99,       /* unit tests */
  BCG_RNG_PURPOSE_USER = 1000
};

typedef struct bcg_u32x4 {
  uint32_t v[4];
} bcg_u32x4;

/* Philox-4x32 with 10 rounds. Checked against Random123's known-answer
 * vectors (tests/test_nn.c). */
BCG_HD bcg_u32x4 bcg_philox(const uint32_t key[2], const uint32_t counter[4]) {
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u; /* round multipliers */
  const uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u; /* Weyl key increments */
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += W0;
      k1 += W1;
    }
    uint64_t p0 = (uint64_t)M0 * c0, p1 = (uint64_t)M1 * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  bcg_u32x4 out;
  out.v[0] = c0;
  out.v[1] = c1;
  out.v[2] = c2;
  out.v[3] = c3;
  return out;
}

/* The four words of block `block` of stream (seed, purpose, env, step). */
BCG_HD bcg_u32x4 bcg_rng_block(uint64_t seed, uint32_t purpose, uint32_t env, uint32_t step,
                               uint32_t block) {
  uint32_t key[2], ctr[4];
  key[0] = (uint32_t)seed;
  key[1] = (uint32_t)(seed >> 32);
  ctr[0] = block;
  ctr[1] = step;
  ctr[2] = env;
  ctr[3] = purpose;
  return bcg_philox(key, ctr);
}

/* 32 random bits -> uniform in (0, 1]: (x + 1) / 2^32. Never 0, so log() is safe. */
BCG_HD double bcg_rng_u01(uint32_t x) { return ((double)x + 1.0) * 2.3283064365386963e-10; }

/* Box-Muller on two words: z0 = r cos(t), z1 = r sin(t). */
BCG_HD void bcg_rng_box_muller(uint32_t a, uint32_t b, double *z0, double *z1) {
  double r = sqrt(-2.0 * log(bcg_rng_u01(a)));
  double t = 6.283185307179586 * bcg_rng_u01(b);
  *z0 = r * cos(t);
  *z1 = r * sin(t);
}

/* Uniform in (0, 1] number `index` of stream (seed, purpose, env, step). */
BCG_HD bcg_real bcg_rng_uniform(uint64_t seed, uint32_t purpose, uint32_t env, uint32_t step,
                                uint32_t index) {
  bcg_u32x4 w = bcg_rng_block(seed, purpose, env, step, index >> 2);
  return (bcg_real)bcg_rng_u01(w.v[index & 3u]);
}

/* Standard normal number `index` of stream (seed, purpose, env, step). */
BCG_HD bcg_real bcg_rng_normal(uint64_t seed, uint32_t purpose, uint32_t env, uint32_t step,
                               uint32_t index) {
  bcg_u32x4 w = bcg_rng_block(seed, purpose, env, step, index >> 2);
  uint32_t p = (index >> 1) & 1u;
  double z0, z1;
  bcg_rng_box_muller(w.v[2 * p], w.v[2 * p + 1], &z0, &z1);
  return (bcg_real)((index & 1u) ? z1 : z0);
}

/* Numbers 0..n-1 of a stream, one Philox call per four values; out[i] equals
 * bcg_rng_uniform / bcg_rng_normal with index i. */
BCG_HD void bcg_rng_fill_uniform(bcg_real *out, int n, uint64_t seed, uint32_t purpose,
                                 uint32_t env, uint32_t step) {
  for (int i = 0; i < n; i += 4) {
    bcg_u32x4 w = bcg_rng_block(seed, purpose, env, step, (uint32_t)i >> 2);
    for (int j = 0; j < 4 && i + j < n; j++) out[i + j] = (bcg_real)bcg_rng_u01(w.v[j]);
  }
}

BCG_HD void bcg_rng_fill_normal(bcg_real *out, int n, uint64_t seed, uint32_t purpose,
                                uint32_t env, uint32_t step) {
  for (int i = 0; i < n; i += 4) {
    bcg_u32x4 w = bcg_rng_block(seed, purpose, env, step, (uint32_t)i >> 2);
    double z[4];
    bcg_rng_box_muller(w.v[0], w.v[1], &z[0], &z[1]);
    bcg_rng_box_muller(w.v[2], w.v[3], &z[2], &z[3]);
    for (int j = 0; j < 4 && i + j < n; j++) out[i + j] = (bcg_real)z[j];
  }
}

#endif
