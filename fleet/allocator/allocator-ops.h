/* SPDX-License-Identifier: MIT */
#pragma once

/* The allocator's operations below its HTTP door (SPEC §13 step 1): an allocation asked,
 * placed and claimed (allocator-claim.c), ending in an outcome of its own. What an outcome
 * becomes on the wire, its status and body, is the door's alone (allocator-answer.h); nothing
 * here knows of HTTP or of the API's JSON. */

#include <stdbool.h>

typedef struct Allocator Allocator;
typedef struct ClaimOp ClaimOp;

/* How an allocation ended. Every outcome but the first two refuses it. */
typedef enum AllocOutcome {
        ALLOC_CLAIMED,         /* a new claim is in etcd */
        ALLOC_EXISTING,        /* the allocationId had its record already (idempotent) */
        ALLOC_INVALID,         /* the request is malformed: detail says how (NULL: no memory) */
        ALLOC_VIEW_NOT_READY,  /* the fleet view is not read from etcd yet */
        ALLOC_FLEET_ELSEWHERE, /* the allocationId is of another fleet: detail names it */
        ALLOC_INDEX_ORPHANED,  /* its allocationId's index has no record beside it: detail, the
                                * index's key (written by hand: it blocks the ID until deleted) */
        ALLOC_NO_CAPACITY,     /* no slot in the fleet (in request->region_id, if not "") */
        ALLOC_CONTENDED,       /* each of attempts slots tried was claimed by another first */
        ALLOC_ETCD_FAILED,     /* etcd failed or did not answer: detail, its message or NULL */
        ALLOC_NO_MEMORY,
        _ALLOC_OUTCOME_MAX,
} AllocOutcome;

/* An allocation asked (the route's IDs and the body's fields; "" for a field absent). */
typedef struct AllocRequest {
        const char *project, *environment, *fleet;
        const char *allocation_id;
        const char *build_configuration_id, *region_id, *payload;
} AllocRequest;

typedef struct AllocAnswer {
        AllocOutcome outcome;
        const AllocRequest *request; /* as asked */
        const char *detail;          /* per outcome, above; NULL for none */
        unsigned attempts;           /* ALLOC_CONTENDED: the slots tried */
} AllocAnswer;

/* The answer's strings live until done returns. */
typedef void (*AllocDone)(const AllocAnswer *answer, void *userdata);

/* An allocation placed and claimed: the request's strings are copied. done is called once,
 * unless alloc_claim_cancel() comes first; perhaps before this returns (the view is not read,
 * the ID is another fleet's, no slot and etcd's read fails at once, …), and then this returns
 * NULL. Else, the op at work. */
ClaimOp *alloc_claim(Allocator *a, const AllocRequest *request, AllocDone done, void *userdata);
/* The op given up (its client went away, or its deadline passed): done is not called. */
void alloc_claim_cancel(ClaimOp *op);
