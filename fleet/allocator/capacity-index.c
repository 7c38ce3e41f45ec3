/* SPDX-License-Identifier: MIT */
/* The capacity index (capacity-index.h): pure. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capacity-index.h"
#include "hashmap.h"
#include "list.h"
#include "macro.h"

/* SPEC §13's, listed in every answer (even at 0), first and in this order. */
static const char *const known_states[] = { "available", "online", "held", "reserved",
                                            "allocated" };
static const char *const known_process_states[] = { "stopped", "starting", "running",
                                                    "stopping", "failed" };

/* The names slots show, by id: the known ones first, for ever; any other while a slot shows
 * it (its id then reused). */
typedef struct Names {
        char **name;
        uint32_t *refs;
        size_t n, allocated, n_known;
} Names;

typedef struct Counts {
        uint32_t slots, machines, claimed, busy, free;
        uint32_t *states, *process_states; /* by name id, as long as n_* */
        size_t n_states, n_process_states;
} Counts;

typedef struct Fleet Fleet;

/* A fleet's region, or the fleet as a whole (region NULL). */
typedef struct Group {
        char *region;
        Fleet *fleet;
        Counts counts;
        LIST_FIELDS(struct Group, regions);
} Group;

struct Fleet {
        char *name;
        Group total;
        Group *regions; /* newest first */
        Hashmap regions_by_name;
        CapacityMember *deprovisionable; /* members of total whose machine's document says so */
        size_t n_deprovisionable, n_regions;
        CapacityEntry **holds; /* a max-heap by hold_until */
        size_t n_holds, allocated_holds;
        LIST_FIELDS(struct Fleet, all);
};

typedef struct Machine {
        char *id;
        bool present, deprovisionable;
        CapacityMember *members;
} Machine;

/* A machine's part of a group: its slots there. */
struct CapacityMember {
        Machine *machine;
        Group *group;
        uint32_t n_slots;
        bool listed; /* in its fleet's deprovisionable list */
        LIST_FIELDS(CapacityMember, machine);
        LIST_FIELDS(CapacityMember, deprovisionable);
};

struct CapacityIndex {
        Hashmap fleets;   /* name → Fleet */
        Fleet *all_fleets;
        Hashmap machines; /* id → Machine */
        Names states, process_states;
        size_t n_slots;
};

/* ---- names ---- */

static void names_done(Names *n) {
        for (size_t i = 0; i < n->n; i++)
                free(n->name[i]);
        free(n->name);
        free(n->refs);
        *n = (Names){};
}

static int names_grow(Names *n) {
        size_t want = n->allocated ? n->allocated * 2 : 8;
        char **name;
        uint32_t *refs;

        if (want >= CAPACITY_NAME_NONE)
                return -ENOMEM;
        name = reallocarray(n->name, want, sizeof(char *));
        if (!name)
                return -ENOMEM;
        n->name = name;
        refs = reallocarray(n->refs, want, sizeof(uint32_t));
        if (!refs)
                return -ENOMEM;
        n->refs = refs;
        n->allocated = want;
        return 0;
}

static int names_init(Names *n, const char *const *known, size_t n_known) {
        for (size_t i = 0; i < n_known; i++) {
                if (n->n == n->allocated && names_grow(n) < 0)
                        return -ENOMEM;
                n->name[n->n] = strdup(known[i]);
                if (!n->name[n->n])
                        return -ENOMEM;
                n->refs[n->n++] = 0;
        }
        n->n_known = n_known;
        return 0;
}

/* The id of name, given one if it has none; one reference more. */
static int names_ref(Names *n, const char *name, uint16_t *ret) {
        size_t free_id = n->n;

        if (!name) {
                *ret = CAPACITY_NAME_NONE;
                return 0;
        }
        for (size_t i = 0; i < n->n; i++) {
                if (n->name[i] && streq(n->name[i], name)) {
                        n->refs[i]++;
                        *ret = (uint16_t) i;
                        return 0;
                }
                if (!n->name[i] && free_id == n->n)
                        free_id = i;
        }
        if (free_id == n->n && n->n == n->allocated && names_grow(n) < 0)
                return -ENOMEM;
        n->name[free_id] = strdup(name);
        if (!n->name[free_id])
                return -ENOMEM;
        n->refs[free_id] = 1;
        if (free_id == n->n)
                n->n++;
        *ret = (uint16_t) free_id;
        return 0;
}

