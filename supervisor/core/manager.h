/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

#include "alloc-event.h"
#include "allocation.h"
#include "config.h"
#include "fleet.h"
#include "hashmap.h"
#include "manager-faults.h"
#include "manager-hooks.h"
#include "metrics.h"
#include "ops.h"
#include "payload.h"
#include "slot.h"
#include "state-file.h"
#include "state-reserve.h"
#include "token.h"
#include <linux/filter.h>

typedef struct ManagerScope ManagerScope;

typedef struct Manager {
        sd_event *event;
        const ManagerHooks *hooks;   /* the doors' (manager-hooks.h), set by main.c */
        void *hooks_userdata;
        Config *config;

        char *machine_id;            /* machine.id or /etc/machine-id: MachineID, etcd keys */
        uint64_t machine_number;     /* machine.number or derived: server.json's machineID */
        char machine_number_text[24]; /* the same in decimal */
        char *ip;
        char *ipv6;
        MachineResources resources;

        char *cgroup_mount;          /* e.g. /sys/fs/cgroup */
        char *cgroup_root;           /* absolute path of the slot tree */
        char *cgroup_root_relative;  /* the same below the mount, as /proc/PID/cgroup says */
        char *scope;                 /* under systemd: the scope unit of the slot tree
                                      * (manager-scope.c); NULL elsewhere */
        ManagerScope *scope_setup;   /* while that scope is being made or adopted */
        unsigned enforced;           /* CGROUP_MASK of controllers in force for slots */
        int killed_cgroup_bug;       /* spawn_probe_killed_cgroup_bug()'s answer; -1: not asked yet */
        unsigned long nofile_default; /* the soft RLIMIT_NOFILE slotd started with */

        Fleet **fleets;
        size_t n_fleets;
        Slot **slots;                /* by id; NULL where a slot was removed */
        size_t n_slots;              /* ids handed out */
        size_t n_live_slots;

        char *notify_path;           /* <state_dir>/notify.d */

        Hashmap uuids;               /* allocation and reservation UUID → Slot */
        bool draining;
        unsigned n_busy;             /* slots allocated or reserved */
        usec_t idle_since;           /* CLOCK_BOOTTIME (wallclock.h), 0 while busy */
        usec_t hold_until;           /* the furthest hold, CLOCK_BOOTTIME */
        bool deprovisionable;
        sd_event_source *ttl_timer;

        int state_dir_fd;
        int exit_dir_fd;             /* <state_dir>/exit: the keepers' status files */
        sd_event_source *exit_watch; /* inotify on exit/: keepers' restarts (keeper.c) */
        int keeper_fd;               /* slotd-keeper, O_PATH (spawn_open_keeper()) */
        ProbeHub *probe_hub;         /* the one socket of all query probes */
        StateCache state_cache;      /* the state file's lines of the last snapshot */
        StateSpace state_space;      /* its preallocated space, the state_dir fault */
        uint64_t state_size;         /* its snapshot and its journal */
        uint64_t state_snapshot_size;
        bool state_snapshot_needed;  /* the next commit writes the whole file */
        unsigned *state_changed;     /* ids of the slots changed since the last commit */
        size_t n_state_changed, n_state_changed_allocated;
        bool state_dirty;
        usec_t dirty_since;               /* CLOCK_MONOTONIC of the oldest unwritten change */
        sd_event_source *commit_source;   /* idle priority: one commit for a burst */
        sd_event_source *commit_retry;    /* a failed commit, the state_dir fault: retries */
        struct DurableWaiter *pending;    /* callers waiting for the commit */
        size_t n_pending;
        size_t n_pending_allocated;

        bool reexecute;              /* leave the loop to exec the binary anew */
        /* A start without a state file, until READY=1: no slot has been seen by anyone, so
         * their changes are not announced on the doors (manager_announce_slot()). */
        bool unseen;
        gid_t config_admin_gid;      /* supervisor.admin_group, resolved at (re)load */
        bool config_has_admin_gid;

        /* What the local proxy (the proxy door, proxy/) serves: allocation events waiting for
         * the commit that makes them durable (manager-events.c), payloads, the token key. */
        char *local_proxy_url;       /* for server.json: the first of localproxy.listen */
        AllocEvent *events;
        size_t n_events, n_events_allocated;
        uint64_t epoch;
        PayloadStore payloads;
        TokenKey token_key;
        /* sock_diag, by which the proxy names its callers (manager-sockdiag.c): the errno of
         * its last failed self-test (the sock_diag fault), 0 while it works; its retry. */
        int sock_diag_error;
        sd_event_source *sock_diag_retry;
        usec_t sock_diag_retry_usec;

        HostFault *faults;           /* the Faults property (manager-faults.c) */
        size_t n_faults;
        unsigned slot_faults[_SLOT_FAULT_MAX];  /* slots held back by each (slot-fault.c) */
        struct CheckErrorCause *check_errors; /* checks the host keeps from being made
                                               * (manager-checks.c) */
        size_t n_check_errors;
        Metrics metrics;             /* counters and gauges of SPEC §14 (manager-metrics.c) */

        Slot **graveyard;            /* retired slots, freed outside their callbacks */
        size_t n_graveyard;
        sd_event_source *graveyard_source;

        /* What slots and fleets read of the above, and the hooks they call (manager.c):
         * copies, refreshed by manager_update_slot_host() whenever one of them changes. */
        SlotHost slot_host;
        char *slots_dir;             /* supervisor.slots_dir, which Reload does not change */
} Manager;

