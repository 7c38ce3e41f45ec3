/* SPDX-License-Identifier: MIT */
#pragma once

/* The etcd client's insides, shared by etcd.c (the client, its requests and the loop) and
 * etcd-watch.c (its watches): nothing else includes this. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "etcd-h2.h"
#include "etcd.h"
#include "list.h"
#include "time-util.h"

/* What a request and a watch have in common (first member of both): the gRPC call's body,
 * path and endpoint. */
typedef struct Transfer {
        Etcd *etcd;
        uint8_t *body; /* the prefixed message */
        size_t body_size;
        /* A read, a keepalive, a watch: may be sent again (to this endpoint or the next). A
         * write that was sent is never sent again: its outcome is the caller's to learn. */
        bool repeatable;
        const char *path;
        size_t endpoint; /* index into etcd->endpoints */
        size_t tries;    /* endpoints tried without an answer */
} Transfer;

struct EtcdWatch {
        Transfer t;
        LIST_FIELDS(EtcdWatch, watches);
        unsigned n_ref;
        bool over; /* the callback had its error, or the watch was freed */
        int64_t revision;
        /* the Watch stream on etcd->h2[t.endpoint], and whether a message came on it (then it
         * never goes to another endpoint: the watch is over when it ends) */
        EtcdH2Call *call;
        bool received;
        etcd_watch_callback_t cb;
        void *userdata;
};

struct Etcd {
        unsigned n_ref;
        bool freed;
        sd_event *event;
        char **endpoints;
        size_t n_endpoints, current;
        EtcdH2 **h2; /* one connection per endpoint */
        usec_t timeout;
        EtcdRequest *active;
        EtcdRequest *completed, *completed_tail;
        EtcdWatch *watches;
};

/* After a failure that sent nothing (or any, when t is repeatable), whether there is another
 * endpoint to try: t->endpoint is then that one (etcd.c). */
bool etcd_transfer_failover(Transfer *t);
