/* bad_nosym - a shared object without the bcg_plugin_entry symbol. */
#include "bcg/plugin.h"

BCG_EXTERN_C BCG_EXPORT int bcg_plugin_entry_misspelt(void) { return 42; }
