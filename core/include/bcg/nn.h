/* bcg/nn.h - the small neural-network toolkit the learners need: batched MLPs
 * with hand-written VJPs, Adam, gradient clipping, learning-rate schedules, a
 * running mean/std normaliser and a diagonal Gaussian policy head.
 *
 * Conventions
 *  - Everything is bcg_real; batched arrays are [batch][dim] row-major.
 *  - VJPs *accumulate* (+=) into parameter gradients and write (=) input
 *    adjoints, unless a comment says otherwise.
 *  - Functions that can fail return 0 or a negative BCG_NN_E* code; nothing
 *    is printed.
 *  - The per-sample math (activations, LayerNorm, Gaussian) is BCG_HD inline
 *    code at the top of this header, so CUDA kernels can call it; everything
 *    after "host API" is compiled in core/nn.c (GEMMs through OpenBLAS). */
#ifndef BCG_NN_H
#define BCG_NN_H

#include <stddef.h>
#include <stdint.h>
#include "bcg/real.h"

BCG_BEGIN_DECLS

#define BCG_NN_OK 0
#define BCG_NN_EINVAL (-1) /* bad argument or configuration */
#define BCG_NN_ENOMEM (-2) /* allocation failed */
#define BCG_NN_EBATCH (-3) /* batch larger than the workspace was sized for */
#define BCG_NN_EDEVICE (-4) /* the CUDA path failed (bcg_nn_cuda_error() says how) */

/* ======================= per-sample math (CPU and GPU) ===================== */

#ifdef BCG_REAL_FLOAT
BCG_HD bcg_real bcg_nn_exp(bcg_real x) { return expf(x); }
BCG_HD bcg_real bcg_nn_expm1(bcg_real x) { return expm1f(x); }
BCG_HD bcg_real bcg_nn_log(bcg_real x) { return logf(x); }
BCG_HD bcg_real bcg_nn_sqrt(bcg_real x) { return sqrtf(x); }
BCG_HD bcg_real bcg_nn_tanh(bcg_real x) { return tanhf(x); }
#else
BCG_HD bcg_real bcg_nn_exp(bcg_real x) { return exp(x); }
BCG_HD bcg_real bcg_nn_expm1(bcg_real x) { return expm1(x); }
BCG_HD bcg_real bcg_nn_log(bcg_real x) { return log(x); }
BCG_HD bcg_real bcg_nn_sqrt(bcg_real x) { return sqrt(x); }
BCG_HD bcg_real bcg_nn_tanh(bcg_real x) { return tanh(x); }
#endif

#define BCG_LOG_2PI 1.8378770664093453 /* log(2 pi) */
#define BCG_LN_EPS 1e-5                /* LayerNorm epsilon (PyTorch's default) */

/* Activations. ELU has alpha = 1. */
typedef enum bcg_act {
  BCG_ACT_IDENTITY = 0,
  BCG_ACT_RELU = 1,
  BCG_ACT_TANH = 2,
  BCG_ACT_ELU = 3
} bcg_act;

BCG_HD bcg_real bcg_act_f(int act, bcg_real x) {
  switch (act) {
  case BCG_ACT_RELU: return x > 0 ? x : (bcg_real)0;
  case BCG_ACT_TANH: return bcg_nn_tanh(x);
  case BCG_ACT_ELU: return x > 0 ? x : bcg_nn_expm1(x);
  default: return x;
  }
}

/* d act / dx, from the input x and the output y = act(x) (no exp recomputed). */
BCG_HD bcg_real bcg_act_df(int act, bcg_real x, bcg_real y) {
  switch (act) {
  case BCG_ACT_RELU: return x > 0 ? (bcg_real)1 : (bcg_real)0;
  case BCG_ACT_TANH: return (bcg_real)1 - y * y;
  case BCG_ACT_ELU: return x > 0 ? (bcg_real)1 : y + (bcg_real)1;
  default: return (bcg_real)1;
  }
}

/* LayerNorm over n features: xhat = (x - mean) * rstd, rstd = 1/sqrt(var + eps)
 * (biased variance, as PyTorch), y = g * xhat + b. Writes xhat (needed by the
 * VJP; may be NULL) and *rstd. y may alias x. */
BCG_HD void bcg_layernorm(int n, const bcg_real *x, const bcg_real *g, const bcg_real *b,
                          bcg_real eps, bcg_real *xhat, bcg_real *rstd, bcg_real *y) {
  bcg_real mean = 0, var = 0;
  for (int i = 0; i < n; i++) mean += x[i];
  mean /= (bcg_real)n;
  for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
  var /= (bcg_real)n;
  bcg_real r = (bcg_real)1 / bcg_nn_sqrt(var + eps);
  *rstd = r;
  for (int i = 0; i < n; i++) {
    bcg_real h = (x[i] - mean) * r;
    if (xhat) xhat[i] = h;
    y[i] = g[i] * h + b[i];
  }
}

