/* core/sim_common.h - private: what the CPU stepper (core/sim.c) and the CUDA
 * one (core/cuda/sim_cuda.cu) set up the same way. Their structs differ
 * (host or device arrays) but share these fields' names. */
#ifndef BCG_SIM_COMMON_H
#define BCG_SIM_COMMON_H

/* model, parameters, capacity, contact slots per environment (ncmax, at
 * least 1 for the array shapes) and the contact plugin; without a plugin no
 * contact is kept (ncmax 0) */
#define BCG_SIM_SET_COMMON(s, model_, sp_, cap_, cops_, cself_)      \
  do {                                                               \
    (s)->model = (model_);                                           \
    (s)->sp = *(sp_);                                                \
    (s)->cap = (cap_);                                               \
    (s)->ncon = (sp_)->ncmax > 0 ? (sp_)->ncmax : 1;                 \
    (s)->cops = (cops_);                                             \
    (s)->cself = (cself_);                                           \
    if (!(cops_)) (s)->sp.ncmax = 0;                                 \
  } while (0)

#endif
