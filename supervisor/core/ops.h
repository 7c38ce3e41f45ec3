/* SPDX-License-Identifier: MIT */
#pragma once

#include <limits.h>

#include "macro.h"
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "allocation.h" /* SlotState */
#include "time-util.h"

/* The operations on allocations, reservations, holds, readiness and payloads (SPEC §7), in
 * one place. Every door (D-Bus, the local proxy, later the fleet layer) finds out who its
 * caller is, calls these, and translates the result; none holds a rule of its own. An
 * operation that changes state is acknowledged by its door once the change is durable
 * (manager_when_durable()). */

typedef struct Manager Manager;
typedef struct Slot Slot;

#define OPS_NO_SLOT UINT_MAX

/* Who asks. */
typedef struct OpsCaller {
        bool admin;              /* root or a member of supervisor.admin_group */
        unsigned slot_id;        /* the slot whose cgroup the caller runs in, or OPS_NO_SLOT */
        bool slot_known;         /* slot_id was looked up (the D-Bus door does it lazily) */
        const char *door;        /* "D-Bus", …: for the log lines of managing operations */
} OpsCaller;

typedef enum OpsErrorCode {
        OPS_OK,
        OPS_ERROR_ACCESS_DENIED,
        OPS_ERROR_NO_SUCH_SLOT,
        OPS_ERROR_NO_SUCH_ALLOCATION,
        OPS_ERROR_INVALID_STATE,
        OPS_ERROR_INVALID_ARGUMENT,
        OPS_ERROR_NO_CAPACITY,
        OPS_ERROR_DRAINING,
        OPS_ERROR_UNAVAILABLE,
        OPS_ERROR_FAILED,
        OPS_ERROR_STATE_UNWRITABLE,  /* state_dir takes no writes: refused, nothing changed */
        _OPS_ERROR_MAX,
} OpsErrorCode;

/* The contract's short name of an error: "no-such-slot", … (the proxy's IPC uses these). */
const char *ops_error_code_to_string(OpsErrorCode c);

typedef struct OpsStatus {
        OpsErrorCode code;
        char message[256];       /* names the rule that refused */
} OpsStatus;

#define OPS_PAYLOAD_MAX (30 * 1024)
#define OPS_TIMEOUT_DEFAULT_USEC (60 * USEC_PER_SEC)
#define OPS_TIMEOUT_MAX_USEC (7 * 24 * USEC_PER_HOUR)

typedef struct OpsAllocation {
        const char *uuid;
        const char *build_configuration; /* NULL or "": the fleet's, or the slot's (per slot) */
        const void *payload;             /* NULL: none */
        size_t payload_size;
        bool draining_ok;                /* let through while the machine is draining: a
                                          * fleet allocator's last resort (SPEC §8) */
        bool restart;                    /* its server restarts into the allocation's build
                                          * configuration even when it runs it (SPEC §8) */
} OpsAllocation;

/* Each returns 0, or a negative errno with *st filled (code and message). */
int ops_allocate(Manager *m, const OpsCaller *c, const char *fleet, const OpsAllocation *a,
                 Slot **ret, OpsStatus *st);
int ops_slot_allocate(Manager *m, const OpsCaller *c, unsigned slot_id, const OpsAllocation *a,
                      OpsStatus *st);
int ops_deallocate(Manager *m, const OpsCaller *c, const char *uuid, OpsStatus *st);
int ops_slot_deallocate(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st);
int ops_reserve(Manager *m, const OpsCaller *c, const char *fleet, const char *uuid,
                usec_t timeout, Slot **ret, OpsStatus *st);
/* A slot reserves itself (Multiplay's reservation-based fleets): a new reservation UUID. */
int ops_slot_reserve(Manager *m, const OpsCaller *c, unsigned slot_id, usec_t timeout,
                     Slot **ret, OpsStatus *st);