/* VJP of bcg_layernorm: dx = rstd * (dxh - mean(dxh) - xhat * mean(dxh * xhat)),
 * dxh = dy * g; accumulates dg += dy * xhat and db += dy (either may be NULL).
 * dx may alias dy. */
BCG_HD void bcg_layernorm_vjp(int n, const bcg_real *xhat, bcg_real rstd, const bcg_real *g,
                              const bcg_real *dy, bcg_real *dx, bcg_real *dg, bcg_real *db) {
  bcg_real m1 = 0, m2 = 0;
  for (int i = 0; i < n; i++) {
    bcg_real d = dy[i] * g[i];
    m1 += d;
    m2 += d * xhat[i];
    if (dg) dg[i] += dy[i] * xhat[i];
    if (db) db[i] += dy[i];
  }
  m1 /= (bcg_real)n;
  m2 /= (bcg_real)n;
  for (int i = 0; i < n; i++) dx[i] = rstd * (dy[i] * g[i] - m1 - xhat[i] * m2);
}

/* Diagonal Gaussian over n action dims with log-std vector ls.
 * Reparameterised sample a = mu + exp(ls) * eps (eps ~ N(0, I) given). */
BCG_HD void bcg_gauss_sample(int n, const bcg_real *mu, const bcg_real *ls, const bcg_real *eps,
                             bcg_real *a) {
  for (int i = 0; i < n; i++) a[i] = mu[i] + bcg_nn_exp(ls[i]) * eps[i];
}

/* VJP of the sample: dmu += da, dls += da * exp(ls) * eps (either may be NULL). */
BCG_HD void bcg_gauss_sample_vjp(int n, const bcg_real *ls, const bcg_real *eps,
                                 const bcg_real *da, bcg_real *dmu, bcg_real *dls) {
  for (int i = 0; i < n; i++) {
    if (dmu) dmu[i] += da[i];
    if (dls) dls[i] += da[i] * bcg_nn_exp(ls[i]) * eps[i];
  }
}

/* log N(a; mu, diag(exp(ls))^2) = sum_i -0.5 ((a-mu)/s)^2 - ls - 0.5 log(2 pi). */
BCG_HD bcg_real bcg_gauss_logprob(int n, const bcg_real *mu, const bcg_real *ls,
                                  const bcg_real *a) {
  bcg_real lp = 0;
  for (int i = 0; i < n; i++) {
    bcg_real z = (a[i] - mu[i]) * bcg_nn_exp(-ls[i]);
    lp += (bcg_real)-0.5 * z * z - ls[i] - (bcg_real)(0.5 * BCG_LOG_2PI);
  }
  return lp;
}

/* VJP of the log-prob with upstream scalar g: da += -g (a-mu)/s^2,
 * dmu += g (a-mu)/s^2, dls += g (z^2 - 1); any output may be NULL. */
BCG_HD void bcg_gauss_logprob_vjp(int n, const bcg_real *mu, const bcg_real *ls,
                                  const bcg_real *a, bcg_real g, bcg_real *da, bcg_real *dmu,
                                  bcg_real *dls) {
  for (int i = 0; i < n; i++) {
    bcg_real is = bcg_nn_exp(-ls[i]);
    bcg_real z = (a[i] - mu[i]) * is;
    bcg_real t = g * z * is;
    if (da) da[i] -= t;
    if (dmu) dmu[i] += t;
    if (dls) dls[i] += g * (z * z - (bcg_real)1);
  }
}

/* Entropy sum_i ls_i + 0.5 (1 + log(2 pi)); its VJP: dls += g. */
BCG_HD bcg_real bcg_gauss_entropy(int n, const bcg_real *ls) {
  bcg_real h = 0;
  for (int i = 0; i < n; i++) h += ls[i] + (bcg_real)(0.5 * (1.0 + BCG_LOG_2PI));
  return h;
}

BCG_HD void bcg_gauss_entropy_vjp(int n, bcg_real g, bcg_real *dls) {
  for (int i = 0; i < n; i++) dls[i] += g;
}

/* KL(old || new) of two diagonal Gaussians (rsl_rl's adaptive-LR statistic):
 * sum_i ls1 - ls0 + (s0^2 + (mu0 - mu1)^2) / (2 s1^2) - 1/2. */
BCG_HD bcg_real bcg_gauss_kl(int n, const bcg_real *mu0, const bcg_real *ls0, const bcg_real *mu1,
                             const bcg_real *ls1) {
  bcg_real kl = 0;
  for (int i = 0; i < n; i++) {
    bcg_real d = mu0[i] - mu1[i];
    bcg_real s0 = bcg_nn_exp((bcg_real)2 * ls0[i]), s1 = bcg_nn_exp((bcg_real)2 * ls1[i]);
    kl += ls1[i] - ls0[i] + (s0 + d * d) / ((bcg_real)2 * s1) - (bcg_real)0.5;
  }
  return kl;
}

