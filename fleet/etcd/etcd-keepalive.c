/* SPDX-License-Identifier: MIT */
/* The etcd client's lease keepalives (etcd.h's etcd_lease_keepalive) on one long-lived
 * LeaseKeepAlive stream per endpoint's connection, as etcd's own Go client (clientv3's lease.go)
 * keeps them: a request is one LeaseKeepAliveRequest written on the stream (etcd-h2.h's
 * etcd_h2_stream_open and etcd_h2_stream_write; never half-closed), and etcd answers each with a
 * LeaseKeepAliveResponse carrying its ID, in the order the stream's requests came (its server
 * renews them one after the other). A new stream per keepalive (a gRPC call each) cost etcd
 * more CPU in the stream's set-up than in the renewal: 600 streams a second for 1,000 hosts at
 * a TTL of 5 s (tests/bench/fleet-scale).
 *
 * Each stream keeps, per lease ID, the requests waiting for an answer (oldest first, in a
 * hash map by ID: O(1) per message however many leases the process keeps, as host-sim's
 * 1,000) and how many answers are still owed to requests that left the queue before theirs
 * came: a request that timed out (-ETIMEDOUT at the client's request timeout, its endpoint
 * demoted, as for any request) or was cancelled. Its late answer is dropped, not given to the
 * next request of that lease: since etcd answers in order, each answer belongs to exactly one
 * request, and the next request's own answer follows it.
 *
 * etcd renews a stream's leases one after the other (a follower forwards each renewal to the
 * leader and waits for it), as it does for clientv3's one stream: a slow renewal delays the
 * ones behind it on the stream, within their own timeouts.
 *
 * New keepalives go to the stream on the client's current endpoint, opened on first use; a
 * stream on another endpoint is closed once nothing waits on it. When a stream ends (etcd's
 * RST_STREAM or GOAWAY, the connection lost or unanswered PINGs, an end with a gRPC status
 * such as hasleader's "no leader", or a message that is not etcd's) every request waiting on
 * it is handled as a repeatable request whose call ended so (etcd.c): sent again to the next
 * endpoint within its own timeout when the stream broke or was refused, otherwise answered
 * with the error (and its endpoint demoted, except when it sent nothing). No callback runs
 * inside nghttp2: the stream's bytes come from etcd-h2's dispatch, and the answers are
 * dispatched by etcd.c's queue, in the order they came. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-answer.h"
#include "etcd-grpc.h"
#include "etcd-private.h"
#include "hashmap.h"
#include "macro.h"

struct KeepaliveLease {
        KeepaliveStream *stream;
        LIST_FIELDS(KeepaliveLease, leases); /* in stream->leases */
        char key[24]; /* the map's key: the ID in decimal */
        EtcdRequest *queue, *queue_tail; /* waiting for an answer, oldest first */
        uint64_t owed; /* answers still to come for requests that left the queue first */
};

struct KeepaliveStream {
        Etcd *etcd;
        LIST_FIELDS(KeepaliveStream, streams); /* in etcd->keepalives */
        size_t endpoint;
        EtcdH2Call *call;
        bool ending; /* its call ended: it takes no more requests, its end is queued */
        Hashmap by_id; /* KeepaliveLease by key */
        KeepaliveLease *leases;
        size_t n_waiting;
};

/* ---- leases ---- */

static void lease_free_if_unused(KeepaliveLease *l) {
        KeepaliveStream *s = l->stream;

        if (l->queue || l->owed > 0)
                return;
        (void) hashmap_remove(&s->by_id, l->key, l);
        LIST_REMOVE(leases, s->leases, l);
        free(l);
}

static KeepaliveLease *lease_get(KeepaliveStream *s, int64_t id) {
        KeepaliveLease *l;
        char key[24];

        (void) snprintf(key, sizeof(key), "%" PRId64, id);
        l = hashmap_get(&s->by_id, key);
        if (l)
                return l;
        l = new0(KeepaliveLease, 1);
        if (!l)
                return NULL;
        l->stream = s;
        memcpy(l->key, key, sizeof(key));
        if (hashmap_put(&s->by_id, l->key, l) < 0) {
                free(l);
                return NULL;
        }
        LIST_PREPEND(leases, s->leases, l);
        return l;
}

static void lease_enqueue(KeepaliveLease *l, EtcdRequest *req) {
        req->ka_lease = l;
        req->ka_queue_next = NULL;
        req->ka_queue_prev = l->queue_tail;
        if (l->queue_tail)
                l->queue_tail->ka_queue_next = req;
        else
                l->queue = req;
        l->queue_tail = req;
        l->stream->n_waiting++;
}

/* req leaves its lease's queue; owed: etcd's answer to it is still to come, and is dropped. */
static void request_unqueue(EtcdRequest *req, bool owed) {
        KeepaliveLease *l = req->ka_lease;

        if (!l)
                return;
        if (l->queue_tail == req)
                l->queue_tail = req->ka_queue_prev;
        LIST_REMOVE(ka_queue, l->queue, req);
        req->ka_lease = NULL;
        l->stream->n_waiting--;
        if (owed)
                l->owed++;
        lease_free_if_unused(l);
}

