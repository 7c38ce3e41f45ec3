/* SPDX-License-Identifier: MIT */
/* The operations every door calls (ops.h): who may, what the state allows, what the error
 * says. The picking itself is manager-alloc.c's; the slot's side is slot.c's. */
#include <stdarg.h>
#include <stdio.h>
#include <sys/random.h>

#include "log.h"
#include "token.h"
#include "manager.h"
#include "manager-metrics.h"
#include "ops.h"
#include "wallclock.h"

/* The errors the manager's and slots' own calls return, as the contract names them. */
static int fail_errno(OpsStatus *st, int r, const char *what) {
        switch (r) {
        case -ENOSPC:
                return ops_fail(st, OPS_ERROR_NO_CAPACITY, r, "%s: no slot free", what);
        case -EAGAIN:
                return ops_fail(st, OPS_ERROR_DRAINING, r, "%s: the machine is draining", what);
        case -EBUSY:
                return ops_fail(st, OPS_ERROR_INVALID_STATE, r,
                                "%s: not possible in the slot's state", what);
        case -EINVAL:
                return ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, r, "%s", what);
        default:
                return ops_fail(st, OPS_ERROR_FAILED, r, "%s: %s", what, strerror(-r));
        }
}

int ops_check_writable(Manager *m, OpsStatus *st) {
        int r = manager_state_admit(m);

        if (r >= 0)
                return 0;
        return ops_fail(st, OPS_ERROR_STATE_UNWRITABLE, r,
                        "state_dir %s takes no writes: %s; changes are refused until it does",
                        m->config->state_dir, strerror(-r));
}

int ops_find_slot(Manager *m, unsigned slot_id, Slot **ret, OpsStatus *st) {
        Slot *s = manager_get_slot(m, slot_id);

        if (!s)
                return ops_fail(st, OPS_ERROR_NO_SUCH_SLOT, -ENOENT, "No slot %u", slot_id);
        *ret = s;
        return 0;
}

static int check_allocation(const OpsAllocation *a, OpsStatus *st) {
        int r;

        if ((r = ops_check_id("allocation UUID", a->uuid, false, st)) < 0 ||
            (r = ops_check_id("build configuration", a->build_configuration, true, st)) < 0)
                return r;
        if (a->payload_size > OPS_PAYLOAD_MAX)
                return ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, -EMSGSIZE,
                                "Payload of %zu bytes: at most %d", a->payload_size,
                                OPS_PAYLOAD_MAX);
        return 0;
}

/* The payload goes to disk before the allocation exists: a failed write refuses the
 * allocation, and an acknowledged allocation finds its payload after any crash. A write that
 * state_dir refused is the state_dir fault. */
static int store_payload(Manager *m, const OpsAllocation *a, OpsStatus *st) {
        char what[PATH_MAX];
        int r;

        if (!a->payload)
                return 0;
        r = payload_store_put(&m->payloads, a->uuid, a->payload, a->payload_size,
                              now_usec(CLOCK_BOOTTIME));
        if (r < 0 && r != -ENOMEM) {
                (void) snprintf(what, sizeof(what), "%s/payload/%s", m->config->state_dir, a->uuid);
                manager_state_failed(m, r, what);
                return ops_check_writable(m, st);
        }
        if (r < 0)
                return ops_fail(st, OPS_ERROR_UNAVAILABLE, r,
                                "Failed to store the payload of %s durably: %s", a->uuid,
                                strerror(-r));
        return 0;
}

/* The slot could not write the allocation into its server.json (the slots_dir fault): the
 * allocation was refused before it was made (slot_allocate()). */
static bool refused_server_json(const Slot *s, int r) {
        return r < 0 && s && s->fault == SLOT_FAULT_SLOTS_DIR && s->fault_error == r;
}

static int fail_server_json(const Slot *s, int r, OpsStatus *st) {
        return ops_fail(st, OPS_ERROR_UNAVAILABLE, r, "Slot %u: %s; the allocation was not made",
                        s->id, s->fault_why);
}

static void undo_payload(Manager *m, const OpsAllocation *a) {
        if (a->payload)
                payload_store_drop(&m->payloads, a->uuid);
}