int manager_new(Config *config, Manager **ret);  /* takes the config */
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

/* Cgroups, notify socket, slots, the doors (ManagerHooks.open_doors); then starts what
 * should run. */
int manager_startup(Manager *m);
int manager_run(Manager *m);
/* Serializes the state and leaves the loop; main() then execs the binary in place. */
int manager_request_reexecute(Manager *m);

/* Calls the doors' hook 'name' (manager-hooks.h) with the arguments after the manager, if
 * the doors have it. */
#define manager_hook(m, name, ...)                                                             \
        do {                                                                                   \
                Manager *_m = (m);                                                             \
                if (_m->hooks && _m->hooks->name)                                              \
                        _m->hooks->name(_m, __VA_ARGS__, _m->hooks_userdata);                   \
        } while (false)

/* Copies into m->slot_host what slots read of the manager (slot-host.h). */
void manager_update_slot_host(Manager *m);

Slot *manager_get_slot(Manager *m, unsigned id);
int manager_add_fleet(Manager *m, const FleetConfig *fc, Fleet **ret, char **ret_error);
int manager_add_slots(Manager *m, Fleet *f, unsigned count);
int fleet_build_seccomp(const FleetConfig *fc, struct sock_fprog **ret, bool *ret_keeper_restarts,
                        char **ret_error);
int manager_resolve_admin_group(const Config *c, gid_t *ret_gid, bool *ret_has, char **ret_error);
int resolve_identity(const FleetConfig *f, uid_t *ret_uid, gid_t *ret_gid, char **ret_error);
Fleet *manager_find_fleet(Manager *m, const char *name);

/* On every change of a slot (its SlotHooks.changed): allocation index, idle count, durable
 * state, the doors (ManagerHooks.slot_changed). */
void manager_slot_changed(Manager *m, Slot *s, bool durable);
void manager_announce_slot(Manager *m, Slot *s, unsigned changes);
int manager_uuid_link(Manager *m, const char *uuid, Slot *s);
void manager_uuid_unlink(Manager *m, const char *uuid, Slot *s);
Slot *manager_slot_by_uuid(Manager *m, const char *uuid);
void manager_hold_started(Manager *m, usec_t until);
void manager_hold_ended(Manager *m, usec_t until);
void manager_retire_slot(Manager *m, Slot *s);
void manager_set_busy(Manager *m, Slot *s, bool busy);
/* Recomputes Deprovisionable and arms the timer for its next possible change. */
void manager_update_ttl(Manager *m);
int manager_open_state(Manager *m);
int manager_restore_state(Manager *m);

/* SPEC §7, the picking: -EINVAL unknown fleet, -ENOSPC no capacity; when the slot picked
 * refused (slot_allocate()), *ret names it. Whether a new one may be made at all (the
 * caller's right, draining, state_dir) is the operations' (ops.c). */
int manager_allocate(Manager *m, const char *fleet, const char *uuid, const char *build_configuration,
                     bool restart, Slot **ret);
int manager_reserve(Manager *m, const char *fleet, const char *uuid, usec_t timeout, Slot **ret);
int manager_set_draining(Manager *m, bool draining);
/* Reads the config again; on error *ret_error says why and nothing changed. */
int manager_reload(Manager *m, char **ret_error);

void manager_state_dirty(Manager *m);
/* A slot's record changed: its line goes into the next commit. */
void manager_state_slot_changed(Manager *m, Slot *s);
/* Slots came or went (Reload, retirement): the next commit writes the whole file. */
void manager_state_snapshot(Manager *m);
int manager_commit(Manager *m);
/* The state_dir fault (manager-state-space.c). Before a change is applied: 0, or the errno
 * why state_dir cannot make it durable (the fault is then raised). */
