/* SPDX-License-Identifier: MIT */
#pragma once

/* A fleet's capacity (SPEC §13, GET /v1/fleets/{fleetId}/capacity) from counts kept up to date
 * by the fleet view's events, so that an answer costs O(regions + machines listed), not
 * O(slots). Pure: no I/O, no logging. test-capacity-index checks, after random events, that
 * it answers what a full tally of every slot (the answer before this index) answers.
 *
 * Kept per fleet and region, and per fleet in total: slots, machines (those with a slot
 * there), claimed slots, slots by State and by ProcessState, and busy and free servers as
 * the scaler counts them (scaler_slot_kind_of(), from the slots alone: not the scaler index's
 * counts, which count commands in flight as done and a gone machine's slots as nothing); per
 * machine its slots in each group, so that a group's machines are counted when a machine's
 * first slot comes and its last goes; per fleet the list of its machines whose document
 * says deprovisionable (machine_set() moves a machine in or out of the lists of the fleets it
 * has slots in), and a heap of its slots with a hold, the furthest on top.
 *
 * Cost: a slot's change is O(1) in the number of slots (its old part out, its new one in:
 * a few counters, a look-up among its machine's groups, a State's name among the names
 * seen), but for its hold, O(log h) in the fleet's h slots with a hold; a machine's
 * document O(its groups). The slot's record (CapacityEntry) is kept in the caller's slot. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator-ops.h"
#include "scaler-plan.h"

typedef struct CapacityIndex CapacityIndex;
typedef struct CapacityMember CapacityMember;

#define CAPACITY_NAME_NONE UINT16_MAX

/* The index's record of one slot, in the caller's slot: zeroed, not in the index. */
typedef struct CapacityEntry {
        CapacityMember *region, *total; /* its machine's part of its region and its fleet */
        uint64_t hold_until;
        uint32_t hold_position; /* in its fleet's heap, while hold_until > 0 */
        uint16_t state, process_state; /* ids of the names; CAPACITY_NAME_NONE */
        uint8_t kind;                  /* ScalerSlotKind */
        bool claimed;
} CapacityEntry;

/* What the fleet view shows of one slot. */
typedef struct CapacitySlot {
        const char *fleet;
        const char *machine_id;
        const char *region; /* NULL or "": none */
        const char *state, *process_state; /* NULL: none */
        const char *allocation_id;
        bool claimed;
        uint64_t hold_until; /* 0: none */
} CapacitySlot;

int capacity_index_new(CapacityIndex **ret);
CapacityIndex *capacity_index_free(CapacityIndex *x);

/* The slot e is the record of, as the view now shows it. -ENOMEM leaves it out of the
 * index (e zeroed). */
int capacity_index_slot_set(CapacityIndex *x, CapacityEntry *e, const CapacitySlot *slot);
void capacity_index_slot_remove(CapacityIndex *x, CapacityEntry *e);
/* The machine's document: in the view (present) or gone, and deprovisionable. */
int capacity_index_machine_set(CapacityIndex *x, const char *machine_id, bool present,
                               bool deprovisionable);

/* Whether the index has a slot of the fleet. */
bool capacity_index_has_fleet(const CapacityIndex *x, const char *fleet);
size_t capacity_index_n_slots(const CapacityIndex *x);

/* The fleet's capacity into *ret (outcome CAPACITY_TALLIED; a fleet without slots: all 0),
 * each region with its target among targets. Its strings are the index's: valid until its
 * next change. -ENOMEM (*ret then freed and zeroed but its fleet). fleet_capacity_done()
 * frees it. */
int capacity_index_tally(const CapacityIndex *x, const char *fleet, const ScalerTarget *targets,
                         size_t n_targets, FleetCapacity *ret);
