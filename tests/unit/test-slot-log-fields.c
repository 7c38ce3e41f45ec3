/* SPDX-License-Identifier: MIT */
/* The journal fields of a slot's entries (slot-log-fields.h): SLOT_ID= and FLEET= always,
 * ALLOCATION_ID= and RESERVATION_ID= while the slot has them, nothing of a session that is
 * over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macro.h"
#include "slot-log-fields.h"

/* The list as one string, "A|B|C", to compare whole. */
static const char *joined(const SlotLogFields *f) {
        static char buf[512];

        buf[0] = '\0';
        for (size_t i = 0; f->list[i]; i++) {
                assert_true(i < SLOT_LOG_FIELDS_MAX);
                if (i > 0)
                        strcat(buf, "|");
                strcat(buf, f->list[i]);
        }
        return buf;
}

static void test_base_fields(_unused_ void **state) {
        SlotLogFields f;

        assert_int_equal(slot_log_fields_init(&f, 3, "shooter"), 0);
        assert_string_equal(joined(&f), "SLOT_ID=3|FLEET=shooter");
        assert_null(f.list[2]);
        slot_log_fields_done(&f);
        for (size_t i = 0; i < ELEMENTSOF(f.list); i++)
                assert_null(f.list[i]);
}

static void test_allocation_comes_and_goes(_unused_ void **state) {
        const char *uuid = "4b2fb2fb-6a86-4a4b-9a43-8f1e0f6c3f3b";
        SlotLogFields f;

        assert_int_equal(slot_log_fields_init(&f, 0, "game"), 0);
        assert_int_equal(slot_log_fields_set(&f, uuid, NULL), 0);
        assert_string_equal(joined(&f),
                            "SLOT_ID=0|FLEET=game|ALLOCATION_ID=4b2fb2fb-6a86-4a4b-9a43-8f1e0f6c3f3b");
        /* Deallocated: the field is gone, the slot's stay. */
        assert_int_equal(slot_log_fields_set(&f, NULL, NULL), 0);
        assert_string_equal(joined(&f), "SLOT_ID=0|FLEET=game");
        /* An empty ID is none (the D-Bus property's way of saying so). */
        assert_int_equal(slot_log_fields_set(&f, "", ""), 0);
        assert_string_equal(joined(&f), "SLOT_ID=0|FLEET=game");
        slot_log_fields_done(&f);
}

static void test_reservation_then_allocation(_unused_ void **state) {
        SlotLogFields f;

        assert_int_equal(slot_log_fields_init(&f, 65535, "a-fleet.eu"), 0);
        assert_int_equal(slot_log_fields_set(&f, NULL, "res-1"), 0);
        assert_string_equal(joined(&f), "SLOT_ID=65535|FLEET=a-fleet.eu|RESERVATION_ID=res-1");
        /* Both, in this order (the list takes what it is given: slot_allocate() ends the
         * reservation first), then the allocation alone. */
        assert_int_equal(slot_log_fields_set(&f, "res-1", "res-1"), 0);
        assert_string_equal(joined(&f),
                            "SLOT_ID=65535|FLEET=a-fleet.eu|ALLOCATION_ID=res-1|RESERVATION_ID=res-1");
        assert_int_equal(slot_log_fields_set(&f, "res-1", NULL), 0);
        assert_string_equal(joined(&f), "SLOT_ID=65535|FLEET=a-fleet.eu|ALLOCATION_ID=res-1");
        /* Set again with the same: the same list, no field twice. */
        assert_int_equal(slot_log_fields_set(&f, "res-1", NULL), 0);
        assert_string_equal(joined(&f), "SLOT_ID=65535|FLEET=a-fleet.eu|ALLOCATION_ID=res-1");
        slot_log_fields_done(&f);
}

static void test_set_needs_init(_unused_ void **state) {
        SlotLogFields f = {};

        assert_int_equal(slot_log_fields_set(&f, "x", NULL), -EINVAL);
        assert_null(f.list[0]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_base_fields),
                cmocka_unit_test(test_allocation_comes_and_goes),
                cmocka_unit_test(test_reservation_then_allocation),
                cmocka_unit_test(test_set_needs_init),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
