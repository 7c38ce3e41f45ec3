/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "allocation.h"
#include "macro.h"
#include "wallclock.h"

static void test_state_precedence(void **state) {
        assert_int_equal(slot_state_from_facts(&(SlotFacts){}), SLOT_AVAILABLE);
        assert_int_equal(slot_state_from_facts(&(SlotFacts){ .running = true }), SLOT_ONLINE);
        assert_int_equal(slot_state_from_facts(&(SlotFacts){ .running = true, .held = true }), SLOT_HELD);
        assert_int_equal(slot_state_from_facts(&(SlotFacts){ .held = true }), SLOT_HELD);
        assert_int_equal(slot_state_from_facts(&(SlotFacts){ .reserved = true, .running = true }),
                         SLOT_RESERVED);
        assert_int_equal(slot_state_from_facts(&(SlotFacts){ .allocated = true, .reserved = true }),
                         SLOT_ALLOCATED);
        /* A crashed session kept by pre-recovery is still allocated, with no process. */
        assert_int_equal(slot_state_from_facts(&(SlotFacts){ .allocated = true }), SLOT_ALLOCATED);
        assert_string_equal(slot_state_to_string(SLOT_AVAILABLE), "available");
        assert_string_equal(slot_state_to_string(SLOT_ONLINE), "online");
        assert_string_equal(slot_state_to_string(SLOT_HELD), "held");
        assert_string_equal(slot_state_to_string(SLOT_RESERVED), "reserved");
        assert_string_equal(slot_state_to_string(SLOT_ALLOCATED), "allocated");
}

static void test_classes(void **state) {
        assert_int_equal(alloc_class_from_facts(&(SlotFacts){ .running = true, .ready = true }),
                         ALLOC_CLASS_READY);
        assert_int_equal(alloc_class_from_facts(&(SlotFacts){ .running = true }), ALLOC_CLASS_STARTING);
        assert_int_equal(alloc_class_from_facts(&(SlotFacts){ .held = true, .running = true, .ready = true }),
                         ALLOC_CLASS_HELD);
        assert_int_equal(alloc_class_from_facts(&(SlotFacts){}), ALLOC_CLASS_AVAILABLE);
        /* Never a failed, reserved, allocated or mid-restart slot. */
        assert_int_equal(alloc_class_from_facts(&(SlotFacts){ .failed = true }), ALLOC_CLASS_NONE);
        assert_int_equal(alloc_class_from_facts(&(SlotFacts){ .reserved = true, .running = true, .ready = true }),
                         ALLOC_CLASS_NONE);
        assert_int_equal(alloc_class_from_facts(&(SlotFacts){ .allocated = true, .running = true }),
                         ALLOC_CLASS_NONE);
        assert_int_equal(alloc_class_from_facts(&(SlotFacts){ .busy = true, .running = true }),
                         ALLOC_CLASS_NONE);
}

typedef struct TestSlot {
        AllocEntry entry;
        const char *bc;
        int id;
} TestSlot;

static bool runs(const AllocEntry *e, void *userdata) {
        return streq(container_of(e, TestSlot, entry)->bc, userdata);
}

static int pick_id(AllocIndex *idx, const char *bc) {
        AllocEntry *e = alloc_index_pick(idx, runs, (void *) bc);
        return e ? container_of(e, TestSlot, entry)->id : -1;
}

