/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "config.h"

/* Every parser must leave *ret alone on failure: callers keep the old value on a bad reload. */
#define SENTINEL_U64 UINT64_C(0xdeadbeefcafe)

static void check_duration(const char *s, int expect_r, usec_t expect) {
        usec_t v = SENTINEL_U64;

        assert_int_equal(parse_duration(s, &v), expect_r);
        assert_int_equal(v, expect_r == 0 ? expect : SENTINEL_U64);
}

static void test_duration(_unused_ void **state) {
        check_duration("0", 0, 0);
        check_duration("0ms", 0, 0);
        check_duration("250ms", 0, 250 * USEC_PER_MSEC);
        check_duration("10s", 0, 10 * USEC_PER_SEC);
        check_duration("10", 0, 10 * USEC_PER_SEC);
        check_duration("010", 0, 10 * USEC_PER_SEC); /* decimal, not octal */
        check_duration("5m", 0, 5 * USEC_PER_MINUTE);
        check_duration("30m", 0, 30 * USEC_PER_MINUTE);
        check_duration("1h", 0, USEC_PER_HOUR);
        check_duration("48h", 0, 48 * USEC_PER_HOUR);

        check_duration("", -EINVAL, 0);
        check_duration("-1", -EINVAL, 0);
        check_duration("-1s", -EINVAL, 0);
        check_duration("+1s", -EINVAL, 0);
        check_duration("1.5s", -EINVAL, 0);
        check_duration("10 s", -EINVAL, 0);
        check_duration(" 10s", -EINVAL, 0);
        check_duration("10s ", -EINVAL, 0);
        check_duration("1x", -EINVAL, 0);
        check_duration("1d", -EINVAL, 0);
        check_duration("10S", -EINVAL, 0);
        check_duration("1h30m", -EINVAL, 0);
        check_duration("s", -EINVAL, 0);
        check_duration("ms", -EINVAL, 0);
        check_duration("0x10", -EINVAL, 0);
        check_duration("99999999999999999999x", -EINVAL, 0);

        check_duration("99999999999999999999", -ERANGE, 0);
        check_duration("99999999999999999999ms", -ERANGE, 0);
        check_duration("18446744073709551615ms", -ERANGE, 0);
        check_duration("5124095577h", -ERANGE, 0);
        check_duration("5124095576h", 0, UINT64_C(5124095576) * USEC_PER_HOUR);
}

static void check_size(const char *s, int expect_r, uint64_t expect) {
        uint64_t v = SENTINEL_U64;

        assert_int_equal(parse_size(s, &v), expect_r);
        assert_int_equal(v, expect_r == 0 ? expect : SENTINEL_U64);
}

static void test_size(_unused_ void **state) {
        check_size("0", 0, 0);
        check_size("512", 0, 512);
        check_size("512K", 0, 512 * 1024);
        check_size("200M", 0, UINT64_C(200) << 20);
        check_size("2G", 0, UINT64_C(2) << 30);
        check_size("1T", 0, UINT64_C(1) << 40);
        check_size("16777215T", 0, UINT64_C(16777215) << 40);
        check_size("18446744073709551615", 0, UINT64_MAX);

        check_size("", -EINVAL, 0);
        check_size("-1", -EINVAL, 0);
        check_size("-1G", -EINVAL, 0);
        check_size("1.5G", -EINVAL, 0);
        check_size("200MB", -EINVAL, 0);
        check_size("200m", -EINVAL, 0);
        check_size("10 M", -EINVAL, 0);
        check_size("1x", -EINVAL, 0);
        check_size("G", -EINVAL, 0);
        check_size("1P", -EINVAL, 0);

        check_size("99999999999999999999G", -ERANGE, 0);
        check_size("99999999999999999999", -ERANGE, 0);
        check_size("18446744073709551616", -ERANGE, 0);
        check_size("16777216T", -ERANGE, 0);
        check_size("17179869184G", -ERANGE, 0);
}

static void check_double(int (*parse)(const char *, double *), const char *s, int expect_r,
                         double expect) {
        double v = -42.0;

        assert_int_equal(parse(s, &v), expect_r);
        if (expect_r == 0)
                assert_true(v - expect < 1e-12 && expect - v < 1e-12);
        else
                assert_true(v == -42.0);
}

