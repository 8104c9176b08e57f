#define _GNU_SOURCE
#define _XOPEN_SOURCE 600
#include "CPseudoTerminal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int vl_open_pseudo_terminal(char *name, size_t size) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0) return -1;
    if (grantpt(master) != 0 || unlockpt(master) != 0) { close(master); return -1; }
    const char *slave = ptsname(master);
    if (slave == NULL || strlen(slave) + 1 > size) { close(master); return -1; }
    strcpy(name, slave);
    return master;
}

int vl_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}
