/* tasks/add.h - the discriminator of the Adversarial Differential Discriminator
 * (ADD) reward (docs/design.md section 8.3), independent of what the
 * differences Delta are (tasks/imitation.c builds them). Header-only, CPU only.
 *
 *   input   xn = Delta / (mabs + ADD_EPS), mabs the running mean of |Delta|
 *           (per element, merged in add_update() from the samples pushed since
 *           the last update; 1 before any sample), constant between updates
 *   D       MLP in -> hidden (ELU) -> 1 logit z (bcg_mlp, no LayerNorm)
 *   reward  r = scale * -log(max(1 - sigmoid(z), 1e-4)) = scale * min(softplus(z), log 1e4)
 *           dr/dz = scale * sigmoid(z) below the clamp, 0 above it
 *   loss    0.5 softplus(-D(0)) + 0.5 mean_i softplus(D(xn_i))   (BCE: the only
 *           positive is Delta = 0, negatives xn_i from the replay)
 *           + grad_penalty |dD/dxn (0)|^2      (exact double backward, add_gp_grad)
 *           + logit_reg |W_out|^2              (output-layer weights, as AMP)
 *           + Adam's L2 weight_decay on every parameter
 *   replay  ring buffer of raw Delta [cap][dim]; add_push() appends (serial).
 *
 * The parameters, Adam state, mabs and the replay change only in
 * add_update(); add_logits() / add_input_vjp() read them. */
#ifndef BCG_TASKS_ADD_H
#define BCG_TASKS_ADD_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/nn.h"
#include "bcg/rng.h"
#include "bcg/runlog.h"

#define ADD_EPS 1e-4
#define ADD_RMAX 9.210340371976184 /* -log(1e-4) */

typedef struct add_disc {
  int dim, batch, steps, max_batch;
  int64_t cap;
  bcg_mlp D;
  bcg_adam opt;
  double gp, logit_reg;
  double *mabs, mcount;                 /* running mean of |Delta| */
  bcg_real *rep;                        /* [cap][dim] raw Delta */
  int64_t rep_n, head, pending;         /* filled, next write, pushed since the last update */
  bcg_real *xin, *dy, *dx;              /* [max_batch][dim], [max_batch], [max_batch][dim] */
  uint64_t seed;
  /* diagnostics of the last add_update step */
  double last_loss, last_pos_logit, last_neg_logit, last_penalty;
} add_disc;

static inline void add_free(add_disc *d) {
  bcg_mlp_destroy(&d->D);
  bcg_adam_free(&d->opt);
  free(d->mabs), free(d->rep), free(d->xin), free(d->dy), free(d->dx);
  memset(d, 0, sizeof *d);
}

/* nmax: largest batch add_logits is called with (the number of environments) */
static inline int add_init(add_disc *d, int dim, const long *hidden, int nh, double lr, double gp, double logit_reg,
                           double wd, int64_t cap, int batch, int steps, int nmax, uint64_t seed) {
  memset(d, 0, sizeof *d);
  if (dim < 1 || nh < 0 || nh > BCG_MLP_MAX_HIDDEN || cap < 1 || batch < 1) return -1;
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = dim;
  c.out_dim = 1;
  c.nhidden = nh;
  for (int i = 0; i < nh; i++) c.hidden[i] = (int)hidden[i];
  c.hidden_act = BCG_ACT_ELU;
  c.out_act = BCG_ACT_IDENTITY;
  c.layernorm = BCG_LN_NONE;
  c.init = BCG_INIT_UNIFORM;
  c.init_gain = 1;
  c.init_gain_out = 0.1;
  d->max_batch = nmax > batch + 1 ? nmax : batch + 1;
  c.max_batch = d->max_batch;
  d->dim = dim;
  d->cap = cap;
  d->batch = batch;
  d->steps = steps;
  d->gp = gp;
  d->logit_reg = logit_reg;
  d->seed = seed;
  if (bcg_mlp_create(&d->D, &c)) return -1;
  bcg_mlp_init_params(&d->D, seed, BCG_RNG_PURPOSE_USER + 17);
  if (bcg_adam_init(&d->opt, d->D.nparams, (bcg_real)lr, 0.9, 0.999, 1e-8)) return add_free(d), -1;
  d->opt.weight_decay = (bcg_real)wd;
  d->mabs = malloc(sizeof(double) * dim);
  d->rep = malloc(sizeof(bcg_real) * (size_t)cap * dim);
  d->xin = malloc(sizeof(bcg_real) * (size_t)d->max_batch * dim);
  d->dx = malloc(sizeof(bcg_real) * (size_t)d->max_batch * dim);
  d->dy = malloc(sizeof(bcg_real) * (size_t)d->max_batch);
  if (!d->mabs || !d->rep || !d->xin || !d->dx || !d->dy) return add_free(d), -1;
  for (int i = 0; i < dim; i++) d->mabs[i] = 1;
  return 0;
}

