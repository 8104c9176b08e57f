// Header-only target: see include/CEpoll.h.
#include "CEpoll.h"
