/* SPDX-License-Identifier: MIT */
/* A fleet's capacity (SPEC §13, GET /v1/fleets/{fleetId}/capacity), from the counts the fleet
 * view keeps (capacity-index.h): its slots, machines, states and claims, in total and by
 * region, its machines that may be deprovisioned, and the latest hold; by region also the
 * scaler's target (this replica's [scaler] targets) and its busy and free servers. An outcome
 * (allocator-ops.h) that the door turns into its answer. */
#include "allocator-cache.h"
#include "allocator-ops.h"
#include "allocator.h"

bool alloc_fleet_known(Allocator *a, const char *fleet) {
        const CacheFleet *f = hashmap_get(&a->cache.fleets, fleet);

        return f && f->n_slots > 0;
}

void alloc_capacity(Allocator *a, const char *fleet, FleetCapacity *ret) {
        const ScalerTargets *t = &a->config->scaler_targets;

        *ret = (FleetCapacity){ .fleet = fleet };
        if (!cache_ready(a)) {
                ret->outcome = CAPACITY_VIEW_NOT_READY;
                return;
        }
        if (!alloc_fleet_known(a, fleet)) {
                ret->outcome = CAPACITY_UNKNOWN_FLEET;
                return;
        }
        if (capacity_index_tally(a->capacity_index, fleet, t->targets, t->n, ret) < 0)
                *ret = (FleetCapacity){ .outcome = CAPACITY_NO_MEMORY, .fleet = fleet };
}