/* Normalisation of one sample: y = clamp((x - mean) / sqrt(var + var_eps), -clip, clip);
 * clip <= 0 disables clamping. y may alias x. */
BCG_HD void bcg_norm_apply(int n, const bcg_real *mean, const bcg_real *var, bcg_real var_eps,
                           bcg_real clip, const bcg_real *x, bcg_real *y) {
  for (int i = 0; i < n; i++) {
    bcg_real u = (x[i] - mean[i]) / bcg_nn_sqrt(var[i] + var_eps);
    if (clip > 0) u = u > clip ? clip : (u < -clip ? -clip : u);
    y[i] = u;
  }
}

/* Its VJP w.r.t. x (statistics are constants): dx = dy / std where the
 * unclamped value lies in [-clip, clip], else 0 (as torch.clamp). dx may alias dy. */
BCG_HD void bcg_norm_apply_vjp(int n, const bcg_real *mean, const bcg_real *var, bcg_real var_eps,
                               bcg_real clip, const bcg_real *x, const bcg_real *dy,
                               bcg_real *dx) {
  for (int i = 0; i < n; i++) {
    bcg_real is = (bcg_real)1 / bcg_nn_sqrt(var[i] + var_eps);
    bcg_real u = (x[i] - mean[i]) * is;
    int pass = clip <= 0 || (u <= clip && u >= -clip);
    dx[i] = pass ? dy[i] * is : (bcg_real)0;
  }
}

/* ================================ host API ================================= */

const char *bcg_nn_strerror(int err);
/* the BLAS kernels in use, one line (e.g. "OpenBLAS Haswell kernels"); the
 * first call sets OpenBLAS up as the first GEMM would (core/nn.c) */
const char *bcg_blas_describe(void);
/* how the CPU computes the activations (ELU through libmvec's vector expm1 where available) */
const char *bcg_nn_act_describe(void);
/* "identity" | "relu" | "tanh" | "elu" (case-insensitive) -> *out. */
int bcg_act_parse(const char *name, bcg_act *out);
const char *bcg_act_name(bcg_act act);

/* ---- MLP -------------------------------------------------------------------
 *
 * in -> [Linear -> (LN) -> act]  x nhidden -> Linear -> out_act -> out
 *
 * layernorm = BCG_LN_PRE_ACT puts LayerNorm between each hidden Linear and its
 * activation; BCG_LN_POST_ACT after the activation (Linear -> act -> LN), which
 * is the order of the SHAC reference code (DiffRL models/actor.py, critic.py).
 * The output layer never has LayerNorm.
 *
 * Flat parameter layout, layer by layer l = 0..nhidden:
 *     W_l [dim[l+1]][dim[l]] row-major (PyTorch nn.Linear layout: y = x W^T + b),
 *     b_l [dim[l+1]],
 *     hidden layers with LayerNorm: gain [dim[l+1]] then bias [dim[l+1]],
 * then `extra` free trailing parameters (e.g. the Gaussian log-std, so one
 * Adam / clip / checkpoint covers the policy). grad has the same layout.
 *
 * Initialisation (bcg_mlp_init_params), from Philox purpose BCG_RNG_INIT:
 *   BCG_INIT_UNIFORM    W, b ~ U(-k, k), k = gain / sqrt(fan_in) (gain 1 is
 *                       PyTorch's nn.Linear default);
 *   BCG_INIT_ORTHOGONAL W = gain * orthogonal (as torch.nn.init.orthogonal_:
 *                       QR of a Gaussian matrix, sign-fixed), b = 0.
 *   LayerNorm gain 1, bias 0; extra parameters = extra_init. */

#define BCG_MLP_MAX_HIDDEN 8

typedef enum bcg_ln_mode { BCG_LN_NONE = 0, BCG_LN_PRE_ACT = 1, BCG_LN_POST_ACT = 2 } bcg_ln_mode;
typedef enum bcg_init_kind { BCG_INIT_UNIFORM = 0, BCG_INIT_ORTHOGONAL = 1 } bcg_init_kind;

typedef struct bcg_mlp_config {
  int in_dim, out_dim;
  int nhidden;                       /* 0..BCG_MLP_MAX_HIDDEN */
  int hidden[BCG_MLP_MAX_HIDDEN];    /* hidden widths */
  bcg_act hidden_act;                /* activation of every hidden layer */
  bcg_act out_act;                   /* usually BCG_ACT_IDENTITY */
  bcg_ln_mode layernorm;
  bcg_init_kind init;
  bcg_real init_gain;                /* hidden layers; <= 0 means 1 */
  bcg_real init_gain_out;            /* output layer; <= 0 means 1 */
  int extra;                         /* trailing free parameters (>= 0) */
  bcg_real extra_init;               /* their initial value */
  int max_batch;                     /* batch capacity of the MLP-owned tape */
} bcg_mlp_config;

