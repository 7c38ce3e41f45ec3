/* SPDX-License-Identifier: MIT */
/* core_pattern_resolve(): where the kernel put a server's core, for the patterns core(5)
 * describes: Debian's default "core", core_uses_pid, specifiers, a directory, a pipe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core-pattern.h"
#include "macro.h"

static const CoreProcess proc = {
        .pid = 4242, .uid = 1001, .gid = 1002, .signal = 11,
        .exe = "/srv/game/bin/ShooterServer.x86_64", .hostname = "m7",
};

static CoreWhere resolve(const char *pattern, bool uses_pid, const CoreProcess *p, char *buf) {
        return core_pattern_resolve(pattern, uses_pid, p, buf);
}

static void test_in_cwd(_unused_ void **state) {
        char b[CORE_NAME_MAX];

        assert_int_equal(resolve("core", false, &proc, b), CORE_IN_CWD);
        assert_string_equal(b, "core");
        assert_int_equal(resolve("core", true, &proc, b), CORE_IN_CWD);
        assert_string_equal(b, "core.4242");
        /* %p already there: core_uses_pid adds nothing */
        assert_int_equal(resolve("core.%p", true, &proc, b), CORE_IN_CWD);
        assert_string_equal(b, "core.4242");
        assert_int_equal(resolve("core-%e-%s-%u-%g-%h-%%", false, &proc, b), CORE_IN_CWD);
        assert_string_equal(b, "core-ShooterServer.x-11-1001-1002-m7-%");
        assert_int_equal(resolve("%f.core", false, &proc, b), CORE_IN_CWD);
        assert_string_equal(b, "ShooterServer.x86_64.core");
        assert_int_equal(resolve("c%E", false, &proc, b), CORE_IN_CWD);
        assert_string_equal(b, "c!srv!game!bin!ShooterServer.x86_64");
        /* a lone % at the end is dropped */
        assert_int_equal(resolve("core%", false, &proc, b), CORE_IN_CWD);
        assert_string_equal(b, "core");
}

static void test_elsewhere_and_pipe(_unused_ void **state) {
        char b[CORE_NAME_MAX];

        assert_int_equal(resolve("/var/crash/core.%p", false, &proc, b), CORE_ELSEWHERE);
        assert_string_equal(b, "/var/crash/core.4242");
        assert_int_equal(resolve("cores/core", false, &proc, b), CORE_ELSEWHERE);
        assert_int_equal(resolve("|/lib/systemd/systemd-coredump %P %u %g %s %t 9223372036854775808 %h",
                                 true, &proc, b), CORE_PIPE);
        assert_string_equal(b, "/lib/systemd/systemd-coredump");
        assert_int_equal(resolve("| /usr/share/apport/apport -p%p", false, &proc, b), CORE_PIPE);
        assert_string_equal(b, "/usr/share/apport/apport");
}

static void test_unknown(_unused_ void **state) {
        CoreProcess nopid = proc;
        char b[CORE_NAME_MAX], longer[CORE_NAME_MAX + 8];

        /* what slotd cannot know: the time, the thread, the dump mode */
        assert_int_equal(resolve("core.%t", false, &proc, b), CORE_UNKNOWN);
        assert_int_equal(resolve("core.%i", false, &proc, b), CORE_UNKNOWN);
        assert_int_equal(resolve("core.%d", false, &proc, b), CORE_UNKNOWN);
        nopid.pid = 0;
        assert_int_equal(resolve("core.%p", false, &nopid, b), CORE_UNKNOWN);
        assert_int_equal(resolve("core", true, &nopid, b), CORE_UNKNOWN);
        assert_int_equal(resolve("core", false, &nopid, b), CORE_IN_CWD);
        assert_int_equal(resolve("", false, &proc, b), CORE_UNKNOWN);
        assert_int_equal(resolve("|", false, &proc, b), CORE_UNKNOWN);
        assert_int_equal(resolve("..", false, &proc, b), CORE_UNKNOWN);
        memset(longer, 'c', sizeof(longer) - 1);
        longer[sizeof(longer) - 1] = '\0';
        assert_int_equal(resolve(longer, false, &proc, b), CORE_UNKNOWN);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_in_cwd),
                cmocka_unit_test(test_elsewhere_and_pipe),
                cmocka_unit_test(test_unknown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
