/* SPDX-License-Identifier: MIT */
/* etcd's gRPC messages (etcd-grpc.h): etcd.h's structs to protobuf-c's and back. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-grpc.h"
#include "etcd-rpc.pb-c.h"
#include "macro.h"

/* ---- encoding ---- */

/* What one request's messages are made of, freed at once when it is packed. */
typedef struct Arena {
        void **blocks;
        size_t n, allocated;
} Arena;

static void *arena_new(Arena *a, size_t size) {
        void *p;

        if (a->n == a->allocated) {
                size_t m = MAX(a->allocated * 2, (size_t) 16);
                void **b = reallocarray(a->blocks, m, sizeof(void *));
                if (!b)
                        return NULL;
                a->blocks = b;
                a->allocated = m;
        }
        p = calloc(1, MAX(size, (size_t) 1));
        if (p)
                a->blocks[a->n++] = p;
        return p;
}

static void arena_done(Arena *a) {
        for (size_t i = 0; i < a->n; i++)
                free(a->blocks[i]);
        free(a->blocks);
        *a = (Arena) {};
}

/* Keys, values and range ends point into the caller's strings: packing copies them. */
static ProtobufCBinaryData bytes_of(const char *s) {
        return (ProtobufCBinaryData) { .len = strlen(s), .data = (uint8_t *) s };
}

/* "" as a range_end is etcd's "\0" (every key from key on). */
static ProtobufCBinaryData range_end_of(const char *s) {
        static const char nul[1] = { 0 };
        if (!s)
                return (ProtobufCBinaryData) {};
        if (s[0] == '\0')
                return (ProtobufCBinaryData) { .len = 1, .data = (uint8_t *) nul };
        return bytes_of(s);
}

static int build_range(Arena *a, const char *key, const char *range_end, int64_t limit,
                       Etcdserverpb__RangeRequest **ret) {
        Etcdserverpb__RangeRequest *m;

        if (!key || key[0] == '\0' || limit < 0)
                return -EINVAL;
        m = arena_new(a, sizeof(*m));
        if (!m)
                return -ENOMEM;
        etcdserverpb__range_request__init(m);
        m->key = bytes_of(key);
        m->range_end = range_end_of(range_end);
        m->limit = limit;
        *ret = m;
        return 0;
}

static int build_put(Arena *a, const char *key, const char *value, int64_t lease,
                     Etcdserverpb__PutRequest **ret) {
        Etcdserverpb__PutRequest *m;

        if (!key || key[0] == '\0' || lease < 0)
                return -EINVAL;
        m = arena_new(a, sizeof(*m));
        if (!m)
                return -ENOMEM;
        etcdserverpb__put_request__init(m);
        m->key = bytes_of(key);
        m->value = bytes_of(strempty(value));
        m->lease = lease;
        *ret = m;
        return 0;
}

static int build_delete(Arena *a, const char *key, const char *range_end,
                        Etcdserverpb__DeleteRangeRequest **ret) {
        Etcdserverpb__DeleteRangeRequest *m;

        if (!key || key[0] == '\0')
                return -EINVAL;
        m = arena_new(a, sizeof(*m));
        if (!m)
                return -ENOMEM;
        etcdserverpb__delete_range_request__init(m);
        m->key = bytes_of(key);
        m->range_end = range_end_of(range_end);
        *ret = m;
        return 0;
}

static int build_compare(Arena *a, const EtcdCompare *c, Etcdserverpb__Compare **ret) {
        Etcdserverpb__Compare *m;

        if (!c->key || c->key[0] == '\0' || (unsigned) c->target > ETCD_TARGET_LEASE ||
            (unsigned) c->result > ETCD_NOT_EQUAL || (c->target == ETCD_TARGET_VALUE && !c->value))
                return -EINVAL;
        m = arena_new(a, sizeof(*m));
        if (!m)
                return -ENOMEM;
        etcdserverpb__compare__init(m);
        m->key = bytes_of(c->key);
        /* etcd.h's enums have etcd's numbers. The target_union is always set, even at 0. */
        m->result = (Etcdserverpb__Compare__CompareResult) c->result;
        m->target = (Etcdserverpb__Compare__CompareTarget) c->target;
        switch (c->target) {
        case ETCD_TARGET_VERSION:
                m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
                m->version = c->number;
                break;
        case ETCD_TARGET_CREATE:
                m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
                m->create_revision = c->number;
                break;
        case ETCD_TARGET_MOD:
                m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
                m->mod_revision = c->number;
                break;
        case ETCD_TARGET_VALUE:
                m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
                m->value = bytes_of(c->value);
                break;
        case ETCD_TARGET_LEASE:
                m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
                m->lease = c->number;
                break;
        }
        *ret = m;
        return 0;
}

