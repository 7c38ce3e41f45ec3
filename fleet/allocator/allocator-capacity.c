/* SPDX-License-Identifier: MIT */
/* A fleet's capacity (SPEC §13, GET /v1/fleets/{fleetId}/capacity), tallied from the fleet
 * view: its slots, machines, states and claims, in total and by region, its machines that may
 * be deprovisioned, and the latest hold; by region also the scaler's target (this replica's
 * [scaler] targets) and its busy and free servers. An outcome (allocator-ops.h) that the door turns into
 * its answer. */
#include "allocator-cache.h"
#include "allocator-ops.h"
#include "allocator.h"

static const char *const states[] = { "available", "online", "held", "reserved", "allocated" };
static const char *const process_states[] = { "stopped", "starting", "running", "stopping",
                                              "failed" };

/* Each of names counted, at 0. */
static int counts_new(const char *const *names, size_t n, CapacityCount **ret,
                      size_t *ret_n) {
        CapacityCount *v = new0(CapacityCount, n);

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                v[i] = (CapacityCount){ .name = names[i] };
        *ret = v;
        *ret_n = n;
        return 0;
}

static int tally_init(CapacityTally *t) {
        int r = counts_new(states, ELEMENTSOF(states), &t->states, &t->n_states);

        if (r < 0)
                return r;
        return counts_new(process_states, ELEMENTSOF(process_states), &t->process_states,
                          &t->n_process_states);
}

static void tally_done(CapacityTally *t) {
        free(t->states);
        free(t->process_states);
}

/* name counted once more: a name not counted yet comes last. */
static int count_up(CapacityCount **v, size_t *n, const char *name) {
        CapacityCount *grown;

        for (size_t i = 0; i < *n; i++)
                if (streq((*v)[i].name, name)) {
                        (*v)[i].n++;
                        return 0;
                }
        grown = reallocarray(*v, *n + 1, sizeof(CapacityCount));
        if (!grown)
                return -ENOMEM;
        *v = grown;
        (*v)[(*n)++] = (CapacityCount){ .name = name, .n = 1 };
        return 0;
}

static int tally_slot(CapacityTally *t, const CacheSlot *s, bool new_machine) {
        int r = 0;

        t->slots++;
        if (new_machine)
                t->machines++;
        if (s->doc.state)
                r = count_up(&t->states, &t->n_states, s->doc.state);
        if (r >= 0 && s->doc.process_state)
                r = count_up(&t->process_states, &t->n_process_states, s->doc.process_state);
        if (s->claimed)
                t->claimed++;
        return r;
}

/* region's entry, added at the end if it has none yet, with its scaler's target. */
static CapacityRegion *region_of(const Allocator *a, FleetCapacity *c, const char *region) {
        const ScalerTargets *t = &a->config->scaler_targets;
        CapacityRegion *grown;

        for (size_t i = 0; i < c->n_regions; i++)
                if (streq(c->regions[i].region_id, region))
                        return &c->regions[i];
        grown = reallocarray(c->regions, c->n_regions + 1, sizeof(CapacityRegion));
        if (!grown)
                return NULL;
        c->regions = grown;
        c->regions[c->n_regions] = (CapacityRegion){
                .region_id = region,
                .target = scaler_target_find(t->targets, t->n, c->fleet, region),
        };
        if (tally_init(&c->regions[c->n_regions].tally) < 0) {
                tally_done(&c->regions[c->n_regions].tally);
                return NULL;
        }
        return &c->regions[c->n_regions++];
}

/* The slot as the scaler counts it (scaler-plan.h): busy, free or neither. */
static void region_count_scaler(CapacityRegion *cr, const CacheSlot *s) {
        ScalerSlotKind k = scaler_slot_kind_of(s->doc.state, s->doc.process_state,
                                               s->doc.allocation_id, s->claimed);

        if (k == SCALER_BUSY)
                cr->busy++;
        else if (k == SCALER_FREE)
                cr->free++;
}

/* Whether (key) is new to seen: its keys are strings the caller frees with the map. */
static int first_time(Hashmap *seen, char *key) {
        int r = hashmap_put(seen, key, key);

        if (r < 0)
                free(key);
        return r == -EEXIST ? 0 : r < 0 ? r : 1;
}

static int strcmp_ptr(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

typedef struct Seen {
        Hashmap machines;        /* machineID → (seen), keys the view's */
        Hashmap region_machines; /* "<region>/<machineID>" → itself, owned */
} Seen;

static void seen_done(Seen *seen) {
        hashmap_done(&seen->machines);
        hashmap_done_free(&seen->region_machines, free);
}

static int capacity_add(const Allocator *a, FleetCapacity *c, Seen *seen, const CacheSlot *s) {
        const char *region = strempty(s->doc.region_id);
        const CacheMachine *m;
        CapacityRegion *cr = region_of(a, c, region);
        char *rm;
        int r, new_machine, new_in_region;

        if (!cr || asprintf(&rm, "%s/%s", region, s->machine_id) < 0)
                return -ENOMEM;
        region_count_scaler(cr, s);
        new_in_region = first_time(&seen->region_machines, rm);
        r = hashmap_put(&seen->machines, s->machine_id, (void *) s);
        new_machine = r >= 0;
        if (new_in_region < 0 || (r < 0 && r != -EEXIST))
                return -ENOMEM;
        m = new_machine ? cache_machine(a, s->machine_id) : NULL;
        if (m && m->doc.deprovisionable)
                c->deprovisionable[c->n_deprovisionable++] = m->machine_id;
        c->hold_until = MAX(c->hold_until, s->doc.hold_until);
        r = tally_slot(&c->total, s, new_machine);
        return r < 0 ? r : tally_slot(&cr->tally, s, new_in_region > 0);
}

static int capacity_tally(const Allocator *a, FleetCapacity *c) {
        const CacheFleet *f = hashmap_get(&a->cache.fleets, c->fleet);
        _cleanup_(seen_done) Seen seen = {};
        int r;

        c->deprovisionable = new0(const char *, f ? f->n_slots + 1 : 1);
        if (!c->deprovisionable)
                return -ENOMEM;
        r = tally_init(&c->total);
        for (const CacheSlot *s = f ? f->slots : NULL; r >= 0 && s; s = s->fleet_next)
                r = capacity_add(a, c, &seen, s);
        if (r < 0)
                return r;
        qsort(c->deprovisionable, c->n_deprovisionable, sizeof(char *), strcmp_ptr);
        return 0;
}

bool alloc_fleet_known(Allocator *a, const char *fleet) {
        const CacheFleet *f = hashmap_get(&a->cache.fleets, fleet);

        return f && f->n_slots > 0;
}

void alloc_capacity(Allocator *a, const char *fleet, FleetCapacity *ret) {
        *ret = (FleetCapacity){ .fleet = fleet };
        if (!cache_ready(a)) {
                ret->outcome = CAPACITY_VIEW_NOT_READY;
                return;
        }
        if (!alloc_fleet_known(a, fleet)) {
                ret->outcome = CAPACITY_UNKNOWN_FLEET;
                return;
        }
        if (capacity_tally(a, ret) < 0) {
                fleet_capacity_done(ret);
                *ret = (FleetCapacity){ .outcome = CAPACITY_NO_MEMORY, .fleet = fleet };
        }
}

void fleet_capacity_done(FleetCapacity *c) {
        tally_done(&c->total);
        for (size_t i = 0; i < c->n_regions; i++)
                tally_done(&c->regions[i].tally);
        free(c->regions);
        free(c->deprovisionable);
        *c = (FleetCapacity){};
}
