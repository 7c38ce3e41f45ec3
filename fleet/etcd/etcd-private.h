/* SPDX-License-Identifier: MIT */
#pragma once

/* The etcd client's insides, shared by etcd.c (the client, its requests and the loop) and
 * etcd-watch.c (its watches): nothing else includes this. */

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include <systemd/sd-event.h>

#include "curl-event.h"
#include "etcd-h2.h"
#include "etcd-json.h"
#include "etcd.h"
#include "list.h"
#include "time-util.h"

typedef enum TransferKind {
        TRANSFER_REQUEST,
        TRANSFER_WATCH,
} TransferKind;

/* What a transfer (request or watch) has in common; first member of both. */
typedef struct Transfer {
        TransferKind kind;
        Etcd *etcd;
        CURL *easy;
        char *body;
        size_t body_size, body_offset; /* what curl read of it so far */
        /* A read, a keepalive, a watch: may be sent again (to this endpoint or the next). A
         * write is never sent twice: curl gets its body from a callback it cannot rewind,
         * so that its own retry of a request on a reused connection that died fails
         * (CURLE_SEND_FAIL_REWIND) rather than sending the write again. */
        bool repeatable;
        bool grpc; /* a gRPC call on etcd->h2[endpoint], not a curl transfer */
        const char *path;
        size_t endpoint; /* index into etcd->endpoints */
        size_t tries;    /* endpoints tried without sending anything */
        bool in_multi;
        CURLcode result;
        char errbuf[CURL_ERROR_SIZE];
} Transfer;

struct EtcdWatch {
        Transfer t;
        LIST_FIELDS(EtcdWatch, watches);
        unsigned n_ref;
        bool pending; /* bytes or the end arrived, not yet dispatched */
        bool ended;   /* the transfer is over */
        bool over;    /* the callback had its error, or the watch was freed */
        int buffer_error;
        int64_t revision;
        EtcdLineBuffer lines;
        /* gRPC's: the Watch stream on etcd->h2[t.endpoint], and whether a message came on
         * it (then it never goes to another endpoint: the watch is over when it ends) */
        EtcdH2Call *call;
        bool received;
        etcd_watch_callback_t cb;
        void *userdata;
};

struct Etcd {
        unsigned n_ref;
        bool freed;
        sd_event *event;
        CurlEvent *curl; /* multi on the loop */
        CURLM *multi;
        char **endpoints;
        size_t n_endpoints, current;
        EtcdH2 **h2; /* per endpoint, when the KV calls are gRPC's; else NULL */
        usec_t timeout;
        char *ca_file, *cert_file, *key_file;
        struct curl_slist *headers, *watch_headers;
        EtcdRequest *active;
        EtcdRequest *completed, *completed_tail;
        EtcdWatch *watches;
};


/* Transfers (etcd.c): curl's easy handle for t, with write_cb for what comes; (re)started on
 * t->endpoint with timeout_usec for the whole transfer (0: none) and connect_usec to connect;
 * stopped; freed (its body too); after a failure that sent nothing (or any, when repeatable),
 * whether there is another endpoint to try, t->endpoint then that one. */
int etcd_transfer_setup(Transfer *t, size_t (*write_cb)(char *, size_t, size_t, void *),
                        struct curl_slist *headers);
int etcd_transfer_start(Transfer *t, usec_t timeout_usec, usec_t connect_usec);
void etcd_transfer_stop(Transfer *t);
void etcd_transfer_done(Transfer *t);
bool etcd_transfer_failover(Transfer *t, bool repeatable);

/* Watches (etcd-watch.c), from etcd.c's loop: a gateway watch's bytes or end (marked pending),
 * then dispatched to its callback. */
void etcd_watch_finished(EtcdWatch *w, CURLcode result);
void etcd_watch_dispatch(EtcdWatch *w);
