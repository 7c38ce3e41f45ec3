/* SPDX-License-Identifier: MIT */
/* The API (SPEC §13), the door's side: a request's route and body handed to the operations
 * (allocator-ops.h): POST of an allocation, GET of one and of the list, DELETE, the fleet's
 * capacity; their outcome answered (allocator-answer.h). The metrics and the status page, from
 * the fleet view. */
#include <sys/random.h>

#include "allocator-answer.h"
#include "allocator-api.h"
#include "allocator-cache.h"
#include "allocator-fence.h"
#include "allocator-http.h"
#include "allocator-ops.h"
#include "allocator-status.h"
#include "allocator.h"

static void api_metrics(Allocator *a, ApiRequest *req) {
        AllocatorGauges g = {
                .slots = a->cache.slots.size,
                .machines = a->cache.machines.size,
                .claims = a->cache.claims.size,
                .fenced_slots = fence_count(a),
                .requests_in_flight = a->requests_in_flight,
                .fleet_view_ready = cache_ready(a),
        };
        char *text;

        etcd_batch_counts(a->batch, &g.etcd_batches, &g.etcd_batched_txns);

        if (allocator_metrics_format(&a->metrics, &g, &text) < 0) {
                api_request_error(req, 500, "out of memory (metrics)");
                return;
        }
        api_request_answer_text(req, 200, text, "text/plain; version=0.0.4; charset=utf-8");
}

/* ---- GET /: the status page (allocator-status.h) ---- */

static int machine_compare(const void *a, const void *b) {
        return strcmp(((const StatusMachine *) a)->machine_id,
                      ((const StatusMachine *) b)->machine_id);
}

/* The view's machines, sorted, into p (which owns the array). */
static int status_machines(const Allocator *a, StatusPage *p) {
        StatusMachine *v = new0(StatusMachine, a->cache.machines.size + 1);
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (const CacheMachine *m = a->cache.all_machines; m && n < a->cache.machines.size;
             m = m->all_next)
                v[n++] = (StatusMachine){ .machine_id = m->machine_id,
                                          .machine_number = m->doc.machine_number,
                                          .faults = m->doc.faults,
                                          .draining = m->doc.draining,
                                          .deprovisionable = m->doc.deprovisionable };
        qsort(v, n, sizeof(*v), machine_compare);
        p->machines = v;
        p->n_machines = n;
        return 0;
}

/* The view's slots, each with its machine's document, sorted, into p. */
static int status_slots(const Allocator *a, StatusPage *p) {
        StatusSlot *v = new0(StatusSlot, a->cache.slots.size + 1);
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (const CacheSlot *s = a->cache.all_slots; s && n < a->cache.slots.size;
             s = s->all_next)
                v[n++] = (StatusSlot){
                        .fleet = s->fleet, .region = strempty(s->doc.region_id),
                        .machine_id = s->machine_id, .slot_id = s->slot_id,
                        .state = s->doc.state, .claimed = s->claimed,
                        .machine = bsearch(&(StatusMachine){ .machine_id = s->machine_id },
                                           p->machines, p->n_machines, sizeof(StatusMachine),
                                           machine_compare),
                };
        qsort(v, n, sizeof(*v), status_slot_compare);
        p->slots = v;
        p->n_slots = n;
        return 0;
}

static void api_status(Allocator *a, ApiRequest *req) {
        const AllocatorMetrics *m = &a->metrics;
        StatusPage p = {
                .made = now_usec(CLOCK_REALTIME),
                .view_ready = cache_ready(a),
                .revision_slots = a->cache.watches[CACHE_SLOTS].clock.revision,
                .revision_machines = a->cache.watches[CACHE_MACHINES].clock.revision,
                .revision_hosts = a->cache.watches[CACHE_HOSTS].clock.revision,
                .n_claims = a->cache.claims.size,
                .allocations_last_minute = rate_ring_sum(
                        &m->claimed_rate, now_usec(CLOCK_MONOTONIC) / USEC_PER_SEC),
                .allocations_total = m->allocations[ALLOC_RESULT_CLAIMED],
                .no_capacity_total = m->allocations[ALLOC_RESULT_NO_CAPACITY],
        };
        char *text = NULL;
        int r;

        for (AllocResult i = 0; i < _ALLOC_RESULT_MAX; i++)
                p.posts_total += m->allocations[i];
        r = status_machines(a, &p);
        if (r >= 0)
                r = status_slots(a, &p);
        if (r >= 0)
                r = status_page_format(&p, &text);
        free((void *) p.slots);
        free((void *) p.machines);
        if (r < 0) {
                api_request_error(req, 500, "out of memory (status page)");
                return;
        }
        api_request_answer_text(req, 200, text, "text/html; charset=utf-8");
}

/* ---- POST …/allocations (SPEC §13 step 1) ---- */

/* An allocation's outcome, counted and answered. */
static void allocate_answered(const AllocAnswer *answer, void *userdata) {
        ApiRequest *req = userdata;
        Allocator *a = api_request_allocator(req);
        json_t *body = NULL;
        unsigned status;

        a->metrics.allocations[alloc_outcome_result(answer->outcome)]++;
        if (alloc_outcome_result(answer->outcome) == ALLOC_RESULT_CLAIMED)
                rate_ring_add(&a->metrics.claimed_rate,
                              now_usec(CLOCK_MONOTONIC) / USEC_PER_SEC);
        allocator_metrics_observe_latency(&a->metrics,
                                          now_usec(CLOCK_MONOTONIC) - api_request_started(req));
        status = alloc_answer_http(answer, &body);
        api_request_answer(req, status, body);
}

