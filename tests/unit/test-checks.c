/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "checks.h"
#include "macro.h"

static void test_cpu(void **state) {
        /* Multiplay's rule: within budget + 10 %. */
        assert_true(check_cpu_ok(0.0, 1.0, 0.10));
        assert_true(check_cpu_ok(1.10, 1.0, 0.10));
        assert_false(check_cpu_ok(1.11, 1.0, 0.10));
        assert_true(check_cpu_ok(0.55, 0.5, 0.10));
        assert_false(check_cpu_ok(0.56, 0.5, 0.10));
        assert_false(check_cpu_ok(0.51, 0.5, 0.0));
        assert_true(check_cpu_ok(2.9, 1.0, 2.0));
}

static void test_memory(void **state) {
        uint64_t M = 1024 * 1024;
        /* Multiplay's rule: within budget + 200 MB. */
        assert_true(check_memory_ok(512 * M + 200 * M, 512 * M, 200 * M));
        assert_false(check_memory_ok(512 * M + 200 * M + 1, 512 * M, 200 * M));
        assert_true(check_memory_ok(0, 0, 0));
        /* No overflow near the top. */
        assert_true(check_memory_ok(UINT64_MAX, UINT64_MAX - 5, 10));
}

static void test_cpu_cores_used(void **state) {
        assert_true(cpu_cores_used(0, 1500000, 1000000) > 1.49);
        assert_true(cpu_cores_used(0, 1500000, 1000000) < 1.51);
        assert_true(cpu_cores_used(100, 100, 1000000) == 0.0);
        /* A counter that went backwards (a new cgroup) and no elapsed time give 0. */
        assert_true(cpu_cores_used(500, 100, 1000000) == 0.0);
        assert_true(cpu_cores_used(0, 100, 0) == 0.0);
}

static void test_strikes(void **state) {
        TimeWindow w = {};
        usec_t min = USEC_PER_MINUTE;
        StrikeVerdict v;

        /* Three failures within 30 minutes act; the third is the one. */
        v = strike_record(&w, 0 * min, 30 * min, 3);
        assert_int_equal(v.strikes, 1);
        assert_false(v.act);
        v = strike_record(&w, 10 * min, 30 * min, 3);
        assert_int_equal(v.strikes, 2);
        assert_false(v.act);
        v = strike_record(&w, 20 * min, 30 * min, 3);
        assert_int_equal(v.strikes, 3);
        assert_true(v.act);

        /* Spread over more than the window: the oldest no longer counts. */
        time_window_reset(&w);
        strike_record(&w, 0, 30 * min, 3);
        strike_record(&w, 20 * min, 30 * min, 3);
        v = strike_record(&w, 31 * min, 30 * min, 3);
        assert_int_equal(v.strikes, 2);
        assert_false(v.act);
        v = strike_record(&w, 40 * min, 30 * min, 3);
        assert_int_equal(v.strikes, 3);
        assert_true(v.act);

        /* One strike needed acts at once. */
        time_window_reset(&w);
        assert_true(strike_record(&w, 5, min, 1).act);
}

static void test_names(void **state) {
        assert_string_equal(check_kind_to_string(CHECK_CPU), "cpu");
        assert_string_equal(check_kind_to_string(CHECK_MEMORY), "memory");
        assert_string_equal(check_kind_to_string(CHECK_QUERY), "query");
        assert_string_equal(check_kind_to_string(CHECK_HEARTBEAT), "heartbeat");
        assert_string_equal(check_kind_to_string(_CHECK_KIND_MAX), "invalid");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cpu),
                cmocka_unit_test(test_memory),
                cmocka_unit_test(test_cpu_cores_used),
                cmocka_unit_test(test_strikes),
                cmocka_unit_test(test_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