static int build_txn(Arena *a, const EtcdCompare *compare, size_t n_compare,
                     const EtcdOp *success, size_t n_success, const EtcdOp *failure,
                     size_t n_failure, unsigned depth, Etcdserverpb__TxnRequest **ret);

static int build_op(Arena *a, const EtcdOp *op, unsigned depth, Etcdserverpb__RequestOp **ret) {
        Etcdserverpb__RequestOp *m = arena_new(a, sizeof(*m));
        int r;

        if (!m)
                return -ENOMEM;
        etcdserverpb__request_op__init(m);
        switch (op->type) {
        case ETCD_OP_RANGE:
                m->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
                r = build_range(a, op->key, op->range_end, op->limit, &m->request_range);
                break;
        case ETCD_OP_PUT:
                m->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
                r = build_put(a, op->key, op->value, op->lease, &m->request_put);
                break;
        case ETCD_OP_DELETE:
                m->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
                r = build_delete(a, op->key, op->range_end, &m->request_delete_range);
                break;
        case ETCD_OP_TXN:
                if (depth >= ETCD_TXN_NESTING_MAX)
                        return -EINVAL;
                m->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
                r = build_txn(a, op->compare, op->n_compare, op->success, op->n_success,
                              op->failure, op->n_failure, depth + 1, &m->request_txn);
                break;
        default:
                return -EINVAL;
        }
        if (r < 0)
                return r;
        *ret = m;
        return 0;
}

static int build_ops(Arena *a, const EtcdOp *ops, size_t n, unsigned depth,
                     Etcdserverpb__RequestOp ***ret) {
        Etcdserverpb__RequestOp **v;
        int r;

        if (n == 0)
                return 0;
        if (!ops)
                return -EINVAL;
        v = arena_new(a, n * sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = build_op(a, &ops[i], depth, &v[i]);
                if (r < 0)
                        return r;
        }
        *ret = v;
        return 0;
}

/* depth: how many txns enclose this one. */
static int build_txn(Arena *a, const EtcdCompare *compare, size_t n_compare,
                     const EtcdOp *success, size_t n_success, const EtcdOp *failure,
                     size_t n_failure, unsigned depth, Etcdserverpb__TxnRequest **ret) {
        Etcdserverpb__TxnRequest *m = arena_new(a, sizeof(*m));
        int r;

        if (!m)
                return -ENOMEM;
        etcdserverpb__txn_request__init(m);
        if (n_compare > 0) {
                if (!compare)
                        return -EINVAL;
                m->compare = arena_new(a, n_compare * sizeof(*m->compare));
                if (!m->compare)
                        return -ENOMEM;
                for (size_t i = 0; i < n_compare; i++) {
                        r = build_compare(a, &compare[i], &m->compare[i]);
                        if (r < 0)
                                return r;
                }
                m->n_compare = n_compare;
        }
        r = build_ops(a, success, n_success, depth, &m->success);
        if (r < 0)
                return r;
        m->n_success = n_success;
        r = build_ops(a, failure, n_failure, depth, &m->failure);
        if (r < 0)
                return r;
        m->n_failure = n_failure;
        *ret = m;
        return 0;
}

static void prefix_put(uint8_t *p, size_t size) {
        p[0] = 0; /* not compressed */
        p[1] = (uint8_t) (size >> 24);
        p[2] = (uint8_t) (size >> 16);
        p[3] = (uint8_t) (size >> 8);
        p[4] = (uint8_t) size;
}