static inline void add_push(add_disc *d, const bcg_real *delta, int n) {
  for (int i = 0; i < n; i++) {
    memcpy(d->rep + (size_t)d->head * d->dim, delta + (size_t)i * d->dim, sizeof(bcg_real) * d->dim);
    d->head = (d->head + 1) % d->cap;
    if (d->rep_n < d->cap) d->rep_n++;
    d->pending++;
  }
}

static inline void add_normalise(const add_disc *d, const bcg_real *delta, bcg_real *xn) {
  for (int i = 0; i < d->dim; i++) xn[i] = (bcg_real)(delta[i] / (d->mabs[i] + ADD_EPS));
}

/* logits z[n] of raw differences delta [n][dim] (tape kept for add_input_vjp) */
static inline int add_logits(add_disc *d, const bcg_real *delta, int n, bcg_real *z) {
  if (n > d->max_batch) return -1;
  for (int e = 0; e < n; e++) add_normalise(d, delta + (size_t)e * d->dim, d->xin + (size_t)e * d->dim);
  return bcg_mlp_forward(&d->D, NULL, d->xin, n, z);
}

/* after add_logits(n): ddelta [n][dim] = dz/dDelta * dz[n] (the normalisation is a constant) */
static inline int add_input_vjp(add_disc *d, int n, const bcg_real *dz, bcg_real *ddelta) {
  if (bcg_mlp_backward(&d->D, NULL, dz, NULL, ddelta)) return -1;
  for (int e = 0; e < n; e++)
    for (int i = 0; i < d->dim; i++) ddelta[(size_t)e * d->dim + i] /= (bcg_real)(d->mabs[i] + ADD_EPS);
  return 0;
}

static inline double add_softplus(double z) { return (z > 0 ? z : 0) + log1p(exp(-fabs(z))); }
static inline double add_sigmoid(double z) {
  return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z));
}
/* reward of a logit (without scale) and its derivative */
static inline double add_reward(double z) {
  double r = add_softplus(z);
  return r < ADD_RMAX ? r : ADD_RMAX;
}
static inline double add_reward_dz(double z) { return add_softplus(z) < ADD_RMAX ? add_sigmoid(z) : 0; }

static inline double add_act_d2(double a, double y) {
  (void)y;
  return a > 0 ? 0 : exp(a); /* ELU'' */
}

/* P = |dz/dx (x)|^2 at one input x [dim]; grad += w * dP/dparams (the double
 * backward of the MLP, written out for identity output, ELU hidden, no LN). */
