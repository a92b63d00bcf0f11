/* contact_models/hard.c - hard contact (docs/design.md section 5.4): the
 * projected Gauss-Seidel solve of smoothed_kappa with binary activation
 * s_i = [g_i <= 0], the reference for "what the smoothing changes". The
 * gradient through s is zero; the adjoint is otherwise the exact adjoint of
 * the unrolled sweeps.
 *
 * Keys: iterations (default 10), solver = split|block|reference (default
 * split: normal step first, then tangential; see smoothed_kappa.c for why).
 *
 * The solver is written once, in smoothed_kappa.c, and compiled here with
 * BCG_CONTACT_HARD; that includes its host part and its __CUDACC__ part
 * (kernels + launchers), so this .so gets CUDA entry points as well. */
#define BCG_CONTACT_HARD 1
#include "smoothed_kappa.c"
