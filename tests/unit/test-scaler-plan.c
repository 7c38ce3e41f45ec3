/* SPDX-License-Identifier: MIT */
/* fleet/allocator/scaler-plan.c: the scaler's targets and plan, rule by rule (scaler-plan.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "scaler-plan.h"

#define S(m, id, k) { .machine_id = (m), .slot_id = (id), .kind = SCALER_##k, .ready = true }

static size_t plan(const ScalerTarget *t, PlacementStrategy st, const ScalerSlot *s, size_t n,
                   size_t *a, ScalerAction *k, ScalerCount *c) {
        return scaler_plan(t, st, s, n, a, k, 64, c);
}

static void test_targets_parse(_unused_ void **state) {
        ScalerTarget *t = NULL;
        size_t n = 0;
        char *err = NULL;

        assert_int_equal(scaler_targets_parse("fa buffer=2 floor=1 ceiling=8; fa/eu buffer=4;"
                                              " fb/ ceiling=3",
                                              &t, &n, &err),
                         0);
        assert_int_equal(n, 3);
        assert_string_equal(t[0].fleet, "fa");
        assert_null(t[0].region);
        assert_int_equal(t[0].buffer, 2);
        assert_int_equal(t[0].floor, 1);
        assert_int_equal(t[0].ceiling, 8);
        assert_string_equal(t[1].region, "eu");
        assert_int_equal(t[1].buffer, 4);
        assert_int_equal(t[1].ceiling, SCALER_CEILING_NONE);
        assert_string_equal(t[2].region, ""); /* the slots without a region */
        /* a region's own target first, then the fleet's; none for another fleet */
        assert_ptr_equal(scaler_target_find(t, n, "fa", "eu"), &t[1]);
        assert_ptr_equal(scaler_target_find(t, n, "fa", "us"), &t[0]);
        assert_ptr_equal(scaler_target_find(t, n, "fb", ""), &t[2]);
        assert_null(scaler_target_find(t, n, "fb", "eu"));
        assert_null(scaler_target_find(t, n, "fc", ""));
        scaler_targets_free(t, n);

        assert_int_equal(scaler_targets_parse("", &t, &n, &err), 0);
        assert_int_equal(n, 0);
        scaler_targets_free(t, n);

        const char *bad[] = { "fa buffer=x", "fa buffer", "fa size=1", "/eu buffer=1",
                              "fa floor=5 ceiling=4", "fa buffer=1; fa buffer=2",
                              "fa buffer=-1", "fa buffer=4294967295" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                t = NULL;
                assert_int_equal(scaler_targets_parse(bad[i], &t, &n, &err), -EINVAL);
                assert_non_null(err);
                assert_non_null(strstr(err, "'"));
                free(err);
                err = NULL;
        }
}

static void test_slot_kind(_unused_ void **state) {
        assert_int_equal(scaler_slot_kind_of("available", "stopped", "", false), SCALER_STOPPED);
        assert_int_equal(scaler_slot_kind_of("online", "running", "", false), SCALER_FREE);
        assert_int_equal(scaler_slot_kind_of("online", "starting", "", false), SCALER_FREE);
        /* never touched: allocated, reserved, held, claimed, or with an allocation */
        assert_int_equal(scaler_slot_kind_of("allocated", "running", "a", false), SCALER_BUSY);
        assert_int_equal(scaler_slot_kind_of("reserved", "running", "", false), SCALER_BUSY);
        assert_int_equal(scaler_slot_kind_of("held", "running", "", false), SCALER_BUSY);
        assert_int_equal(scaler_slot_kind_of("online", "running", "", true), SCALER_BUSY);
        assert_int_equal(scaler_slot_kind_of("available", "stopped", "", true), SCALER_OTHER);
        assert_int_equal(scaler_slot_kind_of("online", "running", "x", false), SCALER_BUSY);
        assert_int_equal(scaler_slot_kind_of("online", "failed", "", false), SCALER_OTHER);
        assert_int_equal(scaler_slot_kind_of("online", "stopping", "", false), SCALER_OTHER);
        assert_int_equal(scaler_slot_kind_of("what", "running", "", false), SCALER_OTHER);
        assert_int_equal(scaler_slot_kind_of(NULL, "running", "", false), SCALER_OTHER);
        assert_int_equal(scaler_action_from_string("start"), SCALER_START);
        assert_int_equal(scaler_action_from_string("stop"), SCALER_STOP);
        assert_int_equal(scaler_action_from_string("none"), _SCALER_ACTION_INVALID);
        assert_string_equal(scaler_action_to_string(SCALER_STOP), "stop");
}

