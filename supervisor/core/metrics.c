/* SPDX-License-Identifier: MIT */
/* slotd's metrics: counters and gauges (metrics.h) and their text (SPEC §14). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "metrics.h"

/* An Allocate is a commit (an fdatasync) away from its reply: well under a millisecond on an
 * idle machine, tens of them on a busy disk. */
static const double latency_bounds[] = {
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
        0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
};
/* A sweep lasts from its first chunk to its last probe's answer or timeout (checks.query_timeout,
 * 2 s by default). */
static const double sweep_bounds[] = {
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

static const char *const result_names[_OPS_ERROR_MAX] = {
        [OPS_OK] = "ok",
        [OPS_ERROR_ACCESS_DENIED] = "AccessDenied",
        [OPS_ERROR_NO_SUCH_SLOT] = "NoSuchSlot",
        [OPS_ERROR_NO_SUCH_ALLOCATION] = "NoSuchAllocation",
        [OPS_ERROR_INVALID_STATE] = "InvalidState",
        [OPS_ERROR_INVALID_ARGUMENT] = "InvalidArgument",
        [OPS_ERROR_NO_CAPACITY] = "NoCapacity",
        [OPS_ERROR_DRAINING] = "Draining",
        [OPS_ERROR_UNAVAILABLE] = "Unavailable",
        [OPS_ERROR_FAILED] = "Failed",
        [OPS_ERROR_STATE_UNWRITABLE] = "StateUnwritable",
};

/* The causes of Crashed (its reason, "" being a server that ended by itself). The failure
 * reasons that only hold a slot down (crash-backoff, pre-recovery) are no cause. */
static const char *const cause_names[_FAILURE_REASON_MAX] = {
        [FAILURE_NONE] = "exit",
        [FAILURE_MISBEHAVIOUR] = "misbehaviour",
        [FAILURE_START_TIMEOUT] = "start-timeout",
        [FAILURE_OOM] = "oom",
        [FAILURE_EXEC] = "exec",
};

static const char *const door_names[_METRICS_DOOR_MAX] = {
        [METRICS_DOOR_DBUS] = "dbus",
        [METRICS_DOOR_LOCALPROXY] = "localproxy",
};

static const char *const request_names[_METRICS_REQUEST_MAX] = {
        [METRICS_REQUEST_ALLOCATE] = "allocate",
        [METRICS_REQUEST_RESERVE] = "reserve",
};

const char *metrics_result_to_string(OpsErrorCode c) {
        return c >= 0 && c < _OPS_ERROR_MAX ? result_names[c] : "Failed";
}

const char *metrics_cause_to_string(FailureReason r) {
        return r >= 0 && r < _FAILURE_REASON_MAX ? cause_names[r] : NULL;
}

const char *metrics_door_to_string(MetricsDoor d) {
        return d >= 0 && d < _METRICS_DOOR_MAX ? door_names[d] : "invalid";
}

const char *metrics_request_to_string(MetricsRequest r) {
        return r >= 0 && r < _METRICS_REQUEST_MAX ? request_names[r] : "invalid";
}

void metrics_init(Metrics *mx) {
        *mx = (Metrics){ .unknown.name = (char *) "" };
        for (int d = 0; d < _METRICS_DOOR_MAX; d++)
                for (int q = 0; q < _METRICS_REQUEST_MAX; q++)
                        (void) prom_histogram_init(&mx->latency[d][q], latency_bounds,
                                                   ELEMENTSOF(latency_bounds));
}

void metrics_done(Metrics *mx) {
        hashmap_done(&mx->fleets);
        for (size_t i = 0; i < mx->n_list; i++) {
                free(mx->list[i]->name);
                free(mx->list[i]);
        }
        free(mx->list);
        metrics_init(mx);
}

FleetMetrics *metrics_fleet_find(const Metrics *mx, const char *name) {
        return name ? hashmap_get(&mx->fleets, name) : NULL;
}

FleetMetrics *metrics_fleet(Metrics *mx, const char *name) {
        FleetMetrics *f = metrics_fleet_find(mx, name), **list;

        if (f || !name)
                return f;
        list = reallocarray(mx->list, mx->n_list + 1, sizeof(FleetMetrics *));
        if (!list)
                return NULL;
        mx->list = list;
        f = new0(FleetMetrics, 1);
        if (!f || !(f->name = strdup(name))) {
                free(f);
                return NULL;
        }
        (void) prom_histogram_init(&f->sweep, sweep_bounds, ELEMENTSOF(sweep_bounds));
        if (hashmap_put(&mx->fleets, f->name, f) < 0) {
                free(f->name);
                free(f);
                return NULL;
        }
        mx->list[mx->n_list++] = f;
        return f;
}

static bool view_valid(const SlotMetricsView *v) {
        return v->state >= 0 && v->state < _SLOT_STATE_MAX && v->process_state >= 0 &&
               v->process_state < _PROCESS_STATE_MAX;
}

void metrics_slot_update(FleetMetrics *f, SlotMetricsMark *mark, const SlotMetricsView *v) {
        if (!view_valid(v))
                return;
        if (mark->fleet) {
                mark->fleet->slots[mark->state][mark->process_state]--;
                if (mark->allocated && !v->allocated)
                        mark->fleet->deallocations++;
                if (v->restarts > mark->restarts)
                        mark->fleet->restarts += v->restarts - mark->restarts;
                if (v->log_bytes_lost > mark->log_bytes_lost)
                        mark->fleet->log_bytes_lost += v->log_bytes_lost - mark->log_bytes_lost;
        } else if (!f)
                return;
        else
                mark->fleet = f;
        mark->fleet->slots[v->state][v->process_state]++;
        mark->state = v->state;
        mark->process_state = v->process_state;
        mark->allocated = v->allocated;
        mark->restarts = v->restarts;
        mark->log_bytes_lost = v->log_bytes_lost;
}

void metrics_slot_remove(SlotMetricsMark *mark) {
        if (!mark->fleet)
                return;
        mark->fleet->slots[mark->state][mark->process_state]--;
        mark->fleet = NULL;
}

void metrics_request(Metrics *mx, FleetMetrics *f, MetricsRequest request, OpsErrorCode result) {
        if (request < 0 || request >= _METRICS_REQUEST_MAX || result < 0 ||
            result >= _OPS_ERROR_MAX)
                return;
        (f ?: &mx->unknown)->requests[request][result]++;
}

void metrics_latency(Metrics *mx, MetricsDoor door, MetricsRequest request, usec_t duration) {
        if (door < 0 || door >= _METRICS_DOOR_MAX || request < 0 ||
            request >= _METRICS_REQUEST_MAX)
                return;
        prom_histogram_observe(&mx->latency[door][request], (double) duration / USEC_PER_SEC);
}

void metrics_crash(FleetMetrics *f, FailureReason cause, int signal, bool core) {
        if (!f || !metrics_cause_to_string(cause))
                return;
        f->crashes[cause][signal > 0 && signal < METRICS_SIGNAL_MAX ? signal : 0]++;
        if (core)
                f->core_dumps++;
}

/* "SIGSEGV", "SIGRTMIN+3"; "" for 0 (no signal). */
static const char *signal_label(int sig, char buf[static 24]) {
        const char *abbrev;

        if (sig == 0)
                return "";
        if (sig >= SIGRTMIN && sig <= SIGRTMAX)
                snprintf(buf, 24, "SIGRTMIN+%d", sig - SIGRTMIN);
        else if ((abbrev = sigabbrev_np(sig)))
                snprintf(buf, 24, "SIG%s", abbrev);
        else
                snprintf(buf, 24, "%d", sig);
        return buf;
}

/* The signals a server commonly ends by, shown at 0 before their first count: a series that
 * first appears at 1 is invisible to increase(), and the crash-loop alert would miss the first
 * crash of each. The signal of a strike (checks.signal) is SIGSEGV unless configured. A
 * server whose exec failed ended by no signal. */
static bool signal_always_shown(FailureReason cause, int sig) {
        static const int shown[] = { 0, SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGKILL, SIGTERM };

        if (cause == FAILURE_EXEC)
                return sig == 0;
        for (size_t i = 0; i < ELEMENTSOF(shown); i++)
                if (shown[i] == sig)
                        return true;
        return false;
}

/* Per cause, the series without a signal and those of the common signals always (0
 * included), and one per other signal once it counted. */
static void format_crashes(const FleetMetrics *f, PromText *t) {
        char buf[24];

        for (int c = 0; c < _FAILURE_REASON_MAX; c++) {
                if (!cause_names[c])
                        continue;
                for (int sig = 0; sig < METRICS_SIGNAL_MAX; sig++)
                        if (signal_always_shown(c, sig) || f->crashes[c][sig] > 0)
                                prom_sample_u64(t, "slotd_crashes_total",
                                                (const char *[]){ "fleet", f->name, "cause",
                                                                  cause_names[c], "signal",
                                                                  signal_label(sig, buf), NULL },
                                                f->crashes[c][sig]);
        }
}

void metrics_strike(FleetMetrics *f, CheckKind check) {
        if (f && check >= 0 && check < _CHECK_KIND_MAX)
                f->strikes[check]++;
}

void metrics_sweep(FleetMetrics *f, usec_t duration) {
        if (f)
                prom_histogram_observe(&f->sweep, (double) duration / USEC_PER_SEC);
}

static void format_slots(const Metrics *mx, PromText *t) {
        prom_family(t, "slotd_slots", PROM_GAUGE,
                    "Slots by fleet, State and ProcessState (SPEC 5).");
        for (size_t i = 0; i < mx->n_list; i++)
                for (int s = 0; s < _SLOT_STATE_MAX; s++)
                        for (int p = 0; p < _PROCESS_STATE_MAX; p++)
                                prom_sample_u64(t, "slotd_slots",
                                                (const char *[]){ "fleet", mx->list[i]->name,
                                                                  "state", slot_state_to_string(s),
                                                                  "process_state",
                                                                  process_state_to_string(p),
                                                                  NULL },
                                                mx->list[i]->slots[s][p]);
}

static void format_results(const FleetMetrics *f, PromText *t, const char *name,
                           MetricsRequest q, bool only_nonzero) {
        for (int c = 0; c < _OPS_ERROR_MAX; c++)
                if (!only_nonzero || f->requests[q][c] > 0)
                        prom_sample_u64(t, name,
                                        (const char *[]){ "fleet", f->name, "result",
                                                          result_names[c], NULL },
                                        f->requests[q][c]);
}

static void format_requests(const Metrics *mx, PromText *t) {
        static const struct {
                const char *name, *help;
        } families[_METRICS_REQUEST_MAX] = {
                [METRICS_REQUEST_ALLOCATE] = { "slotd_allocations_total",
                                               "Allocate and AllocateWithOptions requests "
                                               "(Manager and Slot), by fleet and result: ok or "
                                               "the error's name." },
                [METRICS_REQUEST_RESERVE] = { "slotd_reservations_total",
                                              "Reservation requests (Manager.Reserve, the local "
                                              "proxy's POST reservations), by fleet and result." },
        };

        for (int q = 0; q < _METRICS_REQUEST_MAX; q++) {
                prom_family(t, families[q].name, PROM_COUNTER, families[q].help);
                for (size_t i = 0; i < mx->n_list; i++)
                        format_results(mx->list[i], t, families[q].name, q, false);
                format_results(&mx->unknown, t, families[q].name, q, true);
        }
}

static void format_per_fleet(const Metrics *mx, PromText *t, const char *name, const char *help,
                             size_t offset) {
        prom_family(t, name, PROM_COUNTER, help);
        for (size_t i = 0; i < mx->n_list; i++)
                prom_sample_u64(t, name, (const char *[]){ "fleet", mx->list[i]->name, NULL },
                                *(const uint64_t *) ((const char *) mx->list[i] + offset));
}

static void format_events(const Metrics *mx, PromText *t) {
        format_per_fleet(mx, t, "slotd_deallocations_total",
                         "Allocations that ended: Deallocate, or the server's end (SPEC 6).",
                         offsetof(FleetMetrics, deallocations));
        format_per_fleet(mx, t, "slotd_restarts_total",
                         "Restarts of game servers, by slotd or by their keeper.",
                         offsetof(FleetMetrics, restarts));
        prom_family(t, "slotd_crashes_total", PROM_COUNTER,
                    "Crashes of game servers by cause (the reason of Crashed; exit: the server "
                    "ended by itself, with a code other than 0 or by a signal) and by the "
                    "signal that ended it (\"\": none, it exited with a code).");
        for (size_t i = 0; i < mx->n_list; i++)
                format_crashes(mx->list[i], t);
        format_per_fleet(mx, t, "slotd_core_dumps_total",
                         "Crashes whose server left a core (each CoreDumped signal).",
                         offsetof(FleetMetrics, core_dumps));
        format_per_fleet(mx, t, "slotd_log_bytes_lost_total",
                         "Bytes of servers' output dropped because server.log could not take "
                         "them (ENOSPC, EIO...; the slots' LogBytesLost).",
                         offsetof(FleetMetrics, log_bytes_lost));
        prom_family(t, "slotd_strikes_total", PROM_COUNTER,
                    "Strikes by check (each Misbehaved signal).");
        for (size_t i = 0; i < mx->n_list; i++)
                for (int k = 0; k < _CHECK_KIND_MAX; k++)
                        prom_sample_u64(t, "slotd_strikes_total",
                                        (const char *[]){ "fleet", mx->list[i]->name, "check",
                                                          check_kind_to_string(k), NULL },
                                        mx->list[i]->strikes[k]);
}

static void format_histograms(const Metrics *mx, PromText *t) {
        prom_family(t, "slotd_check_sweep_duration_seconds", PROM_HISTOGRAM,
                    "A fleet's round of checks, from its sweep's start to its verdict (every "
                    "probe answered or timed out).");
        for (size_t i = 0; i < mx->n_list; i++)
                prom_histogram(t, "slotd_check_sweep_duration_seconds",
                               (const char *[]){ "fleet", mx->list[i]->name, NULL },
                               &mx->list[i]->sweep);
        prom_family(t, "slotd_allocate_duration_seconds", PROM_HISTOGRAM,
                    "Requests that were granted, from their arrival to their durable reply, by "
                    "door and request.");
        for (int d = 0; d < _METRICS_DOOR_MAX; d++)
                for (int q = 0; q < _METRICS_REQUEST_MAX; q++)
                        prom_histogram(t, "slotd_allocate_duration_seconds",
                                       (const char *[]){ "door", door_names[d], "request",
                                                         request_names[q], NULL },
                                       &mx->latency[d][q]);
}

void metrics_format(const Metrics *mx, PromText *t) {
        format_slots(mx, t);
        format_requests(mx, t);
        format_events(mx, t);
        format_histograms(mx, t);
}
