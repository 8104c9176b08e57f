#ifndef VIEWLINE_CPSEUDOTERMINAL_H
#define VIEWLINE_CPSEUDOTERMINAL_H

#include <stddef.h>
#include <spawn.h>

/// Opens a pseudo-terminal pair for tests: returns the master fd and writes the
/// slave's path to `name`. Returns -1 on failure.
int vl_open_pseudo_terminal(char *name, size_t size);

/// Adds "close every descriptor from `lowest` up" to a spawn's file actions (glibc's
/// `posix_spawn_file_actions_addclosefrom_np`, which Swift's Glibc module does not
/// show): a test's child, or a daemon it leaves, holds none of the test process's
/// sockets. Returns 0 or an error number.
int vl_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

#endif
