/* SPDX-License-Identifier: MIT */
#pragma once

/* The fleet view (allocator-view.h): range and watch of slots, machines and claims. */

#include "allocator-view.h"

typedef struct Allocator Allocator;

/* The view read and watched; listener told of its changes (allocator-view.h). */
int cache_start(Allocator *a, const CacheListener *listener);
void cache_done(Allocator *a);
bool cache_ready(const Allocator *a);
CacheSlot *cache_slot_by_index(const Allocator *a, const char *machine_id, uint32_t slot_id);
CacheClaim *cache_claim_by_index(const Allocator *a, const char *machine_id, uint32_t slot_id);
/* The scaler's command on the slot, while its key exists. */
CacheScale *cache_scale_by_index(const Allocator *a, const char *machine_id, uint32_t slot_id);
/* A kv that a transaction's answer made at revision carries (its failure branch's ranges, or
 * what it wrote), applied as the watch would, unless the watch has reached revision or the
 * view's entry is newer (view-rule.h). key absent (kv NULL): a slot document gone. */
void cache_apply_kv(Allocator *a, const char *key, const EtcdKv *kv, int64_t revision);
/* The machine, when it is in the fleet view. */
CacheMachine *cache_machine(const Allocator *a, const char *machine_id);
