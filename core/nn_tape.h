/* core/nn_tape.h - private: where an MLP's activations lie in its tape, one
 * layout for the host (core/nn.c) and the device (core/cuda/nn_cuda.cu).
 *
 * For batch capacity B: x [B][in]; per layer l: pre [B][n] (activation
 * input), post [B][n] (activation output); hidden layers with LayerNorm:
 * xhat [B][n], rstd [B], and in POST_ACT mode out [B][n] (the LN output is
 * the layer output; otherwise out aliases post); with scratch (the host's
 * tape), two rows s0, s1 of [B][maxdim]. With mem NULL only the size is
 * computed. Returns the reals needed. */
#ifndef BCG_NN_TAPE_H
#define BCG_NN_TAPE_H

#include <stddef.h>
#include "bcg/nn.h"

/* The vector instruction set of the CPU's ELU (core/nn.c): 0 scalar (built
 * without libmvec), 1 SSE2, 2 AVX2, 3 AVX-512. limit > 0 caps it from then
 * on (tests run every variant the CPU has); returns the one in use. */
int bcg_nn_vec_isa(int limit);

typedef struct bcg_nn_tape_ptrs {
  bcg_real *x;
  bcg_real *pre[BCG_MLP_MAX_HIDDEN + 1], *post[BCG_MLP_MAX_HIDDEN + 1];
  bcg_real *xhat[BCG_MLP_MAX_HIDDEN + 1], *rstd[BCG_MLP_MAX_HIDDEN + 1];
  bcg_real *out[BCG_MLP_MAX_HIDDEN + 1];
  bcg_real *s0, *s1;
} bcg_nn_tape_ptrs;

static inline size_t bcg_nn_tape_layout(const bcg_mlp *m, int B, bcg_real *mem, bcg_nn_tape_ptrs *p, int scratch) {
  size_t off = 0, b = (size_t)B;
  int maxdim = 0;
  for (int l = 0; l <= m->nlin; l++)
    if (m->dim[l] > maxdim) maxdim = m->dim[l];
#define TAKE(n) (off += (n), mem ? mem + off - (n) : NULL)
  p->x = TAKE(b * (size_t)m->dim[0]);
  for (int l = 0; l < m->nlin; l++) {
    size_t n = (size_t)m->dim[l + 1];
    p->pre[l] = TAKE(b * n);
    p->post[l] = TAKE(b * n);
    p->out[l] = p->post[l];
    p->xhat[l] = p->rstd[l] = NULL;
    if (l < m->nlin - 1 && m->cfg.layernorm != BCG_LN_NONE) {
      p->xhat[l] = TAKE(b * n);
      p->rstd[l] = TAKE(b);
      if (m->cfg.layernorm == BCG_LN_POST_ACT) p->out[l] = TAKE(b * n);
    }
  }
  p->s0 = p->s1 = NULL;
  if (scratch) {
    p->s0 = TAKE(b * (size_t)maxdim);
    p->s1 = TAKE(b * (size_t)maxdim);
  }
#undef TAKE
  return off;
}

#endif
