/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macro.h"
#include "placement.h"

static Placement *p;

static int setup_packed(void **state) {
        return placement_new(PLACEMENT_PACKED, &p);
}

static int setup_distributed(void **state) {
        return placement_new(PLACEMENT_DISTRIBUTED, &p);
}

static int teardown(void **state) {
        p = placement_free(p);
        return 0;
}

static void slot(const char *machine, uint32_t id, const char *region, const char *build,
                 PlacementClass class, bool busy) {
        PlacementSlot s = { .fleet = "game", .region = region, .build = build, .class = class,
                            .busy = busy };

        assert_int_equal(placement_slot_set(p, machine, id, &s), 0);
}

static void machine(const char *id, bool draining) {
        assert_int_equal(placement_machine_set(p, id, true, draining), 0);
}

/* "machine/slot" of the pick, or "none". */
static const char *pick_full(const char *region, const char *build, char *const *excluded) {
        static char buf[64];
        PlacementRequest req = { .fleet = "game", .region = region, .build = build,
                                 .excluded = excluded };
        const char *m;
        uint32_t id;
        int r = placement_pick(p, &req, &m, &id);

        if (r == -ENOSPC)
                return "none";
        assert_int_equal(r, 0);
        snprintf(buf, sizeof(buf), "%s/%u", m, id);
        return buf;
}

static const char *pick(const char *build) {
        return pick_full(NULL, build, NULL);
}

static void test_class_of(_unused_ void **state) {
        assert_int_equal(placement_class_of("online", "running", true, "", false), PLACEMENT_READY);
        assert_int_equal(placement_class_of("online", "running", false, "", false),
                         PLACEMENT_STARTING);
        assert_int_equal(placement_class_of("online", "starting", false, NULL, false),
                         PLACEMENT_STARTING);
        assert_int_equal(placement_class_of("online", "stopping", false, "", false),
                         PLACEMENT_NONE);
        assert_int_equal(placement_class_of("held", "running", true, "", false), PLACEMENT_HELD);
        assert_int_equal(placement_class_of("held", "stopped", false, "", false), PLACEMENT_HELD);
        assert_int_equal(placement_class_of("held", "failed", false, "", false), PLACEMENT_NONE);
        assert_int_equal(placement_class_of("available", "stopped", false, "", false),
                         PLACEMENT_AVAILABLE);
        assert_int_equal(placement_class_of("available", "failed", false, "", false),
                         PLACEMENT_NONE);
        assert_int_equal(placement_class_of("online", "running", true, "", true), PLACEMENT_NONE);
        assert_int_equal(placement_class_of("online", "running", true, "a-1", false),
                         PLACEMENT_NONE);
        assert_int_equal(placement_class_of("allocated", "running", true, "a", false),
                         PLACEMENT_NONE);
        assert_int_equal(placement_class_of("reserved", "running", true, "", false),
                         PLACEMENT_NONE);
        assert_int_equal(placement_class_of("weird", "running", true, "", false), PLACEMENT_NONE);
        assert_int_equal(placement_class_of(NULL, NULL, true, "", false), PLACEMENT_NONE);
        assert_true(placement_busy_of("allocated", "a", false));
        assert_true(placement_busy_of("reserved", "", false));
        assert_true(placement_busy_of("online", "", true));
        assert_false(placement_busy_of("online", "", false));
        assert_int_equal(placement_strategy_from_string("packed"), PLACEMENT_PACKED);
        assert_int_equal(placement_strategy_from_string("distributed"), PLACEMENT_DISTRIBUTED);
        assert_int_equal(placement_strategy_from_string("random"), _PLACEMENT_STRATEGY_INVALID);
}

