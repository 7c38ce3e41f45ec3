/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "hashmap.h"
#include "ops.h"
#include "proxy.h"
#include "time-util.h"

/* One TCP connection of the proxy, as slotd knows it. */
typedef struct ProxyConn {
        uint64_t id;
        char key[24];                /* id in decimal, the key in Proxy.conns */
        bool admin;                  /* outside any slot, made by root or an admin */
        unsigned slot_id;            /* the slot it was made in, OPS_NO_SLOT: none */
} ProxyConn;

struct Proxy {
        Manager *manager;
        int *listen_fds;
        size_t n_listen;
        int metrics_fd;              /* metrics.listen (SPEC §14), -EBADF: off */
        int ipc_fd;                  /* our end of the socketpair, -EBADF while none runs */
        sd_event_source *ipc_source;
        pid_t pid;
        sd_event_source *child_source;
        sd_event_source *restart_timer;
        usec_t restart_delay;
        usec_t started_at;           /* CLOCK_MONOTONIC */
        uint64_t generation;         /* one per process: a reply for an older one is dropped */
        Hashmap conns;               /* "id" → ProxyConn, of the current process */
        int diag_fd;                 /* NETLINK_SOCK_DIAG */
        bool diag_warned;            /* it failed for a reason other than a gone client */
        int mount_fd;                /* the cgroup2 mount, for cgroup ids */
        int exe_fd;                  /* slotd-proxy, O_PATH */
        uid_t uid;
        gid_t gid;
        struct sock_fprog *seccomp;
};
