/* cmd_check.c - bcg check CONFIG [section.key=value ...]: validate (the
 * model compiled, a training config's session created: the task's data, the
 * estimator, the learner) and print the fully resolved configuration. */
#include <stdio.h>

#include "cmd.h"

int bcg_cmd_check(int argc, char **argv) {
  bcg_config *cfg;
  int rc = bcg_cli_load_config(argv[0], argc, argv, &cfg);
  if (rc) return rc;
  rc = bcg_cli_check_semantics_ex(cfg, 1); /* compiles the model, prints each joint's PD gains */
  if (rc == 0) rc = bcg_cli_check_session(cfg); /* the task's data, estimator, learner: what bcg train needs */
  if (rc == 0) rc = bcg_cli_check_sweep(cfg); /* what bcg sweep would refuse */
  if (rc == 0 && bcg_config_resolved_write(cfg, stdout)) rc = bcg_cli_error("writing to standard output failed");
  bcg_config_free(cfg);
  return rc;
}
