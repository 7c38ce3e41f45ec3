/* SPDX-License-Identifier: MIT */
#pragma once

/* The scaler's plan (scaler-plan.h) from an index kept up to date by the fleet view's
 * events, so that a plan costs O(regions + commands written), not O(slots). Pure: no I/O,
 * no logging. It makes the same plan as scaler_plan() (scaler-plan.h, the rules) made from
 * the same slots; test-scaler-index checks both, and the counts, after random events.
 *
 * Kept per fleet and region (a group): the counts of scaler_plan() (busy, free, stopped,
 * pending commands counted as done) and the commands in flight; per machine of the group its
 * own running and free servers and bitmaps (by slot id) of its candidates: stopped slots to
 * start, free servers to stop (ready or not); and two arrays of the group's machines that
 * have candidates, sorted in the plan's order for starts and for stops (scaler-plan.h).
 *
 * Cost: a slot's change is O(1) in the number of slots: O(log M) to find its machine in the
 * group's two arrays and a memmove of at most M pointers to move it (M the group's machines
 * with candidates), as placement.c's, and nothing moves when what orders the machine is
 * unchanged; a change of a machine's load (its busy slots) or of its draining moves it in
 * each group it has slots in; a machine coming or going counts each of its slots that has a
 * command again (O(its slots)). A plan takes its machines in the arrays'
 * order, and a machine it has taken from again through a heap of those taken
 * (O(k log k) for k commands). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "placement.h"
#include "scaler-plan.h"

typedef struct ScalerIndex ScalerIndex;
typedef struct ScalerGroup ScalerGroup;

int scaler_index_new(PlacementStrategy strategy, ScalerIndex **ret);
ScalerIndex *scaler_index_free(ScalerIndex *x);

/* What the fleet view shows of one slot. */
typedef struct ScalerIndexSlot {
        const char *fleet;
        const char *region;   /* NULL or "": none */
        ScalerSlotKind kind;  /* scaler_slot_kind_of() */
        bool ready;
        bool draining;        /* the slot document's */
        bool command;         /* a key hosts/<machine>/scale/<slot> exists */
        ScalerAction action;  /* its action; SCALER_NONE: not a command document */
} ScalerIndexSlot;

/* Adds or updates the slot (slot ids above PLACEMENT_SLOT_ID_MAX are refused, -EINVAL).
 * -ENOMEM leaves the slot out of the index. */
int scaler_index_slot_set(ScalerIndex *x, const char *machine_id, uint32_t slot_id,
                          const ScalerIndexSlot *slot);
void scaler_index_slot_remove(ScalerIndex *x, const char *machine_id, uint32_t slot_id);
/* The machine's document: in the view (present) or gone, and draining. A command on a slot
 * of a machine that is gone counts for nothing, the slot neither (as allocator-scaler.c's
 * sweep deletes it). */
int scaler_index_machine_set(ScalerIndex *x, const char *machine_id, bool present,
                             bool draining);

/* The groups, in no particular order: first, then next until NULL. */
ScalerGroup *scaler_index_first(const ScalerIndex *x);
ScalerGroup *scaler_index_next(const ScalerGroup *g);
const char *scaler_group_fleet(const ScalerGroup *g);
const char *scaler_group_region(const ScalerGroup *g); /* "" for none */
/* Its counts (wanted: running, no target known here) and the commands in flight on it. */
ScalerCount scaler_group_count(const ScalerGroup *g);
uint32_t scaler_group_commanded(const ScalerGroup *g);

typedef struct ScalerPick {
        const char *machine_id; /* the index's: valid until its next change */
        uint32_t slot_id;
        ScalerAction action;
} ScalerPick;

/* The plan of group g for target (scaler_plan()'s): at most max picks into picks[], in the
 * order they should be made; *ret_count the counts with wanted. The index is not changed.
 * Returns the number of picks; -ENOMEM. */
int scaler_group_plan(const ScalerIndex *x, const ScalerGroup *g, const ScalerTarget *target,
                      ScalerPick *picks, size_t max, ScalerCount *ret_count);

size_t scaler_index_n_slots(const ScalerIndex *x);
