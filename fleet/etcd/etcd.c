/* SPDX-License-Identifier: MIT */
/* The etcd client (etcd.h). The KV calls (range, put, delete, txn) and the watches
 * (etcd-watch.c) are etcd's gRPC (etcd-grpc.h) on one HTTP/2 connection per endpoint
 * (etcd-h2.c, nghttp2; TLS on gnutls for https://), the leases too, when every endpoint has a
 * numeric address; otherwise the JSON gateway (etcd-json.h) through libcurl's multi interface on
 * sd-event: one easy handle per request or watch, the multi handle's connection cache keeping
 * the HTTP/1.1 connections alive between requests. No user callback ever runs inside a libcurl or nghttp2 callback: those
 * only collect bytes, and the answers are dispatched from the loop afterwards, so a callback
 * may start, cancel or free anything, the Etcd included. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curl-event.h"
#include "endpoint-url.h"
#include "etcd-grpc.h"
#include "etcd-h2.h"
#include "etcd-json.h"
#include "etcd-private.h"
#include "etcd.h"
#include "list.h"
#include "macro.h"
#include "time-util.h"

#define ETCD_TIMEOUT_DEFAULT (2 * USEC_PER_SEC)
#define ETCD_MAXCONNECTS 64L

struct EtcdRequest {
        Transfer t;
        LIST_FIELDS(EtcdRequest, list); /* in etcd->active, or etcd->completed once done */
        bool completed; /* in etcd->completed, not etcd->active */
        bool dispatching;
        EtcdAnswerKind answer_kind;
        EtcdLineBuffer answer;
        /* a gRPC call's: the call in flight, then how it ended */
        EtcdH2Call *call;
        int call_error;
        char *call_detail, *grpc_status, *grpc_message;
        long call_status;
        usec_t deadline;
        etcd_callback_t cb;
        void *userdata;
};

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
static void request_complete(EtcdRequest *req, CURLcode result) {
        Etcd *e = req->t.etcd;

        LIST_REMOVE(list, e->active, req);
        req->t.result = result;
        req->completed = true;
        req->list_prev = e->completed_tail;
        req->list_next = NULL;
        if (e->completed_tail)
                e->completed_tail->list_next = req;
        else
                e->completed = req;
        e->completed_tail = req;
}

/* ---- transfers ---- */

void etcd_transfer_stop(Transfer *t) {
        if (t->in_multi) {
                (void) curl_multi_remove_handle(t->etcd->multi, t->easy);
                t->in_multi = false;
        }
}

void etcd_transfer_done(Transfer *t) {
        etcd_transfer_stop(t);
        if (t->easy)
                curl_easy_cleanup(t->easy);
        t->easy = NULL;
        t->body = mfree(t->body);
}

static size_t on_body_read(char *buffer, size_t size, size_t nitems, void *userdata) {
        Transfer *t = userdata;
        size_t n = MIN(size * nitems, t->body_size - t->body_offset);

        memcpy(buffer, t->body + t->body_offset, n);
        t->body_offset += n;
        return n;
}

static int on_body_seek(void *userdata, curl_off_t offset, int origin) {
        Transfer *t = userdata;

        if (origin != SEEK_SET || offset < 0 || (size_t) offset > t->body_size)
                return CURL_SEEKFUNC_CANTSEEK;
        t->body_offset = (size_t) offset;
        return CURL_SEEKFUNC_OK;
}

int etcd_transfer_setup(Transfer *t, size_t (*write_cb)(char *, size_t, size_t, void *),
                          struct curl_slist *headers) {
        Etcd *e = t->etcd;
        CURL *c = curl_easy_init();

        if (!c)
                return -ENOMEM;
        t->easy = c;
        t->endpoint = e->current;
        if (curl_easy_setopt(c, CURLOPT_PRIVATE, t) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_POST, 1L) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_READFUNCTION, on_body_read) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_READDATA, t) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) t->body_size) !=
                    CURLE_OK ||
            (t->repeatable &&
             (curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_body_seek) != CURLE_OK ||
              curl_easy_setopt(c, CURLOPT_SEEKDATA, t) != CURLE_OK)) ||
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_WRITEDATA, t) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_ERRORBUFFER, t->errbuf) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 5L) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 2L) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK)
                return -ENOMEM;
        if ((e->ca_file && curl_easy_setopt(c, CURLOPT_CAINFO, e->ca_file) != CURLE_OK) ||
            (e->cert_file && curl_easy_setopt(c, CURLOPT_SSLCERT, e->cert_file) != CURLE_OK) ||
            (e->key_file && curl_easy_setopt(c, CURLOPT_SSLKEY, e->key_file) != CURLE_OK))
                return -ENOMEM;
        return 0;
}

