/* SPDX-License-Identifier: MIT */
/* The scaler's index (scaler-index.h): pure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "macro.h"
#include "scaler-index.h"

typedef struct IMachine IMachine;
typedef struct GMachine GMachine;

/* One slot as the view shows it. */
typedef struct ISlot {
        GMachine *gm; /* its group's entry of its machine */
        ScalerSlotKind kind;
        ScalerAction action;
        bool ready, draining, command;
} ISlot;

struct IMachine {
        char *id;
        bool present, draining;
        uint32_t load; /* busy slots, in any fleet */
        ISlot **slots; /* by slot id */
        size_t n_allocated, n_slots;
        GMachine *gms; /* its groups' entries */
};

/* A machine's part of one group. */
struct GMachine {
        IMachine *m;
        ScalerGroup *g;
        uint32_t n_slots, running, free, draining_slots;
        uint32_t n_starts, n_stops; /* candidates: the bits set below */
        uint64_t *start_bits, *stop_ready_bits, *stop_unready_bits;
        size_t n_words;
        bool in_starts, in_stops;
        /* while in an array: what ordered it when it went in (an array is sorted by these,
         * so that a change is seen, and the old place found, after the counts changed) */
        uint32_t linked_running, linked_free, linked_load;
        bool linked_draining;
        GMachine *next, *prev; /* the machine's */
};

typedef struct MachineArray {
        GMachine **items;
        size_t n, allocated;
} MachineArray;

struct ScalerGroup {
        char *key, *fleet, *region;
        uint32_t busy, free, stopped, commanded;
        size_t n_gms;
        MachineArray starts, stops; /* in the plan's order */
        ScalerGroup *next, *prev;
};

struct ScalerIndex {
        PlacementStrategy strategy;
        Hashmap machines; /* id → IMachine */
        Hashmap groups;   /* key → ScalerGroup */
        ScalerGroup *all_groups;
        size_t n_slots;
};

/* ---- the order (scaler-plan.h) ---- */

/* What orders a machine of a group: its counts (as the plan has left them, in a plan), its
 * machine's load and draining. */
typedef struct Key {
        const GMachine *gm;
        uint32_t running, free, load;
        bool draining;
} Key;

static bool gm_draining(const GMachine *gm) {
        return gm->m->draining || gm->draining_slots > 0;
}

static Key key_of(const GMachine *gm) {
        return (Key){ .gm = gm, .running = gm->running, .free = gm->free,
                      .load = gm->m->load, .draining = gm_draining(gm) };
}

static bool key_equal(const Key *a, const Key *b) {
        return a->running == b->running && a->free == b->free && a->load == b->load &&
               a->draining == b->draining;
}

static bool start_before(PlacementStrategy st, const Key *a, const Key *b) {
        uint32_t la = a->load, lb = b->load;

        if (st == PLACEMENT_PACKED && la != lb)
                return la > lb;
        if (st != PLACEMENT_PACKED && a->running != b->running)
                return a->running < b->running;
        if (st == PLACEMENT_PACKED && a->running != b->running)
                return a->running > b->running;
        return strcmp(a->gm->m->id, b->gm->m->id) < 0;
}

static bool stop_before(PlacementStrategy st, const Key *a, const Key *b) {
        bool da = a->draining, db = b->draining;
        uint32_t la = a->load, lb = b->load;

        if (da != db)
                return da;
        if (st == PLACEMENT_PACKED) {
                if (la != lb)
                        return la < lb;
                if (a->free != b->free)
                        return a->free < b->free;
        } else if (a->running != b->running)
                return a->running > b->running;
        return strcmp(a->gm->m->id, b->gm->m->id) < 0;
}

static bool before(PlacementStrategy st, ScalerAction action, const Key *a, const Key *b) {
        return action == SCALER_START ? start_before(st, a, b) : stop_before(st, a, b);
}

/* ---- the sorted arrays ---- */