static void test_percent(_unused_ void **state) {
        check_double(parse_percent, "10%", 0, 0.10);
        check_double(parse_percent, "0%", 0, 0.0);
        check_double(parse_percent, "12.5%", 0, 0.125);
        check_double(parse_percent, "150%", 0, 1.5);
        check_double(parse_percent, "007%", 0, 0.07);

        check_double(parse_percent, "10", -EINVAL, 0);
        check_double(parse_percent, "0.1", -EINVAL, 0);
        check_double(parse_percent, "10 %", -EINVAL, 0);
        check_double(parse_percent, "%", -EINVAL, 0);
        check_double(parse_percent, "-5%", -EINVAL, 0);
        check_double(parse_percent, "10%%", -EINVAL, 0);
        check_double(parse_percent, "", -EINVAL, 0);
        check_double(parse_percent, "1e3%", -EINVAL, 0);
        check_double(parse_percent, "10.%", -EINVAL, 0);
        check_double(parse_percent, ".5%", -EINVAL, 0);
        check_double(parse_percent, "1x", -EINVAL, 0);

        check_double(parse_percent, "99999999999999999999%", -ERANGE, 0);
}

static void test_cpu(_unused_ void **state) {
        check_double(parse_cpu, "0.5", 0, 0.5);
        check_double(parse_cpu, "50%", 0, 0.5);
        check_double(parse_cpu, "2", 0, 2.0);
        check_double(parse_cpu, "1.25", 0, 1.25);
        check_double(parse_cpu, "150%", 0, 1.5);
        check_double(parse_cpu, "0.000000001", 0, 1e-9);
        check_double(parse_cpu, "1000000", 0, 1e6);

        check_double(parse_cpu, "0", -ERANGE, 0);
        check_double(parse_cpu, "0.0", -ERANGE, 0);
        check_double(parse_cpu, "0%", -ERANGE, 0);
        check_double(parse_cpu, "1000001", -ERANGE, 0);
        check_double(parse_cpu, "99999999999999999999", -ERANGE, 0);
        check_double(parse_cpu, "99999999999999999999%", -ERANGE, 0);

        check_double(parse_cpu, "-1", -EINVAL, 0);
        check_double(parse_cpu, "lots", -EINVAL, 0);
        check_double(parse_cpu, "", -EINVAL, 0);
        check_double(parse_cpu, ".5", -EINVAL, 0);
        check_double(parse_cpu, "5.", -EINVAL, 0);
        check_double(parse_cpu, "1e2", -EINVAL, 0);
        check_double(parse_cpu, "nan", -EINVAL, 0);
        check_double(parse_cpu, "inf", -EINVAL, 0);
        check_double(parse_cpu, "0x1", -EINVAL, 0);
        check_double(parse_cpu, "1,5", -EINVAL, 0);
        check_double(parse_cpu, "50 %", -EINVAL, 0);
        check_double(parse_cpu, "1.0000000001", -EINVAL, 0);
        check_double(parse_cpu, "2 cores", -EINVAL, 0);

        /* parse_cores() is the same but takes 0 (machine.reserved_cpus). */
        check_double(parse_cores, "0", 0, 0.0);
        check_double(parse_cores, "0%", 0, 0.0);
        check_double(parse_cores, "1.5", 0, 1.5);
        check_double(parse_cores, "-0", -EINVAL, 0);
}

static void check_boolean(const char *s, int expect_r, bool expect) {
        bool v = !expect;

        assert_int_equal(parse_boolean(s, &v), expect_r);
        if (expect_r == 0)
                assert_int_equal(v, expect);
        else
                assert_int_equal(v, !expect);
}

static void test_boolean(_unused_ void **state) {
        check_boolean("yes", 0, true);
        check_boolean("true", 0, true);
        check_boolean("on", 0, true);
        check_boolean("1", 0, true);
        check_boolean("YES", 0, true);
        check_boolean("no", 0, false);
        check_boolean("false", 0, false);
        check_boolean("off", 0, false);
        check_boolean("0", 0, false);
        check_boolean("Off", 0, false);

        check_boolean("", -EINVAL, true);
        check_boolean("y", -EINVAL, true);
        check_boolean("2", -EINVAL, false);
        check_boolean("yes ", -EINVAL, true);
        check_boolean("enable", -EINVAL, true);
}

static void check_signal(const char *s, int expect_r, int expect) {
        int v = -7;

        assert_int_equal(parse_signal(s, &v), expect_r);
        assert_int_equal(v, expect_r == 0 ? expect : -7);
}

static void test_signal(_unused_ void **state) {
        check_signal("SIGSEGV", 0, SIGSEGV);
        check_signal("SEGV", 0, SIGSEGV);
        check_signal("11", 0, SIGSEGV);
        check_signal("sigterm", 0, SIGTERM);
        check_signal("KILL", 0, SIGKILL);
        check_signal("SIGHUP", 0, SIGHUP);
        check_signal("SIGUSR1", 0, SIGUSR1);
        check_signal("SIGSYS", 0, SIGSYS);
        check_signal("SIGIOT", 0, SIGABRT);
        check_signal("1", 0, 1);
        check_signal("31", 0, 31);

        check_signal("", -EINVAL, 0);
        check_signal("SIG", -EINVAL, 0);
        check_signal("SIGFOO", -EINVAL, 0);
        check_signal("SIG11", -EINVAL, 0);
        check_signal("SIGRTMIN", -EINVAL, 0);
        check_signal("-1", -EINVAL, 0);
        check_signal("11x", -EINVAL, 0);
        check_signal(" SIGSEGV", -EINVAL, 0);

        check_signal("0", -ERANGE, 0);
        check_signal("32", -ERANGE, 0);
        check_signal("64", -ERANGE, 0);
        check_signal("99999999999", -ERANGE, 0);
}