/* (Re)starts t on its endpoint with timeout_usec for the whole transfer (0: none, a watch)
 * and connect_usec for the connection. */
int etcd_transfer_start(Transfer *t, usec_t timeout_usec, usec_t connect_usec) {
        Etcd *e = t->etcd;
        _cleanup_free_ char *url = NULL;

        if (asprintf(&url, "%s%s", e->endpoints[t->endpoint], t->path) < 0)
                return -ENOMEM;
        t->errbuf[0] = '\0';
        t->body_offset = 0;
        if (curl_easy_setopt(t->easy, CURLOPT_URL, url) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS,
                             (long) ((timeout_usec + 999) / USEC_PER_MSEC)) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS,
                             (long) MAX((connect_usec + 999) / USEC_PER_MSEC, 1)) != CURLE_OK)
                return -ENOMEM;
        if (curl_multi_add_handle(e->multi, t->easy) != CURLM_OK)
                return -ENOMEM;
        t->in_multi = true;
        return 0;
}

/* After a failure that sent nothing, the next endpoint, unless every one was tried. */
bool etcd_transfer_failover(Transfer *t, bool repeatable) {
        Etcd *e = t->etcd;
        long sent = 0;

        if (t->result == CURLE_WRITE_ERROR || t->result == CURLE_OUT_OF_MEMORY ||
            t->result == CURLE_SEND_FAIL_REWIND)
                return false;
        /* A read (or a keepalive) may always be asked again elsewhere. A write that was sent
         * may have been applied (a follower forwards it before it dies): never repeated. */
        if (!repeatable &&
            (curl_easy_getinfo(t->easy, CURLINFO_REQUEST_SIZE, &sent) != CURLE_OK || sent > 0))
                return false;
        if (++t->tries >= e->n_endpoints)
                return false;
        if (e->current == t->endpoint)
                e->current = (t->endpoint + 1) % e->n_endpoints;
        t->endpoint = (t->endpoint + 1) % e->n_endpoints;
        return true;
}

/* A request that failed after it was sent makes the next requests try the next endpoint: the
 * member may be cut off or hung. */
static void transfer_demote_endpoint(Transfer *t) {
        Etcd *e = t->etcd;

        if (e->n_endpoints > 1 && e->current == t->endpoint)
                e->current = (t->endpoint + 1) % e->n_endpoints;
}

static int curl_error_to_errno(CURLcode c) {
        switch (c) {
        case CURLE_OK:
                return 0;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
                return -ECONNREFUSED;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_WRITE_ERROR:
                return -EBADMSG;
        case CURLE_GOT_NOTHING:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_PARTIAL_FILE:
        case CURLE_SEND_FAIL_REWIND: /* a write curl would have sent again on a new connection */
                return -ECONNRESET;
        default:
                return -EIO;
        }
}

static void transfer_describe(Transfer *t, char *buf, size_t size) {
        (void) snprintf(buf, size, "POST %s%s", t->etcd->endpoints[t->endpoint], t->path);
}

/* ---- requests ---- */

static size_t on_request_data(char *ptr, size_t size, size_t nmemb, void *userdata) {
        EtcdRequest *req = userdata;
        size_t n = size * nmemb;

        return etcd_line_buffer_append(&req->answer, ptr, n) < 0 ? 0 : n;
}

static void request_forget_call(EtcdRequest *req) {
        etcd_h2_call_cancel(req->call);
        req->call = NULL;
        req->call_detail = mfree(req->call_detail);
        req->grpc_status = mfree(req->grpc_status);
        req->grpc_message = mfree(req->grpc_message);
        req->call_error = 0;
        req->call_status = 0;
        etcd_line_buffer_done(&req->answer);
}

