/* SPDX-License-Identifier: MIT */
/* Watching a running game server (SPEC §6, §9): resource checks and query probes every
 * checks.interval, the heartbeat, the start timeout; strikes, and the signal after too many.
 * The verdicts are the pure functions of probes/checks.c; this file applies them. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/random.h>

#include "cgroup.h"
#include "log.h"
#include "manager.h"

/* Spread the checks of slots started together over a tenth of the interval, so that a
 * thousand slots do not all wake at the same instant. */
static usec_t jitter(usec_t interval) {
        static uint64_t state;
        uint64_t x;

        if (state == 0 && getrandom(&state, sizeof(state), GRND_NONBLOCK) != sizeof(state))
                state = now_usec(CLOCK_MONOTONIC) | 1;
        x = state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state = x;
        return interval >= 10 ? x % (interval / 10) : 0;
}

unsigned slot_strike_count(const Slot *s, CheckKind k) {
        return time_window_count(&s->strikes[k], now_usec(CLOCK_MONOTONIC),
                                 s->fleet->config->strike_window);
}

static int slot_on_misbehaviour_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;

        s->misbehaviour_timer = sd_event_source_disable_unref(s->misbehaviour_timer);
        log_slot_warning(s, "Still running fleet.stop_timeout after checks.signal, killing the "
                            "slot's cgroup");
        slot_kill(s);
        return 0;
}

_printf_(3, 4) static void slot_strike(Slot *s, CheckKind k, const char *format, ...) {
        const FleetConfig *f = s->fleet->config;
        StrikeVerdict v = strike_record(&s->strikes[k], now_usec(CLOCK_MONOTONIC),
                                        f->strike_window, f->strikes);
        char why[256];
        va_list ap;
        int r;

        /* The signal is on its way: the server is being ended, not judged any more. */
        if (s->pending_cause != FAILURE_NONE)
                return;
        va_start(ap, format);
        (void) vsnprintf(why, sizeof(why), format, ap);
        va_end(ap);
        log_slot_warning(s, "Check %s failed: %s (strike %u of %u within checks.window)",
                         check_kind_to_string(k), why, v.strikes, f->strikes);
        manager_bus_misbehaved(s->manager, s, k, v.strikes);
        manager_bus_slot_properties(s->manager, s, "Strikes", NULL);
        if (!v.act || s->pending_cause != FAILURE_NONE || s->main_pid == 0)
                return;

        log_slot_warning(s, "%u strikes of check %s: sending %s to process %d", v.strikes,
                         check_kind_to_string(k), sigabbrev_np(f->check_signal) ?: "a signal",
                         (int) slot_server_pid(s));
        s->pending_cause = FAILURE_MISBEHAVIOUR;
        r = slot_signal(s, f->check_signal);
        if (r < 0)
                log_slot_warning_errno(s, r, "Failed to signal the server, killing its cgroup: %m");
        /* A server that handles the signal and lives on is ended all the same. */
        if (r < 0 || sd_event_add_time_relative(s->manager->event, &s->misbehaviour_timer,
                                                CLOCK_MONOTONIC, f->stop_timeout, USEC_PER_MSEC,
                                                slot_on_misbehaviour_timeout, s) < 0)
                slot_kill(s);
}

static void slot_on_probe_done(Probe *p, int result, const ProbeResult *info, void *userdata) {
        Slot *s = userdata;

        s->probe = probe_free(s->probe);
        if (result < 0) {
                slot_strike(s, CHECK_QUERY, "%s query on port %u: %s",
                            query_type_to_string(s->fleet->config->query), s->query_port,
                            result == -ETIMEDOUT ? "no valid answer in checks.query_timeout"
                                                 : strerror(-result));
                return;
        }
        /* A probe a second per slot: only a changed answer is announced. */
        if (memcmp(&s->query, info, sizeof(*info)) == 0)
                return;
        s->query = *info;
        manager_bus_slot_properties(s->manager, s, "QueryPlayers", "QueryMaxPlayers", "QueryMap",
                                    "QueryName", NULL);
}