int manager_state_admit(Manager *m);
/* A write to state_dir failed with error ("what" names the file): raises the fault and arms
 * the retry timer, which clears it once state_dir takes writes again. */
void manager_state_failed(Manager *m, int error, const char *what);
/* After a commit (fd: the state file, open to append) or a snapshot: keeps the reserve. */
int manager_state_keep_reserve(Manager *m, int fd);
void manager_state_arm_retry(Manager *m);
/* The sock_diag fault (manager-sockdiag.c, SPEC §12): sockdiag_self_test(), when the local
 * proxy starts and when one of its lookups fails for a reason of the host. While it fails the
 * fault is raised and the error kept in sock_diag_error, and it runs again with back-off
 * (1 s doubling to 60 s); it clears the fault when it passes. 0 or its error. */
int manager_sock_diag_check(Manager *m);
/* What the host needs, for a positive errno of the self-test. */
const char *manager_sock_diag_remedy(int error);
void manager_sock_diag_done(Manager *m);
Slot *manager_slot_by_pid(Manager *m, pid_t pid);
bool manager_receive_notify(Manager *m, int fd, Slot *expected);
/* Checks the host keeps from being made, and rounds most of a fleet failed (manager-checks.c,
 * SPEC §6, §12): their faults of the host, their signal. */
void manager_check_error(Manager *m, Slot *s, CheckKind check, int error, const char *message);
void manager_check_verdict(Manager *m, Fleet *f, CheckKind check, unsigned failing,
                           unsigned checked, bool machine_fault);
void manager_checks_done(Manager *m);
void manager_stop_all(Manager *m);

/* Allocation events (manager-events.c). */
void manager_track_allocation(Manager *m, Slot *s);
void manager_flush_events(Manager *m);
bool manager_last_event(Manager *m, Slot *s, AllocEvent *ret);
int manager_ensure_epoch(Manager *m);
Slot *manager_slot_by_cgroup_path(Manager *m, const char *path);
bool manager_allocation_exists(const char *uuid, void *userdata);
/* At start-up (payload.h): the payload of uuid stays if its allocation does, given when the
 * state file says. */
bool manager_payload_keep(const char *uuid, usec_t *given_at, void *userdata);
/* The state file's clock (state-file.h): this boot and its wall offset (manager-alloc.c). */
void manager_state_clock(StateRecord *rec);
/* Moves what the state file says to this boot's CLOCK_BOOTTIME, before the slots take it. */
void manager_state_rebase(StateRecord *rec);

/* Calls callback(m, error, userdata) once every change made so far is durable (error 0); 1
 * means slotd is going away without an answer. A failed commit answers nobody: the change
 * is made, so "failed" would be untrue; it is retried and answered once durable. It may be
 * called before this returns (a change left waiting too long is committed on the spot):
 * userdata must be complete when it is passed. */
typedef void (*durable_callback_t)(Manager *m, int error, void *userdata);
int manager_when_durable(Manager *m, durable_callback_t callback, void *userdata);
void manager_drop_waiters(Manager *m);

/* Where the slot tree is (and would be, for --check: create false): supervisor.cgroup; under
 * systemd, <slice>/<unit>-slots.scope/slots (*ret_scope, may be NULL, names the scope, which
 * manager_scope_start() makes; NULL elsewhere); else a "slots" group beside the "supervisor"
 * leaf slotd moves itself into (create true). */
int manager_resolve_cgroup_root(const Config *c, bool create, char **ret_mount, char **ret_root,
                                char **ret_scope);

/* Under systemd (PID 1, slotd in a service unit of its own), the scope of the slot tree and
 * its cgroup below the mount (cg_unit_slots_scope()); -ENXIO elsewhere. */
int manager_systemd_slots_scope(char **ret_scope, char **ret_path);
/* manager-scope.c: makes (over D-Bus, asynchronously) or adopts m->scope, then calls
 * manager_startup_finish() from the event loop, or ends the loop with the error. */
int manager_scope_start(Manager *m);
void manager_scope_free(Manager *m);
/* The start-up from the cgroups on (manager_startup() calls it, or manager_scope_start()). */
int manager_startup_finish(Manager *m);

/* The machine's ID and number (SPEC §2): machine.id, else /etc/machine-id, else "";
 * machine.number, else machine_number_from_id() of that ID. *ret_from names where the number
 * came from, for messages. 0 or -ENOMEM. */
int manager_resolve_identity(const Config *c, char **ret_id, uint64_t *ret_number,
                             const char **ret_from);
