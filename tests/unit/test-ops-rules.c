/* SPDX-License-Identifier: MIT */
/* The operations' pure rules (supervisor/core/ops-rules.c): the right to manage, to act on a
 * slot, to a token; draining; IDs; StopIfFree's free slot. The error texts are the contract's (scripts read them). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macro.h"
#include "ops.h"

static const OpsCaller nobody = { .slot_id = OPS_NO_SLOT, .slot_known = true };
static const OpsCaller manager = { .admin = true, .slot_id = OPS_NO_SLOT, .slot_known = true };
static const OpsCaller server3 = { .slot_id = 3, .slot_known = true };
/* The D-Bus door looks the slot up lazily: an admin not yet looked up. */
static const OpsCaller admin_unlooked = { .admin = true, .slot_id = OPS_NO_SLOT };

static void test_is_admin(_unused_ void **state) {
        const gid_t groups[] = { 100, 27, 1001 };

        assert_true(ops_is_admin(0, NULL, 0, false, 0));
        assert_true(ops_is_admin(0, NULL, 0, true, 27));
        assert_false(ops_is_admin(1000, groups, ELEMENTSOF(groups), false, 27));
        assert_true(ops_is_admin(1000, groups, ELEMENTSOF(groups), true, 27));
        assert_true(ops_is_admin(1000, groups, ELEMENTSOF(groups), true, 1001));
        assert_false(ops_is_admin(1000, groups, ELEMENTSOF(groups), true, 28));
        assert_false(ops_is_admin(1000, NULL, 0, true, 27));
        /* gid 0 as admin_group is a group like any other, not "unset". */
        assert_false(ops_is_admin(1000, groups, ELEMENTSOF(groups), true, 0));
}

static void test_check_admin(_unused_ void **state) {
        OpsStatus st = {};

        assert_int_equal(ops_check_admin(&manager, &st), 0);
        assert_int_equal(st.code, OPS_OK);
        assert_int_equal(ops_check_admin(&server3, &st), -EPERM);
        assert_int_equal(st.code, OPS_ERROR_ACCESS_DENIED);
        assert_string_equal(st.message,
                            "Managing slots needs root or membership of supervisor.admin_group");
        assert_string_equal(ops_error_code_to_string(st.code), "access-denied");
}

static void test_check_slot_caller(_unused_ void **state) {
        OpsStatus st = {};

        assert_int_equal(ops_check_slot_caller(&server3, 3, &st), 0);
        assert_int_equal(ops_check_slot_caller(&manager, 7, &st), 0);
        assert_int_equal(ops_check_slot_caller(&admin_unlooked, 7, &st), 0);
        assert_int_equal(ops_check_slot_caller(&server3, 4, &st), -EPERM);
        assert_int_equal(st.code, OPS_ERROR_ACCESS_DENIED);
        assert_string_equal(st.message, "A game server may act on its own slot only: the caller "
                                        "is in slot 3, not 4");
        /* A server in a slot acts on its own only, even when it runs as an admin. */
        OpsCaller admin_in_slot = server3;
        admin_in_slot.admin = true;
        assert_int_equal(ops_check_slot_caller(&admin_in_slot, 4, &st), -EPERM);
        assert_int_equal(ops_check_slot_caller(&nobody, 5, &st), -EPERM);
        assert_string_equal(st.message, "Acting on slot 5 needs root, membership of "
                                        "supervisor.admin_group or being the slot's own game server");
}

static void test_check_draining(_unused_ void **state) {
        OpsStatus st = {};

        assert_int_equal(ops_check_draining(false, false, "Allocate", &st), 0);
        assert_int_equal(ops_check_draining(true, true, "Allocate", &st), 0);
        assert_int_equal(st.code, OPS_OK);
        assert_int_equal(ops_check_draining(true, false, "Reserve", &st), -EAGAIN);
        assert_int_equal(st.code, OPS_ERROR_DRAINING);
        assert_string_equal(st.message, "Reserve: the machine is draining");
        assert_string_equal(ops_error_code_to_string(st.code), "draining");
}

static void test_token_subject(_unused_ void **state) {
        OpsStatus st = {};
        unsigned server = 99;

        assert_int_equal(ops_token_subject(&server3, &server, &st), 0);
        assert_int_equal(server, 3);
        assert_int_equal(ops_token_subject(&manager, &server, &st), 0);
        assert_int_equal(server, 0);
        server = 99;
        assert_int_equal(ops_token_subject(&nobody, &server, &st), -EPERM);
        assert_int_equal(server, 99);
        assert_int_equal(st.code, OPS_ERROR_ACCESS_DENIED);
        assert_string_equal(st.message,
                            "Managing slots needs root or membership of supervisor.admin_group");
}

static void test_check_id(_unused_ void **state) {
        OpsStatus st = {};

        assert_int_equal(ops_check_id("allocation UUID", "a-1_b.c:d", false, &st), 0);
        assert_int_equal(ops_check_id("build configuration", "", true, &st), 0);
        assert_int_equal(ops_check_id("build configuration", NULL, true, &st), 0);
        assert_int_equal(ops_check_id("allocation UUID", "", false, &st), -EINVAL);
        assert_int_equal(st.code, OPS_ERROR_INVALID_ARGUMENT);
        assert_string_equal(st.message, "Invalid allocation UUID: 1 to 128 characters of A-Z a-z "
                                        "0-9 . _ : -");
        assert_int_equal(ops_check_id("allocation UUID", "a/b", false, &st), -EINVAL);
}

/* StopIfFree stops a free slot (available or online) and refuses every one somebody has. */
static void test_check_free(_unused_ void **state) {
        OpsStatus st = {};

        assert_int_equal(ops_check_free(4, SLOT_AVAILABLE, &st), 0);
        assert_int_equal(ops_check_free(4, SLOT_ONLINE, &st), 0);
        assert_int_equal(st.code, OPS_OK);

        assert_int_equal(ops_check_free(4, SLOT_ALLOCATED, &st), -EBUSY);
        assert_int_equal(st.code, OPS_ERROR_INVALID_STATE);
        assert_string_equal(st.message, "Slot 4 is allocated: StopIfFree stops a free slot only");
        assert_string_equal(ops_error_code_to_string(st.code), "invalid-state");

        st = (OpsStatus) {};
        assert_int_equal(ops_check_free(9, SLOT_RESERVED, &st), -EBUSY);
        assert_int_equal(st.code, OPS_ERROR_INVALID_STATE);
        assert_string_equal(st.message, "Slot 9 is reserved: StopIfFree stops a free slot only");

        st = (OpsStatus) {};
        assert_int_equal(ops_check_free(0, SLOT_HELD, &st), -EBUSY);
        assert_int_equal(st.code, OPS_ERROR_INVALID_STATE);
        assert_string_equal(st.message, "Slot 0 is held: StopIfFree stops a free slot only");
}

static void test_fail(_unused_ void **state) {
        OpsStatus st = {};

        /* An error that is no errno still refuses. */
        assert_int_equal(ops_fail(&st, OPS_ERROR_FAILED, 0, "x %d", 1), -EPERM);
        assert_string_equal(st.message, "x 1");
        assert_string_equal(ops_error_code_to_string(_OPS_ERROR_MAX), "failed");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_is_admin),
                cmocka_unit_test(test_check_admin),
                cmocka_unit_test(test_check_slot_caller),
                cmocka_unit_test(test_check_draining),
                cmocka_unit_test(test_token_subject),
                cmocka_unit_test(test_check_id),
                cmocka_unit_test(test_check_free),
                cmocka_unit_test(test_fail),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
