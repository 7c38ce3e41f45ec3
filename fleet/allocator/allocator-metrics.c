/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include "allocator-metrics.h"
#include "macro.h"

/* Upper bounds of the POST latency buckets, in microseconds: 1 ms to 5 s. */
static const usec_t latency_bounds[LATENCY_BUCKETS] = {
        1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000,
};

static const char *const result_names[_ALLOC_RESULT_MAX] = {
        [ALLOC_RESULT_CLAIMED] = "claimed",
        [ALLOC_RESULT_EXISTING] = "existing",
        [ALLOC_RESULT_NO_CAPACITY] = "no_capacity",
        [ALLOC_RESULT_CONFLICT] = "conflict",
        [ALLOC_RESULT_INVALID] = "invalid",
        [ALLOC_RESULT_UNAVAILABLE] = "unavailable",
        [ALLOC_RESULT_CONTENDED] = "contended",
};

static const char *const reason_names[_REPLACE_REASON_MAX] = {
        [REPLACE_DEADLINE] = "deadline",
        [REPLACE_REFUSED] = "refused",
        [REPLACE_ORPHANED] = "orphaned",
};

const char *alloc_result_to_string(AllocResult r) {
        return r >= 0 && r < _ALLOC_RESULT_MAX ? result_names[r] : NULL;
}

const char *replace_reason_to_string(ReplaceReason r) {
        return r >= 0 && r < _REPLACE_REASON_MAX ? reason_names[r] : NULL;
}

void allocator_metrics_observe_latency(AllocatorMetrics *m, usec_t latency) {
        for (size_t i = 0; i < LATENCY_BUCKETS; i++)
                if (latency <= latency_bounds[i]) {
                        m->latency_buckets[i]++;
                        break;
                }
        m->latency_count++;
        m->latency_sum += latency;
}

void rate_ring_add(RateRing *r, uint64_t second) {
        if (second > r->second) {
                uint64_t gap = MIN(second - r->second, (uint64_t) RATE_SECONDS);

                for (uint64_t i = 1; i <= gap; i++)
                        r->counts[(r->second + i) % RATE_SECONDS] = 0;
                r->second = second;
        }
        /* a second before the latest (not on a monotonic clock) counts in the latest */
        r->counts[r->second % RATE_SECONDS]++;
}

uint64_t rate_ring_sum(const RateRing *r, uint64_t second) {
        uint64_t sum = 0, from, held;

        if (second >= r->second + RATE_SECONDS)
                return 0;
        /* the ring holds the seconds from held to r->second; wanted: from `from` */
        from = second + 1 > RATE_SECONDS ? second + 1 - RATE_SECONDS : 0;
        held = r->second + 1 > RATE_SECONDS ? r->second + 1 - RATE_SECONDS : 0;
        for (uint64_t s = MAX(from, held); s <= r->second; s++)
                sum += r->counts[s % RATE_SECONDS];
        return sum;
}