/* Activations of one forward pass, kept for its backward (a "tape"). A tape
 * belongs to one MLP shape; SHAC keeps one per horizon step. Backward reads
 * only the tape and the parameters, never another forward's state. */
typedef struct bcg_mlp_tape {
  bcg_real *mem;   /* bcg_mlp_tape_reals(m, max_batch) reals */
  int max_batch;
  int batch;       /* of the last forward, 0 before */
  size_t shape_id; /* guards against use with another MLP shape */
  int owned;       /* mem allocated by bcg_mlp_tape_init */
  int on_device;   /* the last forward ran on the CUDA device (bcg_nn_set_cuda) */
  void *dev;       /* private: its device tape (core/cuda/nn_cuda.cu), freed with the tape */
} bcg_mlp_tape;

typedef struct bcg_mlp {
  bcg_mlp_config cfg;
  int nlin;                         /* linear layers = nhidden + 1 */
  int dim[BCG_MLP_MAX_HIDDEN + 2];  /* dim[0] = in, dim[nlin] = out */
  size_t off_w[BCG_MLP_MAX_HIDDEN + 1], off_b[BCG_MLP_MAX_HIDDEN + 1];
  size_t off_lng[BCG_MLP_MAX_HIDDEN + 1], off_lnb[BCG_MLP_MAX_HIDDEN + 1]; /* (size_t)-1 if none */
  size_t nnet;                      /* network parameters (without extra) */
  size_t nparams;                   /* nnet + extra */
  bcg_real *params;                 /* [nparams], 64-byte aligned */
  bcg_real *grad;                   /* [nparams] */
  bcg_real *extra_params;           /* params + nnet (NULL if extra = 0) */
  bcg_real *extra_grad;             /* grad + nnet */
  bcg_mlp_tape tape;                /* MLP-owned tape for cfg.max_batch */
} bcg_mlp;

/* Build the MLP in *m (params zero, grads zero); free with bcg_mlp_destroy. */
int bcg_mlp_create(bcg_mlp *m, const bcg_mlp_config *cfg);
void bcg_mlp_destroy(bcg_mlp *m);
/* (Re)initialise all parameters; `stream` separates networks of one run. */
void bcg_mlp_init_params(bcg_mlp *m, uint64_t seed, uint32_t stream);
void bcg_mlp_zero_grad(bcg_mlp *m);

/* Tapes: reals needed for max_batch; init with caller memory (mem != NULL,
 * not freed by bcg_mlp_tape_free) or allocated (mem == NULL). */
size_t bcg_mlp_tape_reals(const bcg_mlp *m, int max_batch);
int bcg_mlp_tape_init(bcg_mlp_tape *t, const bcg_mlp *m, int max_batch, bcg_real *mem);
void bcg_mlp_tape_free(bcg_mlp_tape *t);

/* MLPs on the GPU (process-wide switch; [run] device = cuda turns it on, with
 * [run] nn_min_batch). When on, a forward of batch >= min_batch (<= 0: 64,
 * SHAC's environments at the paper's settings, measured faster on an H100
 * than on 16 CPU threads; smaller batches run on the CPU) runs
 * on the CUDA device with cuBLAS, and so does the backward of that tape: same
 * arguments, host arrays in and out, parameters copied from m->params at
 * every call (the host parameters stay authoritative), gradients accumulated
 * into the host grad array. The activations the backward needs stay in a
 * device copy of the tape; the host tape then holds only the output
 * (bcg_mlp_tape_output). Results equal the CPU path up to the GEMMs'
 * and batch sums' summation order. A CUDA failure returns BCG_NN_EDEVICE.
 * bcg_nn_set_cuda(1, ...) returns 0, or -1 with the reason in err (no device,
 * a build without CUDA); (0, ...) always succeeds. Several threads may call
 * the networks at once, each on networks (and tapes, row sources) of its
 * own: each thread's device calls run on a stream of their own, side by side
 * with the others'. */
int bcg_nn_set_cuda(int on, int min_batch, char *err, size_t errlen);
/* 1 if the switch is on; *min_batch (may be NULL) gets the threshold. */
int bcg_nn_cuda_enabled(int *min_batch);
/* The message of the last BCG_NN_EDEVICE ("" if none). */
const char *bcg_nn_cuda_error(void);
/* Where the device calls' time goes (bcg bench --train --nn-split). With the
 * profile on, every phase of a device forward or backward ends with a
 * device-wide synchronisation and its wall time is added to its bucket (the
 * calls get somewhat slower: nothing overlaps across phases); off (the
 * default) costs a flag test per phase. The sums cover every device call of
 * the process while the profile was on; without CUDA they stay zero. */
