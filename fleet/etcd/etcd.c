/* SPDX-License-Identifier: MIT */
/* The etcd client (etcd.h): every call etcd's gRPC (etcd-grpc.h) on one HTTP/2 connection per
 * endpoint (etcd-h2.c on nghttp2; TLS on gnutls for https://, etcd-tls.c; a host name looked
 * up by c-ares, etcd-resolve.c), the watches in etcd-watch.c. No user callback ever runs
 * inside nghttp2's callbacks: those only collect bytes, and the answers are dispatched from
 * the loop afterwards, so a callback may start, cancel or free anything, the Etcd included. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "endpoint-url.h"
#include "etcd-answer.h"
#include "etcd-grpc.h"
#include "etcd-h2.h"
#include "etcd-private.h"
#include "etcd.h"
#include "list.h"
#include "macro.h"
#include "time-util.h"

#define ETCD_TIMEOUT_DEFAULT (2 * USEC_PER_SEC)

/* ---- lists ---- */

static void request_unlink(EtcdRequest *req) {
        Etcd *e = req->t.etcd;

        if (!req->completed) {
                LIST_REMOVE(list, e->active, req);
                return;
        }
        if (e->completed_tail == req)
                e->completed_tail = req->list_prev;
        LIST_REMOVE(list, e->completed, req);
        req->completed = false;
}

/* Done: to the end of the queue of answers to dispatch, which keeps their order. */
void etcd_request_complete(EtcdRequest *req) {
        Etcd *e = req->t.etcd;

        LIST_REMOVE(list, e->active, req);
        req->completed = true;
        req->list_prev = e->completed_tail;
        req->list_next = NULL;
        if (e->completed_tail)
                e->completed_tail->list_next = req;
        else
                e->completed = req;
        e->completed_tail = req;
}

/* ---- endpoints ---- */

/* After a failure that sent nothing, the next endpoint, unless every one was tried. */
bool etcd_transfer_failover(Transfer *t) {
        Etcd *e = t->etcd;

        if (++t->tries >= e->n_endpoints)
                return false;
        if (e->current == t->endpoint)
                e->current = (t->endpoint + 1) % e->n_endpoints;
        t->endpoint = (t->endpoint + 1) % e->n_endpoints;
        return true;
}

/* A request that failed after it was sent makes the next requests try the next endpoint: the
 * member may be cut off or hung. */
void etcd_transfer_demote_endpoint(Transfer *t) {
        Etcd *e = t->etcd;

        if (e->n_endpoints > 1 && e->current == t->endpoint)
                e->current = (t->endpoint + 1) % e->n_endpoints;
}

void etcd_transfer_describe(const Transfer *t, char *buf, size_t size) {
        (void) snprintf(buf, size, "POST %s%s", t->etcd->endpoints[t->endpoint], t->path);
}

/* ---- requests ---- */

static void request_forget_call(EtcdRequest *req) {
        etcd_h2_call_cancel(req->call);
        req->call = NULL;
        req->call_detail = mfree(req->call_detail);
        req->grpc_status = mfree(req->grpc_status);
        req->grpc_message = mfree(req->grpc_message);
        req->answer = mfree(req->answer);
        req->answer_size = 0;
        req->call_error = 0;
        req->call_status = 0;
}

static EtcdRequest *request_free(EtcdRequest *req) {
        if (!req)
                return NULL;
        request_forget_call(req);
        etcd_keepalive_forget(req);
        free(req->t.body);
        return mfree(req);
}

static usec_t request_remaining(EtcdRequest *req) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        return req->deadline > now ? req->deadline - now : 0;
}

static uint8_t *bytes_dup(const uint8_t *p, size_t n) {
        uint8_t *d = malloc(n);

        if (d)
                memcpy(d, p, n);
        return d;
}

static int request_start(EtcdRequest *req, usec_t timeout_usec);

/* A call that ended unanswered may go to the next endpoint while there is time: one that sent
 * nothing (refused, no connection, TLS failed before it left), or a read. */
bool etcd_request_may_fail_over(EtcdRequest *req, const EtcdH2Answer *a) {
        return (a->error == -ECONNREFUSED || a->error == -ECONNRESET ||
                (a->error == -EIO && !a->sent)) &&
               (!a->sent || req->t.repeatable) && request_remaining(req) > 0;
}

