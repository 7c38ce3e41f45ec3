/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "allocation.h"
#include "cgroup.h"
#include "checks.h"
#include "probe.h"
#include "config.h"
#include "ratelimit.h"
#include "slot-fsm.h"
#include "slot-log-fields.h"
#include "slot-host.h"
#include "slot-metrics.h"
#include "state-file.h"
#include "time-util.h"
#include "window.h"

typedef struct Fleet Fleet;   /* fleet.h */

/* A fault of the host that holds a slot back (SPEC §12), not the server's doing: no crash is
 * counted; the slot retries by itself with back-off (slot-fault.c), and the manager shows the
 * fault under its key while any slot has it. */
typedef enum SlotFault {
        SLOT_FAULT_NONE,
        SLOT_FAULT_SLOTS_DIR,     /* its home or server.json cannot be written */
        SLOT_FAULT_CGROUP,        /* its cgroup cannot be made, or a limit not written */
        SLOT_FAULT_FORK,          /* its keeper cannot be forked (EAGAIN, ENOMEM) */
        _SLOT_FAULT_MAX,
} SlotFault;

/* The key in the Manager's Faults: "slots_dir", "cgroup", "fork". */
const char *slot_fault_to_string(SlotFault f);

/* One server slot: its cgroup, its home, its process, its allocation. What it needs from
 * above, and what it tells it, goes through its host (slot-host.h). */
