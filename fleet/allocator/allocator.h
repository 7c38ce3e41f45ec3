/* SPDX-License-Identifier: MIT */
#pragma once

/* slotd-allocator (SPEC §13): the fleet's allocation API, a stateless HTTP service. Any
 * number of replicas may run: etcd is the one store, and every change is one transaction
 * whose compares make it safe against every other replica.
 *
 *   allocator-main.c     argv, configuration, the listening socket, privileges, the loop
 *   allocator-http.c     microhttpd on sd-event: TLS, authentication, a request's life
 *   allocator-api.c      the API's reads: GET, list, capacity, metrics; DELETE
 *   allocator-claim.c    POST: placement and the claim transaction
 *   allocator-replace.c  claims placed again: deadline passed, or refused by their host
 *   allocator-cache.c    the fleet view: range and watch of slots, machines and claims
 *   allocator-request.c  routes, bodies and answers (pure; fuzzed)
 *   allocator-config.c   allocator.ini
 *   allocator-metrics.c  the Prometheus exposition (pure)
 *   placement.c          which slot (pure; the order of SPEC §7 across machines) */

#include <jansson.h>
#include <systemd/sd-event.h>

#include "allocator-config.h"
#include "allocator-metrics.h"
#include "allocator-orphan.h"
#include "allocator-request.h"
#include "docs.h"
#include "etcd.h"
#include "hashmap.h"
#include "list.h"
#include "mhd-event.h"
#include "placement.h"

static inline bool str_isempty(const char *s) {
        return !s || s[0] == '\0';
}

typedef struct Allocator Allocator;
typedef struct ApiRequest ApiRequest;
typedef struct ReplaceOp ReplaceOp;

/* ---- the fleet view (allocator-cache.c) ---- */

typedef struct CacheSlot {
        char *key;
        char *machine_id;
        uint32_t slot_id;
        char *fleet;
        char *index_key; /* "<machineID>/<slotID>", shared with claims */
        int64_t mod_revision;
        SlotDoc doc;
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

typedef enum CacheKind {
        CACHE_SLOTS,
        CACHE_MACHINES,
        CACHE_HOSTS, /* claims (deallocations are the registries') */
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
        unsigned generation;
        bool ready;     /* read and watched */
        bool read_once; /* read at least once: the view serves while it is read anew */
        /* Every event up to it is in the view: its range's revision, then each event's. */
        int64_t revision;
} CacheWatch;

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
        CacheWatch watches[_CACHE_KIND_MAX];
} Cache;

int cache_start(Allocator *a);
void cache_done(Allocator *a);
bool cache_ready(const Allocator *a);
CacheSlot *cache_slot_by_index(const Allocator *a, const char *machine_id, uint32_t slot_id);
CacheClaim *cache_claim_by_index(const Allocator *a, const char *machine_id, uint32_t slot_id);
/* A kv that a transaction's answer carries (its failure branch's ranges, or what it wrote),
 * applied as the watch would, if it is newer than the view's. key absent (kv NULL): a slot
 * document gone. */
void cache_apply_kv(Allocator *a, const char *key, const EtcdKv *kv);
/* The machine, when it is in the fleet view. */
CacheMachine *cache_machine(const Allocator *a, const char *machine_id);

/* ---- a request (allocator-http.c) ---- */

const ApiRoute *api_request_route(const ApiRequest *req);
const char *api_request_body(const ApiRequest *req, size_t *ret_size);
usec_t api_request_started(const ApiRequest *req);
/* Every answer takes body (may be NULL). Once answered, the request's op is forgotten. */
void api_request_answer(ApiRequest *req, unsigned status, json_t *body);
_printf_(3, 4) void api_request_error(ApiRequest *req, unsigned status, const char *fmt, ...);
/* {"error": "…"} */
_printf_(1, 2) json_t *api_error_json(const char *fmt, ...);
void api_request_answer_text(ApiRequest *req, unsigned status, char *text,
                             const char *content_type);
/* The op working for the request: cancel(op) when the client goes away or the request's
 * deadline passes before an answer. */
void api_request_set_op(ApiRequest *req, void *op, void (*cancel)(void *op));
void api_request_clear_op(ApiRequest *req);

int http_start(Allocator *a, int listen_fd);
void http_stop(Allocator *a);

/* ---- the API (allocator-api.c, allocator-claim.c) ---- */

void api_dispatch(Allocator *a, ApiRequest *req);
void api_allocate(Allocator *a, ApiRequest *req);
/* 503 for an etcd failure, in the words of SPEC §13. */
void api_etcd_unavailable(Allocator *a, ApiRequest *req, const EtcdResponse *resp);

/* ---- claims placed again (allocator-replace.c) ---- */

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

/* ---- claimed records without their claim (allocator-scan.c) ---- */

typedef struct RecordScan {
        EtcdRequest *range;     /* the page in flight */
        sd_event_source *retry; /* a page etcd did not answer, asked again */
        usec_t backoff;
        char *from;             /* the first key of the next page (the last one read) */
        bool wanted;            /* the claims were (re)read: a scan once the whole view is */
        size_t n_records, n_orphaned;
} RecordScan;

/* One kind of the view was (re)read: after the claims, every record is read once the whole
 * view is, and each claimed one without its claim placed again. */
void scan_view_read(Allocator *a, CacheKind kind);
/* What the view tells of rec's claim, for allocation_record_orphaned(). */
OrphanView scan_orphan_view(const Allocator *a, const AllocationRecord *rec);
void scan_done(Allocator *a);

/* ---- the whole ---- */

struct Allocator {
        sd_event *event;
        AllocatorConfig *config;
        Etcd *etcd;
        Placement *placement;
        Cache cache;
        AllocatorMetrics metrics;
        MhdEvent *mhd_event;
        struct MHD_Daemon *mhd;
        char *token; /* the bearer token, NULL for none */
        char *tls_cert_pem, *tls_key_pem, *tls_ca_pem;
        size_t requests_in_flight;
        ApiRequest *requests;
        ReplaceOp *replace_ops;
        /* POST's claims and DELETE's read and transaction, sent together (etcd.h's group
         * commit). */
        EtcdBatch *batch;
        RecordScan scan;
};

/* The record's key of an allocation: <prefix>/allocations/<fleet>/<allocationId>. */
char *allocator_record_key(const Allocator *a, const char *fleet, const char *allocation_id);
/* Whether etcd's answer is an error; counts it. */
bool allocator_etcd_failed(Allocator *a, const EtcdResponse *resp);