static void slot_start_probe(Slot *s) {
        const FleetConfig *f = s->fleet->config;
        struct sockaddr_in addr = {
                .sin_family = AF_INET,
                .sin_port = htons(s->query_port),
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        int r;

        if (s->probe)
                return; /* the previous one is still within its timeout */
        r = probe_start(s->manager->event, f->query, &addr, f->query_timeout, slot_on_probe_done, s,
                        &s->probe);
        if (r < 0)
                slot_strike(s, CHECK_QUERY, "cannot send a query: %s", strerror(-r));
}

static int slot_on_check(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;
        const FleetConfig *f = s->fleet->config;
        usec_t now = now_usec(CLOCK_MONOTONIC), usage;
        uint64_t memory;

        (void) sd_event_source_set_time_relative(source, f->check_interval);
        (void) sd_event_source_set_enabled(source, SD_EVENT_ON);

        if (cg_cpu_usage_at(s->cgroup_fd, &usage) >= 0) {
                s->cpu_usage = cpu_cores_used(s->check_cpu_usage, usage, now - s->check_cpu_at);
                s->check_cpu_usage = usage;
                s->check_cpu_at = now;
                if (!check_cpu_ok(s->cpu_usage, f->usage_cpu, f->cpu_tolerance))
                        slot_strike(s, CHECK_CPU, "%.3f cores used, budget %.3f + %.0f%%",
                                    s->cpu_usage, f->usage_cpu, f->cpu_tolerance * 100.0);
        }
        memory = slot_memory_current(s);
        if (!check_memory_ok(memory, f->usage_memory, f->memory_tolerance))
                slot_strike(s, CHECK_MEMORY, "%" PRIu64 " bytes in use, budget %" PRIu64 " + %" PRIu64,
                            memory, f->usage_memory, f->memory_tolerance);
        if (f->query != QUERY_NONE && s->main_pid > 0)
                slot_start_probe(s);
        return 0;
}

static int slot_on_heartbeat(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;
        usec_t now = now_usec(CLOCK_MONOTONIC), period = s->fleet->config->heartbeat;

        (void) sd_event_source_set_time_relative(source, period);
        (void) sd_event_source_set_enabled(source, SD_EVENT_ON);
        if (s->last_watchdog < s->heartbeat_since)
                slot_strike(s, CHECK_HEARTBEAT, "no WATCHDOG=1 within checks.heartbeat (%" PRIu64 " ms)",
                            period / USEC_PER_MSEC);
        s->heartbeat_since = now;
        return 0;
}

static int slot_on_start_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;

        s->start_timer = sd_event_source_disable_unref(s->start_timer);
        if (s->ready || s->main_pid == 0)
                return 0;
        log_slot_warning(s, "No READY=1 within checks.start_timeout, killing the server");
        s->pending_cause = FAILURE_START_TIMEOUT;
        slot_kill(s);
        return 0;
}

void slot_checks_start(Slot *s) {
        const FleetConfig *f = s->fleet->config;
        sd_event *e = s->manager->event;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        int r = 0;

        slot_checks_stop(s);
        for (int k = 0; k < _CHECK_KIND_MAX; k++)
                time_window_reset(&s->strikes[k]);
        s->pending_cause = FAILURE_NONE;
        s->query = (ProbeResult){};
        s->cpu_usage = 0;
        s->check_cpu_at = now;
        if (cg_cpu_usage_at(s->cgroup_fd, &s->check_cpu_usage) < 0)
                s->check_cpu_usage = 0;
        s->oom_kills_at_start = 0;
        if (s->manager->enforced & CGROUP_MASK(CGROUP_MEMORY))
                (void) cg_oom_kills_at(s->cgroup_fd, &s->oom_kills_at_start);

        /* Start-up is start_timeout's business; the checks judge a running server, from
         * READY=1 on (slot_checks_ready()), as systemd's watchdog does. */
        if (f->start_timeout > 0)
                r = sd_event_add_time_relative(e, &s->start_timer, CLOCK_MONOTONIC, f->start_timeout,
                                               USEC_PER_MSEC, slot_on_start_timeout, s);
        if (r < 0)
                log_slot_error_errno(s, r, "Failed to arm the checks, the server runs unwatched: %m");
}

void slot_checks_stop(Slot *s) {
        s->check_timer = sd_event_source_disable_unref(s->check_timer);
        s->heartbeat_timer = sd_event_source_disable_unref(s->heartbeat_timer);
        s->start_timer = sd_event_source_disable_unref(s->start_timer);
        s->misbehaviour_timer = sd_event_source_disable_unref(s->misbehaviour_timer);
        s->probe = probe_free(s->probe);
}

void slot_checks_ready(Slot *s) {
        const FleetConfig *f = s->fleet->config;
        sd_event *e = s->manager->event;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        int r = 0;

        s->start_timer = sd_event_source_disable_unref(s->start_timer);
        s->check_timer = sd_event_source_disable_unref(s->check_timer);
        s->heartbeat_timer = sd_event_source_disable_unref(s->heartbeat_timer);
        s->check_cpu_at = now;
        if (cg_cpu_usage_at(s->cgroup_fd, &s->check_cpu_usage) < 0)
                s->check_cpu_usage = 0;
        /* With checks off there is no timer at all: an idle slot costs no wake-ups. */
        if (f->check_interval > 0)
                r = sd_event_add_time_relative(e, &s->check_timer, CLOCK_MONOTONIC,
                                               f->check_interval + jitter(f->check_interval),
                                               USEC_PER_MSEC, slot_on_check, s);
        if (r >= 0 && f->heartbeat > 0) {
                s->heartbeat_since = now;
                s->last_watchdog = 0;
                r = sd_event_add_time_relative(e, &s->heartbeat_timer, CLOCK_MONOTONIC, f->heartbeat,
                                               USEC_PER_MSEC, slot_on_heartbeat, s);
        }
        if (r < 0)
                log_slot_error_errno(s, r, "Failed to arm the checks, the server runs unwatched: %m");
}

void slot_checks_watchdog(Slot *s) {
        s->last_watchdog = now_usec(CLOCK_MONOTONIC);
}

FailureReason slot_checks_exit_cause(Slot *s) {
        uint64_t kills;

        if (s->pending_cause != FAILURE_NONE)
                return s->pending_cause;
        /* memory.oom.group = 1: the OOM killer takes the whole group with SIGKILL. */
        if (s->exit_signal == SIGKILL && (s->manager->enforced & CGROUP_MASK(CGROUP_MEMORY)) &&
            cg_oom_kills_at(s->cgroup_fd, &kills) >= 0 && kills > s->oom_kills_at_start)
                return FAILURE_OOM;
        return FAILURE_NONE;
}
