/* SPDX-License-Identifier: MIT */
/* A slot's sessions (SPEC §7): its allocation (with server.json), its reservation and hold
 * and their deadlines, and their record in the state file. */
#include <inttypes.h>

#include "log.h"
#include "slot-internal.h"
#include "timestamp.h"
#include "wallclock.h"

/* The journal fields of the slot's entries follow its session (slot-log-fields.h). */
static void slot_update_log_fields(Slot *s) {
        if (slot_log_fields_set(&s->log_fields, s->allocation_uuid, s->reservation_uuid) < 0)
                (void) log_oom();
}

/* Links the UUID to the slot; server.json is the caller's. */
static int slot_take_allocation(Slot *s, const char *uuid) {
        char *copy = NULL;
        int r;

        if (streq_ptr(s->allocation_uuid, uuid))
                return 0;
        if (uuid && !(copy = strdup(uuid)))
                return -ENOMEM;
        if (copy) {
                r = slot_hook_uuid_link(s, copy);
                if (r < 0) {
                        free(copy);
                        return r;
                }
        }
        if (s->allocation_uuid)
                slot_hook_uuid_unlink(s, s->allocation_uuid);
        free(s->allocation_uuid);
        s->allocation_uuid = copy;
        slot_update_log_fields(s);
        return 0;
}

/* server.json is rewritten before anything announces the change (SPEC §4). Before
 * provisioning (a restore) there is no home yet: the start writes it. An allocation's write
 * comes before the change (slot_allocate()); the end of one is made whatever the disk says,
 * since its content is shorter and goes over the file's own blocks: when it still fails,
 * the slot is busy (no allocation comes to it) and its server.json is written again with
 * back-off (slot-fault.c). */
int slot_set_allocation(Slot *s, const char *uuid) {
        int r;

        if (streq_ptr(s->allocation_uuid, uuid))
                return 0;
        r = slot_take_allocation(s, uuid);
        if (r < 0 || s->home_fd < 0)
                return r;
        r = slot_write_server_json(s);
        if (r < 0 && !slot_storage_fault(r))
                log_slot_warning_errno(s, r, "Failed to rewrite server.json: %m");
        return 0;
}

static int slot_on_hold_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;

        log_slot_info(s, "Hold expired");
        slot_end_hold(s, HOLD_EVENT_TIMEOUT);
        slot_hook_changed(s, true);
        return 0;
}

void slot_end_hold(Slot *s, HoldEvent event) {
        usec_t until = s->hold_until;

        if (until == 0 || !hold_ends_on(event))
                return;
        s->hold_until = 0;
        s->hold_timer = sd_event_source_disable_unref(s->hold_timer);
        slot_hook_hold_ended(s, until);
}

/* Deadlines are CLOCK_BOOTTIME (wallclock.h), kept, persisted and armed as such: a step of
 * the wall clock moves none of them. */
static int slot_arm_deadline(Slot *s, sd_event_source **source, usec_t until,
                             sd_event_time_handler_t handler) {
        *source = sd_event_source_disable_unref(*source);
        return sd_event_add_time(s->host->event, source, CLOCK_BOOTTIME, until, USEC_PER_MSEC,
                                 handler, s);
}

static int slot_hold_until(Slot *s, usec_t until, usec_t *ret_until) {
        char when[RFC3339_MAX];
        int r;

        if (!hold_allowed(slot_state(s)))
                return -EBUSY;
        r = slot_arm_deadline(s, &s->hold_timer, until, slot_on_hold_timeout);
        if (r < 0)
                return r;
        s->hold_until = until;
        slot_hook_hold_started(s, until);
        log_slot_info(s, "Held until %s", rfc3339_format(boottime_to_wall(until), when));
        slot_hook_changed(s, true);
        *ret_until = until;
        return 0;
}

int slot_hold(Slot *s, usec_t timeout, usec_t *ret_until) {
        return slot_hold_until(s, now_usec(CLOCK_BOOTTIME) + timeout, ret_until);
}

