/* SPDX-License-Identifier: MIT */
/* fleet/allocator/scaler-index.c: the index kept by events gives, after any sequence of them,
 * the counts of a full recount and the very plan scaler_plan() makes from every slot
 * (scaler-index.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "scaler-index.h"

#define N_MACHINES 7
#define N_SLOTS 9 /* per machine; slot ids spread over two words: id * 13 */

static const char *const machine_ids[N_MACHINES] = { "m0", "m1", "m2", "m3", "m4", "m5", "m6" };
static const char *const fleets[] = { "fa", "fb" };
static const char *const regions[] = { "", "eu" };

/* The reference: what the fleet view holds. */
typedef struct Model {
        bool present[N_MACHINES], draining[N_MACHINES];
        bool exists[N_MACHINES][N_SLOTS];
        ScalerIndexSlot slot[N_MACHINES][N_SLOTS];
} Model;

static uint32_t slot_id_of(size_t j) {
        return (uint32_t) j * 13;
}

/* The slot as allocator-scaler.c's plan saw it before the index (its entries_build(), up to
 * 83f7aa0): a command of a machine gone, or not a command, makes it count for nothing. */
static ScalerSlot model_scaler_slot(const Model *md, size_t i, size_t j) {
        const ScalerIndexSlot *s = &md->slot[i][j];
        ScalerSlot ss = { .machine_id = machine_ids[i], .slot_id = slot_id_of(j),
                          .kind = s->kind, .ready = s->ready,
                          .draining = s->draining || (md->present[i] && md->draining[i]) };

        if (s->command && (!md->present[i] || s->action == SCALER_NONE))
                ss.kind = SCALER_OTHER;
        else if (s->command)
                ss.pending = s->action;
        return ss;
}

static bool in_group(const Model *md, size_t i, size_t j, const char *fleet,
                     const char *region) {
        return md->exists[i][j] && streq(md->slot[i][j].fleet, fleet) &&
               streq(strempty(md->slot[i][j].region), region);
}

/* The group's slots, with their machine's load, as scaler_plan() takes them. */
static size_t model_group(const Model *md, const char *fleet, const char *region,
                          ScalerSlot *out) {
        size_t n = 0;

        for (size_t i = 0; i < N_MACHINES; i++) {
                uint32_t load = 0;

                for (size_t j = 0; j < N_SLOTS; j++)
                        if (md->exists[i][j])
                                load += model_scaler_slot(md, i, j).kind == SCALER_BUSY;
                for (size_t j = 0; j < N_SLOTS; j++)
                        if (in_group(md, i, j, fleet, region)) {
                                out[n] = model_scaler_slot(md, i, j);
                                out[n++].machine_load = load;
                        }
        }
        return n;
}

static void random_slot(ScalerIndexSlot *s) {
        static const ScalerAction actions[] = { SCALER_START, SCALER_STOP, SCALER_NONE };

        *s = (ScalerIndexSlot){
                .fleet = fleets[rand() % 2 == 0 ? 0 : rand() % 2],
                .region = regions[rand() % 4 == 0 ? 1 : 0],
                .kind = (ScalerSlotKind) (rand() % _SCALER_SLOT_KIND_MAX),
                .ready = rand() % 3 != 0,
                .command = rand() % 4 == 0,
        };
        s->action = s->command ? actions[rand() % 3] : SCALER_NONE;
}

/* One event of the view, applied to the model and the index. */
static void random_event(Model *md, ScalerIndex *x) {
        size_t i = (size_t) rand() % N_MACHINES, j = (size_t) rand() % N_SLOTS;
        int what = rand() % 10;

        if (what < 6) {
                random_slot(&md->slot[i][j]);
                md->exists[i][j] = true;
                assert_int_equal(scaler_index_slot_set(x, machine_ids[i], slot_id_of(j),
                                                       &md->slot[i][j]), 0);
        } else if (what < 8) {
                md->exists[i][j] = false;
                scaler_index_slot_remove(x, machine_ids[i], slot_id_of(j));
        } else {
                md->present[i] = rand() % 5 != 0;
                md->draining[i] = rand() % 3 == 0;
                assert_int_equal(scaler_index_machine_set(x, machine_ids[i], md->present[i],
                                                          md->draining[i]), 0);
        }
}