/* A call's end (etcd-h2.h; from the loop): it goes to the next endpoint, or is answered. */
static void on_call_answer(EtcdH2Call *c, const EtcdH2Answer *a, void *userdata) {
        EtcdRequest *req = userdata;
        Etcd *e = req->t.etcd;

        req->call = NULL;
        if (etcd_request_may_fail_over(req, a) && etcd_transfer_failover(&req->t) &&
            request_start(req, MAX(request_remaining(req), USEC_PER_MSEC)) >= 0)
                return;
        req->call_error = a->error;
        req->call_status = a->http_status;
        req->call_detail = strdup(a->detail);
        req->grpc_status = a->grpc_status ? strdup(a->grpc_status) : NULL;
        req->grpc_message = a->grpc_message ? strdup(a->grpc_message) : NULL;
        req->answer = a->size > 0 ? bytes_dup(a->body, a->size) : NULL;
        req->answer_size = req->answer ? a->size : 0;
        if (!req->call_detail || (a->grpc_status && !req->grpc_status) ||
            (a->grpc_message && !req->grpc_message) || (a->size > 0 && !req->answer))
                req->call_error = -ENOMEM;
        etcd_request_complete(req);
        etcd_process(e);
}

static int request_start(EtcdRequest *req, usec_t timeout_usec) {
        Etcd *e = req->t.etcd;

        request_forget_call(req);
        return etcd_h2_call(e->h2[req->t.endpoint], req->t.path, req->t.body, req->t.body_size,
                            timeout_usec, on_call_answer, req, &req->call);
}

/* A request of kind to e's current endpoint, answered to cb by timeout from now. */
static EtcdRequest *request_new(Etcd *e, EtcdAnswerKind kind, bool repeatable, usec_t timeout,
                                etcd_callback_t cb, void *userdata) {
        EtcdRequest *req = new0(EtcdRequest, 1);

        if (!req)
                return NULL;
        req->t = (Transfer) { .etcd = e, .repeatable = repeatable, .endpoint = e->current,
                              .path = etcd_grpc_path(kind) };
        req->answer_kind = kind;
        req->cb = cb;
        req->userdata = userdata;
        req->deadline = now_usec(CLOCK_MONOTONIC) + timeout;
        return req;
}

/* req, once started (r: how its start went), among e's active requests; freed if it failed. */
static int request_track(EtcdRequest *req, int r, EtcdRequest **ret) {
        if (r < 0) {
                request_free(req);
                return r;
        }
        LIST_PREPEND(list, req->t.etcd->active, req);
        if (ret)
                *ret = req;
        return 0;
}

/* body: the call's prefixed message (etcd-grpc.h); taken either way. */
static int request_submit_timeout(Etcd *e, EtcdAnswerKind kind, EtcdBytes body, bool repeatable,
                                  usec_t timeout, etcd_callback_t cb, void *userdata,
                                  EtcdRequest **ret) {
        _cleanup_(etcd_bytes_done) EtcdBytes b = body;
        EtcdRequest *req;
        int r;

        if (!e || e->freed || !cb || !b.data)
                return -EINVAL;
        req = request_new(e, kind, repeatable, timeout, cb, userdata);
        if (!req)
                return -ENOMEM;
        req->t.body = b.data;
        req->t.body_size = b.size;
        b = (EtcdBytes) {};
        r = request_start(req, timeout);
        return request_track(req, r, ret);
}

static int request_submit(Etcd *e, EtcdAnswerKind kind, EtcdBytes body, bool repeatable,
                          etcd_callback_t cb, void *userdata, EtcdRequest **ret) {
        if (!e) {
                etcd_bytes_done(&body);
                return -EINVAL;
        }
        return request_submit_timeout(e, kind, body, repeatable, e->timeout, cb, userdata, ret);
}

/* The call's answer, or how it failed. */
static void request_answer(EtcdRequest *req, EtcdAnswer *a) {
        char what[512];

        etcd_transfer_describe(&req->t, what, sizeof(what));
        if (req->call_error < 0) {
                if (req->call_error != -ECONNREFUSED)
                        etcd_transfer_demote_endpoint(&req->t);
                etcd_answer_fail(a, req->call_error, what, req->call_detail);
                return;
        }
        if (req->call_status >= 500)
                etcd_transfer_demote_endpoint(&req->t);
        if (etcd_grpc_answer_parse(req->answer_kind, req->call_status, req->grpc_status,
                                   req->grpc_message, req->answer, req->answer_size, a) < 0) {
                _cleanup_free_ char *m = a->message ? strdup(a->message) : NULL;
                etcd_answer_fail(a, a->response.error, what, m);
        }
}

static void request_dispatch(EtcdRequest *req) {
        Etcd *e = req->t.etcd;
        EtcdAnswer a = { .response.message = "" };

        request_unlink(req);
        if (req->ka_answered) {
                /* a keepalive's, parsed as it came on its stream (etcd-keepalive.c) */
                a = req->ka_answer;
                req->ka_answer = (EtcdAnswer) {};
                req->ka_answered = false;
        } else
                request_answer(req, &a);
        req->dispatching = true;
        req->cb(e, &a.response, req->userdata);
        etcd_answer_done(&a);
        request_free(req);
}

