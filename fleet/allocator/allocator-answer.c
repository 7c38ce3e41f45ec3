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
        case ALLOC_UNKNOWN_FLEET:
        case ALLOC_UNKNOWN_BUILD:
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
        case ALLOC_UNKNOWN_FLEET:
                *ret_body = api_error_json("fleet %s not found (allocation %s)", r->fleet,
                                           r->allocation_id);
                return 404;
        case ALLOC_UNKNOWN_BUILD:
                *ret_body = api_error_json("allocation %s in fleet %s: no server of the fleet "
                                           "runs build configuration %s", r->allocation_id,
                                           r->fleet, r->build_configuration_id);
                return 400;
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

/* ---- an allocation's record: GET, the list, DELETE ---- */

/* The answer of an outcome every record op may end in; false for FOUND and DELETED, each
 * op's own. */
static bool record_failed_http(const RecordAnswer *answer, unsigned *ret_status,
                               json_t **ret_body) {
        const RecordRequest *r = answer->request;

        switch (answer->outcome) {
        case RECORD_FOUND:
        case RECORD_DELETED:
                return false;
        case RECORD_NOT_FOUND:
                *ret_body = api_error_json("allocation %s not found in fleet %s",
                                           r->allocation_id, r->fleet);
                *ret_status = 404;
                return true;
        case RECORD_CHANGED:
                *ret_body = api_error_json("allocation %s changed under each of %u attempts to "
                                           "delete it; try again", r->allocation_id,
                                           answer->attempts);
                *ret_status = 503;
                return true;
        case RECORD_ETCD_FAILED:
                *ret_body = api_etcd_unavailable_json(answer->detail);
                *ret_status = 503;
                return true;
        case RECORD_KEPT: /* a fence's alone: the door never asks for it */
                *ret_body = api_error_json("allocation %s kept: a POST of it was answered "
                                           "with it", r->allocation_id);
                *ret_status = 500;
                return true;
        case RECORD_NO_MEMORY:
        default:
                *ret_body = api_error_json("out of memory");
                *ret_status = 500;
                return true;
        }
}

static json_t *shown_json(const RecordShown *s) {
        return api_allocation_json(&s->record, record_shown_status(s), s->readiness,
                                   s->ready_at);
}

unsigned record_get_answer_http(const RecordAnswer *answer, json_t **ret_body) {
        unsigned status;

        if (record_failed_http(answer, &status, ret_body))
                return status;
        if (answer->outcome != RECORD_FOUND || answer->n_shown != 1) {
                /* not an outcome of GET: as no memory */
                *ret_body = api_error_json("out of memory");
                return 500;
        }
        /* NULL (no memory): the door answers 500 without a body */
        *ret_body = shown_json(&answer->shown[0]);
        return 200;
}

unsigned record_list_answer_http(const RecordAnswer *answer, json_t **ret_body) {
        json_t *list;
        unsigned status;

        if (record_failed_http(answer, &status, ret_body))
                return status;
        list = answer->outcome == RECORD_FOUND ? json_array() : NULL;
        for (size_t i = 0; list && i < answer->n_shown; i++)
                if (json_array_append_new(list, shown_json(&answer->shown[i])) < 0) {
                        json_decref(list);
                        list = NULL;
                }
        if (!list) {
                *ret_body = api_error_json("out of memory");
                return 500;
        }
        /* Unity's ListAllocationsResponse: both required; pagination's limit and offset
         * as asked (the defaults when not) */
        *ret_body = json_pack("{s:o, s:{s:I, s:I}}", "allocations", list, "pagination",
                              "limit", (json_int_t) answer->limit, "offset",
                              (json_int_t) answer->offset);
        return 200;
}

unsigned record_delete_answer_http(const RecordAnswer *answer, json_t **ret_body) {
        unsigned status;

        if (record_failed_http(answer, &status, ret_body))
                return status;
        if (answer->outcome != RECORD_DELETED) {
                /* not an outcome of DELETE: as no memory */
                *ret_body = api_error_json("out of memory");
                return 500;
        }
        *ret_body = NULL;
        return 204;
}

