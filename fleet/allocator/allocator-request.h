/* SPDX-License-Identifier: MIT */
#pragma once

/* The allocation API's requests and answers as pure functions (SPEC §13): the route of a
 * method and path, the body of an allocation, and the JSON of an allocation as GET shows it.
 * Every byte of a request is hostile here: bounded, checked, fuzzed (tests/fuzz). No I/O, no
 * logging. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
        API_STATUS,   /* GET /: the status page (allocator-status.h) */
        _API_OP_MAX,
} ApiOp;

const char *api_op_to_string(ApiOp op);

/* The list's query (Unity's ListAllocations): at most this many allocations a page, this many
 * by default, at most this many IDs in ?ids=. */
#define API_LIST_LIMIT_MAX 1000U
#define API_LIST_LIMIT_DEFAULT 100U
#define API_LIST_IDS_MAX 100U
#define API_LIST_IDS_BUF (API_LIST_IDS_MAX * 37U)

/* The query string's values the routes read, NULL for those absent. */
typedef struct ApiQuery {
        const char *status, *age, *limit, *offset, *ids;
} ApiQuery;

typedef struct ApiRoute {
        ApiOp op;
        char project[API_ID_MAX + 1];
        char environment[API_ID_MAX + 1];
        char fleet[API_ID_MAX + 1];
        char allocation[API_ID_MAX + 1]; /* a UUID is lowercased */
        AllocationStatus status;         /* LIST's ?status=: a status, or -1 for every one */
        bool status_lost;                /* ?status=lost */
        usec_t age;                      /* LIST's ?age= (a Go duration): 0 for none */
        unsigned limit, offset;          /* LIST's ?limit= (1..API_LIST_LIMIT_MAX), ?offset= */
        char ids[API_LIST_IDS_BUF];      /* LIST's ?ids=: UUIDs, lowercased, comma-separated;
                                          * "" for every allocation */
        const char *allow;               /* the methods of the path (for 405's Allow) */
} ApiRoute;

/* path without the query; query: the values of its parameters (NULL: none). 0, or -ENOENT
 * (no such path), -EOPNOTSUPP (not this method: ret->allow is set), -EINVAL (an ID in the
 * path, or a parameter of the list, that is malformed: *ret_error says which). On failure
 * other than -EOPNOTSUPP, *ret is untouched. */
int api_route(const char *method, const char *path, const ApiQuery *query, ApiRoute *ret,
              const char **ret_error);

/* A Go time.Duration of h, m, s, ms, us (or µs) and ns parts ("24h", "1h30m", "90s", "0"),
 * none negative, to µs: 0, or -EINVAL. */
int api_parse_duration(const char *s, usec_t *ret);


/* "8-4-4-4-12" hexadecimal digits. */
bool api_is_uuid(const char *s);

typedef struct ApiAllocateBody {
        char allocation_id[API_ID_MAX + 1]; /* a UUID, lowercased */
        char *build_configuration_id;       /* a string or a number in the body; "" when none */
        char *region_id;                    /* "" when none */
        char *payload;                      /* "" when none */
        bool restart;                       /* false when none */
} ApiAllocateBody;

/* The POST body: 0, or -EBADMSG with *ret_error saying what is wrong (for the 400's message),
 * or -ENOMEM. Unknown fields are ignored. */
int api_parse_allocate(const char *body, size_t size, ApiAllocateBody *ret,
                       const char **ret_error);
void api_allocate_body_done(ApiAllocateBody *b);

/* The path of an allocation: "/v1/allocations/projects/P/environments/E/fleets/F/allocations/A". */
char *api_allocation_href(const char *project, const char *environment, const char *fleet,
                          const char *allocation_id);

/* A POST's requestId from 16 random bytes: a version 4 UUID. */
void api_request_id_format(const uint8_t b[static 16], char ret[static 37]);

/* A build configuration ID as Unity's clients read it, a JSON integer (C# long): the ID when it
 * is decimal digits without a leading zero, at most 15 (exact in a double), else 0. */
json_t *api_build_configuration_json(const char *id);

/* What GET shows of a record, Unity's MultiplayAllocationsAllocation (SPEC §13): status_word
 * is claimed, fulfilled or lost; readiness whether its slot is ready for players for it, since
 * ready_at (0: unknown). Times are RFC 3339, left out while 0. */
json_t *api_allocation_json(const AllocationRecord *rec, const char *status_word,
                            bool readiness, usec_t ready_at);
