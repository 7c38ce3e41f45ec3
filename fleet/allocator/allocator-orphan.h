/* SPDX-License-Identifier: MIT */
#pragma once

/* Claimed records stranded without their claim (SPEC §13 step 3): which records an allocator
 * places again when it finds them so, reading the records when its view of the claims is
 * (re)read, or in a GET. Pure. */

#include <stdbool.h>
#include <stdint.h>

#include "docs.h"

/* What the allocator's view of the claims tells about one record's slot. */
typedef struct OrphanView {
        /* Every claim event up to this revision is in the view: the revision of its range,
         * then of each event its watch delivered. 0: not read. */
        int64_t claims_revision;
        /* A claim on the record's slot is in the view; claim_allocation is its allocationId
         * (NULL for a claim that is not a claim document). */
        bool claim_present;
        const char *claim_allocation;
        usec_t now; /* CLOCK_REALTIME */
} OrphanView;

/* Whether rec (read at mod_revision record_revision) is claimed and its claim is gone, as
 * far as the view can tell: its slot shows no claim of it, and either the view has seen every
 * claim event up to the record's write (a claim is only ever put together with its record:
 * a claim not in the view then is deleted, and nothing puts it back without writing the
 * record), or the record's deadline has passed (a claim of it would have been in the view
 * long since). A record whose machine, fleet or allocationId is not a valid key component
 * is never one: nothing can be placed for it. */
bool allocation_record_orphaned(const AllocationRecord *rec, int64_t record_revision,
                                const OrphanView *v);
