/* tests/plugins/old_abi_task.c - learn_task as a plugin built against an
 * older plugin.h of the same ABI version: its task table ends at reward_vjp
 * (no update, tracking_error, save, load) and what lies beyond aborts if the
 * core ever reads it as an entry (test_loader, test_cli). */
#define LEARN_TASK_OLD_ABI 1
#include "learn_task.c"