static EtcdRequest *request_free(EtcdRequest *req) {
        if (!req)
                return NULL;
        request_forget_call(req);
        etcd_transfer_done(&req->t);
        etcd_line_buffer_done(&req->answer);
        return mfree(req);
}

static usec_t request_remaining(EtcdRequest *req) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        return req->deadline > now ? req->deadline - now : 0;
}

static void request_complete(EtcdRequest *req, CURLcode result);
static void etcd_process(Etcd *e);
static int request_start(EtcdRequest *req, usec_t timeout_usec);

/* A gRPC call's end (etcd-h2.h; from the loop): one that sent nothing goes to the next
 * endpoint while there is time, as a transfer that could not connect does; the others are
 * answered. */
static void on_call_answer(EtcdH2Call *c, const EtcdH2Answer *a, void *userdata) {
        EtcdRequest *req = userdata;
        Etcd *e = req->t.etcd;

        req->call = NULL;
        /* As a transfer's: one that sent nothing, or a read, may go to the next endpoint. */
        req->t.result = CURLE_OK;
        if ((a->error == -ECONNREFUSED || a->error == -ECONNRESET ||
             (a->error == -EIO && !a->sent)) &&
            (!a->sent || req->t.repeatable) && request_remaining(req) > 0 &&
            etcd_transfer_failover(&req->t, true) &&
            request_start(req, MAX(request_remaining(req), USEC_PER_MSEC)) >= 0)
                return;
        req->call_error = a->error;
        req->call_status = a->http_status;
        req->call_detail = strdup(a->detail);
        req->grpc_status = a->grpc_status ? strdup(a->grpc_status) : NULL;
        req->grpc_message = a->grpc_message ? strdup(a->grpc_message) : NULL;
        if (!req->call_detail || (a->grpc_status && !req->grpc_status) ||
            (a->grpc_message && !req->grpc_message) ||
            (a->size > 0 && etcd_line_buffer_append(&req->answer, a->body, a->size) < 0))
                req->call_error = -ENOMEM;
        request_complete(req, CURLE_OK);
        etcd_process(e);
}

static int request_start(EtcdRequest *req, usec_t timeout_usec) {
        Etcd *e = req->t.etcd;

        if (!req->t.grpc)
                return etcd_transfer_start(&req->t, timeout_usec, timeout_usec);
        request_forget_call(req);
        return etcd_h2_call(e->h2[req->t.endpoint], req->t.path, (const uint8_t *) req->t.body,
                            req->t.body_size, timeout_usec, on_call_answer, req, &req->call);
}

static int request_restart(EtcdRequest *req) {
        return request_start(req, MAX(request_remaining(req), USEC_PER_MSEC));
}

/* body: the JSON of the gateway, or with grpc a gRPC call's prefixed message (etcd-grpc.h);
 * taken either way. */
static int request_submit(Etcd *e, EtcdAnswerKind kind, EtcdBytes body, bool grpc,
                          bool repeatable, etcd_callback_t cb, void *userdata,
                          EtcdRequest **ret) {
        _cleanup_(etcd_bytes_done) EtcdBytes b = body;
        EtcdRequest *req;
        int r = 0;

        if (!e || e->freed || !cb || !b.data)
                return -EINVAL;
        req = new0(EtcdRequest, 1);
        if (!req)
                return -ENOMEM;
        req->t = (Transfer) { .kind = TRANSFER_REQUEST, .etcd = e, .body = (char *) b.data,
                              .body_size = b.size, .repeatable = repeatable, .grpc = grpc,
                              .path = grpc ? etcd_grpc_path(kind) : etcd_answer_path(kind),
                              .endpoint = e->current };
        b = (EtcdBytes) {};
        req->answer_kind = kind;
        req->cb = cb;
        req->userdata = userdata;
        req->deadline = now_usec(CLOCK_MONOTONIC) + e->timeout;
        if (!grpc)
                r = etcd_transfer_setup(&req->t, on_request_data, e->headers);
        if (r >= 0)
                r = request_start(req, e->timeout);
        if (r < 0) {
                request_free(req);
                return r;
        }
        LIST_PREPEND(list, e->active, req);
        if (ret)
                *ret = req;
        return 0;
}

