/* SPDX-License-Identifier: MIT */
#include "allocator-orphan.h"
#include "macro.h"

bool allocation_record_orphaned(const AllocationRecord *rec, int64_t record_revision,
                                const OrphanView *v) {
        if (rec->status != ALLOCATION_CLAIMED || !fleet_key_component_valid(rec->machine_id) ||
            !fleet_key_component_valid(rec->fleet_id) ||
            !fleet_key_component_valid(rec->allocation_id))
                return false;
        /* Its claim, or one the view cannot read: the slot is taken either way. */
        if (v->claim_present &&
            (!v->claim_allocation || streq(v->claim_allocation, rec->allocation_id)))
                return false;
        if (record_revision > 0 && record_revision <= v->claims_revision)
                return true;
        return rec->deadline > 0 && v->now > rec->deadline;
}