void slot_end_reservation(Slot *s) {
        if (!s->reservation_uuid)
                return;
        slot_hook_uuid_unlink(s, s->reservation_uuid);
        s->reservation_uuid = mfree_str(s->reservation_uuid);
        slot_update_log_fields(s);
        s->reserved_until = 0;
        s->reserve_timer = sd_event_source_disable_unref(s->reserve_timer);
}

static int slot_on_reserve_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;

        log_slot_info(s, "Reservation for %s expired", s->reservation_uuid);
        slot_end_reservation(s);
        slot_hook_changed(s, true);
        return 0;
}

static int slot_reserve_until(Slot *s, const char *uuid, usec_t until) {
        _cleanup_free_ char *copy = strdup(uuid);
        int r;

        if (!copy)
                return -ENOMEM;
        if (slot_is_allocated(s) || s->reservation_uuid ||
            s->process_state == PROCESS_FAILED)
                return -EBUSY;
        r = slot_arm_deadline(s, &s->reserve_timer, until, slot_on_reserve_timeout);
        if (r < 0)
                return r;
        r = slot_hook_uuid_link(s, copy);
        if (r < 0) {
                s->reserve_timer = sd_event_source_disable_unref(s->reserve_timer);
                return r;
        }
        slot_end_hold(s, HOLD_EVENT_RESERVE);
        s->reservation_uuid = TAKE_PTR(copy);
        slot_update_log_fields(s);
        s->reserved_until = until;
        log_slot_info(s, "Reserved for %s", s->reservation_uuid);
        slot_hook_changed(s, true);
        return 0;
}

int slot_reserve(Slot *s, const char *uuid, usec_t timeout) {
        return slot_reserve_until(s, uuid, now_usec(CLOCK_BOOTTIME) + timeout);
}

int slot_allocate(Slot *s, const char *uuid, const char *build_configuration, bool force) {
        bool restart, start, pre_recovery = s->failure == FAILURE_PRE_RECOVERY;
        const char *bc = build_configuration ?: s->build_configuration;
        int r;

        if (streq_ptr(s->allocation_uuid, uuid))
                return 0;
        /* A fleet with [build_configuration] sections runs those only. */
        if (build_configuration && !fleet_config_find_build(s->fleet->config, build_configuration))
                return -ENOENT;
        /* A slot stopped by pre-recovery keeps its session until a new allocation replaces
         * it (SPEC §6); any other allocated or foreign-reserved slot is taken. */
        if ((slot_is_allocated(s) && !pre_recovery) ||
            (s->reservation_uuid && !streq(s->reservation_uuid, uuid)) || s->retired ||
            s->process_state == PROCESS_STOPPING)
                return -EBUSY;
        /* From here on a crash of this server is a crash while allocated: its keeper must
         * not restart it. If the keeper was first, the server ended before the allocation
         * and the next one, starting, takes it. */
        (void) slot_disarm(s);

        /* The game server reads its allocation there: one it could not be told of is not
         * made. Refused before anything changed (the caller's error says why). */
        if (s->home_fd >= 0) {
                r = slot_write_server_json_as(s, uuid, bc);
                if (r < 0) {
                        log_slot_warning_errno(s, r, "Refusing allocation %s: cannot write "
                                               "%s/server.json: %m", uuid, s->home);
                        slot_hook_changed(s, false);
                        return r;
                }
        }

        restart = slot_is_running(s) && (force || !streq(bc, s->build_configuration) || s->stale);
        start = !slot_is_running(s);
        if (!streq(bc, s->build_configuration)) {
                r = free_and_strdup(&s->build_configuration, bc);
                if (r < 0)
                        return r;
        }
        slot_end_reservation(s);
        slot_end_hold(s, HOLD_EVENT_ALLOCATE);
        r = slot_take_allocation(s, uuid);
        if (r < 0) {
                (void) slot_write_server_json(s);
                return r;
        }
        log_slot_info(s, "Allocated to %s (build configuration %s)%s", uuid, bc,
                      restart ? ", restarting into it" : start ? ", starting" : "");
        if (pre_recovery)
                s->failure = FAILURE_NONE;
        if (restart) {
                s->stale = false;
                s->restart_requested = true;
                slot_dispatch(s, SLOT_EVENT_STOP);
        } else if (start)
                /* A failed slot starts again too: a new allocation clears crash-backoff. */
                slot_dispatch(s, SLOT_EVENT_START);
        slot_hook_changed(s, true);
        return 0;
}

