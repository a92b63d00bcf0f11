/* core/nn_cuda.h - private: the device half of bcg_mlp (core/cuda/nn_cuda.cu;
 * core/nn_cuda_stub.c without CUDA). Only core/nn.c calls these, when
 * bcg_nn_set_cuda() is on and the batch is large enough (bcg/nn.h).
 *
 * Every call copies the network parameters (m->params, first m->nnet reals)
 * to the device, unless the network is held (bcg_mlp_hold, below), so the
 * host copy stays the only authoritative one (Adam,
 * clipping, Polyak averaging and checkpoints work on it unchanged); a
 * backward's gradient is summed on the device from zero and added to the
 * host gradient on the way back.
 * The activations a backward needs stay on the device, in a device tape
 * owned by the host tape (t->dev, grown on demand to the batch seen); the
 * host tape receives the output only. Each calling thread has its own
 * stream, cuBLAS handle and scratch, so two threads' calls run side by side
 * on the device; a call that returns something to the host waits for its
 * work. One network (and one tape, one row source) is used by one thread at
 * a time; a held network may move between threads (its queued work is
 * waited for). Return 0, or -1 with a message kept for bcg_cuda_nn_error()
 * (per thread). */
#ifndef BCG_NN_CUDA_H
#define BCG_NN_CUDA_H

#include <stddef.h>
#include "bcg/nn.h"

BCG_BEGIN_DECLS

/* A device, and the calling thread's stream and cuBLAS handle, ready (idempotent); else -1 and the reason in err. */
int bcg_cuda_nn_init(char *err, size_t errlen);
/* Forward of batch >= 1 rows of x into t's device tape; writes y[batch][out] (host). */
int bcg_cuda_nn_forward(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *x, int batch, bcg_real *y);
/* The same with x gathered on the device from r's mirror: row row0 + idx[i]
 * (idx NULL: row0 + i; host array, checked by the caller) of r. */
int bcg_cuda_nn_forward_rows(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_nn_rows *r, long row0, const int *idx,
                             int batch, bcg_real *y);
/* r's mirror rows [row0, row0 + n) = its host rows (the mirror allocated on first use). */
int bcg_cuda_nn_rows_put(bcg_nn_rows *r, long row0, long n);
void bcg_cuda_nn_rows_free(bcg_nn_rows *r);
/* Backward of t's last device forward: grad (host, may be NULL) += dL/dparams,
 * dx (host, may be NULL) = dL/dx. */
int bcg_cuda_nn_backward(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *dy, bcg_real *grad, bcg_real *dx);
/* Held networks (bcg_mlp_hold, bcg/nn.h): m's parameters and gradient, and
 * opt's moments (opt may be NULL), copied to device buffers of their own,
 * which the forwards and backwards of m then use instead of m->params (and,
 * for a backward into m->grad, instead of the host gradient). release copies
 * them back and frees them; drop frees them without a copy (the network is
 * being destroyed). held: 1 if m is held (looked up by m->params). */
int bcg_cuda_nn_hold(const bcg_mlp *m, const bcg_adam *opt);
int bcg_cuda_nn_release(bcg_mlp *m, bcg_adam *opt);
int bcg_cuda_nn_held(const bcg_mlp *m, const bcg_adam **opt);
/* the held gradient's network part (m->nnet reals) to host (to_host) or from it (waits for the copy) */
int bcg_cuda_nn_grad_copy(const bcg_mlp *m, bcg_real *host, int to_host);
/* the held gradient := 0 */
int bcg_cuda_nn_zero_grad(const bcg_mlp *m);
/* acc[j] = sum of g[i]^2 over i = j mod 32, in order (the host's lanes; core/nn.c sums the tree);
 * the host's m->extra_grad is sent to the gradient's extra tail first */
int bcg_cuda_nn_grad_lanes(const bcg_mlp *m, double acc[32]);
/* on the held gradient and parameters, element-wise: clip (g = (bcg_real)((double)g * c)) when
 * clip != 0, then, when adam != 0, BCG_ADAM_ELEM with the coefficients (ss, isbc2 of the step
 * core/nn.c counted); the host's m->extra_grad is sent to the gradient's extra tail before, and
 * the extra parameters and gradient come back into m->extra_params, m->extra_grad after */
int bcg_cuda_nn_clip_adam(const bcg_mlp *m, const bcg_adam *opt, int clip, double c, int adam, bcg_real ss,
                          bcg_real isbc2);
/* page-lock [p, p + bytes) for direct copies (bcg_nn_pin): 0, or -1 (not
 * pinned: a full table, an overlap, a failed registration); unpin: undo it
 * (nothing for a pointer not pinned) */
int bcg_cuda_nn_pin(const void *p, size_t bytes);
void bcg_cuda_nn_unpin(const void *p);
/* Free t->dev (NULL-safe). */
void bcg_cuda_nn_tape_free(bcg_mlp_tape *t);
/* A network's parameter array p is about to be freed: unlock it if a device call page-locked it. */
void bcg_cuda_nn_forget(const void *p);
/* The message of the last failure ("" if none). */
const char *bcg_cuda_nn_error(void);
/* bcg_nn_cuda_profile / bcg_nn_cuda_profile_read (bcg/nn.h). */
void bcg_cuda_nn_profile(int on);
void bcg_cuda_nn_profile_read(bcg_nn_cuda_split *s);

BCG_END_DECLS

#endif
