/* SPDX-License-Identifier: MIT */
/* fleet/allocator/capacity-index.c: the counts kept by events give, after any sequence of
 * them, the very capacity answer a full tally of every slot gives (the allocator's answer up
 * to 745aae9, allocator-capacity.c's capacity_tally(), kept here as the reference): slots,
 * machines, claimed, states, process states, busy and free, per region and in total, the
 * deprovisionable machines and holdUntil. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capacity-index.h"
#include "macro.h"

#define N_MACHINES 6
#define N_SLOTS 8

static const char *const machine_ids[N_MACHINES] = { "m0", "m1", "m2", "m3", "m4", "m5" };
static const char *const fleets[] = { "fa", "fb" };
static const char *const regions[] = { NULL, "", "eu", "us" };
static const char *const states[] = { "available", "online", "held", "reserved",
                                      "allocated", "weird", "odd", NULL };
static const char *const process_states[] = { "stopped", "starting", "running", "stopping",
                                              "failed", "zombie", NULL };
static const char *const allocation_ids[] = { NULL, "", "0b9d4c8e-1111-4b5c-9e2f-000000000001" };
static const uint64_t holds[] = { 0, 0, 0, 1000, 2000, 5000, 5000 };

static ScalerTarget targets[] = {
        { .fleet = (char *) "fa", .region = (char *) "eu", .buffer = 2, .ceiling = 9 },
        { .fleet = (char *) "fb", .buffer = 1, .ceiling = SCALER_CEILING_NONE },
};

/* What the fleet view holds, and the index's records kept in its slots. */
typedef struct Model {
        bool present[N_MACHINES], deprovisionable[N_MACHINES];
        bool exists[N_MACHINES][N_SLOTS];
        CapacitySlot slot[N_MACHINES][N_SLOTS];
        CapacityEntry entry[N_MACHINES][N_SLOTS];
} Model;

/* ---- the reference: the full tally, as allocator-capacity.c made it per request ---- */

#define MAX_NAMES 16
#define MAX_REGIONS 8

typedef struct RefTally {
        uint64_t slots, machines, claimed;
        const char *state_names[MAX_NAMES], *process_names[MAX_NAMES];
        uint64_t state_n[MAX_NAMES], process_n[MAX_NAMES];
        size_t n_states, n_process;
        bool machine_seen[N_MACHINES];
} RefTally;

typedef struct RefRegion {
        const char *region_id;
        RefTally tally;
        uint64_t busy, free;
} RefRegion;

typedef struct Ref {
        RefTally total;
        RefRegion regions[MAX_REGIONS];
        size_t n_regions;
        const char *deprovisionable[N_MACHINES];
        size_t n_deprovisionable;
        uint64_t hold_until;
} Ref;

static void count_up(const char **names, uint64_t *n, size_t *len, const char *name) {
        for (size_t i = 0; i < *len; i++)
                if (streq(names[i], name)) {
                        n[i]++;
                        return;
                }
        assert_true(*len < MAX_NAMES);
        names[*len] = name;
        n[(*len)++] = 1;
}

static void tally_slot(RefTally *t, const CapacitySlot *s, size_t machine) {
        t->slots++;
        if (!t->machine_seen[machine])
                t->machines++;
        t->machine_seen[machine] = true;
        if (s->state)
                count_up(t->state_names, t->state_n, &t->n_states, s->state);
        if (s->process_state)
                count_up(t->process_names, t->process_n, &t->n_process, s->process_state);
        if (s->claimed)
                t->claimed++;
}

static RefRegion *ref_region(Ref *ref, const char *region) {
        for (size_t i = 0; i < ref->n_regions; i++)
                if (streq(ref->regions[i].region_id, region))
                        return &ref->regions[i];
        assert_true(ref->n_regions < MAX_REGIONS);
        ref->regions[ref->n_regions] = (RefRegion){ .region_id = region };
        return &ref->regions[ref->n_regions++];
}

