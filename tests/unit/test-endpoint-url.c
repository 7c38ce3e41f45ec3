/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "endpoint-url.h"
#include "macro.h"

static void test_forms(_unused_ void **state) {
        EndpointURL u;
        char a[64];

        assert_int_equal(endpoint_url_parse("http://127.0.0.1:2379", &u), 0);
        assert_false(u.tls);
        assert_string_equal(u.host, "127.0.0.1");
        assert_int_equal(u.port, 2379);
        assert_int_equal(endpoint_url_authority(&u, a, sizeof(a)), 0);
        assert_string_equal(a, "127.0.0.1:2379");

        assert_int_equal(endpoint_url_parse("https://etcd-1.example.net:65535", &u), 0);
        assert_true(u.tls);
        assert_string_equal(u.host, "etcd-1.example.net");
        assert_int_equal(u.port, 65535);

        assert_int_equal(endpoint_url_parse("http://[::1]:1", &u), 0);
        assert_string_equal(u.host, "::1");
        assert_int_equal(u.port, 1);
        assert_int_equal(endpoint_url_authority(&u, a, sizeof(a)), 0);
        assert_string_equal(a, "[::1]:1");
        assert_int_equal(endpoint_url_authority(&u, a, 7), -ENOBUFS);
}

static void test_rejected(_unused_ void **state) {
        static const char *const bad[] = {
                NULL,
                "",
                "127.0.0.1:2379",           /* no scheme */
                "ftp://127.0.0.1:2379",
                "http://127.0.0.1",         /* the port is required */
                "http://127.0.0.1:",
                "http://127.0.0.1:0",
                "http://127.0.0.1:65536",
                "http://127.0.0.1:99999999999999999999",
                "http://127.0.0.1:2379/",   /* no path: the client adds /v3/... */
                "http://127.0.0.1:2379/v3",
                "http://127.0.0.1:+2379",
                "http://127.0.0.1: 2379",
                "http://:2379",
                "http://-etcd:2379",
                "http://.etcd:2379",
                "http://et_cd:2379",
                "http://::1:2379",          /* IPv6 needs its brackets */
                "http://[::1]2379",
                "http://[]:2379",
                "http://[::1:2379",
                "http://[not-v6]:2379",
                "http://[fe80::1%eth0]:2379",
        };
        EndpointURL u = { .port = 7 };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                print_message("%s\n", bad[i] ?: "(null)");
                assert_int_equal(endpoint_url_parse(bad[i], &u), -EINVAL);
                assert_int_equal(u.port, 7); /* not written on failure */
        }
}

static void test_host_length(_unused_ void **state) {
        char url[300] = "http://";
        EndpointURL u;

        memset(url + 7, 'a', 253);
        strcpy(url + 7 + 253, ":2379");
        assert_int_equal(endpoint_url_parse(url, &u), 0);
        assert_int_equal(strlen(u.host), 253);

        memset(url + 7, 'a', 254);
        strcpy(url + 7 + 254, ":2379");
        assert_int_equal(endpoint_url_parse(url, &u), -EINVAL);
}

static void test_sockaddr(_unused_ void **state) {
        struct sockaddr_storage sa;
        EndpointURL u;
        socklen_t len;

        assert_int_equal(endpoint_url_parse("http://127.0.0.2:2379", &u), 0);
        assert_int_equal(endpoint_url_sockaddr(&u, &sa, &len), 0);
        assert_int_equal(sa.ss_family, AF_INET);
        assert_int_equal(len, sizeof(struct sockaddr_in));
        assert_int_equal(ntohs(((struct sockaddr_in *) &sa)->sin_port), 2379);
        assert_int_equal(ntohl(((struct sockaddr_in *) &sa)->sin_addr.s_addr), 0x7f000002);

        assert_int_equal(endpoint_url_parse("https://[::1]:443", &u), 0);
        assert_int_equal(endpoint_url_sockaddr(&u, &sa, &len), 0);
        assert_int_equal(sa.ss_family, AF_INET6);
        assert_int_equal(len, sizeof(struct sockaddr_in6));
        assert_int_equal(ntohs(((struct sockaddr_in6 *) &sa)->sin6_port), 443);
        assert_true(IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *) &sa)->sin6_addr));

        /* A name would need a resolver, which blocks. */
        assert_int_equal(endpoint_url_parse("http://localhost:2379", &u), 0);
        assert_int_equal(endpoint_url_sockaddr(&u, &sa, &len), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_forms),
                cmocka_unit_test(test_rejected),
                cmocka_unit_test(test_host_length),
                cmocka_unit_test(test_sockaddr),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