int ops_slot_unreserve(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st);
/* *ret_until: the deadline as the wall clock shows it (CLOCK_REALTIME µs). */
int ops_hold(Manager *m, const OpsCaller *c, unsigned slot_id, usec_t timeout, usec_t *ret_until,
             OpsStatus *st);
int ops_release_hold(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st);
/* Reads need the same right as the change: a slot's own server, or a manager. */
int ops_hold_status(Manager *m, const OpsCaller *c, unsigned slot_id, usec_t *ret_until,
                    OpsStatus *st);
int ops_set_ready(Manager *m, const OpsCaller *c, unsigned slot_id, const char *uuid, bool ready,
                  OpsStatus *st);
/* The payload given with an allocation; *ret borrows the slot's copy. */
int ops_payload(Manager *m, const OpsCaller *c, const char *uuid, const void **ret,
                size_t *ret_size, OpsStatus *st);
/* The local proxy's token (token.h): a slot's server gets one for its slot, a manager one
 * for the machine (server 0); *ret is the token, to free. */
int ops_token(Manager *m, const OpsCaller *c, char **ret, OpsStatus *st);
/* A subscription to a slot's allocation events: its own server or a manager; *ret the slot. */
int ops_subscribe(Manager *m, const OpsCaller *c, unsigned slot_id, Slot **ret, OpsStatus *st);
/* The slot of an ID, for anyone (GetSlot). */
int ops_find_slot(Manager *m, unsigned slot_id, Slot **ret, OpsStatus *st);

/* Managing operations: root or supervisor.admin_group only. Start refuses while the slot's
 * process cannot start, ResetFailed while it is not failed (InvalidState); Stop and Restart
 * do what the slot's state allows. */
int ops_set_draining(Manager *m, const OpsCaller *c, bool draining, OpsStatus *st);
int ops_reload(Manager *m, const OpsCaller *c, OpsStatus *st);
int ops_stop_all(Manager *m, const OpsCaller *c, OpsStatus *st);
int ops_slot_start(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st);
int ops_slot_stop(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st);
/* Stop, unless the slot is allocated, reserved or held (InvalidState): the fleet's scaler. */
int ops_slot_stop_if_free(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st);
int ops_slot_restart(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st);
int ops_slot_reset_failed(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st);

/* The rules without state (ops-rules.c, pure). */
/* Root, or a member of supervisor.admin_group among 'gids' (the caller's groups). */
bool ops_is_admin(uid_t uid, const gid_t *gids, size_t n_gids, bool has_admin_gid,
                  gid_t admin_gid);
/* Managing methods with no arguments of their own: Stop, Start, … need only the right. */
int ops_check_admin(const OpsCaller *c, OpsStatus *st);
int ops_check_slot_caller(const OpsCaller *c, unsigned slot_id, OpsStatus *st);
int ops_check_id(const char *what, const char *s, bool empty_ok, OpsStatus *st);
/* New allocations and reservations ('what': "Allocate", "Reserve") while the machine is
 * draining: refused (Draining), unless draining_ok (a fleet allocator's last resort, SPEC
 * §8). A retry of one in effect is no new one: the caller does not ask. */
int ops_check_draining(bool draining, bool draining_ok, const char *what, OpsStatus *st);
/* StopIfFree: a slot allocated, reserved or held is refused (InvalidState, -EBUSY). */
int ops_check_free(unsigned slot_id, SlotState state, OpsStatus *st);
/* Whom a token of the caller names: its own slot, or the machine (0) for a manager. */
int ops_token_subject(const OpsCaller *c, unsigned *ret_server, OpsStatus *st);
/* Before a change is applied: can state_dir make it durable? Else StateUnwritable, saying
 * why (the host fault state_dir, SPEC §12). Changes that slotd makes by itself and reads
 * need no such check. */
int ops_check_writable(Manager *m, OpsStatus *st);

/* Fills *st and returns -errno; for doors that refuse before calling an operation. */
int ops_fail(OpsStatus *st, OpsErrorCode code, int error, const char *format, ...)
        _printf_(4, 5);
