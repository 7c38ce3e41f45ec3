/* SPDX-License-Identifier: MIT */
/* The allocator's stop (allocator-stop.h). A claim etcd may still apply must be fenced before
 * the process goes: the fence lives in it, and a claim applied after it has gone would stand
 * as an allocation no client was answered (SPEC §13, "A 503 is never an allocation"). */
#include <inttypes.h>
#include <string.h>

#include "allocator-fence.h"
#include "allocator-http.h"
#include "allocator-scaler.h"
#include "allocator-stop.h"
#include "allocator.h"
#include "log.h"

static void stop_now(Allocator *a) {
        a->stop_timer = sd_event_source_disable_unref(a->stop_timer);
        a->stop_done = true;
        (void) sd_event_exit(a->event, 0);
}

static int on_stop_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Allocator *a = userdata;
        size_t n = fence_unresolved(a);

        if (n > 0)
                log_warning("Stopped with %zu claim(s) in doubt not yet fenced: etcd may still "
                            "apply them, as allocations no client was answered", n);
        stop_now(a);
        return 0;
}

/* Something the stop waits for has ended (allocator_settled()): the loop ends if nothing is
 * left. */
static void allocator_stop_check(Allocator *a) {
        if (!a->stopping || a->stop_done)
                return;
        if (fence_unresolved(a) == 0 && !scaler_resigning(a) && a->requests_in_flight == 0)
                stop_now(a);
}

void allocator_stop(Allocator *a, int signo) {
        usec_t wait = MIN(MAX(4 * a->config->etcd_timeout, STOP_WAIT_MIN_SEC * USEC_PER_SEC),
                          STOP_WAIT_MAX_SEC * USEC_PER_SEC);
        size_t n;

        if (a->stopping) {
                log_warning("Stopping at once on a second %s, with %zu claim(s) in doubt not yet "
                            "fenced", strsignal(signo), fence_unresolved(a));
                stop_now(a);
                return;
        }
        a->stopping = true;
        a->on_settled = allocator_stop_check;
        log_info("Stopping on %s", strsignal(signo));
        http_answer_waiting(a, "slotd-allocator is stopping");
        (void) scaler_resign(a);
        n = fence_unresolved(a);
        if (n > 0)
                log_info("Stopping once %zu claim(s) in doubt are fenced (at most %" PRIu64 " s)",
                         n, wait / USEC_PER_SEC);
        if (sd_event_add_time_relative(a->event, &a->stop_timer, CLOCK_MONOTONIC, wait,
                                       USEC_PER_MSEC, on_stop_timer, a) < 0) {
                stop_now(a);
                return;
        }
        allocator_stop_check(a);
}

void allocator_stop_done(Allocator *a) {
        a->stop_timer = sd_event_source_disable_unref(a->stop_timer);
}
