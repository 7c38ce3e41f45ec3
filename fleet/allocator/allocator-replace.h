/* SPDX-License-Identifier: MIT */
#pragma once

/* Claims placed again (allocator-replace.c): deadline passed, or refused by their host, or
 * found orphaned (SPEC §13 steps 2 and 3). */

#include "allocator-view.h"
#include "docs.h"

typedef struct Allocator Allocator;

/* A claim seen (or seen anew): its deadline armed. */
int replace_claim_seen(Allocator *a, CacheClaim *c);
/* A claim deleted (made at claim_revision): if its record still points at it and its host did
 * not fulfil it, the host refused it (SPEC §13 step 2): placed again. */
void replace_claim_gone(Allocator *a, const ClaimDoc *doc, const char *machine_id,
                        uint32_t slot_id, int64_t claim_revision);
/* A slot's document now shows an allocation: a check of that allocation's claim gone, still
 * waiting, is answered (the host confirmed it), before the slot moves on to another. */
void replace_slot_showed(Allocator *a, const CacheSlot *s);
/* A claimed record found without its claim (allocator-orphan.h): placed again as a refused
 * one, unless an op is at it already. */
void replace_record_orphaned(Allocator *a, const AllocationRecord *rec);
void replace_done(Allocator *a);