static int allocate(Manager *m, const OpsCaller *c, const char *fleet, const OpsAllocation *a,
                    Slot **ret, OpsStatus *st) {
        Slot *s = NULL;
        int r;

        if ((r = ops_check_admin(c, st)) < 0 || (r = check_allocation(a, st)) < 0)
                return r;
        /* A retry of an allocation made before is answered, not refused: it is in effect. */
        s = manager_slot_by_uuid(m, a->uuid);
        if (!s || !streq_ptr(s->allocation_uuid, a->uuid)) {
                if ((r = ops_check_writable(m, st)) < 0 ||
                    (r = ops_check_draining(m->draining, a->draining_ok, "Allocate", st)) < 0)
                        return r;
        }
        if ((r = store_payload(m, a, st)) < 0)
                return r;
        r = manager_allocate(m, fleet, a->uuid, a->build_configuration, a->restart, &s);
        if (r == -EINVAL) {
                undo_payload(m, a);
                return ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, r, "No fleet '%s'", fleet);
        }
        if (r == -ENOENT) {
                undo_payload(m, a);
                return ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, r,
                                "Fleet '%s' has no build configuration '%s'", fleet,
                                a->build_configuration);
        }
        if (r < 0) {
                undo_payload(m, a);
                if (refused_server_json(s, r))
                        return fail_server_json(s, r, st);
                return fail_errno(st, r, "Allocate");
        }
        *ret = s;
        return 0;
}

/* The metrics count every request of an allocation or reservation by its result (SPEC §14). */
static void count_request(Manager *m, const char *fleet, MetricsRequest q, int r,
                          const OpsStatus *st) {
        manager_metrics_request(m, fleet, q, r < 0 ? st->code : OPS_OK);
}

static const char *slot_fleet_name(Manager *m, unsigned slot_id) {
        Slot *s = manager_get_slot(m, slot_id);

        return s ? s->fleet->config->name : NULL;
}

int ops_allocate(Manager *m, const OpsCaller *c, const char *fleet, const OpsAllocation *a,
                 Slot **ret, OpsStatus *st) {
        int r = allocate(m, c, fleet, a, ret, st);

        count_request(m, fleet, METRICS_REQUEST_ALLOCATE, r, st);
        return r;
}

static int slot_allocate_op(Manager *m, const OpsCaller *c, unsigned slot_id,
                            const OpsAllocation *a, OpsStatus *st) {
        const char *bc = a->build_configuration && *a->build_configuration ? a->build_configuration
                                                                           : NULL;
        Slot *s = NULL, *other;
        int r;

        if ((r = ops_check_admin(c, st)) < 0 || (r = ops_find_slot(m, slot_id, &s, st)) < 0 ||
            (r = check_allocation(a, st)) < 0)
                return r;
        other = manager_slot_by_uuid(m, a->uuid);
        if (other && other != s)
                return ops_fail(st, OPS_ERROR_INVALID_STATE, -EBUSY,
                                "%s is allocated or reserved on slot %u", a->uuid, other->id);
        if (!streq_ptr(s->allocation_uuid, a->uuid) &&
            ((r = ops_check_draining(m->draining, a->draining_ok, "Allocate", st)) < 0 ||
             (r = ops_check_writable(m, st)) < 0))
                return r;
        if ((r = store_payload(m, a, st)) < 0)
                return r;
        r = slot_allocate(s, a->uuid, bc, a->restart);
        if (r < 0)
                undo_payload(m, a);
        if (r == -EBUSY)
                return ops_fail(st, OPS_ERROR_INVALID_STATE, r, "Slot %u is %s, %s", s->id,
                                slot_state_to_string(slot_state(s)),
                                process_state_to_string(s->process_state));
        if (r == -ENOENT)
                return ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, r,
                                "Fleet '%s' has no build configuration '%s'",
                                s->fleet->config->name, bc);
        if (refused_server_json(s, r))
                return fail_server_json(s, r, st);
        if (r < 0)
                return fail_errno(st, r, "Allocate");
        return 0;
}

int ops_slot_allocate(Manager *m, const OpsCaller *c, unsigned slot_id, const OpsAllocation *a,
                      OpsStatus *st) {
        int r = slot_allocate_op(m, c, slot_id, a, st);

        count_request(m, slot_fleet_name(m, slot_id), METRICS_REQUEST_ALLOCATE, r, st);
        return r;
}

int ops_deallocate(Manager *m, const OpsCaller *c, const char *uuid, OpsStatus *st) {
        Slot *s = NULL;
        int r;

        if ((r = ops_check_admin(c, st)) < 0)
                return r;
        s = manager_slot_by_uuid(m, uuid);
        if (!s || !streq_ptr(s->allocation_uuid, uuid))
                return ops_fail(st, OPS_ERROR_NO_SUCH_ALLOCATION, -ENOENT, "No allocation '%s'",
                                uuid);
        if ((r = ops_check_writable(m, st)) < 0)
                return r;
        r = slot_deallocate(s);
        if (r < 0)
                return fail_errno(st, r, "Deallocate");
        return 0;
}