static void names_unref(Names *n, uint16_t id) {
        if (id == CAPACITY_NAME_NONE || id >= n->n)
                return;
        if (--n->refs[id] == 0 && id >= n->n_known) {
                free(n->name[id]);
                n->name[id] = NULL;
        }
}

/* ---- counts ---- */

static int count_reserve(uint32_t **v, size_t *n, uint16_t id) {
        uint32_t *grown;
        size_t want;

        if (id == CAPACITY_NAME_NONE || id < *n)
                return 0;
        want = MAX((size_t) id + 1, *n * 2);
        grown = reallocarray(*v, want, sizeof(uint32_t));
        if (!grown)
                return -ENOMEM;
        memset(grown + *n, 0, (want - *n) * sizeof(uint32_t));
        *v = grown;
        *n = want;
        return 0;
}

static void add(uint32_t *v, int sign) {
        *v = sign > 0 ? *v + 1 : *v - 1;
}

static void counts_done(Counts *c) {
        free(c->states);
        free(c->process_states);
        *c = (Counts){};
}

/* The entry's part of c added (1) or taken away (-1); its names' counts reserved already. */
static void counts_account(Counts *c, const CapacityEntry *e, int sign) {
        add(&c->slots, sign);
        if (e->claimed)
                add(&c->claimed, sign);
        if (e->state != CAPACITY_NAME_NONE)
                add(&c->states[e->state], sign);
        if (e->process_state != CAPACITY_NAME_NONE)
                add(&c->process_states[e->process_state], sign);
        if (e->kind == SCALER_BUSY)
                add(&c->busy, sign);
        else if (e->kind == SCALER_FREE)
                add(&c->free, sign);
}

static int counts_reserve(Counts *c, const CapacityEntry *e) {
        int r = count_reserve(&c->states, &c->n_states, e->state);

        return r < 0 ? r : count_reserve(&c->process_states, &c->n_process_states,
                                         e->process_state);
}

/* ---- the holds: a max-heap of a fleet's slots with a hold ---- */

static void heap_place(Fleet *f, size_t i, CapacityEntry *e) {
        f->holds[i] = e;
        e->hold_position = (uint32_t) i;
}

static void heap_up(Fleet *f, size_t i) {
        CapacityEntry *e = f->holds[i];

        while (i > 0 && f->holds[(i - 1) / 2]->hold_until < e->hold_until) {
                heap_place(f, i, f->holds[(i - 1) / 2]);
                i = (i - 1) / 2;
        }
        heap_place(f, i, e);
}

static void heap_down(Fleet *f, size_t i) {
        CapacityEntry *e = f->holds[i];

        for (;;) {
                size_t c = 2 * i + 1;

                if (c >= f->n_holds)
                        break;
                if (c + 1 < f->n_holds && f->holds[c + 1]->hold_until > f->holds[c]->hold_until)
                        c++;
                if (f->holds[c]->hold_until <= e->hold_until)
                        break;
                heap_place(f, i, f->holds[c]);
                i = c;
        }
        heap_place(f, i, e);
}

static int heap_reserve(Fleet *f) {
        size_t want = f->allocated_holds ? f->allocated_holds * 2 : 8;
        CapacityEntry **grown;

        if (f->n_holds < f->allocated_holds)
                return 0;
        grown = reallocarray(f->holds, want, sizeof(CapacityEntry *));
        if (!grown)
                return -ENOMEM;
        f->holds = grown;
        f->allocated_holds = want;
        return 0;
}

static void heap_insert(Fleet *f, CapacityEntry *e) {
        heap_place(f, f->n_holds++, e);
        heap_up(f, f->n_holds - 1);
}

static void heap_remove(Fleet *f, CapacityEntry *e) {
        size_t i = e->hold_position;
        CapacityEntry *last = f->holds[--f->n_holds];

        if (i == f->n_holds)
                return;
        heap_place(f, i, last);
        heap_up(f, i);
        heap_down(f, last->hold_position);
}

/* ---- fleets, groups, machines and their members ---- */

static void group_free(Group *g) {
        Fleet *f = g->fleet;

        (void) hashmap_remove(&f->regions_by_name, g->region, g);
        LIST_REMOVE(regions, f->regions, g);
        f->n_regions--;
        counts_done(&g->counts);
        free(g->region);
        free(g);
}

static void fleet_free(CapacityIndex *x, Fleet *f) {
        while (f->regions)
                group_free(f->regions);
        (void) hashmap_remove(&x->fleets, f->name, f);
        LIST_REMOVE(all, x->all_fleets, f);
        hashmap_done(&f->regions_by_name);
        counts_done(&f->total.counts);
        free(f->holds);
        free(f->name);
        free(f);
}