static void put_counter(FILE *f, const char *name, const char *help, uint64_t v) {
        fprintf(f, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", name, help, name, name, v);
}

static void put_gauge(FILE *f, const char *name, const char *help, uint64_t v) {
        fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n%s %" PRIu64 "\n", name, help, name, name, v);
}

static void put_latency(FILE *f, const AllocatorMetrics *m) {
        const char *name = "slotd_allocator_allocate_duration_seconds";
        uint64_t cumulative = 0;

        fprintf(f, "# HELP %s Time from a POST's body to its answer.\n# TYPE %s histogram\n",
                name, name);
        for (size_t i = 0; i < LATENCY_BUCKETS; i++) {
                cumulative += m->latency_buckets[i];
                fprintf(f, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name,
                        (double) latency_bounds[i] / USEC_PER_SEC, cumulative);
        }
        fprintf(f, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum %.6f\n%s_count %" PRIu64 "\n",
                name, m->latency_count, name, (double) m->latency_sum / USEC_PER_SEC, name,
                m->latency_count);
}

int allocator_metrics_format(const AllocatorMetrics *m, const AllocatorGauges *g, char **ret) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);

        if (!f)
                return -ENOMEM;
        fputs("# HELP slotd_allocator_allocations_total POST requests by how they ended.\n"
              "# TYPE slotd_allocator_allocations_total counter\n", f);
        for (AllocResult r = 0; r < _ALLOC_RESULT_MAX; r++)
                fprintf(f, "slotd_allocator_allocations_total{result=\"%s\"} %" PRIu64 "\n",
                        result_names[r], m->allocations[r]);
        put_latency(f, m);
        put_counter(f, "slotd_allocator_deallocations_total",
                    "Allocations deleted through the API.", m->deallocations);
        put_counter(f, "slotd_allocator_etcd_errors_total",
                    "Requests to etcd that failed (no answer, no quorum, an error).",
                    m->etcd_errors);
        put_counter(f, "slotd_allocator_etcd_in_doubt_total",
                    "Writes to etcd whose answer was lost with their member, sent again "
                    "(guarded: each applies at most once).",
                    m->etcd_in_doubt);
        put_counter(f, "slotd_allocator_fences_total",
                    "Claims whose outcome etcd left unknown, answered 503 and their slot fenced.",
                    m->fences);
        put_counter(f, "slotd_allocator_fence_retries_total",
                    "Fence transactions etcd did not answer, sent again after a back-off.",
                    m->fence_retries);
        put_counter(f, "slotd_allocator_fence_undone_total",
                    "Claims answered 503 that etcd applied all the same, deleted again.",
                    m->fence_undone);
        put_counter(f, "slotd_allocator_fence_kept_total",
                    "Claims answered 503 that etcd applied all the same, kept: a POST of the "
                    "same allocationId was answered 200 with them first.",
                    m->fence_kept);
        put_counter(f, "slotd_allocator_claim_conflicts_total",
                    "Claim transactions whose slot was taken or changed first.",
                    m->txn_conflicts);
        fputs("# HELP slotd_allocator_claims_replaced_total Claims placed again, by why.\n"
              "# TYPE slotd_allocator_claims_replaced_total counter\n", f);
        for (ReplaceReason r = 0; r < _REPLACE_REASON_MAX; r++)
                fprintf(f, "slotd_allocator_claims_replaced_total{reason=\"%s\"} %" PRIu64 "\n",
                        reason_names[r], m->claims_replaced[r]);
        put_counter(f, "slotd_allocator_claims_dropped_total",
                    "Refused claims that no other slot could take (their record deleted).",
                    m->claims_dropped);
        put_counter(f, "slotd_allocator_watch_resyncs_total",
                    "Times the fleet view was read anew after its watch broke.", m->watch_resyncs);
        put_counter(f, "slotd_allocator_etcd_batches_total",
                    "Requests to etcd that carried transactions sent together.",
                    g->etcd_batches);
        put_counter(f, "slotd_allocator_etcd_batched_txns_total",
                    "Transactions sent to etcd together, each nested in one of those requests.",
                    g->etcd_batched_txns);
        put_gauge(f, "slotd_allocator_cache_slots", "Slots in the fleet view.", g->slots);
        put_gauge(f, "slotd_allocator_cache_machines", "Machines in the fleet view.", g->machines);
        put_gauge(f, "slotd_allocator_cache_claims", "Claims not yet confirmed.", g->claims);
        put_gauge(f, "slotd_allocator_fenced_slots",
                  "Slots left out of placement for a claim in doubt: being fenced, fenced, or "
                  "another replica's fence found.", g->fenced_slots);
        put_gauge(f, "slotd_allocator_requests_in_flight", "HTTP requests being answered.",
                  g->requests_in_flight);
        put_gauge(f, "slotd_allocator_fleet_view_ready",
                  "Whether the fleet view is read from etcd and watched (1) or not (0).",
                  g->fleet_view_ready);
        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        *ret = text;
        return 0;
}