static Key key_linked(const GMachine *gm) {
        return (Key){ .gm = gm, .running = gm->linked_running, .free = gm->linked_free,
                      .load = gm->linked_load, .draining = gm->linked_draining };
}

static size_t array_lower_bound(PlacementStrategy st, ScalerAction action,
                                const MachineArray *arr, const GMachine *gm) {
        Key k = key_linked(gm);
        size_t lo = 0, hi = arr->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                Key km = key_linked(arr->items[mid]);

                if (before(st, action, &km, &k))
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static int array_insert(PlacementStrategy st, ScalerAction action, MachineArray *arr,
                        GMachine *gm) {
        size_t i;

        if (arr->n == arr->allocated) {
                size_t n = arr->allocated ? arr->allocated * 2 : 8;
                GMachine **items = reallocarray(arr->items, n, sizeof(GMachine *));

                if (!items)
                        return -ENOMEM;
                arr->items = items;
                arr->allocated = n;
        }
        i = array_lower_bound(st, action, arr, gm);
        memmove(arr->items + i + 1, arr->items + i, (arr->n - i) * sizeof(GMachine *));
        arr->items[i] = gm;
        arr->n++;
        return 0;
}

static void array_remove(PlacementStrategy st, ScalerAction action, MachineArray *arr,
                         GMachine *gm) {
        size_t i = array_lower_bound(st, action, arr, gm);

        if (i >= arr->n || arr->items[i] != gm)
                return;
        memmove(arr->items + i, arr->items + i + 1, (arr->n - i - 1) * sizeof(GMachine *));
        arr->n--;
}

static void gm_unlink(const ScalerIndex *x, GMachine *gm) {
        if (gm->in_starts)
                array_remove(x->strategy, SCALER_START, &gm->g->starts, gm);
        if (gm->in_stops)
                array_remove(x->strategy, SCALER_STOP, &gm->g->stops, gm);
        gm->in_starts = gm->in_stops = false;
}

/* In its group's arrays where it has candidates (no start on a draining machine), at the
 * place its counts now give it: moved only if what orders it changed. Out of memory: not a
 * candidate until its next change. */
static void gm_relink(const ScalerIndex *x, GMachine *gm) {
        Key now = key_of(gm), was = key_linked(gm);
        bool starts = gm->n_starts > 0 && !now.draining, stops = gm->n_stops > 0;

        if ((gm->in_starts || gm->in_stops) && !key_equal(&now, &was))
                gm_unlink(x, gm);
        if (gm->in_starts && !starts) {
                array_remove(x->strategy, SCALER_START, &gm->g->starts, gm);
                gm->in_starts = false;
        }
        if (gm->in_stops && !stops) {
                array_remove(x->strategy, SCALER_STOP, &gm->g->stops, gm);
                gm->in_stops = false;
        }
        if (!gm->in_starts && !gm->in_stops) {
                gm->linked_running = now.running;
                gm->linked_free = now.free;
                gm->linked_load = now.load;
                gm->linked_draining = now.draining;
        }
        if (starts && !gm->in_starts)
                gm->in_starts = array_insert(x->strategy, SCALER_START, &gm->g->starts, gm) >= 0;
        if (stops && !gm->in_stops)
                gm->in_stops = array_insert(x->strategy, SCALER_STOP, &gm->g->stops, gm) >= 0;
}

/* ---- bitmaps ---- */

static void bit_set(uint64_t *bits, uint32_t id, bool on) {
        if (on)
                bits[id / 64] |= UINT64_C(1) << (id % 64);
        else
                bits[id / 64] &= ~(UINT64_C(1) << (id % 64));
}

/* The lowest set bit at or above from, or -1. */
static int64_t bit_next(const uint64_t *bits, size_t n_words, uint32_t from) {
        for (size_t w = from / 64; w < n_words; w++) {
                uint64_t v = bits[w];

                if (w == from / 64)
                        v &= ~UINT64_C(0) << (from % 64);
                if (v)
                        return (int64_t) (w * 64 + (size_t) __builtin_ctzll(v));
        }
        return -1;
}

/* The highest set bit at or below from, or -1. */
static int64_t bit_prev(const uint64_t *bits, size_t n_words, int64_t from) {
        if (from < 0 || n_words == 0)
                return -1;
        if ((uint64_t) from >= n_words * 64)
                from = (int64_t) (n_words * 64 - 1);
        for (int64_t w = from / 64; w >= 0; w--) {
                uint64_t v = bits[w];

                if (w == from / 64 && from % 64 != 63)
                        v &= (UINT64_C(1) << (from % 64 + 1)) - 1;
                if (v)
                        return w * 64 + 63 - __builtin_clzll(v);
        }
        return -1;
}

static int gm_grow(GMachine *gm, uint32_t id) {
        size_t n = (size_t) id / 64 + 1;
        uint64_t **maps[] = { &gm->start_bits, &gm->stop_ready_bits, &gm->stop_unready_bits };

        if (n <= gm->n_words)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(maps); i++) {
                uint64_t *b = reallocarray(*maps[i], n, sizeof(uint64_t));

                if (!b)
                        return -ENOMEM; /* the grown ones are zeroed below on the next try */
                memset(b + gm->n_words, 0, (n - gm->n_words) * sizeof(uint64_t));
                *maps[i] = b;
        }
        gm->n_words = n;
        return 0;
}

