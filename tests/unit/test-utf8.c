/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macro.h"
#include "utf8.h"

static void check(const char *in, const char *expected) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s", in);
        utf8_sanitize(buf);
        assert_string_equal(buf, expected);
}

static void test_sanitize(void **state) {
        check("plain", "plain");
        check("caf\xc3\xa9", "caf\xc3\xa9");                  /* é */
        check("\xe2\x82\xac", "\xe2\x82\xac");                 /* € */
        check("\xf0\x9f\x8e\xae", "\xf0\x9f\x8e\xae");         /* 🎮 */
        check("a\xff" "b", "a?b");
        check("\xc3", "?");                                    /* truncated at the end */
        check("\xc3(", "?(");
        check("\xc0\xaf", "??");                               /* overlong '/' */
        check("\xe0\x80\xaf", "???");                          /* overlong */
        check("\xed\xa0\x80", "???");                          /* surrogate U+D800 */
        check("\xf4\x90\x80\x80", "????");                     /* above U+10FFFF */
        check("\x80\x80", "??");                               /* stray continuations */
        check("", "");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sanitize),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
