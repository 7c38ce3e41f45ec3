/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "allocator-answer.h"
#include "allocator-request.h"

json_t *api_error_json_va(const char *fmt, va_list ap) {
        _cleanup_free_ char *message = NULL;

        if (vasprintf(&message, fmt, ap) < 0)
                message = NULL;
        /* json_string() refuses invalid UTF-8: an ID in a message never is (key components). */
        return json_pack("{s:s}", "error", message ?: "out of memory");
}

json_t *api_error_json(const char *fmt, ...) {
        va_list ap;
        json_t *j;

        va_start(ap, fmt);
        j = api_error_json_va(fmt, ap);
        va_end(ap);
        return j;
}

json_t *api_etcd_unavailable_json(const char *message) {
        return api_error_json("etcd unavailable: %s",
                              message && message[0] != '\0' ? message : "no answer");
}

AllocResult alloc_outcome_result(AllocOutcome outcome) {
        switch (outcome) {
        case ALLOC_CLAIMED:
                return ALLOC_RESULT_CLAIMED;
        case ALLOC_EXISTING:
                return ALLOC_RESULT_EXISTING;
        case ALLOC_INVALID:
                return ALLOC_RESULT_INVALID;
        case ALLOC_FLEET_ELSEWHERE:
        case ALLOC_INDEX_ORPHANED:
                return ALLOC_RESULT_CONFLICT;
        case ALLOC_NO_CAPACITY:
                return ALLOC_RESULT_NO_CAPACITY;
        case ALLOC_CONTENDED:
                return ALLOC_RESULT_CONTENDED;
        case ALLOC_VIEW_NOT_READY:
        case ALLOC_ETCD_FAILED:
        case ALLOC_NO_MEMORY:
        default:
                return ALLOC_RESULT_UNAVAILABLE;
        }
}

static json_t *created_json(const AllocRequest *r) {
        _cleanup_free_ char *href = api_allocation_href(r->project, r->environment, r->fleet,
                                                        r->allocation_id);

        return json_pack("{s:s, s:s}", "allocationId", r->allocation_id, "href", href ?: "");
}

unsigned alloc_answer_http(const AllocAnswer *answer, json_t **ret_body) {
        const AllocRequest *r = answer->request;

        switch (answer->outcome) {
        case ALLOC_CLAIMED:
        case ALLOC_EXISTING:
                *ret_body = created_json(r);
                return 200;
        case ALLOC_INVALID:
                *ret_body = api_error_json("allocation in fleet %s: %s", r->fleet,
                                           answer->detail ?: "out of memory");
                return 400;
        case ALLOC_VIEW_NOT_READY:
                *ret_body = api_error_json("etcd unavailable: the fleet view is not read from "
                                           "etcd yet (allocation %s)", r->allocation_id);
                return 503;
        case ALLOC_FLEET_ELSEWHERE:
                *ret_body = api_error_json("allocation %s is of fleet %s, not %s",
                                           r->allocation_id, answer->detail, r->fleet);
                return 409;
        case ALLOC_INDEX_ORPHANED:
                *ret_body = api_error_json("allocation %s: %s in etcd has no record beside it; "
                                           "the allocationId cannot be used until that key is "
                                           "deleted", r->allocation_id, answer->detail);
                return 409;
        case ALLOC_NO_CAPACITY:
                if (!r->region_id || r->region_id[0] == '\0')
                        *ret_body = api_error_json("no capacity in fleet %s", r->fleet);
                else
                        *ret_body = api_error_json("no capacity in fleet %s (region %s)",
                                                   r->fleet, r->region_id);
                return 503;
        case ALLOC_CONTENDED:
                *ret_body = api_error_json("allocation %s: each of %u slots tried was taken by "
                                           "another claim first; try again", r->allocation_id,
                                           answer->attempts);
                return 503;
        case ALLOC_ETCD_FAILED:
                *ret_body = api_etcd_unavailable_json(answer->detail);
                return 503;
        case ALLOC_NO_MEMORY:
        default:
                *ret_body = api_error_json("out of memory");
                return 503;
        }
}
