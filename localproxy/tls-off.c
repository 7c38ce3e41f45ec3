/* SPDX-License-Identifier: MIT */
/* libmicrohttpd without TLS. The proxy serves plain HTTP on loopback and never starts a
 * libmicrohttpd daemon with MHD_USE_TLS, but Debian's libmicrohttpd is built with HTTPS: its
 * shared library links gnutls, whose loading alone (gnutls and the eight libraries it loads:
 * p11-kit, nettle, hogweed, gmp, unistring, tasn1, idn2, ffi) was 1.7 MiB of the proxy's
 * 2.9 MiB (docs/performance.md, Base memory with the local proxy).
 *
 * So the proxy links Debian's static libmicrohttpd.a (libmicrohttpd-dev) and not gnutls, and
 * this file defines every gnutls function that libmicrohttpd's objects name: what its
 * `--disable-https` build would leave out, decided at link time instead. Each is declared by
 * gnutls's own header, so the compiler checks it against gnutls's prototype. None is called
 * on the proxy's path but gnutls_global_init() (libmicrohttpd's constructor, MHD_init, calls
 * it, TLS or not), which succeeds and does nothing. The others refuse: a daemon asked for TLS
 * would fail to start (gnutls_priority_init, gnutls_certificate_allocate_credentials and
 * gnutls_init fail), loudly, never a plaintext fallback; and a session function reached some
 * other way aborts the proxy, which slotd restarts. */
#include <stdlib.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#define TLS_OFF GNUTLS_E_UNIMPLEMENTED_FEATURE

_Noreturn static void tls_off_called(void) {
        abort();
}

/* Not a function: gnutls exports its allocator as a variable. */
gnutls_alloc_function gnutls_malloc = malloc;

int gnutls_global_init(void) {
        return 0;
}

void gnutls_global_deinit(void) {
}

const char *gnutls_strerror(int error) {
        return error == TLS_OFF ? "TLS is not built into slotd-proxy" : "TLS error";
}

/* What a daemon with MHD_USE_TLS calls first: each fails, and so does MHD_start_daemon. */
int gnutls_priority_init(gnutls_priority_t *priority_cache, const char *priorities,
                         const char **err_pos) {
        return TLS_OFF;
}

void gnutls_priority_deinit(gnutls_priority_t priority_cache) {
}

int gnutls_certificate_allocate_credentials(gnutls_certificate_credentials_t *res) {
        return TLS_OFF;
}

void gnutls_certificate_free_credentials(gnutls_certificate_credentials_t sc) {
}

int gnutls_psk_allocate_server_credentials(gnutls_psk_server_credentials_t *sc) {
        return TLS_OFF;
}

void gnutls_psk_free_server_credentials(gnutls_psk_server_credentials_t sc) {
}

int gnutls_dh_params_init(gnutls_dh_params_t *dh_params) {
        return TLS_OFF;
}

void gnutls_dh_params_deinit(gnutls_dh_params_t dh_params) {
}

int gnutls_dh_params_import_pkcs3(gnutls_dh_params_t params, const gnutls_datum_t *pkcs3_params,
                                  gnutls_x509_crt_fmt_t format) {
        return TLS_OFF;
}

int gnutls_certificate_set_x509_key_mem(gnutls_certificate_credentials_t res,
                                        const gnutls_datum_t *cert, const gnutls_datum_t *key,
                                        gnutls_x509_crt_fmt_t type) {
        return TLS_OFF;
}

int gnutls_certificate_set_x509_key_mem2(gnutls_certificate_credentials_t res,
                                         const gnutls_datum_t *cert, const gnutls_datum_t *key,
                                         gnutls_x509_crt_fmt_t type, const char *pass,
                                         unsigned int flags) {
        return TLS_OFF;
}

int gnutls_certificate_set_x509_trust_mem(gnutls_certificate_credentials_t res,
                                          const gnutls_datum_t *ca, gnutls_x509_crt_fmt_t type) {
        return TLS_OFF;
}

void gnutls_certificate_set_dh_params(gnutls_certificate_credentials_t res,
                                      gnutls_dh_params_t dh_params) {
        tls_off_called();
}

void gnutls_certificate_set_retrieve_function2(gnutls_certificate_credentials_t cred,
                                               gnutls_certificate_retrieve_function2 *func) {
        tls_off_called();
}

void gnutls_certificate_set_retrieve_function3(gnutls_certificate_credentials_t cred,
                                               gnutls_certificate_retrieve_function3 *func) {
        tls_off_called();
}

void gnutls_psk_set_server_credentials_function(gnutls_psk_server_credentials_t cred,
                                                gnutls_psk_server_credentials_function *func) {
        tls_off_called();
}

/* A session: none is ever made (gnutls_init fails). */
int gnutls_init(gnutls_session_t *session, unsigned int flags) {
        return TLS_OFF;
}

void gnutls_deinit(gnutls_session_t session) {
        tls_off_called();
}

int gnutls_alpn_set_protocols(gnutls_session_t session, const gnutls_datum_t *protocols,
                              unsigned protocols_size, unsigned flags) {
        tls_off_called();
}

int gnutls_bye(gnutls_session_t session, gnutls_close_request_t how) {
        tls_off_called();
}

void gnutls_certificate_server_set_request(gnutls_session_t session,
                                           gnutls_certificate_request_t req) {
        tls_off_called();
}

gnutls_cipher_algorithm_t gnutls_cipher_get(gnutls_session_t session) {
        tls_off_called();
}

int gnutls_credentials_set(gnutls_session_t session, gnutls_credentials_type_t type, void *cred) {
        tls_off_called();
}

int gnutls_handshake(gnutls_session_t session) {
        tls_off_called();
}

int gnutls_priority_set(gnutls_session_t session, gnutls_priority_t priority) {
        tls_off_called();
}

gnutls_protocol_t gnutls_protocol_get_version(gnutls_session_t session) {
        tls_off_called();
}

size_t gnutls_record_check_pending(gnutls_session_t session) {
        tls_off_called();
}

int gnutls_record_get_direction(gnutls_session_t session) {
        tls_off_called();
}

ssize_t gnutls_record_recv(gnutls_session_t session, void *data, size_t data_size) {
        tls_off_called();
}

ssize_t gnutls_record_send(gnutls_session_t session, const void *data, size_t data_size) {
        tls_off_called();
}

void *gnutls_session_get_ptr(gnutls_session_t session) {
        tls_off_called();
}

void gnutls_session_set_ptr(gnutls_session_t session, void *ptr) {
        tls_off_called();
}

void gnutls_transport_set_int2(gnutls_session_t session, int r, int s) {
        tls_off_called();
}
