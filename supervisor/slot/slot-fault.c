/* SPDX-License-Identifier: MIT */
/* Faults of the host as one slot meets them (SPEC §12): a home or server.json the disk takes
 * no more writes for, a cgroup that cannot be made or limited, a keeper that cannot be
 * forked. None is the game server's doing, so none counts as a crash: the slot retries by
 * itself with back-off, and the manager shows the fault while any slot has it. Also the
 * report of limits.memory_high's throttling, which the checks call for. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "cgroup.h"
#include "log.h"
#include "slot-internal.h"

static const char *const fault_names[_SLOT_FAULT_MAX] = {
        [SLOT_FAULT_NONE] = "",
        [SLOT_FAULT_SLOTS_DIR] = "slots_dir",
        [SLOT_FAULT_CGROUP] = "cgroup",
        [SLOT_FAULT_FORK] = "fork",
};

const char *slot_fault_to_string(SlotFault f) {
        return f >= 0 && f < _SLOT_FAULT_MAX ? fault_names[f] : "";
}

/* The first retry after 1 s, then twice as long each time up to 16 s: a fault that lasts
 * costs a thousand slots about 60 failed system calls a second, and one that clears is
 * noticed within 16 s. */
#define FAULT_RETRY_FIRST_USEC (1 * USEC_PER_SEC)
#define FAULT_RETRY_MAX_USEC (16 * USEC_PER_SEC)

bool slot_storage_fault(int error) {
        switch (error) {
        case -ENOSPC:
        case -EDQUOT:
        case -EROFS:
        case -EIO:
        case -ENOMEM:
                return true;
        default:
                return false;
        }
}

static int slot_on_fault_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;

        s->fault_timer = sd_event_source_disable_unref(s->fault_timer);
        if (s->start_blocked) {
                s->start_blocked = false;
                slot_dispatch(s, SLOT_EVENT_START);
                /* Not held back by the host any more: started, or failed for a reason of the
                 * build's (a crash), or no longer to be started. */
                if (!s->start_blocked && !s->json_dirty)
                        slot_fault_clear(s);
                return 0;
        }
        /* server.json: written again as the slot is now, with the room a refused allocation
         * needed (server-json.c reserves it); success clears the fault. */
        if (s->json_dirty && s->home_fd >= 0)
                (void) slot_write_server_json(s);
        else if (s->fault != SLOT_FAULT_NONE)
                slot_fault_clear(s);
        return 0;
}

static void slot_fault_arm(Slot *s) {
        usec_t delay = FAULT_RETRY_FIRST_USEC << MIN(s->fault_retries, 8u);
        int r;

        delay = MIN(delay, FAULT_RETRY_MAX_USEC);
        s->fault_retries++;
        s->fault_timer = sd_event_source_disable_unref(s->fault_timer);
        r = sd_event_add_time_relative(s->host->event, &s->fault_timer, CLOCK_MONOTONIC, delay,
                                       USEC_PER_MSEC * 50, slot_on_fault_retry, s);
        if (r < 0)
                log_slot_error_errno(s, r, "Failed to arm the retry after a fault of the host: %m");
}

static int slot_fault_va(Slot *s, SlotFault f, int error, const char *format, va_list ap) {
        SlotFault old = s->fault;
        char why[sizeof(s->fault_why)];

        errno = -error; /* for %m */
        (void) vsnprintf(why, sizeof(why), format, ap);
        /* Once per episode at warning: a fault that lasts retries quietly. */
        if (old != f || !streq(why, s->fault_why))
                log_slot_full_errno(s, LOG_WARNING, error, "Host fault %s: %s; retrying with back-off",
                                    slot_fault_to_string(f), why);
        else
                log_slot_debug(s, "Still %s (retry %u)", why, s->fault_retries);
        s->fault = f;
        s->fault_error = error;
        strcpy(s->fault_why, why);
        slot_fault_arm(s);
        if (old != f)
                slot_hook_fault_changed(s, old);
        return error;
}

int slot_fault(Slot *s, SlotFault f, int error, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = slot_fault_va(s, f, error, format, ap);
        va_end(ap);
        return r;
}

int slot_start_fault(Slot *s, SlotFault f, int error, const char *format, ...) {
        va_list ap;
        int r;

        s->start_blocked = true;
        va_start(ap, format);
        r = slot_fault_va(s, f, error, format, ap);
        va_end(ap);
        return r;
}

void slot_fault_clear(Slot *s) {
        SlotFault old = s->fault;

        s->fault_timer = sd_event_source_disable_unref(s->fault_timer);
        s->fault_retries = 0;
        s->start_blocked = s->json_dirty = false;
        s->json_reserve = 0;
        if (old == SLOT_FAULT_NONE)
                return;
        log_slot_info(s, "Host fault %s is over for this slot (was: %s)", slot_fault_to_string(old),
                      s->fault_why);
        s->fault = SLOT_FAULT_NONE;
        s->fault_error = 0;
        s->fault_why[0] = '\0';
        slot_hook_fault_changed(s, old);
}

void slot_fault_cancel_start(Slot *s) {
        if (!s->start_blocked)
                return;
        s->start_blocked = false;
        /* Only a start was waiting: nothing is left to retry. */
        if (!s->json_dirty)
                slot_fault_clear(s);
}

bool slot_start_waits(Slot *s) {
        if (!s->start_blocked)
                return false;
        slot_set_process_state(s, PROCESS_STOPPED);
        return true;
}

void slot_fault_done(Slot *s) {
        s->fault_timer = sd_event_source_disable_unref(s->fault_timer);
        s->memory_events_fd = safe_close(s->memory_events_fd);
}

void slot_check_memory_high(Slot *s) {
        uint64_t high = s->fleet->config->memory_high, events;

        if (high == UINT64_MAX || !(s->host->enforced & CGROUP_MASK(CGROUP_MEMORY)) ||
            s->cgroup_fd < 0)
                return;
        /* Kept open as cpu.stat is: a check is one pread. */
        if (s->memory_events_fd < 0) {
                s->memory_events_fd = openat(s->cgroup_fd, "memory.events",
                                             O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (s->memory_events_fd < 0 ||
                    cg_memory_high_events_fd(s->memory_events_fd, &s->high_events) < 0)
                        return;
                s->throttled = false;
                return;
        }
        if (cg_memory_high_events_fd(s->memory_events_fd, &events) < 0)
                return;
        if (events > s->high_events && !s->throttled)
                log_slot_notice(s, "Throttled at memory.high (%" PRIu64 " bytes, limits.memory_high) "
                                "%" PRIu64 " times since the last check; no strike for it, the "
                                "memory check judges usage.memory + checks.memory_tolerance",
                                high, events - s->high_events);
        else if (events == s->high_events && s->throttled)
                log_slot_info(s, "No longer throttled at memory.high");
        s->throttled = events > s->high_events;
        s->high_events = events;
}
