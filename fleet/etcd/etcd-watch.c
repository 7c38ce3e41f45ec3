/* SPDX-License-Identifier: MIT */
/* The etcd client's watches (etcd.h's etcd_watch): each on a stream of its own, etcd's gRPC
 * Watch stream on the endpoint's HTTP/2 connection (etcd-h2.h), which carries one watch whose
 * messages (etcd-grpc.h's WatchResponses) become EtcdWatchMessages and callbacks. etcd asks
 * nothing more of a watcher: one create request, then etcd talks (it keeps the watch of a
 * client that half-closed). No callback runs inside nghttp2. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-answer.h"
#include "etcd-grpc.h"
#include "etcd-private.h"
#include "macro.h"

#define WATCH_GRPC_PATH "/etcdserverpb.Watch/Watch"

static void watch_unref(EtcdWatch *w) {
        if (!w || --w->n_ref > 0)
                return;
        free(w->t.body);
        free(w);
}

/* No more bytes from w's stream. */
static void watch_stop(EtcdWatch *w) {
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

static int watch_start(EtcdWatch *w);

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
 * endpoint, as for a request that could not connect; after: the watch is over. */
static void on_watch_stream_end(EtcdH2Call *c, const EtcdH2Answer *a, void *userdata) {
        EtcdWatch *w = userdata;

        w->call = NULL;
        if (a->error < 0 && a->error != -ENOMEM && !w->received &&
            etcd_transfer_failover(&w->t) && watch_start(w) >= 0)
                return;
        watch_end(w, a->error == -ENOMEM ? -ENOMEM : a->size > 0 ? -EBADMSG : -ECONNRESET, 0);
}

static int watch_start(EtcdWatch *w) {
        Etcd *e = w->t.etcd;

        return etcd_h2_stream(e->h2[w->t.endpoint], WATCH_GRPC_PATH, w->t.body,
                              w->t.body_size, on_watch_stream, on_watch_stream_end, w,
                              &w->call);
}

int etcd_watch(Etcd *e, const char *key, const char *range_end, int64_t start_revision,
               etcd_watch_callback_t cb, void *userdata, EtcdWatch **ret) {
        EtcdBytes pb = {};
        EtcdWatch *w;
        int r;

        if (!e || e->freed || !cb)
                return -EINVAL;
        r = etcd_grpc_watch_create(key, range_end, start_revision, &pb);
        if (r < 0)
                return r;
        w = new0(EtcdWatch, 1);
        if (!w) {
                etcd_bytes_done(&pb);
                return -ENOMEM;
        }
        w->t = (Transfer) { .etcd = e, .body = pb.data, .body_size = pb.size,
                            .repeatable = true, .endpoint = e->current,
                            .path = WATCH_GRPC_PATH };
        w->n_ref = 1;
        w->cb = cb;
        w->userdata = userdata;
        r = watch_start(w);
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
