/* SPDX-License-Identifier: MIT */
/* Watching a running game server (SPEC §6, §9): resource checks and query probes every
 * checks.interval, the heartbeat, the start timeout; strikes, and the signal after too many.
 * The verdicts are the pure functions of probes/checks.c and probes/check-tally.c; this file
 * applies them. A failure is held until the verdict of its round over the fleet (a sweep, a
 * heartbeat period): a round that most of the fleet failed is the machine's doing and counts
 * no strikes, nor does the round after it (the servers come back at their own moments). A
 * check the host keeps from being made counts none either. */
#include <arpa/inet.h>
#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/random.h>

#include "cgroup.h"
#include "log.h"
#include "slot-internal.h"

unsigned slot_strike_count(const Slot *s, CheckKind k) {
        if (!s->strikes[k])
                return 0;
        return time_window_count(s->strikes[k], now_usec(CLOCK_MONOTONIC),
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
        StrikeVerdict v;
        char why[256];
        va_list ap;
        int r;

        /* Most slots never misbehave: the window of 64 timestamps exists from the first
         * strike on, not in every slot. */
        if (!s->strikes[k] && !(s->strikes[k] = calloc(1, sizeof(TimeWindow)))) {
                log_oom();
                return;
        }
        v = strike_record(s->strikes[k], now_usec(CLOCK_MONOTONIC), f->strike_window, f->strikes);

        /* The signal is on its way: the server is being ended, not judged any more. */
        if (s->pending_cause != FAILURE_NONE)
                return;
        va_start(ap, format);
        (void) vsnprintf(why, sizeof(why), format, ap);
        va_end(ap);
        log_slot_warning(s, "Check %s failed: %s (strike %u of %u within checks.window)",
                         check_kind_to_string(k), why, v.strikes, f->strikes);
        slot_hook_misbehaved(s, k, v.strikes);
        slot_details_changed(s, SLOT_CHANGE_STRIKES);
        if (!v.act || s->pending_cause != FAILURE_NONE || s->main_pid == 0)
                return;
        /* Its keeper restarted it just now: the server judged here has ended. */
        if (slot_disarm(s) == -ECHILD)
                return;

        log_slot_warning(s, "%u strikes of check %s: sending %s to process %d", v.strikes,
                         check_kind_to_string(k), sigabbrev_np(f->check_signal) ?: "a signal",
                         (int) slot_server_pid(s));
        s->pending_cause = FAILURE_MISBEHAVIOUR;
        r = slot_signal(s, f->check_signal);
        if (r < 0)
                log_slot_warning_errno(s, r, "Failed to signal the server, killing its cgroup: %m");
        /* A server that handles the signal and lives on is ended all the same. */
        if (r < 0 || sd_event_add_time_relative(s->host->event, &s->misbehaviour_timer,
                                                CLOCK_MONOTONIC, f->stop_timeout, USEC_PER_MSEC,
                                                slot_on_misbehaviour_timeout, s) < 0)
                slot_kill(s);
}

/* ---- Held strikes: a round's failures wait for its verdict ---- */

#define SWAP_TWO(a, b)                          \
        do {                                    \
                typeof(a) _t = (a);             \
                (a) = (b);                      \
                (b) = _t;                       \
        } while (0)

static void slot_unhold(Slot *s, unsigned list) {
        Fleet *f = s->fleet;
        size_t i = s->held_index[list];

        if (!s->held_strike[list])
                return;
        s->held_strike[list] = mfree(s->held_strike[list]);
        assert(i < f->n_held[list] && f->held[list][i] == s);
        f->held[list][i] = f->held[list][--f->n_held[list]];
        f->held[list][i]->held_index[list] = i;
}

static bool fleet_held_reserve(Fleet *f, unsigned list) {
        size_t n;
        Slot **a;

        if (f->n_held[list] < f->n_held_allocated[list])
                return true;
        n = MAX(f->n_held_allocated[list] * 2, (size_t) 8);
        a = reallocarray(f->held[list], n, sizeof(Slot *));
        if (!a)
                return false;
        f->held[list] = a;
        f->n_held_allocated[list] = n;
        return true;
}

/* A failure of check k in the round under way: a strike if the round's verdict says so. */
_printf_(3, 4) static void slot_hold_strike(Slot *s, CheckKind k, const char *format, ...) {
        Fleet *f = s->fleet;
        char *why = NULL;
        va_list ap;
        int r;

        va_start(ap, format);
        r = vasprintf(&why, format, ap);
        va_end(ap);
        if (r < 0 || !fleet_held_reserve(f, k)) {
                free(why);
                log_oom();
                return;
        }
        if (s->held_strike[k]) {
                free(s->held_strike[k]);
                s->held_strike[k] = why;
                return;
        }
        s->held_strike[k] = why;
        s->held_index[k] = f->n_held[k];
        f->held[k][f->n_held[k]++] = s;
}

/* The held failures of a list become strikes of check k, or are dropped. */
static void fleet_release_held(Fleet *f, unsigned list, CheckKind k, bool drop) {
        while (f->n_held[list] > 0) {
                Slot *s = f->held[list][--f->n_held[list]];
                _cleanup_free_ char *why = TAKE_PTR(s->held_strike[list]);

                if (!drop)
                        slot_strike(s, k, "%s", why);
        }
}

/* The verdict of a round of check k (told to the host), fault: a machine fault. */
static void fleet_round_told(Fleet *f, CheckKind k, const CheckTally *t, bool fault) {
        if (t->failing > 0)
                log_debug("Fleet %s: %u of %u checked slots failed check %s in one round%s",
                          f->config->name, t->failing, t->checked, check_kind_to_string(k),
                          fault ? ": a machine fault, no strikes" : "");
        f->host->hooks->check_verdict(f, k, t->failing, t->checked, fault, f->host->userdata);
}

/* A heartbeat round ended. Its misses wait for the next round's verdict: slots ping at their
 * own phases, so the period in which all servers stop (or start again) finds only some of
 * them silent. A miss is dropped when its round, the one before or the one after was a
 * machine fault. */
static void fleet_heartbeat_verdict(Fleet *f, const CheckTally *closed) {
        bool fault = heartbeat_round_machine_fault(closed, f->config->machine_fault_share,
                                                   f->heartbeat_fault[1]);
        unsigned now = CHECK_HEARTBEAT, waiting = HELD_HEARTBEAT_WAITING;

        /* A round that counted too few slots keeps the fault as it is, untold. */
        if (closed->checked >= MACHINE_FAULT_MIN_FAILING)
                fleet_round_told(f, CHECK_HEARTBEAT, closed, fault);
        fleet_release_held(f, waiting, CHECK_HEARTBEAT,
                           fault || f->heartbeat_fault[0] || f->heartbeat_fault[1]);
        SWAP_TWO(f->held[now], f->held[waiting]);
        SWAP_TWO(f->n_held[now], f->n_held[waiting]);
        SWAP_TWO(f->n_held_allocated[now], f->n_held_allocated[waiting]);
        for (size_t i = 0; i < f->n_held[waiting]; i++) {
                Slot *s = f->held[waiting][i];

                s->held_strike[waiting] = TAKE_PTR(s->held_strike[now]);
                s->held_index[waiting] = i;
        }
        f->heartbeat_fault[0] = f->heartbeat_fault[1];
        f->heartbeat_fault[1] = fault;
}

static void fleet_sweep_verdict(Fleet *f) {
        static const CheckKind swept[] = { CHECK_CPU, CHECK_MEMORY, CHECK_QUERY };

        if (!f->verdict_due)
                return;
        f->verdict_due = false;
        if (f->sweep_checked)
                f->host->hooks->sweep_done(f, now_usec(CLOCK_MONOTONIC) - f->sweep_started,
                                           f->host->userdata);
        for (size_t i = 0; i < ELEMENTSOF(swept); i++) {
                CheckTally t = f->tally[swept[i]];

                f->tally[swept[i]] = (CheckTally) {};
                SweepVerdict v = sweep_round_verdict(&t, f->config->machine_fault_share,
                                                     &f->sweep_fault[swept[i]]);

                fleet_round_told(f, swept[i], &t, v.machine_fault);
                if (v.drop_strikes && !v.machine_fault && t.failing > 0)
                        log_debug("Fleet %s: the round of check %s after a machine fault, no strikes",
                                  f->config->name, check_kind_to_string(swept[i]));
                fleet_release_held(f, swept[i], swept[i], v.drop_strikes);
        }
}

static int fleet_on_verdict(sd_event_source *source, void *userdata) {
        Fleet *f = userdata;

        if (!f->sweeping && f->probes_pending == 0)
                fleet_sweep_verdict(f);
        return 0;
}

/* The sweep's verdict comes when its last chunk is done and its last probe has answered or
 * timed out, in an event of its own (strikes act on servers: not from within a slot's exit). */
static void fleet_verdict_maybe(Fleet *f) {
        if (!f->verdict_due || f->sweeping || f->probes_pending > 0)
                return;
        if (!f->verdict_defer &&
            sd_event_add_defer(f->host->event, &f->verdict_defer, fleet_on_verdict, f) < 0) {
                fleet_sweep_verdict(f);
                return;
        }
        (void) sd_event_source_set_enabled(f->verdict_defer, SD_EVENT_ONESHOT);
}

void fleet_checks_done(Fleet *f) {
        f->verdict_defer = sd_event_source_disable_unref(f->verdict_defer);
        for (unsigned list = 0; list < HELD_LISTS; list++)
                f->held[list] = mfree(f->held[list]);
}

/* ---- Checks the host keeps from being made: LastCheckError, no strike ---- */

_printf_(4, 5) static void slot_check_error(Slot *s, CheckKind k, int error, const char *format,
                                            ...) {
        char message[256];
        va_list ap;

        va_start(ap, format);
        (void) vsnprintf(message, sizeof(message), format, ap);
        va_end(ap);
        if (!streq_ptr(s->last_check_error, message) &&
            free_and_strdup(&s->last_check_error, message) >= 0)
                slot_details_changed(s, SLOT_CHANGE_CHECK_ERROR);
        if (s->check_error == error && s->check_error_kind == k)
                return;
        if (s->check_error != 0)
                s->host->hooks->check_error(s, s->check_error_kind, s->check_error, NULL,
                                            s->host->userdata);
        s->check_error = error;
        s->check_error_kind = k;
        s->host->hooks->check_error(s, k, error, message, s->host->userdata);
}

/* The slot's cause is no longer told to the host (its server ended, or the check was made). */
static void slot_check_error_untell(Slot *s) {
        int error = s->check_error;

        if (error == 0)
                return;
        s->check_error = 0;
        s->host->hooks->check_error(s, s->check_error_kind, error, NULL, s->host->userdata);
}

/* Check k was made (whatever it found). */
static void slot_check_made(Slot *s, CheckKind k) {
        if (!s->last_check_error || s->check_error_kind != k)
                return;
        slot_check_error_untell(s);
        s->last_check_error = mfree(s->last_check_error);
        slot_details_changed(s, SLOT_CHANGE_CHECK_ERROR);
}

/* ---- Query probes ---- */

static void slot_probe_failed(Slot *s, int result) {
        const char *protocol = query_type_to_string(slot_build_config(s)->query);

        if (result == -ENETDOWN)
                slot_check_error(s, CHECK_QUERY, result,
                                 "query: 127.0.0.1:%u: no answer while the loopback interface is "
                                 "down: %s", s->query_port, strerror(-result));
        else if (check_error_is_local(result))
                slot_check_error(s, CHECK_QUERY, result, "query: sendto 127.0.0.1:%u: %s",
                                 s->query_port, strerror(-result));
        else {
                slot_check_made(s, CHECK_QUERY);
                check_tally_add(&s->fleet->tally[CHECK_QUERY], true);
                slot_hold_strike(s, CHECK_QUERY, "%s query on port %u: %s", protocol,
                                 s->query_port,
                                 result == -ETIMEDOUT ? "no valid answer in checks.query_timeout"
                                                      : strerror(-result));
        }
}

static void slot_probe_answered(Slot *s, const ProbeResult *info) {
        ProbeResult answer = *info;

        slot_check_made(s, CHECK_QUERY);
        check_tally_add(&s->fleet->tally[CHECK_QUERY], false);
        /* A probe a second per slot: only a changed answer is announced. */
        if (s->query && memcmp(s->query, &answer, sizeof(answer)) == 0)
                return;
        if (!s->query && !(s->query = malloc(sizeof(ProbeResult)))) {
                log_oom();
                return;
        }
        *s->query = answer;
        slot_details_changed(s, SLOT_CHANGE_QUERY);
}

static void slot_on_probe_done(Probe *p, int result, const ProbeResult *info, void *userdata) {
        Slot *s = userdata;
        Fleet *f = s->fleet;
        bool in_sweep = s->probe_in_sweep;

        s->probe = probe_free(s->probe);
        s->probe_in_sweep = false;
        if (result < 0)
                slot_probe_failed(s, result);
        else
                slot_probe_answered(s, info);
        if (in_sweep) {
                f->probes_pending--;
                fleet_verdict_maybe(f);
        }
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
        r = probe_start(s->host->probe_hub, slot_build_config(s)->query, &addr, f->query_timeout,
                        slot_on_probe_done, s, &s->probe);
        if (r < 0) {
                /* Whatever the error, the probe did not leave: slotd's doing, not the server's. */
                slot_check_error(s, CHECK_QUERY, r, "query: sendto 127.0.0.1:%u: %s", s->query_port,
                                 strerror(-r));
                return;
        }
        s->probe_in_sweep = true;
        s->fleet->probes_pending++;
}

/* One slot's resource checks and probe, within its fleet's sweep. */
static void slot_check(Slot *s, usec_t now) {
        const FleetConfig *f = s->fleet->config;
        usec_t usage;
        uint64_t memory;
        bool ok;

        (void) slot_log_bytes_lost(s); /* what the keeper dropped since the last sweep, if any */
        /* cpu.stat stays open: a sweep is one pread per slot, not an open, read and close. */
        if (s->cpu_stat_fd < 0 && s->cgroup_fd >= 0)
                s->cpu_stat_fd = openat(s->cgroup_fd, "cpu.stat", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (s->cpu_stat_fd >= 0 && cg_cpu_usage_fd(s->cpu_stat_fd, &usage) >= 0) {
                s->cpu_usage = cpu_cores_used(s->check_cpu_usage, usage, now - s->check_cpu_at);
                s->check_cpu_usage = usage;
                s->check_cpu_at = now;
                ok = check_cpu_ok(s->cpu_usage, f->usage_cpu, f->cpu_tolerance);
                check_tally_add(&s->fleet->tally[CHECK_CPU], !ok);
                if (!ok)
                        slot_hold_strike(s, CHECK_CPU, "%.3f cores used, budget %.3f + %.0f%%",
                                         s->cpu_usage, f->usage_cpu, f->cpu_tolerance * 100.0);
        }
        memory = slot_memory_current(s);
        ok = check_memory_ok(memory, f->usage_memory, f->memory_tolerance);
        check_tally_add(&s->fleet->tally[CHECK_MEMORY], !ok);
        if (!ok)
                slot_hold_strike(s, CHECK_MEMORY,
                                 "%" PRIu64 " bytes in use, budget %" PRIu64 " + %" PRIu64, memory,
                                 f->usage_memory, f->memory_tolerance);
        slot_check_memory_high(s); /* throttled there: logged, no strike (slot-fault.c) */
        if (slot_build_config(s)->query != QUERY_NONE && s->main_pid > 0)
                slot_start_probe(s);
}

/* A sweep goes through the fleet's slots this many at a time, each chunk one event, so
 * that D-Bus calls and exits are served between chunks: no event does more than a chunk's
 * work, whatever the number of slots. */
#define SWEEP_CHUNK 32

static int fleet_on_sweep(sd_event_source *source, uint64_t usec, void *userdata);

static void fleet_sweep_arm(Fleet *f, usec_t when) {
        if (!f->sweep_timer) {
                if (sd_event_add_time(f->host->event, &f->sweep_timer, CLOCK_MONOTONIC, when,
                                      USEC_PER_MSEC, fleet_on_sweep, f) < 0)
                        return;
        } else
                (void) sd_event_source_set_time(f->sweep_timer, when);
        (void) sd_event_source_set_enabled(f->sweep_timer, SD_EVENT_ONESHOT);
}

static void fleet_sweep_chunk(Fleet *f) {
        usec_t now = now_usec(CLOCK_MONOTONIC), interval = f->config->check_interval;
        size_t end = MIN(f->n_slots, f->sweep_next + SWEEP_CHUNK);

        /* The chunk's probes leave by one system call, when it is done. */
        probe_hub_cork(f->host->probe_hub);
        for (; f->sweep_next < end; f->sweep_next++) {
                Slot *s = f->slots[f->sweep_next];

                if (!s->checks_on || interval == 0)
                        continue;
                f->sweep_checked = true;
                /* A slot that became ready just now waits for the next sweep: CPU use over a
                 * few ms says nothing. */
                if (now - s->check_cpu_at >= interval / 2)
                        slot_check(s, now);
        }
        probe_hub_uncork(f->host->probe_hub);
        if (f->sweep_next < f->n_slots && f->sweep_defer) {
                (void) sd_event_source_set_enabled(f->sweep_defer, SD_EVENT_ONESHOT);
                return;
        }
        f->sweeping = false;
        fleet_verdict_maybe(f);
        /* Nothing checked: no slot runs with checks on, and the fleet wakes no more until
         * one does (slot_checks_ready()). */
        if (f->sweep_checked && interval > 0)
                fleet_sweep_arm(f, MAX(f->sweep_started + interval, now + USEC_PER_MSEC));
}

static int fleet_on_sweep_defer(sd_event_source *source, void *userdata) {
        fleet_sweep_chunk(userdata);
        return 0;
}

static int fleet_on_sweep(sd_event_source *source, uint64_t usec, void *userdata) {
        Fleet *f = userdata;
        _cleanup_close_ int fd = -EBADF;
        usec_t usage;

        if (!f->sweep_defer && sd_event_add_defer(f->host->event, &f->sweep_defer,
                                                  fleet_on_sweep_defer, f) >= 0)
                (void) sd_event_source_set_enabled(f->sweep_defer, SD_EVENT_OFF);
        /* A verdict still waiting for the last sweep's probes is given now; those probes
         * count in this sweep (their slots start no other). */
        fleet_sweep_verdict(f);
        f->verdict_due = true;
        f->sweep_started = now_usec(CLOCK_MONOTONIC);
        f->sweep_next = 0;
        f->sweep_checked = false;
        f->sweeping = true;
        /* Reading the fleet's cpu.stat first flushes the CPU statistics of all its slots at
         * once; each slot's read after it has little left to flush (half the cost here). */
        if (cg_open(f->cgroup_path, &fd) >= 0)
                (void) cg_cpu_usage_at(fd, &usage);
        fleet_sweep_chunk(f);
        return 0;
}

/* Each slot's heartbeat timer fires once a period; the fleet's round is a period too (see
 * HeartbeatRound), judged by the first timer after it. */
static int slot_on_heartbeat(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;
        Fleet *f = s->fleet;
        usec_t now = now_usec(CLOCK_MONOTONIC), period = f->config->heartbeat;
        bool missed = s->last_watchdog < s->heartbeat_since;
        CheckTally closed;

        (void) sd_event_source_set_time_relative(source, period);
        (void) sd_event_source_set_enabled(source, SD_EVENT_ON);
        s->heartbeat_since = now;
        if (heartbeat_round_advance(&f->heartbeat_round, now, period, &closed))
                fleet_heartbeat_verdict(f, &closed);
        if (heartbeat_round_count(&f->heartbeat_round, &s->heartbeat_round, &s->heartbeat_missed,
                                  missed))
                slot_hold_strike(s, CHECK_HEARTBEAT,
                                 "no WATCHDOG=1 within checks.heartbeat (%" PRIu64 " ms)",
                                 period / USEC_PER_MSEC);
        return 0;
}

static int slot_on_start_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;

        s->start_timer = sd_event_source_disable_unref(s->start_timer);
        if (s->ready || s->main_pid == 0)
                return 0;
        log_slot_warning(s, "Not ready (checks.readiness = %s) within checks.start_timeout, killing "
                            "the server", readiness_source_to_string(s->fleet->config->readiness));
        s->pending_cause = FAILURE_START_TIMEOUT;
        slot_kill(s);
        return 0;
}

/* checks.readiness (SPEC §11): servers built on Unity's SDK never send READY=1. With
 * 'exec' a server is running once exec'd; with 'query' once it first answers its query
 * protocol, probed every READINESS_PROBE_USEC meanwhile (a failed probe is no strike: the
 * server is still starting, and checks.start_timeout is what judges that). READY=1 counts
 * whatever the source. */
#define READINESS_PROBE_USEC (1 * USEC_PER_SEC)

static int slot_on_readiness_timer(sd_event_source *source, uint64_t usec, void *userdata);

static void slot_on_readiness_probe(Probe *p, int result, const ProbeResult *info, void *userdata) {
        Slot *s = userdata;

        s->probe = probe_free(s->probe);
        if (result < 0 || s->ready)
                return;
        s->readiness_timer = sd_event_source_disable_unref(s->readiness_timer);
        slot_became_ready(s, "first valid query answer (checks.readiness = query)");
}

static void slot_readiness_probe(Slot *s) {
        struct sockaddr_in addr = {
                .sin_family = AF_INET,
                .sin_port = htons(s->query_port),
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        usec_t timeout = MIN(s->fleet->config->query_timeout, READINESS_PROBE_USEC);
        int r;

        if (s->probe)
                return;
        r = probe_start(s->host->probe_hub, slot_build_config(s)->query, &addr, timeout,
                        slot_on_readiness_probe, s, &s->probe);
        if (r < 0)
                log_slot_debug(s, "Cannot send a readiness probe: %s", strerror(-r));
}

static int slot_on_readiness_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;
        int r;

        if (s->ready || s->main_pid <= 0) {
                s->readiness_timer = sd_event_source_disable_unref(s->readiness_timer);
                return 0;
        }
        if (s->fleet->config->readiness == READINESS_EXEC) {
                s->readiness_timer = sd_event_source_disable_unref(s->readiness_timer);
                slot_became_ready(s, "exec'd (checks.readiness = exec)");
                return 0;
        }
        slot_readiness_probe(s);
        r = sd_event_source_set_time_relative(source, READINESS_PROBE_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(source, SD_EVENT_ON);
        if (r < 0)
                log_slot_error_errno(s, r, "Failed to re-arm the readiness probe: %m");
        return 0;
}

/* Out of the start's own event: becoming ready dispatches through the state table, which
 * must not happen while the start is being dispatched. */
static int slot_arm_readiness(Slot *s) {
        ReadinessSource source = s->fleet->config->readiness;

        if (source == READINESS_NOTIFY ||
            (source == READINESS_QUERY && slot_build_config(s)->query == QUERY_NONE))
                return 0;
        return sd_event_add_time_relative(s->host->event, &s->readiness_timer, CLOCK_MONOTONIC, 0, 0,
                                          slot_on_readiness_timer, s);
}

void slot_checks_start(Slot *s) {
        const FleetConfig *f = s->fleet->config;
        sd_event *e = s->host->event;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        int r = 0;

        slot_checks_stop(s);
        for (int k = 0; k < _CHECK_KIND_MAX; k++)
                s->strikes[k] = mfree(s->strikes[k]);
        s->pending_cause = FAILURE_NONE;
        s->query = mfree(s->query);
        s->cpu_usage = 0;
        s->check_cpu_at = now;
        if (cg_cpu_usage_at(s->cgroup_fd, &s->check_cpu_usage) < 0)
                s->check_cpu_usage = 0;
        s->oom_kills_at_start = 0;
        if (s->host->enforced & CGROUP_MASK(CGROUP_MEMORY))
                (void) cg_oom_kills_at(s->cgroup_fd, &s->oom_kills_at_start);

        /* Start-up is start_timeout's business; the checks judge a running server, from
         * READY=1 on (slot_checks_ready()), as systemd's watchdog does. */
        if (f->start_timeout > 0)
                r = sd_event_add_time_relative(e, &s->start_timer, CLOCK_MONOTONIC, f->start_timeout,
                                               USEC_PER_MSEC, slot_on_start_timeout, s);
        if (r >= 0)
                r = slot_arm_readiness(s);
        if (r < 0)
                log_slot_error_errno(s, r, "Failed to arm the checks, the server runs unwatched: %m");
}

void slot_checks_stop(Slot *s) {
        if (s->probe_in_sweep) {
                s->probe_in_sweep = false;
                s->fleet->probes_pending--;
                fleet_verdict_maybe(s->fleet);
        }
        for (unsigned list = 0; list < HELD_LISTS; list++)
                slot_unhold(s, list);
        slot_check_error_untell(s);
        s->checks_on = false;
        s->heartbeat_timer = sd_event_source_disable_unref(s->heartbeat_timer);
        s->start_timer = sd_event_source_disable_unref(s->start_timer);
        s->readiness_timer = sd_event_source_disable_unref(s->readiness_timer);
        s->misbehaviour_timer = sd_event_source_disable_unref(s->misbehaviour_timer);
        s->probe = probe_free(s->probe);
        cg_statm_close(&s->statm);
}

void slot_checks_ready(Slot *s) {
        const FleetConfig *f = s->fleet->config;
        sd_event *e = s->host->event;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        int r = 0;

        s->start_timer = sd_event_source_disable_unref(s->start_timer);
        s->readiness_timer = sd_event_source_disable_unref(s->readiness_timer);
        s->heartbeat_timer = sd_event_source_disable_unref(s->heartbeat_timer);
        s->check_cpu_at = now;
        if (cg_cpu_usage_at(s->cgroup_fd, &s->check_cpu_usage) < 0)
                s->check_cpu_usage = 0;
        /* With checks off there is no timer at all: an idle slot costs no wake-ups. The
         * first check comes with the fleet's sweep at least half an interval from now. */
        s->checks_on = f->check_interval > 0;
        if (s->checks_on) {
                Fleet *fleet = s->fleet;
                int enabled = SD_EVENT_OFF;

                if (fleet->sweep_timer)
                        (void) sd_event_source_get_enabled(fleet->sweep_timer, &enabled);
                if (fleet->sweeping)
                        fleet->sweep_checked = true; /* so that the sweep under way re-arms */
                else if (enabled == SD_EVENT_OFF)
                        fleet_sweep_arm(fleet, now + f->check_interval);
        }
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
        if (s->exit_signal == SIGKILL && (s->host->enforced & CGROUP_MASK(CGROUP_MEMORY)) &&
            cg_oom_kills_at(s->cgroup_fd, &kills) >= 0 && kills > s->oom_kills_at_start)
                return FAILURE_OOM;
        return FAILURE_NONE;
}
