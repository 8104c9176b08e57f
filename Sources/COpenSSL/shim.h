#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