/* m packed, after gRPC's prefix when prefixed. */
static int pack(const ProtobufCMessage *m, bool prefixed, EtcdBytes *ret) {
        size_t size = protobuf_c_message_get_packed_size(m);
        size_t head = prefixed ? ETCD_GRPC_PREFIX : 0;
        uint8_t *p;

        if (size > UINT32_MAX)
                return -E2BIG;
        p = malloc(head + size + 1);
        if (!p)
                return -ENOMEM;
        if (prefixed)
                prefix_put(p, size);
        if (protobuf_c_message_pack(m, p + head) != size) {
                free(p);
                return -EINVAL;
        }
        *ret = (EtcdBytes) { .data = p, .size = head + size };
        return 0;
}

int etcd_grpc_range(const char *key, const char *range_end, int64_t limit, EtcdBytes *ret) {
        Arena a = {};
        Etcdserverpb__RangeRequest *m;
        int r = build_range(&a, key, range_end, limit, &m);

        if (r >= 0)
                r = pack(&m->base, true, ret);
        arena_done(&a);
        return r;
}

int etcd_grpc_put(const char *key, const char *value, int64_t lease, EtcdBytes *ret) {
        Arena a = {};
        Etcdserverpb__PutRequest *m;
        int r = build_put(&a, key, value, lease, &m);

        if (r >= 0)
                r = pack(&m->base, true, ret);
        arena_done(&a);
        return r;
}

int etcd_grpc_delete(const char *key, const char *range_end, EtcdBytes *ret) {
        Arena a = {};
        Etcdserverpb__DeleteRangeRequest *m;
        int r = build_delete(&a, key, range_end, &m);

        if (r >= 0)
                r = pack(&m->base, true, ret);
        arena_done(&a);
        return r;
}

int etcd_grpc_txn(const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
                  size_t n_success, const EtcdOp *failure, size_t n_failure, EtcdBytes *ret) {
        Arena a = {};
        Etcdserverpb__TxnRequest *m;
        int r = build_txn(&a, compare, n_compare, success, n_success, failure, n_failure, 0, &m);

        if (r >= 0)
                r = pack(&m->base, true, ret);
        arena_done(&a);
        return r;
}

int etcd_grpc_op(const EtcdOp *op, EtcdBytes *ret) {
        Arena a = {};
        Etcdserverpb__RequestOp *m;
        int r;

        if (!op)
                return -EINVAL;
        /* As an op of a txn: a nested txn is one level down already. */
        r = build_op(&a, op, 0, &m);
        if (r >= 0)
                r = pack(&m->base, false, ret);
        arena_done(&a);
        return r;
}

/* A varint of protobuf's wire format; returns its length (at most 10). */
static size_t varint_put(uint8_t *p, uint64_t v) {
        size_t n = 0;

        do {
                p[n++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
        } while (v > 0);
        return n;
}

/* TxnRequest's field 2 (success), length-delimited: tag 0x12. A repeated message field is
 * its elements one after the other, so the batch's RequestOps, each packed once by
 * etcd_grpc_op() when it was queued, are copied into the body as they are. */
#define TXN_SUCCESS_TAG 0x12

int etcd_grpc_txn_of_ops(const EtcdBytes *ops, size_t n, EtcdBytes *ret) {
        size_t size = 0, off = ETCD_GRPC_PREFIX;
        uint8_t *p;

        if (n > 0 && !ops)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!ops[i].data && ops[i].size > 0)
                        return -EINVAL;
                size += 1 + 10 + ops[i].size;
        }
        if (size > UINT32_MAX)
                return -E2BIG;
        p = malloc(ETCD_GRPC_PREFIX + size + 1);
        if (!p)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                p[off++] = TXN_SUCCESS_TAG;
                off += varint_put(p + off, ops[i].size);
                if (ops[i].size > 0)
                        memcpy(p + off, ops[i].data, ops[i].size);
                off += ops[i].size;
        }
        prefix_put(p, off - ETCD_GRPC_PREFIX);
        *ret = (EtcdBytes) { .data = p, .size = off };
        return 0;
}