void etcd_request_cancel(EtcdRequest *req) {
        if (!req || req->dispatching)
                return;
        request_unlink(req);
        request_free(req);
}

/* ---- the loop ---- */

static Etcd *etcd_ref(Etcd *e) {
        e->n_ref++;
        return e;
}

static void etcd_unref(Etcd *e) {
        if (!e || --e->n_ref > 0)
                return;
        sd_event_unref(e->event);
        for (size_t i = 0; i < e->n_endpoints; i++)
                free(e->endpoints[i]);
        free(e->endpoints);
        for (size_t i = 0; e->h2 && i < e->n_endpoints; i++)
                etcd_h2_free(e->h2[i]);
        free(e->h2);
        free(e);
}

/* The answers, in the order they came. */
void etcd_process(Etcd *e) {
        etcd_ref(e);
        while (!e->freed && e->completed)
                request_dispatch(e->completed);
        etcd_unref(e);
}

/* ---- set-up ---- */

/* Each endpoint as endpoint-url.h takes it (the configuration checked it already). */
static int etcd_copy_endpoints(Etcd *e, char **endpoints) {
        size_t n = 0;

        while (endpoints && endpoints[n])
                n++;
        if (n == 0)
                return -EINVAL;
        e->endpoints = new0(char *, n + 1);
        if (!e->endpoints)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                EndpointURL u;
                size_t len;

                e->endpoints[i] = strdup(endpoints[i]);
                if (!e->endpoints[i])
                        return -ENOMEM;
                e->n_endpoints = i + 1;
                len = strlen(e->endpoints[i]);
                while (len > 0 && e->endpoints[i][len - 1] == '/')
                        e->endpoints[i][--len] = '\0';
                if (endpoint_url_parse(e->endpoints[i], &u) < 0)
                        return -EINVAL;
        }
        return 0;
}

/* gRPC's connections, one per endpoint (etcd-h2.h). */
static int etcd_setup_h2(Etcd *e, const EtcdConfig *config) {
        int r;

        e->h2 = new0(EtcdH2 *, e->n_endpoints);
        if (!e->h2)
                return -ENOMEM;
        for (size_t i = 0; i < e->n_endpoints; i++) {
                r = etcd_h2_new(&e->h2[i], e->event, e->endpoints[i], config);
                if (r < 0)
                        return r;
        }
        return 0;
}

int etcd_new(Etcd **ret, sd_event *event, const EtcdConfig *config) {
        Etcd *e;
        int r;

        if (!ret || !event || !config)
                return -EINVAL;
        e = new0(Etcd, 1);
        if (!e)
                return -ENOMEM;
        e->n_ref = 1;
        e->event = sd_event_ref(event);
        e->timeout = config->timeout_usec > 0 ? config->timeout_usec : ETCD_TIMEOUT_DEFAULT;
        r = etcd_copy_endpoints(e, config->endpoints);
        if (r >= 0)
                r = etcd_setup_h2(e, config);
        if (r < 0) {
                etcd_unref(e);
                return r;
        }
        *ret = e;
        return 0;
}

Etcd *etcd_free(Etcd *e) {
        if (!e || e->freed)
                return NULL;
        e->freed = true;
        while (e->active)
                etcd_request_cancel(e->active);
        while (e->completed)
                etcd_request_cancel(e->completed);
        while (e->watches)
                (void) etcd_watch_free(e->watches);
        etcd_keepalive_free_all(e);
        for (size_t i = 0; e->h2 && i < e->n_endpoints; i++)
                e->h2[i] = etcd_h2_free(e->h2[i]);
        etcd_unref(e);
        return NULL;
}

/* ---- the calls ---- */

/* A call whose body was made (r: how that went). */
static int call_submit(Etcd *e, EtcdAnswerKind kind, int r, EtcdBytes body, bool repeatable,
                       etcd_callback_t cb, void *userdata, EtcdRequest **ret) {
        if (r < 0) {
                etcd_bytes_done(&body);
                return r;
        }
        return request_submit(e, kind, body, repeatable, cb, userdata, ret);
}

int etcd_range(Etcd *e, const char *key, const char *range_end, int64_t limit,
               etcd_callback_t cb, void *userdata, EtcdRequest **ret) {
        EtcdBytes b = {};
        int r = etcd_grpc_range(key, range_end, limit, &b);
        return call_submit(e, ETCD_ANSWER_RANGE, r, b, true, cb, userdata, ret);
}

