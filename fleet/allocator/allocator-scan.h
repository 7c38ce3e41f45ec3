/* SPDX-License-Identifier: MIT */
#pragma once

/* Claimed records without their claim (allocator-scan.c), found when the view is read. */

#include "allocator-orphan.h"
#include "allocator-view.h"

typedef struct Allocator Allocator;

/* One kind of the view was (re)read: after the claims, every record is read once the whole
 * view is, and each claimed one without its claim placed again. */
void scan_view_read(Allocator *a, CacheKind kind);
/* What the view tells of rec's claim, for allocation_record_orphaned(). */
OrphanView scan_orphan_view(const Allocator *a, const AllocationRecord *rec);
void scan_done(Allocator *a);