static void reference_tally(const Model *md, const char *fleet, Ref *ref) {
        bool machine_listed[N_MACHINES] = {};

        *ref = (Ref){};
        for (size_t i = 0; i < N_MACHINES; i++)
                for (size_t j = 0; j < N_SLOTS; j++) {
                        const CapacitySlot *s = &md->slot[i][j];
                        RefRegion *rr;
                        ScalerSlotKind k;

                        if (!md->exists[i][j] || !streq(s->fleet, fleet))
                                continue;
                        rr = ref_region(ref, strempty(s->region));
                        k = scaler_slot_kind_of(s->state, s->process_state, s->allocation_id,
                                                s->claimed);
                        rr->busy += k == SCALER_BUSY;
                        rr->free += k == SCALER_FREE;
                        if (!machine_listed[i] && md->present[i] && md->deprovisionable[i])
                                ref->deprovisionable[ref->n_deprovisionable++] = machine_ids[i];
                        machine_listed[i] = true;
                        ref->hold_until = MAX(ref->hold_until, s->hold_until);
                        tally_slot(&ref->total, s, i);
                        tally_slot(&rr->tally, s, i);
                }
}

/* ---- the comparison ---- */

static uint64_t ref_count(const char *const *names, const uint64_t *n, size_t len,
                          const char *name) {
        for (size_t i = 0; i < len; i++)
                if (streq(names[i], name))
                        return n[i];
        return 0;
}

static uint64_t got_count(const CapacityCount *v, size_t len, const char *name) {
        for (size_t i = 0; i < len; i++)
                if (streq(v[i].name, name))
                        return v[i].n;
        return 0;
}

/* The same counts of the same names: SPEC §13's five first, in order, even at 0; any other
 * listed only when counted, once. */
static void check_counts(const CapacityCount *v, size_t len, const char *const *names,
                         const uint64_t *n, size_t ref_len, const char *const *known) {
        for (size_t i = 0; i < 5; i++)
                assert_string_equal(v[i].name, known[i]);
        for (size_t i = 0; i < len; i++) {
                assert_int_equal(v[i].n, ref_count(names, n, ref_len, v[i].name));
                assert_true(i < 5 || v[i].n > 0);
                for (size_t k = 0; k < i; k++)
                        assert_string_not_equal(v[k].name, v[i].name);
        }
        for (size_t i = 0; i < ref_len; i++)
                assert_int_equal(got_count(v, len, names[i]), n[i]);
}

static void check_tally(const CapacityTally *t, const RefTally *ref) {
        assert_int_equal(t->slots, ref->slots);
        assert_int_equal(t->machines, ref->machines);
        assert_int_equal(t->claimed, ref->claimed);
        check_counts(t->states, t->n_states, ref->state_names, ref->state_n, ref->n_states,
                     states);
        check_counts(t->process_states, t->n_process_states, ref->process_names,
                     ref->process_n, ref->n_process, process_states);
}

