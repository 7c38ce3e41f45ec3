/* SPDX-License-Identifier: MIT */
/* etcd's gRPC answers of the KV and Lease services (etcd-grpc.h) into EtcdAnswer. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-grpc.h"
#include "etcd-rpc.pb-c.h"
#include "macro.h"

const char *etcd_grpc_path(EtcdAnswerKind kind) {
        switch (kind) {
        case ETCD_ANSWER_RANGE:
                return "/etcdserverpb.KV/Range";
        case ETCD_ANSWER_PUT:
                return "/etcdserverpb.KV/Put";
        case ETCD_ANSWER_DELETE:
                return "/etcdserverpb.KV/DeleteRange";
        case ETCD_ANSWER_TXN:
                return "/etcdserverpb.KV/Txn";
        case ETCD_ANSWER_LEASE_GRANT:
                return "/etcdserverpb.Lease/LeaseGrant";
        case ETCD_ANSWER_LEASE_KEEPALIVE:
                return "/etcdserverpb.Lease/LeaseKeepAlive";
        case ETCD_ANSWER_LEASE_REVOKE:
                return "/etcdserverpb.Lease/LeaseRevoke";
        case ETCD_ANSWER_ELECTION_CAMPAIGN:
                return "/v3electionpb.Election/Campaign";
        case ETCD_ANSWER_ELECTION_LEADER:
                return "/v3electionpb.Election/Leader";
        case ETCD_ANSWER_ELECTION_RESIGN:
                return "/v3electionpb.Election/Resign";
        default:
                return NULL;
        }
}

static int hex_value(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

char *etcd_grpc_message_decode(const char *s) {
        size_t n = strlen(s), j = 0;
        char *d = malloc(n + 1);

        if (!d)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                int hi, lo;

                /* s is NUL-terminated: a short escape stops at the NUL, no number */
                if (s[i] == '%' && (hi = hex_value(s[i + 1])) >= 0 &&
                    (lo = hex_value(s[i + 2])) >= 0) {
                        d[j++] = (char) (hi << 4 | lo);
                        i += 2;
                } else
                        d[j++] = s[i];
        }
        d[j] = '\0';
        return d;
}

/* ---- the wire's nesting, before protobuf-c (which recurses) decodes it ---- */

