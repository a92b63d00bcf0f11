/* an unknown plugin kind */
#define B_NAME "bad_kind"
#define B_KIND 9
#include "broken.h"