/* ---- groups and their machines ---- */

/* Lengths make the key unambiguous whatever bytes a name has. */
static char *group_key(const char *fleet, const char *region) {
        char *k;

        return asprintf(&k, "%zu:%s%zu:%s", strlen(fleet), fleet, strlen(region), region) < 0
                       ? NULL
                       : k;
}

static void group_free(ScalerGroup *g) {
        free(g->starts.items);
        free(g->stops.items);
        free(g->key);
        free(g->fleet);
        free(g->region);
        free(g);
}

static ScalerGroup *group_get_or_new(ScalerIndex *x, const char *fleet, const char *region) {
        _cleanup_free_ char *k = group_key(fleet, region);
        ScalerGroup *g;

        if (!k)
                return NULL;
        g = hashmap_get(&x->groups, k);
        if (g)
                return g;
        g = new0(ScalerGroup, 1);
        if (!g)
                return NULL;
        g->key = TAKE_PTR(k);
        g->fleet = strdup(fleet);
        g->region = strdup(region);
        if (!g->fleet || !g->region || hashmap_put(&x->groups, g->key, g) < 0) {
                group_free(g);
                return NULL;
        }
        g->next = x->all_groups;
        if (x->all_groups)
                x->all_groups->prev = g;
        x->all_groups = g;
        return g;
}

static void group_gc(ScalerIndex *x, ScalerGroup *g) {
        if (g->n_gms > 0)
                return;
        (void) hashmap_remove(&x->groups, g->key, g);
        if (g->prev)
                g->prev->next = g->next;
        else
                x->all_groups = g->next;
        if (g->next)
                g->next->prev = g->prev;
        group_free(g);
}

static GMachine *gm_get_or_new(ScalerIndex *x, IMachine *m, ScalerGroup *g) {
        GMachine *gm;

        for (gm = m->gms; gm; gm = gm->next)
                if (gm->g == g)
                        return gm;
        gm = new0(GMachine, 1);
        if (!gm)
                return NULL;
        gm->m = m;
        gm->g = g;
        gm->next = m->gms;
        if (m->gms)
                m->gms->prev = gm;
        m->gms = gm;
        g->n_gms++;
        return gm;
}