static int strcmp_ptr(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void check_fleet(const Model *md, const CapacityIndex *x, const char *fleet) {
        FleetCapacity c;
        Ref ref;

        reference_tally(md, fleet, &ref);
        assert_int_equal(capacity_index_has_fleet(x, fleet), ref.total.slots > 0);
        assert_int_equal(capacity_index_tally(x, fleet, targets, ELEMENTSOF(targets), &c), 0);
        assert_int_equal(c.outcome, CAPACITY_TALLIED);
        assert_string_equal(c.fleet, fleet);
        check_tally(&c.total, &ref.total);
        assert_int_equal(c.n_regions, ref.n_regions);
        for (size_t i = 0; i < c.n_regions; i++) {
                const CapacityRegion *cr = &c.regions[i];
                const RefRegion *rr = NULL;

                for (size_t k = 0; k < ref.n_regions; k++)
                        if (streq(ref.regions[k].region_id, cr->region_id))
                                rr = &ref.regions[k];
                assert_non_null(rr);
                check_tally(&cr->tally, &rr->tally);
                assert_int_equal(cr->busy, rr->busy);
                assert_int_equal(cr->free, rr->free);
                assert_ptr_equal(cr->target, scaler_target_find(targets, ELEMENTSOF(targets),
                                                                fleet, cr->region_id));
        }
        qsort(ref.deprovisionable, ref.n_deprovisionable, sizeof(char *), strcmp_ptr);
        assert_int_equal(c.n_deprovisionable, ref.n_deprovisionable);
        for (size_t i = 0; i < c.n_deprovisionable; i++)
                assert_string_equal(c.deprovisionable[i], ref.deprovisionable[i]);
        assert_int_equal(c.hold_until, ref.hold_until);
        fleet_capacity_done(&c);
}

static void check_index(const Model *md, const CapacityIndex *x) {
        size_t n = 0;

        for (size_t f = 0; f < ELEMENTSOF(fleets); f++)
                check_fleet(md, x, fleets[f]);
        check_fleet(md, x, "nofleet");
        for (size_t i = 0; i < N_MACHINES; i++)
                for (size_t j = 0; j < N_SLOTS; j++)
                        n += md->exists[i][j];
        assert_int_equal(capacity_index_n_slots(x), n);
}

/* ---- random events ---- */

#define PICK(v) (v)[(size_t) rand() % ELEMENTSOF(v)]

static void random_slot(CapacitySlot *s, size_t i) {
        *s = (CapacitySlot){
                /* a slot's fleet is in its key: it keeps it, but a slot made anew */
                .fleet = s->fleet ? s->fleet : PICK(fleets),
                .machine_id = machine_ids[i],
                .region = PICK(regions),
                .state = PICK(states),
                .process_state = PICK(process_states),
                .allocation_id = PICK(allocation_ids),
                .claimed = rand() % 3 == 0,
                .hold_until = PICK(holds),
        };
}

/* One event of the view, applied to the model and the index. */
static void random_event(Model *md, CapacityIndex *x) {
        size_t i = (size_t) rand() % N_MACHINES, j = (size_t) rand() % N_SLOTS;
        int what = rand() % 10;

        if (what < 6) {
                if (!md->exists[i][j])
                        md->slot[i][j].fleet = NULL;
                random_slot(&md->slot[i][j], i);
                md->exists[i][j] = true;
                assert_int_equal(capacity_index_slot_set(x, &md->entry[i][j], &md->slot[i][j]),
                                 0);
        } else if (what < 8) {
                md->exists[i][j] = false;
                capacity_index_slot_remove(x, &md->entry[i][j]);
                assert_null(md->entry[i][j].total);
        } else {
                md->present[i] = rand() % 4 != 0;
                md->deprovisionable[i] = rand() % 2 == 0;
                assert_int_equal(capacity_index_machine_set(x, machine_ids[i], md->present[i],
                                                            md->deprovisionable[i]),
                                 0);
        }
}

static void run_random(unsigned seed) {
        CapacityIndex *x = NULL;
        Model *md = new0(Model, 1);

        assert_non_null(md);
        srand(seed);
        assert_int_equal(capacity_index_new(&x), 0);
        for (int e = 0; e < 800; e++) {
                random_event(md, x);
                if (e % 5 == 0)
                        check_index(md, x);
        }
        check_index(md, x);
        /* every slot removed: no fleet left */
        for (size_t i = 0; i < N_MACHINES; i++)
                for (size_t j = 0; j < N_SLOTS; j++) {
                        md->exists[i][j] = false;
                        capacity_index_slot_remove(x, &md->entry[i][j]);
                }
        check_index(md, x);
        for (size_t f = 0; f < ELEMENTSOF(fleets); f++)
                assert_false(capacity_index_has_fleet(x, fleets[f]));
        capacity_index_free(x);
        free(md);
}

static void test_random(_unused_ void **state) {
        for (unsigned seed = 1; seed <= 60; seed++)
                run_random(seed);
}

/* The example of test-allocator's capacity section, by hand. */
static void test_example(_unused_ void **state) {
        CapacityEntry e[6] = {};
        CapacityIndex *x = NULL;
        FleetCapacity c;

        assert_int_equal(capacity_index_new(&x), 0);
        assert_int_equal(capacity_index_machine_set(x, "m1", true, true), 0);
        assert_int_equal(capacity_index_machine_set(x, "m2", true, false), 0);
        assert_int_equal(capacity_index_machine_set(x, "m3", true, true), 0);
#define SLOT(m, f, st, ps, r, ...)                                                               \
        (&(CapacitySlot){ .machine_id = m, .fleet = f, .state = st, .process_state = ps,   \
                          .region = r, __VA_ARGS__ })
        assert_int_equal(capacity_index_slot_set(x, &e[0], SLOT("m1", "game", "online",
                                                                "running", "eu")), 0);
        assert_int_equal(capacity_index_slot_set(x, &e[1], SLOT("m1", "game", "held", "running",
                                                                "eu", .hold_until = 1900000000)),
                         0);
        assert_int_equal(capacity_index_slot_set(x, &e[2], SLOT("m2", "game", "allocated",
                                                                "running", "eu",
                                                                .allocation_id = "u")), 0);
        assert_int_equal(capacity_index_slot_set(x, &e[3], SLOT("m2", "game", "available",
                                                                "stopped", "eu")), 0);
        assert_int_equal(capacity_index_slot_set(x, &e[4], SLOT("m3", "game", "online",
                                                                "starting", "us")), 0);
        assert_int_equal(capacity_index_slot_set(x, &e[5], SLOT("m3", "other", "available",
                                                                "stopped", "us")), 0);
        /* a claim on m1/0 */
        assert_int_equal(capacity_index_slot_set(x, &e[0], SLOT("m1", "game", "online",
                                                                "running", "eu",
                                                                .claimed = true)), 0);
        assert_int_equal(capacity_index_tally(x, "game", targets, 0, &c), 0);
        assert_int_equal(c.total.slots, 5);
        assert_int_equal(c.total.machines, 3);
        assert_int_equal(c.total.claimed, 1);
        assert_int_equal(got_count(c.total.states, c.total.n_states, "online"), 2);
        assert_int_equal(got_count(c.total.states, c.total.n_states, "reserved"), 0);
        assert_int_equal(got_count(c.total.process_states, c.total.n_process_states, "running"),
                         3);
        assert_int_equal(c.n_regions, 2);
        assert_string_equal(c.regions[0].region_id, "eu"); /* in the order seen */
        assert_int_equal(c.regions[0].tally.slots, 4);
        assert_int_equal(c.regions[0].tally.machines, 2);
        assert_int_equal(c.regions[0].busy, 3); /* claimed, held, allocated */
        assert_int_equal(c.regions[1].free, 1);
        assert_int_equal(c.n_deprovisionable, 2);
        assert_string_equal(c.deprovisionable[0], "m1");
        assert_string_equal(c.deprovisionable[1], "m3");
        assert_int_equal(c.hold_until, 1900000000);
        fleet_capacity_done(&c);
        /* the hold ends, m3 is not deprovisionable any more, m3's game slot goes */
        assert_int_equal(capacity_index_slot_set(x, &e[1], SLOT("m1", "game", "online",
                                                                "running", "eu")), 0);
        assert_int_equal(capacity_index_machine_set(x, "m3", true, false), 0);
        capacity_index_slot_remove(x, &e[4]);
        assert_int_equal(capacity_index_tally(x, "game", targets, 0, &c), 0);
        assert_int_equal(c.n_regions, 1);
        assert_int_equal(c.total.machines, 2);
        assert_int_equal(c.n_deprovisionable, 1);
        assert_string_equal(c.deprovisionable[0], "m1");
        assert_int_equal(c.hold_until, 0);
        fleet_capacity_done(&c);
        capacity_index_free(x);
#undef SLOT
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_random),
                cmocka_unit_test(test_example),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