typedef struct bcg_nn_cuda_split {
  long forwards, backwards; /* device calls */
  long rows;                /* rows of the device forwards */
  double total;             /* s: wall inside the device calls, the phases and the rest (lock, allocation) */
  double params;            /* s: parameters (and a backward's gradient) copied to the device */
  double inputs;            /* s: x (forward) and dy (backward) copied to the device */
  double gemm;              /* s: cuBLAS GEMMs */
  double elementwise;       /* s: bias, activation and its derivative */
  double layernorm;         /* s: LayerNorm and its VJP */
  double sums;              /* s: batch sums of the bias and LayerNorm gradients */
  double outputs;           /* s: y, dx and the gradient copied back, and the final wait */
  long steps;               /* optimiser steps of held networks (bcg_mlp_clip_adam on the device) */
  double optimizer;         /* s: their norms, clips and Adam, with the norm's wait */
} bcg_nn_cuda_split;
void bcg_nn_cuda_profile(int on);
void bcg_nn_cuda_profile_read(bcg_nn_cuda_split *s);

/* Seconds (wall) spent in bcg_mlp_forward and bcg_mlp_backward by every
 * network of the process since it started, on either device (the GPU path's
 * copies included). Calls made inside an OpenMP parallel region count on the
 * region's master thread (thread 0) only, so networks trained side by side
 * (SHAC's critic ensemble) add about their wall time, not thread-seconds;
 * calls from distinct threads outside any parallel region all count. */
void bcg_nn_time(double *fwd_s, double *bwd_s);

/* Networks run on a thread beside other timed work (SHAC's critic update
 * beside the backward pass, [learner] critic_overlap) have a clock of their
 * own: bcg_nn_time_beside(1) on that thread sends its calls' time there
 * instead of into bcg_nn_time, and bcg_nn_time_overlapped reads it (seconds
 * of that thread, which overlap the other clocks: not a share of the wall
 * time). bcg_nn_time_beside(0) ends it. */
void bcg_nn_time_beside(int on);
double bcg_nn_time_overlapped(void);

/* y[batch][out] = mlp(x[batch][in]), recording the tape (NULL: the MLP-owned
 * one, so concurrent calls on one MLP need their own tapes). The input is
 * copied into the tape (on the CPU path; a device forward keeps it on the
 * device); y may be NULL (read bcg_mlp_tape_output). */
int bcg_mlp_forward(bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *x, int batch, bcg_real *y);
/* ---- row sources: inputs a network reads by index ----------------------------
 *
 * A learner that feeds the same rows to several networks, or rows it stored
 * earlier (PPO's minibatches are rows of the rollout's observations), names
 * its host array once as a bcg_nn_rows of nrows x width reals (the array
 * stays the caller's) and tells it which rows changed; with the CUDA switch
 * on, changed rows are sent to a device mirror of the array, and a device
 * forward of bcg_mlp_forward_rows gathers its input there instead of
 * receiving it from the host. Everywhere else (no CUDA, the switch off, a
 * batch below nn_min_batch) the forward gathers from the host array.
 * Both give exactly the results of bcg_mlp_forward on the gathered rows.
 * Contract: every row a forward reads has been put (bcg_nn_rows_put) since
 * its host contents last changed; the mirror is not compared with the host.
 * The mirror's first put page-locks the host array where it is
 * (cudaHostRegister; puts are then one DMA each), until bcg_nn_rows_free: the
 * array must stay allocated until then. */
typedef struct bcg_nn_rows {
  const bcg_real *host; /* nrows x width, row-major (the caller's) */
  long nrows;
  int width;
  void *dev; /* the device mirror (NULL until a put with the switch on) */
} bcg_nn_rows;

/* Name host[nrows][width]; nothing is sent yet. */
int bcg_nn_rows_init(bcg_nn_rows *r, const bcg_real *host, long nrows, int width);
/* Rows [row0, row0 + n) of the host array have new contents: with the CUDA
 * switch on they are copied to the mirror (allocated at the first put); off, a
 * no-op. BCG_NN_EINVAL outside the array, BCG_NN_EDEVICE on a CUDA failure. */
int bcg_nn_rows_put(bcg_nn_rows *r, long row0, long n);
void bcg_nn_rows_free(bcg_nn_rows *r); /* the mirror; the host array stays */
/* bcg_mlp_forward of x[i] = row row0 + idx[i] (idx NULL: row0 + i) of r, i <
 * batch; the network's input width must be r->width. BCG_NN_EINVAL if a row
 * lies outside the array. */
int bcg_mlp_forward_rows(bcg_mlp *m, bcg_mlp_tape *t, const bcg_nn_rows *r, long row0, const int *idx, int batch,
                         bcg_real *y);

