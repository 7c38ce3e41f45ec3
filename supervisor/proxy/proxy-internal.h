/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "hashmap.h"
#include "ops.h"
#include "proxy-door.h"
#include "ratelimit.h"
#include "time-util.h"

/* One TCP connection of the proxy, as slotd knows it. */
typedef struct ProxyConn {
        uint64_t id;
        char key[24];                /* id in decimal, the key in Proxy.conns */
        bool admin;                  /* outside any slot, made by root or an admin */
        unsigned slot_id;            /* the slot it was made in, OPS_NO_SLOT: none */
        int unavailable;             /* sock_diag could not be asked (its errno): the caller
                                      * is unknown, which is not a stranger */
} ProxyConn;

struct Proxy {
        ProxyDoor *door;             /* whose d->proxy this is */
        Manager *manager;
        bool serves_sdk;             /* localproxy.listen is on (else metrics.listen alone) */
        int *listen_fds;             /* bound by us (proxy-process.c), kept across restarts */
        size_t n_listen;
        ProxyListen metrics_listen;  /* what metrics_fd serves (its own copy: Reload replaces
                                      * the configuration); family AF_UNSPEC: off, or its
                                      * default skipped (it could not be bound) */
        bool metrics_default;        /* metrics_listen is the key's default */
        int metrics_fd;              /* metrics.listen (SPEC §14), -EBADF: off or not bound */
        bool bound;                  /* listen_fds and metrics_fd are bound */
        char *control_path;          /* <state_dir>/proxy.sock: where a running proxy waits */
        int ipc_fd;                  /* the channel to the proxy, -EBADF while none runs */
        sd_event_source *ipc_source;
        pid_t pid;
        sd_event_source *exit_source; /* its exit: a child source, or its pidfd readable */
        sd_event_source *restart_timer;
        usec_t restart_delay;
        usec_t started_at;           /* CLOCK_MONOTONIC */
        uint64_t generation;         /* one per channel: a reply for an older one is dropped */
        Hashmap conns;               /* "id" → ProxyConn, of the current channel */
        int diag_fd;                 /* NETLINK_SOCK_DIAG, -errno: not open (opened again) */
        RateLimit diag_log;          /* lookups that failed while sock_diag works */
        int mount_fd;                /* the cgroup2 mount, for cgroup ids */
        int exe_fd;                  /* slotd-proxy, O_PATH */
        uid_t uid;
        gid_t gid;
        struct sock_fprog *seccomp;
};

/* proxy.c */
int proxy_on_ipc(sd_event_source *source, int fd, uint32_t revents, void *userdata);
void proxy_forget_conns(Proxy *p);
/* What a caller of an unavailable connection is told (ipc.h "unavailable"; 503). */
void proxy_conn_unavailable_message(const ProxyConn *c, char *buf, size_t size);

/* proxy-process.c: the proxy's process. setup: what every start needs (its binary, its
 * identity, its filter); start: attach to the proxy an earlier slotd left running if its
 * hello (its first message) shows it serves this configuration, else start one. */
int proxy_setup(Proxy *p);
int proxy_start(Proxy *p);
void proxy_stop_process(Proxy *p);
void proxy_process_free(Proxy *p);
void proxy_retire_stale(const char *state_dir);
/* The process goes (SIGTERM) and is reaped when it exits; its connections go with it. */
void proxy_terminate_process(Proxy *p);
/* Binds metrics.listen 'l': the socket, or -errno. */
int proxy_bind_metrics(const ProxyListen *l);
/* p serves metrics.listen 'l' (a copy is kept) on fd (taken; -EBADF: off). */
int proxy_set_metrics(Proxy *p, const ProxyListen *l, bool is_default, int fd);

/* Within the door (proxy.c, proxy-requests.c, proxy-metrics.c). */
void proxy_send_event(Proxy *p, const AllocEvent *e);

/* proxy-metrics.c: the proxy's scrape of metrics.listen, answered with the text (ipc.h). */
void proxy_handle_metrics(Proxy *p, json_t *request);

/* proxy-requests.c: one request of the proxy, answered with exactly one reply. */
void proxy_handle_request(Proxy *p, json_t *request);
int proxy_send(Proxy *p, json_t *message);
/* The identity of a connection the proxy told us of, NULL if it did not. */
struct ProxyConn *proxy_conn(Proxy *p, uint64_t conn);
Manager *proxy_manager(Proxy *p);
ProxyDoor *proxy_door(Proxy *p);
uint64_t proxy_generation(Proxy *p);