static void test_tiers(_unused_ void **state) {
        machine("m1", false);
        assert_string_equal(pick("b1"), "none");
        slot("m1", 0, "eu", "b1", PLACEMENT_STARTING, false);
        assert_string_equal(pick("b2"), "m1/0");           /* starting, another build */
        slot("m1", 1, "eu", "b2", PLACEMENT_READY, false);
        assert_string_equal(pick("b3"), "m1/1");           /* ready before starting */
        slot("m1", 2, "eu", "", PLACEMENT_AVAILABLE, false);
        assert_string_equal(pick("b3"), "m1/2");
        slot("m1", 3, "eu", "b1", PLACEMENT_STARTING, false);
        assert_string_equal(pick("b1"), "m1/0");           /* starting, this build: lowest id */
        slot("m1", 4, "eu", "", PLACEMENT_HELD, false);
        assert_string_equal(pick("b1"), "m1/4");
        slot("m1", 5, "eu", "b1", PLACEMENT_READY, false);
        assert_string_equal(pick("b1"), "m1/5");
        assert_string_equal(pick("b2"), "m1/1");
        /* No build named: every build configuration is the requested one. */
        assert_string_equal(pick(""), "m1/1");
        slot("m1", 1, "eu", "b2", PLACEMENT_NONE, true);
        slot("m1", 5, "eu", "b1", PLACEMENT_NONE, true);
        assert_string_equal(pick("b1"), "m1/4");
        placement_slot_remove(p, "m1", 4);
        assert_string_equal(pick("b1"), "m1/0");
        assert_string_equal(pick("b9"), "m1/2");
        assert_int_equal(placement_n_slots(p), 5);
}

static void test_draining_last(_unused_ void **state) {
        machine("m1", true);
        machine("m2", false);
        slot("m1", 0, "eu", "b1", PLACEMENT_READY, false);
        slot("m2", 0, "eu", "b9", PLACEMENT_STARTING, false);
        /* Even the last tier of a machine that is not draining comes first. */
        assert_string_equal(pick("b1"), "m2/0");
        slot("m2", 0, "eu", "b9", PLACEMENT_NONE, true);
        assert_string_equal(pick("b1"), "m1/0");
        machine("m2", true);
        slot("m2", 1, "eu", "b1", PLACEMENT_READY, false);
        /* Both draining: the order within (packed: m2 has the busy slot). */
        assert_string_equal(pick("b1"), "m2/1");
        machine("m2", false);
        machine("m1", false);
        assert_string_equal(pick("b1"), "m2/1");
}

static void test_packed(_unused_ void **state) {
        machine("m1", false);
        machine("m2", false);
        machine("m3", false);
        for (uint32_t i = 0; i < 3; i++) {
                slot("m1", i, "eu", "b1", PLACEMENT_READY, false);
                slot("m2", i, "eu", "b1", PLACEMENT_READY, false);
                slot("m3", i, "eu", "b1", PLACEMENT_READY, false);
        }
        assert_string_equal(pick("b1"), "m1/0"); /* ties: lowest machine ID, slot id */
        slot("m2", 2, "eu", "b1", PLACEMENT_NONE, true);
        assert_string_equal(pick("b1"), "m2/0");
        slot("m3", 0, "eu", "b1", PLACEMENT_NONE, true);
        slot("m3", 1, "eu", "b1", PLACEMENT_NONE, true);
        assert_string_equal(pick("b1"), "m3/2");
        /* A busy slot of another fleet counts in the machine's load too. */
        PlacementSlot other = { .fleet = "other", .region = "eu", .build = "x",
                                .class = PLACEMENT_NONE, .busy = true };
        assert_int_equal(placement_slot_set(p, "m1", 10, &other), 0);
        assert_int_equal(placement_slot_set(p, "m1", 11, &other), 0);
        assert_int_equal(placement_slot_set(p, "m1", 12, &other), 0);
        assert_string_equal(pick("b1"), "m1/0");
        placement_slot_remove(p, "m1", 12);
        placement_slot_remove(p, "m1", 11);
        assert_string_equal(pick("b1"), "m3/2");
}

static void test_distributed(_unused_ void **state) {
        machine("m1", false);
        machine("m2", false);
        for (uint32_t i = 0; i < 3; i++) {
                slot("m1", i, "eu", "b1", PLACEMENT_READY, false);
                slot("m2", i, "eu", "b1", PLACEMENT_READY, false);
        }
        assert_string_equal(pick("b1"), "m1/0");
        slot("m1", 0, "eu", "b1", PLACEMENT_NONE, true);
        assert_string_equal(pick("b1"), "m2/0");
        slot("m2", 0, "eu", "b1", PLACEMENT_NONE, true);
        assert_string_equal(pick("b1"), "m1/1");
}