int ops_slot_deallocate(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st) {
        Slot *s = NULL;
        int r;

        if ((r = ops_check_admin(c, st)) < 0 || (r = ops_find_slot(m, slot_id, &s, st)) < 0)
                return r;
        if (s->allocation_uuid && (r = ops_check_writable(m, st)) < 0)
                return r;
        r = slot_deallocate(s);
        if (r == -EBUSY)
                return ops_fail(st, OPS_ERROR_INVALID_STATE, r, "Slot %u is not allocated", s->id);
        if (r < 0)
                return fail_errno(st, r, "Deallocate");
        return 0;
}

static int check_timeout(const char *what, usec_t timeout, usec_t *ret, OpsStatus *st) {
        if (timeout > OPS_TIMEOUT_MAX_USEC)
                return ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, -EINVAL,
                                "%s timeout longer than 7 days", what);
        *ret = timeout ?: OPS_TIMEOUT_DEFAULT_USEC;
        return 0;
}

static int reserve(Manager *m, const OpsCaller *c, const char *fleet, const char *uuid,
                   usec_t timeout, Slot **ret, OpsStatus *st) {
        int r;

        if ((r = ops_check_admin(c, st)) < 0 ||
            (r = ops_check_id("reservation UUID", uuid, false, st)) < 0 ||
            (r = check_timeout("Reservation", timeout, &timeout, st)) < 0)
                return r;
        /* A retry is answered: its reservation is in effect. */
        if (!manager_slot_by_uuid(m, uuid) &&
            ((r = ops_check_writable(m, st)) < 0 ||
             (r = ops_check_draining(m->draining, false, "Reserve", st)) < 0))
                return r;
        r = manager_reserve(m, fleet, uuid, timeout, ret);
        if (r == -EINVAL)
                return ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, r, "No fleet '%s'", fleet);
        if (r < 0)
                return fail_errno(st, r, "Reserve");
        return 0;
}

int ops_reserve(Manager *m, const OpsCaller *c, const char *fleet, const char *uuid,
                usec_t timeout, Slot **ret, OpsStatus *st) {
        int r = reserve(m, c, fleet, uuid, timeout, ret, st);

        count_request(m, fleet, METRICS_REQUEST_RESERVE, r, st);
        return r;
}

