/* SPDX-License-Identifier: MIT */
#pragma once

/* The scaler's plan (SPEC §13, "The scaler"): per fleet and region, which stopped slots to
 * start and which free servers to stop so that the region keeps its buffer of free servers,
 * at least its floor and at most its ceiling running. Pure: the view in, the actions out; no
 * I/O, no logging. scaler_plan() states the rules on a region's slots, walked whole; the
 * allocator plans from scaler-index.h instead, which keeps the counts and candidates as the
 * view changes and makes the same plan (test-scaler-index checks both agree).
 *
 * Counting, per fleet and region: busy are the running servers that are allocated, reserved,
 * held or claimed; free the running or starting ones that are none of these; running both.
 * The region wants min(ceiling, max(floor, busy + buffer)) running (never fewer than busy:
 * a busy server is never stopped). A slot with a command of the scaler in flight counts as
 * it will be (a start as a free server starting, a stop as stopped) and is not chosen again.
 *
 * Starts take stopped slots (available, process stopped) of machines not draining, the
 * machine the placement strategy would fill first: packed, the most busy slots (in any
 * fleet) first; distributed, the fewest running in the region first (counting those started
 * by the plan); ties to the most running, then the lowest machine ID; within a machine, the
 * lowest slot id. Stops take free servers only, draining machines first; then packed, the
 * machine with the fewest busy slots, then the fewest free servers left (so that a machine
 * with nothing busy is emptied whole and reaches its TTL); distributed, the most running
 * first; ties to the lowest machine ID; within a machine, one not ready first, then the
 * highest slot id. Never an allocated, reserved, held or claimed server. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "placement.h"

#define SCALER_CEILING_NONE UINT32_MAX

/* One fleet's (and region's) wishes. region NULL: every region of the fleet that has no
 * target of its own. */
typedef struct ScalerTarget {
        char *fleet;
        char *region;
        uint32_t buffer;  /* free servers kept running (Multiplay minAvailable, Pragma
                           * capacityBuffer) */
        uint32_t floor;   /* servers kept running at least (Pragma capacityFloor) */
        uint32_t ceiling; /* servers running at most (Multiplay maxServers, Pragma
                           * capacityCeiling); SCALER_CEILING_NONE: no limit */
} ScalerTarget;

void scaler_targets_free(ScalerTarget *t, size_t n);
/* "FLEET[/REGION] buffer=N floor=N ceiling=N; …" (each key optional: 0, 0, none; a fleet
 * and region at most once; floor <= ceiling; "FLEET/REGION" in double quotes may hold
 * blanks; no control characters): 0, or -EINVAL with *ret_error saying what is
 * wrong (free it), -ENOMEM. "" is no target. */
int scaler_targets_parse(const char *text, ScalerTarget **ret, size_t *ret_n, char **ret_error);
/* The target of fleet's region ("" for none): its own, else the fleet's; NULL for none. */
const ScalerTarget *scaler_target_find(const ScalerTarget *t, size_t n, const char *fleet,
                                       const char *region);

/* The servers a region with target t and busy busy ones wants running:
 * min(ceiling, max(floor, busy + buffer)). */
uint32_t scaler_wanted(const ScalerTarget *t, uint32_t busy);

typedef enum ScalerSlotKind {
        SCALER_STOPPED, /* available, process stopped: may be started */
        SCALER_FREE,    /* online (starting or running), nothing on it: may be stopped */
        SCALER_BUSY,    /* allocated, reserved, held or claimed: running, never touched */
        SCALER_OTHER,   /* failed, stopping, anything else: neither counted nor touched */
        _SCALER_SLOT_KIND_MAX,
} ScalerSlotKind;

/* A slot document's State, ProcessState and allocationId, and whether it has a claim. */
ScalerSlotKind scaler_slot_kind_of(const char *state, const char *process_state,
                                   const char *allocation_id, bool claimed);

typedef enum ScalerAction {
        SCALER_NONE,
        SCALER_START,
        SCALER_STOP,
        _SCALER_ACTION_MAX,
        _SCALER_ACTION_INVALID = -1,
} ScalerAction;

const char *scaler_action_to_string(ScalerAction a);
ScalerAction scaler_action_from_string(const char *s);

/* One slot of the fleet's region. */
typedef struct ScalerSlot {
        const char *machine_id;
        uint32_t slot_id;
        ScalerSlotKind kind;
        bool ready;            /* FREE: ready (one not ready is stopped first) */
        bool draining;         /* its machine's */
        uint32_t machine_load; /* its machine's busy slots, in any fleet (placement's load) */
        ScalerAction pending;  /* a command of the scaler in flight on it */
} ScalerSlot;

typedef struct ScalerCount {
        uint32_t busy, free, running, stopped;
        uint32_t wanted; /* running wanted */
} ScalerCount;

/* The plan of one fleet's region (the reference: O(n log n)): at most max actions into actions[] (slot indexes into
 * slots, each with its action), in the order they should be made; *ret_count the counts
 * (pending commands counted as done). Returns the number of actions. */
size_t scaler_plan(const ScalerTarget *target, PlacementStrategy strategy,
                   const ScalerSlot *slots, size_t n, size_t *actions, ScalerAction *kinds,
                   size_t max, ScalerCount *ret_count);