/* Every group of the model is one of the index, with the same counts and the same plans. */
static void check_index(const Model *md, const ScalerIndex *x, PlacementStrategy st) {
        static const ScalerTarget targets[] = {
                { .buffer = 3, .ceiling = SCALER_CEILING_NONE },
                { .buffer = 0, .ceiling = 1 },
                { .buffer = 1, .floor = 12, .ceiling = SCALER_CEILING_NONE },
                { .buffer = 0, .ceiling = 0 },
                { .buffer = 9, .ceiling = 20 },
        };
        size_t n_groups = 0, n_model = 0;

        for (ScalerGroup *g = scaler_index_first(x); g; g = scaler_index_next(g)) {
                ScalerSlot slots[N_MACHINES * N_SLOTS];
                size_t n = model_group(md, scaler_group_fleet(g), scaler_group_region(g), slots);
                ScalerCount want, got = scaler_group_count(g);
                uint32_t commanded = 0;

                assert_true(n > 0); /* no group without slots */
                n_groups++;
                (void) scaler_plan(NULL, st, slots, n, NULL, NULL, 0, &want);
                assert_int_equal(got.busy, want.busy);
                assert_int_equal(got.free, want.free);
                assert_int_equal(got.stopped, want.stopped);
                assert_int_equal(got.running, want.running);
                for (size_t i = 0; i < n; i++)
                        commanded += slots[i].pending != SCALER_NONE;
                assert_int_equal(scaler_group_commanded(g), commanded);
                for (size_t t = 0; t < ELEMENTSOF(targets); t++)
                        for (size_t max = 2; max <= 64; max += 62) {
                                size_t actions[64];
                                ScalerAction kinds[64];
                                ScalerPick picks[64];
                                ScalerCount c1, c2;
                                size_t k1 = scaler_plan(&targets[t], st, slots, n, actions, kinds,
                                                        max, &c1);
                                int k2 = scaler_group_plan(x, g, &targets[t], picks, max, &c2);

                                assert_int_equal(k2, (int) k1);
                                assert_int_equal(c1.wanted, c2.wanted);
                                for (size_t a = 0; a < k1; a++) {
                                        assert_string_equal(picks[a].machine_id,
                                                            slots[actions[a]].machine_id);
                                        assert_int_equal(picks[a].slot_id,
                                                         slots[actions[a]].slot_id);
                                        assert_int_equal(picks[a].action, kinds[a]);
                                }
                        }
        }
        /* as many groups as the model has */
        for (size_t f = 0; f < ELEMENTSOF(fleets); f++)
                for (size_t r = 0; r < ELEMENTSOF(regions); r++) {
                        bool any = false;

                        for (size_t i = 0; i < N_MACHINES; i++)
                                for (size_t j = 0; j < N_SLOTS; j++)
                                        any = any || in_group(md, i, j, fleets[f], regions[r]);
                        n_model += any;
                }
        assert_int_equal(n_groups, n_model);
}

static void run_random(PlacementStrategy st, unsigned seed) {
        ScalerIndex *x = NULL;
        Model md = {};
        size_t n_slots = 0;

        srand(seed);
        assert_int_equal(scaler_index_new(st, &x), 0);
        for (int e = 0; e < 600; e++) {
                random_event(&md, x);
                if (e % 7 == 0)
                        check_index(&md, x, st);
        }
        check_index(&md, x, st);
        for (size_t i = 0; i < N_MACHINES; i++)
                for (size_t j = 0; j < N_SLOTS; j++)
                        n_slots += md.exists[i][j];
        assert_int_equal(scaler_index_n_slots(x), n_slots);
        /* every slot removed: no group left */
        for (size_t i = 0; i < N_MACHINES; i++)
                for (size_t j = 0; j < N_SLOTS; j++)
                        scaler_index_slot_remove(x, machine_ids[i], slot_id_of(j));
        assert_null(scaler_index_first(x));
        assert_int_equal(scaler_index_n_slots(x), 0);
        scaler_index_free(x);
}