/* A reservation UUID of our own making, in the canonical form of a version 4 UUID. */
static int new_uuid(char ret[static 37]) {
        uint8_t b[16];

        if (getrandom(b, sizeof(b), GRND_NONBLOCK) != sizeof(b))
                return -EAGAIN;
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        (void) snprintf(ret, 37,
                        "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                        b[12], b[13], b[14], b[15]);
        return 0;
}

static int slot_reserve_op(Manager *m, const OpsCaller *c, unsigned slot_id, usec_t timeout,
                           Slot **ret, OpsStatus *st) {
        char uuid[37];
        Slot *s = NULL;
        int r;

        if ((r = ops_check_slot_caller(c, slot_id, st)) < 0 ||
            (r = ops_find_slot(m, slot_id, &s, st)) < 0 ||
            (r = check_timeout("Reservation", timeout, &timeout, st)) < 0)
                return r;
        if (s->reservation_uuid) { /* a retry of the server's own request */
                *ret = s;
                return 0;
        }
        if ((r = ops_check_draining(m->draining, false, "Reserve", st)) < 0 ||
            (r = ops_check_writable(m, st)) < 0)
                return r;
        if ((r = new_uuid(uuid)) < 0)
                return fail_errno(st, r, "Reserve");
        r = slot_reserve(s, uuid, timeout);
        if (r == -EBUSY)
                return ops_fail(st, OPS_ERROR_INVALID_STATE, r,
                                "Slot %u is %s: only an online or available slot can be reserved",
                                s->id, slot_state_to_string(slot_state(s)));
        if (r < 0)
                return fail_errno(st, r, "Reserve");
        *ret = s;
        return 0;
}

int ops_slot_reserve(Manager *m, const OpsCaller *c, unsigned slot_id, usec_t timeout,
                     Slot **ret, OpsStatus *st) {
        int r = slot_reserve_op(m, c, slot_id, timeout, ret, st);

        count_request(m, slot_fleet_name(m, slot_id), METRICS_REQUEST_RESERVE, r, st);
        return r;
}

int ops_slot_unreserve(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st) {
        Slot *s = NULL;
        int r;

        if ((r = ops_check_slot_caller(c, slot_id, st)) < 0 ||
            (r = ops_find_slot(m, slot_id, &s, st)) < 0)
                return r;
        if (!s->reservation_uuid)
                return ops_fail(st, OPS_ERROR_INVALID_STATE, -EBUSY, "Slot %u is not reserved",
                                s->id);
        if ((r = ops_check_writable(m, st)) < 0)
                return r;
        slot_end_reservation(s);
        manager_slot_changed(m, s, true);
        return 0;
}

int ops_hold(Manager *m, const OpsCaller *c, unsigned slot_id, usec_t timeout, usec_t *ret_until,
             OpsStatus *st) {
        Slot *s = NULL;
        int r;

        if ((r = ops_check_slot_caller(c, slot_id, st)) < 0 ||
            (r = ops_find_slot(m, slot_id, &s, st)) < 0 ||
            (r = check_timeout("Hold", timeout, &timeout, st)) < 0 ||
            (r = ops_check_writable(m, st)) < 0)
                return r;
        r = slot_hold(s, timeout, ret_until);
        if (r >= 0)
                *ret_until = boottime_to_wall(*ret_until);
        if (r == -EBUSY)
                return ops_fail(st, OPS_ERROR_INVALID_STATE, r,
                                "Slot %u is %s: only an online or available slot can be held",
                                s->id, slot_state_to_string(slot_state(s)));
        if (r < 0)
                return fail_errno(st, r, "Hold");
        return 0;
}

int ops_release_hold(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st) {
        Slot *s = NULL;
        int r;

        if ((r = ops_check_slot_caller(c, slot_id, st)) < 0 ||
            (r = ops_find_slot(m, slot_id, &s, st)) < 0)
                return r;
        if (s->hold_until == 0)
                return ops_fail(st, OPS_ERROR_INVALID_STATE, -EBUSY, "Slot %u is not held", s->id);
        if ((r = ops_check_writable(m, st)) < 0)
                return r;
        slot_end_hold(s, HOLD_EVENT_RELEASE);
        manager_slot_changed(m, s, true);
        return 0;
}

int ops_hold_status(Manager *m, const OpsCaller *c, unsigned slot_id, usec_t *ret_until,
                    OpsStatus *st) {
        Slot *s = NULL;
        int r;

        if ((r = ops_check_slot_caller(c, slot_id, st)) < 0 ||
            (r = ops_find_slot(m, slot_id, &s, st)) < 0)
                return r;
        *ret_until = boottime_to_wall(s->hold_until);
        return 0;
}

int ops_set_ready(Manager *m, const OpsCaller *c, unsigned slot_id, const char *uuid, bool ready,
                  OpsStatus *st) {
        Slot *s = NULL;
        int r;

        if ((r = ops_check_slot_caller(c, slot_id, st)) < 0 ||
            (r = ops_find_slot(m, slot_id, &s, st)) < 0 ||
            (r = ops_check_id("allocation UUID", uuid, false, st)) < 0)
                return r;
        if (!streq_ptr(s->allocation_uuid, uuid))
                return ops_fail(st, OPS_ERROR_NO_SUCH_ALLOCATION, -ENOENT,
                                "Slot %u is not allocated to '%s'%s%s", s->id, uuid,
                                s->allocation_uuid ? ": it is allocated to " : "",
                                strempty(s->allocation_uuid));
        if (s->ready_for_players == ready)
                return 0;
        if ((r = ops_check_writable(m, st)) < 0)
                return r;
        s->ready_for_players = ready;
        manager_slot_changed(m, s, true);
        manager_hook(m, slot_changed, s, SLOT_CHANGE_READY_FOR_PLAYERS);
        return 0;
}

int ops_payload(Manager *m, const OpsCaller *c, const char *uuid, const void **ret,
                size_t *ret_size, OpsStatus *st) {
        Slot *s = NULL;
        int r;

        if ((r = ops_check_id("allocation UUID", uuid, false, st)) < 0)
                return r;
        s = manager_slot_by_uuid(m, uuid);
        if (!s || !streq_ptr(s->allocation_uuid, uuid)) {
                /* Nothing to say about allocations that are not the caller's. */
                if (!c->admin && !(c->slot_known && c->slot_id != OPS_NO_SLOT))
                        return ops_check_admin(c, st);
                return ops_fail(st, OPS_ERROR_NO_SUCH_ALLOCATION, -ENOENT, "No allocation '%s'",
                                uuid);
        }
        if ((r = ops_check_slot_caller(c, s->id, st)) < 0)
                return r;
        r = payload_store_get(&m->payloads, uuid, now_usec(CLOCK_BOOTTIME), ret, ret_size);
        if (r < 0)
                return ops_fail(st, OPS_ERROR_NO_SUCH_ALLOCATION, r,
                                "Allocation '%s' has no payload, or its localproxy.payload_ttl "
                                "has passed", uuid);
        return 0;
}

int ops_token(Manager *m, const OpsCaller *c, char **ret, OpsStatus *st) {
        unsigned server;
        int r;

        if ((r = ops_token_subject(c, &server, st)) < 0)
                return r;
        r = token_sign(&m->token_key, server, m->machine_id, now_usec(CLOCK_REALTIME) / USEC_PER_SEC,
                       TOKEN_LIFETIME_SEC, ret);
        if (r < 0)
                return ops_fail(st, OPS_ERROR_FAILED, r, "Failed to sign a token");
        return 0;
}

int ops_subscribe(Manager *m, const OpsCaller *c, unsigned slot_id, Slot **ret, OpsStatus *st) {
        int r;

        if ((r = ops_check_slot_caller(c, slot_id, st)) < 0)
                return r;
        return ops_find_slot(m, slot_id, ret, st);
}

int ops_set_draining(Manager *m, const OpsCaller *c, bool draining, OpsStatus *st) {
        int r;

        if ((r = ops_check_admin(c, st)) < 0)
                return r;
        if (m->draining != draining && (r = ops_check_writable(m, st)) < 0)
                return r;
        return manager_set_draining(m, draining);
}

int ops_reload(Manager *m, const OpsCaller *c, OpsStatus *st) {
        _cleanup_free_ char *why = NULL;
        int r;

        if ((r = ops_check_admin(c, st)) < 0)
                return r;
        r = manager_reload(m, &why);
        if (r < 0)
                return ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, r,
                                "Configuration refused, the running one stays: %s",
                                why ?: strerror(-r));
        return 0;
}