/* ---- streams ---- */

static void stream_free(KeepaliveStream *s) {
        KeepaliveLease *l;

        etcd_h2_call_cancel(s->call);
        while ((l = s->leases)) {
                while (l->queue)
                        request_unqueue(l->queue, false);
                l->owed = 0;
                lease_free_if_unused(l);
        }
        hashmap_done(&s->by_id);
        LIST_REMOVE(streams, s->etcd->keepalives, s);
        free(s);
}

static void stream_end(KeepaliveStream *s, const EtcdH2Answer *a);

/* The stream's bytes (from etcd-h2's dispatch): each whole answer completes the oldest request
 * of its lease, unless one is owed to a request gone; a message that is not etcd's ends it. */
static size_t on_keepalive_stream(EtcdH2Call *c, const uint8_t *data, size_t size,
                                  void *userdata) {
        KeepaliveStream *s = userdata;
        Etcd *e = s->etcd;
        size_t taken = 0, len;
        int r;

        while ((r = etcd_grpc_frame_next(data + taken, size - taken, &len)) != 0) {
                EtcdAnswer a = { .response.message = "" };
                KeepaliveLease *l;
                char key[24];

                if (r > 0)
                        r = etcd_grpc_lease_keepalive_message_parse(data + taken, len, &a);
                if (r < 0) {
                        EtcdH2Answer bad = { .error = r == -ENOMEM ? -ENOMEM : -EBADMSG,
                                             .sent = true,
                                             .detail = r == -ENOMEM ? "out of memory"
                                                                    : "a message that is not "
                                                                      "a LeaseKeepAliveResponse" };
                        etcd_answer_done(&a);
                        stream_end(s, &bad); /* frees s; the call goes when this returns */
                        etcd_process(e);
                        return taken;
                }
                taken += len;
                (void) snprintf(key, sizeof(key), "%" PRId64, a.response.lease_id);
                l = hashmap_get(&s->by_id, key);
                if (l && l->owed > 0) {
                        l->owed--;
                        lease_free_if_unused(l);
                } else if (l && l->queue) {
                        EtcdRequest *req = l->queue;

                        request_unqueue(req, false);
                        req->ka_timer = sd_event_source_disable_unref(req->ka_timer);
                        req->ka_answer = a;
                        req->ka_answered = true;
                        etcd_request_complete(req);
                        continue;
                }
                /* an answer to no request of ours (one owed, or an ID never asked) */
                etcd_answer_done(&a);
        }
        etcd_process(e); /* last: a callback may free the Etcd, this stream with it */
        return taken;
}

static void on_keepalive_stream_end(EtcdH2Call *c, const EtcdH2Answer *a, void *userdata) {
        KeepaliveStream *s = userdata;
        Etcd *e = s->etcd;

        s->call = NULL;
        stream_end(s, a);
        etcd_process(e);
}

static KeepaliveStream *stream_open(Etcd *e, size_t endpoint, int *ret_error) {
        KeepaliveStream *s = new0(KeepaliveStream, 1);
        int r;

        if (!s) {
                *ret_error = -ENOMEM;
                return NULL;
        }
        s->etcd = e;
        s->endpoint = endpoint;
        r = etcd_h2_stream_open(e->h2[endpoint], etcd_grpc_path(ETCD_ANSWER_LEASE_KEEPALIVE),
                                on_keepalive_stream, on_keepalive_stream_end, s, &s->call);
        if (r < 0) {
                free(s);
                *ret_error = r;
                return NULL;
        }
        LIST_PREPEND(streams, e->keepalives, s);
        return s;
}

static KeepaliveStream *stream_find(Etcd *e, size_t endpoint) {
        for (KeepaliveStream *s = e->keepalives; s; s = s->streams_next)
                if (!s->ending && s->endpoint == endpoint)
                        return s;
        return NULL;
}

/* ---- requests ---- */

/* Writes req's LeaseKeepAliveRequest on the stream of its endpoint and queues it. A stream
 * whose call just ended (its end not dispatched yet) takes no more: a new one is opened. */
static int keepalive_send(EtcdRequest *req) {
        Etcd *e = req->t.etcd;
        _cleanup_(etcd_bytes_done) EtcdBytes b = {};
        int r = etcd_grpc_lease_keepalive(req->lease_id, &b);

        if (r < 0)
                return r;
        for (unsigned attempt = 0;; attempt++) {
                KeepaliveStream *s = stream_find(e, req->t.endpoint);
                KeepaliveLease *l;

                if (!s && !(s = stream_open(e, req->t.endpoint, &r)))
                        return r;
                l = lease_get(s, req->lease_id);
                if (!l)
                        return -ENOMEM;
                r = etcd_h2_stream_write(s->call, b.data, b.size);
                if (r == -EPIPE && attempt == 0) {
                        s->ending = true;
                        lease_free_if_unused(l);
                        continue;
                }
                /* -EPIPE twice: a stream that ended at once; its end answers req */
                if (r < 0 && r != -EPIPE) {
                        lease_free_if_unused(l);
                        return r;
                }
                lease_enqueue(l, req);
                return 0;
        }
}

