#ifndef VIEWLINE_CPASSWORDHASH_H
#define VIEWLINE_CPASSWORDHASH_H

#include <stddef.h>

/// Hashes `password` with a fresh random salt (yescrypt, libxcrypt's default).
/// Writes a NUL-terminated setting string such as "$y$j9T$...$..." to `out`.
/// Returns 0 on success, -1 on failure.
int vl_password_hash(const char *password, char *out, size_t out_size);

/// Checks `password` against a hash made by vl_password_hash in constant time.
/// Returns 1 when it matches, 0 otherwise.
int vl_password_verify(const char *password, const char *hash);

#endif
