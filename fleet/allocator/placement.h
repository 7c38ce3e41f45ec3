/* SPDX-License-Identifier: MIT */
#pragma once

/* Placement across the fleet (SPEC §13, the rules of §7 across machines), as a pure index:
 * the allocator's cache tells it every slot and machine as etcd shows them, and
 * placement_pick() answers which slot an allocation should claim. No I/O, no logging.
 *
 * The order: tiers as slotd's own Allocate (supervisor/slot/allocation.c): online and ready with
 * the requested build configuration; held; online and starting with it; available; online
 * and ready with another build configuration; online and starting with another. Every
 * machine that is not draining comes before any draining one (a draining machine is a last
 * resort). Within a tier, by strategy: packed (the machine with the most busy slots first)
 * or distributed (the fewest first); ties to the lowest machine ID, then the lowest slot id.
 *
 * Cost: each tier keeps, per fleet and region (and per build configuration for the online
 * tiers), the machines that have candidates in it, sorted by the order above, and per such
 * machine a bitmap of its candidate slots. A pick walks the machines of the tiers in order
 * and stops at the first that has a usable slot: machines passed over are those excluded by
 * the request, not in the fleet view, or whose candidates all have a claim of this process
 * in flight. A change of a slot is O(machines in its tier) at worst (a sorted array's
 * insertion), a change of a machine's load O(its tiers × machines in them). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Placement Placement;

typedef enum PlacementStrategy {
        PLACEMENT_PACKED,
        PLACEMENT_DISTRIBUTED,
        _PLACEMENT_STRATEGY_MAX,
        _PLACEMENT_STRATEGY_INVALID = -1,
} PlacementStrategy;

const char *placement_strategy_to_string(PlacementStrategy s);
PlacementStrategy placement_strategy_from_string(const char *s);

/* What a slot offers an allocation. */
typedef enum PlacementClass {
        PLACEMENT_READY,     /* online, ready */
        PLACEMENT_HELD,      /* held */
        PLACEMENT_STARTING,  /* online, not ready yet */
        PLACEMENT_AVAILABLE, /* no process: started on allocation */
        PLACEMENT_NONE,      /* allocated, reserved, claimed, failed, stopping, unknown */
        _PLACEMENT_CLASS_MAX,
} PlacementClass;

/* A slot document's State, ProcessState and ready (SPEC §5), and whether it has a claim, as a
 * class. Unknown words are PLACEMENT_NONE: a slot is offered only when it is known to be
 * free. */
PlacementClass placement_class_of(const char *state, const char *process_state, bool ready,
                                  const char *allocation_id, bool claimed);
/* Whether the slot counts in its machine's load: allocated, reserved or claimed. */
bool placement_busy_of(const char *state, const char *allocation_id, bool claimed);

/* Slot ids above this are never offered (a bitmap per machine and tier is indexed by them;
 * slotd numbers its slots from 0). */
#define PLACEMENT_SLOT_ID_MAX 65535U

typedef struct PlacementSlot {
        const char *fleet;
        const char *region; /* "" when none */
        const char *build;  /* its build configuration */
        PlacementClass class;
        bool busy;
} PlacementSlot;

int placement_new(PlacementStrategy strategy, Placement **ret);
Placement *placement_free(Placement *p);

/* Adds or updates the slot slot_id of machine_id (the machine is made, absent from the fleet
 * view, if unknown). -ENOMEM leaves the slot out of every tier (it is then not offered). */
int placement_slot_set(Placement *p, const char *machine_id, uint32_t slot_id,
                       const PlacementSlot *slot);
void placement_slot_remove(Placement *p, const char *machine_id, uint32_t slot_id);
/* A claim of this process is in flight on the slot: not offered again until cleared. */
void placement_slot_set_pending(Placement *p, const char *machine_id, uint32_t slot_id,
                                bool pending);

/* The machine's document: in the fleet view (present) or gone, and draining. */
int placement_machine_set(Placement *p, const char *machine_id, bool present, bool draining);

typedef struct PlacementRequest {
        const char *fleet;
        const char *region;   /* NULL or "": any */
        const char *build;    /* NULL or "": any build configuration is the requested one */
        char *const *excluded; /* machines not to use; NULL-terminated, may be NULL */
} PlacementRequest;

/* The slot to claim: 0 and *ret_machine_id (owned by p: valid until the next change) and
 * *ret_slot_id; -ENOSPC when there is none. */
int placement_pick(Placement *p, const PlacementRequest *req, const char **ret_machine_id,
                   uint32_t *ret_slot_id);

/* How many slots and machines p knows (for the allocator's metrics). */
size_t placement_n_slots(const Placement *p);
size_t placement_n_machines(const Placement *p);
