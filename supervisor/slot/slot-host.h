/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "checks.h"
#include "probe.h"
#include "time-util.h"

typedef struct Slot Slot;
typedef struct Fleet Fleet;

/* The lists of held strikes (slot-checks.c): one per check, and the heartbeat misses of the
 * round before, which wait for the verdict of the round after them. */
#define HELD_HEARTBEAT_WAITING _CHECK_KIND_MAX
#define HELD_LISTS (_CHECK_KIND_MAX + 1)

/* What changed of a slot besides its state (SlotHooks.details_changed(), a mask). */
typedef enum SlotChange {
        SLOT_CHANGE_READY_FOR_PLAYERS = 1u << 0, /* s->ready_for_players */
        SLOT_CHANGE_STATUS            = 1u << 1, /* s->status, from the server's STATUS= */
        SLOT_CHANGE_STRIKES           = 1u << 2, /* the strikes within checks.window */
        SLOT_CHANGE_CHECK_ERROR       = 1u << 3, /* s->last_check_error */
        SLOT_CHANGE_QUERY             = 1u << 4, /* s->query, the query's last answer */
} SlotChange;

/* What a slot tells the one above it (the manager): slots call these, never the manager's
 * functions, so that arrows point down. 'userdata' is SlotHost.userdata. */
typedef struct SlotHooks {
        /* Every change of the slot: its allocation class, the idle count, the bus; with
         * 'durable' its record goes into the next state commit. Calls slot_update_arming(). */
        void (*changed)(Slot *s, bool durable, void *userdata);
        /* The UUID index: an allocation or reservation UUID now names this slot, or no more.
         * uuid_link() may fail (-ENOMEM, -EEXIST); 'uuid' is the slot's own copy. */
        int (*uuid_link)(Slot *s, const char *uuid, void *userdata);
        void (*uuid_unlink)(Slot *s, const char *uuid, void *userdata);
        /* A retired slot is free: remove it (outside the callback that found it so). */
        void (*retire)(Slot *s, void *userdata);
        /* The server crashed (exit_code, exit_signal say how); 'reason' the cause, or "". */
        void (*crashed)(Slot *s, const char *reason, void *userdata);
        /* These details changed (a SlotChange mask), nothing else of the slot. */
        void (*details_changed)(Slot *s, unsigned changes, void *userdata);
        /* A check failed: its strikes within checks.window, this one included. */
        void (*misbehaved)(Slot *s, CheckKind check, unsigned strikes, void *userdata);
        /* A check of the slot could not be made, for a reason of the host (error, a negative
         * errno; message says what failed), or with message NULL no longer for that reason. */
        void (*check_error)(Slot *s, CheckKind check, int error, const char *message,
                            void *userdata);
        /* The verdict of a round of a fleet's check: a machine fault (its strikes dropped)
         * or not. */
        void (*check_verdict)(Fleet *f, CheckKind check, unsigned failing, unsigned checked,
                              bool machine_fault, void *userdata);
        /* A round of a fleet's check sweep is over (its verdict given): how long it took. */
        void (*sweep_done)(Fleet *f, usec_t duration, void *userdata);
        /* The slot's fault of the host (s->fault, s->fault_why) is now what it is; 'old' is
         * what it was (slot.h, SlotFault). */
        void (*fault_changed)(Slot *s, int old, void *userdata);
        /* The machine's furthest hold (CLOCK_BOOTTIME). */
        void (*hold_started)(Slot *s, usec_t until, void *userdata);
        void (*hold_ended)(Slot *s, usec_t until, void *userdata);
        /* Reads one datagram from the slot's notify socket 'fd' and hands it to
         * slot_handle_notify() if its sender is a process of this slot; false when there
         * was none to read. */
        bool (*receive_notify)(Slot *s, int fd, void *userdata);
        /* Whether a child cloned into a cgroup emptied by cgroup.kill dies at once
         * (spawn_probe_killed_cgroup_bug()): asked only before such a start, so the host
         * probes on first need, not at start-up. NULL: it does not. */
        bool (*killed_cgroup_bug)(Slot *s, void *userdata);
} SlotHooks;

/* What slots need from above: the loop, the machine's facts, the keeper, and the hooks. The
 * manager embeds one and keeps it current; slots only read it. */
typedef struct SlotHost {
        sd_event *event;
        ProbeHub *probe_hub;         /* the one socket of all query probes */
        const char *slots_dir;       /* supervisor.slots_dir: <slots_dir>/<fleet>/slot-<id> */
        const char *notify_dir;      /* <state_dir>/notify.d: a socket per slot */
        int exit_dir_fd;             /* <state_dir>/exit: the keepers' status files */
        int keeper_fd;               /* slotd-keeper, O_PATH (spawn_open_keeper()) */
        unsigned enforced;           /* CGROUP_MASK of controllers in force for slots */
        const char *machine_number;  /* server.json's machineID: the machine number */
        const char *ip;
        const char *ipv6;
        const char *local_proxy_url; /* localProxyUrl in server.json, NULL: no proxy */

        const SlotHooks *hooks;
        void *userdata;
} SlotHost;
