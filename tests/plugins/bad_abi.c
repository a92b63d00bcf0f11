/* wrong ABI version */
#define B_NAME "bad_abi"
#define B_ABI 99u
#include "broken.h"
