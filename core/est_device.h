/* core/est_device.h - private: GPU estimators (bcg_estimator_ops.forward_cuda
 * and backward_cuda) behind the host-array estimator table the learners call. */
#ifndef BCG_CORE_EST_DEVICE_H
#define BCG_CORE_EST_DEVICE_H

#include <stddef.h>

#include "bcg/plugin.h"

/* 1 if the table carries both device entries (size covers them, non-NULL). */
int bcg_est_has_cuda(const bcg_estimator_ops *ops);

/* Replace (*ops, *self) by an adapter whose forward and backward copy the
 * learner's host arrays to device buffers of env's nenv environments, call
 * forward_cuda / backward_cuda on the env's stream and copy the results back;
 * every other entry passes through, destroy frees the adapter and then the
 * estimator. 0, or -1 with a message (no GPU memory). */
int bcg_est_device_wrap(const bcg_estimator_ops **ops, void **self, bcg_env *env, const char *name, char *err,
                        size_t errlen);

#endif
