#include "CPasswordHash.h"

#include <crypt.h>
#include <string.h>

int vl_password_hash(const char *password, char *out, size_t out_size) {
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    // NULL random bytes: libxcrypt draws the salt from the operating system.
    if (crypt_gensalt_rn("$y$", 0, NULL, 0, setting, sizeof setting) == NULL) return -1;
    struct crypt_data data;
    memset(&data, 0, sizeof data);
    const char *hashed = crypt_rn(password, setting, &data, sizeof data);
    if (hashed == NULL || hashed[0] == '*') return -1;
    size_t length = strlen(hashed);
    if (length + 1 > out_size) return -1;
    memcpy(out, hashed, length + 1);
    return 0;
}

int vl_password_verify(const char *password, const char *hash) {
    struct crypt_data data;
    memset(&data, 0, sizeof data);
    const char *hashed = crypt_rn(password, hash, &data, sizeof data);
    if (hashed == NULL || hashed[0] == '*') return 0;
    size_t a = strlen(hashed), b = strlen(hash);
    if (a != b) return 0;
    unsigned char diff = 0;
    for (size_t i = 0; i < a; i++) diff |= (unsigned char)(hashed[i] ^ hash[i]);
    return diff == 0;
}