int ops_stop_all(Manager *m, const OpsCaller *c, OpsStatus *st) {
        int r;

        if ((r = ops_check_admin(c, st)) < 0)
                return r;
        log_info("StopAll: stopping every slot");
        manager_stop_all(m);
        return 0;
}

/* The managing operations on one slot: the right, the slot; logged as the door asked. */
static int managed_slot(Manager *m, const OpsCaller *c, unsigned slot_id, const char *what,
                        Slot **ret, OpsStatus *st) {
        int r;

        if ((r = ops_check_admin(c, st)) < 0 || (r = ops_find_slot(m, slot_id, ret, st)) < 0)
                return r;
        if (what)
                log_slot_info(*ret, "%s requested over %s", what, c->door ?: "a door");
        return 0;
}

int ops_slot_start(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st) {
        Slot *s;
        int r;

        if ((r = managed_slot(m, c, slot_id, "Start", &s, st)) < 0)
                return r;
        r = slot_start(s);
        if (r < 0)
                return ops_fail(st, OPS_ERROR_INVALID_STATE, r, "Slot %u cannot start while %s",
                                s->id, process_state_to_string(s->process_state));
        return 0;
}

int ops_slot_stop(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st) {
        Slot *s;
        int r;

        if ((r = managed_slot(m, c, slot_id, "Stop", &s, st)) < 0)
                return r;
        (void) slot_stop(s);
        return 0;
}

/* Decided and done in one turn of the loop: nothing can allocate the slot in between. */
int ops_slot_stop_if_free(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st) {
        Slot *s;
        int r;

        if ((r = ops_check_admin(c, st)) < 0 || (r = ops_find_slot(m, slot_id, &s, st)) < 0 ||
            (r = ops_check_free(s->id, slot_state(s), st)) < 0)
                return r;
        log_slot_info(s, "StopIfFree requested over %s", c->door ?: "a door");
        (void) slot_stop(s);
        return 0;
}

int ops_slot_restart(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st) {
        Slot *s;
        int r;

        if ((r = managed_slot(m, c, slot_id, "Restart", &s, st)) < 0)
                return r;
        (void) slot_restart(s);
        return 0;
}

int ops_slot_reset_failed(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st) {
        Slot *s;
        int r;

        if ((r = managed_slot(m, c, slot_id, NULL, &s, st)) < 0)
                return r;
        r = slot_reset_failed(s);
        if (r < 0)
                return ops_fail(st, OPS_ERROR_INVALID_STATE, r, "Slot %u is %s, not failed", s->id,
                                process_state_to_string(s->process_state));
        return 0;
}
