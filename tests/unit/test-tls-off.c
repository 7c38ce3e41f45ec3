/* SPDX-License-Identifier: MIT */
/* localproxy/tls-off.c with Debian's static libmicrohttpd, as slotd-proxy links them: a
 * daemon without TLS starts, one asked for TLS does not (never a plaintext fallback), and
 * libmicrohttpd's constructor (MHD_init) ran without gnutls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>

static enum MHD_Result answer(void *cls, struct MHD_Connection *connection, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls) {
        return MHD_NO;
}

static char mhd_log[1024];

static void logger(void *cls, const char *fm, va_list ap) {
        size_t n = strlen(mhd_log);

        if (n < sizeof(mhd_log) - 1)
                (void) vsnprintf(mhd_log + n, sizeof(mhd_log) - n, fm, ap);
}

static void test_plain_daemon_starts(void **state) {
        struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, answer,
                                                NULL, MHD_OPTION_END);

        assert_non_null(d);
        MHD_stop_daemon(d);
}

static void test_tls_daemon_refused(void **state) {
        static const char cert[] = "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n";
        struct MHD_Daemon *d;

        mhd_log[0] = '\0';
        d = MHD_start_daemon(MHD_USE_NO_LISTEN_SOCKET | MHD_USE_TLS | MHD_USE_ERROR_LOG, 0, NULL,
                             NULL, answer, NULL, MHD_OPTION_EXTERNAL_LOGGER, logger, NULL,
                             MHD_OPTION_HTTPS_MEM_KEY, cert, MHD_OPTION_HTTPS_MEM_CERT, cert,
                             MHD_OPTION_END);

        assert_null(d);
        /* Refused where TLS starts (gnutls_priority_init), before any certificate is read:
         * with gnutls, this bogus certificate would have been its reason ("GnuTLS failed to
         * setup x509 certificate/key"). */
        assert_non_null(strstr(mhd_log, "Failed to initialize TLS support"));
        assert_null(strstr(mhd_log, "x509"));
        if (d)
                MHD_stop_daemon(d);
}

static void test_libmicrohttpd_reports_tls(void **state) {
        /* Built with HTTPS (Debian's), so it asks gnutls: ours, which refuses at the start. */
        assert_int_equal(gnutls_priority_init(NULL, "NORMAL", NULL), GNUTLS_E_UNIMPLEMENTED_FEATURE);
        assert_string_equal(gnutls_strerror(GNUTLS_E_UNIMPLEMENTED_FEATURE),
                            "TLS is not built into slotd-proxy");
        assert_int_equal(gnutls_global_init(), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_plain_daemon_starts),
                cmocka_unit_test(test_tls_daemon_refused),
                cmocka_unit_test(test_libmicrohttpd_reports_tls),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