typedef struct Slot {
        SlotHost *host;
        Fleet *fleet;
        unsigned id;              /* machine-wide, the D-Bus object's number */
        unsigned index;           /* within the fleet: ports are base + index */
        char id_string[12];

        char *cgroup_path;        /* absolute */
        char *home;
        char *log_dir;
        SlotLogFields log_fields; /* SLOT_ID=…, FLEET=…, ALLOCATION_ID=… for the journal */
        char log_prefix[96];
        int cgroup_fd;
        int home_fd;
        sd_event_source *events_source;   /* inotify on cgroup.events */
        bool cgroup_killed;       /* cgroup.kill was used on it (see spawn.h) */

        uint16_t port;
        uint16_t query_port;

        ProcessState process_state;
        FailureReason failure;
        char *allocation_uuid;    /* NULL = not allocated */
        char *build_configuration;    /* the one the process runs, or will run at its start */
        char *reservation_uuid;   /* NULL = not reserved */
        usec_t reserved_until;    /* CLOCK_BOOTTIME (wallclock.h) */
        sd_event_source *reserve_timer;
        usec_t hold_until;        /* CLOCK_BOOTTIME, 0 = no hold */
        sd_event_source *hold_timer;
        bool stale;               /* runs a configuration Reload replaced: restart when free */
        bool retired;             /* its fleet or place is gone: remove when free */
        bool counted_busy;        /* counted in the manager's allocated-or-reserved count */
        bool state_changed;       /* listed for the next state commit (manager-state.c) */
        bool retired_gone;        /* removed from the manager, waiting to be freed */
        AllocEntry alloc_entry;   /* in its fleet's AllocIndex */

        pid_t main_pid;           /* the keeper, slotd's child (see spawn.h) */
        pid_t server_pid;         /* the game server under it, found lazily */
        int keeper_pidfd;         /* an adopted keeper that is not our child (slotd restarted) */
        sd_event_source *keeper_io;
        pid_t restored_keeper;    /* from the state file: a keeper that ran when slotd stopped */
        bool restored_ready;
        unsigned restored_keeper_restarts;
        usec_t restored_payload_at; /* when its allocation's payload was given (CLOCK_BOOTTIME) */
        int status_fd;            /* <state_dir>/exit/<id>, written by the keeper */
        int notify_fd;            /* <state_dir>/notify.d/<id>, held by the keeper too */
        int output_fd;            /* the log pipe's read end, held beside the keeper's, so
                                   * that a keeper killed outright loses none (slot-output.c) */
        sd_event_source *notify_source;
        char *notify_path;
        int token_fd;             /* the keeper's restart eventfd (keeper.c), -1: none */
        bool armed;               /* a restart waits in token_fd for the keeper to take */
        bool restart_pending;     /* the keeper took it: the server ended, the next is starting */
        bool keeper_outdated;     /* started before a Reload, or by an earlier slotd: no restarts */
        unsigned keeper_restarts; /* restarts made by the current keeper that slotd accounted */
        bool keeper_restart_failed; /* the last of them said its fork failed (not accounted) */
        bool exit_accounted;      /* the exit being settled was accounted already (slot-keeper.c) */
        sd_event_source *account_timer;   /* accounts a keeper's restart (slot-keeper.c) */
        sd_event_source *child_source;    /* owns the pidfd */
        sd_event_source *stop_timer;
        sd_event_source *start_defer;
        bool stop_requested;      /* no restart when the process is gone */
        bool restart_requested;   /* start again when the process is gone */
        int exit_code;            /* of the process that just ended */
        int exit_signal;
        bool exit_core;           /* the signal left a core (the keeper's "dumped") */
        int exec_errno;           /* it could not be exec'd: why (spawn.h), else 0 */

        unsigned restarts;
        int last_exit_code;
        int last_exit_signal;
        char *last_core;          /* where the last core went (slot-core.c), NULL = none */
        uint64_t log_bytes_lost;  /* output its keepers dropped (LogBytesLost), since slotd
                                   * started: this slotd's keepers', and an adopted one's */
        uint64_t log_lost_seen;   /* of which the current keeper's count, as last read */
        usec_t started_at;        /* CLOCK_BOOTTIME, 0 = never */
        bool ready;
        char *status;
        TimeWindow crashes;

        /* Checks (slot-checks.c). */
        bool checks_on;              /* in its fleet's check sweeps (slot-checks.c) */
        int cpu_stat_fd;             /* the cgroup's cpu.stat, open while the cgroup is */
        int memory_fd;               /* its memory.current (or cgroup.procs), the same */
        CgStatm statm;               /* without the memory controller: the server's statm */
        sd_event_source *heartbeat_timer;
        sd_event_source *start_timer;
        sd_event_source *readiness_timer; /* checks.readiness exec and query (slot-checks.c) */
        sd_event_source *misbehaviour_timer;
        usec_t check_cpu_usage;   /* cpu.stat usage_usec at the last check */
        usec_t check_cpu_at;
        usec_t heartbeat_since;   /* CLOCK_MONOTONIC start of the current heartbeat period */
        usec_t last_watchdog;     /* CLOCK_MONOTONIC of the last WATCHDOG=1 */
        TimeWindow *strikes[_CHECK_KIND_MAX]; /* allocated at a check's first strike */
        Probe *probe;
        ProbeResult *query;       /* the last valid query answer, NULL before the first */
        FailureReason pending_cause;  /* why slotd is ending the process: misbehaviour, start-timeout */
        /* A failure of this round of the fleet's checks, held for the round's verdict (why:
         * NULL = none), at held_index in the fleet's list (slot-checks.c); by check, then
         * HELD_HEARTBEAT_WAITING. */
        char *held_strike[HELD_LISTS];
        size_t held_index[HELD_LISTS];
        bool probe_in_sweep;         /* its query probe counts in the fleet's sweep */
        uint64_t heartbeat_round;    /* the fleet's heartbeat round it was last counted in */
        bool heartbeat_missed;       /* ... and missed a heartbeat in */
        char *last_check_error;      /* LastCheckError: a check that could not be made, NULL: none */
        CheckKind check_error_kind;  /* the cause told to the host (SlotHooks.check_error) */
        int check_error;             /* ... a negative errno, 0: none */
        RateLimit notify_stray_log;  /* notify datagrams from outside the slot (manager.c) */
        RateLimit notify_garbage_log; /* malformed ones from inside it (slot-process.c) */
        pid_t notify_stranger;       /* the last sender found outside the slot, */
        usec_t notify_stranger_until; /* ... taken as such without a look until then */
        uint64_t oom_kills_at_start;

        usec_t cpu_sample_usage;  /* cpu.stat usage_usec at the last sample */
        usec_t cpu_sample_at;     /* CLOCK_MONOTONIC of that sample */
        double cpu_usage;         /* cores over the last interval */

        /* Faults of the host (slot-fault.c). */
        SlotFault fault;          /* what holds the slot back now, NONE: nothing */
        char fault_why[256];      /* what failed, naming the file and the errno */
        int fault_error;          /* ... the errno, negative */
        sd_event_source *fault_timer;     /* the next retry */
        unsigned fault_retries;   /* retries so far: the back-off's exponent */
        bool start_blocked;       /* a start waits for the fault to clear */
        bool json_dirty;          /* server.json is to be written again (a retry) */
        size_t json_reserve;      /* bytes of server.json a refused allocation needed */
        int memory_events_fd;     /* memory.events, open while limits.memory_high is set */
        uint64_t high_events;     /* its "high" count at the last check */
        bool throttled;           /* over memory.high at the last check */

        /* The allocation as the game server heard of it (manager-events.c). */
        bool ready_for_players;   /* ReadyForPlayers: the server said so for this allocation */
        uint64_t events;          /* allocation events announced, the offset of the latest */
        char *announced_allocation;   /* the allocation of the latest event, NULL: none */
        char *last_deallocation;  /* the allocation the latest Deallocate event ended */

        SlotMetricsMark metrics;  /* what the machine's metrics count it as (manager-metrics.c) */
} Slot;

int slot_new(SlotHost *host, Fleet *f, unsigned id, unsigned index, Slot **ret);
Slot *slot_free(Slot *s);

/* Creates the cgroup (with limits) and home; empties a group left populated by an earlier
 * slotd. Then starts the server if the fleet starts on provision. */
int slot_provision(Slot *s);
/* Start-up: the start slot_provision() left to the event loop, made now; false when none was
 * scheduled. */
bool slot_start_scheduled_now(Slot *s);

int slot_start(Slot *s);          /* -EBUSY where the state refuses */
int slot_stop(Slot *s);
int slot_restart(Slot *s);
int slot_reset_failed(Slot *s);   /* -EBUSY unless failed */

