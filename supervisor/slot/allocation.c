/* SPDX-License-Identifier: MIT */
#include "allocation.h"
#include "macro.h"

static const char *const slot_state_names[_SLOT_STATE_MAX] = {
        [SLOT_AVAILABLE] = "available", [SLOT_ONLINE] = "online", [SLOT_HELD] = "held",
        [SLOT_RESERVED] = "reserved",   [SLOT_ALLOCATED] = "allocated",
};

const char *slot_state_to_string(SlotState s) {
        return s >= 0 && s < _SLOT_STATE_MAX ? slot_state_names[s] : "invalid";
}

SlotState slot_state_from_facts(const SlotFacts *f) {
        if (f->allocated)
                return SLOT_ALLOCATED;
        if (f->reserved)
                return SLOT_RESERVED;
        if (f->held)
                return SLOT_HELD;
        return f->running ? SLOT_ONLINE : SLOT_AVAILABLE;
}

AllocClass alloc_class_from_facts(const SlotFacts *f) {
        if (f->allocated || f->reserved || f->failed || f->busy)
                return ALLOC_CLASS_NONE;
        if (f->held)
                return ALLOC_CLASS_HELD;
        if (f->running)
                return f->ready ? ALLOC_CLASS_READY : ALLOC_CLASS_STARTING;
        return ALLOC_CLASS_AVAILABLE;
}

void alloc_index_remove(AllocIndex *idx, AllocEntry *e) {
        if (!e->linked)
                return;
        if (e->prev)
                e->prev->next = e->next;
        else
                idx->head[e->class] = e->next;
        if (e->next)
                e->next->prev = e->prev;
        else
                idx->tail[e->class] = e->prev;
        idx->count[e->class]--;
        e->prev = e->next = NULL;
        e->linked = false;
}

void alloc_index_set(AllocIndex *idx, AllocEntry *e, AllocClass c) {
        if (e->linked && e->class == c)
                return;
        alloc_index_remove(idx, e);
        e->class = c;
        e->prev = idx->tail[c];
        e->next = NULL;
        if (idx->tail[c])
                idx->tail[c]->next = e;
        else
                idx->head[c] = e;
        idx->tail[c] = e;
        idx->count[c]++;
        e->linked = true;
}

static AllocEntry *first_matching(const AllocIndex *idx, AllocClass c, bool want,
                                  bool (*matches)(const AllocEntry *e, void *userdata),
                                  void *userdata) {
        for (AllocEntry *e = idx->head[c]; e; e = e->next)
                if (matches(e, userdata) == want)
                        return e;
        return NULL;
}

AllocEntry *alloc_index_pick(const AllocIndex *idx, bool (*matches)(const AllocEntry *e, void *userdata),
                             void *userdata) {
        AllocEntry *e;

        if ((e = first_matching(idx, ALLOC_CLASS_READY, true, matches, userdata)))
                return e;
        if (idx->head[ALLOC_CLASS_HELD])
                return idx->head[ALLOC_CLASS_HELD];
        if ((e = first_matching(idx, ALLOC_CLASS_STARTING, true, matches, userdata)))
                return e;
        if (idx->head[ALLOC_CLASS_AVAILABLE])
                return idx->head[ALLOC_CLASS_AVAILABLE];
        /* Everything left runs another build configuration: the first READY one, else the
         * first STARTING one, is restarted into the wanted one. */
        if ((e = first_matching(idx, ALLOC_CLASS_READY, false, matches, userdata)))
                return e;
        return first_matching(idx, ALLOC_CLASS_STARTING, false, matches, userdata);
}

bool hold_ends_on(HoldEvent e) {
        /* The process exiting does not end a hold (SPEC §7): the slot was put aside, not the
         * process. */
        return e != HOLD_EVENT_PROCESS_EXIT && e >= 0 && e < _HOLD_EVENT_MAX;
}

bool hold_allowed(SlotState s) {
        return s == SLOT_ONLINE || s == SLOT_AVAILABLE || s == SLOT_HELD;
}

bool ttl_deprovisionable(usec_t idle_since, usec_t idle_ttl, usec_t hold_until, usec_t now,
                         usec_t *ret_next) {
        usec_t ttl_at, at;

        if (idle_since == 0) {
                *ret_next = USEC_INFINITY;
                return false;
        }
        ttl_at = idle_ttl > USEC_INFINITY - idle_since ? USEC_INFINITY : idle_since + idle_ttl;
        at = MAX(ttl_at, hold_until);
        if (now >= at) {
                *ret_next = USEC_INFINITY;
                return true;
        }
        *ret_next = at;
        return false;
}

