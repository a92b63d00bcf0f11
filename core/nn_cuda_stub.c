/* core/nn_cuda_stub.c - core/nn_cuda.h in a build without CUDA (make CUDA=0,
 * or nvcc not found): bcg_cuda_nn_init fails with the reason, so bcg_nn_set_cuda(1, ...)
 * is refused and no MLP ever takes the device path. With CUDA,
 * core/cuda/nn_cuda.cu provides all of this and this file compiles to nothing. */
#include "nn_cuda.h"

typedef int bcg_nn_cuda_stub_unit; /* keeps the unit non-empty in CUDA builds */

#ifndef BCG_HAVE_CUDA
#include <stdio.h>
#include <string.h>

int bcg_cuda_nn_init(char *err, size_t errlen) {
  if (err && errlen) snprintf(err, errlen, "bcg was built without CUDA (make CUDA=0, or nvcc not found)");
  return -1;
}
int bcg_cuda_nn_forward(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *x, int batch, bcg_real *y) {
  (void)m; (void)t; (void)x; (void)batch; (void)y;
  return -1;
}
int bcg_cuda_nn_backward(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *dy, bcg_real *grad, bcg_real *dx) {
  (void)m; (void)t; (void)dy; (void)grad; (void)dx;
  return -1;
}
void bcg_cuda_nn_tape_free(bcg_mlp_tape *t) { (void)t; }
void bcg_cuda_nn_forget(const void *p) { (void)p; }
int bcg_cuda_nn_forward_rows(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_nn_rows *r, long row0, const int *idx,
                             int batch, bcg_real *y) {
  (void)m; (void)t; (void)r; (void)row0; (void)idx; (void)batch; (void)y;
  return -1;
}
int bcg_cuda_nn_rows_put(bcg_nn_rows *r, long row0, long n) {
  (void)r; (void)row0; (void)n;
  return -1;
}
void bcg_cuda_nn_rows_free(bcg_nn_rows *r) { (void)r; }

int bcg_cuda_nn_hold(const bcg_mlp *m, const bcg_adam *opt) {
  (void)m; (void)opt;
  return -1;
}
int bcg_cuda_nn_release(bcg_mlp *m, bcg_adam *opt) {
  (void)m; (void)opt;
  return -1;
}
int bcg_cuda_nn_held(const bcg_mlp *m, const bcg_adam **opt) {
  (void)m; (void)opt;
  return 0;
}
int bcg_cuda_nn_zero_grad(const bcg_mlp *m) {
  (void)m;
  return -1;
}
int bcg_cuda_nn_grad_copy(const bcg_mlp *m, bcg_real *host, int to_host) {
  (void)m; (void)host; (void)to_host;
  return -1;
}
int bcg_cuda_nn_grad_lanes(const bcg_mlp *m, double acc[32]) {
  (void)m; (void)acc;
  return -1;
}
int bcg_cuda_nn_clip_adam(const bcg_mlp *m, const bcg_adam *opt, int clip, double c, int adam, bcg_real ss,
                          bcg_real isbc2) {
  (void)m; (void)opt; (void)clip; (void)c; (void)adam; (void)ss; (void)isbc2;
  return -1;
}

int bcg_cuda_nn_pin(const void *p, size_t bytes) {
  (void)p; (void)bytes;
  return -1;
}
void bcg_cuda_nn_unpin(const void *p) { (void)p; }

const char *bcg_cuda_nn_error(void) { return "bcg was built without CUDA"; }
void bcg_cuda_nn_profile(int on) { (void)on; }
void bcg_cuda_nn_profile_read(bcg_nn_cuda_split *s) { memset(s, 0, sizeof *s); }
#endif
