/* SPDX-License-Identifier: MIT */
#pragma once

/* The etcd client's insides, shared by etcd.c (the client, its requests and the loop),
 * etcd-watch.c (its watches) and etcd-keepalive.c (its lease keepalives): nothing else
 * includes this. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "etcd-answer.h"
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

typedef struct KeepaliveStream KeepaliveStream;
typedef struct KeepaliveLease KeepaliveLease;

struct EtcdRequest {
        Transfer t;
        LIST_FIELDS(EtcdRequest, list); /* in etcd->active, or etcd->completed once done */
        bool completed; /* in etcd->completed, not etcd->active */
        bool dispatching;
        EtcdAnswerKind answer_kind;
        /* the call in flight, then how it ended */
        EtcdH2Call *call;
        int call_error;
        char *call_detail, *grpc_status, *grpc_message;
        long call_status;
        uint8_t *answer;
        size_t answer_size;
        usec_t deadline;
        etcd_callback_t cb;
        void *userdata;
        /* A keepalive (etcd-keepalive.c), on its endpoint's LeaseKeepAlive stream rather than a
         * call of its own: its lease, its place in the lease's queue there while it waits, the
         * timer of its deadline, then its answer (ka_answered), parsed already. */
        int64_t lease_id;
        KeepaliveLease *ka_lease;
        LIST_FIELDS(EtcdRequest, ka_queue);
        sd_event_source *ka_timer;
        bool ka_answered;
        EtcdAnswer ka_answer;
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
        KeepaliveStream *keepalives; /* the LeaseKeepAlive streams (etcd-keepalive.c) */
};

/* After a failure that sent nothing (or any, when t is repeatable), whether there is another
 * endpoint to try: t->endpoint is then that one (etcd.c). */
bool etcd_transfer_failover(Transfer *t);

/* A request that failed after it was sent makes the next requests go to the next endpoint. */
void etcd_transfer_demote_endpoint(Transfer *t);
/* "POST <endpoint><path>", the start of a failed request's message. */
void etcd_transfer_describe(const Transfer *t, char *buf, size_t size);
/* Whether a call of req that ended so may go to the next endpoint while there is time: one
 * that sent nothing (refused, no connection, TLS failed before it left), or a repeatable one
 * that broke. */
bool etcd_request_may_fail_over(EtcdRequest *req, const EtcdH2Answer *a);
/* req is answered: to the end of the queue of answers etcd_process() dispatches in order. */
void etcd_request_complete(EtcdRequest *req);
/* The answers queued, each to its callback (which may free the Etcd). */
void etcd_process(Etcd *e);

/* etcd-keepalive.c: sends the keepalive req (lease_id, deadline and t set; t.endpoint the
 * current one) on its endpoint's LeaseKeepAlive stream; its answer completes it. */
int etcd_keepalive_start(EtcdRequest *req);
/* req is freed: out of its stream (its answer, if etcd still sends one, is dropped). */
void etcd_keepalive_forget(EtcdRequest *req);
/* Every stream closed, nothing answered (etcd_free: no request is left). */
void etcd_keepalive_free_all(Etcd *e);
