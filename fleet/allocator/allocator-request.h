/* SPDX-License-Identifier: MIT */
#pragma once

/* The allocation API's requests and answers as pure functions (SPEC §13): the route of a
 * method and path, the body of an allocation, and the JSON of an allocation as GET shows it.
 * Every byte of a request is hostile here: bounded, checked, fuzzed (tests/fuzz). No I/O, no
 * logging. */

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "docs.h"

/* IDs in paths and bodies: key components (docs.h), at most this long. */
#define API_ID_MAX 128
#define API_BODY_MAX (256U * 1024U)

typedef enum ApiOp {
        API_ALLOCATE, /* POST …/allocations */
        API_LIST,     /* GET …/allocations */
        API_GET,      /* GET …/allocations/{allocationId} */
        API_DELETE,   /* DELETE …/allocations/{allocationId} */
        API_CAPACITY, /* GET /v1/fleets/{fleetId}/capacity */
        API_METRICS,  /* GET /metrics */
        _API_OP_MAX,
} ApiOp;

const char *api_op_to_string(ApiOp op);

typedef struct ApiRoute {
        ApiOp op;
        char project[API_ID_MAX + 1];
        char environment[API_ID_MAX + 1];
        char fleet[API_ID_MAX + 1];
        char allocation[API_ID_MAX + 1]; /* a UUID is lowercased */
        AllocationStatus status;         /* LIST's ?status=: a status, or -1 for every one */
        bool status_lost;                /* ?status=lost */
        const char *allow;               /* the methods of the path (for 405's Allow) */
} ApiRoute;

/* path without the query; status: the value of ?status= or NULL. 0, or -ENOENT (no such
 * path), -EOPNOTSUPP (not this method: ret->allow is set), -EINVAL (an ID in the path, or
 * status, that is malformed: *ret_error says which). On failure other than -EOPNOTSUPP, *ret
 * is untouched. */
int api_route(const char *method, const char *path, const char *status, ApiRoute *ret,
              const char **ret_error);

/* "8-4-4-4-12" hexadecimal digits. */
bool api_is_uuid(const char *s);

typedef struct ApiAllocateBody {
        char allocation_id[API_ID_MAX + 1]; /* a UUID, lowercased */
        char *build_configuration_id;       /* a string or a number in the body; "" when none */
        char *region_id;                    /* "" when none */
        char *payload;                      /* "" when none */
} ApiAllocateBody;

/* The POST body: 0, or -EBADMSG with *ret_error saying what is wrong (for the 400's message),
 * or -ENOMEM. Unknown fields are ignored. */
int api_parse_allocate(const char *body, size_t size, ApiAllocateBody *ret,
                       const char **ret_error);
void api_allocate_body_done(ApiAllocateBody *b);

/* The path of an allocation: "/v1/allocations/projects/P/environments/E/fleets/F/allocations/A". */
char *api_allocation_href(const char *project, const char *environment, const char *fleet,
                          const char *allocation_id);

/* What GET shows of a record: status_word is claimed, fulfilled or lost; ready the slot's. */
json_t *api_allocation_json(const AllocationRecord *rec, const char *status_word, bool ready);
