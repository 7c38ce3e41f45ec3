/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "alloc-event.h"
#include "config.h"

/* slotd's side of the local proxy (localproxy/, SPEC §11): slotd binds the listening sockets,
 * starts slotd-proxy unprivileged and confined with them and one end of a socketpair, restarts
 * it when it dies, tells it who is at the other end of each connection (sock_diag), carries
 * its requests out through the operations (ops.h) and sends it the allocation events. The
 * proxy parses everything that comes from the network; slotd decides everything. */

typedef struct Manager Manager;
typedef struct Proxy Proxy;

/* The door: made by main.c, given to the core's hooks as their userdata, it outlives the
 * Manager it serves. */
typedef struct ProxyDoor {
        Manager *manager;
        Proxy *proxy;                /* NULL while localproxy.listen and metrics.listen are off */
} ProxyDoor;

/* Its ManagerHooks.open_doors: binds the listening sockets (localproxy.listen,
 * metrics.listen) and starts the proxy; d->proxy stays NULL when both are off (the process
 * also runs for metrics.listen alone). Errors name the address. */
int proxy_door_open(ProxyDoor *d);
/* ... metrics_listen (every Reload): unless it is what the proxy serves already (off: no
 * proxy, or one not serving metrics), binds metrics.listen 'l' (AF_UNSPEC: off) and hands it to
 * the running proxy (ipc.h "metrics_listen"), which keeps its SDK connections; starts the
 * proxy if it did not run, stops it if it ran for metrics alone. A default that cannot be
 * bound is a warning (metrics off); any other failure changes nothing and sets *ret_error,
 * naming the address. */
int proxy_door_metrics_listen(ProxyDoor *d, const ProxyListen *l, bool is_default,
                              char **ret_error);
/* ... close_doors: lets go of the proxy (which stays for the next slotd). */
void proxy_door_close(ProxyDoor *d);
/* ... event: the event to the proxy of d, if it runs. */
void proxy_door_event(Manager *m, const AllocEvent *e, void *userdata);