void slot_handle_notify(Slot *s, const char *buf, size_t size);

/* The allocation view (SPEC §5). */
SlotState slot_state(const Slot *s);
SlotFacts slot_facts(const Slot *s);
bool slot_is_allocated(const Slot *s);
bool slot_is_running(const Slot *s);

/* Allocation, reservation, hold (SPEC §7). uuid and build_configuration are valid IDs
 * (build_configuration NULL = keep the slot's). A running server restarts into the
 * allocation's build configuration when it runs another (or one Reload replaced), or, with
 * restart, in any case. -EBUSY: the state does not allow it; -ENOENT: the fleet defines no
 * such build configuration. */
int slot_allocate(Slot *s, const char *uuid, const char *build_configuration, bool restart);
int slot_deallocate(Slot *s);
int slot_reserve(Slot *s, const char *uuid, usec_t timeout);
int slot_hold(Slot *s, usec_t timeout, usec_t *ret_until);
void slot_end_hold(Slot *s, HoldEvent event);
/* Clears a reservation (its timeout, or an allocation with its UUID). */
void slot_end_reservation(Slot *s);
/* A new configuration for the fleet: restart now if free, else when free. */
void slot_reconfigure(Slot *s, bool build_changed);
/* Puts back what the state file remembers, before the slot is provisioned. */
void slot_restore(Slot *s, const SlotRecord *r);
/* Fills r from the slot; the strings point into the slot (do not free). */
void slot_record(const Slot *s, SlotRecord *r);

/* Checks (slot-checks.c): started with each process, stopped at its exit. */
void slot_checks_start(Slot *s);
void slot_checks_stop(Slot *s);
void slot_checks_ready(Slot *s);
void slot_checks_watchdog(Slot *s);
/* Why the process that just ended ended, as far as slotd knows: misbehaviour, start-timeout,
 * oom, or none. */
FailureReason slot_checks_exit_cause(Slot *s);
/* Frees what a fleet's check rounds hold; its slots are gone. */
void fleet_checks_done(Fleet *f);
unsigned slot_strike_count(const Slot *s, CheckKind k);
/* cgroup.kill on the slot's group. */
void slot_kill(Slot *s);
/* A signal to the game server (through its keeper). */
int slot_signal(Slot *s, int sig);

/* Restarts made by the keeper itself (keeper.c, spawn.h). A restart is armed while slotd's
 * own verdict on any exit of the server would be an immediate restart
 * (slot_exit_always_restarts()), and taken back before anything that changes that verdict
 * or acts on the server. slot_update_arming() runs at every change of the slot
 * (SlotHooks.changed()). slot_disarm() returns 0 when the keeper will not restart the
 * server, -ECHILD when it took the restart first: the server has ended and the next one is
 * starting (the slot is busy until slotd hears of it). */
void slot_update_arming(Slot *s);
int slot_disarm(Slot *s);
/* The keeper wrote its status file (inotify on exit/): accounts a restart it made. */
void slot_keeper_status_changed(Slot *s);

/* The build configuration the slot runs (s->build_configuration), or the fleet's default
 * where the fleet no longer defines it. */
const BuildConfig *slot_build_config(const Slot *s);

/* limits.memory_high: whether the server was throttled there since the last check (logged
 * once per episode; no strike comes of it). Called by the checks. */
void slot_check_memory_high(Slot *s);

/* Reads cpu.stat and memory.current (or the processes' own accounting) now. */
uint64_t slot_memory_current(Slot *s);
/* Reads the current keeper's count of dropped output (spawn.h) and logs what is new; returns
 * LogBytesLost. Called at each check sweep, at the keeper's exit and when asked. */
uint64_t slot_log_bytes_lost(Slot *s);
/* The game server's PID, 0 when none runs. */
pid_t slot_server_pid(Slot *s);
double slot_cpu_usage(Slot *s);

#define log_slot_full_errno(slot, level, error, ...)                                       \
        ({                                                                                 \
                const Slot *_s = (slot);                                                   \
                int _l = (level), _e = (error);                                            \
                (log_get_max_level() >= _l)                                                \
                        ? log_internal(_l, _e, _s->log_prefix, _s->log_fields.list,        \
                                       __FILE__, __LINE__, __func__, __VA_ARGS__)          \
                        : -abs(_e);                                                        \
        })
#define log_slot_debug(s, ...) (void) log_slot_full_errno(s, LOG_DEBUG, 0, __VA_ARGS__)
#define log_slot_info(s, ...) (void) log_slot_full_errno(s, LOG_INFO, 0, __VA_ARGS__)
#define log_slot_notice(s, ...) (void) log_slot_full_errno(s, LOG_NOTICE, 0, __VA_ARGS__)
#define log_slot_warning(s, ...) (void) log_slot_full_errno(s, LOG_WARNING, 0, __VA_ARGS__)
#define log_slot_error_errno(s, e, ...) log_slot_full_errno(s, LOG_ERR, e, __VA_ARGS__)
#define log_slot_warning_errno(s, e, ...) log_slot_full_errno(s, LOG_WARNING, e, __VA_ARGS__)
