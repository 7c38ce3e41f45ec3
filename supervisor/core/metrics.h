/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "allocation.h"
#include "checks.h"
#include "hashmap.h"
#include "ops.h"
#include "prom-text.h"
#include "slot-fsm.h"
#include "slot-metrics.h"
#include "time-util.h"

/* slotd's metrics (SPEC §14) as plain counters and gauges, kept as events happen, each in
 * O(1): no scrape and no event walks the slots. Pure: no I/O, no logging. The manager feeds
 * it (manager-metrics.c) and asks for the text when the local proxy's metrics listener is
 * scraped. */

/* The doors a request of an allocation comes through, and what it asks for. */
typedef enum MetricsDoor {
        METRICS_DOOR_DBUS,
        METRICS_DOOR_LOCALPROXY,
        _METRICS_DOOR_MAX,
} MetricsDoor;

typedef enum MetricsRequest {
        METRICS_REQUEST_ALLOCATE,    /* Allocate, AllocateWithOptions (Manager and Slot) */
        METRICS_REQUEST_RESERVE,     /* Manager.Reserve, the local proxy's reservations */
        _METRICS_REQUEST_MAX,
} MetricsRequest;

/* Signals 1 to 64 (SIGRTMAX on Linux); 0 for none. */
#define METRICS_SIGNAL_MAX 65

/* What one fleet's slots and events add up to. Kept for as long as slotd runs, also after
 * a Reload removed the fleet, so that its counters never go back. */
typedef struct FleetMetrics {
        char *name;
        uint64_t slots[_SLOT_STATE_MAX][_PROCESS_STATE_MAX];      /* gauges */
        uint64_t requests[_METRICS_REQUEST_MAX][_OPS_ERROR_MAX];  /* by result */
        uint64_t deallocations;
        uint64_t restarts;
        /* by cause and by the signal that ended the server ([0]: it exited with a code) */
        uint64_t crashes[_FAILURE_REASON_MAX][METRICS_SIGNAL_MAX];
        uint64_t core_dumps;         /* crashes that left a core (CoreDumped signals) */
        uint64_t log_bytes_lost;     /* output the keepers dropped (the slots' LogBytesLost) */
        uint64_t strikes[_CHECK_KIND_MAX];
        PromHistogram sweep;         /* seconds from a check sweep's start to its verdict */
} FleetMetrics;

typedef struct Metrics {
        Hashmap fleets;              /* name → FleetMetrics */
        FleetMetrics **list;         /* the same, in the order they came */
        size_t n_list;
        FleetMetrics unknown;        /* requests naming no fleet slotd has: fleet="" */
        PromHistogram latency[_METRICS_DOOR_MAX][_METRICS_REQUEST_MAX];
} Metrics;

/* What the metrics read of a slot at each change. */
typedef struct SlotMetricsView {
        SlotState state;
        ProcessState process_state;
        bool allocated;
        unsigned restarts;           /* the slot's Restarts: only grows while slotd runs */
        uint64_t log_bytes_lost;     /* the slot's LogBytesLost: only grows, too */
} SlotMetricsView;

void metrics_init(Metrics *mx);
void metrics_done(Metrics *mx);

/* The fleet's metrics, made at first sight; NULL on OOM. find never makes one. */
FleetMetrics *metrics_fleet(Metrics *mx, const char *name);
FleetMetrics *metrics_fleet_find(const Metrics *mx, const char *name);

/* A slot of fleet f changed (or is seen for the first time, when mark->fleet is NULL: then
 * only counted, its earlier restarts and allocation are not events). */
void metrics_slot_update(FleetMetrics *f, SlotMetricsMark *mark, const SlotMetricsView *v);
/* The slot is gone: out of the gauges. */
void metrics_slot_remove(SlotMetricsMark *mark);

/* A request of an allocation or reservation, by result (OPS_OK or the error); f NULL when it
 * named no fleet slotd has. */
void metrics_request(Metrics *mx, FleetMetrics *f, MetricsRequest request, OpsErrorCode result);
/* From the request's arrival to its durable reply. */
void metrics_latency(Metrics *mx, MetricsDoor door, MetricsRequest request, usec_t duration);
/* 'signal': the signal that ended the server, 0 when it exited with a code. */
void metrics_crash(FleetMetrics *f, FailureReason cause, int signal, bool core);
void metrics_strike(FleetMetrics *f, CheckKind check);
void metrics_sweep(FleetMetrics *f, usec_t duration);

/* The label values as SPEC §14 names them. */
const char *metrics_result_to_string(OpsErrorCode c);   /* "ok", "NoCapacity", … */
const char *metrics_cause_to_string(FailureReason r);   /* "exit", "oom", …; NULL: no cause */
const char *metrics_door_to_string(MetricsDoor d);
const char *metrics_request_to_string(MetricsRequest r);

/* Every family above (slotd_slots, slotd_allocations_total, …), O(fleets). */
void metrics_format(const Metrics *mx, PromText *t);