static void test_filters(_unused_ void **state) {
        char *ex1[] = { (char *) "m1", NULL };
        char *ex12[] = { (char *) "m1", (char *) "m2", NULL };

        machine("m1", false);
        machine("m2", false);
        slot("m1", 0, "eu", "b1", PLACEMENT_READY, false);
        slot("m2", 0, "us", "b1", PLACEMENT_READY, false);
        slot("m3", 0, "eu", "b1", PLACEMENT_READY, false); /* no machine document: not offered */
        assert_string_equal(pick_full("us", "b1", NULL), "m2/0");
        assert_string_equal(pick_full("eu", "b1", NULL), "m1/0");
        assert_string_equal(pick_full("ap", "b1", NULL), "none");
        assert_string_equal(pick_full(NULL, "b1", ex1), "m2/0");
        assert_string_equal(pick_full("eu", "b1", ex1), "none");
        assert_string_equal(pick_full(NULL, "b1", ex12), "none");
        machine("m3", false);
        assert_string_equal(pick_full("eu", "b1", ex1), "m3/0");
        assert_int_equal(placement_machine_set(p, "m3", false, false), 0);
        assert_string_equal(pick_full("eu", "b1", ex1), "none");

        /* A claim in flight on a slot: the next one. */
        slot("m1", 1, "eu", "b1", PLACEMENT_READY, false);
        placement_slot_set_pending(p, "m1", 0, true);
        assert_string_equal(pick("b1"), "m1/1");
        placement_slot_set_pending(p, "m1", 1, true);
        assert_string_equal(pick("b1"), "m2/0");
        placement_slot_set_pending(p, "m1", 0, false);
        assert_string_equal(pick("b1"), "m1/0");

        /* Another fleet is not offered. */
        PlacementRequest req = { .fleet = "other", .build = "b1" };
        const char *m;
        uint32_t id;
        assert_int_equal(placement_pick(p, &req, &m, &id), -ENOSPC);
        PlacementSlot big = { .fleet = "game", .class = PLACEMENT_READY };
        assert_int_equal(placement_slot_set(p, "m1", PLACEMENT_SLOT_ID_MAX + 1, &big), -EINVAL);
}

static void test_machine_gone(_unused_ void **state) {
        machine("m1", false);
        slot("m1", 0, "eu", "b1", PLACEMENT_READY, true);
        slot("m1", 1, "eu", "b1", PLACEMENT_READY, false);
        assert_int_equal(placement_n_machines(p), 1);
        assert_int_equal(placement_machine_set(p, "m1", false, false), 0);
        assert_int_equal(placement_n_machines(p), 1); /* its slots are still known */
        placement_slot_remove(p, "m1", 0);
        placement_slot_remove(p, "m1", 1);
        assert_int_equal(placement_n_machines(p), 0);
        assert_int_equal(placement_n_slots(p), 0);
        assert_string_equal(pick("b1"), "none");
}

/* ---- against a plain reference: every candidate compared by the rules of placement.h ---- */

#define RM 6
#define RS 8

typedef struct RefSlot {
        bool exists;
        int region, build;
        PlacementClass class;
        bool busy, pending;
} RefSlot;

static RefSlot ref[RM][RS];
static bool ref_present[RM], ref_draining[RM];
static const char *const regions[] = { "", "eu", "us" };
static const char *const builds[] = { "b0", "b1", "b2" };

static unsigned ref_load(int m) {
        unsigned n = 0;

        for (int s = 0; s < RS; s++)
                n += ref[m][s].exists && ref[m][s].busy;
        return n;
}

static int ref_step(const RefSlot *s, int build) {
        static const int step_of[] = {
                [PLACEMENT_READY] = 0, [PLACEMENT_HELD] = 1, [PLACEMENT_STARTING] = 2,
                [PLACEMENT_AVAILABLE] = 3,
        };

        if (!s->exists || s->pending || s->class == PLACEMENT_NONE)
                return -1;
        if ((s->class == PLACEMENT_READY || s->class == PLACEMENT_STARTING) && build >= 0 &&
            s->build != build)
                return step_of[s->class] + (s->class == PLACEMENT_READY ? 4 : 3);
        return step_of[s->class];
}