/* Freed once it has no slot (it is out of the arrays then: no candidate). */
static void gm_gc(ScalerIndex *x, GMachine *gm) {
        ScalerGroup *g = gm->g;

        if (gm->n_slots > 0)
                return;
        gm_unlink(x, gm);
        if (gm->prev)
                gm->prev->next = gm->next;
        else
                gm->m->gms = gm->next;
        if (gm->next)
                gm->next->prev = gm->prev;
        free(gm->start_bits);
        free(gm->stop_ready_bits);
        free(gm->stop_unready_bits);
        free(gm);
        g->n_gms--;
        group_gc(x, g);
}

/* ---- a slot's part in the counts ---- */

/* What the slot is, a command in flight on it done (scaler-plan.h): its kind and pending
 * command as allocator-scaler.c's plan sees them. */
static void slot_effective(const IMachine *m, const ISlot *s, ScalerSlotKind *ret_kind,
                           ScalerAction *ret_pending) {
        if (s->command && (!m->present || s->action == SCALER_NONE)) {
                /* a command of a machine gone (deleted by the leader), or not a command (its
                 * registry deletes it): the slot counts for nothing meanwhile */
                *ret_kind = SCALER_OTHER;
                *ret_pending = SCALER_NONE;
                return;
        }
        *ret_kind = s->kind;
        *ret_pending = s->command ? s->action : SCALER_NONE;
}

static ScalerSlotKind counted(ScalerSlotKind kind, ScalerAction pending) {
        if (pending == SCALER_START && kind == SCALER_STOPPED)
                return SCALER_FREE;
        if (pending == SCALER_STOP && kind == SCALER_FREE)
                return SCALER_STOPPED;
        return kind;
}

static void add(uint32_t *v, int sign) {
        *v = sign > 0 ? *v + 1 : *v - 1;
}

/* The slot's part added (sign 1) or taken away (-1); machine_relink() follows. */
static void slot_account(const IMachine *m, uint32_t id, const ISlot *s, int sign) {
        GMachine *gm = s->gm;
        ScalerGroup *g = gm->g;
        ScalerSlotKind kind;
        ScalerAction pending;

        slot_effective(m, s, &kind, &pending);
        add(&gm->n_slots, sign);
        if (s->draining)
                add(&gm->draining_slots, sign);
        if (pending != SCALER_NONE)
                add(&g->commanded, sign);
        switch (counted(kind, pending)) {
        case SCALER_BUSY:
                add(&g->busy, sign);
                add(&gm->running, sign);
                break;
        case SCALER_FREE:
                add(&g->free, sign);
                add(&gm->free, sign);
                add(&gm->running, sign);
                break;
        case SCALER_STOPPED:
                add(&g->stopped, sign);
                break;
        default:
                break;
        }
        if (kind == SCALER_BUSY)
                add(&gm->m->load, sign);
        if (pending != SCALER_NONE)
                return;
        if (kind == SCALER_STOPPED) {
                bit_set(gm->start_bits, id, sign > 0);
                add(&gm->n_starts, sign);
        } else if (kind == SCALER_FREE) {
                bit_set(s->ready ? gm->stop_ready_bits : gm->stop_unready_bits, id, sign > 0);
                add(&gm->n_stops, sign);
        }
}

/* Every group entry of m (its load or draining may have changed) where it now belongs. */
static void machine_relink(ScalerIndex *x, IMachine *m) {
        for (GMachine *gm = m->gms, *n; gm; gm = n) {
                n = gm->next;
                gm_relink(x, gm);
                gm_gc(x, gm);
        }
}

/* ---- machines and slots ---- */

static IMachine *machine_get_or_new(ScalerIndex *x, const char *id) {
        IMachine *m = hashmap_get(&x->machines, id);

        if (m)
                return m;
        m = new0(IMachine, 1);
        if (!m || !(m->id = strdup(id)) || hashmap_put(&x->machines, m->id, m) < 0) {
                if (m)
                        free(m->id);
                free(m);
                return NULL;
        }
        return m;
}

static void machine_gc(ScalerIndex *x, IMachine *m) {
        if (m->present || m->n_slots > 0 || m->gms)
                return;
        (void) hashmap_remove(&x->machines, m->id, m);
        free(m->slots);
        free(m->id);
        free(m);
}