/* A learner's long-lived host arrays that the networks read from or write
 * to (minibatch outputs, output adjoints) can be page-locked where they are:
 * with the CUDA switch on, bcg_nn_pin(p, bytes) registers [p, p + bytes)
 * (cudaHostRegister), and a device forward's input or output, or a
 * backward's dy or dx, lying inside it then moves as one DMA instead of a
 * host copy through the staging buffer and its DMA. With the switch off,
 * without CUDA, or where registration fails (a full table, pages already
 * registered) it does nothing and the copies are staged as before: the
 * results are the same either way. bcg_nn_unpin(p) (p as pinned; NULL and
 * unknown pointers are ignored) must come before the array is freed.
 * Return BCG_NN_OK, or BCG_NN_EINVAL for a NULL p or 0 bytes. */
int bcg_nn_pin(const void *p, size_t bytes);
void bcg_nn_unpin(const void *p);

/* The output [batch][out] stored in the tape by the last forward. */
const bcg_real *bcg_mlp_tape_output(const bcg_mlp *m, const bcg_mlp_tape *t);

/* Backward of the tape's forward, given dy[batch][out]: accumulates dL/dparams
 * summed over the batch into grad[nparams] (usually m->grad; NULL skips the
 * parameter gradient, e.g. a critic's dV/dobs only), writes dx[batch][in]
 * (NULL skips). The tape is unchanged (its scratch part is overwritten), so
 * backward may be called again. */
int bcg_mlp_backward(bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *dy, bcg_real *grad,
                     bcg_real *dx);

/* ---- optimisation --------------------------------------------------------- */

/* Adam as torch.optim.Adam: m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
 * p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps); weight_decay
 * (default 0) adds weight_decay * p to g first (L2, not AdamW).
 * State m, v, step is what a checkpoint saves. */
typedef struct bcg_adam {
  size_t n;
  bcg_real lr, beta1, beta2, eps, weight_decay;
  int64_t step;
  bcg_real *m, *v;
} bcg_adam;

int bcg_adam_init(bcg_adam *a, size_t n, bcg_real lr, bcg_real beta1, bcg_real beta2,
                  bcg_real eps);
void bcg_adam_free(bcg_adam *a);
void bcg_adam_reset(bcg_adam *a); /* m = v = 0, step = 0 */
void bcg_adam_step(bcg_adam *a, bcg_real *params, const bcg_real *grad);

/* Scale g so that its 2-norm is at most max_norm (exactly max_norm when it was
 * larger); returns the pre-clip norm. A non-finite norm leaves g unchanged. */
bcg_real bcg_clip_grad_norm(bcg_real *g, size_t n, bcg_real max_norm);
bcg_real bcg_vec_norm(const bcg_real *x, size_t n); /* accumulated in double, in 32 interleaved partial sums */
/* dst = alpha * dst + (1 - alpha) * src (target-critic Polyak averaging). */
void bcg_vec_polyak(bcg_real *dst, const bcg_real *src, size_t n, bcg_real alpha);

/* One Adam element (bcg_adam_step's arithmetic, shared with the device's
 * held networks): g the gradient (weight decay already added), m, v, p
 * lvalues of the element; ss = lr / (1 - b1^t), isbc2 = 1 / sqrt(1 - b2^t).
 * Both builds compile it without contraction (no FMA), so the CPU and the
 * device compute the same bits. */
#define BCG_ADAM_ELEM(g, m, v, p, b1, b2, ss, isbc2, eps)                                                  \
  do {                                                                                                     \
    bcg_real g_ = (g);                                                                                     \
    (m) = (b1) * (m) + (1 - (b1)) * g_;                                                                    \
    (v) = (b2) * (v) + (1 - (b2)) * g_ * g_;                                                               \
    (p) -= (ss) * (m) / (bcg_nn_sqrt(v) * (isbc2) + (eps));                                                \
  } while (0)

/* ---- a network's training state held on the device ------------------------
 *
 * With the host arrays authoritative (bcg_nn_set_cuda), every device call
 * copies the parameters in, a backward copies its gradient back, and Adam
 * runs on the host: per optimiser step about 1 MB each way and a host pass
 * over the parameters for a 256-256 critic, which dominates when a learner
 * takes many small steps in a row (SHAC's critic update: 3 critics x 16
 * passes x 4 minibatches of 512 rows, 192 steps per iteration).
 *
 * bcg_mlp_hold(m, opt) copies m's parameters and gradient, and opt's
 * moments (opt may be NULL: no optimiser steps), to the device, where they
 * stay authoritative until bcg_mlp_release(m, opt) copies them back. In
 * between:
 *  - every forward of m runs on the device, whatever its batch, with the
 *    device's parameters (nothing copied in); so does its backward;
 *  - a backward into m->grad adds to the device's gradient (nothing copied
 *    back); into another array, it adds to that host array as usual;
 *  - bcg_mlp_zero_grad(m) zeroes the device's gradient;
 *  - bcg_mlp_clip_adam(m, opt, ...) steps on the device;
 *  - m->params, m->grad and opt->m, opt->v on the host are stale: nothing
 *    may read or write them (Polyak averaging, checkpoints) before the
 *    release. opt's scalars (lr, step, ...) stay on the host and are read at
 *    each step;
 *  - except the extra parameters (m->extra > 0, e.g. a Gaussian log-std,
 *    which a learner uses on the host): m->extra_params is current after
 *    every step (copied back from the device), and m->extra_grad is the
 *    host's: bcg_mlp_zero_grad zeroes it, the learner adds to it by hand,
 *    and every norm or step sends it to the device first (and a clip's
 *    scaled values come back with the step).
 * The device's clip and Adam are the host's arithmetic (the same 32-lane
 * norm, BCG_ADAM_ELEM without contraction): a held network ends, bit for
 * bit, where the same device forwards and backwards with host steps take
 * it. With the CUDA switch off (or without CUDA) hold and release do
 * nothing: code written for the device runs unchanged on the CPU. A network
 * destroyed while held drops its device state. Return BCG_NN_OK,
 * BCG_NN_EINVAL (opt not of m's size, m already held, a release with
 * another opt), BCG_NN_EDEVICE. */
