/* bcg/sim.h - batched time stepping on the CPU (OpenMP over environments).
 *
 * A bcg_sim is stateless with respect to the physics: it steps whatever batch
 * of states it is given (environments, or the branches of a bundle) and keeps
 * only workspaces, the contact plugin and per-environment contact
 * diagnostics. States are x = (q[nq], u[nv]) per environment; state adjoints
 * are (q_bar[nv] in tangent coordinates, u_bar[nv]). */
#ifndef BCG_SIM_H
#define BCG_SIM_H

#include <stddef.h>
#include "bcg/model.h"
#include "bcg/plugin.h"
#include "bcg/step.h"

BCG_BEGIN_DECLS

struct bcg_sim {
  const bcg_model *model;
  bcg_simparams sp;
  int cap;  /* largest batch */
  int ncon; /* contact slots per environment in the batch arrays */
  const bcg_contact_ops *cops;
  void *cself;
  bcg_stepws *ws;
  bcg_stepadj *adj;
  int *nact;
  bcg_real *gap, *v0, *c, *G, *mu, *lam, *fn;
  bcg_real *lamb, *gapb, *v0b, *cb, *Gb;
  /* diagnostics of the last control step, per environment */
  bcg_real *maxfn;  /* largest normal force (N) */
  bcg_real *maxpen; /* deepest penetration (m, >= 0) */
  int *bad;         /* non-finite or non-SPD during the last control step */
  bcg_real *scratch;
};

/* Defaults: the model's timestep, 4 substeps, motor actuation, limits on. */
void bcg_simparams_default(const bcg_model *model, bcg_simparams *sp);

/* cops may be NULL (no contact). Returns NULL with a message on failure. */
bcg_sim *bcg_sim_create(const bcg_model *model, const bcg_simparams *sp, int cap, const bcg_contact_ops *cops,
                        void *cself, char *err, size_t errlen);
void bcg_sim_free(bcg_sim *s);

/* One substep for n <= cap environments. Inputs and outputs may not alias. */
int bcg_sim_substep(bcg_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a, bcg_real *qo,
                    bcg_real *uo);
/* Its adjoint, recomputed from the same inputs: given (qob, uob), writes qb,
 * ub and accumulates ab. */
int bcg_sim_substep_vjp(bcg_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a,
                        const bcg_real *qob, const bcg_real *uob, bcg_real *qb, bcg_real *ub, bcg_real *ab);

/* One control step (sp.substeps substeps holding a). tape, if not NULL,
 * receives each substep's input state: [substeps][n][nq + nv]. Updates the
 * per-environment diagnostics. */
int bcg_sim_control_step(bcg_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a, bcg_real *qo,
                         bcg_real *uo, bcg_real *tape);
/* Adjoint of a control step from its tape: xob [n][2nv] (q_bar, u_bar) of
 * the output, writes xb [n][2nv] for the input and accumulates ab [n][nu]. */
int bcg_sim_control_step_vjp(bcg_sim *s, int n, const bcg_real *tape, const bcg_real *a, const bcg_real *xob,
                             bcg_real *xb, bcg_real *ab);

/* Simulation parameters from a validated config's [sim] section (control
 * step = substeps * dt; dt = control_dt / substeps). need_G is taken from the
 * contact plugin's capabilities, if one is selected. Returns 0, or -1 with a
 * message naming the key. */
typedef struct bcg_config bcg_config;
int bcg_simparams_from_config(const bcg_config *cfg, const bcg_model *model, bcg_simparams *sp, char *err,
                              size_t errlen);

/* Create the [contact] plugin instance of a config (NULL ops when the config
 * has no [contact] section). Returns 0 or -1 with a message. */
int bcg_contact_from_config(const bcg_config *cfg, const bcg_model *model, const bcg_contact_ops **ops,
                            void **self, char *err, size_t errlen);

/* Convert the gradient of a function of raw qpos coordinates into the
 * tangent adjoint at q (quaternions: q <- q * exp(delta)). */
void bcg_qgrad_to_tangent(const bcg_mdata *m, const bcg_real *q, const bcg_real *gq, bcg_real *tg);

BCG_END_DECLS

#endif
