/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "hashmap.h"
#include "macro.h"
#include "placement.h"

typedef struct PMachine PMachine;
typedef struct PSlot PSlot;
typedef struct PTier PTier;
typedef struct TierSet TierSet;
typedef struct TierGroup TierGroup;

/* The machines with candidates of one (fleet, region or any, class, build), in placement
 * order. */
struct TierSet {
        char *build; /* "" for held and available */
        PTier **items;
        size_t n, allocated;
};

/* (fleet, region or any, class): one set per build configuration. */
struct TierGroup {
        char *key;
        TierSet **sets;
        size_t n_sets;
};

/* One machine's candidate slots of one (fleet, region or any, class, build): a bitmap by
 * slot id. A slot is in two: its region's and the one of any region. */
struct PTier {
        PMachine *machine;
        char *fleet, *region, *build; /* region NULL: any */
        PlacementClass class;
        uint64_t *bits;
        size_t n_words;
        size_t count;
        TierSet *set;
        bool in_set;
        PTier *next, *prev; /* the machine's tiers */
};

struct PSlot {
        uint32_t id;
        char *fleet, *region, *build;
        PlacementClass class;
        bool busy, pending;
        PTier *tiers[2];
};

struct PMachine {
        char *id;
        bool present, draining;
        unsigned load;
        PSlot **slots; /* by slot id */
        size_t n_slots_allocated, n_slots;
        PTier *tiers;
};

struct Placement {
        PlacementStrategy strategy;
        Hashmap machines;
        Hashmap groups;
        size_t n_slots;
};

static bool isempty_str(const char *s) {
        return !s || s[0] == '\0';
}

static const char *const strategy_names[_PLACEMENT_STRATEGY_MAX] = {
        [PLACEMENT_PACKED] = "packed",
        [PLACEMENT_DISTRIBUTED] = "distributed",
};

const char *placement_strategy_to_string(PlacementStrategy s) {
        return s >= 0 && s < _PLACEMENT_STRATEGY_MAX ? strategy_names[s] : NULL;
}

PlacementStrategy placement_strategy_from_string(const char *s) {
        for (PlacementStrategy i = 0; s && i < _PLACEMENT_STRATEGY_MAX; i++)
                if (streq(strategy_names[i], s))
                        return i;
        return _PLACEMENT_STRATEGY_INVALID;
}

PlacementClass placement_class_of(const char *state, const char *process_state, bool ready,
                                  const char *allocation_id, bool claimed) {
        if (claimed || !isempty_str(allocation_id) || !state || !process_state)
                return PLACEMENT_NONE;
        /* stopping, failed: slotd would not pick it (busy, failed). */
        if (streq(state, "held"))
                return streq(process_state, "failed") || streq(process_state, "stopping")
                               ? PLACEMENT_NONE
                               : PLACEMENT_HELD;
        if (streq(state, "online")) {
                if (streq(process_state, "running"))
                        return ready ? PLACEMENT_READY : PLACEMENT_STARTING;
                return streq(process_state, "starting") ? PLACEMENT_STARTING : PLACEMENT_NONE;
        }
        if (streq(state, "available"))
                return streq(process_state, "stopped") ? PLACEMENT_AVAILABLE : PLACEMENT_NONE;
        return PLACEMENT_NONE;
}

bool placement_busy_of(const char *state, const char *allocation_id, bool claimed) {
        return claimed || !isempty_str(allocation_id) ||
               (state && (streq(state, "allocated") || streq(state, "reserved")));
}

/* ---- the order ---- */

static int machine_compare(PlacementStrategy strategy, const PMachine *a, const PMachine *b) {
        if (a->draining != b->draining)
                return a->draining ? 1 : -1;
        if (a->load != b->load) {
                bool more_first = strategy == PLACEMENT_PACKED;
                return (a->load > b->load) == more_first ? -1 : 1;
        }
        return strcmp(a->id, b->id);
}

