/* bcg/sim_cuda.h - batched time stepping on a CUDA device: the device-side
 * mirror of bcg_sim (bcg/sim.h).
 *
 * Same semantics as the CPU functions of sim.h, with every state, action,
 * adjoint and tape pointer a DEVICE pointer. The kernels run one thread per
 * environment and call the same BCG_HD halves of bcg/step.h
 * (bcg_substep_pre / bcg_substep_post and their adjoints) that core/sim.c
 * calls: no physics is written twice. Between the halves the contact
 * plugin's solve_cuda / solve_vjp_cuda run on the sim's stream; without a
 * plugin (cops == NULL) the impulses are zero.
 *
 * bcg_mdata and bcg_simparams (pointer-free PODs) are copied to the device
 * once at creation; the per-environment workspaces (bcg_stepws, bcg_stepadj)
 * and the contact batch arrays live in device memory, as arrays of structs.
 *
 * Synchronisation. Work is queued on the sim's own stream (a blocking
 * stream, so legacy default-stream copies such as bcg_cuda_copy() order
 * after it). By default every call waits for its work and returns its error
 * (the CPU functions' contract: outputs are ready on return); after
 * bcg_cuda_sim_set_async(s, 1) calls return once the work is queued and
 * errors of the kernels show at the next bcg_cuda_sim_sync().
 *
 * Return values: 0 ok; -1 n outside [0, cap] or a CUDA error (the message is
 * kept, see bcg_cuda_sim_error()); else the contact plugin's return code.
 *
 * All of this links in every build: without CUDA (make CUDA=0, or nvcc not
 * found) bcg_cuda_available() reports that and creation fails. */
#ifndef BCG_SIM_CUDA_H
#define BCG_SIM_CUDA_H

#include <stddef.h>
#include "bcg/model.h"
#include "bcg/plugin.h"
#include "bcg/sim.h"
#include "bcg/step.h"

BCG_BEGIN_DECLS

typedef struct bcg_cuda_sim bcg_cuda_sim;

/* 1 if a CUDA device can be used; else 0 with the reason in err. */
int bcg_cuda_available(char *err, size_t errlen);
/* One line: "NVIDIA H200, 132 SMs, 139.8 GiB, cc 9.0, driver 13.0, runtime 13.0"
 * (or the reason there is none). */
void bcg_cuda_device_info(char *buf, size_t len);

/* cops may be NULL (no contact). A plugin without CUDA entry points (no
 * BCG_CAP_CUDA, or NULL solve_cuda / solve_vjp_cuda) is refused with
 * "contact plugin 'x' has no CUDA entry points; use device = cpu". */
bcg_cuda_sim *bcg_cuda_sim_create(const bcg_model *model, const bcg_simparams *sp, int cap,
                                  const bcg_contact_ops *cops, void *cself, char *err, size_t errlen);
void bcg_cuda_sim_free(bcg_cuda_sim *s);

/* One substep for n <= cap environments: d_q [n][nq], d_u [n][nv], d_a [n][nu]
 * in; d_qo, d_uo out (may not alias the inputs). */
int bcg_cuda_sim_substep(bcg_cuda_sim *s, int n, const bcg_real *d_q, const bcg_real *d_u, const bcg_real *d_a,
                         bcg_real *d_qo, bcg_real *d_uo);
/* Its adjoint, recomputed from the same inputs: given (d_qob [n][nv],
 * d_uob [n][nv]), writes d_qb, d_ub and accumulates d_ab. */
int bcg_cuda_sim_substep_vjp(bcg_cuda_sim *s, int n, const bcg_real *d_q, const bcg_real *d_u,
                             const bcg_real *d_a, const bcg_real *d_qob, const bcg_real *d_uob, bcg_real *d_qb,
                             bcg_real *d_ub, bcg_real *d_ab);
/* One control step (sp.substeps substeps holding a). d_tape, if not NULL,
 * receives each substep's input state: [substeps][n][nq + nv]. Updates the
 * per-environment diagnostics. */
int bcg_cuda_sim_control_step(bcg_cuda_sim *s, int n, const bcg_real *d_q, const bcg_real *d_u,
                              const bcg_real *d_a, bcg_real *d_qo, bcg_real *d_uo, bcg_real *d_tape);
/* Adjoint of a control step from its tape: d_xob [n][2nv] (q_bar, u_bar) of
 * the output, writes d_xb [n][2nv] and accumulates d_ab [n][nu]. */
int bcg_cuda_sim_control_step_vjp(bcg_cuda_sim *s, int n, const bcg_real *d_tape, const bcg_real *d_a,
                                  const bcg_real *d_xob, bcg_real *d_xb, bcg_real *d_ab);

/* Diagnostics of the last control step (per environment, computed per
 * environment without atomics), copied to HOST arrays (any may be NULL):
 * largest normal force, deepest penetration, non-finite / non-SPD status
 * (a BCG_STEP_* code, 0 if fine). */
int bcg_cuda_sim_diagnostics(bcg_cuda_sim *s, int n, bcg_real *maxfn, bcg_real *maxpen, int *bad);
/* Active contacts of each environment in the last substep (host array). */
int bcg_cuda_sim_nactive(bcg_cuda_sim *s, int n, int *nact);

