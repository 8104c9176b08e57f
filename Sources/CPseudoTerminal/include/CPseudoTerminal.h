#ifndef VIEWLINE_CPSEUDOTERMINAL_H
#define VIEWLINE_CPSEUDOTERMINAL_H

#include <stddef.h>

/// Opens a pseudo-terminal pair for tests: returns the master fd and writes the
/// slave's path to `name`. Returns -1 on failure.
int vl_open_pseudo_terminal(char *name, size_t size);

#endif
