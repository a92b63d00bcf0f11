/* core/plugin_err.h - private: the plugins' error channel (bcg_services.error,
 * bcg/plugin.h). A plugin's runtime call that fails says why before it
 * returns non-zero; the layers that called it add who and where on the way
 * out ("[estimator] bcg: backward at step 12 returned -1: ..."), and the
 * training loop prints the whole line. One process-wide slot, guarded by a
 * mutex: the first message since the last take wins (later ones, e.g. from
 * other OpenMP threads of the same failing call, are dropped), contexts are
 * prepended to it. */
#ifndef BCG_PLUGIN_ERR_H
#define BCG_PLUGIN_ERR_H

#include <stddef.h>

/* bcg_services.error: a plugin's code and message (one line) */
void bcg_plugin_err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* prepend "CONTEXT: " to the message, or make CONTEXT the message when no
 * plugin said anything */
void bcg_plugin_err_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* the message so far (with the plugin's code), and clear the slot; 0 when
 * there is none */
int bcg_plugin_err_take(char *buf, size_t len);
void bcg_plugin_err_clear(void);

#endif