/* The first index whose machine does not come before m. */
static size_t set_lower_bound(PlacementStrategy strategy, const TierSet *set, const PMachine *m) {
        size_t lo = 0, hi = set->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (machine_compare(strategy, set->items[mid]->machine, m) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static int set_insert(PlacementStrategy strategy, TierSet *set, PTier *t) {
        size_t i;

        if (set->n == set->allocated) {
                size_t n = set->allocated ? set->allocated * 2 : 8;
                PTier **items = reallocarray(set->items, n, sizeof(PTier *));

                if (!items)
                        return -ENOMEM;
                set->items = items;
                set->allocated = n;
        }
        i = set_lower_bound(strategy, set, t->machine);
        memmove(set->items + i + 1, set->items + i, (set->n - i) * sizeof(PTier *));
        set->items[i] = t;
        set->n++;
        return 0;
}

static void set_remove(PlacementStrategy strategy, TierSet *set, PTier *t) {
        size_t i = set_lower_bound(strategy, set, t->machine);

        if (i >= set->n || set->items[i] != t)
                return;
        memmove(set->items + i, set->items + i + 1, (set->n - i - 1) * sizeof(PTier *));
        set->n--;
}

/* ---- groups and sets ---- */

/* Lengths make the key unambiguous whatever bytes a region has; "*" is any region. */
static char *group_key(const char *fleet, const char *region, PlacementClass class) {
        char *k;

        if (!region ? asprintf(&k, "%zu:%s*%d", strlen(fleet), fleet, class) < 0
                    : asprintf(&k, "%zu:%s%zu:%s%d", strlen(fleet), fleet, strlen(region), region,
                               class) < 0)
                return NULL;
        return k;
}

static TierGroup *group_find(const Placement *p, const char *fleet, const char *region,
                             PlacementClass class) {
        _cleanup_free_ char *k = group_key(fleet, region, class);

        return k ? hashmap_get(&p->groups, k) : NULL;
}

static TierSet *group_set(const TierGroup *g, const char *build) {
        for (size_t i = 0; i < g->n_sets; i++)
                if (streq(g->sets[i]->build, build))
                        return g->sets[i];
        return NULL;
}

static TierSet *set_get_or_new(Placement *p, const char *fleet, const char *region,
                               PlacementClass class, const char *build) {
        _cleanup_free_ char *k = group_key(fleet, region, class);
        TierGroup *g;
        TierSet *s, **sets;

        if (!k)
                return NULL;
        g = hashmap_get(&p->groups, k);
        if (!g) {
                g = new0(TierGroup, 1);
                if (!g)
                        return NULL;
                g->key = TAKE_PTR(k);
                if (hashmap_put(&p->groups, g->key, g) < 0) {
                        free(g->key);
                        free(g);
                        return NULL;
                }
        }
        s = group_set(g, build);
        if (s)
                return s;
        sets = reallocarray(g->sets, g->n_sets + 1, sizeof(TierSet *));
        if (!sets)
                return NULL;
        g->sets = sets;
        s = new0(TierSet, 1);
        if (!s || !(s->build = strdup(build))) {
                free(s);
                return NULL;
        }
        g->sets[g->n_sets++] = s;
        return s;
}

/* ---- a machine's tiers ---- */

static void tier_unlink_sets(Placement *p, PTier *t) {
        if (!t->in_set)
                return;
        set_remove(p->strategy, t->set, t);
        t->in_set = false;
}

static int tier_link_sets(Placement *p, PTier *t) {
        int r;

        if (t->in_set)
                return 0;
        r = set_insert(p->strategy, t->set, t);
        if (r < 0)
                return r;
        t->in_set = true;
        return 0;
}

static void tier_free(Placement *p, PTier *t) {
        tier_unlink_sets(p, t);
        if (t->prev)
                t->prev->next = t->next;
        else
                t->machine->tiers = t->next;
        if (t->next)
                t->next->prev = t->prev;
        free(t->fleet);
        free(t->region);
        free(t->build);
        free(t->bits);
        free(t);
}

static PTier *tier_find(PMachine *m, const PSlot *s, const char *region, const char *build) {
        for (PTier *t = m->tiers; t; t = t->next)
                if (t->class == s->class && streq(t->fleet, s->fleet) &&
                    streq_ptr(t->region, region) && streq(t->build, build))
                        return t;
        return NULL;
}

/* The slot's tier of its region (region = s->region) or of any region (NULL). */
static PTier *tier_get_or_new(Placement *p, PMachine *m, const PSlot *s, const char *region) {
        const char *build = s->class == PLACEMENT_READY || s->class == PLACEMENT_STARTING
                                    ? s->build
                                    : "";
        PTier *t = tier_find(m, s, region, build);

        if (t)
                return t;
        t = new0(PTier, 1);
        if (!t)
                return NULL;
        *t = (PTier){ .machine = m, .class = s->class };
        t->fleet = strdup(s->fleet);
        t->region = region ? strdup(region) : NULL;
        t->build = strdup(build);
        if (t->fleet && (!region || t->region) && t->build)
                t->set = set_get_or_new(p, s->fleet, region, s->class, build);
        t->next = m->tiers;
        if (m->tiers)
                m->tiers->prev = t;
        m->tiers = t;
        if (!t->set) {
                tier_free(p, t);
                return NULL;
        }
        return t;
}

static int tier_add_slot(Placement *p, PTier *t, uint32_t id) {
        size_t w = id / 64;
        int r;

        if (w >= t->n_words) {
                uint64_t *bits = reallocarray(t->bits, w + 1, sizeof(uint64_t));

                if (!bits)
                        return -ENOMEM;
                memset(bits + t->n_words, 0, (w + 1 - t->n_words) * sizeof(uint64_t));
                t->bits = bits;
                t->n_words = w + 1;
        }
        if (!(t->bits[w] & (UINT64_C(1) << (id % 64)))) {
                t->bits[w] |= UINT64_C(1) << (id % 64);
                t->count++;
        }
        r = tier_link_sets(p, t);
        if (r < 0) {
                t->bits[w] &= ~(UINT64_C(1) << (id % 64));
                t->count--;
        }
        return r;
}

static void slot_untier(Placement *p, PSlot *s) {
        for (size_t i = 0; i < ELEMENTSOF(s->tiers); i++) {
                PTier *t = s->tiers[i];

                if (!t)
                        continue;
                s->tiers[i] = NULL;
                t->bits[s->id / 64] &= ~(UINT64_C(1) << (s->id % 64));
                if (--t->count == 0)
                        tier_free(p, t);
        }
}

/* Into its two tiers, or (-ENOMEM) into none. */
static int slot_tier(Placement *p, PMachine *m, PSlot *s) {
        for (size_t i = 0; i < ELEMENTSOF(s->tiers); i++) {
                PTier *t = tier_get_or_new(p, m, s, i == 0 ? s->region : NULL);
                int r = t ? tier_add_slot(p, t, s->id) : -ENOMEM;

                if (r < 0) {
                        if (t && t->count == 0)
                                tier_free(p, t);
                        slot_untier(p, s);
                        return r;
                }
                s->tiers[i] = t;
        }
        return 0;
}

/* A change of what orders the machine: out of every set, changed, back in. */
static void machine_reorder(Placement *p, PMachine *m, bool draining, unsigned load) {
        if (m->draining == draining && m->load == load)
                return;
        for (PTier *t = m->tiers; t; t = t->next)
                tier_unlink_sets(p, t);
        m->draining = draining;
        m->load = load;
        for (PTier *t = m->tiers; t; t = t->next)
                /* Out of memory: the machine's candidates are not offered until its next
                 * change, which is what -ENOMEM may cost (placement.h). */
                (void) tier_link_sets(p, t);
}

/* ---- machines and slots ---- */

static PMachine *machine_get_or_new(Placement *p, const char *id) {
        PMachine *m = hashmap_get(&p->machines, id);

        if (m)
                return m;
        m = new0(PMachine, 1);
        if (!m || !(m->id = strdup(id))) {
                free(m);
                return NULL;
        }
        if (hashmap_put(&p->machines, m->id, m) < 0) {
                free(m->id);
                free(m);
                return NULL;
        }
        return m;
}

static void machine_free(PMachine *m) {
        free(m->slots);
        free(m->id);
        free(m);
}

static void machine_gc(Placement *p, PMachine *m) {
        if (m->present || m->n_slots > 0)
                return;
        while (m->tiers)
                tier_free(p, m->tiers);
        hashmap_remove(&p->machines, m->id, m);
        machine_free(m);
}

static void slot_free(PSlot *s) {
        free(s->fleet);
        free(s->region);
        free(s->build);
        free(s);
}

static PSlot *slot_get_or_new(Placement *p, PMachine *m, uint32_t id) {
        PSlot *s;

        if (id >= m->n_slots_allocated) {
                size_t n = MAX((size_t) id + 1, m->n_slots_allocated * 2);
                PSlot **slots = reallocarray(m->slots, n, sizeof(PSlot *));

                if (!slots)
                        return NULL;
                memset(slots + m->n_slots_allocated, 0,
                       (n - m->n_slots_allocated) * sizeof(PSlot *));
                m->slots = slots;
                m->n_slots_allocated = n;
        }
        if (m->slots[id])
                return m->slots[id];
        s = new0(PSlot, 1);
        if (!s)
                return NULL;
        s->id = id;
        s->class = PLACEMENT_NONE;
        m->slots[id] = s;
        m->n_slots++;
        p->n_slots++;
        return s;
}

static int slot_describe(PSlot *s, const PlacementSlot *info) {
        int r = 0;

        if (!streq_ptr(s->fleet, info->fleet))
                r = free_and_strdup(&s->fleet, info->fleet);
        if (r >= 0 && !streq_ptr(s->region, strempty(info->region)))
                r = free_and_strdup(&s->region, strempty(info->region));
        if (r >= 0 && !streq_ptr(s->build, strempty(info->build)))
                r = free_and_strdup(&s->build, strempty(info->build));
        s->class = r < 0 ? PLACEMENT_NONE : info->class;
        return r;
}

int placement_slot_set(Placement *p, const char *machine_id, uint32_t slot_id,
                       const PlacementSlot *info) {
        PMachine *m;
        PSlot *s;
        int r;

        if (!p || !machine_id || !info || !info->fleet || slot_id > PLACEMENT_SLOT_ID_MAX)
                return -EINVAL;
        m = machine_get_or_new(p, machine_id);
        if (!m)
                return -ENOMEM;
        s = slot_get_or_new(p, m, slot_id);
        if (!s) {
                machine_gc(p, m);
                return -ENOMEM;
        }
        slot_untier(p, s);
        if (s->busy != info->busy) {
                s->busy = info->busy;
                machine_reorder(p, m, m->draining, info->busy ? m->load + 1 : m->load - 1);
        }
        r = slot_describe(s, info);
        if (r < 0 || s->class == PLACEMENT_NONE)
                return r;
        return slot_tier(p, m, s);
}

void placement_slot_remove(Placement *p, const char *machine_id, uint32_t slot_id) {
        PMachine *m = p && machine_id ? hashmap_get(&p->machines, machine_id) : NULL;
        PSlot *s = m && slot_id < m->n_slots_allocated ? m->slots[slot_id] : NULL;

        if (!s)
                return;
        slot_untier(p, s);
        if (s->busy)
                machine_reorder(p, m, m->draining, m->load - 1);
        m->slots[slot_id] = NULL;
        m->n_slots--;
        p->n_slots--;
        slot_free(s);
        machine_gc(p, m);
}

void placement_slot_set_pending(Placement *p, const char *machine_id, uint32_t slot_id,
                                bool pending) {
        PMachine *m = p && machine_id ? hashmap_get(&p->machines, machine_id) : NULL;
        PSlot *s = m && slot_id < m->n_slots_allocated ? m->slots[slot_id] : NULL;

        if (s)
                s->pending = pending;
}

int placement_machine_set(Placement *p, const char *machine_id, bool present, bool draining) {
        PMachine *m;

        if (!p || !machine_id)
                return -EINVAL;
        m = present ? machine_get_or_new(p, machine_id) : hashmap_get(&p->machines, machine_id);
        if (!m)
                return present ? -ENOMEM : 0;
        m->present = present;
        machine_reorder(p, m, draining, m->load);
        machine_gc(p, m);
        return 0;
}

/* ---- picking ---- */

static bool excluded(char *const *l, const char *id) {
        for (; l && *l; l++)
                if (streq(*l, id))
                        return true;
        return false;
}

/* The lowest slot id of t not in flight, or -1. */
static int64_t tier_first_slot(const PTier *t) {
        for (size_t w = 0; w < t->n_words; w++)
                for (uint64_t bits = t->bits[w]; bits; bits &= bits - 1) {
                        uint32_t id = (uint32_t) (w * 64 + (size_t) __builtin_ctzll(bits));

                        if (!t->machine->slots[id]->pending)
                                return id;
                }
        return -1;
}

/* The first machine of set (draining or not) with a usable slot. */
static PTier *set_first_usable(const TierSet *set, bool draining, const PlacementRequest *req,
                               uint32_t *ret_slot) {
        size_t lo = 0, hi = set->n;

        /* The set's machines that are not draining come first: find where the others start. */
        while (draining && lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (set->items[mid]->machine->draining)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        for (size_t i = lo; i < set->n; i++) {
                PTier *t = set->items[i];
                int64_t id;

                if (t->machine->draining != draining)
                        break;
                if (!t->machine->present || excluded(req->excluded, t->machine->id))
                        continue;
                id = tier_first_slot(t);
                if (id >= 0) {
                        *ret_slot = (uint32_t) id;
                        return t;
                }
        }
        return NULL;
}

/* Which sets of a group a step of the order takes: same (the requested build configuration,
 * or every one when the request names none), other (every one but the requested), all. */
typedef enum BuildMatch {
        BUILD_SAME,
        BUILD_ALL,
        BUILD_OTHER,
} BuildMatch;

static bool set_matches(const TierSet *set, BuildMatch match, const char *build) {
        bool any = isempty_str(build);

        switch (match) {
        case BUILD_SAME:
                return any || streq(set->build, build);
        case BUILD_OTHER:
                return !any && !streq(set->build, build);
        default:
                return true;
        }
}

static PTier *step_pick(const Placement *p, const PlacementRequest *req, PlacementClass class,
                        BuildMatch match, bool draining, uint32_t *ret_slot) {
        const char *region = isempty_str(req->region) ? NULL : req->region;
        TierGroup *g = group_find(p, req->fleet, region, class);
        PTier *best = NULL;
        uint32_t best_slot = 0;

        for (size_t i = 0; g && i < g->n_sets; i++) {
                uint32_t slot;
                PTier *t;

                if (!set_matches(g->sets[i], match, req->build))
                        continue;
                t = set_first_usable(g->sets[i], draining, req, &slot);
                if (!t)
                        continue;
                if (!best || machine_compare(p->strategy, t->machine, best->machine) < 0 ||
                    (t->machine == best->machine && slot < best_slot)) {
                        best = t;
                        best_slot = slot;
                }
        }
        *ret_slot = best_slot;
        return best;
}

int placement_pick(Placement *p, const PlacementRequest *req, const char **ret_machine_id,
                   uint32_t *ret_slot_id) {
        static const struct {
                PlacementClass class;
                BuildMatch match;
        } order[] = {
                { PLACEMENT_READY, BUILD_SAME },     { PLACEMENT_HELD, BUILD_ALL },
                { PLACEMENT_STARTING, BUILD_SAME },  { PLACEMENT_AVAILABLE, BUILD_ALL },
                { PLACEMENT_READY, BUILD_OTHER },    { PLACEMENT_STARTING, BUILD_OTHER },
        };

        if (!p || !req || !req->fleet)
                return -EINVAL;
        for (int draining = 0; draining < 2; draining++)
                for (size_t i = 0; i < ELEMENTSOF(order); i++) {
                        uint32_t slot;
                        PTier *t = step_pick(p, req, order[i].class, order[i].match, draining,
                                             &slot);

                        if (t) {
                                *ret_machine_id = t->machine->id;
                                *ret_slot_id = slot;
                                return 0;
                        }
                }
        return -ENOSPC;
}

/* ---- the whole ---- */

int placement_new(PlacementStrategy strategy, Placement **ret) {
        Placement *p;

        if (strategy < 0 || strategy >= _PLACEMENT_STRATEGY_MAX)
                return -EINVAL;
        p = new0(Placement, 1);
        if (!p)
                return -ENOMEM;
        p->strategy = strategy;
        *ret = p;
        return 0;
}

static void machine_free_all(void *v) {
        PMachine *m = v;

        for (size_t i = 0; i < m->n_slots_allocated; i++)
                if (m->slots[i])
                        slot_free(m->slots[i]);
        for (PTier *t = m->tiers, *n; t; t = n) {
                n = t->next;
                free(t->fleet);
                free(t->region);
                free(t->build);
                free(t->bits);
                free(t);
        }
        machine_free(m);
}

static void group_free(void *v) {
        TierGroup *g = v;

        for (size_t i = 0; i < g->n_sets; i++) {
                free(g->sets[i]->items);
                free(g->sets[i]->build);
                free(g->sets[i]);
        }
        free(g->sets);
        free(g->key);
        free(g);
}

Placement *placement_free(Placement *p) {
        if (!p)
                return NULL;
        hashmap_done_free(&p->machines, machine_free_all);
        hashmap_done_free(&p->groups, group_free);
        return mfree(p);
}

size_t placement_n_slots(const Placement *p) {
        return p ? p->n_slots : 0;
}

size_t placement_n_machines(const Placement *p) {
        return p ? p->machines.size : 0;
}
