/* SPDX-License-Identifier: MIT */
/* The etcd client's watches (etcd.h's etcd_watch): each on a stream of its own, etcd's gRPC
 * Watch stream on the endpoint's HTTP/2 connection (etcd-h2.h) when the client speaks gRPC,
 * else a streaming POST to the gateway's /v3/watch through libcurl. Either way the stream
 * carries one watch, whose messages (etcd-grpc.h's WatchResponses, or the gateway's lines of
 * JSON) become the same EtcdWatchMessage and the same callbacks. etcd asks nothing more of a
 * watcher: one create request, then etcd talks (it keeps the watch of a client that
 * half-closed, as its own gateway does). No callback runs inside libcurl or nghttp2. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-grpc.h"
#include "etcd-private.h"
#include "macro.h"

#define WATCH_GRPC_PATH "/etcdserverpb.Watch/Watch"

static void watch_unref(EtcdWatch *w) {
        if (!w || --w->n_ref > 0)
                return;
        etcd_transfer_done(&w->t);
        etcd_line_buffer_done(&w->lines);
        free(w);
}

/* No more bytes from w's stream: its transfer, or its call, stopped. */
static void watch_stop(EtcdWatch *w) {
        etcd_transfer_stop(&w->t);
        etcd_h2_call_cancel(w->call);
        w->call = NULL;
}

static void watch_end(EtcdWatch *w, int error, int64_t compact_revision) {
        Etcd *e = w->t.etcd;

        w->over = true;
        watch_stop(w);
        w->cb(e, w, NULL, 0, w->revision, error, compact_revision, w->userdata);
}

/* One message of the stream, parsed (r: the parser's result). */
static void watch_handle_message(EtcdWatch *w, int r, EtcdWatchMessage *m) {
        if (r < 0) {
                watch_end(w, r == -ENOMEM ? -ENOMEM : -EBADMSG, 0);
                return;
        }
        if (m->revision > w->revision)
                w->revision = m->revision;
        if (m->compact_revision > 0)
                watch_end(w, -ESTALE, m->compact_revision);
        else if (m->canceled || m->error)
                watch_end(w, -ECONNRESET, 0);
        else
                w->cb(w->t.etcd, w, m->events, m->n_events, m->revision, 0, 0, w->userdata);
        etcd_watch_message_done(m);
}

/* ---- the gateway's: lines of JSON through libcurl ---- */

static size_t on_watch_data(char *ptr, size_t size, size_t nmemb, void *userdata) {
        EtcdWatch *w = userdata;
        size_t n = size * nmemb;
        int r;

        r = etcd_line_buffer_append(&w->lines, ptr, n);
        if (r < 0) {
                w->buffer_error = r;
                return 0;
        }
        w->pending = true;
        return n;
}

void etcd_watch_dispatch(EtcdWatch *w) {
        const char *line;
        size_t size;

        w->n_ref++;
        w->pending = false;
        /* The last message of a stream that ended may lack its newline (an error body). */
        if (w->ended && w->buffer_error == 0 && w->lines.size > w->lines.start)
                (void) etcd_line_buffer_append(&w->lines, "\n", 1);
        while (!w->over && (line = etcd_line_buffer_next(&w->lines, &size))) {
                EtcdWatchMessage m;
                int r = etcd_watch_message_parse(line, size, &m);
                watch_handle_message(w, r, &m);
        }
        if (!w->over && w->buffer_error != 0)
                watch_end(w, w->buffer_error == -ENOMEM ? -ENOMEM : -EBADMSG, 0);
        else if (!w->over && w->ended)
                watch_end(w, -ECONNRESET, 0);
        watch_unref(w);
}

void etcd_watch_finished(EtcdWatch *w, CURLcode result) {
        w->t.result = result;
        if (result != CURLE_OK && w->lines.size == 0 && etcd_transfer_failover(&w->t, true) &&
            etcd_transfer_start(&w->t, 0, w->t.etcd->timeout) >= 0)
                return;
        w->ended = true;
        w->pending = true;
}

/* ---- gRPC's: WatchResponses on an HTTP/2 stream ---- */

static int watch_grpc_start(EtcdWatch *w);

