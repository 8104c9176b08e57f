#ifndef VIEWLINE_CTLSCLIENT_H
#define VIEWLINE_CTLSCLIENT_H

#include <stddef.h>

/// A TLS connection over a connected, blocking socket (the system OpenSSL).
typedef struct vl_tls vl_tls;

/// Handshakes over `fd`, verifying the server's certificate for `host` against
/// `ca_file` (or the system's trust store when it is NULL). Returns NULL and a
/// message in `error` on failure.
vl_tls *vl_tls_connect(int fd, const char *host, const char *ca_file, char *error, size_t error_size);

/// Reads up to `size` bytes: > 0 bytes read, 0 at the end, -1 on an error.
long vl_tls_read(vl_tls *tls, void *buffer, size_t size);

/// Writes all of `size` bytes: returns 0, or -1 on an error.
int vl_tls_write(vl_tls *tls, const void *buffer, size_t size);

/// Bytes already decrypted and waiting (poll() does not see them).
int vl_tls_pending(vl_tls *tls);

/// Sends close_notify and frees the connection (the socket stays open).
void vl_tls_close(vl_tls *tls);

#endif
