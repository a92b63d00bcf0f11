/* a NULL mandatory function-table entry */
#define B_NAME "bad_nullfn"
#define B_SOLVE_VJP NULL
#include "broken.h"