/* The buffer refilled on top of the busy ones, the ceiling holding. */
static void test_buffer_and_ceiling(_unused_ void **state) {
        ScalerTarget t = { .buffer = 2, .ceiling = 4 };
        ScalerSlot s[] = { S("m1", 0, BUSY), S("m1", 1, STOPPED), S("m1", 2, STOPPED),
                           S("m1", 3, STOPPED), S("m1", 4, STOPPED), S("m1", 5, FREE) };
        size_t a[8];
        ScalerAction k[8];
        ScalerCount c;

        /* 1 busy + buffer 2 = 3 wanted, 2 running: one start, the lowest slot id */
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 1);
        assert_int_equal(c.busy, 1);
        assert_int_equal(c.free, 1);
        assert_int_equal(c.wanted, 3);
        assert_int_equal(a[0], 1);
        assert_int_equal(k[0], SCALER_START);
        /* 3 busy: 5 wanted, the ceiling 4, 4 running: nothing */
        s[1].kind = s[2].kind = SCALER_BUSY;
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 0);
        assert_int_equal(c.wanted, 4);
        assert_int_equal(c.running, 4);
        /* 2 busy: 4 wanted, 3 running: the next stopped one */
        s[2].kind = SCALER_STOPPED;
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 1);
        assert_int_equal(a[0], 2);
        s[2].kind = SCALER_BUSY;
        /* the ceiling below the busy: the free one stopped, the busy ones never */
        t.ceiling = 2;
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 1);
        assert_int_equal(a[0], 5);
        assert_int_equal(k[0], SCALER_STOP);
        /* no target: nothing */
        assert_int_equal(plan(NULL, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 0);
}

/* The floor: that many running even with nothing busy. */
static void test_floor(_unused_ void **state) {
        ScalerTarget t = { .buffer = 1, .floor = 3, .ceiling = SCALER_CEILING_NONE };
        ScalerSlot s[] = { S("m1", 0, STOPPED), S("m1", 1, STOPPED), S("m1", 2, STOPPED),
                           S("m1", 3, STOPPED), S("m1", 4, FREE) };
        size_t a[8];
        ScalerAction k[8];
        ScalerCount c;

        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 2);
        assert_int_equal(c.wanted, 3);
        assert_int_equal(a[0], 0);
        assert_int_equal(a[1], 1);
}

/* Commands in flight count as done and are not chosen again. */
static void test_pending(_unused_ void **state) {
        ScalerTarget t = { .buffer = 2, .ceiling = SCALER_CEILING_NONE };
        ScalerSlot s[] = { S("m1", 0, STOPPED), S("m1", 1, STOPPED), S("m1", 2, STOPPED) };
        size_t a[8];
        ScalerAction k[8];
        ScalerCount c;

        s[0].pending = SCALER_START;
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 1);
        assert_int_equal(c.running, 1);
        assert_int_equal(a[0], 1);
        s[1].pending = SCALER_START;
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 0);
        /* a stop in flight of a free one counts it stopped */
        s[0].kind = s[1].kind = SCALER_FREE;
        s[0].pending = SCALER_NONE;
        s[1].pending = SCALER_STOP;
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 1);
        assert_int_equal(a[0], 2);
        assert_int_equal(k[0], SCALER_START);
}

