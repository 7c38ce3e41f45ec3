/* SPDX-License-Identifier: MIT */
#pragma once

/* The fleet view's types (allocator-cache.c keeps it): slots, machines and claims as etcd
 * holds them, read and watched. */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "capacity-index.h"
#include "docs.h"
#include "etcd.h"
#include "hashmap.h"
#include "list.h"
#include "time-util.h"
#include "view-intern.h"
#include "view-rule.h"

typedef struct Allocator Allocator;

typedef struct CacheSlot {
        char *key;
        char *machine_id; /* Cache.strings' (view-intern.h): never freed nor changed */
        uint32_t slot_id;
        char *fleet;      /* Cache.strings' */
        char *index_key; /* "<machineID>/<slotID>", shared with claims */
        int64_t mod_revision;
        SlotDoc doc; /* its strings Cache.strings' (view-intern.h) but the allocationId */
        /* The last allocationId its document showed, and the newest revision that showed
         * it: a claim deleted after its slot showed its allocation was fulfilled, not refused
         * (replace_claim_gone), whatever the slot shows by the time that is looked at. */
        char *seen_allocation_id;
        int64_t seen_allocation_revision;
        /* The last claim of this slot the view saw deleted: its allocationId and the revision
         * of the deletion. A record whose mod_revision is that revision, of an allocation the
         * slot shows and with no claim left, is what its host's confirmation wrote (a
         * DELETE's one transaction, allocator-api.c). */
        char *claim_gone_allocation_id;
        int64_t claim_gone_revision;
        bool claimed;
        unsigned generation;
        CapacityEntry capacity; /* its part of the capacity index's counts (capacity-index.h) */
        LIST_FIELDS(struct CacheSlot, all);
        LIST_FIELDS(struct CacheSlot, fleet);
} CacheSlot;

typedef struct CacheFleet {
        char *name;
        CacheSlot *slots;
        size_t n_slots;
} CacheFleet;

typedef struct CacheMachine {
        char *machine_id;
        int64_t mod_revision;
        MachineDoc doc;
        unsigned generation;
        LIST_FIELDS(struct CacheMachine, all);
} CacheMachine;

typedef struct CacheClaim {
        Allocator *allocator;
        char *key;
        char *machine_id;
        uint32_t slot_id;
        char *index_key;
        int64_t mod_revision;
        ClaimDoc doc;
        unsigned generation;
        sd_event_source *deadline; /* SPEC §13 step 3 */
        bool deadline_rearmed;     /* once armed: again one claim timeout from then */
        LIST_FIELDS(struct CacheClaim, all);
} CacheClaim;

/* A command of the scaler, <prefix>/hosts/<machineID>/scale/<slotID>, while its key exists
 * (its registry deletes it once carried out). */
typedef struct CacheScale {
        char *key;
        char *index_key; /* "<machineID>/<slotID>" */
        ScaleAction action; /* _SCALE_ACTION_INVALID: not a command document */
        int64_t mod_revision;
        unsigned generation;
        LIST_FIELDS(struct CacheScale, all);
} CacheScale;

typedef enum CacheKind {
        CACHE_SLOTS,
        CACHE_MACHINES,
        CACHE_HOSTS, /* claims and the scaler's commands (deallocations are the registries') */
        _CACHE_KIND_MAX,
} CacheKind;

typedef struct CacheWatch {
        Allocator *allocator;
        CacheKind kind;
        char *prefix;
        char *range_end;
        EtcdRequest *range;
        EtcdWatch *watch;
        sd_event_source *retry;
        usec_t backoff;
        bool ready;     /* read and watched */
        bool read_once; /* read at least once: the view serves while it is read anew */
        /* clock.revision: every event up to it is in the view (its range's revision, then
         * each event's); the entries' mod_revision and generation are view-rule.h's too */
        ViewClock clock;
} CacheWatch;

/* What the view tells of its changes, to the modules above it (allocator-replace.c's and
 * allocator-scan.c's, wired by allocator-main.c): the view includes none of their headers. */
typedef struct CacheListener {
        /* A claim seen (or seen anew): < 0 when its deadline cannot be watched. */
        int (*claim_seen)(Allocator *a, CacheClaim *c);
        /* A claim deleted, made at claim_revision. */
        void (*claim_gone)(Allocator *a, const ClaimDoc *doc, const char *machine_id,
                           uint32_t slot_id, int64_t claim_revision);
        /* A slot's document read anew. */
        void (*slot_showed)(Allocator *a, const CacheSlot *s);
        /* One kind of the view was (re)read. */
        void (*view_read)(Allocator *a, CacheKind kind);
        /* The watch's events (or a range) were applied: something may have changed. */
        void (*view_changed)(Allocator *a);
} CacheListener;

typedef struct Cache {
        Hashmap slots;              /* key → CacheSlot */
        Hashmap slots_by_index;     /* "<machineID>/<slotID>" → CacheSlot */
        Hashmap slots_by_allocation; /* a slot document's allocationId → CacheSlot */
        Hashmap fleets;             /* name → CacheFleet */
        Hashmap machines;           /* machineID → CacheMachine */
        Hashmap claims;             /* key → CacheClaim */
        Hashmap claims_by_index;    /* "<machineID>/<slotID>" → CacheClaim */
        Hashmap claims_by_allocation; /* allocationId → CacheClaim */
        CacheSlot *all_slots;
        CacheMachine *all_machines;
        CacheClaim *all_claims;
        Hashmap scales;             /* key → CacheScale */
        Hashmap scales_by_index;    /* "<machineID>/<slotID>" → CacheScale */
        CacheScale *all_scales;
        CacheWatch watches[_CACHE_KIND_MAX];
        const CacheListener *listener;
        Hashmap strings; /* what slots share: their documents' strings, machineID, fleet */
        sd_event_source *trim; /* malloc_trim() once a range's answer is freed */
} Cache;
