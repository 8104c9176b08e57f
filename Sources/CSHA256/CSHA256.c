#include "CSHA256.h"
#include <openssl/evp.h>

int viewline_sha256(const uint8_t *data, size_t length, uint8_t digest[32]) {
    unsigned int size = 0;
    return EVP_Digest(data, length, digest, &size, EVP_sha256(), NULL) == 1 && size == 32;
}

int viewline_sha1(const uint8_t *data, size_t length, uint8_t digest[20]) {
    unsigned int size = 0;
    return EVP_Digest(data, length, digest, &size, EVP_sha1(), NULL) == 1 && size == 20;
}

#include <openssl/hmac.h>

int viewline_hmac_sha256(const uint8_t *key, size_t keyLength, const uint8_t *data, size_t length, uint8_t mac[32]) {
    unsigned int size = 0;
    return HMAC(EVP_sha256(), key, (int)keyLength, data, length, mac, &size) != NULL && size == 32;
}
