/* descriptor size of another plugin.h */
#define B_NAME "bad_desc_size"
#define B_DESC_SIZE ((uint32_t)sizeof(bcg_plugin_desc) - 8)
#include "broken.h"