int slot_deallocate(Slot *s) {
        bool stopped_for_recovery = s->failure == FAILURE_PRE_RECOVERY;
        int r;

        if (!slot_is_allocated(s))
                return -EBUSY;
        log_slot_info(s, "Deallocated %s", s->allocation_uuid);
        r = slot_set_allocation(s, NULL);
        if (r < 0)
                return r;
        if (stopped_for_recovery)
                s->failure = FAILURE_NONE;
        if (s->retired) {
                if (slot_is_running(s))
                        (void) slot_stop(s);
                else
                        slot_hook_retire(s);
                return 0;
        }
        if (slot_is_running(s) && s->stale) {
                /* The session ran the configuration Reload replaced; the server it leaves
                 * behind takes the new one. */
                s->stale = false;
                (void) free_and_strdup(&s->build_configuration,
                                       s->fleet->config->build_configuration);
                s->restart_requested = true;
                slot_dispatch(s, SLOT_EVENT_STOP);
        } else if (!slot_is_running(s) && s->process_state != PROCESS_FAILED &&
                   s->fleet->config->start_on_provision)
                slot_dispatch(s, SLOT_EVENT_START);
        slot_hook_changed(s, true);
        return 0;
}

/* r's times are this boot's CLOCK_BOOTTIME (state_record_rebase()). */
void slot_restore(Slot *s, const SlotRecord *r) {
        usec_t now = now_usec(CLOCK_BOOTTIME);

        if (r->build_configuration)
                (void) free_and_strdup(&s->build_configuration, r->build_configuration);
        if (r->allocation_uuid && slot_set_allocation(s, r->allocation_uuid) < 0)
                log_slot_error_errno(s, -ENOMEM, "Failed to restore allocation %s", r->allocation_uuid);
        /* Deadlines come back to the microsecond; those that passed while slotd was away
         * have ended. */
        if (r->reservation_uuid && r->reserved_until > now)
                (void) slot_reserve_until(s, r->reservation_uuid, r->reserved_until);
        if (r->hold_until > now) {
                usec_t until;
                (void) slot_hold_until(s, r->hold_until, &until);
        }
        for (FailureReason f = 0; r->failure && f < _FAILURE_REASON_MAX; f++)
                if (streq(r->failure, failure_reason_to_string(f)))
                        s->failure = f;
        if (r->failed)
                s->process_state = PROCESS_FAILED;
        s->restarts = r->restarts;
        s->last_exit_code = r->last_exit_code;
        s->last_exit_signal = r->last_exit_signal;
        s->restored_keeper = (pid_t) r->keeper;
        s->restored_ready = r->ready;
        s->restored_keeper_restarts = r->keeper_restarts;
        s->restored_payload_at = r->payload_at;
        if (r->keeper)
                s->started_at = r->started_at;
}

void slot_record(const Slot *s, SlotRecord *r) {
        *r = (SlotRecord){
                .id = s->id,
                .fleet = (char *) s->fleet->config->name,
                .allocation_uuid = s->allocation_uuid,
                .build_configuration = s->build_configuration,
                .reservation_uuid = s->reservation_uuid,
                .reserved_until = s->reserved_until,
                .hold_until = s->hold_until,
                .failure = s->failure != FAILURE_NONE ? (char *) failure_reason_to_string(s->failure) : NULL,
                .failed = s->process_state == PROCESS_FAILED,
                .restarts = s->restarts,
                .last_exit_code = s->last_exit_code,
                .last_exit_signal = s->last_exit_signal,
                .keeper = s->main_pid > 0 ? (unsigned) s->main_pid : 0,
                .keeper_restarts = s->main_pid > 0 ? s->keeper_restarts : 0,
                .ready = s->ready,
                .started_at = s->started_at,
        };
}

