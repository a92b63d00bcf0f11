/* clip_autodiff.c - an out-of-tree estimator plugin built only from the
 * installed bcg SDK (pkg-config bcg): exact autodiff with the per-step state
 * adjoint clipped, an exploding-gradient guard for long horizons
 * (docs/design.md section 12).
 *
 * forward(t): exactly autodiff -- every environment steps in one batch with
 *   bcg_env_step; the step's tape (one state per substep) and its actions are
 *   saved in slot t.
 * backward(t): the exact VJP of step t from that tape (bcg_env_step_vjp),
 *   giving x_bar_t = (dx_{t+1}/dx_t)^T xn_bar and the action adjoint
 *   (dx_{t+1}/da_t)^T xn_bar; then, per environment,
 *     norm = l2:    if ||x_bar_t[e]||_2 > max_norm, x_bar_t[e] *= max_norm / ||x_bar_t[e]||_2
 *                   (the direction is kept; the norm runs over all 2 nv entries,
 *                   tangent q_bar then u_bar, unweighted);
 *     norm = value: every entry of x_bar_t[e] is clamped to [-max_norm, max_norm].
 *   With clip_action_grad = true the same clip is applied to this step's
 *   action adjoint (dx_{t+1}/da_t)^T xn_bar [e] before it is added (+=) to
 *   a_bar; otherwise the action adjoint is exact. max_norm = 0 turns clipping
 *   off: the plugin is then autodiff bit for bit. An adjoint that is not
 *   finite is passed on unchanged, so the learner's NaN guard still sees it.
 * stats: samples and transitions as autodiff; triggered counts the
 *   (environment, step) pairs whose adjoint was clipped in backward().
 *
 * Clipping bounds what one control step passes back to the steps before it;
 * the reward and observation adjoints the learner adds to x_bar_t afterwards
 * are not touched. The result is a biased gradient (like truncate), traded
 * for bounded variance over long horizons.
 *
 * The GPU estimator (forward_cuda, backward_cuda): where nvcc is found the
 * file is compiled once more as CUDA (nvcc -x cu -DCE_CUDA_KERNELS: only the
 * clipping kernel and its launcher), and the C part, built with
 * -DCE_WITH_CUDA, adds the device entries and BCG_CAP_CUDA. With [run]
 * device = cuda the core calls them on device arrays: the step and its VJP
 * run on the GPU (bcg_env_step_cuda, bcg_env_step_vjp_cuda) with the tapes
 * and actions kept in device memory, and clip_vec runs per environment in
 * a kernel, one thread each, on the adjoints in place. With device = cpu
 * forward and backward above run. log_values reports device_steps, the
 * device entries' calls since begin(), so a run shows which path it took. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bcg/env.h>
#include <bcg/plugin.h>
#include <bcg/sim_cuda.h>

enum { CLIP_L2 = 0, CLIP_VALUE = 1 };

/* ---- per-environment code (BCG_HD: host and device under nvcc -x cu) ------ */

/* Clip v[0..n) in place; returns 1 when it changed v. Non-finite v is left as is. */
BCG_HD int clip_vec(bcg_real *v, int n, double max_norm, int mode) {
  if (!(max_norm > 0)) return 0;
  double amax = 0;
  for (int i = 0; i < n; i++) amax = fmax(amax, fabs((double)v[i]));
  if (!isfinite(amax)) return 0;
  if (mode == CLIP_VALUE) {
    if (amax <= max_norm) return 0;
    for (int i = 0; i < n; i++) v[i] = (bcg_real)fmin(fmax((double)v[i], -max_norm), max_norm);
    return 1;
  }
  if (amax == 0) return 0;
  double ss = 0; /* scaled by amax: no overflow for huge adjoints */
  for (int i = 0; i < n; i++) {
    double r = (double)v[i] / amax;
    ss += r * r;
  }
  double norm = amax * sqrt(ss);
  if (norm <= max_norm) return 0;
  double s = max_norm / norm;
  for (int i = 0; i < n; i++) v[i] = (bcg_real)((double)v[i] * s);
  return 1;
}

#ifdef CE_CUDA_KERNELS /* ======================================= the CUDA part (nvcc -x cu) == */
#include <cuda_runtime.h>

