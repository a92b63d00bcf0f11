/* claims CUDA entry points but has none */
#define B_NAME "bad_cuda"
#define B_CAPS BCG_CAP_CUDA
#include "broken.h"
