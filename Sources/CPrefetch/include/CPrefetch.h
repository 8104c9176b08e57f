#pragma once

/// Asks the CPU to bring the cache lines of `length` bytes at `address` in for a
/// write, without waiting for them: the session timeline fetches its next slot as
/// it writes one, so the next command's entry does not stall on it.
static inline void viewline_prefetch_for_write(const void *address, unsigned long length) {
    const char *start = (const char *)address;
    for (unsigned long offset = 0; offset < length; offset += 64) __builtin_prefetch(start + offset, 1, 3);
    __builtin_prefetch(start + length - 1, 1, 3);
}
