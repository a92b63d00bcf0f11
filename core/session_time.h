/* core/session_time.h - private: the timing wrappers behind bcg_session_time
 * (core/session_time.c), installed by bcg_session_open. */
#ifndef BCG_CORE_SESSION_TIME_H
#define BCG_CORE_SESSION_TIME_H

#include "bcg/train.h"

/* S->tr's task and estimator become timing wrappers of S->task and S->est
 * (S->timing); 0, or -1 out of memory */
int bcg_session_time_wrap(bcg_session *S);
void bcg_session_time_free(bcg_session *S);

#endif
