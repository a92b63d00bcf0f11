/* bcg_plugin_entry returns NULL */
#define B_NAME "bad_null_desc"
#define B_RETURN_NULL
#include "broken.h"
