/* broken.h - a contact plugin whose descriptor can be broken field by field
 * with defines set before including it; each bad_*.c test plugin breaks one
 * thing so the loader test can check the exact message. */
#include <stddef.h>

#include "bcg/plugin.h"

#ifndef B_NAME
#error define B_NAME
#endif
#ifndef B_ABI
#define B_ABI BCG_ABI_VERSION
#endif
#ifndef B_DESC_SIZE
#define B_DESC_SIZE ((uint32_t)sizeof(bcg_plugin_desc))
#endif
#ifndef B_KIND
#define B_KIND BCG_KIND_CONTACT
#endif
#ifndef B_OPS_SIZE
#define B_OPS_SIZE ((uint32_t)sizeof(bcg_contact_ops))
#endif
#ifndef B_SOLVE_VJP
#define B_SOLVE_VJP solve_vjp
#endif
#ifndef B_CAPS
#define B_CAPS 0
#endif
#ifndef B_KAPPA_DEF
#define B_KAPPA_DEF "300"
#endif

static void *create(const bcg_services *svc, const bcg_params *params, const bcg_model *model, char *err,
                    size_t errlen) {
  static int dummy;
  return &dummy;
}
static void destroy(void *p) {}
static int solve(void *p, bcg_contact_batch *b) { return 0; }
__attribute__((unused)) static int solve_vjp(void *p, const bcg_contact_batch *b, bcg_contact_adjoint *adj) { return 0; }

static const bcg_key_spec keys[] = {
    {"kappa", BCG_KEY_REAL, B_KAPPA_DEF, 1, 1000, NULL, "stiffness"},
};

static const bcg_contact_ops ops = {B_OPS_SIZE, create, destroy, solve, B_SOLVE_VJP, NULL, NULL,
                                    NULL, NULL, NULL};

static const bcg_plugin_desc desc = {B_ABI,          B_DESC_SIZE, B_KIND, B_NAME, "broken test plugin",
                                     (uint32_t)sizeof(bcg_real) | BCG_DIMS_TAG, keys, 1, B_CAPS, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) {
#ifdef B_RETURN_NULL
  return NULL;
#else
  return &desc;
#endif
}