static void request_finished(EtcdRequest *req, CURLcode result) {
        req->t.result = result;
        if (result != CURLE_OK && request_remaining(req) > 0 &&
            etcd_transfer_failover(&req->t, req->t.repeatable) &&
            request_restart(req) >= 0)
                return;
        request_complete(req, result);
}

/* A gRPC call's answer, or how it failed. */
static void request_call_answer(EtcdRequest *req, EtcdAnswer *a, const char *what) {
        if (req->call_error < 0) {
                if (req->call_error != -ECONNREFUSED)
                        transfer_demote_endpoint(&req->t);
                etcd_answer_fail(a, req->call_error, what, req->call_detail);
                return;
        }
        if (req->call_status >= 500)
                transfer_demote_endpoint(&req->t);
        if (etcd_grpc_answer_parse(req->answer_kind, req->call_status, req->grpc_status,
                                   req->grpc_message, (const uint8_t *) req->answer.data,
                                   req->answer.size, a) < 0) {
                _cleanup_free_ char *m = a->message ? strdup(a->message) : NULL;
                etcd_answer_fail(a, a->response.error, what, m);
        }
}

static void request_answer(EtcdRequest *req, EtcdAnswer *a) {
        char what[512];
        long status = 0;

        transfer_describe(&req->t, what, sizeof(what));
        if (req->t.grpc) {
                request_call_answer(req, a, what);
                return;
        }
        if (req->t.result != CURLE_OK) {
                int error = curl_error_to_errno(req->t.result);
                long sent = 0;

                /* curl's own retry of a request on a reused connection that broke ends in a
                 * failure to connect when the member is gone: but the request was sent. */
                if (error == -ECONNREFUSED &&
                    curl_easy_getinfo(req->t.easy, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK &&
                    sent > 0)
                        error = -ECONNRESET;
                transfer_demote_endpoint(&req->t);
                etcd_answer_fail(a, error, what,
                                 req->t.errbuf[0] ? req->t.errbuf
                                                  : curl_easy_strerror(req->t.result));
                return;
        }
        (void) curl_easy_getinfo(req->t.easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 500)
                transfer_demote_endpoint(&req->t);
        if (etcd_answer_parse(req->answer_kind, status, req->answer.data ?: "",
                              req->answer.size, a) < 0) {
                _cleanup_free_ char *m = a->message ? strdup(a->message) : NULL;
                int error = a->response.error;
                etcd_answer_fail(a, error, what, m);
        }
}

static void request_dispatch(EtcdRequest *req) {
        Etcd *e = req->t.etcd;
        EtcdAnswer a = { .response.message = "" };

        request_unlink(req);
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
        /* Every transfer is gone: the cache's connections close (the socket callback runs). */
        if (e->multi)
                (void) curl_multi_cleanup(e->multi);
        curl_event_free(e->curl); /* after the multi handle, whose sockets it removed */
        sd_event_unref(e->event);
        for (size_t i = 0; i < e->n_endpoints; i++)
                free(e->endpoints[i]);
        free(e->endpoints);
        for (size_t i = 0; e->h2 && i < e->n_endpoints; i++)
                etcd_h2_free(e->h2[i]);
        free(e->h2);
        free(e->ca_file);
        free(e->cert_file);
        free(e->key_file);
        curl_slist_free_all(e->headers);
        curl_slist_free_all(e->watch_headers);
        free(e);
}

/* The transfers curl finished: requests to e->completed (or restarted on the next endpoint),
 * watches marked ended. Nothing is dispatched here. */
static void etcd_collect(Etcd *e) {
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(e->multi, &left))) {
                CURL *easy = msg->easy_handle;
                CURLcode result = msg->data.result;
                Transfer *t = NULL;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                (void) curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &t);
                if (!t)
                        continue;
                etcd_transfer_stop(t);
                if (t->kind == TRANSFER_REQUEST)
                        request_finished((EtcdRequest *) t, result);
                else
                        etcd_watch_finished((EtcdWatch *) t, result);
        }
}

static EtcdWatch *etcd_next_pending_watch(Etcd *e) {
        for (EtcdWatch *w = e->watches; w; w = w->watches_next)
                if (w->pending && !w->over)
                        return w;
        return NULL;
}

