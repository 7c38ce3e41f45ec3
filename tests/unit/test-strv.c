/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "strv.h"

static void test_split_quoted(_unused_ void **state) {
        _cleanup_strv_free_ char **l = NULL, **e = NULL;
        char **x = NULL;

        assert_int_equal(strv_split_quoted("  -a 'b c'  \"d \\\"e\" f\\ g  ", &l), 0);
        assert_int_equal(strv_length(l), 4);
        assert_string_equal(l[0], "-a");
        assert_string_equal(l[1], "b c");
        assert_string_equal(l[2], "d \"e");
        assert_string_equal(l[3], "f g");
        assert_int_equal(strv_split_quoted("", &e), 0);
        assert_int_equal(strv_length(e), 0);
        assert_int_equal(strv_split_quoted("'open", &x), -EINVAL);
        assert_int_equal(strv_split_quoted("end\\", &x), -EINVAL);
        assert_null(x);
}

static void test_basic(_unused_ void **state) {
        _cleanup_strv_free_ char **l = NULL, **c = NULL;

        assert_int_equal(strv_extend(&l, "a"), 0);
        assert_int_equal(strv_extend(&l, "b"), 0);
        assert_true(strv_contains(l, "b"));
        assert_false(strv_contains(l, "c"));
        c = strv_copy(l);
        assert_true(strv_equal(l, c));
        assert_int_equal(strv_extend(&c, "c"), 0);
        assert_false(strv_equal(l, c));
        assert_true(strv_equal(NULL, NULL));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_split_quoted),
                cmocka_unit_test(test_basic),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