static Fleet *fleet_get_or_new(CapacityIndex *x, const char *name) {
        Fleet *f = hashmap_get(&x->fleets, name);

        if (f)
                return f;
        f = new0(Fleet, 1);
        if (!f || !(f->name = strdup(name)) || hashmap_put(&x->fleets, f->name, f) < 0) {
                if (f)
                        free(f->name);
                free(f);
                return NULL;
        }
        f->total.fleet = f;
        LIST_PREPEND(all, x->all_fleets, f);
        return f;
}

static Group *group_get_or_new(Fleet *f, const char *region) {
        Group *g = hashmap_get(&f->regions_by_name, region);

        if (g)
                return g;
        g = new0(Group, 1);
        if (!g || !(g->region = strdup(region)) ||
            hashmap_put(&f->regions_by_name, g->region, g) < 0) {
                if (g)
                        free(g->region);
                free(g);
                return NULL;
        }
        g->fleet = f;
        LIST_PREPEND(regions, f->regions, g);
        f->n_regions++;
        return g;
}

static Machine *machine_get_or_new(CapacityIndex *x, const char *id) {
        Machine *m = hashmap_get(&x->machines, id);

        if (m)
                return m;
        m = new0(Machine, 1);
        if (!m || !(m->id = strdup(id)) || hashmap_put(&x->machines, m->id, m) < 0) {
                if (m)
                        free(m->id);
                free(m);
                return NULL;
        }
        return m;
}

static void machine_gc(CapacityIndex *x, Machine *m) {
        if (m->present || m->members)
                return;
        (void) hashmap_remove(&x->machines, m->id, m);
        free(m->id);
        free(m);
}

static bool member_deprovisionable(const CapacityMember *mb) {
        return !mb->group->region && mb->machine->present && mb->machine->deprovisionable;
}

/* In its fleet's deprovisionable list or out of it, as its machine's document says. */
static void member_list(CapacityMember *mb) {
        Fleet *f = mb->group->fleet;
        bool want = mb->n_slots > 0 && member_deprovisionable(mb);

        if (want == mb->listed)
                return;
        if (want) {
                LIST_PREPEND(deprovisionable, f->deprovisionable, mb);
                f->n_deprovisionable++;
        } else {
                LIST_REMOVE(deprovisionable, f->deprovisionable, mb);
                f->n_deprovisionable--;
        }
        mb->listed = want;
}

static CapacityMember *member_get_or_new(Machine *m, Group *g) {
        CapacityMember *mb;

        for (mb = m->members; mb; mb = mb->machine_next)
                if (mb->group == g)
                        return mb;
        mb = new0(CapacityMember, 1);
        if (!mb)
                return NULL;
        mb->machine = m;
        mb->group = g;
        LIST_PREPEND(machine, m->members, mb);
        return mb;
}

/* The member freed once it has no slot, then its group, its fleet and its machine once
 * nothing is left of them. */
static void member_gc(CapacityIndex *x, CapacityMember *mb) {
        Machine *m = mb->machine;
        Group *g = mb->group;
        Fleet *f = g->fleet;

        if (mb->n_slots > 0)
                return;
        member_list(mb);
        LIST_REMOVE(machine, m->members, mb);
        free(mb);
        machine_gc(x, m);
        if (g->region && g->counts.slots == 0)
                group_free(g);
        if (f->total.counts.slots == 0 && !f->regions)
                fleet_free(x, f);
}

/* The entry's part of mb's group (and of mb) added or taken away. */
static void member_account(CapacityMember *mb, const CapacityEntry *e, int sign) {
        Counts *c = &mb->group->counts;

        counts_account(c, e, sign);
        add(&mb->n_slots, sign);
        if (sign > 0 && mb->n_slots == 1)
                c->machines++;
        else if (sign < 0 && mb->n_slots == 0)
                c->machines--;
        member_list(mb);
}

/* ---- slots ---- */

/* What is left of a slot_set() that failed: what it made for the slot and left empty (a
 * member without slots is new, and in no list but its machine's). */
static void undo_new(CapacityIndex *x, Fleet *f, Group *g, Machine *m, CapacityMember *total,
                     CapacityMember *region) {
        if (region && region->n_slots == 0) {
                LIST_REMOVE(machine, m->members, region);
                free(region);
        }
        if (total && total->n_slots == 0) {
                LIST_REMOVE(machine, m->members, total);
                free(total);
        }
        if (g && g->counts.slots == 0)
                group_free(g);
        if (f && f->total.counts.slots == 0 && !f->regions)
                fleet_free(x, f);
        if (m)
                machine_gc(x, m);
}