static ISlot *machine_slot(const IMachine *m, uint32_t id) {
        return m && id < m->n_allocated ? m->slots[id] : NULL;
}

/* The slot taken out of its machine's counts (its machine unlinked). */
static void slot_drop(ScalerIndex *x, IMachine *m, uint32_t id) {
        ISlot *s = machine_slot(m, id);

        if (!s)
                return;
        slot_account(m, id, s, -1);
        m->slots[id] = NULL;
        m->n_slots--;
        x->n_slots--;
        free(s);
}

/* hint: the group the slot was in (NULL: none), found again without a lookup. */
static int slot_place(ScalerIndex *x, IMachine *m, uint32_t id, const ScalerIndexSlot *info,
                      ScalerGroup *hint) {
        ScalerGroup *g;
        GMachine *gm;
        ISlot *s;

        if (id >= m->n_allocated) {
                size_t n = MAX((size_t) id + 1, m->n_allocated * 2);
                ISlot **slots = reallocarray(m->slots, n, sizeof(ISlot *));

                if (!slots)
                        return -ENOMEM;
                memset(slots + m->n_allocated, 0, (n - m->n_allocated) * sizeof(ISlot *));
                m->slots = slots;
                m->n_allocated = n;
        }
        g = hint && streq(hint->fleet, info->fleet) && streq(hint->region, strempty(info->region))
                    ? hint
                    : group_get_or_new(x, info->fleet, strempty(info->region));
        gm = g ? gm_get_or_new(x, m, g) : NULL;
        if (!gm) {
                if (g)
                        group_gc(x, g);
                return -ENOMEM;
        }
        s = new0(ISlot, 1);
        if (!s || gm_grow(gm, id) < 0) {
                free(s);
                gm_gc(x, gm);
                return -ENOMEM;
        }
        *s = (ISlot){ .gm = gm, .kind = info->kind, .action = info->action,
                      .ready = info->ready, .draining = info->draining,
                      .command = info->command };
        m->slots[id] = s;
        m->n_slots++;
        x->n_slots++;
        slot_account(m, id, s, 1);
        return 0;
}

int scaler_index_slot_set(ScalerIndex *x, const char *machine_id, uint32_t slot_id,
                          const ScalerIndexSlot *info) {
        ScalerGroup *was;
        IMachine *m;
        int r;

        if (!x || !machine_id || !info || !info->fleet || slot_id > PLACEMENT_SLOT_ID_MAX)
                return -EINVAL;
        m = machine_get_or_new(x, machine_id);
        if (!m)
                return -ENOMEM;
        was = machine_slot(m, slot_id) ? machine_slot(m, slot_id)->gm->g : NULL;
        slot_drop(x, m, slot_id);
        r = slot_place(x, m, slot_id, info, was);
        machine_relink(x, m);
        machine_gc(x, m);
        return r;
}

void scaler_index_slot_remove(ScalerIndex *x, const char *machine_id, uint32_t slot_id) {
        IMachine *m = x && machine_id ? hashmap_get(&x->machines, machine_id) : NULL;

        if (!machine_slot(m, slot_id))
                return;
        slot_drop(x, m, slot_id);
        machine_relink(x, m);
        machine_gc(x, m);
}

/* Its presence changes what its slots' commands count for: each slot again. */
int scaler_index_machine_set(ScalerIndex *x, const char *machine_id, bool present,
                             bool draining) {
        IMachine *m;

        if (!x || !machine_id)
                return -EINVAL;
        m = present ? machine_get_or_new(x, machine_id) : hashmap_get(&x->machines, machine_id);
        if (!m)
                return present ? -ENOMEM : 0;
        if (m->present != present)
                for (size_t i = 0; i < m->n_allocated; i++)
                        if (m->slots[i] && m->slots[i]->command)
                                slot_account(m, (uint32_t) i, m->slots[i], -1);
        if (m->present != present) {
                m->present = present;
                for (size_t i = 0; i < m->n_allocated; i++)
                        if (m->slots[i] && m->slots[i]->command)
                                slot_account(m, (uint32_t) i, m->slots[i], 1);
        }
        m->draining = present && draining;
        machine_relink(x, m);
        machine_gc(x, m);
        return 0;
}