static int on_keepalive_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        EtcdRequest *req = userdata;
        Etcd *e = req->t.etcd;
        char what[512], why[64];

        req->ka_timer = sd_event_source_disable_unref(req->ka_timer);
        request_unqueue(req, true);
        etcd_transfer_describe(&req->t, what, sizeof(what));
        (void) snprintf(why, sizeof(why), "no answer within %" PRIu64 " ms",
                        (uint64_t) (e->timeout / USEC_PER_MSEC));
        etcd_transfer_demote_endpoint(&req->t);
        etcd_answer_fail(&req->ka_answer, -ETIMEDOUT, what, why);
        req->ka_answered = true;
        etcd_request_complete(req);
        etcd_process(e);
        return 0;
}

/* Whether the stream was ended by etcd with an error status, gRPC's or HTTP's (not broken). */
static bool ended_by_status(const EtcdH2Answer *a) {
        return a->error == 0 && ((a->grpc_status && !streq(a->grpc_status, "0")) ||
                                 (a->http_status != 0 && a->http_status != 200));
}

/* How req's stream ended, as etcd.c answers a request whose call ended so: a failure of the
 * call (demoting the endpoint unless nothing was sent), or etcd's status (an end with
 * grpc-status 0 and no answer is a stream that broke). */
static void request_fail(EtcdRequest *req, const EtcdH2Answer *a) {
        char what[512];
        int error = a->error;

        etcd_transfer_describe(&req->t, what, sizeof(what));
        if (ended_by_status(a)) {
                etcd_transfer_demote_endpoint(&req->t);
                if (etcd_grpc_answer_parse(ETCD_ANSWER_LEASE_KEEPALIVE, a->http_status,
                                           a->grpc_status, a->grpc_message, NULL, 0,
                                           &req->ka_answer) < 0) {
                        _cleanup_free_ char *m = req->ka_answer.message
                                                         ? strdup(req->ka_answer.message)
                                                         : NULL;
                        etcd_answer_fail(&req->ka_answer, req->ka_answer.response.error, what,
                                         m);
                }
                return;
        }
        if (error == 0)
                error = -ECONNRESET;
        if (error != -ECONNREFUSED)
                etcd_transfer_demote_endpoint(&req->t);
        etcd_answer_fail(&req->ka_answer, error, what,
                         a->error == 0 ? "etcd ended the LeaseKeepAlive stream" : a->detail);
}

/* The stream is over: each request waiting on it goes to the next endpoint, or is answered
 * with how the stream ended. Frees s. */
static void stream_end(KeepaliveStream *s, const EtcdH2Answer *a) {
        EtcdH2Answer as_call = *a;
        KeepaliveLease *l;

        /* broken by etcd or the connection, not ended with a status: as a call that was reset */
        if (as_call.error == 0 && !ended_by_status(a))
                as_call.error = -ECONNRESET;
        s->ending = true;
        while ((l = s->leases)) {
                EtcdRequest *req;

                l->owed = 0;
                if (!l->queue) {
                        lease_free_if_unused(l);
                        continue;
                }
                req = l->queue;
                request_unqueue(req, false);
                if (etcd_request_may_fail_over(req, &as_call) &&
                    etcd_transfer_failover(&req->t) && keepalive_send(req) >= 0)
                        continue;
                req->ka_timer = sd_event_source_disable_unref(req->ka_timer);
                request_fail(req, a);
                req->ka_answered = true;
                etcd_request_complete(req);
        }
        stream_free(s);
}

int etcd_keepalive_start(EtcdRequest *req) {
        Etcd *e = req->t.etcd;
        int r;

        /* a stream left on an endpoint that is no longer the current one, with nothing on it */
        for (KeepaliveStream *s = e->keepalives, *next; s; s = next) {
                next = s->streams_next;
                if (!s->ending && s->endpoint != e->current && s->n_waiting == 0)
                        stream_free(s);
        }
        r = sd_event_add_time(e->event, &req->ka_timer, CLOCK_MONOTONIC, req->deadline, 0,
                              on_keepalive_timeout, req);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(req->ka_timer, "etcd-keepalive-timer");
        return keepalive_send(req);
}

void etcd_keepalive_forget(EtcdRequest *req) {
        request_unqueue(req, true);
        req->ka_timer = sd_event_source_disable_unref(req->ka_timer);
        etcd_answer_done(&req->ka_answer);
        req->ka_answered = false;
}

void etcd_keepalive_free_all(Etcd *e) {
        while (e->keepalives)
                stream_free(e->keepalives);
}
