/* SPDX-License-Identifier: MIT */
#pragma once

/* The allocator's operations below its HTTP door (SPEC §13): an allocation asked, placed and
 * claimed (allocator-claim.c); an allocation's record read, the records of a fleet listed, an
 * allocation deleted (allocator-record.c); a fleet's capacity from the counts the view keeps
 * (allocator-capacity.c, capacity-index.c). Each ends in an outcome of its own. What an
 * outcome becomes on the wire, its status and body, is the door's alone (allocator-answer.h);
 * nothing here knows of HTTP or of the API's JSON. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "docs.h"
#include "scaler-plan.h"

typedef struct Allocator Allocator;
typedef struct ClaimOp ClaimOp;

/* How an allocation ended. Every outcome but the first two refuses it. */
typedef enum AllocOutcome {
        ALLOC_CLAIMED,         /* a new claim is in etcd */
        ALLOC_EXISTING,        /* the allocationId had its record already (idempotent) */
        ALLOC_INVALID,         /* the request is malformed: detail says how (NULL: no memory) */
        ALLOC_VIEW_NOT_READY,  /* the fleet view is not read from etcd yet */
        ALLOC_UNKNOWN_FLEET,   /* the fleet view has no slot of the fleet */
        ALLOC_UNKNOWN_BUILD,   /* no slot of the fleet in the view runs the build configuration
                                * asked (alloc_fleet_runs_build) */
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
        const char *request_id; /* the POST's own UUID, kept in a new record */
        bool restart; /* the server restarts into the build configuration before it is
                       * allocated, even when it runs it (Unity's restart) */
} AllocRequest;

typedef struct AllocAnswer {
        AllocOutcome outcome;
        const AllocRequest *request; /* as asked */
        const char *detail;          /* per outcome, above; NULL for none */
        unsigned attempts;           /* ALLOC_CONTENDED: the slots tried */
} AllocAnswer;

/* The answer's strings live until done returns. */
typedef void (*AllocDone)(const AllocAnswer *answer, void *userdata);

/* Whether a slot of the fleet in the view may run build configuration id: id "" (the fleet's
 * default), or a slot whose document lists it or lists none (slot_doc_runs_build). */
bool alloc_fleet_runs_build(Allocator *a, const char *fleet, const char *id);

/* An allocation placed and claimed: the request's strings are copied. done is called once,
 * unless alloc_claim_cancel() comes first; perhaps before this returns (the view is not read,
 * the ID is another fleet's, no slot and etcd's read fails at once, …), and then this returns
 * NULL. Else, the op at work. */
ClaimOp *alloc_claim(Allocator *a, const AllocRequest *request, AllocDone done, void *userdata);
/* The op given up (its client went away, or its deadline passed): done is not called. */
void alloc_claim_cancel(ClaimOp *op);

/* ---- an allocation's record: read, listed, deleted (allocator-record.c) ---- */

typedef struct RecordOp RecordOp;

typedef enum RecordOutcome {
        RECORD_FOUND,       /* GET: the allocation's record; the list: the records (perhaps none) */
        RECORD_DELETED,     /* DELETE: the record is gone (and its index, and its claim) */
        RECORD_NOT_FOUND,   /* no record of the allocationId in the fleet, or one of another
                             * project or environment */
        RECORD_CHANGED,     /* DELETE: the record changed under each of attempts deletions */
        RECORD_KEPT,        /* a fence's deletion (keep_answered): the record is marked
                             * answered (a POST of it was answered 200 with it): not deleted */
        RECORD_ETCD_FAILED, /* etcd failed or did not answer: detail, its message or NULL */
        RECORD_NO_MEMORY,
        _RECORD_OUTCOME_MAX,
} RecordOutcome;

/* One allocation (GET, DELETE), by the route's IDs. */
typedef struct RecordRequest {
        const char *project, *environment, *fleet;
        const char *allocation_id; /* NULL for the list */
        bool keep_answered; /* DELETE by a fence's resolution (allocator-fence.c): a record
                             * read marked answered is kept (RECORD_KEPT); one read unmarked
                             * is deleted only as read (its mod_revision) */
} RecordRequest;

/* Which records the list holds: the door fills it from the route and the query string. */
typedef struct ListRequest {
        const char *project, *environment, *fleet;
        AllocationStatus status; /* those of this status only; -1: of every status */
        bool status_lost;        /* those lost only (RecordShown.lost) */
        usec_t age;              /* those requested at least this long ago; 0: every one */
        const char *ids;         /* those of these allocationIds (comma-separated); NULL or "":
                                  * every one */
        unsigned limit, offset;  /* the page: at most limit, after the first offset that match
                                  * (in the order of their allocationIds) */
} ListRequest;

