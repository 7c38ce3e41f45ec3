/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "alloc-id.h" /* alloc_id_is_valid(), ALLOC_ID_MAX */
#include "time-util.h"

/* The allocation side of slots as pure rules (SPEC §5, §7): what State a slot shows, which
 * slot an allocation takes, when a hold ends, when the machine is deprovisionable. */

typedef enum SlotState {
        SLOT_AVAILABLE,
        SLOT_ONLINE,
        SLOT_HELD,
        SLOT_RESERVED,
        SLOT_ALLOCATED,
        _SLOT_STATE_MAX,
} SlotState;

const char *slot_state_to_string(SlotState s);

/* What the rules need to know of a slot. */
typedef struct SlotFacts {
        bool allocated;
        bool reserved;
        bool held;
        bool running;  /* process starting or running */
        bool ready;    /* READY=1 received */
        bool failed;   /* ProcessState failed */
        bool busy;     /* stopping, or being reconfigured: not to be picked now */
} SlotFacts;

SlotState slot_state_from_facts(const SlotFacts *f);

/* Allocation candidates in the order Allocate tries them. A slot is in exactly one class. */
typedef enum AllocClass {
        ALLOC_CLASS_READY,      /* online and ready (build configuration checked at pick) */
        ALLOC_CLASS_HELD,
        ALLOC_CLASS_STARTING,   /* online, not ready yet */
        ALLOC_CLASS_AVAILABLE,  /* no process: started on allocation */
        _ALLOC_CLASS_ELIGIBLE,
        ALLOC_CLASS_NONE = _ALLOC_CLASS_ELIGIBLE, /* failed, reserved, allocated, busy */
        _ALLOC_CLASS_MAX,
} AllocClass;

AllocClass alloc_class_from_facts(const SlotFacts *f);

/* An intrusive list per class, kept per fleet, so that picking a slot does not walk the
 * fleet: the classes are updated on every change of a slot, in O(1). */
typedef struct AllocEntry AllocEntry;
struct AllocEntry {
        AllocEntry *prev, *next;
        AllocClass class;
        bool linked;
};

typedef struct AllocIndex {
        AllocEntry *head[_ALLOC_CLASS_MAX];
        AllocEntry *tail[_ALLOC_CLASS_MAX];
        size_t count[_ALLOC_CLASS_MAX];
} AllocIndex;

void alloc_index_set(AllocIndex *idx, AllocEntry *e, AllocClass c);  /* moves to c's tail */
void alloc_index_remove(AllocIndex *idx, AllocEntry *e);

/* Picks per SPEC §7: READY with the wanted build configuration; HELD; STARTING with it;
 * AVAILABLE; then READY or STARTING running another one (to be restarted into it).
 * matches(e, userdata) says whether e runs the wanted build configuration. Returns NULL when
 * nothing is eligible. Walks past mismatching entries only. */
AllocEntry *alloc_index_pick(const AllocIndex *idx, bool (*matches)(const AllocEntry *e, void *userdata),
                             void *userdata);

/* What ends a hold (SPEC §7). */
typedef enum HoldEvent {
        HOLD_EVENT_TIMEOUT,
        HOLD_EVENT_ALLOCATE,
        HOLD_EVENT_RESERVE,
        HOLD_EVENT_STOP,
        HOLD_EVENT_RESTART,
        HOLD_EVENT_BUILD_CHANGE,
        HOLD_EVENT_PROCESS_EXIT,
        HOLD_EVENT_RELEASE,
        _HOLD_EVENT_MAX,
} HoldEvent;

bool hold_ends_on(HoldEvent e);

/* May a hold start in this state? Only from online or available. */
bool hold_allowed(SlotState s);

/* Machine TTL (SPEC §7), every time on CLOCK_BOOTTIME (wallclock.h). idle_since: when the
 * machine last became idle, 0 while a slot is allocated or reserved; hold_until: the
 * furthest hold, 0 if none. Returns whether the machine is deprovisionable at 'now', and in
 * *ret_next when that could next change (USEC_INFINITY if never without another event). */
bool ttl_deprovisionable(usec_t idle_since, usec_t idle_ttl, usec_t hold_until, usec_t now,
                         usec_t *ret_next);