static void test_pick_order(void **state) {
        AllocIndex idx = {};
        TestSlot s[6] = {
                { .id = 0, .bc = "b" }, /* ready, other build configuration */
                { .id = 1, .bc = "a" }, /* available */
                { .id = 2, .bc = "a" }, /* starting */
                { .id = 3, .bc = "a" }, /* held */
                { .id = 4, .bc = "a" }, /* ready */
                { .id = 5, .bc = "b" }, /* starting, other */
        };

        assert_int_equal(pick_id(&idx, "a"), -1);
        alloc_index_set(&idx, &s[0].entry, ALLOC_CLASS_READY);
        alloc_index_set(&idx, &s[1].entry, ALLOC_CLASS_AVAILABLE);
        alloc_index_set(&idx, &s[2].entry, ALLOC_CLASS_STARTING);
        alloc_index_set(&idx, &s[3].entry, ALLOC_CLASS_HELD);
        alloc_index_set(&idx, &s[4].entry, ALLOC_CLASS_READY);
        alloc_index_set(&idx, &s[5].entry, ALLOC_CLASS_STARTING);

        /* SPEC §7 order, each pick taken out as an allocation would. */
        assert_int_equal(pick_id(&idx, "a"), 4);
        alloc_index_set(&idx, &s[4].entry, ALLOC_CLASS_NONE);
        assert_int_equal(pick_id(&idx, "a"), 3);
        alloc_index_set(&idx, &s[3].entry, ALLOC_CLASS_NONE);
        assert_int_equal(pick_id(&idx, "a"), 2);
        alloc_index_set(&idx, &s[2].entry, ALLOC_CLASS_NONE);
        assert_int_equal(pick_id(&idx, "a"), 1);
        alloc_index_set(&idx, &s[1].entry, ALLOC_CLASS_NONE);
        /* Only slots running another build configuration are left: ready before starting. */
        assert_int_equal(pick_id(&idx, "a"), 0);
        alloc_index_set(&idx, &s[0].entry, ALLOC_CLASS_NONE);
        assert_int_equal(pick_id(&idx, "a"), 5);
        alloc_index_set(&idx, &s[5].entry, ALLOC_CLASS_NONE);
        assert_int_equal(pick_id(&idx, "a"), -1);
        assert_int_equal(idx.count[ALLOC_CLASS_NONE], 6);

        /* The wanted configuration picks its own ready slot first. */
        alloc_index_set(&idx, &s[0].entry, ALLOC_CLASS_READY);
        alloc_index_set(&idx, &s[4].entry, ALLOC_CLASS_READY);
        assert_int_equal(pick_id(&idx, "b"), 0);
        assert_int_equal(pick_id(&idx, "a"), 4);
}

static void test_index_moves(void **state) {
        AllocIndex idx = {};
        TestSlot s[3] = { { .id = 0, .bc = "a" }, { .id = 1, .bc = "a" }, { .id = 2, .bc = "a" } };

        for (int i = 0; i < 3; i++)
                alloc_index_set(&idx, &s[i].entry, ALLOC_CLASS_AVAILABLE);
        assert_int_equal(idx.count[ALLOC_CLASS_AVAILABLE], 3);
        /* Setting the same class again keeps the place. */
        alloc_index_set(&idx, &s[0].entry, ALLOC_CLASS_AVAILABLE);
        assert_int_equal(pick_id(&idx, "a"), 0);
        alloc_index_remove(&idx, &s[1].entry);
        alloc_index_remove(&idx, &s[1].entry);
        assert_int_equal(idx.count[ALLOC_CLASS_AVAILABLE], 2);
        alloc_index_remove(&idx, &s[0].entry);
        assert_int_equal(pick_id(&idx, "a"), 2);
        alloc_index_remove(&idx, &s[2].entry);
        assert_null(idx.head[ALLOC_CLASS_AVAILABLE]);
        assert_null(idx.tail[ALLOC_CLASS_AVAILABLE]);
        assert_int_equal(idx.count[ALLOC_CLASS_AVAILABLE], 0);
}

static void test_hold_rules(void **state) {
        assert_true(hold_ends_on(HOLD_EVENT_TIMEOUT));
        assert_true(hold_ends_on(HOLD_EVENT_ALLOCATE));
        assert_true(hold_ends_on(HOLD_EVENT_RESERVE));
        assert_true(hold_ends_on(HOLD_EVENT_STOP));
        assert_true(hold_ends_on(HOLD_EVENT_RESTART));
        assert_true(hold_ends_on(HOLD_EVENT_BUILD_CHANGE));
        assert_true(hold_ends_on(HOLD_EVENT_RELEASE));
        assert_false(hold_ends_on(HOLD_EVENT_PROCESS_EXIT));
        assert_true(hold_allowed(SLOT_ONLINE));
        assert_true(hold_allowed(SLOT_AVAILABLE));
        assert_true(hold_allowed(SLOT_HELD)); /* a refresh */
        assert_false(hold_allowed(SLOT_RESERVED));
        assert_false(hold_allowed(SLOT_ALLOCATED));
}