static void etcd_process(Etcd *e) {
        EtcdWatch *w;

        etcd_ref(e);
        etcd_collect(e);
        while (!e->freed && (w = etcd_next_pending_watch(e)))
                etcd_watch_dispatch(w);
        while (!e->freed && e->completed)
                request_dispatch(e->completed);
        etcd_unref(e);
}

static void on_curl_process(void *userdata) {
        etcd_process(userdata);
}

/* ---- set-up ---- */

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
                size_t len;

                if (strncmp(endpoints[i], "http://", 7) != 0 &&
                    strncmp(endpoints[i], "https://", 8) != 0)
                        return -EINVAL;
                e->endpoints[i] = strdup(endpoints[i]);
                if (!e->endpoints[i])
                        return -ENOMEM;
                e->n_endpoints = i + 1;
                len = strlen(e->endpoints[i]);
                while (len > 0 && e->endpoints[i][len - 1] == '/')
                        e->endpoints[i][--len] = '\0';
        }
        return 0;
}

static int etcd_setup_curl(Etcd *e) {
        static bool initialized = false;
        int r;

        if (!initialized) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return -ENOMEM;
                initialized = true;
        }
        e->multi = curl_multi_init();
        if (!e->multi)
                return -ENOMEM;
        if (curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, ETCD_MAXCONNECTS) != CURLM_OK)
                return -ENOMEM;
        r = curl_event_new(&e->curl, e->event, e->multi, "etcd-curl", on_curl_process, e);
        if (r < 0)
                return r;
        /* No "Expect: 100-continue": it would hold a big txn back a round trip (or 1 s). The
         * watch asks etcd to cancel it when its member loses the leader ("hasleader", gRPC
         * metadata through the gateway), so a member cut off from the quorum ends it. */
        e->headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (e->headers)
                e->headers = curl_slist_append(e->headers, "Expect:");
        e->watch_headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (e->watch_headers)
                e->watch_headers = curl_slist_append(e->watch_headers, "Expect:");
        if (e->watch_headers)
                e->watch_headers = curl_slist_append(e->watch_headers,
                                                     "Grpc-Metadata-hasleader: true");
        return e->headers && e->watch_headers ? 0 : -ENOMEM;
}

/* gRPC's connections, one per endpoint, when every endpoint can have one (a numeric address:
 * etcd-h2.h); else the KV calls go to the gateway too. */
static int etcd_setup_h2(Etcd *e, const EtcdConfig *config) {
        EndpointURL u;
        int r;

        for (size_t i = 0; i < e->n_endpoints; i++)
                if (endpoint_url_parse(e->endpoints[i], &u) < 0)
                        return 0;
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
        if (r >= 0 && ((config->ca_file && !(e->ca_file = strdup(config->ca_file))) ||
                       (config->cert_file && !(e->cert_file = strdup(config->cert_file))) ||
                       (config->key_file && !(e->key_file = strdup(config->key_file)))))
                r = -ENOMEM;
        if (r >= 0)
                r = etcd_setup_curl(e);
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
        for (size_t i = 0; e->h2 && i < e->n_endpoints; i++)
                e->h2[i] = etcd_h2_free(e->h2[i]);
        etcd_unref(e);
        return NULL;
}

/* ---- the calls ---- */

/* The KV and lease calls: gRPC's when the Etcd has its connections, else the gateway's JSON. */
static int kv_submit(Etcd *e, EtcdAnswerKind kind, int r, EtcdBytes pb, char *json,
                     bool repeatable, etcd_callback_t cb, void *userdata, EtcdRequest **ret) {
        EtcdBytes body = e && e->h2 ? pb : (EtcdBytes) { .data = (uint8_t *) json,
                                                         .size = json ? strlen(json) : 0 };

        if (e && e->h2)
                free(json);
        else
                etcd_bytes_done(&pb);
        if (r < 0) {
                etcd_bytes_done(&body);
                return r;
        }
        return request_submit(e, kind, body, e && e->h2, repeatable, cb, userdata, ret);
}

bool etcd_speaks_grpc(const Etcd *e) {
        return e && e->h2;
}

