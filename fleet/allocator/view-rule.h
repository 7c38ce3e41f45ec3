/* SPDX-License-Identifier: MIT */
#pragma once

/* The fleet view's rule of order (allocator-cache.c follows it; pure, so that it is tested
 * alone). What etcd tells of a key reaches the view three ways, in any order between them:
 *   - a range: every key of a kind at its revision;
 *   - the watch that follows it, from the range's revision + 1: each change, in revision
 *     order, a revision's changes together;
 *   - a transaction's answer: what it wrote, or what its failure branch read, at the
 *     transaction's revision.
 * The watch tells every change, so an answer only tells sooner what the watch will tell:
 * an answer whose revision the watch has reached is older than the view and is dropped
 * (in particular one that comes after the watch deleted what it wrote: the claim it would
 * put back is gone). An answer newer than the watch is applied if it is newer than the
 * key's entry; the watch's events older than that entry are then dropped, and its later
 * DELETE removes it. A range (after the watch was lost, or its revision compacted) drops
 * what it does not show, unless an answer put it there at a revision past the range's: the
 * watch that follows tells its fate. No tombstone is kept: the watch's revision is the one
 * every key shares. */

#include <stdbool.h>
#include <stdint.h>

typedef enum ViewFrom {
        VIEW_FROM_RANGE,
        VIEW_FROM_WATCH,
        VIEW_FROM_ANSWER,
} ViewFrom;

/* A kind's (slots, machines, claims): how far the view follows etcd. */
typedef struct ViewClock {
        /* Every change up to it is in the view: the range's revision, then each event's. */
        int64_t revision;
        int64_t range_revision; /* the last range's */
        unsigned generation;    /* of the last range asked; 0 before the first */
} ViewClock;

/* A key's entry, as the view keeps it. */
typedef struct ViewStamp {
        int64_t mod_revision;
        unsigned generation; /* the range (or its watch) that showed it; 0: only answers did */
} ViewStamp;

typedef enum ViewAction {
        VIEW_IGNORE, /* nothing changes */
        VIEW_SEEN,   /* the entry stays as it is, seen again (view_stamp_seen) */
        VIEW_SET,    /* the entry is (re)made with the value told (view_stamp_set) */
        VIEW_DROP,   /* the entry goes */
} ViewAction;

/* A range about to be read, then read at revision: its watch starts at revision + 1. */
void view_range_asked(ViewClock *c);
void view_range_read(ViewClock *c, int64_t revision);
/* A watch event at revision applied (after view_put/view_delete of it). */
void view_watch_advanced(ViewClock *c, int64_t revision);

/* A key told present with mod_revision: by from, which for an answer was made at
 * answer_revision (else ignored). have: the entry, NULL when the view has none. */
ViewAction view_put(const ViewClock *c, ViewFrom from, int64_t answer_revision,
                    const ViewStamp *have, int64_t mod_revision);
/* A key told absent: by the watch, deleted at revision; by an answer, absent at revision. */
ViewAction view_delete(const ViewClock *c, ViewFrom from, int64_t revision,
                       const ViewStamp *have);
/* After VIEW_SEEN and VIEW_SET: the entry's stamp. */
void view_stamp_seen(const ViewClock *c, ViewFrom from, ViewStamp *s);
void view_stamp_set(const ViewClock *c, ViewFrom from, ViewStamp *s, int64_t mod_revision);
/* After a range was read (view_range_read) and every key it showed put: whether an entry
 * goes, not shown by it. */
bool view_swept(const ViewClock *c, const ViewStamp *s);