static void check_port(const char *s, int expect_r, uint16_t expect) {
        uint16_t v = 4242;

        assert_int_equal(parse_port(s, &v), expect_r);
        assert_int_equal(v, expect_r == 0 ? expect : 4242);
}

static void test_port(_unused_ void **state) {
        check_port("1", 0, 1);
        check_port("9000", 0, 9000);
        check_port("65535", 0, 65535);

        check_port("0", -ERANGE, 0);
        check_port("65536", -ERANGE, 0);
        check_port("99999999999999999999", -ERANGE, 0);

        check_port("", -EINVAL, 0);
        check_port("-1", -EINVAL, 0);
        check_port("80 ", -EINVAL, 0);
        check_port("0x50", -EINVAL, 0);
        check_port("http", -EINVAL, 0);
}

static void test_unsigned(_unused_ void **state) {
        unsigned u = 77;
        uint64_t v = 77;

        assert_int_equal(parse_unsigned("0", &u), 0);
        assert_int_equal(u, 0);
        assert_int_equal(parse_unsigned("4294967295", &u), 0);
        assert_int_equal(u, 4294967295U);

        u = 77;
        assert_int_equal(parse_unsigned("4294967296", &u), -ERANGE);
        assert_int_equal(parse_unsigned("99999999999999999999", &u), -ERANGE);
        assert_int_equal(parse_unsigned("", &u), -EINVAL);
        assert_int_equal(parse_unsigned("+1", &u), -EINVAL);
        assert_int_equal(parse_unsigned("-0", &u), -EINVAL);
        assert_int_equal(parse_unsigned("1 ", &u), -EINVAL);
        assert_int_equal(parse_unsigned("1x", &u), -EINVAL);
        assert_int_equal(u, 77);

        assert_int_equal(parse_uint64("18446744073709551615", &v), 0);
        assert_int_equal(v, UINT64_MAX);
        v = 77;
        assert_int_equal(parse_uint64("18446744073709551616", &v), -ERANGE);
        assert_int_equal(parse_uint64("-1", &v), -EINVAL);
        assert_int_equal(v, 77);
}

static void test_format_bytes(_unused_ void **state) {
        char buf[FORMAT_BYTES_MAX];

        assert_string_equal(format_bytes(0, buf), "0 bytes");
        assert_string_equal(format_bytes(1023, buf), "1023 bytes");
        assert_string_equal(format_bytes(1024, buf), "1K");
        assert_string_equal(format_bytes(UINT64_C(200) << 20, buf), "200M");
        assert_string_equal(format_bytes(UINT64_C(1536) << 20, buf), "1.5G");
        assert_string_equal(format_bytes(UINT64_C(3) << 40, buf), "3T");
        assert_string_equal(format_bytes(UINT64_C(5000) << 40, buf), "5000T");
        assert_string_equal(format_bytes(UINT64_MAX, buf), "16777216.0T");
}

static void test_query_type(_unused_ void **state) {
        assert_string_equal(query_type_to_string(QUERY_NONE), "none");
        assert_string_equal(query_type_to_string(QUERY_SQP), "sqp");
        assert_string_equal(query_type_to_string(QUERY_A2S), "a2s");
        assert_null(query_type_to_string(_QUERY_TYPE_MAX));
        assert_null(query_type_to_string((QueryType) -1));

        assert_int_equal(query_type_from_string("none"), QUERY_NONE);
        assert_int_equal(query_type_from_string("sqp"), QUERY_SQP);
        assert_int_equal(query_type_from_string("a2s"), QUERY_A2S);
        assert_int_equal((int) query_type_from_string("SQP"), -1);
        assert_int_equal((int) query_type_from_string(""), -1);
        assert_int_equal((int) query_type_from_string(NULL), -1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_duration),
                cmocka_unit_test(test_size),
                cmocka_unit_test(test_percent),
                cmocka_unit_test(test_cpu),
                cmocka_unit_test(test_boolean),
                cmocka_unit_test(test_signal),
                cmocka_unit_test(test_port),
                cmocka_unit_test(test_unsigned),
                cmocka_unit_test(test_format_bytes),
                cmocka_unit_test(test_query_type),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
