/* a function table of the wrong size */
#define B_NAME "bad_ops_size"
#define B_OPS_SIZE 8u
#include "broken.h"
