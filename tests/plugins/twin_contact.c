/* a second contact plugin named test_contact */
#define B_NAME "test_contact"
#include "broken.h"
