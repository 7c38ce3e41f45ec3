/* SPDX-License-Identifier: MIT */
#pragma once

/* slotd-allocator (SPEC §13): the fleet's allocation API, a stateless HTTP service. Any
 * number of replicas may run: etcd is the one store, and every change is one transaction
 * whose compares make it safe against every other replica.
 *
 * Its modules, top first; a module (x.c and its x.h) includes the headers of those below it
 * only, and the operations (allocator-ops.h and below) none of the door's (the HTTP door:
 * allocator-http.c, -api.c, -answer.c); tests/layout/layers.py checks both:
 *
 *   allocator-main.c     argv, configuration, the listening socket, privileges, the loop;
 *                        wires the door to the API, the view to its listeners
 *   allocator-http.c     microhttpd on sd-event: TLS, authentication, a request's life
 *   allocator-api.c      the API: a request to its operation (POST, GET, list, DELETE,
 *                        capacity); the metrics; the status page
 *   allocator-answer.c   an operation's outcome as its HTTP status and body (pure)
 *   allocator-claim.c    the operations (allocator-ops.h): placement and the claim transaction
 *   allocator-record.c   … an allocation's record read, the list, a deletion's transaction
 *   allocator-capacity.c … a fleet's capacity, from the counts the view keeps
 *   allocator-scaler.c   the scaler: its election (etcd's Election service, on a lease), and
 *                        the leader's plan written as commands to the hosts
 *   allocator-fence.c    claims whose outcome etcd left unknown: the slot fenced, the claim undone
 *   allocator-scan.c     claimed records without their claim, found
 *   allocator-replace.c  claims placed again: deadline passed, or refused by their host
 *   allocator-cache.c    the fleet view: range and watch of slots, machines and claims
 *   allocator.c          the whole (this header): etcd's keys and failures
 *   allocator-view.h     the fleet view's types
 *   allocator-request.c  routes, bodies and answers (pure; fuzzed)
 *   allocator-config.c   allocator.ini
 *   allocator-status.c   the fleet status page, GET / (pure HTML)
 *   allocator-metrics.c  the Prometheus exposition, the allocation rate's ring (pure)
 *   placement.c          which slot (pure; the order of SPEC §7 across machines)
 *   capacity-index.c     the capacity answer's counts per fleet and region (pure)
 *   scaler-index.c       the scaler's counts and candidates per fleet and region (pure) */

#include <systemd/sd-event.h>

#include "allocator-config.h"
#include "allocator-metrics.h"
#include "allocator-view.h"
#include "capacity-index.h"
#include "docs.h"
#include "etcd.h"
#include "placement.h"
#include "scaler-index.h"

static inline bool str_isempty(const char *s) {
        return !s || s[0] == '\0';
}

typedef struct Allocator Allocator;
typedef struct ApiRequest ApiRequest;   /* allocator-http.c's */
typedef struct ReplaceOp ReplaceOp;     /* allocator-replace.c's */
typedef struct Scaler Scaler;           /* allocator-scaler.c's */
typedef struct Fence Fence;             /* allocator-fence.c's */
typedef struct MhdEvent MhdEvent;       /* common/mhd-event.h */
struct MHD_Daemon;

/* The scan of claimed records without their claim (allocator-scan.h). */
typedef struct RecordScan {
        EtcdRequest *range;     /* the page in flight */
        sd_event_source *retry; /* a page etcd did not answer, asked again */
        usec_t backoff;
        char *from;             /* the first key of the next page (the last one read) */
        bool wanted;            /* the claims were (re)read: a scan once the whole view is */
        size_t n_records, n_orphaned;
} RecordScan;

/* ---- the whole ---- */

struct Allocator {
        sd_event *event;
        AllocatorConfig *config;
        Etcd *etcd;
        Placement *placement;
        /* the scaler's counts and candidates, fed by the view as placement is; made by
         * scaler_start() (NULL on a replica that does not stand for the scaler) */
        ScalerIndex *scaler_index;
        /* the capacity answer's counts, fed by the view as placement is */
        CapacityIndex *capacity_index;
        Cache cache;
        AllocatorMetrics metrics;
        MhdEvent *mhd_event;
        struct MHD_Daemon *mhd;
        char *token; /* the bearer token, NULL for none */
        char *tls_cert_pem, *tls_key_pem, *tls_ca_pem;
        size_t requests_in_flight;
        ApiRequest *requests;
        void (*api_dispatch)(Allocator *a, ApiRequest *req); /* allocator-http.c hands on */
        ReplaceOp *replace_ops;
        /* POST's claims and DELETE's read and transaction, sent together (etcd.h's group
         * commit). */
        EtcdBatch *batch;
        RecordScan scan;
        Scaler *scaler; /* the scaler's election (allocator-scaler.h) */
        Fence *fences;  /* claims in doubt, and fenced slots (allocator-fence.h) */
        /* stopping (allocator-stop.h): the wait's bound, and whether the loop was left */
        bool stopping, stop_done;
        sd_event_source *stop_timer;
        void (*on_settled)(Allocator *a); /* allocator_settled()'s, while stopping */
};

/* The record's key of an allocation: <prefix>/allocations/<fleet>/<allocationId>. */
char *allocator_record_key(const Allocator *a, const char *fleet, const char *allocation_id);
/* Whether etcd's answer is an error; counts it. */
bool allocator_etcd_failed(Allocator *a, const EtcdResponse *resp);
/* Something a stop waits for has ended (a claim in doubt fenced or undone, the scaler's lease
 * revoked, an answer gone): the stop (allocator-stop.c, which sets on_settled) is told. */
void allocator_settled(Allocator *a);