void etcd_bytes_done(EtcdBytes *b) {
        if (!b)
                return;
        free(b->data);
        *b = (EtcdBytes) {};
}

int etcd_grpc_watch_create(const char *key, const char *range_end, int64_t start_revision,
                           EtcdBytes *ret) {
        Etcdserverpb__WatchCreateRequest c = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
        Etcdserverpb__WatchRequest m = ETCDSERVERPB__WATCH_REQUEST__INIT;

        if (!key || key[0] == '\0' || start_revision < 0)
                return -EINVAL;
        c.key = bytes_of(key);
        c.range_end = range_end_of(range_end);
        c.start_revision = start_revision;
        m.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
        m.create_request = &c;
        return pack(&m.base, true, ret);
}

int etcd_grpc_lease_grant(int64_t ttl_sec, EtcdBytes *ret) {
        Etcdserverpb__LeaseGrantRequest m = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;

        if (ttl_sec <= 0)
                return -EINVAL;
        m.ttl = ttl_sec; /* ID 0: etcd picks one */
        return pack(&m.base, true, ret);
}

int etcd_grpc_lease_keepalive(int64_t lease_id, EtcdBytes *ret) {
        Etcdserverpb__LeaseKeepAliveRequest m = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;

        if (lease_id <= 0)
                return -EINVAL;
        m.id = lease_id;
        return pack(&m.base, true, ret);
}

int etcd_grpc_lease_revoke(int64_t lease_id, EtcdBytes *ret) {
        Etcdserverpb__LeaseRevokeRequest m = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;

        if (lease_id <= 0)
                return -EINVAL;
        m.id = lease_id;
        return pack(&m.base, true, ret);
}

int etcd_grpc_election_campaign(const char *name, int64_t lease_id, const char *value,
                                EtcdBytes *ret) {
        Etcdserverpb__CampaignRequest m = ETCDSERVERPB__CAMPAIGN_REQUEST__INIT;

        if (!name || name[0] == '\0' || lease_id <= 0)
                return -EINVAL;
        m.name = bytes_of(name);
        m.lease = lease_id;
        m.value = bytes_of(value ? value : "");
        return pack(&m.base, true, ret);
}

int etcd_grpc_election_leader(const char *name, EtcdBytes *ret) {
        Etcdserverpb__LeaderRequest m = ETCDSERVERPB__LEADER_REQUEST__INIT;

        if (!name || name[0] == '\0')
                return -EINVAL;
        m.name = bytes_of(name);
        return pack(&m.base, true, ret);
}

int etcd_grpc_election_resign(const EtcdLeaderKey *leader, EtcdBytes *ret) {
        Etcdserverpb__ResignRequest m = ETCDSERVERPB__RESIGN_REQUEST__INIT;
        Etcdserverpb__LeaderKey k = ETCDSERVERPB__LEADER_KEY__INIT;

        if (!leader || !leader->name || leader->name[0] == '\0' || !leader->key ||
            leader->key[0] == '\0' || leader->rev <= 0 || leader->lease <= 0)
                return -EINVAL;
        k.name = bytes_of(leader->name);
        k.key = bytes_of(leader->key);
        k.rev = leader->rev;
        k.lease = leader->lease;
        m.leader = &k;
        return pack(&m.base, true, ret);
}

int etcd_grpc_frame_next(const uint8_t *p, size_t size, size_t *ret_len) {
        size_t len;

        if (size < ETCD_GRPC_PREFIX)
                return 0;
        if (p[0] != 0)
                return -EBADMSG; /* compressed: we never asked for it */
        len = (size_t) p[1] << 24 | (size_t) p[2] << 16 | (size_t) p[3] << 8 | p[4];
        if (len > ETCD_ANSWER_MAX)
                return -EBADMSG;
        if (size - ETCD_GRPC_PREFIX < len)
                return 0;
        *ret_len = ETCD_GRPC_PREFIX + len;
        return 1;
}