/* Domain randomisation (bcg_domain, bcg/sim.h): copies the per-environment
 * models and friction to the device (slot e of a batch is environment e
 * unless bcg_cuda_sim_set_envmap maps it; n <= dom->n) and keeps dom for the pushes, whose clock is copied from the
 * host at each control step; the same draws as the CPU stepper. After
 * bcg_env_randomize re-drew some environments, bcg_cuda_sim_update_domain
 * sends those (the device copies are not refreshed otherwise).
 * dom NULL: off. Returns 0 or -1 (CUDA error). */
int bcg_cuda_sim_set_domain(bcg_cuda_sim *s, const bcg_domain *dom);
/* After bcg_env_randomize re-drew the k environments envs[] of the domain
 * already set: re-sends only their models and friction (the rest of the
 * device copy stays), and the per-slot copies of a mapped batch are
 * gathered again at the next bcg_cuda_sim_set_envmap. Returns 0, or -1 (no
 * domain set, an entry outside [0, dom->n), or a CUDA error). */
int bcg_cuda_sim_update_domain(bcg_cuda_sim *s, const int *envs, int k);
/* The batch slot -> environment map of the following calls (NULL: the
 * identity), as bcg_sim_set_envmap: slot i of a batch of n <= cap steps
 * environment envmap[i]'s randomised model and friction, and its pushes are
 * drawn from (seed, envmap[i], clock[envmap[i]]). The n entries are copied
 * to the device now (and the per-slot models gathered there), so call it
 * again whenever the host array's contents change, and with the same map for
 * a forward call and its VJP. A batch may then have up to n slots (more than
 * the domain's environments, e.g. branches). bcg_cuda_sim_set_domain resets
 * it to the identity; without a domain it has no effect. Returns 0, or -1
 * (an entry outside [0, dom->n), n outside [0, cap], or a CUDA error). */
int bcg_cuda_sim_set_envmap(bcg_cuda_sim *s, const int *envmap, int n);

int bcg_cuda_sim_set_async(bcg_cuda_sim *s, int async);
int bcg_cuda_sim_sync(bcg_cuda_sim *s);
void *bcg_cuda_sim_stream(bcg_cuda_sim *s); /* the cudaStream_t */
const char *bcg_cuda_sim_error(const bcg_cuda_sim *s); /* last CUDA error, "" if none */
int bcg_cuda_sim_block(const bcg_cuda_sim *s); /* threads per block (env BCG_CUDA_BLOCK, default 32) */
/* Threads per block for one-thread-per-environment kernels, read now: the
 * environment variable BCG_CUDA_BLOCK (32 .. 1024), else 32. A sim takes it
 * at creation; the contact plugins' kernels at each launch. */
int bcg_cuda_block_default(void);

/* Per-stage timing (for benchmarks). While on, every stage is bracketed by
 * events on the stream and each call waits for its work to add the elapsed
 * times up; off by default. Stages: */
enum {
  BCG_CUDA_STAGE_PRE = 0,         /* bcg_substep_pre kernel (forward and recompute) */
  BCG_CUDA_STAGE_CONTACT = 1,     /* contact solve_cuda (or zeroing the impulses) */
  BCG_CUDA_STAGE_POST = 2,        /* bcg_substep_post kernel (VJP: post + post_vjp kernel) */
  BCG_CUDA_STAGE_CONTACT_VJP = 3, /* zeroing the contact adjoints + solve_vjp_cuda */
  BCG_CUDA_STAGE_PRE_VJP = 4,     /* bcg_substep_pre_vjp kernel */
  BCG_CUDA_NSTAGE = 5
};
int bcg_cuda_sim_set_timing(bcg_cuda_sim *s, int on); /* also resets the totals */
/* Milliseconds spent in each stage since timing was switched on. */
void bcg_cuda_sim_stage_ms(const bcg_cuda_sim *s, double ms[BCG_CUDA_NSTAGE]);

/* Small helpers so C callers need no CUDA headers. */
void *bcg_cuda_malloc(size_t bytes);                     /* NULL on failure */
void bcg_cuda_free(void *p);
/* Page-locked host memory (copies from and to it run at the DMA engine's speed); NULL on failure. */
void *bcg_cuda_host_alloc(size_t bytes);
void bcg_cuda_host_free(void *p);
int bcg_cuda_copy(void *dst, const void *src, size_t bytes); /* any direction (cudaMemcpyDefault), synchronous */
/* rows of width bytes from src (rows spitch bytes apart) to dst (dpitch apart), any direction, synchronous */
int bcg_cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows);
int bcg_cuda_memset(void *p, int byte, size_t bytes);
/* Device events on the sim's stream: elapsed milliseconds between two records
 * (waits for the second). */
typedef struct bcg_cuda_event bcg_cuda_event;
bcg_cuda_event *bcg_cuda_event_new(void);
void bcg_cuda_event_free(bcg_cuda_event *e);
int bcg_cuda_event_record(bcg_cuda_event *e, bcg_cuda_sim *s);
double bcg_cuda_event_ms(bcg_cuda_event *a, bcg_cuda_event *b);

BCG_END_DECLS

#endif