static inline double add_gp_grad(const bcg_mlp *m, const bcg_real *x, double w, bcg_real *grad) {
  int L = m->nlin, tot = 0;
  for (int l = 0; l <= L; l++) tot += m->dim[l];
  /* per layer l: h_l [dim l], a_l / delta_l / abar_l [dim l+1], g_l / gbar_l [dim l] */
  double *buf = calloc((size_t)7 * tot, sizeof(double));
  if (!buf) return NAN;
  double *h[BCG_MLP_MAX_HIDDEN + 2] = {0}, *a[BCG_MLP_MAX_HIDDEN + 2] = {0}, *dl[BCG_MLP_MAX_HIDDEN + 2] = {0},
      *ab[BCG_MLP_MAX_HIDDEN + 2] = {0}, *g[BCG_MLP_MAX_HIDDEN + 2] = {0}, *gb[BCG_MLP_MAX_HIDDEN + 2] = {0},
      *hb[BCG_MLP_MAX_HIDDEN + 2] = {0};
  double *p = buf;
  for (int l = 0; l <= L; l++) {
    h[l] = p, p += m->dim[l];
    g[l] = p, p += m->dim[l];
    gb[l] = p, p += m->dim[l];
    hb[l] = p, p += m->dim[l];
    a[l] = p, p += m->dim[l];  /* a_{l-1}: dim[l] */
    dl[l] = p, p += m->dim[l]; /* delta_{l-1} */
    ab[l] = p, p += m->dim[l]; /* abar_{l-1} */
  }
  /* a[l+1] holds a_l (dim[l+1]) etc. */
#define W_(l, i, j) ((double)m->params[m->off_w[l] + (size_t)(i) * m->dim[l] + (j)])
  for (int j = 0; j < m->dim[0]; j++) h[0][j] = x[j];
  for (int l = 0; l < L; l++) {
    for (int i = 0; i < m->dim[l + 1]; i++) {
      double s = m->params[m->off_b[l] + i];
      for (int j = 0; j < m->dim[l]; j++) s += W_(l, i, j) * h[l][j];
      a[l + 1][i] = s;
      if (l < L - 1) h[l + 1][i] = s > 0 ? s : expm1(s);
    }
  }
  /* input gradient: delta_{L-1} = 1, g_l = W_l^T delta_l, delta_l = g_{l+1} * act'(a_l) */
  for (int l = L - 1; l >= 0; l--) {
    for (int i = 0; i < m->dim[l + 1]; i++)
      dl[l + 1][i] = l == L - 1 ? 1.0 : g[l + 1][i] * (a[l + 1][i] > 0 ? 1.0 : exp(a[l + 1][i]));
    for (int j = 0; j < m->dim[l]; j++) {
      double s = 0;
      for (int i = 0; i < m->dim[l + 1]; i++) s += W_(l, i, j) * dl[l + 1][i];
      g[l][j] = s;
    }
  }
  double P = 0;
  for (int j = 0; j < m->dim[0]; j++) P += g[0][j] * g[0][j], gb[0][j] = 2 * g[0][j];
  /* reverse of the input-gradient pass (l ascending) */
  for (int l = 0; l < L; l++) {
    for (int i = 0; i < m->dim[l + 1]; i++) {
      double db = 0;
      for (int j = 0; j < m->dim[l]; j++) {
        grad[m->off_w[l] + (size_t)i * m->dim[l] + j] += (bcg_real)(w * dl[l + 1][i] * gb[l][j]);
        db += W_(l, i, j) * gb[l][j];
      }
      if (l < L - 1) {
        double ai = a[l + 1][i], d1 = ai > 0 ? 1.0 : exp(ai);
        gb[l + 1][i] = db * d1;
        ab[l + 1][i] = db * g[l + 1][i] * add_act_d2(ai, 0);
      } else
        ab[l + 1][i] = 0; /* z itself does not enter P */
    }
  }
  /* reverse of the forward pass (l descending): abar_l += act'(a_l) * W_{l+1}^T abar_{l+1} */
  for (int l = L - 1; l >= 0; l--) {
    if (l < L - 1)
      for (int i = 0; i < m->dim[l + 1]; i++) {
        double ai = a[l + 1][i];
        ab[l + 1][i] += (ai > 0 ? 1.0 : exp(ai)) * hb[l + 1][i];
      }
    for (int j = 0; j < m->dim[l]; j++) hb[l][j] = 0;
    for (int i = 0; i < m->dim[l + 1]; i++) {
      grad[m->off_b[l] + i] += (bcg_real)(w * ab[l + 1][i]);
      for (int j = 0; j < m->dim[l]; j++) {
        grad[m->off_w[l] + (size_t)i * m->dim[l] + j] += (bcg_real)(w * ab[l + 1][i] * h[l][j]);
        hb[l][j] += W_(l, i, j) * ab[l + 1][i];
      }
    }
  }
#undef W_
  free(buf);
  return P;
}

/* Merge the pending samples into mabs, then `steps` discriminator steps on
 * minibatches of the replay (indices from Philox purpose BCG_RNG_REPLAY,
 * step iteration * steps + k: reproducible). */