/* Each of the members of a slot that went (or moved) freed if it was the last one there:
 * its fleet's total first, so that the fleet goes with its last region. */
static void release(CapacityIndex *x, CapacityMember *total, CapacityMember *region) {
        if (total)
                member_gc(x, total);
        if (region)
                member_gc(x, region);
}

static void entry_out(CapacityIndex *x, CapacityEntry *e) {
        if (e->hold_until > 0)
                heap_remove(e->total->group->fleet, e);
        member_account(e->region, e, -1);
        member_account(e->total, e, -1);
        names_unref(&x->states, e->state);
        names_unref(&x->process_states, e->process_state);
        x->n_slots--;
}

void capacity_index_slot_remove(CapacityIndex *x, CapacityEntry *e) {
        CapacityMember *total = e->total, *region = e->region;

        if (!x || !total)
                return;
        entry_out(x, e);
        *e = (CapacityEntry){};
        release(x, total, region);
}

/* now's members made (or found), its names and their counts: all it takes to be counted. */
static int entry_prepare(CapacityIndex *x, CapacityEntry *now, const CapacitySlot *s) {
        Fleet *f = fleet_get_or_new(x, s->fleet);
        Group *g = f ? group_get_or_new(f, strempty(s->region)) : NULL;
        Machine *m = machine_get_or_new(x, s->machine_id);
        CapacityMember *total = g && m ? member_get_or_new(m, &f->total) : NULL;
        CapacityMember *region = total ? member_get_or_new(m, g) : NULL;

        if (!region || counts_reserve(&f->total.counts, now) < 0 ||
            counts_reserve(&g->counts, now) < 0 || (now->hold_until > 0 && heap_reserve(f) < 0)) {
                undo_new(x, f, g, m, total, region);
                return -ENOMEM;
        }
        now->total = total;
        now->region = region;
        return 0;
}

int capacity_index_slot_set(CapacityIndex *x, CapacityEntry *e, const CapacitySlot *s) {
        CapacityEntry now = {
                .hold_until = s->hold_until,
                .claimed = s->claimed,
                .kind = (uint8_t) scaler_slot_kind_of(s->state, s->process_state,
                                                      s->allocation_id, s->claimed),
                .state = CAPACITY_NAME_NONE,
                .process_state = CAPACITY_NAME_NONE,
        };
        CapacityMember *old_total = e->total, *old_region = e->region;
        int r = names_ref(&x->states, s->state, &now.state);

        if (r >= 0)
                r = names_ref(&x->process_states, s->process_state, &now.process_state);
        if (r >= 0)
                r = entry_prepare(x, &now, s);
        if (r < 0) {
                names_unref(&x->states, now.state);
                names_unref(&x->process_states, now.process_state);
                capacity_index_slot_remove(x, e);
                return r;
        }
        if (old_total)
                entry_out(x, e);
        *e = now;
        member_account(e->total, e, 1);
        member_account(e->region, e, 1);
        if (e->hold_until > 0)
                heap_insert(e->total->group->fleet, e);
        x->n_slots++;
        release(x, old_total == e->total ? NULL : old_total,
                old_region == e->region ? NULL : old_region);
        return 0;
}

/* ---- machines ---- */

int capacity_index_machine_set(CapacityIndex *x, const char *machine_id, bool present,
                               bool deprovisionable) {
        Machine *m = present ? machine_get_or_new(x, machine_id)
                             : hashmap_get(&x->machines, machine_id);

        if (!m)
                return present ? -ENOMEM : 0;
        m->present = present;
        m->deprovisionable = present && deprovisionable;
        for (CapacityMember *mb = m->members; mb; mb = mb->machine_next)
                member_list(mb);
        machine_gc(x, m);
        return 0;
}

/* ---- the index ---- */

int capacity_index_new(CapacityIndex **ret) {
        CapacityIndex *x = new0(CapacityIndex, 1);

        if (!x || names_init(&x->states, known_states, ELEMENTSOF(known_states)) < 0 ||
            names_init(&x->process_states, known_process_states,
                       ELEMENTSOF(known_process_states)) < 0) {
                capacity_index_free(x);
                return -ENOMEM;
        }
        *ret = x;
        return 0;
}

static void machine_free_value(void *v) {
        Machine *m = v;

        while (m->members) {
                CapacityMember *mb = m->members;

                LIST_REMOVE(machine, m->members, mb);
                free(mb);
        }
        free(m->id);
        free(m);
}