/* Whether id is one of ids (comma-separated, as ListRequest.ids). */
static inline bool list_ids_contain(const char *ids, const char *id) {
        size_t n = strlen(id);

        for (const char *p = ids; p && *p;) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t) (comma - p) : strlen(p);

                if (len == n && strncmp(p, id, n) == 0)
                        return true;
                p = comma ? comma + 1 : NULL;
        }
        return false;
}

/* A record as GET shows it. */
typedef struct RecordShown {
        AllocationRecord record; /* machine_number: the view's machine's, for a record without */
        bool lost;               /* claimed or fulfilled on a machine gone from the fleet view */
        bool readiness;          /* its slot shows this allocation, ready for players */
        usec_t ready_at;         /* readiness: since when, as the slot's document says (0:
                                  * unknown) */
} RecordShown;

/* claimed, fulfilled, or lost. */
static inline const char *record_shown_status(const RecordShown *s) {
        return s->lost ? "lost" : allocation_status_to_string(s->record.status);
}

typedef struct RecordAnswer {
        RecordOutcome outcome;
        const RecordRequest *request; /* as asked (the list's: its IDs, allocation_id NULL) */
        const char *detail;           /* RECORD_ETCD_FAILED: etcd's message; else NULL */
        unsigned attempts;            /* RECORD_CHANGED: the deletions tried */
        const RecordShown *shown;     /* RECORD_FOUND: GET's one, the list's n_shown */
        size_t n_shown;
        unsigned limit, offset;       /* the list's page, as asked */
} RecordAnswer;

/* The answer's strings live until done returns. */
typedef void (*RecordDone)(const RecordAnswer *answer, void *userdata);

/* Each reads etcd (linearizable) or writes it; the request's strings are copied. done is
 * called once, unless alloc_record_cancel() comes first; perhaps before this returns (no
 * memory, etcd refused the request at once), and then this returns NULL. Else, the op at
 * work. A GET that finds a claimed record whose claim the view lacks has it placed again
 * (allocator-orphan.h). */
RecordOp *alloc_get(Allocator *a, const RecordRequest *request, RecordDone done,
                    void *userdata);
RecordOp *alloc_list(Allocator *a, const ListRequest *request, RecordDone done,
                     void *userdata);
RecordOp *alloc_delete(Allocator *a, const RecordRequest *request, RecordDone done,
                       void *userdata);
/* The op given up (its client went away, or its deadline passed): done is not called. */
void alloc_record_cancel(RecordOp *op);

/* ---- a fleet's capacity, from the view (allocator-capacity.c) ---- */

typedef enum CapacityOutcome {
        CAPACITY_TALLIED,
        CAPACITY_VIEW_NOT_READY, /* the fleet view is not read from etcd yet */
        CAPACITY_UNKNOWN_FLEET,  /* the fleet view has no slot of the fleet */
        CAPACITY_NO_MEMORY,
        _CAPACITY_OUTCOME_MAX,
} CapacityOutcome;

typedef struct CapacityCount {
        const char *name;
        uint64_t n;
} CapacityCount;

typedef struct CapacityTally {
        uint64_t slots, machines, claimed;
        /* by the slots' state and process state: those of SPEC §13's capacity first, each
         * even at 0, then any other a slot shows (capacity-index.h) */
        CapacityCount *states, *process_states;
        size_t n_states, n_process_states;
} CapacityTally;

typedef struct CapacityRegion {
        const char *region_id; /* "" for the slots without */
        CapacityTally tally;
        /* the scaler's target of the region in this replica's [scaler] targets (NULL: none),
         * and its servers as the scaler counts them (scaler_slot_kind_of) */
        const ScalerTarget *target;
        uint64_t busy, free;
} CapacityRegion;

typedef struct FleetCapacity {
        CapacityOutcome outcome;
        const char *fleet;
        CapacityTally total;
        CapacityRegion *regions; /* in the order the capacity index saw them first */
        size_t n_regions;
        const char **deprovisionable; /* machineIDs, sorted */
        size_t n_deprovisionable;
        usec_t hold_until; /* the latest of the slots' holdUntil (0: none) */
} FleetCapacity;

/* Whether the fleet view (read) has a slot of the fleet: a fleet it lacks is unknown. */
bool alloc_fleet_known(Allocator *a, const char *fleet);

/* The fleet's capacity, at once, from the counts the view keeps (capacity-index.h): no walk
 * of its slots. Its strings are the index's: they live until the loop runs again. */
void alloc_capacity(Allocator *a, const char *fleet, FleetCapacity *ret);
void fleet_capacity_done(FleetCapacity *c);
