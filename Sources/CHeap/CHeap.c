// The one function is inline in the header (Swift calls it once, at start).
#include "CHeap.h"