int etcd_put(Etcd *e, const char *key, const char *value, int64_t lease, etcd_callback_t cb,
             void *userdata, EtcdRequest **ret) {
        EtcdBytes b = {};
        int r = etcd_grpc_put(key, value, lease, &b);
        return call_submit(e, ETCD_ANSWER_PUT, r, b, false, cb, userdata, ret);
}

int etcd_delete(Etcd *e, const char *key, const char *range_end, etcd_callback_t cb,
                void *userdata, EtcdRequest **ret) {
        EtcdBytes b = {};
        int r = etcd_grpc_delete(key, range_end, &b);
        return call_submit(e, ETCD_ANSWER_DELETE, r, b, false, cb, userdata, ret);
}

int etcd_txn(Etcd *e, const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
             size_t n_success, const EtcdOp *failure, size_t n_failure, etcd_callback_t cb,
             void *userdata, EtcdRequest **ret) {
        EtcdBytes b = {};
        int r = etcd_grpc_txn(compare, n_compare, success, n_success, failure, n_failure, &b);
        return call_submit(e, ETCD_ANSWER_TXN, r, b, false, cb, userdata, ret);
}

int etcd_txn_body(Etcd *e, EtcdBytes *body, bool read_only, etcd_callback_t cb, void *userdata,
                  EtcdRequest **ret) {
        EtcdBytes b;

        if (!body || !body->data)
                return -EINVAL;
        b = *body;
        *body = (EtcdBytes) {};
        return request_submit(e, ETCD_ANSWER_TXN, b, read_only, cb, userdata, ret);
}

int etcd_lease_grant(Etcd *e, int64_t ttl_sec, etcd_callback_t cb, void *userdata,
                     EtcdRequest **ret) {
        EtcdBytes b = {};
        int r = etcd_grpc_lease_grant(ttl_sec, &b);
        return call_submit(e, ETCD_ANSWER_LEASE_GRANT, r, b, false, cb, userdata, ret);
}

/* Not a call of its own: a message on the endpoint's LeaseKeepAlive stream (etcd-keepalive.c),
 * answered as a call would be (the same deadline, failover and errors). */
int etcd_lease_keepalive(Etcd *e, int64_t lease_id, etcd_callback_t cb, void *userdata,
                         EtcdRequest **ret) {
        EtcdRequest *req;
        int r;

        if (!e || e->freed || !cb || lease_id <= 0)
                return -EINVAL;
        req = request_new(e, ETCD_ANSWER_LEASE_KEEPALIVE, true, e->timeout, cb, userdata);
        if (!req)
                return -ENOMEM;
        req->lease_id = lease_id;
        r = etcd_keepalive_start(req);
        return request_track(req, r, ret);
}

int etcd_lease_revoke(Etcd *e, int64_t lease_id, etcd_callback_t cb, void *userdata,
                      EtcdRequest **ret) {
        EtcdBytes b = {};
        int r = etcd_grpc_lease_revoke(lease_id, &b);
        return call_submit(e, ETCD_ANSWER_LEASE_REVOKE, r, b, false, cb, userdata, ret);
}

int etcd_election_campaign(Etcd *e, const char *name, int64_t lease, const char *value,
                           uint64_t timeout_usec, etcd_callback_t cb, void *userdata,
                           EtcdRequest **ret) {
        EtcdBytes b = {};
        int r = etcd_grpc_election_campaign(name, lease, value, &b);

        if (r < 0 || !e) {
                etcd_bytes_done(&b);
                return r < 0 ? r : -EINVAL;
        }
        /* a campaign sent again to the next member finds its own key: it may go again */
        return request_submit_timeout(e, ETCD_ANSWER_ELECTION_CAMPAIGN, b, true,
                                      timeout_usec > 0 ? timeout_usec : e->timeout, cb,
                                      userdata, ret);
}

int etcd_election_leader(Etcd *e, const char *name, etcd_callback_t cb, void *userdata,
                         EtcdRequest **ret) {
        EtcdBytes b = {};
        int r = etcd_grpc_election_leader(name, &b);
        return call_submit(e, ETCD_ANSWER_ELECTION_LEADER, r, b, true, cb, userdata, ret);
}

int etcd_election_resign(Etcd *e, const EtcdLeaderKey *leader, etcd_callback_t cb,
                         void *userdata, EtcdRequest **ret) {
        EtcdBytes b = {};
        int r = etcd_grpc_election_resign(leader, &b);
        return call_submit(e, ETCD_ANSWER_ELECTION_RESIGN, r, b, false, cb, userdata, ret);
}
