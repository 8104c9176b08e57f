#include "CTLSClient.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vl_tls {
    SSL_CTX *context;
    SSL *ssl;
};

static void describe(char *error, size_t size, const char *what) {
    unsigned long code = ERR_get_error();
    char reason[256] = "";
    if (code != 0) ERR_error_string_n(code, reason, sizeof reason);
    snprintf(error, size, "%s%s%s", what, code ? ": " : "", reason);
}

vl_tls *vl_tls_connect(int fd, const char *host, const char *ca_file, char *error, size_t error_size) {
    SSL_CTX *context = SSL_CTX_new(TLS_client_method());
    if (context == NULL) { describe(error, error_size, "cannot create a TLS context"); return NULL; }
    SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, NULL);
    int loaded = ca_file ? SSL_CTX_load_verify_locations(context, ca_file, NULL) : SSL_CTX_set_default_verify_paths(context);
    if (loaded != 1) {
        describe(error, error_size, ca_file ? "cannot read the CA file" : "cannot load the system's CA certificates");
        SSL_CTX_free(context);
        return NULL;
    }
    SSL *ssl = SSL_new(context);
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, host);
    X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host) != 1) X509_VERIFY_PARAM_set1_host(param, host, 0);
    if (SSL_connect(ssl) != 1) {
        long verify = SSL_get_verify_result(ssl);
        if (verify != X509_V_OK) {
            snprintf(error, error_size, "the server's certificate is not trusted: %s", X509_verify_cert_error_string(verify));
        } else {
            describe(error, error_size, "the TLS handshake failed");
        }
        SSL_free(ssl);
        SSL_CTX_free(context);
        return NULL;
    }
    vl_tls *tls = malloc(sizeof *tls);
    tls->context = context;
    tls->ssl = ssl;
    return tls;
}

long vl_tls_read(vl_tls *tls, void *buffer, size_t size) {
    int count = SSL_read(tls->ssl, buffer, (int)size);
    if (count > 0) return count;
    int reason = SSL_get_error(tls->ssl, count);
    return (reason == SSL_ERROR_ZERO_RETURN || reason == SSL_ERROR_SYSCALL) && ERR_peek_error() == 0 ? 0 : -1;
}

int vl_tls_write(vl_tls *tls, const void *buffer, size_t size) {
    size_t done = 0;
    while (done < size) {
        int count = SSL_write(tls->ssl, (const char *)buffer + done, (int)(size - done));
        if (count <= 0) return -1;
        done += (size_t)count;
    }
    return 0;
}

int vl_tls_pending(vl_tls *tls) { return SSL_pending(tls->ssl); }

void vl_tls_close(vl_tls *tls) {
    if (tls == NULL) return;
    SSL_shutdown(tls->ssl);
    SSL_free(tls->ssl);
    SSL_CTX_free(tls->context);
    free(tls);
}
