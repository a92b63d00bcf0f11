/* built with the other precision (the Makefile adds the define) */
#define B_NAME "bad_precision"
#include "broken.h"
