/* an invalid plugin name */
#define B_NAME "Bad-Name"
#include "broken.h"