/* Starts go where placement fills: packed, the busiest machine; never a draining one. */
static void test_start_order(_unused_ void **state) {
        ScalerTarget t = { .buffer = 3, .ceiling = SCALER_CEILING_NONE };
        ScalerSlot s[] = { S("a", 0, STOPPED), S("a", 1, STOPPED), S("b", 0, STOPPED),
                           S("b", 1, STOPPED), S("c", 0, STOPPED), S("c", 1, STOPPED) };
        size_t a[8];
        ScalerAction k[8];
        ScalerCount c;

        s[2].machine_load = s[3].machine_load = 5; /* b the busiest (in other fleets) */
        s[4].draining = s[5].draining = true;
        s[4].machine_load = s[5].machine_load = 9;
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 3);
        assert_int_equal(a[0], 2);
        assert_int_equal(a[1], 3);
        assert_int_equal(a[2], 0);
        /* distributed: the fewest running first, spread */
        assert_int_equal(plan(&t, PLACEMENT_DISTRIBUTED, s, ELEMENTSOF(s), a, k, &c), 3);
        assert_int_equal(a[0], 0);
        assert_int_equal(a[1], 2);
        assert_int_equal(a[2], 1);
        /* only draining machines left: nothing started there */
        s[0].kind = s[1].kind = s[2].kind = s[3].kind = SCALER_OTHER;
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 0);
}

/* Stops under packed empty whole machines first: the idle machine with the fewest free. */
static void test_stop_packed(_unused_ void **state) {
        ScalerTarget t = { .buffer = 1, .ceiling = SCALER_CEILING_NONE };
        ScalerSlot s[] = { S("a", 0, BUSY), S("a", 1, FREE), S("a", 2, FREE),
                           S("b", 0, FREE), S("b", 1, FREE),
                           S("c", 0, FREE), S("c", 1, FREE), S("c", 2, FREE) };
        size_t a[8];
        ScalerAction k[8];
        ScalerCount c;

        s[0].machine_load = s[1].machine_load = s[2].machine_load = 1;
        s[6].ready = false;
        /* 1 busy + 1 = 2 wanted, 8 running: 6 stops, never slot a/0 */
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 6);
        /* b (nothing busy, 2 free) whole, then c whole (its not-ready one first), then a's */
        assert_int_equal(a[0], 4);
        assert_int_equal(a[1], 3);
        assert_int_equal(a[2], 6);
        assert_int_equal(a[3], 7);
        assert_int_equal(a[4], 5);
        assert_int_equal(a[5], 2);
        for (size_t i = 0; i < 6; i++) {
                assert_int_equal(k[i], SCALER_STOP);
                assert_int_not_equal(a[i], 0);
        }
        assert_int_equal(c.wanted, 2);
}

/* Stops: draining machines first; distributed takes from the fullest. */
static void test_stop_draining_distributed(_unused_ void **state) {
        ScalerTarget t = { .buffer = 2, .ceiling = SCALER_CEILING_NONE };
        ScalerSlot s[] = { S("a", 0, FREE), S("a", 1, FREE), S("a", 2, FREE),
                           S("b", 0, FREE), S("c", 0, FREE), S("c", 1, BUSY) };
        size_t a[8];
        ScalerAction k[8];
        ScalerCount c;

        s[3].draining = true;
        s[4].machine_load = s[5].machine_load = 1;
        /* 1 busy + 2 = 3 wanted, 6 running: 3 stops: b (draining), then a's (the most
         * running), highest id first */
        assert_int_equal(plan(&t, PLACEMENT_DISTRIBUTED, s, ELEMENTSOF(s), a, k, &c), 3);
        assert_int_equal(a[0], 3);
        assert_int_equal(a[1], 2);
        assert_int_equal(a[2], 1);
        /* packed: b first too, then a's (nothing busy on it) before c's */
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 3);
        assert_int_equal(a[0], 3);
        assert_int_equal(a[1], 2);
        assert_int_equal(a[2], 1);
        /* with c as idle as a: c's one free server first (fewer free: emptied sooner) */
        s[4].machine_load = s[5].machine_load = 0;
        assert_int_equal(plan(&t, PLACEMENT_PACKED, s, ELEMENTSOF(s), a, k, &c), 3);
        assert_int_equal(a[0], 3);
        assert_int_equal(a[1], 4);
        assert_int_equal(a[2], 2);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_targets_parse),
                cmocka_unit_test(test_slot_kind),
                cmocka_unit_test(test_buffer_and_ceiling),
                cmocka_unit_test(test_floor),
                cmocka_unit_test(test_pending),
                cmocka_unit_test(test_start_order),
                cmocka_unit_test(test_stop_packed),
                cmocka_unit_test(test_stop_draining_distributed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