int bcg_mlp_hold(bcg_mlp *m, bcg_adam *opt);
int bcg_mlp_release(bcg_mlp *m, bcg_adam *opt);
int bcg_mlp_is_held(const bcg_mlp *m); /* 1 between a hold with the switch on and its release */
/* bcg_clip_grad_norm(m->grad, m->nparams, max_norm) and, if the pre-clip
 * norm (into *norm, may be NULL) is finite, bcg_adam_step(opt, m->params,
 * m->grad); on the device if m is held (opt must be the one it was held
 * with). A non-finite norm takes no step and leaves the gradient. Return
 * BCG_NN_OK, BCG_NN_EINVAL, BCG_NN_EDEVICE. */
int bcg_mlp_clip_adam(bcg_mlp *m, bcg_adam *opt, bcg_real max_norm, bcg_real *norm);
/* The two halves of a step whose clip spans several networks (PPO clips
 * actor and critic by one joint norm): bcg_mlp_grad_norm puts
 * bcg_vec_norm(m->grad, m->nparams) into *norm; bcg_mlp_scale_adam scales
 * the gradient by c when c != 1 (each element (bcg_real)((double)g * c),
 * as bcg_clip_grad_norm) and runs bcg_adam_step(opt, m->params, m->grad).
 * On the device if m is held (opt the one it was held with), with the same
 * bits. Return BCG_NN_OK, BCG_NN_EINVAL (a NULL argument, opt not of m's
 * size, c not finite, another opt than the hold's), BCG_NN_EDEVICE. */
int bcg_mlp_grad_norm(bcg_mlp *m, bcg_real *norm);
int bcg_mlp_scale_adam(bcg_mlp *m, bcg_adam *opt, double c);
/* A data-parallel step's gradient: m->grad (all nparams, the extra ones
 * included) := scale * sum(m->grad) where sum reduces the array in place
 * over the ranks (the services' dist_sum_real), then each element rounded
 * (bcg_real)((double)g * scale); scale 1 leaves the sum as it is. On a held
 * network the network part is copied from the device and back around the
 * sum. Return BCG_NN_OK, BCG_NN_EINVAL (NULL m or sum), BCG_NN_EDEVICE, or
 * BCG_NN_EDEVICE also when sum fails. */
int bcg_mlp_grad_reduce(bcg_mlp *m, int (*sum)(bcg_real *x, size_t n), double scale);

/* Learning-rate schedules. */
typedef enum bcg_lr_kind { BCG_LR_CONSTANT = 0, BCG_LR_LINEAR = 1, BCG_LR_ADAPTIVE_KL = 2 } bcg_lr_kind;

typedef struct bcg_lr_schedule {
  bcg_lr_kind kind;
  bcg_real lr0;       /* initial learning rate */
  bcg_real lr_end;    /* LINEAR: value at iteration `iters` and after */
  int64_t iters;      /* LINEAR: decay length */
  bcg_real kl_target; /* ADAPTIVE_KL: desired KL (rsl_rl 0.01) */
  bcg_real lr_min, lr_max; /* ADAPTIVE_KL clamp (rsl_rl: 1e-5, 1e-2) */
  bcg_real lr;        /* current value (ADAPTIVE_KL state; checkpointed) */
} bcg_lr_schedule;

/* lr0 + (lr_end - lr0) * min(it, iters) / iters (SHAC's linear decay). */
bcg_real bcg_lr_linear(bcg_real lr0, bcg_real lr_end, int64_t it, int64_t iters);
/* rsl_rl: kl > 2 target -> lr / 1.5; 0 < kl < target / 2 -> lr * 1.5; then
 * clamped to [lr_min, lr_max]. */
bcg_real bcg_lr_adaptive_kl(bcg_real lr, bcg_real kl, bcg_real target, bcg_real lr_min,
                            bcg_real lr_max);