static void test_random_packed(_unused_ void **state) {
        for (unsigned seed = 1; seed <= 40; seed++)
                run_random(PLACEMENT_PACKED, seed);
}

static void test_random_distributed(_unused_ void **state) {
        for (unsigned seed = 101; seed <= 140; seed++)
                run_random(PLACEMENT_DISTRIBUTED, seed);
}

#define SLOT(k, ...) (&(ScalerIndexSlot){ .fleet = "f", .kind = SCALER_##k, __VA_ARGS__ })

/* A drain larger than any former cap: one plan starts all it needs, packed filling the
 * busiest machine first, whole. */
static void test_large_refill(_unused_ void **state) {
        ScalerTarget t = { .buffer = 500, .ceiling = SCALER_CEILING_NONE };
        ScalerIndex *x = NULL;
        _cleanup_free_ ScalerPick *picks = new0(ScalerPick, 2000);
        ScalerCount c;
        char id[16];

        assert_non_null(picks);
        assert_int_equal(scaler_index_new(PLACEMENT_PACKED, &x), 0);
        for (int m = 0; m < 40; m++) {
                snprintf(id, sizeof(id), "m%02d", m);
                assert_int_equal(scaler_index_machine_set(x, id, true, false), 0);
                for (uint32_t s = 0; s < 50; s++)
                        assert_int_equal(scaler_index_slot_set(x, id, s,
                                                               m == 17 && s < 10
                                                                       ? SLOT(BUSY)
                                                                       : SLOT(STOPPED)),
                                         0);
        }
        assert_int_equal(scaler_group_plan(x, scaler_index_first(x), &t, picks, 2000, &c), 500);
        assert_int_equal(c.busy, 10);
        assert_int_equal(c.wanted, 510);
        /* m17 (10 busy) first, its 40 stopped slots from the lowest id; then by id */
        assert_string_equal(picks[0].machine_id, "m17");
        assert_int_equal(picks[0].slot_id, 10);
        assert_string_equal(picks[39].machine_id, "m17");
        assert_int_equal(picks[39].slot_id, 49);
        assert_string_equal(picks[40].machine_id, "m00");
        assert_int_equal(picks[40].slot_id, 0);
        assert_string_equal(picks[499].machine_id, "m09");
        assert_int_equal(picks[499].slot_id, 9);
        /* the plan changed nothing; capped by max */
        assert_int_equal(scaler_group_plan(x, scaler_index_first(x), &t, picks, 3, &c), 3);
        assert_int_equal(scaler_group_count(scaler_index_first(x)).stopped, 1990);
        scaler_index_free(x);
}

/* A slot's own draining keeps starts off its machine, and puts its stops first. */
static void test_slot_draining(_unused_ void **state) {
        ScalerTarget t = { .buffer = 1, .ceiling = SCALER_CEILING_NONE };
        ScalerIndex *x = NULL;
        ScalerPick p[4];

        assert_int_equal(scaler_index_new(PLACEMENT_PACKED, &x), 0);
        assert_int_equal(scaler_index_slot_set(x, "a", 0, SLOT(BUSY)), 0);
        assert_int_equal(scaler_index_slot_set(x, "a", 1, SLOT(STOPPED, .draining = true)), 0);
        assert_int_equal(scaler_index_slot_set(x, "b", 0, SLOT(STOPPED)), 0);
        assert_int_equal(scaler_group_plan(x, scaler_index_first(x), &t, p, 4, NULL), 1);
        assert_string_equal(p[0].machine_id, "b");
        /* not draining any more: a (busier) first */
        assert_int_equal(scaler_index_slot_set(x, "a", 1, SLOT(STOPPED)), 0);
        assert_int_equal(scaler_group_plan(x, scaler_index_first(x), &t, p, 4, NULL), 1);
        assert_string_equal(p[0].machine_id, "a");
        scaler_index_free(x);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_random_packed),
                cmocka_unit_test(test_random_distributed),
                cmocka_unit_test(test_large_refill),
                cmocka_unit_test(test_slot_draining),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
