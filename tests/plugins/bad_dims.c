/* built with other capacities than the build's (the Makefile sets
 * BCG_MAX_DOF one below the build's): its structs would be laid out
 * differently, so the loader must refuse it */
#define B_NAME "bad_dims"
#include "broken.h"
