/* SPDX-License-Identifier: MIT */
#pragma once

/* Strings the fleet view's slots share (pure, no I/O): 50 slots of a machine repeat its
 * machineID, address and region, a fleet's slots its name and build configuration, all of
 * them a handful of states. One copy of each string, counted, instead of one per slot: the
 * view's memory per slot (tests/bench/README.md, "Fleet at scale").
 *
 * A pool is a Hashmap of its strings (zeroed to start, intern_pool_done() at the end). */

#include "docs.h"
#include "hashmap.h"

/* The pool's copy of s, one more reference to it; NULL on ENOMEM. */
const char *intern_ref(Hashmap *pool, const char *s);
/* One reference less to s, a string intern_ref() returned (NULL: nothing). */
void intern_unref(Hashmap *pool, const char *s);
void intern_pool_done(Hashmap *pool);

/* A slot document as the view keeps it: its repeated strings (machineID, fleet, region,
 * states, build configuration and its list's IDs, addresses) replaced by the pool's copies;
 * the others (allocationId) kept. On -ENOMEM, d is freed (and zeroed). Free it with
 * slot_doc_unintern(), never slot_doc_done(). */
int slot_doc_intern(Hashmap *pool, SlotDoc *d);
void slot_doc_unintern(Hashmap *pool, SlotDoc *d);