/* ---- the plan ---- */

/* A machine the plan has taken from: its counts as the plan left them, and where its next
 * candidate is looked for. */
typedef struct Taken {
        Key key;
        uint32_t left;  /* its candidates not taken yet */
        int64_t cursor; /* starts: the next id up; stops: the next id down */
        bool ready;     /* stops: the unready ones are taken, the ready ones now */
} Taken;

typedef struct Heap {
        Taken *items;
        size_t n;
        PlacementStrategy st;
        ScalerAction action;
} Heap;

static bool heap_before(const Heap *h, size_t i, size_t j) {
        return before(h->st, h->action, &h->items[i].key, &h->items[j].key);
}

static void heap_swap(Heap *h, size_t i, size_t j) {
        Taken t = h->items[i];

        h->items[i] = h->items[j];
        h->items[j] = t;
}

static void heap_down(Heap *h, size_t i) {
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, best = i;

                if (l < h->n && heap_before(h, l, best))
                        best = l;
                if (r < h->n && heap_before(h, r, best))
                        best = r;
                if (best == i)
                        return;
                heap_swap(h, i, best);
                i = best;
        }
}

static void heap_push(Heap *h, const Taken *t) {
        size_t i = h->n++;

        h->items[i] = *t;
        while (i > 0 && heap_before(h, i, (i - 1) / 2)) {
                heap_swap(h, i, (i - 1) / 2);
                i = (i - 1) / 2;
        }
}

/* The next candidate of t (one is left): its slot id; t's counts as after the command. */
static uint32_t take(ScalerAction action, Taken *t) {
        const GMachine *gm = t->key.gm;
        int64_t id;

        t->left--;
        if (action == SCALER_START) {
                id = bit_next(gm->start_bits, gm->n_words, (uint32_t) t->cursor);
                t->cursor = id + 1;
                t->key.running++;
                t->key.free++;
                return (uint32_t) id;
        }
        /* stops: not ready first, then ready, each the highest slot id first */
        id = t->ready ? -1 : bit_prev(gm->stop_unready_bits, gm->n_words, t->cursor);
        if (id < 0 && !t->ready) {
                t->ready = true;
                t->cursor = (int64_t) gm->n_words * 64 - 1;
        }
        if (id < 0)
                id = bit_prev(gm->stop_ready_bits, gm->n_words, t->cursor);
        t->cursor = id - 1;
        t->key.running--;
        t->key.free--;
        return (uint32_t) id;
}

static size_t plan_walk(const ScalerIndex *x, const ScalerGroup *g, ScalerAction action,
                        size_t want, ScalerPick *picks, size_t max, Heap *h) {
        const MachineArray *arr = action == SCALER_START ? &g->starts : &g->stops;
        size_t k = 0, next = 0;

        while (k < want && k < max) {
                Taken fresh, *t;
                Key k_next = {};

                if (next < arr->n)
                        k_next = key_linked(arr->items[next]);
                if (h->n > 0 && (next >= arr->n || before(x->strategy, action,
                                                          &h->items[0].key, &k_next)))
                        t = &h->items[0];
                else if (next < arr->n) {
                        const GMachine *gm = arr->items[next++];

                        fresh = (Taken){ .key = k_next,
                                         .left = action == SCALER_START ? gm->n_starts
                                                                        : gm->n_stops,
                                         .cursor = action == SCALER_START
                                                           ? 0
                                                           : (int64_t) gm->n_words * 64 - 1 };
                        t = &fresh;
                } else
                        break;
                picks[k++] = (ScalerPick){ .machine_id = t->key.gm->m->id,
                                           .slot_id = take(action, t), .action = action };
                if (t == &fresh && t->left > 0)
                        heap_push(h, t);
                else if (t != &fresh && t->left > 0)
                        heap_down(h, 0);
                else if (t != &fresh) {
                        h->items[0] = h->items[--h->n];
                        heap_down(h, 0);
                }
        }
        return k;
}

