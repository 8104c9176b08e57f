#pragma once

#include <malloc.h>

/// Makes every allocation of at least `bytes` its own mapping, given back to the
/// system when freed (glibc's M_MMAP_THRESHOLD, fixed). Without it glibc raises the
/// threshold each time a large block is freed and keeps such blocks in its heap: a
/// server whose slow readers' output backlogs grow to a megabyte and are cut off
/// would go on holding memory that no budget of its counts. Returns whether glibc
/// took the setting.
static inline int viewline_return_large_allocations(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}