/* ---- a fleet's capacity ---- */

static json_t *counts_json(const CapacityCount *v, size_t n) {
        json_t *o = json_object();

        for (size_t i = 0; o && i < n; i++)
                if (json_object_set_new(o, v[i].name, json_integer((json_int_t) v[i].n)) < 0) {
                        json_decref(o);
                        return NULL;
                }
        return o;
}

static json_t *tally_json(const CapacityTally *t) {
        return json_pack("{s:I, s:I, s:o, s:o, s:I}", "slots", (json_int_t) t->slots,
                         "machines", (json_int_t) t->machines, "states",
                         counts_json(t->states, t->n_states), "processStates",
                         counts_json(t->process_states, t->n_process_states), "claimed",
                         (json_int_t) t->claimed);
}

/* The region's scaler (SPEC §13, "The scaler"): its target, and its servers as the scaler
 * counts them; absent when the region has no target. */
static json_t *region_scaler_json(const CapacityRegion *r) {
        const ScalerTarget *t = r->target;
        uint64_t busy = MIN(r->busy, (uint64_t) UINT32_MAX);

        return json_pack("{s:I, s:I, s:o, s:I, s:I, s:I}", "buffer", (json_int_t) t->buffer,
                         "floor", (json_int_t) t->floor, "ceiling",
                         t->ceiling == SCALER_CEILING_NONE ? json_null()
                                                           : json_integer(t->ceiling),
                         "busy", (json_int_t) r->busy, "free", (json_int_t) r->free, "wanted",
                         (json_int_t) scaler_wanted(t, (uint32_t) busy));
}

static json_t *region_json(const CapacityRegion *r) {
        json_t *o = tally_json(&r->tally);

        if (o && r->target && json_object_set_new(o, "scaler", region_scaler_json(r)) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}

static json_t *regions_json(const FleetCapacity *c) {
        json_t *o = json_object();

        for (size_t i = 0; o && i < c->n_regions; i++)
                if (json_object_set_new(o, c->regions[i].region_id,
                                        region_json(&c->regions[i])) < 0) {
                        json_decref(o);
                        return NULL;
                }
        return o;
}

static json_t *strings_json(const char *const *v, size_t n) {
        json_t *list = json_array();

        for (size_t i = 0; list && i < n; i++)
                if (json_array_append_new(list, json_string(v[i])) < 0) {
                        json_decref(list);
                        list = NULL;
                }
        return list;
}

static json_t *capacity_json(const FleetCapacity *c) {
        char hold[RFC3339_MAX];

        return json_pack("{s:s, s:o, s:o, s:o, s:s}", "fleetId", c->fleet, "total",
                         tally_json(&c->total), "regions", regions_json(c), "deprovisionable",
                         strings_json(c->deprovisionable, c->n_deprovisionable), "holdUntil",
                         rfc3339_format(c->hold_until, hold));
}

unsigned capacity_answer_http(const FleetCapacity *c, json_t **ret_body) {
        if (c->outcome == CAPACITY_VIEW_NOT_READY) {
                *ret_body = api_error_json("etcd unavailable: the fleet view is not read from "
                                           "etcd yet (capacity of fleet %s)", c->fleet);
                return 503;
        }
        if (c->outcome == CAPACITY_UNKNOWN_FLEET) {
                *ret_body = api_error_json("fleet %s not found", c->fleet);
                return 404;
        }
        *ret_body = c->outcome == CAPACITY_TALLIED ? capacity_json(c) : NULL;
        if (*ret_body)
                return 200;
        /* no memory, or a name (a region, a state) JSON cannot hold */
        *ret_body = api_error_json("out of memory (capacity of fleet %s)", c->fleet);
        return 500;
}

unsigned environment_unknown_answer_http(const char *project, const char *environment,
                                         bool project_known, json_t **ret_body) {
        if (project_known)
                *ret_body = api_error_json("environment %s of project %s not found",
                                           environment, project);
        else
                *ret_body = api_error_json("project %s not found", project);
        return 404;
}
