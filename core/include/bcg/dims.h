/* bcg/dims.h - the compile-time capacities that size bcg's per-model and
 * per-environment structs: BCG_MAX_DOF (degrees of freedom, bcg/model.h) and
 * BCG_MAX_CONTACT (active contacts per environment, bcg/step.h).
 *
 * The defaults (64 and 24) take any robot bcg loads. A build for smaller
 * ones, `make MAX_DOF=40 MAX_CONTACT=16` (MuJoCo's humanoid has 27 dofs,
 * Unitree's 29-joint G1 35), shrinks every environment's workspace and the
 * CUDA stepper kernels' stack frames, which CUDA reserves for every thread
 * the GPU can hold: in double the adjoint's 290 KB frame needs 73 GiB on an
 * H100, the smaller build's 153 KB 39 GiB (docs/usage.md section 1).
 * Every translation unit of a build and every plugin loaded into it must
 * see the same values: bcg.pc's Cflags carry them, and the loader refuses a
 * plugin built with others (BCG_DIMS_TAG in its descriptor). */
#ifndef BCG_DIMS_H
#define BCG_DIMS_H

#include <stdint.h>

/* the defaults, which BCG_DIMS_TAG encodes as 0 */
#define BCG_DEFAULT_MAX_DOF 64
#define BCG_DEFAULT_MAX_CONTACT 24
#ifndef BCG_MAX_DOF
#define BCG_MAX_DOF BCG_DEFAULT_MAX_DOF
#endif
#ifndef BCG_MAX_CONTACT
#define BCG_MAX_CONTACT BCG_DEFAULT_MAX_CONTACT
#endif
#if BCG_MAX_DOF < 6 || BCG_MAX_DOF > 64
#error "BCG_MAX_DOF (make MAX_DOF=N) must be from 6 to 64"
#endif
#if BCG_MAX_CONTACT < 16 || BCG_MAX_CONTACT > 24
#error "BCG_MAX_CONTACT (make MAX_CONTACT=N) must be from 16 to 24"
#endif

/* qpos entries: a free or ball joint has one more than its dofs */
#define BCG_MAX_Q (BCG_MAX_DOF + 16)

/* the capacities in a plugin descriptor's real_size, above sizeof(bcg_real):
 * 0 for the defaults (so that plugins built before the option match a
 * default build), else BCG_MAX_DOF << 8 | BCG_MAX_CONTACT << 16 */
#define BCG_DIMS_TAG                                                 \
  ((BCG_MAX_DOF == BCG_DEFAULT_MAX_DOF && BCG_MAX_CONTACT == BCG_DEFAULT_MAX_CONTACT) \
       ? (uint32_t)0                                                 \
       : ((uint32_t)BCG_MAX_DOF << 8 | (uint32_t)BCG_MAX_CONTACT << 16))

#endif
