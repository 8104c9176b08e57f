#pragma once
#include <stddef.h>
#include <stdint.h>

/// SHA-256 of `length` bytes at `data` into `digest` (32 bytes), from the system's
/// libcrypto (OpenSSL). Returns 1 on success.
int viewline_sha256(const uint8_t *data, size_t length, uint8_t digest[32]);

/// SHA-1 of `length` bytes at `data` into `digest` (20 bytes): only for the WebSocket
/// handshake's `Sec-WebSocket-Accept` (RFC 6455 §4.2.2), never for security. Returns 1
/// on success.
int viewline_sha1(const uint8_t *data, size_t length, uint8_t digest[20]);

/// HMAC-SHA-256 (RFC 2104) of `length` bytes at `data` under `keyLength` bytes of `key`,
/// into `mac` (32 bytes), from the system's libcrypto. Returns 1 on success.
int viewline_hmac_sha256(const uint8_t *key, size_t keyLength, const uint8_t *data, size_t length, uint8_t mac[32]);
