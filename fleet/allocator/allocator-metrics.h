/* SPDX-License-Identifier: MIT */
#pragma once

/* slotd-allocator's Prometheus metrics (GET /metrics, text exposition format 0.0.4): counters
 * kept by the allocator, formatted here. Pure. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "time-util.h"

/* How a POST ended. */
typedef enum AllocResult {
        ALLOC_RESULT_CLAIMED,     /* a new claim is in etcd */
        ALLOC_RESULT_EXISTING,    /* the allocationId had its record already (idempotent) */
        ALLOC_RESULT_NO_CAPACITY, /* 503: no slot */
        ALLOC_RESULT_CONFLICT,    /* 409: the allocationId is another fleet's */
        ALLOC_RESULT_INVALID,     /* 400 */
        ALLOC_RESULT_UNAVAILABLE, /* 503: etcd did not answer, or the fleet view is not read */
        ALLOC_RESULT_CONTENDED,   /* 503: every attempt lost its slot to another claim */
        _ALLOC_RESULT_MAX,
} AllocResult;

const char *alloc_result_to_string(AllocResult r);

/* Why a claim was placed again (SPEC §13 steps 2 and 3). */
typedef enum ReplaceReason {
        REPLACE_DEADLINE, /* its host did not confirm in time */
        REPLACE_REFUSED,  /* its host's slotd refused it */
        REPLACE_ORPHANED, /* its record was found claimed without it (allocator-orphan.h) */
        _REPLACE_REASON_MAX,
} ReplaceReason;

const char *replace_reason_to_string(ReplaceReason r);

#define LATENCY_BUCKETS 12

/* Events counted per second over the last RATE_SECONDS (the status page's allocation rate):
 * a ring of per-second counts, O(1) per event (amortized: a second passed zeroes its slot). */
#define RATE_SECONDS 60
typedef struct RateRing {
        uint64_t counts[RATE_SECONDS];
        uint64_t second; /* the latest second counted (CLOCK_MONOTONIC seconds) */
} RateRing;

void rate_ring_add(RateRing *r, uint64_t second);
/* The events of the RATE_SECONDS seconds up to and including second. */
uint64_t rate_ring_sum(const RateRing *r, uint64_t second);

typedef struct AllocatorMetrics {
        uint64_t allocations[_ALLOC_RESULT_MAX];
        uint64_t latency_buckets[LATENCY_BUCKETS]; /* cumulative at format time only */
        uint64_t latency_count;
        usec_t latency_sum;
        uint64_t deallocations;
        uint64_t etcd_errors;
        uint64_t etcd_in_doubt; /* writes sent again after their answer was lost */
        uint64_t fences;        /* claims in doubt answered 503, their slot fenced */
        uint64_t fence_retries; /* fence transactions etcd did not answer, sent again */
        uint64_t fence_undone;  /* claims in doubt found applied, deleted again */
        uint64_t fence_kept;    /* claims in doubt found applied, kept: a POST of the same
                                 * allocationId was answered 200 with the record first */
        uint64_t txn_conflicts;  /* claim transactions whose compares failed */
        uint64_t claims_replaced[_REPLACE_REASON_MAX];
        uint64_t claims_dropped; /* refused (or orphaned) claims that could be placed nowhere */
        uint64_t watch_resyncs;
        RateRing claimed_rate; /* ALLOC_RESULT_CLAIMED, by second */
} AllocatorMetrics;

/* What is read at the moment of the scrape. */
typedef struct AllocatorGauges {
        size_t slots, machines, claims;
        size_t fenced_slots; /* left out of placement for a claim in doubt (allocator-fence.h) */
        size_t requests_in_flight;
        bool fleet_view_ready;
        /* etcd.h's group commit: requests sent, and the transactions they carried */
        uint64_t etcd_batches, etcd_batched_txns;
} AllocatorGauges;

void allocator_metrics_observe_latency(AllocatorMetrics *m, usec_t latency);
int allocator_metrics_format(const AllocatorMetrics *m, const AllocatorGauges *g, char **ret);