/* one thread per environment: clip its state adjoint xb [2nv] in place and,
 * with clip_a, its step's action adjoint ab_step [nu], then add that to
 * a_bar; hit[e] = 1 when something was clipped */
__global__ void ce_clip_kernel(bcg_real *xb, bcg_real *ab_step, bcg_real *a_bar, int n, int nx2, int nu,
                               double max_norm, int mode, int clip_a, int *hit) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  int h = clip_vec(xb + (size_t)e * nx2, nx2, max_norm, mode);
  if (clip_a) {
    bcg_real *ae = ab_step + (size_t)e * nu;
    h |= clip_vec(ae, nu, max_norm, mode);
    for (int i = 0; i < nu; i++) a_bar[(size_t)e * nu + i] += ae[i];
  }
  hit[e] = h;
}

/* hidden: only bcg_plugin_entry is exported; the C part calls it */
extern "C" __attribute__((visibility("hidden"))) int ce_clip_cuda(bcg_real *xb, bcg_real *ab_step, bcg_real *a_bar,
                                                                  int n, int nx2, int nu, double max_norm, int mode,
                                                                  int clip_a, int *hit, void *stream) {
  if (n <= 0) return 0;
  const int threads = 128, blocks = (n + threads - 1) / threads;
  ce_clip_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>(xb, ab_step, a_bar, n, nx2, nu, max_norm, mode, clip_a,
                                                               hit);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

#else /* ============================================================ the C part == */

#ifdef CE_WITH_CUDA
int ce_clip_cuda(bcg_real *xb, bcg_real *ab_step, bcg_real *a_bar, int n, int nx2, int nu, double max_norm, int mode,
                 int clip_a, int *hit, void *stream);
#endif

/* ---- the plugin instance ------------------------------------------------------ */

typedef struct clip_est {
  bcg_env *env;
  int horizon;
  double max_norm;
  int mode;
  int clip_action;
  size_t tape_n;           /* reals of one step's tape */
  bcg_real *tape;          /* [horizon][tape_n] */
  bcg_real *act;           /* [horizon][nenv][nu] actions of each taped step */
  unsigned char *recorded; /* [horizon] step t has a tape since begin() */
  bcg_real *abuf;          /* [nenv][nu] this step's action adjoint (clip_action_grad) */
  bcg_estimator_stats st;
  /* the device entries (an env with device = cuda, a build with CUDA) */
  bcg_real *dtape, *dact, *dabuf; /* device: as tape, act, abuf */
  int *dhit, *hhit;               /* [nenv] clipped or not: device, host */
  uint64_t device_steps;          /* forward_cuda calls since begin() */
} clip_est;

static void ce_destroy(void *p) {
  clip_est *s = p;
  if (!s) return;
  free(s->tape);
  free(s->act);
  free(s->recorded);
  free(s->abuf);
  bcg_cuda_free(s->dtape);
  bcg_cuda_free(s->dact);
  bcg_cuda_free(s->dabuf);
  bcg_cuda_free(s->dhit);
  free(s->hhit);
  free(s);
}

static void *ce_create(const bcg_services *svc, const bcg_params *params, bcg_env *env, int horizon, char *err,
                       size_t errlen) {
  if (!env || horizon < 0) {
    if (errlen) snprintf(err, errlen, "clip_autodiff: needs an environment and a horizon >= 0");
    return NULL;
  }
  clip_est *s = calloc(1, sizeof *s);
  if (!s) goto oom;
  s->env = env;
  s->horizon = horizon;
  /* params is NULL when the host creates the plugin without a section: defaults */
  s->max_norm = params ? svc->get_real(params, "max_norm") : 0.0;
  s->mode = params && strcmp(svc->get_string(params, "norm"), "value") == 0 ? CLIP_VALUE : CLIP_L2;
  s->clip_action = params ? svc->get_bool(params, "clip_action_grad") : 0;
  s->tape_n = bcg_env_tape_size(env, env->nenv);
  size_t na = (size_t)env->nenv * (size_t)env->nu;
  s->abuf = malloc(sizeof(bcg_real) * (na ? na : 1));
  if (!s->abuf) goto oom;
  if (horizon > 0) {
    s->tape = malloc(sizeof(bcg_real) * s->tape_n * (size_t)horizon);
    s->act = malloc(sizeof(bcg_real) * (na ? na : 1) * (size_t)horizon);
    s->recorded = calloc((size_t)horizon, 1);
    if (!s->tape || !s->act || !s->recorded) goto oom;
  }
#ifdef CE_WITH_CUDA
  if (bcg_env_on_cuda(env)) { /* the device copies of tapes and actions */
    size_t n = (size_t)env->nenv, h = horizon > 0 ? (size_t)horizon : 1;
    s->dtape = bcg_cuda_malloc(sizeof(bcg_real) * s->tape_n * h);
    s->dact = bcg_cuda_malloc(sizeof(bcg_real) * (na ? na : 1) * h);
    s->dabuf = bcg_cuda_malloc(sizeof(bcg_real) * (na ? na : 1));
    s->dhit = bcg_cuda_malloc(sizeof(int) * n);
    s->hhit = malloc(sizeof(int) * n);
    if (!s->dtape || !s->dact || !s->dabuf || !s->dhit || !s->hhit) {
      if (errlen) snprintf(err, errlen, "clip_autodiff: out of GPU memory for a horizon of %d steps", horizon);
      ce_destroy(s);
      return NULL;
    }
  }
#endif
  return s;
oom:
  if (errlen) snprintf(err, errlen, "clip_autodiff: out of memory for a horizon of %d steps", horizon);
  ce_destroy(s);
  return NULL;
}

static int ce_begin(void *p) {
  clip_est *s = p;
  if (s->horizon > 0) memset(s->recorded, 0, (size_t)s->horizon);
  s->device_steps = 0;
  return 0;
}

static int ce_forward(void *p, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn) {
  clip_est *s = p;
  bcg_env *env = s->env;
  int n = env->nenv;
  int taped = t >= 0 && t < s->horizon;
  bcg_real *tape = taped ? s->tape + s->tape_n * (size_t)t : NULL;
  int rc = bcg_env_step(env, n, x, a, xn, tape);
  if (taped) {
    memcpy(s->act + (size_t)t * n * env->nu, a, sizeof(bcg_real) * (size_t)n * env->nu);
    s->recorded[t] = rc == 0;
  }
  s->st.samples += (uint64_t)n;
  s->st.transitions += (uint64_t)n;
  return rc;
}

static int ce_backward(void *p, int t, const bcg_real *xn_bar, bcg_real *x_bar, bcg_real *a_bar) {
  clip_est *s = p;
  bcg_env *env = s->env;
  if (t < 0 || t >= s->horizon || !s->recorded[t]) return -1; /* only what forward saved */
  int n = env->nenv, nu = env->nu, nv = env->nv;
  const bcg_real *tape = s->tape + s->tape_n * (size_t)t, *act = s->act + (size_t)t * n * nu;
  int clip_a = s->clip_action && s->max_norm > 0;
  int rc;
  if (!clip_a) {
    rc = bcg_env_step_vjp(env, n, tape, act, xn_bar, x_bar, a_bar); /* accumulates into a_bar */
  } else {
    memset(s->abuf, 0, sizeof(bcg_real) * (size_t)n * nu);
    rc = bcg_env_step_vjp(env, n, tape, act, xn_bar, x_bar, s->abuf);
  }
  if (rc) return rc;
  uint64_t hit = 0;
  for (int e = 0; e < n; e++) {
    int h = clip_vec(x_bar + (size_t)e * 2 * nv, 2 * nv, s->max_norm, s->mode);
    if (clip_a) {
      bcg_real *ae = s->abuf + (size_t)e * nu;
      h |= clip_vec(ae, nu, s->max_norm, s->mode);
      for (int i = 0; i < nu; i++) a_bar[(size_t)e * nu + i] += ae[i];
    }
    hit += (uint64_t)h;
  }
  s->st.triggered += hit;
  return 0;
}

static int ce_reset_envs(void *p, const int *envs, int n) {
  (void)p;
  (void)envs;
  (void)n;
  return 0; /* no per-environment state across steps */
}

static void ce_stats(const void *p, bcg_estimator_stats *out) { *out = ((const clip_est *)p)->st; }

static int ce_log_values(void *p, const char **names, double *values, int cap) {
  if (cap < 1) return 0;
  names[0] = "device_steps";
  values[0] = (double)((const clip_est *)p)->device_steps;
  return 1;
}

#ifdef CE_WITH_CUDA
/* ---- the device entries: the same steps on device arrays ---------------------- */

static int ce_forward_cuda(void *p, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn, void *stream) {
  clip_est *s = p;
  bcg_env *env = s->env;
  int n = env->nenv;
  (void)stream; /* bcg_env_step_cuda runs on the env's stream itself */
  int taped = t >= 0 && t < s->horizon;
  bcg_real *tape = taped ? s->dtape + s->tape_n * (size_t)t : NULL;
  int rc = bcg_env_step_cuda(env, n, x, a, xn, tape);
  if (taped) {
    if (!rc) rc = bcg_cuda_copy(s->dact + (size_t)t * n * env->nu, a, sizeof(bcg_real) * (size_t)n * env->nu);
    s->recorded[t] = rc == 0;
  }
  s->st.samples += (uint64_t)n;
  s->st.transitions += (uint64_t)n;
  s->device_steps++;
  return rc;
}

static int ce_backward_cuda(void *p, int t, const bcg_real *xn_bar, bcg_real *x_bar, bcg_real *a_bar, void *stream) {
  clip_est *s = p;
  bcg_env *env = s->env;
  if (t < 0 || t >= s->horizon || !s->recorded[t]) return -1;
  int n = env->nenv, nu = env->nu, nv = env->nv;
  const bcg_real *tape = s->dtape + s->tape_n * (size_t)t, *act = s->dact + (size_t)t * n * nu;
  int clip_a = s->clip_action && s->max_norm > 0;
  int rc;
  if (!clip_a) {
    rc = bcg_env_step_vjp_cuda(env, n, tape, act, xn_bar, x_bar, a_bar); /* accumulates into a_bar */
  } else {
    rc = bcg_cuda_memset(s->dabuf, 0, sizeof(bcg_real) * (size_t)n * nu) ||
         bcg_env_step_vjp_cuda(env, n, tape, act, xn_bar, x_bar, s->dabuf);
  }
  if (rc) return rc;
  if (!(s->max_norm > 0)) return 0; /* clipping off: exactly autodiff */
  if (ce_clip_cuda(x_bar, s->dabuf, a_bar, n, 2 * nv, nu, s->max_norm, s->mode, clip_a, s->dhit, stream) ||
      bcg_cuda_copy(s->hhit, s->dhit, sizeof(int) * (size_t)n)) /* synchronous: the kernel has finished */
    return -1;
  uint64_t hit = 0;
  for (int e = 0; e < n; e++) hit += (uint64_t)s->hhit[e];
  s->st.triggered += hit;
  return 0;
}
#endif

/* ---- the descriptor -------------------------------------------------------------- */

static const bcg_key_spec keys[] = {
    {"max_norm", BCG_KEY_REAL, "0", 0, 1e300, NULL,
     "clip each environment's per-step state adjoint to this size (see norm); 0 = off, exact autodiff"},
    {"norm", BCG_KEY_CHOICE, "l2", 0, 0, "l2|value",
     "l2: scale the adjoint down to L2 norm max_norm (direction kept); value: clamp each entry to +-max_norm"},
    {"clip_action_grad", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "also clip each step's action adjoint contribution the same way (false: action adjoint exact)"},
};

static const bcg_estimator_ops ops = {sizeof(bcg_estimator_ops), ce_create, ce_destroy, ce_begin, ce_forward,
                                      ce_backward, ce_reset_envs, ce_stats,
                                      NULL, NULL /* save, load: no state to checkpoint */, ce_log_values,
#ifdef CE_WITH_CUDA
                                      ce_forward_cuda, ce_backward_cuda
#else
                                      NULL, NULL
#endif
};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_ESTIMATOR, "clip_autodiff",
                      "autodiff with the per-step state adjoint clipped (exploding-gradient guard)"),
    keys, BCG_NKEYS(keys),
    BCG_CAP_DIFFERENTIABLE
#ifdef CE_WITH_CUDA
        | BCG_CAP_CUDA
#endif
    ,
    &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }

#endif /* the C part */
