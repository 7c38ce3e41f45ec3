/* SPDX-License-Identifier: MIT */
/* etcd's gRPC streams (fleet/etcd/etcd-grpc.h) as hostile input, the Watch stream and the
 * LeaseKeepAlive stream: the bytes of a stream, split into messages by etcd_grpc_frame_next()
 * as etcd-watch.c and etcd-keepalive.c split what HTTP/2 hands them, and each whole message
 * parsed both by etcd_grpc_watch_message_parse() and by
 * etcd_grpc_lease_keepalive_message_parse(). The split stops at the first frame refused
 * (compressed, too long) or one not all there, as the stream's reading does; a message refused
 * by the parser ends a watch (or the keepalive stream) too, but its frame is whole, so the
 * next ones are read on (more of the parsers for the same input). Each message is also
 * unpacked by protobuf-c alone, and what the parsers made is compared with it. A seed is one
 * or more prefixed WatchResponses (or LeaseKeepAliveResponses), back to back. */
#include <errno.h>
#include <string.h>

#include "etcd-grpc.h"
#include "etcd-rpc.pb-c.h"
#include "fuzz.h"
#include "macro.h"

#define REASON_MAX 512

static size_t prefix_len(const uint8_t *p) {
        return (size_t) p[1] << 24 | (size_t) p[2] << 16 | (size_t) p[3] << 8 | p[4];
}

/* What etcd_grpc_frame_next() says, from the prefix alone. */
static void check_frame(const uint8_t *p, size_t size, int r, size_t len) {
        FUZZ_ASSERT(r == 1 || r == 0 || r == -EBADMSG);
        if (size < ETCD_GRPC_PREFIX) {
                FUZZ_ASSERT(r == 0);
                return;
        }
        if (p[0] != 0 || prefix_len(p) > ETCD_ANSWER_MAX)
                FUZZ_ASSERT(r == -EBADMSG);
        else if (prefix_len(p) > size - ETCD_GRPC_PREFIX)
                FUZZ_ASSERT(r == 0);
        else
                FUZZ_ASSERT(r == 1 && len == ETCD_GRPC_PREFIX + prefix_len(p));
}

static void check_zeroed(const EtcdWatchMessage *m) {
        FUZZ_ASSERT(!m->events && m->n_events == 0 && !m->error);
        FUZZ_ASSERT(m->revision == 0 && m->compact_revision == 0);
        FUZZ_ASSERT(!m->created && !m->canceled);
}

static void check_kv(const EtcdKv *kv, const Etcdserverpb__KeyValue *want) {
        /* keys are C strings: non-empty, no NUL inside (so strlen() is all of it) */
        FUZZ_ASSERT(kv->key && kv->key[0] != '\0');
        FUZZ_ASSERT(strlen(kv->key) == want->key.len);
        FUZZ_ASSERT(memcmp(kv->key, want->key.data, want->key.len) == 0);
        /* values are bytes, NUL-terminated after them */
        FUZZ_ASSERT(kv->value && kv->value_len == want->value.len);
        FUZZ_ASSERT(kv->value[kv->value_len] == '\0');
        FUZZ_ASSERT(strlen(kv->value) <= kv->value_len);
        FUZZ_ASSERT(kv->value_len == 0 || memcmp(kv->value, want->value.data, kv->value_len) == 0);
        FUZZ_ASSERT(kv->create_revision == want->create_revision);
        FUZZ_ASSERT(kv->mod_revision == want->mod_revision);
        FUZZ_ASSERT(kv->version == want->version);
        FUZZ_ASSERT(kv->lease == want->lease);
}

/* The reason, as it may reach a log: printable ASCII, at most REASON_MAX bytes, the reason's
 * own where it was printable. */
static void check_error(const char *error, const char *reason) {
        size_t n;

        if (!reason || reason[0] == '\0') {
                FUZZ_ASSERT(!error);
                return;
        }
        FUZZ_ASSERT(error);
        n = strlen(error);
        FUZZ_ASSERT(n > 0 && n <= REASON_MAX && n <= strlen(reason));
        FUZZ_ASSERT(n == MIN(strlen(reason), (size_t) REASON_MAX));
        for (size_t i = 0; i < n; i++) {
                FUZZ_ASSERT(error[i] >= 0x20 && error[i] < 0x7f);
                FUZZ_ASSERT(error[i] == reason[i] || error[i] == '?');
        }
}

static bool event_ok(const Etcdserverpb__Event *ev) {
        return ev->kv && (ev->type == ETCDSERVERPB__EVENT__EVENT_TYPE__PUT ||
                          ev->type == ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE) &&
               ev->kv->key.len > 0 && !memchr(ev->kv->key.data, '\0', ev->kv->key.len);
}

/* Whether the parser had to take w: not a fragment, every event a PUT or DELETE with a key. */
static bool response_ok(const Etcdserverpb__WatchResponse *w) {
        if (w->fragment)
                return false;
        for (size_t i = 0; i < w->n_events; i++)
                if (!event_ok(w->events[i]))
                        return false;
        return true;
}