/* The best (machine, slot) by brute force: key (draining, step, load order, machine, slot). */
static const char *ref_pick(PlacementStrategy strategy, int region, int build, int excluded) {
        static char buf[32];
        long best = -1, best_key = 0;

        for (int m = 0; m < RM; m++) {
                if (!ref_present[m] || m == excluded)
                        continue;
                for (int s = 0; s < RS; s++) {
                        int step = ref_step(&ref[m][s], build);
                        long load = ref_load(m), key;

                        if (step < 0 || (region >= 0 && ref[m][s].region != region))
                                continue;
                        key = ((((long) ref_draining[m] * 8 + step) * 64 +
                                (strategy == PLACEMENT_PACKED ? 63 - load : load)) * RM + m) * RS + s;
                        if (best < 0 || key < best_key) {
                                best = m * RS + s;
                                best_key = key;
                        }
                }
        }
        if (best < 0)
                return "none";
        snprintf(buf, sizeof(buf), "m%ld/%ld", best / RS, best % RS);
        return buf;
}

static void random_op(void) {
        int m = rand() % RM, s = rand() % RS;
        char id[8];

        snprintf(id, sizeof(id), "m%d", m);
        switch (rand() % 10) {
        case 0:
                ref_present[m] = rand() % 4 != 0;
                ref_draining[m] = rand() % 3 == 0;
                assert_int_equal(placement_machine_set(p, id, ref_present[m], ref_draining[m]), 0);
                break;
        case 1:
                ref[m][s].exists = false;
                placement_slot_remove(p, id, (uint32_t) s);
                break;
        case 2:
                if (!ref[m][s].exists)
                        break;
                ref[m][s].pending = !ref[m][s].pending;
                placement_slot_set_pending(p, id, (uint32_t) s, ref[m][s].pending);
                break;
        default: {
                RefSlot *r = &ref[m][s];
                bool was = r->exists, pending = r->pending;
                PlacementSlot ps;

                *r = (RefSlot){ .exists = true, .region = rand() % 3, .build = rand() % 3,
                                .class = rand() % _PLACEMENT_CLASS_MAX, .busy = rand() % 3 == 0,
                                .pending = was && pending };
                ps = (PlacementSlot){ .fleet = "game", .region = regions[r->region],
                                      .build = builds[r->build], .class = r->class,
                                      .busy = r->busy };
                assert_int_equal(placement_slot_set(p, id, (uint32_t) s, &ps), 0);
        }
        }
}

static void check_picks(PlacementStrategy strategy) {
        for (int region = -1; region < 3; region++)
                /* region "" is any region in a request: the reference has no such case */
                for (int build = -1; build < 3 && region != 0; build++) {
                        int ex = rand() % (RM + 2) - 1;
                        char exid[8], *excluded[] = { exid, NULL };
                        char want[32];

                        snprintf(exid, sizeof(exid), "m%d", ex);
                        strcpy(want, ref_pick(strategy, region, build, ex));
                        assert_string_equal(pick_full(region < 0 ? NULL : regions[region],
                                                      build < 0 ? NULL : builds[build],
                                                      ex >= 0 ? excluded : NULL),
                                            want);
                }
}

static void test_against_reference(_unused_ void **state) {
        for (PlacementStrategy strategy = 0; strategy < _PLACEMENT_STRATEGY_MAX; strategy++) {
                p = placement_free(p);
                assert_int_equal(placement_new(strategy, &p), 0);
                memset(ref, 0, sizeof(ref));
                memset(ref_present, 0, sizeof(ref_present));
                memset(ref_draining, 0, sizeof(ref_draining));
                srand(15 + strategy);
                for (int i = 0; i < 20000; i++) {
                        random_op();
                        if (i % 7 == 0)
                                check_picks(strategy);
                }
                /* Everything removed: nothing is left behind. */
                for (int m = 0; m < RM; m++) {
                        char id[8];

                        snprintf(id, sizeof(id), "m%d", m);
                        for (int s = 0; s < RS; s++)
                                placement_slot_remove(p, id, (uint32_t) s);
                        assert_int_equal(placement_machine_set(p, id, false, false), 0);
                }
                assert_int_equal(placement_n_machines(p), 0);
                assert_int_equal(placement_n_slots(p), 0);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_class_of),
                cmocka_unit_test_setup_teardown(test_tiers, setup_packed, teardown),
                cmocka_unit_test_setup_teardown(test_draining_last, setup_packed, teardown),
                cmocka_unit_test_setup_teardown(test_packed, setup_packed, teardown),
                cmocka_unit_test_setup_teardown(test_distributed, setup_distributed, teardown),
                cmocka_unit_test_setup_teardown(test_filters, setup_packed, teardown),
                cmocka_unit_test_setup_teardown(test_machine_gone, setup_packed, teardown),
                cmocka_unit_test_setup_teardown(test_against_reference, setup_packed, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