bcg_lr_schedule bcg_lr_constant_schedule(bcg_real lr);
bcg_lr_schedule bcg_lr_linear_schedule(bcg_real lr0, bcg_real lr_end, int64_t iters);
bcg_lr_schedule bcg_lr_kl_schedule(bcg_real lr0, bcg_real kl_target); /* clamp 1e-5..1e-2 */
/* Learning rate for iteration `it` (CONSTANT, LINEAR; ADAPTIVE_KL: current). */
bcg_real bcg_lr_at(const bcg_lr_schedule *s, int64_t it);
/* ADAPTIVE_KL: update from the measured mean KL and return the new lr;
 * other kinds ignore kl and return s->lr. */
bcg_real bcg_lr_observe_kl(bcg_lr_schedule *s, bcg_real kl);

/* ---- running mean / std normaliser ------------------------------------------
 *
 * Statistics start at mean 0, var 1 with weight count = count_init (a small
 * epsilon, SHAC's RunningMeanStd uses 1e-4) and are merged batch by batch with
 * the parallel (Chan et al.) formulas, population variance. normalise gives
 * clamp((x - mean) / sqrt(var + var_eps), +-clip). count is double so it does
 * not saturate in float builds. Checkpoint state: mean, var, count. */
typedef struct bcg_normalizer {
  int dim;
  bcg_real *mean, *var; /* [dim] */
  double count;
  bcg_real clip;        /* default 5; <= 0 disables */
  bcg_real var_eps;     /* default 1e-5 */
} bcg_normalizer;

int bcg_normalizer_init(bcg_normalizer *nz, int dim, bcg_real clip, double count_init);
void bcg_normalizer_free(bcg_normalizer *nz);
/* Merge the statistics of x[batch][dim]. */
int bcg_normalizer_update(bcg_normalizer *nz, const bcg_real *x, int batch);
/* The same for a batch split over the ranks of a data-parallel run: sum
 * (the services' dist_sum, or NULL for one process: then the same bits as
 * bcg_normalizer_update) adds arrays of doubles over the ranks, so every
 * rank merges the statistics of all the ranks' rows and ends with the same
 * normaliser. BCG_NN_EDEVICE when sum fails. */
int bcg_normalizer_update_dist(bcg_normalizer *nz, const bcg_real *x, int batch, int (*sum)(double *x, size_t n));
/* y[batch][dim] = normalised x (y may alias x). */
void bcg_normalizer_apply(const bcg_normalizer *nz, const bcg_real *x, int batch, bcg_real *y);
/* dx = VJP of apply w.r.t. x at x (statistics constant; 0 where clamped). */
void bcg_normalizer_vjp(const bcg_normalizer *nz, const bcg_real *x, const bcg_real *dy, int batch,
                        bcg_real *dx);

/* ---- batched Gaussian policy helpers ----------------------------------------
 * mu, a, eps: [batch][n]; ls: [n] shared by the batch (state-independent
 * log-std, e.g. m->extra_params), so its gradient is summed over the batch. */
void bcg_gauss_sample_batch(int batch, int n, const bcg_real *mu, const bcg_real *ls,
                            const bcg_real *eps, bcg_real *a);
void bcg_gauss_sample_vjp_batch(int batch, int n, const bcg_real *ls, const bcg_real *eps,
                                const bcg_real *da, bcg_real *dmu, bcg_real *dls);
void bcg_gauss_logprob_batch(int batch, int n, const bcg_real *mu, const bcg_real *ls,
                             const bcg_real *a, bcg_real *lp);
/* dlp[batch] upstream; da, dmu [batch][n] and dls [n] accumulate; any may be NULL.
 * Per row the operations of bcg_gauss_logprob_vjp, with exp(-ls) evaluated
 * once per dimension instead of once per element; the rows in parallel, in
 * blocks of 1024: dls sums each block in row order (the first onto dls, the
 * others from zero) and adds the blocks in order, so the result is the same
 * for every thread count and, up to 1024 rows, bit for bit the row loop. */
void bcg_gauss_logprob_vjp_batch(int batch, int n, const bcg_real *mu, const bcg_real *ls,
                                 const bcg_real *a, const bcg_real *dlp, bcg_real *da,
                                 bcg_real *dmu, bcg_real *dls);
/* sum over the rows s of (double)bcg_gauss_kl(n, mu0 + r * n, ls0, mu1 + s * n, ls1),
 * r = rows0[s] (rows0 NULL: r = s), with the variances exp(2 ls) evaluated once
 * per dimension; in parallel blocks of 1024 rows, each summed in row order,
 * the blocks' sums added in order: the same for every thread count, and up to
 * 1024 rows bit for bit the loop over bcg_gauss_kl. */
double bcg_gauss_kl_sum(int batch, int n, const bcg_real *mu0, const int *rows0, const bcg_real *ls0,
                        const bcg_real *mu1, const bcg_real *ls1);

BCG_END_DECLS

#endif
