/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macro.h"
#include "notify.h"

static void test_parse_fields(_unused_ void **state) {
        NotifyMessage m;
        const char msg[] = "READY=1\nSTATUS=Waiting for players\nWATCHDOG=1";

        assert_int_equal(notify_parse(msg, strlen(msg), &m), 0);
        assert_true(m.ready);
        assert_true(m.watchdog);
        assert_false(m.stopping);
        assert_true(m.has_status);
        assert_string_equal(m.status, "Waiting for players");

        assert_int_equal(notify_parse("STOPPING=1\n", 11, &m), 0);
        assert_true(m.stopping);
        assert_false(m.ready);
        /* Unknown assignments are ignored, not errors (as with systemd). */
        assert_int_equal(notify_parse("MAINPID=5", 9, &m), 0);
        assert_false(m.ready);
        /* READY=0 is not READY=1. */
        assert_int_equal(notify_parse("READY=0", 7, &m), 0);
        assert_false(m.ready);
}

static void test_parse_hostile(_unused_ void **state) {
        NotifyMessage m = { .ready = true };
        char big[NOTIFY_MESSAGE_MAX + 1];

        assert_int_equal(notify_parse("", 0, &m), -EBADMSG);
        assert_int_equal(notify_parse("garbage", 7, &m), -EBADMSG);
        assert_int_equal(notify_parse("READY=1\0x", 9, &m), -EBADMSG);
        memset(big, 'a', sizeof(big));
        assert_int_equal(notify_parse(big, sizeof(big), &m), -EBADMSG);
        /* Failure leaves the output alone. */
        assert_true(m.ready);

        /* STATUS is bounded and cleaned of control characters. */
        char status[1000] = "STATUS=";
        memset(status + 7, 'x', 900);
        status[10] = '\x1b';
        assert_int_equal(notify_parse(status, strlen(status), &m), 0);
        assert_int_equal(strlen(m.status), NOTIFY_STATUS_MAX - 1);
        assert_int_equal(m.status[3], '?');

        /* Invalid UTF-8 never reaches D-Bus, which would refuse the whole message. */
        const char bad[] = "STATUS=map \xff\xc3(";
        assert_int_equal(notify_parse(bad, strlen(bad), &m), 0);
        assert_string_equal(m.status, "map ?" "?(");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_fields),
                cmocka_unit_test(test_parse_hostile),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
