/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "expand.h"
#include "macro.h"

static const ExpandVariable vars[] = {
        { "PORT", "9001" }, { "QUERY_PORT", "9601" }, { "SERVER_ID", "1" },
        { "ALLOCATION_UUID", "" }, { "HOME", "/srv/h" },
};

static void check(const char *in, const char *expected) {
        _cleanup_free_ char *out = NULL;
        assert_int_equal(expand_variables(in, vars, ELEMENTSOF(vars), &out, NULL), 0);
        assert_string_equal(out, expected);
}

static void test_expands(_unused_ void **state) {
        check("-port=${PORT}", "-port=9001");
        check("${PORT}${QUERY_PORT}", "90019601");
        check("${HOME}/logs/${SERVER_ID}.log", "/srv/h/logs/1.log");
        check("uuid=${ALLOCATION_UUID}.", "uuid=.");
        check("plain", "plain");
        check("", "");
        check("$PORT and $ alone", "$PORT and $ alone");
}

static void test_rejects(_unused_ void **state) {
        const char *bad = NULL, *in;
        char *out = (char *) 0x1;

        in = "x${NOPE}y";
        assert_int_equal(expand_variables(in, vars, ELEMENTSOF(vars), &out, &bad), -EINVAL);
        assert_ptr_equal(bad, in + 1);
        assert_ptr_equal(out, (char *) 0x1);
        in = "${PORT";
        assert_int_equal(expand_variables(in, vars, ELEMENTSOF(vars), &out, &bad), -EINVAL);
        assert_ptr_equal(bad, in);
        in = "${}";
        assert_int_equal(expand_variables(in, vars, ELEMENTSOF(vars), &out, &bad), -EINVAL);
        /* A name must match whole, not as a prefix. */
        assert_int_equal(expand_variables("${PORTS}", vars, ELEMENTSOF(vars), &out, NULL), -EINVAL);
}

static void test_known_names(_unused_ void **state) {
        assert_int_equal(expand_n_known_names, 7);
        assert_string_equal(expand_known_names[0], "PORT");
        assert_string_equal(expand_known_names[5], "HOME");
        assert_string_equal(expand_known_names[6], "BUILD_CONFIGURATION");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_expands),
                cmocka_unit_test(test_rejects),
                cmocka_unit_test(test_known_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
