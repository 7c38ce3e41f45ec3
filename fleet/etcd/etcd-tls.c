/* SPDX-License-Identifier: MIT */
/* TLS for etcd's HTTP/2 connections (etcd-tls.h), on gnutls. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-tls.h"
#include "macro.h"

static char *error_of(const char *what, const char *file, int code) {
        char *m = NULL;

        if (asprintf(&m, "%s%s%s: %s", what, file ? " " : "", file ?: "",
                     gnutls_strerror(code)) < 0)
                return NULL;
        return m;
}

int etcd_tls_credentials_new(gnutls_certificate_credentials_t *ret, const char *ca_file,
                             const char *cert_file, const char *key_file, char **ret_error) {
        gnutls_certificate_credentials_t c;
        int r;

        *ret_error = NULL;
        if (gnutls_certificate_allocate_credentials(&c) < 0)
                return -ENOMEM;
        /* set_x509_*: the number of certificates read (0 for an empty file), or an error */
        r = ca_file ? gnutls_certificate_set_x509_trust_file(c, ca_file, GNUTLS_X509_FMT_PEM)
                    : gnutls_certificate_set_x509_system_trust(c);
        if (r == 0 && ca_file)
                r = GNUTLS_E_NO_CERTIFICATE_FOUND;
        if (r < 0) {
                *ret_error = error_of(ca_file ? "reading the CA file" : "the system's trust store",
                                      ca_file, r);
                goto fail;
        }
        if (cert_file || key_file) {
                r = gnutls_certificate_set_x509_key_file(c, cert_file ?: key_file,
                                                         key_file ?: cert_file,
                                                         GNUTLS_X509_FMT_PEM);
                if (r < 0) {
                        *ret_error = error_of("reading the client certificate and key",
                                              cert_file ?: key_file, r);
                        goto fail;
                }
        }
        *ret = c;
        return 0;
fail:
        gnutls_certificate_free_credentials(c);
        return *ret_error ? -EIO : -ENOMEM;
}

static bool is_address(const char *host) {
        struct in6_addr a;

        return inet_pton(AF_INET, host, &a) == 1 || inet_pton(AF_INET6, host, &a) == 1;
}

int etcd_tls_session_new(gnutls_session_t *ret, gnutls_certificate_credentials_t creds, int fd,
                         const char *host) {
        static const gnutls_datum_t h2 = { .data = (unsigned char *) "h2", .size = 2 };
        gnutls_session_t s;

        /* NO_SIGNAL: a connection etcd reset is an error, not the SIGPIPE that would end the
         * process (the registry keeps the signal's default). FORCE_CLIENT_CERT: our
         * certificate goes even when its issuer is not among the CAs etcd names, so that etcd
         * (not our guess) decides, and says why in its log. */
        if (gnutls_init(&s, GNUTLS_CLIENT | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL |
                                    GNUTLS_FORCE_CLIENT_CERT) < 0)
                return -ENOMEM;
        if (gnutls_set_default_priority(s) < 0 ||
            gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, creds) < 0 ||
            gnutls_alpn_set_protocols(s, &h2, 1, GNUTLS_ALPN_MANDATORY) < 0 ||
            /* SNI is for names only (RFC 6066); an address is checked against IP SANs */
            (!is_address(host) &&
             gnutls_server_name_set(s, GNUTLS_NAME_DNS, host, strlen(host)) < 0)) {
                gnutls_deinit(s);
                return -ENOMEM;
        }
        gnutls_session_set_verify_cert(s, host, 0);
        gnutls_transport_set_int(s, fd);
        gnutls_handshake_set_timeout(s, 0); /* etcd-h2.c's connect timer ends it */
        *ret = s;
        return 0;
}

char *etcd_tls_error(gnutls_session_t s, int code) {
        char *m = NULL;

        if (code == GNUTLS_E_FATAL_ALERT_RECEIVED || code == GNUTLS_E_WARNING_ALERT_RECEIVED) {
                const char *alert = gnutls_alert_get_name(gnutls_alert_get(s));
                if (asprintf(&m, "TLS: etcd sent the alert \"%s\"", alert ?: "(unknown)") < 0)
                        return NULL;
                return m;
        }
        return error_of("TLS", NULL, code);
}

/* Why etcd's certificate was not trusted, in gnutls' words. */
static char *verify_error(gnutls_session_t s) {
        gnutls_datum_t out = {};
        char *m = NULL;
        unsigned status = gnutls_session_get_verify_cert_status(s);

        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) < 0)
                return strdup("TLS: etcd's certificate could not be verified");
        if (asprintf(&m, "TLS: etcd's certificate: %s", (const char *) out.data) < 0)
                m = NULL;
        for (size_t n = m ? strlen(m) : 0; n > 0 && m[n - 1] == ' '; n--)
                m[n - 1] = '\0'; /* gnutls ends each reason with a space */
        gnutls_free(out.data);
        return m;
}

int etcd_tls_handshake(gnutls_session_t s, char **ret_error) {
        gnutls_datum_t alpn = {};
        int r;

        *ret_error = NULL;
        r = gnutls_handshake(s);
        if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
                return 0;
        if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
                *ret_error = verify_error(s);
                return -EIO;
        }
        if (r < 0) {
                *ret_error = etcd_tls_error(s, r);
                return -EIO;
        }
        if (gnutls_alpn_get_selected_protocol(s, &alpn) < 0 || alpn.size != 2 ||
            memcmp(alpn.data, "h2", 2) != 0) {
                *ret_error = strdup("TLS: etcd did not agree to HTTP/2 (ALPN \"h2\")");
                return -EIO;
        }
        return 1;
}

ssize_t etcd_tls_send(gnutls_session_t s, const void *data, size_t size, char **ret_error) {
        ssize_t w = gnutls_record_send(s, data, size);

        if (w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED)
                return -EAGAIN;
        if (w < 0) {
                *ret_error = etcd_tls_error(s, (int) w);
                return -EIO;
        }
        return w;
}

ssize_t etcd_tls_recv(gnutls_session_t s, void *buf, size_t size, char **ret_error) {
        ssize_t n = gnutls_record_recv(s, buf, size);

        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
                return -EAGAIN;
        if (n == GNUTLS_E_PREMATURE_TERMINATION)
                return 0; /* closed without TLS's close_notify: closed all the same */
        if (n < 0) {
                *ret_error = etcd_tls_error(s, (int) n);
                return -EIO;
        }
        return n;
}
