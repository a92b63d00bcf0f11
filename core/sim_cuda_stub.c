/* core/sim_cuda_stub.c - bcg/sim_cuda.h in a build without CUDA (make CUDA=0,
 * or nvcc not found): every entry point exists, so programs and tests link
 * alike in both builds; bcg_cuda_available() says why there is no device and
 * creation fails with the same reason. With CUDA, core/cuda/sim_cuda.cu
 * provides all of this and this file compiles to nothing. */
#include "bcg/sim_cuda.h"

typedef int bcg_sim_cuda_stub_unit; /* keeps the unit non-empty in CUDA builds */

#ifndef BCG_HAVE_CUDA
#include <stdio.h>

#define NOCUDA "bcg was built without CUDA (make CUDA=0, or nvcc not found)"

int bcg_cuda_available(char *err, size_t errlen) {
  if (err && errlen) snprintf(err, errlen, "no CUDA device: %s", NOCUDA);
  return 0;
}
void bcg_cuda_device_info(char *buf, size_t len) { snprintf(buf, len, "%s", NOCUDA); }
bcg_cuda_sim *bcg_cuda_sim_create(const bcg_model *model, const bcg_simparams *sp, int cap,
                                  const bcg_contact_ops *cops, void *cself, char *err, size_t errlen) {
  (void)model; (void)sp; (void)cap; (void)cops; (void)cself;
  snprintf(err, errlen, "%s; use device = cpu", NOCUDA);
  return NULL;
}
void bcg_cuda_sim_free(bcg_cuda_sim *s) { (void)s; }
int bcg_cuda_sim_substep(bcg_cuda_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a,
                         bcg_real *qo, bcg_real *uo) {
  (void)s; (void)n; (void)q; (void)u; (void)a; (void)qo; (void)uo;
  return -1;
}
int bcg_cuda_sim_substep_vjp(bcg_cuda_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a,
                             const bcg_real *qob, const bcg_real *uob, bcg_real *qb, bcg_real *ub, bcg_real *ab) {
  (void)s; (void)n; (void)q; (void)u; (void)a; (void)qob; (void)uob; (void)qb; (void)ub; (void)ab;
  return -1;
}
int bcg_cuda_sim_control_step(bcg_cuda_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a,
                              bcg_real *qo, bcg_real *uo, bcg_real *tape) {
  (void)s; (void)n; (void)q; (void)u; (void)a; (void)qo; (void)uo; (void)tape;
  return -1;
}
int bcg_cuda_sim_control_step_vjp(bcg_cuda_sim *s, int n, const bcg_real *tape, const bcg_real *a,
                                  const bcg_real *xob, bcg_real *xb, bcg_real *ab) {
  (void)s; (void)n; (void)tape; (void)a; (void)xob; (void)xb; (void)ab;
  return -1;
}
int bcg_cuda_sim_diagnostics(bcg_cuda_sim *s, int n, bcg_real *maxfn, bcg_real *maxpen, int *bad) {
  (void)s; (void)n; (void)maxfn; (void)maxpen; (void)bad;
  return -1;
}
int bcg_cuda_sim_nactive(bcg_cuda_sim *s, int n, int *nact) {
  (void)s; (void)n; (void)nact;
  return -1;
}
int bcg_cuda_sim_set_domain(bcg_cuda_sim *s, const bcg_domain *dom) {
  (void)s; (void)dom;
  return -1;
}
int bcg_cuda_sim_update_domain(bcg_cuda_sim *s, const int *envs, int k) {
  (void)s; (void)envs; (void)k;
  return -1;
}
int bcg_cuda_sim_set_envmap(bcg_cuda_sim *s, const int *envmap, int n) {
  (void)s; (void)envmap; (void)n;
  return -1;
}
int bcg_cuda_sim_set_async(bcg_cuda_sim *s, int async) { (void)s; (void)async; return -1; }
int bcg_cuda_sim_sync(bcg_cuda_sim *s) { (void)s; return -1; }
void *bcg_cuda_sim_stream(bcg_cuda_sim *s) { (void)s; return NULL; }
const char *bcg_cuda_sim_error(const bcg_cuda_sim *s) { (void)s; return NOCUDA; }
int bcg_cuda_sim_block(const bcg_cuda_sim *s) { (void)s; return 0; }
int bcg_cuda_block_default(void) { return 0; }
int bcg_cuda_sim_set_timing(bcg_cuda_sim *s, int on) { (void)s; (void)on; return -1; }
void bcg_cuda_sim_stage_ms(const bcg_cuda_sim *s, double ms[BCG_CUDA_NSTAGE]) {
  (void)s;
  for (int i = 0; i < BCG_CUDA_NSTAGE; i++) ms[i] = 0;
}
void *bcg_cuda_malloc(size_t bytes) { (void)bytes; return NULL; }
void bcg_cuda_free(void *p) { (void)p; }
void *bcg_cuda_host_alloc(size_t bytes) { (void)bytes; return NULL; }
void bcg_cuda_host_free(void *p) { (void)p; }
int bcg_cuda_copy(void *dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; return -1; }
int bcg_cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows) {
  (void)dst; (void)dpitch; (void)src; (void)spitch; (void)width; (void)rows;
  return -1;
}
int bcg_cuda_memset(void *p, int byte, size_t bytes) { (void)p; (void)byte; (void)bytes; return -1; }
bcg_cuda_event *bcg_cuda_event_new(void) { return NULL; }
void bcg_cuda_event_free(bcg_cuda_event *e) { (void)e; }
int bcg_cuda_event_record(bcg_cuda_event *e, bcg_cuda_sim *s) { (void)e; (void)s; return -1; }
double bcg_cuda_event_ms(bcg_cuda_event *a, bcg_cuda_event *b) { (void)a; (void)b; return -1; }
#endif
