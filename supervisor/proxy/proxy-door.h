/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "alloc-event.h"

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
/* ... close_doors: lets go of the proxy (which stays for the next slotd). */
void proxy_door_close(ProxyDoor *d);
/* ... event: the event to the proxy of d, if it runs. */
void proxy_door_event(Manager *m, const AllocEvent *e, void *userdata);
