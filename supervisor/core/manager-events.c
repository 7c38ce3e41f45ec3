/* SPDX-License-Identifier: MIT */
/* Allocation events: what a Multiplay SDK game server hears on its Centrifuge channel
 * server#<id> through the local proxy. One event per allocation and per deallocation of a
 * slot, numbered per slot (the offsets live in the state file, so a restart of slotd neither
 * repeats nor reuses one), and sent only once the change is durable: a change that is
 * refused or lost is never announced. */
#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>

#include "log.h"
#include "manager.h"

static int queue_event(Manager *m, Slot *s, bool allocate, const char *uuid) {
        AllocEvent *e;

        if (m->n_events == m->n_events_allocated) {
                size_t n = MAX(m->n_events_allocated * 2, (size_t) 16);
                AllocEvent *t = reallocarray(m->events, n, sizeof(AllocEvent));
                if (!t)
                        return -ENOMEM;
                m->events = t;
                m->n_events_allocated = n;
        }
        e = &m->events[m->n_events++];
        *e = (AllocEvent){ .slot_id = s->id, .offset = ++s->events, .allocate = allocate };
        (void) snprintf(e->uuid, sizeof(e->uuid), "%s", uuid);
        return 0;
}

/* Called at every change of a slot: an allocation that is not the one the server last heard
 * of means a Deallocate of the old, an Allocate of the new, or both. */
void manager_track_allocation(Manager *m, Slot *s) {
        char *copy = NULL;

        if (streq_ptr(s->announced_allocation, s->allocation_uuid))
                return;
        if (s->allocation_uuid && !(copy = strdup(s->allocation_uuid))) {
                log_oom();
                return; /* the next change of the slot tries again */
        }
        if (s->announced_allocation) {
                if (queue_event(m, s, false, s->announced_allocation) < 0)
                        log_slot_warning(s, "Out of memory: the deallocation of %s is not "
                                            "announced to the game server", s->announced_allocation);
                payload_store_drop(&m->payloads, s->announced_allocation);
                free(s->last_deallocation);
                s->last_deallocation = TAKE_PTR(s->announced_allocation);
        }
        if (copy && queue_event(m, s, true, copy) < 0)
                log_slot_warning(s, "Out of memory: allocation %s is not announced to the game "
                                    "server", copy);
        s->announced_allocation = copy;
        if (s->ready_for_players) {
                s->ready_for_players = false;
                manager_hook(m, slot_changed, s, SLOT_CHANGE_READY_FOR_PLAYERS);
        }
}

/* The commit made the queued changes durable: now the game servers may hear of them. */
void manager_flush_events(Manager *m) {
        for (size_t i = 0; i < m->n_events; i++)
                manager_hook(m, event, &m->events[i]);
        m->n_events = 0;
}

static uint64_t splitmix64(uint64_t *x) {
        uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

/* The EventID of an event, the same each time it is told (a late subscriber, a resubscribe
 * after a restart): derived from the epoch, the slot and the offset, as a version 4 UUID. */
void alloc_event_id(uint64_t epoch, unsigned slot_id, uint64_t offset, char ret[static 37]) {
        uint64_t seed = epoch ^ ((uint64_t) slot_id << 40) ^ offset, a, b;

        a = splitmix64(&seed);
        b = splitmix64(&seed);
        a = (a & ~0xf000ULL) | 0x4000ULL;
        b = (b & ~(3ULL << 62)) | (2ULL << 62);
        (void) snprintf(ret, 37, "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%012" PRIx64,
                        a >> 32, (a >> 16) & 0xffff, a & 0xffff, b >> 48, (uint64_t) (b & 0xffffffffffffULL));
}

/* The latest event of a slot, for a subscriber that comes after it. false: none yet. */
bool manager_last_event(Manager *m, Slot *s, AllocEvent *ret) {
        if (s->events == 0)
                return false;
        *ret = (AllocEvent){ .slot_id = s->id, .offset = s->events,
                             .allocate = s->announced_allocation != NULL };
        (void) snprintf(ret->uuid, sizeof(ret->uuid), "%s",
                        s->announced_allocation ?: strempty(s->last_deallocation));
        return true;
}

/* A run of offsets needs a name that changes when the state is lost and the offsets start
 * again from 0 (Centrifuge's epoch). */
int manager_ensure_epoch(Manager *m) {
        while (m->epoch == 0)
                if (getrandom(&m->epoch, sizeof(m->epoch), 0) != sizeof(m->epoch))
                        return negative_errno();
        return 0;
}