static void check_success(const EtcdWatchMessage *m, const Etcdserverpb__WatchResponse *w) {
        FUZZ_ASSERT((m->events != NULL) == (m->n_events > 0));
        FUZZ_ASSERT(m->n_events == w->n_events);
        FUZZ_ASSERT(m->revision == (w->header ? w->header->revision : 0));
        FUZZ_ASSERT(m->created == w->created && m->canceled == w->canceled);
        FUZZ_ASSERT(m->compact_revision == w->compact_revision);
        check_error(m->error, w->cancel_reason);
        for (size_t i = 0; i < m->n_events; i++) {
                const Etcdserverpb__Event *ev = w->events[i];

                FUZZ_ASSERT(m->events[i].type == (ev->type == ETCDSERVERPB__EVENT__EVENT_TYPE__PUT
                                                          ? ETCD_EVENT_PUT
                                                          : ETCD_EVENT_DELETE));
                check_kv(&m->events[i].kv, ev->kv);
        }
}

/* One whole frame (p[0, len)): parsed, and compared with protobuf-c's own unpack. */
static void fuzz_message(const uint8_t *p, size_t len) {
        Etcdserverpb__WatchResponse *w;
        EtcdWatchMessage m;
        int r;

        r = etcd_grpc_watch_message_parse(p, len, &m);
        FUZZ_ASSERT(r == 0 || r == -EBADMSG || r == -ENOMEM);
        w = etcdserverpb__watch_response__unpack(NULL, len - ETCD_GRPC_PREFIX,
                                                 p + ETCD_GRPC_PREFIX);
        if (r == 0) {
                FUZZ_ASSERT(w && response_ok(w));
                check_success(&m, w);
        } else {
                check_zeroed(&m);
                /* refused: protobuf-c could not unpack it either, or a rule of ours */
                FUZZ_ASSERT(r == -ENOMEM || !w || !response_ok(w));
        }
        if (w)
                protobuf_c_message_free_unpacked(&w->base, NULL);
        etcd_watch_message_done(&m);
        check_zeroed(&m);

        /* exactly one message: one byte fewer is not one */
        FUZZ_ASSERT(etcd_grpc_watch_message_parse(p, len - 1, &m) == -EBADMSG);
        check_zeroed(&m);
}

/* One whole frame as a LeaseKeepAliveResponse: taken exactly when protobuf-c unpacks it and
 * its ID is one a request could have (> 0), with protobuf-c's ID, TTL and revision. */
static void fuzz_keepalive(const uint8_t *p, size_t len) {
        Etcdserverpb__LeaseKeepAliveResponse *k;
        EtcdAnswer a;
        int r;

        r = etcd_grpc_lease_keepalive_message_parse(p, len, &a);
        FUZZ_ASSERT(r == 0 || r == -EBADMSG || r == -ENOMEM);
        FUZZ_ASSERT(a.response.error == r && a.response.message);
        FUZZ_ASSERT(!a.response.kvs && !a.response.responses && !a.response.leader.key);
        k = etcdserverpb__lease_keep_alive_response__unpack(NULL, len - ETCD_GRPC_PREFIX,
                                                            p + ETCD_GRPC_PREFIX);
        if (r == 0) {
                FUZZ_ASSERT(k && k->id > 0);
                FUZZ_ASSERT(streq(a.response.message, ""));
                FUZZ_ASSERT(a.response.lease_id == k->id && a.response.ttl == k->ttl);
                FUZZ_ASSERT(a.response.revision == (k->header ? k->header->revision : 0));
        } else {
                FUZZ_ASSERT(r == -ENOMEM || !k || k->id <= 0);
                FUZZ_ASSERT(a.response.lease_id == 0 && a.response.ttl == 0);
                FUZZ_ASSERT(a.response.message[0] != '\0');
        }
        if (k)
                protobuf_c_message_free_unpacked(&k->base, NULL);
        etcd_answer_done(&a);

        /* exactly one message: one byte fewer is not one */
        FUZZ_ASSERT(etcd_grpc_lease_keepalive_message_parse(p, len - 1, &a) == -EBADMSG);
        etcd_answer_done(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t off = 0;

        while (off < size) {
                size_t len = 0;
                int r = etcd_grpc_frame_next(data + off, size - off, &len);

                check_frame(data + off, size - off, r, len);
                if (r <= 0)
                        break; /* refused: the stream is over; 0: the rest is to come */
                fuzz_message(data + off, len);
                fuzz_keepalive(data + off, len);
                /* nor is a message with the next one's first byte */
                if (off + len < size) {
                        EtcdWatchMessage m;

                        FUZZ_ASSERT(etcd_grpc_watch_message_parse(data + off, len + 1, &m) ==
                                    -EBADMSG);
                        check_zeroed(&m);
                }
                off += len;
        }
        return 0;
}
