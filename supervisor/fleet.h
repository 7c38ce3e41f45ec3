/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "allocation.h"
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
} Fleet;