int etcd_range(Etcd *e, const char *key, const char *range_end, int64_t limit,
               etcd_callback_t cb, void *userdata, EtcdRequest **ret) {
        EtcdBytes pb = {};
        char *json = NULL;
        int r = etcd_speaks_grpc(e) ? etcd_grpc_range(key, range_end, limit, &pb)
                                    : etcd_json_range(key, range_end, limit, &json);
        return kv_submit(e, ETCD_ANSWER_RANGE, r, pb, json, true, cb, userdata, ret);
}

int etcd_put(Etcd *e, const char *key, const char *value, int64_t lease, etcd_callback_t cb,
             void *userdata, EtcdRequest **ret) {
        EtcdBytes pb = {};
        char *json = NULL;
        int r = etcd_speaks_grpc(e) ? etcd_grpc_put(key, value, lease, &pb)
                                    : etcd_json_put(key, value, lease, &json);
        return kv_submit(e, ETCD_ANSWER_PUT, r, pb, json, false, cb, userdata, ret);
}

int etcd_delete(Etcd *e, const char *key, const char *range_end, etcd_callback_t cb,
                void *userdata, EtcdRequest **ret) {
        EtcdBytes pb = {};
        char *json = NULL;
        int r = etcd_speaks_grpc(e) ? etcd_grpc_delete(key, range_end, &pb)
                                    : etcd_json_delete(key, range_end, &json);
        return kv_submit(e, ETCD_ANSWER_DELETE, r, pb, json, false, cb, userdata, ret);
}

int etcd_txn(Etcd *e, const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
             size_t n_success, const EtcdOp *failure, size_t n_failure, etcd_callback_t cb,
             void *userdata, EtcdRequest **ret) {
        EtcdBytes pb = {};
        char *json = NULL;
        int r = etcd_speaks_grpc(e)
                        ? etcd_grpc_txn(compare, n_compare, success, n_success, failure,
                                        n_failure, &pb)
                        : etcd_json_txn(compare, n_compare, success, n_success, failure,
                                        n_failure, &json);
        return kv_submit(e, ETCD_ANSWER_TXN, r, pb, json, false, cb, userdata, ret);
}

int etcd_txn_body(Etcd *e, EtcdBytes *body, bool read_only, etcd_callback_t cb, void *userdata,
                  EtcdRequest **ret) {
        EtcdBytes b;

        if (!body || !body->data)
                return -EINVAL;
        b = *body;
        *body = (EtcdBytes) {};
        return request_submit(e, ETCD_ANSWER_TXN, b, etcd_speaks_grpc(e), read_only, cb,
                              userdata, ret);
}

int etcd_lease_grant(Etcd *e, int64_t ttl_sec, etcd_callback_t cb, void *userdata,
                     EtcdRequest **ret) {
        EtcdBytes pb = {};
        char *json = NULL;
        int r = etcd_speaks_grpc(e) ? etcd_grpc_lease_grant(ttl_sec, &pb)
                                    : etcd_json_lease_grant(ttl_sec, &json);
        return kv_submit(e, ETCD_ANSWER_LEASE_GRANT, r, pb, json, false, cb, userdata, ret);
}

int etcd_lease_keepalive(Etcd *e, int64_t lease_id, etcd_callback_t cb, void *userdata,
                         EtcdRequest **ret) {
        EtcdBytes pb = {};
        char *json = NULL;
        int r = etcd_speaks_grpc(e) ? etcd_grpc_lease_keepalive(lease_id, &pb)
                                    : etcd_json_lease_id(lease_id, &json);
        return kv_submit(e, ETCD_ANSWER_LEASE_KEEPALIVE, r, pb, json, true, cb, userdata, ret);
}

int etcd_lease_revoke(Etcd *e, int64_t lease_id, etcd_callback_t cb, void *userdata,
                      EtcdRequest **ret) {
        EtcdBytes pb = {};
        char *json = NULL;
        int r = etcd_speaks_grpc(e) ? etcd_grpc_lease_revoke(lease_id, &pb)
                                    : etcd_json_lease_id(lease_id, &json);
        return kv_submit(e, ETCD_ANSWER_LEASE_REVOKE, r, pb, json, false, cb, userdata, ret);
}