static inline int add_update(add_disc *d, int64_t iteration) {
  int64_t np = d->pending < d->rep_n ? d->pending : d->rep_n;
  if (np > 0) {
    for (int64_t k = 0; k < np; k++) {
      const bcg_real *r = d->rep + (size_t)((d->head - 1 - k + 2 * d->cap) % d->cap) * d->dim;
      double c = d->mcount + (double)k;
      for (int i = 0; i < d->dim; i++) {
        double prev = c > 0 ? d->mabs[i] : 0;
        d->mabs[i] = prev + (fabs((double)r[i]) - prev) / (c + 1);
      }
    }
    d->mcount += (double)np;
  }
  d->pending = 0;
  if (d->rep_n == 0) return 0;
  int B = d->batch, D = d->dim;
  bcg_mlp *m = &d->D;
  bcg_real *x0 = calloc((size_t)D, sizeof(bcg_real));
  if (!x0) return -1;
  for (int k = 0; k < d->steps; k++) {
    uint32_t step = (uint32_t)(iteration * d->steps + k);
    memset(d->xin, 0, sizeof(bcg_real) * D); /* row 0: the positive, Delta = 0 */
    for (int i = 0; i < B; i++) {
      double u = bcg_rng_uniform(d->seed, BCG_RNG_REPLAY, 0, step, (uint32_t)i);
      int64_t j = (int64_t)(u * (double)d->rep_n);
      if (j >= d->rep_n) j = d->rep_n - 1;
      add_normalise(d, d->rep + (size_t)j * D, d->xin + (size_t)(i + 1) * D);
    }
    if (bcg_mlp_forward(m, NULL, d->xin, B + 1, NULL)) return free(x0), -1;
    const bcg_real *z = bcg_mlp_tape_output(m, NULL);
    double loss = 0.5 * add_softplus(-(double)z[0]), zn = 0;
    d->dy[0] = (bcg_real)(0.5 * (add_sigmoid(z[0]) - 1));
    for (int i = 1; i <= B; i++) {
      loss += 0.5 / B * add_softplus(z[i]);
      zn += z[i] / B;
      d->dy[i] = (bcg_real)(0.5 / B * add_sigmoid(z[i]));
    }
    d->last_pos_logit = z[0];
    d->last_neg_logit = zn;
    bcg_mlp_zero_grad(m);
    if (bcg_mlp_backward(m, NULL, d->dy, m->grad, NULL)) return free(x0), -1;
    double P = d->gp > 0 ? add_gp_grad(m, x0, d->gp, m->grad) : 0;
    int lo = m->nlin - 1;
    double wo = 0;
    for (int i = 0; i < m->dim[lo]; i++) {
      bcg_real wi = m->params[m->off_w[lo] + i];
      wo += (double)wi * wi;
      m->grad[m->off_w[lo] + i] += (bcg_real)(2 * d->logit_reg * wi);
    }
    d->last_penalty = P;
    d->last_loss = loss + d->gp * P + d->logit_reg * wo;
    bcg_adam_step(&d->opt, m->params, m->grad);
  }
  free(x0);
  return 0;
}

/* ---- checkpoint (an open HDF5 group) ---------------------------------------------- */

static inline int add_save(const add_disc *d, int64_t g) {
  char e[256];
  int64_t iv[5] = {d->rep_n, d->head, d->pending, d->opt.step, d->dim};
  int rc = bcg_h5_write_reals(g, "params", d->D.params, d->D.nparams, e, sizeof e) ||
           bcg_h5_write_reals(g, "adam_m", d->opt.m, d->opt.n, e, sizeof e) ||
           bcg_h5_write_reals(g, "adam_v", d->opt.v, d->opt.n, e, sizeof e) ||
           bcg_h5_write_doubles(g, "mean_abs", d->mabs, (size_t)d->dim, e, sizeof e) ||
           bcg_h5_write_doubles(g, "mean_abs_count", &d->mcount, 1, e, sizeof e) ||
           bcg_h5_write_i64(g, "counters", iv, 5, e, sizeof e) ||
           (d->rep_n > 0 && bcg_h5_write_reals(g, "replay", d->rep, (size_t)d->rep_n * d->dim, e, sizeof e));
  return rc ? -1 : 0;
}

static inline int add_load(add_disc *d, int64_t g) {
  char e[256];
  int64_t iv[5];
  if (bcg_h5_read_i64(g, "counters", iv, 5, e, sizeof e) != 5 || iv[4] != d->dim || iv[0] < 0 || iv[0] > d->cap ||
      iv[1] < 0 || iv[1] >= d->cap)
    return -1;
  if (bcg_h5_read_reals(g, "params", d->D.params, d->D.nparams, e, sizeof e) != (long)d->D.nparams ||
      bcg_h5_read_reals(g, "adam_m", d->opt.m, d->opt.n, e, sizeof e) != (long)d->opt.n ||
      bcg_h5_read_reals(g, "adam_v", d->opt.v, d->opt.n, e, sizeof e) != (long)d->opt.n ||
      bcg_h5_read_doubles(g, "mean_abs", d->mabs, (size_t)d->dim, e, sizeof e) != d->dim ||
      bcg_h5_read_doubles(g, "mean_abs_count", &d->mcount, 1, e, sizeof e) != 1)
    return -1;
  if (iv[0] > 0 &&
      bcg_h5_read_reals(g, "replay", d->rep, (size_t)d->cap * d->dim, e, sizeof e) != (long)(iv[0] * d->dim))
    return -1;
  d->rep_n = iv[0];
  d->head = iv[1];
  d->pending = iv[2];
  d->opt.step = iv[3];
  return 0;
}

#endif