/* The stream's bytes (from etcd-h2's dispatch): every whole message, in order. */
static size_t on_watch_stream(EtcdH2Call *c, const uint8_t *data, size_t size, void *userdata) {
        EtcdWatch *w = userdata;
        size_t taken = 0, len;
        int r;

        w->n_ref++;
        while (!w->over && (r = etcd_grpc_frame_next(data + taken, size - taken, &len)) != 0) {
                EtcdWatchMessage m = {};

                if (r < 0) {
                        watch_end(w, -EBADMSG, 0);
                        break;
                }
                w->received = true;
                r = etcd_grpc_watch_message_parse(data + taken, len, &m);
                taken += len;
                watch_handle_message(w, r, &m);
        }
        watch_unref(w);
        return taken;
}

/* The stream ended (etcd ended it, or the connection broke). Before any message: the next
 * endpoint, as a gateway watch that could not connect; after: the watch is over. */
static void on_watch_stream_end(EtcdH2Call *c, const EtcdH2Answer *a, void *userdata) {
        EtcdWatch *w = userdata;

        w->call = NULL;
        w->t.result = CURLE_OK;
        if (a->error < 0 && a->error != -ENOMEM && !w->received &&
            etcd_transfer_failover(&w->t, true) && watch_grpc_start(w) >= 0)
                return;
        watch_end(w, a->error == -ENOMEM ? -ENOMEM : a->size > 0 ? -EBADMSG : -ECONNRESET, 0);
}

static int watch_grpc_start(EtcdWatch *w) {
        Etcd *e = w->t.etcd;

        return etcd_h2_stream(e->h2[w->t.endpoint], WATCH_GRPC_PATH,
                              (const uint8_t *) w->t.body, w->t.body_size, on_watch_stream,
                              on_watch_stream_end, w, &w->call);
}

/* ---- watches ---- */

/* The stream's request: the gateway's JSON, or the prefixed WatchRequest. */
static int watch_body(Etcd *e, const char *key, const char *range_end, int64_t start_revision,
                      Transfer *t) {
        EtcdBytes pb = {};
        int r;

        if (!etcd_speaks_grpc(e)) {
                r = etcd_json_watch(key, range_end, start_revision, &t->body);
                t->body_size = r < 0 ? 0 : strlen(t->body);
                return r;
        }
        r = etcd_grpc_watch_create(key, range_end, start_revision, &pb);
        t->body = (char *) pb.data;
        t->body_size = pb.size;
        return r;
}

int etcd_watch(Etcd *e, const char *key, const char *range_end, int64_t start_revision,
               etcd_watch_callback_t cb, void *userdata, EtcdWatch **ret) {
        EtcdWatch *w;
        int r;

        if (!e || e->freed || !cb)
                return -EINVAL;
        w = new0(EtcdWatch, 1);
        if (!w)
                return -ENOMEM;
        w->t = (Transfer) { .kind = TRANSFER_WATCH, .etcd = e, .repeatable = true,
                            .grpc = etcd_speaks_grpc(e), .endpoint = e->current,
                            .path = etcd_speaks_grpc(e) ? WATCH_GRPC_PATH : "/v3/watch" };
        w->n_ref = 1;
        w->cb = cb;
        w->userdata = userdata;
        r = watch_body(e, key, range_end, start_revision, &w->t);
        if (r >= 0 && w->t.grpc)
                r = watch_grpc_start(w);
        else if (r >= 0) {
                r = etcd_transfer_setup(&w->t, on_watch_data, e->watch_headers);
                if (r >= 0)
                        r = etcd_transfer_start(&w->t, 0, e->timeout);
        }
        if (r < 0) {
                watch_unref(w);
                return r;
        }
        LIST_PREPEND(watches, e->watches, w);
        if (ret)
                *ret = w;
        return 0;
}

EtcdWatch *etcd_watch_free(EtcdWatch *w) {
        if (!w || (w->over && !w->t.etcd))
                return NULL;
        watch_stop(w);
        w->over = true;
        LIST_REMOVE(watches, w->t.etcd->watches, w);
        w->t.etcd = NULL; /* marks it freed */
        watch_unref(w);
        return NULL;
}
