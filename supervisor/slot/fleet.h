/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "allocation.h"
#include "check-tally.h"
#include "config.h"
#include "slot-host.h"
#include "time-util.h"

/* A fleet as it runs: its config section, its cgroup, its identity, its slots. The manager
 * creates and changes it (manager.c, manager-reload.c); its slots read it. */
typedef struct Fleet {
        SlotHost *host;              /* the manager's, for the fleet's check sweeps */
        const FleetConfig *config;   /* in the manager's config, or owned_config once retired */
        FleetConfig *owned_config;
        char *cgroup_path;
        uid_t uid;
        gid_t gid;
        Slot **slots;
        size_t n_slots;
        AllocIndex index;            /* allocation candidates by class */
        struct sock_fprog *seccomp;  /* compiled from security.seccomp, NULL = off */
        bool keeper_restarts;        /* the filter lets keepers restart servers (spawn.h) */
        bool retired;                /* gone from the config: drains, then goes */
        /* One check sweep per checks.interval over the fleet's running slots, done in
         * chunks (slot-checks.c); off while no slot is checked. */
        sd_event_source *sweep_timer;
        sd_event_source *sweep_defer;
        usec_t sweep_started;
        size_t sweep_next;
        bool sweeping;               /* a sweep is under way */
        bool sweep_checked;          /* the sweep under way found a slot to check */
        /* Mass-failure protection (slot-checks.c): each round of checks is tallied and its
         * strikes held until its verdict: the sweep's cpu, memory and query once every probe
         * of it is done, heartbeat's once the period after its own is over. */
        CheckTally tally[_CHECK_KIND_MAX];
        Slot **held[HELD_LISTS];     /* slots with a held strike (slot.h) */
        size_t n_held[HELD_LISTS], n_held_allocated[HELD_LISTS];
        unsigned probes_pending;     /* query probes of the sweep not done yet */
        bool verdict_due;            /* the sweep's verdict has not been given */
        bool sweep_fault[_CHECK_KIND_MAX]; /* the verdict of the check's sweep before */
        sd_event_source *verdict_defer;
        HeartbeatRound heartbeat_round;
        bool heartbeat_fault[2];     /* the verdicts of the two rounds before the last */
} Fleet;
