/* a key default outside its range */
#define B_NAME "bad_default"
#define B_KAPPA_DEF "5000"
#include "broken.h"