static int varint_get(const uint8_t *p, size_t n, size_t *off, uint64_t *ret) {
        uint64_t v = 0;

        for (unsigned shift = 0; shift < 64; shift += 7) {
                uint8_t b;

                if (*off >= n)
                        return -EBADMSG;
                b = p[(*off)++];
                v |= (uint64_t) (b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

/* Calls field(number, bytes) for each length-delimited field of the message in p; skips the
 * others; -EBADMSG for a message that is not protobuf's wire format. */
static int fields_scan(const uint8_t *p, size_t n, unsigned depth,
                       int (*field)(uint64_t number, const uint8_t *p, size_t n, unsigned depth)) {
        size_t off = 0;
        int r;

        while (off < n) {
                uint64_t tag, len;

                r = varint_get(p, n, &off, &tag);
                if (r < 0)
                        return r;
                switch (tag & 7) {
                case 0:
                        r = varint_get(p, n, &off, &len);
                        break;
                case 1:
                case 5: {
                        size_t w = (tag & 7) == 1 ? 8 : 4;
                        r = n - off >= w ? 0 : -EBADMSG;
                        off += r < 0 ? 0 : w;
                        break;
                }
                case 2:
                        r = varint_get(p, n, &off, &len);
                        if (r >= 0 && len > n - off)
                                r = -EBADMSG;
                        if (r >= 0 && field)
                                r = field(tag >> 3, p + off, (size_t) len, depth);
                        off += r < 0 ? 0 : (size_t) len;
                        break;
                default:
                        r = -EBADMSG; /* groups: not in etcd's messages */
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

static int txn_response_field(uint64_t number, const uint8_t *p, size_t n, unsigned depth);

/* ResponseOp: its response_txn (4) is a txn one level down. */
static int response_op_field(uint64_t number, const uint8_t *p, size_t n, unsigned depth) {
        if (number != 4)
                return 0;
        if (depth + 1 > ETCD_TXN_NESTING_MAX)
                return -EBADMSG;
        return fields_scan(p, n, depth + 1, txn_response_field);
}

/* TxnResponse: its responses (3) are ResponseOps. */
static int txn_response_field(uint64_t number, const uint8_t *p, size_t n, unsigned depth) {
        return number == 3 ? fields_scan(p, n, depth, response_op_field) : 0;
}

/* ---- messages into EtcdResponse ---- */

static int copy_kv(const Etcdserverpb__KeyValue *m, EtcdKv *kv) {
        /* a key is never empty, and ours are C strings */
        if (m->key.len == 0 || memchr(m->key.data, '\0', m->key.len))
                return -EBADMSG;
        kv->key = strndup((const char *) m->key.data, m->key.len);
        kv->value = malloc(m->value.len + 1);
        if (!kv->key || !kv->value)
                return -ENOMEM;
        if (m->value.len > 0)
                memcpy(kv->value, m->value.data, m->value.len);
        kv->value[m->value.len] = '\0';
        kv->value_len = m->value.len;
        kv->create_revision = m->create_revision;
        kv->mod_revision = m->mod_revision;
        kv->version = m->version;
        kv->lease = m->lease;
        return 0;
}

static int64_t header_revision(const Etcdserverpb__ResponseHeader *h) {
        return h ? h->revision : 0;
}

static int from_range(const Etcdserverpb__RangeResponse *m, EtcdResponse *resp) {
        int r;

        resp->revision = header_revision(m->header);
        resp->more = m->more;
        resp->count = m->count;
        if (m->n_kvs == 0)
                return 0;
        resp->kvs = new0(EtcdKv, m->n_kvs);
        if (!resp->kvs)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_kvs; i++) {
                resp->n_kvs = i + 1; /* so that done() frees the half-copied one */
                r = copy_kv(m->kvs[i], &resp->kvs[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int from_txn(const Etcdserverpb__TxnResponse *m, EtcdResponse *resp, unsigned depth,
                    int64_t enclosing);

/* enclosing: the revision of the txn the op is in, a nested txn's own (etcd gives it no
 * header). */
static int from_op(const Etcdserverpb__ResponseOp *m, EtcdResponse *resp, unsigned depth,
                   int64_t enclosing) {
        switch (m->response_case) {
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE:
                return from_range(m->response_range, resp);
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT:
                resp->revision = header_revision(m->response_put->header);
                return 0;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE:
                resp->revision = header_revision(m->response_delete_range->header);
                resp->deleted = m->response_delete_range->deleted;
                return 0;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN:
                return from_txn(m->response_txn, resp, depth + 1, enclosing);
        default:
                return -EBADMSG;
        }
}

/* depth: how many txns enclose this one; enclosing: the revision of the innermost (0 for
 * none), which is this one's when it has no header of its own, as nested txns have not. */
static int from_txn(const Etcdserverpb__TxnResponse *m, EtcdResponse *resp, unsigned depth,
                    int64_t enclosing) {
        int r;

        if (depth > ETCD_TXN_NESTING_MAX)
                return -EBADMSG;
        resp->revision = header_revision(m->header) ?: enclosing;
        resp->succeeded = m->succeeded;
        if (m->n_responses == 0)
                return 0;
        resp->responses = new0(EtcdResponse, m->n_responses);
        if (!resp->responses)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_responses; i++) {
                EtcdResponse *sub = &resp->responses[i];

                resp->n_responses = i + 1;
                sub->message = "";
                r = from_op(m->responses[i], sub, depth, resp->revision);
                if (r < 0)
                        return r;
                /* an op without a header is made at the txn's revision */
                if (sub->revision == 0)
                        sub->revision = resp->revision;
        }
        return 0;
}

/* A campaign's leader key: every field etcd sends (a name and key, C strings; rev and lease
 * > 0). */
static int from_campaign(const Etcdserverpb__CampaignResponse *m, EtcdResponse *resp) {
        const Etcdserverpb__LeaderKey *k = m->leader;

        resp->revision = header_revision(m->header);
        if (!k || k->name.len == 0 || k->key.len == 0 || k->rev <= 0 || k->lease <= 0 ||
            memchr(k->name.data, '\0', k->name.len) || memchr(k->key.data, '\0', k->key.len))
                return -EBADMSG;
        resp->leader.name = strndup((const char *) k->name.data, k->name.len);
        resp->leader.key = strndup((const char *) k->key.data, k->key.len);
        if (!resp->leader.name || !resp->leader.key)
                return -ENOMEM;
        resp->leader.rev = k->rev;
        resp->leader.lease = k->lease;
        return 0;
}

/* The leader's key-value (etcd answers "election: no leader" as an error when there is none). */
static int from_leader(const Etcdserverpb__LeaderResponse *m, EtcdResponse *resp) {
        resp->revision = header_revision(m->header);
        if (!m->kv)
                return -EBADMSG;
        resp->kvs = new0(EtcdKv, 1);
        if (!resp->kvs)
                return -ENOMEM;
        resp->n_kvs = 1;
        resp->count = 1;
        return copy_kv(m->kv, &resp->kvs[0]);
}

static ProtobufCMessage *unpack(EtcdAnswerKind kind, const uint8_t *p, size_t n) {
        switch (kind) {
        case ETCD_ANSWER_RANGE:
                return (ProtobufCMessage *) etcdserverpb__range_response__unpack(NULL, n, p);
        case ETCD_ANSWER_PUT:
                return (ProtobufCMessage *) etcdserverpb__put_response__unpack(NULL, n, p);
        case ETCD_ANSWER_DELETE:
                return (ProtobufCMessage *) etcdserverpb__delete_range_response__unpack(NULL, n,
                                                                                       p);
        case ETCD_ANSWER_TXN:
                /* protobuf-c recurses as deep as the nesting: checked on the wire first */
                if (fields_scan(p, n, 0, txn_response_field) < 0)
                        return NULL;
                return (ProtobufCMessage *) etcdserverpb__txn_response__unpack(NULL, n, p);
        case ETCD_ANSWER_LEASE_GRANT:
                return (ProtobufCMessage *) etcdserverpb__lease_grant_response__unpack(NULL, n,
                                                                                      p);
        case ETCD_ANSWER_LEASE_KEEPALIVE:
                return (ProtobufCMessage *) etcdserverpb__lease_keep_alive_response__unpack(
                        NULL, n, p);
        case ETCD_ANSWER_LEASE_REVOKE:
                return (ProtobufCMessage *) etcdserverpb__lease_revoke_response__unpack(NULL, n,
                                                                                       p);
        case ETCD_ANSWER_ELECTION_CAMPAIGN:
                return (ProtobufCMessage *) etcdserverpb__campaign_response__unpack(NULL, n, p);
        case ETCD_ANSWER_ELECTION_LEADER:
                return (ProtobufCMessage *) etcdserverpb__leader_response__unpack(NULL, n, p);
        case ETCD_ANSWER_ELECTION_RESIGN:
                return (ProtobufCMessage *) etcdserverpb__resign_response__unpack(NULL, n, p);
        default:
                return NULL;
        }
}

static int from_message(EtcdAnswerKind kind, const uint8_t *p, size_t n, EtcdResponse *resp) {
        ProtobufCMessage *m = unpack(kind, p, n);
        int r = 0;

        if (!m)
                return -EBADMSG;
        switch (kind) {
        case ETCD_ANSWER_RANGE:
                r = from_range((Etcdserverpb__RangeResponse *) m, resp);
                break;
        case ETCD_ANSWER_PUT:
                resp->revision = header_revision(((Etcdserverpb__PutResponse *) m)->header);
                break;
        case ETCD_ANSWER_DELETE: {
                Etcdserverpb__DeleteRangeResponse *d = (Etcdserverpb__DeleteRangeResponse *) m;
                resp->revision = header_revision(d->header);
                resp->deleted = d->deleted;
                break;
        }
        case ETCD_ANSWER_LEASE_GRANT: {
                Etcdserverpb__LeaseGrantResponse *g = (Etcdserverpb__LeaseGrantResponse *) m;
                /* error: etcd's old way of saying the grant failed; the ID is then none */
                if (g->error && g->error[0])
                        r = -EIO;
                resp->revision = header_revision(g->header);
                resp->lease_id = g->id;
                resp->ttl = g->ttl;
                break;
        }
        case ETCD_ANSWER_LEASE_KEEPALIVE: {
                Etcdserverpb__LeaseKeepAliveResponse *k =
                        (Etcdserverpb__LeaseKeepAliveResponse *) m;
                resp->revision = header_revision(k->header);
                resp->lease_id = k->id;
                resp->ttl = k->ttl; /* 0: the lease is gone */
                break;
        }
        case ETCD_ANSWER_LEASE_REVOKE:
                resp->revision = header_revision(((Etcdserverpb__LeaseRevokeResponse *) m)->header);
                break;
        case ETCD_ANSWER_ELECTION_CAMPAIGN:
                r = from_campaign((Etcdserverpb__CampaignResponse *) m, resp);
                break;
        case ETCD_ANSWER_ELECTION_LEADER:
                r = from_leader((Etcdserverpb__LeaderResponse *) m, resp);
                break;
        case ETCD_ANSWER_ELECTION_RESIGN:
                resp->revision = header_revision(((Etcdserverpb__ResignResponse *) m)->header);
                break;
        default:
                r = from_txn((Etcdserverpb__TxnResponse *) m, resp, 0, 0);
        }
        protobuf_c_message_free_unpacked(m, NULL);
        return r;
}

/* ---- the answer ---- */

#define GRPC_DEADLINE_EXCEEDED 4L
#define GRPC_UNAVAILABLE 14L

static int grpc_error(const char *grpc_status, const char *grpc_message, EtcdAnswer *a) {
        _cleanup_free_ char *msg = grpc_message ? etcd_grpc_message_decode(grpc_message) : NULL;
        char what[64];
        char *end = NULL;
        long code;
        int r;

        /* gRPC's codes are 0-16: digits only, no sign, no leading zero */
        errno = 0;
        code = strtol(grpc_status, &end, 10);
        if (errno != 0 || end == grpc_status || *end != '\0' || code < 0 || code > 255 ||
            strspn(grpc_status, "0123456789") != strlen(grpc_status) ||
            (grpc_status[0] == '0' && grpc_status[1] != '\0')) {
                etcd_answer_fail(a, -EBADMSG, "gRPC answer", "a grpc-status that is no number");
                return -EBADMSG;
        }
        (void) snprintf(what, sizeof(what), "etcd error (gRPC code %ld)", code);
        /* The call's grpc-timeout passed in etcd (DEADLINE_EXCEEDED), or etcd's own wait for
         * the raft log did ("etcdserver: request timed out..."): the outcome is unknown, as
         * when the client's timer ends the call. */
        r = code == GRPC_DEADLINE_EXCEEDED ||
                            (code == GRPC_UNAVAILABLE && msg &&
                             strncmp(msg, "etcdserver: request timed out", 29) == 0)
                    ? -ETIMEDOUT
                    : -EIO;
        etcd_answer_fail(a, r, what, msg && msg[0] ? msg : "(no message)");
        return r;
}

int etcd_grpc_answer_parse(EtcdAnswerKind kind, long http_status, const char *grpc_status,
                           const char *grpc_message, const uint8_t *body, size_t size,
                           EtcdAnswer *a) {
        const char *path = etcd_grpc_path(kind);
        char what[64];
        size_t len;
        int r;

        *a = (EtcdAnswer) { .response.message = "" };
        if (!path) {
                etcd_answer_fail(a, -EINVAL, "unknown kind of answer", NULL);
                return -EINVAL;
        }
        /* A trailers-only answer (an error) has its status in the headers and no body. */
        if (grpc_status && !streq(grpc_status, "0"))
                return grpc_error(grpc_status, grpc_message, a);
        if (http_status != 200) {
                (void) snprintf(what, sizeof(what), "HTTP %ld", http_status);
                etcd_answer_fail(a, -EIO, what, "an answer that is not etcd's gRPC");
                return -EIO;
        }
        if (!grpc_status) {
                etcd_answer_fail(a, -EBADMSG, path, "an answer without grpc-status");
                return -EBADMSG;
        }
        if (!body || size < ETCD_GRPC_PREFIX || size > ETCD_ANSWER_MAX || body[0] != 0) {
                etcd_answer_fail(a, -EBADMSG, path, body && size >= ETCD_GRPC_PREFIX && body[0]
                                                            ? "a compressed message"
                                                            : "not one gRPC message");
                return -EBADMSG;
        }
        len = (size_t) body[1] << 24 | (size_t) body[2] << 16 | (size_t) body[3] << 8 | body[4];
        if (len != size - ETCD_GRPC_PREFIX) {
                etcd_answer_fail(a, -EBADMSG, path, "not one gRPC message");
                return -EBADMSG;
        }
        r = from_message(kind, body + ETCD_GRPC_PREFIX, len, &a->response);
        if (r < 0) {
                etcd_answer_fail(a, r, path, r == -ENOMEM ? "out of memory"
                                             : r == -EIO      ? "etcd refused the lease"
                                                              : "malformed answer");
                return r;
        }
        return 0;
}

/* ---- the Watch stream ---- */

static int from_watch_response(const Etcdserverpb__WatchResponse *w, EtcdWatchMessage *m) {
        int r;

        m->revision = header_revision(w->header);
        m->created = w->created;
        m->canceled = w->canceled;
        m->compact_revision = w->compact_revision;
        if (w->cancel_reason && w->cancel_reason[0]) {
                m->error = etcd_sanitized(w->cancel_reason, 512);
                if (!m->error)
                        return -ENOMEM;
        }
        /* fragment: never asked for (WatchCreateRequest.fragment false) */
        if (w->fragment)
                return -EBADMSG;
        if (w->n_events == 0)
                return 0;
        m->events = new0(EtcdEvent, w->n_events);
        if (!m->events)
                return -ENOMEM;
        for (size_t i = 0; i < w->n_events; i++) {
                const Etcdserverpb__Event *ev = w->events[i];

                if (!ev->kv || (ev->type != ETCDSERVERPB__EVENT__EVENT_TYPE__PUT &&
                                ev->type != ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE))
                        return -EBADMSG;
                m->n_events = i + 1;
                m->events[i].type = ev->type == ETCDSERVERPB__EVENT__EVENT_TYPE__PUT
                                            ? ETCD_EVENT_PUT
                                            : ETCD_EVENT_DELETE;
                r = copy_kv(ev->kv, &m->events[i].kv);
                if (r < 0)
                        return r;
        }
        return 0;
}

int etcd_grpc_watch_message_parse(const uint8_t *p, size_t size, EtcdWatchMessage *m) {
        Etcdserverpb__WatchResponse *w;
        size_t len;
        int r;

        *m = (EtcdWatchMessage) {};
        if (etcd_grpc_frame_next(p, size, &len) <= 0 || len != size)
                return -EBADMSG;
        w = etcdserverpb__watch_response__unpack(NULL, size - ETCD_GRPC_PREFIX,
                                                 p + ETCD_GRPC_PREFIX);
        if (!w)
                return -EBADMSG;
        r = from_watch_response(w, m);
        protobuf_c_message_free_unpacked(&w->base, NULL);
        if (r < 0)
                etcd_watch_message_done(m);
        return r;
}

/* ---- the LeaseKeepAlive stream ---- */

int etcd_grpc_lease_keepalive_message_parse(const uint8_t *p, size_t size, EtcdAnswer *a) {
        const char *path = etcd_grpc_path(ETCD_ANSWER_LEASE_KEEPALIVE);
        size_t len;
        int r;

        *a = (EtcdAnswer) { .response.message = "" };
        if (etcd_grpc_frame_next(p, size, &len) <= 0 || len != size) {
                etcd_answer_fail(a, -EBADMSG, path, "not one gRPC message");
                return -EBADMSG;
        }
        r = from_message(ETCD_ANSWER_LEASE_KEEPALIVE, p + ETCD_GRPC_PREFIX,
                         size - ETCD_GRPC_PREFIX, &a->response);
        /* the ID is what the answer is matched by: etcd echoes the request's, always > 0 */
        if (r == 0 && a->response.lease_id <= 0)
                r = -EBADMSG;
        if (r < 0) {
                etcd_answer_fail(a, r, path,
                                 r == -ENOMEM ? "out of memory" : "malformed keepalive answer");
                return r;
        }
        return 0;
}
