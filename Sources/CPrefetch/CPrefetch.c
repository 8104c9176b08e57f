// The one function is inline in the header (Swift inlines it where it is called).
#include "CPrefetch.h"