static void test_ttl(void **state) {
        usec_t next, s = USEC_PER_SEC, m = USEC_PER_MINUTE;

        /* Busy: never, and nothing to wake for. */
        assert_false(ttl_deprovisionable(0, 30 * m, 0, 1000 * m, &next));
        assert_int_equal(next, USEC_INFINITY);
        /* Idle, not long enough: wake at idle_since + ttl. */
        assert_false(ttl_deprovisionable(100 * m, 30 * m, 0, 110 * m, &next));
        assert_int_equal(next, 130 * m);
        assert_true(ttl_deprovisionable(100 * m, 30 * m, 0, 130 * m, &next));
        assert_int_equal(next, USEC_INFINITY);
        /* A hold past the TTL holds the machine until it ends. */
        assert_false(ttl_deprovisionable(100 * m, 30 * m, 140 * m, 135 * m, &next));
        assert_int_equal(next, 140 * m);
        assert_true(ttl_deprovisionable(100 * m, 30 * m, 140 * m, 140 * m + s, &next));
        /* A hold that ended before the TTL does not matter. */
        assert_true(ttl_deprovisionable(100 * m, 30 * m, 110 * m, 130 * m, &next));
        /* No overflow with a huge TTL. */
        assert_false(ttl_deprovisionable(100 * m, USEC_INFINITY - 1, 0, 200 * m, &next));
}

static void test_ids(void **state) {
        char big[ALLOC_ID_MAX + 2];

        assert_true(alloc_id_is_valid("0f3c5a4e-1b2d-4c8e-9a7f-5d6e7f8a9b0c"));
        assert_true(alloc_id_is_valid("build:v1.2_x"));
        assert_false(alloc_id_is_valid(""));
        assert_false(alloc_id_is_valid("a b"));
        assert_false(alloc_id_is_valid("a/b"));
        assert_false(alloc_id_is_valid("a\nb"));
        assert_false(alloc_id_is_valid("ü"));
        memset(big, 'a', sizeof(big) - 1);
        big[ALLOC_ID_MAX] = '\0';
        assert_true(alloc_id_is_valid(big));
        big[ALLOC_ID_MAX] = 'a';
        big[ALLOC_ID_MAX + 1] = '\0';
        assert_false(alloc_id_is_valid(big));
}

/* Deadlines are CLOCK_BOOTTIME and shown in real time: the same deadline shows the same value
 * at every read, follows a step of the wall clock at once, and matches the wall clock. */
static void test_wall_display(void **state) {
        usec_t o = wall_offset(), boot = now_usec(CLOCK_BOOTTIME), shown, real;

        assert_int_equal(boottime_to_wall(0), 0);
        assert_int_equal(boottime_to_wall(USEC_INFINITY), USEC_INFINITY);
        /* Read twice, shown the same: the kept offset, not a fresh measure's jitter. */
        shown = boottime_to_wall(boot + USEC_PER_MINUTE);
        for (int i = 0; i < 1000; i++)
                assert_int_equal(boottime_to_wall(boot + USEC_PER_MINUTE), shown);
        real = now_usec(CLOCK_REALTIME);
        assert_true(shown > real + USEC_PER_MINUTE - 50 * USEC_PER_MSEC);
        assert_true(shown < real + USEC_PER_MINUTE + 50 * USEC_PER_MSEC);
        /* An earlier slotd's offset of this boot is kept while it agrees with the clocks... */
        wall_offset_seed(o + WALL_OFFSET_SLACK_USEC / 2);
        assert_int_equal(wall_offset(), o + WALL_OFFSET_SLACK_USEC / 2);
        /* ... and replaced once it does not: the wall clock was stepped since. */
        wall_offset_seed(o + USEC_PER_HOUR);
        assert_true(wall_offset() + WALL_OFFSET_SLACK_USEC > o && wall_offset() < o + WALL_OFFSET_SLACK_USEC);
        assert_int_equal(boottime_to_wall(boot), boot + wall_offset());
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_state_precedence),
                cmocka_unit_test(test_classes),
                cmocka_unit_test(test_pick_order),
                cmocka_unit_test(test_index_moves),
                cmocka_unit_test(test_hold_rules),
                cmocka_unit_test(test_ttl),
                cmocka_unit_test(test_wall_display),
                cmocka_unit_test(test_ids),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