ScalerCount scaler_group_count(const ScalerGroup *g) {
        ScalerCount c = { .busy = g->busy, .free = g->free, .stopped = g->stopped };

        c.running = c.busy + c.free;
        c.wanted = c.running;
        return c;
}

uint32_t scaler_group_commanded(const ScalerGroup *g) {
        return g->commanded;
}

int scaler_group_plan(const ScalerIndex *x, const ScalerGroup *g, const ScalerTarget *target,
                      ScalerPick *picks, size_t max, ScalerCount *ret_count) {
        ScalerCount c = scaler_group_count(g);
        ScalerAction action = SCALER_NONE;
        size_t want = 0, k = 0;

        if (target) {
                c.wanted = scaler_wanted(target, c.busy);
                if (c.running < c.wanted) {
                        action = SCALER_START;
                        want = c.wanted - c.running;
                } else if (c.running > c.wanted) {
                        action = SCALER_STOP;
                        want = MIN(c.running - c.wanted, c.free);
                }
        }
        if (ret_count)
                *ret_count = c;
        want = MIN(want, max);
        if (action != SCALER_NONE && want > 0) {
                const MachineArray *arr = action == SCALER_START ? &g->starts : &g->stops;
                _cleanup_free_ Taken *items = new0(Taken, MAX(MIN(want, arr->n), (size_t) 1));
                Heap h = { .items = items, .st = x->strategy, .action = action };

                if (!items)
                        return -ENOMEM;
                k = plan_walk(x, g, action, want, picks, max, &h);
        }
        return (int) MIN(k, (size_t) INT32_MAX);
}

/* ---- the whole ---- */

ScalerGroup *scaler_index_first(const ScalerIndex *x) {
        return x ? x->all_groups : NULL;
}

ScalerGroup *scaler_index_next(const ScalerGroup *g) {
        return g ? g->next : NULL;
}

const char *scaler_group_fleet(const ScalerGroup *g) {
        return g->fleet;
}

const char *scaler_group_region(const ScalerGroup *g) {
        return g->region;
}

size_t scaler_index_n_slots(const ScalerIndex *x) {
        return x ? x->n_slots : 0;
}

int scaler_index_new(PlacementStrategy strategy, ScalerIndex **ret) {
        ScalerIndex *x;

        if (strategy < 0 || strategy >= _PLACEMENT_STRATEGY_MAX)
                return -EINVAL;
        x = new0(ScalerIndex, 1);
        if (!x)
                return -ENOMEM;
        x->strategy = strategy;
        *ret = x;
        return 0;
}

static void machine_free_all(void *v) {
        IMachine *m = v;

        for (size_t i = 0; i < m->n_allocated; i++)
                free(m->slots[i]);
        for (GMachine *gm = m->gms, *n; gm; gm = n) {
                n = gm->next;
                free(gm->start_bits);
                free(gm->stop_ready_bits);
                free(gm->stop_unready_bits);
                free(gm);
        }
        free(m->slots);
        free(m->id);
        free(m);
}

ScalerIndex *scaler_index_free(ScalerIndex *x) {
        if (!x)
                return NULL;
        hashmap_done_free(&x->machines, machine_free_all);
        while (x->all_groups) {
                ScalerGroup *g = x->all_groups;

                x->all_groups = g->next;
                (void) hashmap_remove(&x->groups, g->key, g);
                group_free(g);
        }
        hashmap_done(&x->groups);
        return mfree(x);
}