CapacityIndex *capacity_index_free(CapacityIndex *x) {
        if (!x)
                return NULL;
        /* The slots' records are the caller's: they point into what is freed here. */
        while (x->all_fleets)
                fleet_free(x, x->all_fleets);
        hashmap_done(&x->fleets);
        hashmap_done_free(&x->machines, machine_free_value);
        names_done(&x->states);
        names_done(&x->process_states);
        free(x);
        return NULL;
}

bool capacity_index_has_fleet(const CapacityIndex *x, const char *fleet) {
        return x && hashmap_get(&x->fleets, fleet);
}

size_t capacity_index_n_slots(const CapacityIndex *x) {
        return x ? x->n_slots : 0;
}

/* ---- the answer ---- */

/* The known names, each even at 0, then the others counted. */
static int counts_list(const Names *names, const uint32_t *v, size_t n, CapacityCount **ret,
                       size_t *ret_n) {
        CapacityCount *out = new0(CapacityCount, MAX(names->n, (size_t) 1));
        size_t k = 0;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < names->n; i++) {
                uint32_t c = i < n ? v[i] : 0;

                if (names->name[i] && (i < names->n_known || c > 0))
                        out[k++] = (CapacityCount){ .name = names->name[i], .n = c };
        }
        *ret = out;
        *ret_n = k;
        return 0;
}

static int tally_of(const CapacityIndex *x, const Counts *c, CapacityTally *t) {
        static const Counts none = {};
        int r;

        c = c ?: &none;
        *t = (CapacityTally){ .slots = c->slots, .machines = c->machines,
                              .claimed = c->claimed };
        r = counts_list(&x->states, c->states, c->n_states, &t->states, &t->n_states);
        if (r < 0)
                return r;
        return counts_list(&x->process_states, c->process_states, c->n_process_states,
                           &t->process_states, &t->n_process_states);
}

static int strcmp_ptr(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static int regions_of(const CapacityIndex *x, const Fleet *f, const ScalerTarget *targets,
                      size_t n_targets, FleetCapacity *c) {
        size_t i = f->n_regions;
        int r;

        c->regions = new0(CapacityRegion, MAX(f->n_regions, (size_t) 1));
        if (!c->regions)
                return -ENOMEM;
        c->n_regions = f->n_regions;
        /* newest first in the list: the answer's in the order they came */
        for (const Group *g = f->regions; g; g = g->regions_next) {
                CapacityRegion *cr = &c->regions[--i];

                *cr = (CapacityRegion){
                        .region_id = g->region,
                        .target = scaler_target_find(targets, n_targets, f->name, g->region),
                        .busy = g->counts.busy,
                        .free = g->counts.free,
                };
                r = tally_of(x, &g->counts, &cr->tally);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int deprovisionable_of(const Fleet *f, FleetCapacity *c) {
        c->deprovisionable = new0(const char *, MAX(f->n_deprovisionable, (size_t) 1));
        if (!c->deprovisionable)
                return -ENOMEM;
        for (const CapacityMember *mb = f->deprovisionable; mb; mb = mb->deprovisionable_next)
                c->deprovisionable[c->n_deprovisionable++] = mb->machine->id;
        qsort(c->deprovisionable, c->n_deprovisionable, sizeof(char *), strcmp_ptr);
        return 0;
}

int capacity_index_tally(const CapacityIndex *x, const char *fleet, const ScalerTarget *targets,
                         size_t n_targets, FleetCapacity *ret) {
        const Fleet *f = hashmap_get(&x->fleets, fleet);
        int r;

        *ret = (FleetCapacity){ .outcome = CAPACITY_TALLIED, .fleet = fleet };
        r = tally_of(x, f ? &f->total.counts : NULL, &ret->total);
        if (r >= 0 && f)
                r = regions_of(x, f, targets, n_targets, ret);
        if (r >= 0 && f)
                r = deprovisionable_of(f, ret);
        if (r < 0) {
                fleet_capacity_done(ret);
                ret->fleet = fleet;
                return r;
        }
        ret->hold_until = f && f->n_holds > 0 ? f->holds[0]->hold_until : 0;
        return 0;
}

void fleet_capacity_done(FleetCapacity *c) {
        free(c->total.states);
        free(c->total.process_states);
        for (size_t i = 0; i < c->n_regions; i++) {
                free(c->regions[i].tally.states);
                free(c->regions[i].tally.process_states);
        }
        free(c->regions);
        free(c->deprovisionable);
        *c = (FleetCapacity){};
}