static void allocate_cancel(void *op) {
        alloc_claim_cancel(op);
}

static void api_allocate(Allocator *a, ApiRequest *req) {
        _cleanup_(api_allocate_body_done) ApiAllocateBody body = {};
        const ApiRoute *rt = api_request_route(req);
        AllocRequest r = { .project = rt->project, .environment = rt->environment,
                           .fleet = rt->fleet };
        const char *error = NULL, *text;
        char request_id[37];
        uint8_t random[16];
        size_t size;
        ClaimOp *op;

        text = api_request_body(req, &size);
        if (api_parse_allocate(text, size, &body, &error) < 0) {
                allocate_answered(&(AllocAnswer){ .outcome = ALLOC_INVALID, .request = &r,
                                                  .detail = error },
                                  req);
                return;
        }
        r.allocation_id = body.allocation_id;
        if (cache_ready(a) && !alloc_fleet_known(a, r.fleet)) {
                allocate_answered(&(AllocAnswer){ .outcome = ALLOC_UNKNOWN_FLEET, .request = &r },
                                  req);
                return;
        }
        r.build_configuration_id = body.build_configuration_id;
        r.region_id = body.region_id;
        r.payload = body.payload;
        r.restart = body.restart;
        /* The POST's own ID (Unity's requestId), random: the kernel's pool is ready long
         * before a request comes (the allocator starts after the network). */
        if (getrandom(random, sizeof(random), GRND_NONBLOCK) != (ssize_t) sizeof(random)) {
                allocate_answered(&(AllocAnswer){ .outcome = ALLOC_NO_MEMORY, .request = &r },
                                  req);
                return;
        }
        api_request_id_format(random, request_id);
        r.request_id = request_id;
        /* Answered, perhaps at once (then NULL), through allocate_answered. */
        op = alloc_claim(a, &r, allocate_answered, req);
        if (op)
                api_request_set_op(req, op, allocate_cancel);
}

/* ---- GET …/allocations/{allocationId}, GET …/allocations, DELETE (SPEC §13 step 4) ---- */

static void record_answered(const RecordAnswer *answer, void *userdata) {
        ApiRequest *req = userdata;
        json_t *body = NULL;
        unsigned status;

        switch (api_request_route(req)->op) {
        case API_GET:
                status = record_get_answer_http(answer, &body);
                break;
        case API_LIST:
                status = record_list_answer_http(answer, &body);
                break;
        default:
                status = record_delete_answer_http(answer, &body);
        }
        api_request_answer(req, status, body);
}

static void record_cancel(void *op) {
        alloc_record_cancel(op);
}

static void api_record(Allocator *a, ApiRequest *req) {
        const ApiRoute *rt = api_request_route(req);
        const RecordRequest r = { .project = rt->project, .environment = rt->environment,
                                  .fleet = rt->fleet, .allocation_id = rt->allocation };
        RecordOp *op;

        /* Answered, perhaps at once (then NULL), through record_answered. */
        if (rt->op == API_GET)
                op = alloc_get(a, &r, record_answered, req);
        else
                op = alloc_delete(a, &r, record_answered, req);
        if (op)
                api_request_set_op(req, op, record_cancel);
}

/* The list's parameters, from the route and its query string. */
static void list_request(const ApiRoute *rt, ListRequest *ret) {
        *ret = (ListRequest){ .project = rt->project, .environment = rt->environment,
                              .fleet = rt->fleet, .status = rt->status,
                              .status_lost = rt->status_lost, .age = rt->age,
                              .ids = rt->ids, .limit = rt->limit, .offset = rt->offset };
}

static void api_list(Allocator *a, ApiRequest *req) {
        ListRequest l;
        RecordOp *op;

        list_request(api_request_route(req), &l);
        op = alloc_list(a, &l, record_answered, req);
        if (op)
                api_request_set_op(req, op, record_cancel);
}

/* ---- GET /v1/fleets/{fleetId}/capacity (SPEC §13) ---- */

static void api_capacity(Allocator *a, ApiRequest *req) {
        _cleanup_(fleet_capacity_done) FleetCapacity c = {};
        json_t *body = NULL;
        unsigned status;

        alloc_capacity(a, api_request_route(req)->fleet, &c);
        status = capacity_answer_http(&c, &body);
        api_request_answer(req, status, body);
}

/* Whether the route's project and environment are served; if not, answered 404. */
static bool api_environment_served(Allocator *a, ApiRequest *req) {
        const ApiRoute *rt = api_request_route(req);
        json_t *body = NULL;
        unsigned status;

        if (allocator_serves(a->config, rt->project, rt->environment))
                return true;
        status = environment_unknown_answer_http(rt->project, rt->environment,
                                                 allocator_serves(a->config, rt->project, NULL),
                                                 &body);
        api_request_answer(req, status, body);
        return false;
}

void api_dispatch(Allocator *a, ApiRequest *req) {
        switch (api_request_route(req)->op) {
        case API_ALLOCATE:
        case API_GET:
        case API_DELETE:
        case API_LIST:
                if (!api_environment_served(a, req))
                        return;
                break;
        default:
                break;
        }
        switch (api_request_route(req)->op) {
        case API_ALLOCATE:
                api_allocate(a, req);
                break;
        case API_GET:
        case API_DELETE:
                api_record(a, req);
                break;
        case API_LIST:
                api_list(a, req);
                break;
        case API_CAPACITY:
                api_capacity(a, req);
                break;
        case API_STATUS:
                api_status(a, req);
                break;
        default:
                api_metrics(a, req);
        }
}
