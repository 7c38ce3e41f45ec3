/* SPDX-License-Identifier: MIT */
#pragma once
/* A claim whose outcome etcd left unknown, resolved in the background (SPEC §13, "a 503 is
 * never an allocation"): its client was answered 503 at once; a fence on the slot
 * (<prefix>/fences/<machineID>/<slotID>, on a lease of FENCE_TTL_SEC) then keeps any late copy
 * of the claim's transaction from applying, and an original applied before the fence is
 * deleted again (allocator-fence.c). */
#include <stddef.h>
#include <stdint.h>

#include "docs.h"

typedef struct Allocator Allocator;

/* Long enough that no proposal forwarded late by a paused or partitioned etcd member
 * outlives it: the claim's transaction compares that the fence does not exist. */
#define FENCE_TTL_SEC 60

/* The claim of rec (its machine, slot, times and IDs), as claim_value under claim_key, sent
 * and its outcome unknown: fenced and, if it was applied, undone. The slot is not placed
 * until then (and, once fenced, until the fence's lease ends). why, for the log, ends in
 * "its claim" ("etcd did not answer its claim"). */
int fence_start(Allocator *a, const AllocationRecord *rec, const char *claim_key,
                const char *claim_value, const char *why);
/* A fence found on machine_id's slot_id by a claim's transaction (another replica's): the
 * slot is not placed for a few seconds (then tried again: found again while it lasts). */
void fence_seen(Allocator *a, const char *machine_id, uint32_t slot_id);
/* The slots this replica leaves out of placement for a fence: in doubt, fenced, or seen. */
size_t fence_count(const Allocator *a);
/* The claims in doubt not yet settled: neither fenced nor undone (a stop waits for them). */
size_t fence_unresolved(const Allocator *a);
void fence_done(Allocator *a);
