/* SPDX-License-Identifier: MIT */
#pragma once

/* The door's answers (SPEC §13), pure: an outcome of the operations (allocator-ops.h) as its
 * HTTP status and JSON body, and the API's error bodies. Unit-tested for every outcome
 * (tests/unit/test-allocator-answer.c). */

#include <stdarg.h>

#include <jansson.h>

#include "allocator-metrics.h"
#include "allocator-ops.h"
#include "macro.h"

/* {"error": "…"} (NULL: out of memory) */
_printf_(1, 2) json_t *api_error_json(const char *fmt, ...);
json_t *api_error_json_va(const char *fmt, va_list ap);
/* 503's body for an etcd failure, in the words of SPEC §13: etcd's message, NULL or "" for
 * none. */
json_t *api_etcd_unavailable_json(const char *message);

/* How the metrics count an outcome. */
AllocResult alloc_outcome_result(AllocOutcome outcome);
/* The status of the answer to POST …/allocations, and its body in *ret_body (NULL: out of
 * memory). */
unsigned alloc_answer_http(const AllocAnswer *answer, json_t **ret_body);

/* The answers to GET …/allocations/{allocationId}, GET …/allocations and DELETE
 * …/allocations/{allocationId}: the status, and the body in *ret_body (NULL: out of memory;
 * none for DELETE's 204). */
unsigned record_get_answer_http(const RecordAnswer *answer, json_t **ret_body);
unsigned record_list_answer_http(const RecordAnswer *answer, json_t **ret_body);
unsigned record_delete_answer_http(const RecordAnswer *answer, json_t **ret_body);
/* The answer to any request under a project, or an environment of it, the allocator does not
 * serve (allocator.environments): 404 naming the project, if none of its environments is
 * served, else the environment. */
unsigned environment_unknown_answer_http(const char *project, const char *environment,
                                         bool project_known, json_t **ret_body);
/* The answer to GET /v1/fleets/{fleetId}/capacity. */
unsigned capacity_answer_http(const FleetCapacity *c, json_t **ret_body);
