/* SPDX-License-Identifier: MIT */
/* The API (SPEC §13), the door's side: POST of an allocation, handed to the operations
 * (allocator-ops.h) and their outcome answered (allocator-answer.h); GET of one allocation,
 * of the list, and DELETE (allocator-record.h); the fleet's capacity (allocator-capacity.h);
 * the metrics, from the fleet view. */
#include <inttypes.h>

#include "allocator-answer.h"
#include "allocator-api.h"
#include "allocator-cache.h"
#include "allocator-capacity.h"
#include "allocator-http.h"
#include "allocator-ops.h"
#include "allocator-record.h"
#include "allocator.h"
#include "log.h"

static void api_metrics(Allocator *a, ApiRequest *req) {
        AllocatorGauges g = {
                .slots = a->cache.slots.size,
                .machines = a->cache.machines.size,
                .claims = a->cache.claims.size,
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

/* ---- POST …/allocations (SPEC §13 step 1) ---- */

/* An allocation's outcome, counted and answered. */
static void allocate_answered(const AllocAnswer *answer, void *userdata) {
        ApiRequest *req = userdata;
        Allocator *a = api_request_allocator(req);
        json_t *body = NULL;
        unsigned status;

        a->metrics.allocations[alloc_outcome_result(answer->outcome)]++;
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
        r.build_configuration_id = body.build_configuration_id;
        r.region_id = body.region_id;
        r.payload = body.payload;
        /* Answered, perhaps at once (then NULL), through allocate_answered. */
        op = alloc_claim(a, &r, allocate_answered, req);
        if (op)
                api_request_set_op(req, op, allocate_cancel);
}

void api_dispatch(Allocator *a, ApiRequest *req) {
        switch (api_request_route(req)->op) {
        case API_ALLOCATE:
                api_allocate(a, req);
                break;
        case API_GET:
                api_get(a, req, false);
                break;
        case API_LIST:
                api_get(a, req, true);
                break;
        case API_DELETE:
                api_delete(a, req);
                break;
        case API_CAPACITY:
                api_capacity(a, req);
                break;
        default:
                api_metrics(a, req);
        }
}
