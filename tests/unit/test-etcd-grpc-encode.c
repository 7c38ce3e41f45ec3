/* SPDX-License-Identifier: MIT */
/* fleet/etcd/etcd-grpc.c: the gRPC bodies we send to etcd's KV service. The bytes we expect are
 * written out by hand from protobuf's wire format (a tag is field << 3 | wire type: 0 varint,
 * 2 length-delimited), so that a change of what goes on the wire shows here and not first in
 * etcd; protobuf-c's own unpack reads the larger ones back. The answers are
 * test-etcd-grpc-answer.c's. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "etcd-grpc-test.h"
#include "etcd-grpc.h"
#include "etcd-rpc.pb-c.h"
#include "macro.h"

/* "/a/b", "/a/", "/a0", "hello" as bytes of a message */
#define AB '/', 'a', '/', 'b'
#define A_ '/', 'a', '/'
#define A0 '/', 'a', '0'
#define HELLO 'h', 'e', 'l', 'l', 'o'

/* check_bytes(CALL, B, BYTE...): CALL (which fills B) succeeds with exactly these bytes. */
#define check_bytes(call, b, ...)                                               \
        do {                                                                    \
                static const uint8_t want_[] = { __VA_ARGS__ };                 \
                (b) = (EtcdBytes) {};                                           \
                assert_int_equal((call), 0);                                    \
                assert_int_equal((b).size, sizeof(want_));                      \
                assert_memory_equal((b).data, want_, sizeof(want_));            \
                etcd_bytes_done(&(b));                                          \
                assert_null((b).data);                                          \
        } while (0)

static void assert_bytes(ProtobufCBinaryData d, const char *want) {
        assert_int_equal(d.len, strlen(want));
        if (d.len > 0)
                assert_memory_equal(d.data, want, d.len);
}

static void test_path(_unused_ void **state) {
        assert_string_equal(etcd_grpc_path(ETCD_ANSWER_RANGE), "/etcdserverpb.KV/Range");
        assert_string_equal(etcd_grpc_path(ETCD_ANSWER_PUT), "/etcdserverpb.KV/Put");
        assert_string_equal(etcd_grpc_path(ETCD_ANSWER_DELETE), "/etcdserverpb.KV/DeleteRange");
        assert_string_equal(etcd_grpc_path(ETCD_ANSWER_TXN), "/etcdserverpb.KV/Txn");
        assert_string_equal(etcd_grpc_path(ETCD_ANSWER_LEASE_GRANT),
                            "/etcdserverpb.Lease/LeaseGrant");
        assert_string_equal(etcd_grpc_path(ETCD_ANSWER_LEASE_KEEPALIVE),
                            "/etcdserverpb.Lease/LeaseKeepAlive");
        assert_string_equal(etcd_grpc_path(ETCD_ANSWER_LEASE_REVOKE),
                            "/etcdserverpb.Lease/LeaseRevoke");
        assert_null(etcd_grpc_path(_ETCD_ANSWER_MAX));
}

static void test_encode_kv(_unused_ void **state) {
        Etcdserverpb__RangeRequest *range;
        Etcdserverpb__PutRequest *put;
        const uint8_t *m;
        EtcdBytes b;
        size_t n;

        /* key (1); a zero limit is proto3's default, not sent */
        check_bytes(etcd_grpc_range("/a/b", NULL, 0, &b), b, 0, 0, 0, 0, 6, 0x0a, 4, AB);
        /* range_end (2), limit (3) */
        check_bytes(etcd_grpc_range("/a/", "/a0", 10, &b), b, 0, 0, 0, 0, 12, 0x0a, 3, A_, 0x12,
                    3, A0, 0x18, 10);
        /* "" is etcd's "\0": every key from key on */
        check_bytes(etcd_grpc_range("/a/", "", 0, &b), b, 0, 0, 0, 0, 8, 0x0a, 3, A_, 0x12, 1, 0);
        /* value (2); lease (3), 7587888 a varint of 4 bytes, 7 bits each, lowest first */
        check_bytes(etcd_grpc_put("/a/b", "hello", 0, &b), b, 0, 0, 0, 0, 13, 0x0a, 4, AB, 0x12, 5,
                    HELLO);
        check_bytes(etcd_grpc_put("/a/b", "", 7587888, &b), b, 0, 0, 0, 0, 11, 0x0a, 4, AB, 0x18,
                    0xb0, 0x90, 0xcf, 0x03);
        check_bytes(etcd_grpc_put("/a/b", NULL, 3, &b), b, 0, 0, 0, 0, 8, 0x0a, 4, AB, 0x18, 3);
        check_bytes(etcd_grpc_delete("/a/", "/a0", &b), b, 0, 0, 0, 0, 10, 0x0a, 3, A_, 0x12, 3,
                    A0);
        check_bytes(etcd_grpc_delete("/a/b", NULL, &b), b, 0, 0, 0, 0, 6, 0x0a, 4, AB);
        check_bytes(etcd_grpc_delete("/a/", "", &b), b, 0, 0, 0, 0, 8, 0x0a, 3, A_, 0x12, 1, 0);

        /* what protobuf-c reads back */
        assert_int_equal(etcd_grpc_range("/a/", "/a0", INT64_MAX, &b), 0);
        m = grpc_unprefix(&b, &n);
        range = etcdserverpb__range_request__unpack(NULL, n, m);
        assert_non_null(range);
        assert_bytes(range->key, "/a/");
        assert_bytes(range->range_end, "/a0");
        assert_int_equal(range->limit, INT64_MAX);
        assert_int_equal(range->revision, 0);
        etcdserverpb__range_request__free_unpacked(range, NULL);
        etcd_bytes_done(&b);
        assert_int_equal(etcd_grpc_put("/a/b", "hello", 8588824136662307345LL, &b), 0);
        m = grpc_unprefix(&b, &n);
        put = etcdserverpb__put_request__unpack(NULL, n, m);
        assert_non_null(put);
        assert_bytes(put->key, "/a/b");
        assert_bytes(put->value, "hello");
        assert_int_equal(put->lease, 8588824136662307345LL);
        etcdserverpb__put_request__free_unpacked(put, NULL);
        etcd_bytes_done(&b);

        /* refused: no key, an empty one, a negative lease or limit; nothing to free */
        b = (EtcdBytes) {};
        assert_int_equal(etcd_grpc_range(NULL, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_range("", NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_range("/a", NULL, -1, &b), -EINVAL);
        assert_int_equal(etcd_grpc_put(NULL, "x", 0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_put("", "x", 0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_put("/a", "x", -1, &b), -EINVAL);
        assert_int_equal(etcd_grpc_delete(NULL, NULL, &b), -EINVAL);
        assert_int_equal(etcd_grpc_delete("", "/b", &b), -EINVAL);
        assert_null(b.data);
        etcd_bytes_done(NULL);
}

/* Each target alone in a txn: compare (1) holds result (1), target (2), key (3) and the
 * target's field of target_union (4..8). result EQUAL and target VERSION are 0, proto3's
 * default, and not sent; the union's field is sent whatever its value: etcd reads a compare
 * without it as one against nil, not against 0. */
static void test_encode_compare(_unused_ void **state) {
        EtcdCompare c;
        EtcdBytes b;

        c = (EtcdCompare) { .key = "/a/b", .target = ETCD_TARGET_VERSION, .result = ETCD_GREATER,
                            .number = 1 };
        check_bytes(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), b, 0, 0, 0, 0, 12, 0x0a, 10, 0x08,
                    1, 0x1a, 4, AB, 0x20, 1);
        c = (EtcdCompare) { .key = "/a/b", .target = ETCD_TARGET_VERSION, .result = ETCD_EQUAL };
        check_bytes(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), b, 0, 0, 0, 0, 10, 0x0a, 8, 0x1a,
                    4, AB, 0x20, 0);
        /* create_revision = 0: "the key does not exist" */
        c = (EtcdCompare) { .key = "/a/b", .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL };
        check_bytes(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), b, 0, 0, 0, 0, 12, 0x0a, 10, 0x10,
                    1, 0x1a, 4, AB, 0x28, 0);
        c = (EtcdCompare) { .key = "/a/b", .target = ETCD_TARGET_MOD, .result = ETCD_LESS,
                            .number = 9 };
        check_bytes(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), b, 0, 0, 0, 0, 14, 0x0a, 12, 0x08,
                    2, 0x10, 2, 0x1a, 4, AB, 0x30, 9);
        c = (EtcdCompare) { .key = "/a/b", .target = ETCD_TARGET_VALUE, .result = ETCD_NOT_EQUAL,
                            .value = "hello" };
        check_bytes(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), b, 0, 0, 0, 0, 19, 0x0a, 17, 0x08,
                    3, 0x10, 3, 0x1a, 4, AB, 0x3a, 5, HELLO);
        /* an empty value is a value too */
        c = (EtcdCompare) { .key = "/a/b", .target = ETCD_TARGET_VALUE, .result = ETCD_EQUAL,
                            .value = "" };
        check_bytes(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), b, 0, 0, 0, 0, 12, 0x0a, 10, 0x10,
                    3, 0x1a, 4, AB, 0x3a, 0);
        c = (EtcdCompare) { .key = "/a/b", .target = ETCD_TARGET_LEASE, .result = ETCD_EQUAL,
                            .number = 3 };
        check_bytes(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), b, 0, 0, 0, 0, 12, 0x0a, 10, 0x10,
                    4, 0x1a, 4, AB, 0x40, 3);
        /* a negative number is a varint of 10 bytes (int64, not zigzag) */
        c = (EtcdCompare) { .key = "/a/b", .target = ETCD_TARGET_MOD, .result = ETCD_GREATER,
                            .number = -1 };
        check_bytes(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), b, 0, 0, 0, 0, 23, 0x0a, 21, 0x08,
                    1, 0x10, 2, 0x1a, 4, AB, 0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                    0xff, 0x01);

        /* refused: a VALUE compare without a value, no key, enums out of range */
        b = (EtcdBytes) {};
        c = (EtcdCompare) { .key = "/a/b", .target = ETCD_TARGET_VALUE };
        assert_int_equal(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), -EINVAL);
        c = (EtcdCompare) { .key = NULL, .target = ETCD_TARGET_CREATE };
        assert_int_equal(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), -EINVAL);
        c = (EtcdCompare) { .key = "", .target = ETCD_TARGET_CREATE };
        assert_int_equal(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), -EINVAL);
        c = (EtcdCompare) { .key = "/a/b", .target = (EtcdCompareTarget) 5 };
        assert_int_equal(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), -EINVAL);
        c = (EtcdCompare) { .key = "/a/b", .target = (EtcdCompareTarget) -1 };
        assert_int_equal(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), -EINVAL);
        c = (EtcdCompare) { .key = "/a/b", .result = (EtcdCompareResult) 4 };
        assert_int_equal(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), -EINVAL);
        c = (EtcdCompare) { .key = "/a/b", .result = (EtcdCompareResult) -1 };
        assert_int_equal(etcd_grpc_txn(&c, 1, NULL, 0, NULL, 0, &b), -EINVAL);
        assert_null(b.data);
}

static void test_encode_txn(_unused_ void **state) {
        const EtcdCompare cmp[] = {
                { .key = "/a/b", .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
                { .key = "/a/b", .target = ETCD_TARGET_MOD, .result = ETCD_LESS, .number = 9 },
                { .key = "/a/b", .target = ETCD_TARGET_VERSION, .result = ETCD_GREATER,
                  .number = 1 },
                { .key = "/a/b", .target = ETCD_TARGET_VALUE, .result = ETCD_NOT_EQUAL,
                  .value = "hello" },
                { .key = "/a/b", .target = ETCD_TARGET_LEASE, .result = ETCD_EQUAL, .number = 3 },
        };
        const EtcdOp ok[] = {
                { .type = ETCD_OP_PUT, .key = "/a/b", .value = "hello", .lease = 3 },
                { .type = ETCD_OP_DELETE, .key = "/a/", .range_end = "/a0" },
        };
        const EtcdOp ko[] = { { .type = ETCD_OP_RANGE, .key = "/a/b", .range_end = "",
                                .limit = 1 } };
        const EtcdOp bad_type = { .type = (EtcdOpType) 7, .key = "/a" };
        const EtcdOp bad_key = { .type = ETCD_OP_PUT, .key = "", .value = "x" };
        const EtcdOp bad_limit = { .type = ETCD_OP_RANGE, .key = "/a", .limit = -1 };
        const EtcdOp bad_lease = { .type = ETCD_OP_PUT, .key = "/a", .lease = -5 };
        Etcdserverpb__TxnRequest *t;
        Etcdserverpb__Compare *const *c;
        const uint8_t *m;
        EtcdBytes b;
        size_t n;

        assert_int_equal(etcd_grpc_txn(cmp, ELEMENTSOF(cmp), ok, ELEMENTSOF(ok), ko,
                                       ELEMENTSOF(ko), &b),
                         0);
        m = grpc_unprefix(&b, &n);
        t = etcdserverpb__txn_request__unpack(NULL, n, m);
        assert_non_null(t);
        assert_int_equal(t->n_compare, 5);
        c = t->compare;
        /* each compare's target_union is there, at 0 too */
        assert_int_equal(c[0]->target, ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE);
        assert_int_equal(c[0]->result, ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL);
        assert_int_equal(c[0]->target_union_case,
                         ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION);
        assert_int_equal(c[0]->create_revision, 0);
        assert_bytes(c[0]->key, "/a/b");
        assert_int_equal(c[0]->range_end.len, 0);
        assert_int_equal(c[1]->target, ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD);
        assert_int_equal(c[1]->result, ETCDSERVERPB__COMPARE__COMPARE_RESULT__LESS);
        assert_int_equal(c[1]->target_union_case, ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION);
        assert_int_equal(c[1]->mod_revision, 9);
        assert_int_equal(c[2]->target, ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION);
        assert_int_equal(c[2]->result, ETCDSERVERPB__COMPARE__COMPARE_RESULT__GREATER);
        assert_int_equal(c[2]->target_union_case, ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION);
        assert_int_equal(c[2]->version, 1);
        assert_int_equal(c[3]->target, ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE);
        assert_int_equal(c[3]->result, ETCDSERVERPB__COMPARE__COMPARE_RESULT__NOT_EQUAL);
        assert_int_equal(c[3]->target_union_case, ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE);
        assert_bytes(c[3]->value, "hello");
        assert_int_equal(c[4]->target, ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE);
        assert_int_equal(c[4]->target_union_case, ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE);
        assert_int_equal(c[4]->lease, 3);
        assert_int_equal(t->n_success, 2);
        assert_int_equal(t->success[0]->request_case,
                         ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT);
        assert_bytes(t->success[0]->request_put->key, "/a/b");
        assert_bytes(t->success[0]->request_put->value, "hello");
        assert_int_equal(t->success[0]->request_put->lease, 3);
        assert_int_equal(t->success[1]->request_case,
                         ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE);
        assert_bytes(t->success[1]->request_delete_range->key, "/a/");
        assert_bytes(t->success[1]->request_delete_range->range_end, "/a0");
        assert_int_equal(t->n_failure, 1);
        assert_int_equal(t->failure[0]->request_case,
                         ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE);
        assert_bytes(t->failure[0]->request_range->key, "/a/b");
        assert_int_equal(t->failure[0]->request_range->range_end.len, 1);
        assert_int_equal(t->failure[0]->request_range->range_end.data[0], 0);
        assert_int_equal(t->failure[0]->request_range->limit, 1);
        etcdserverpb__txn_request__free_unpacked(t, NULL);
        etcd_bytes_done(&b);

        /* a txn of one op in each branch, byte for byte: success (2) and failure (3) are
         * RequestOps, whose request_put is 2 and request_range 1 */
        check_bytes(etcd_grpc_txn(NULL, 0, &ok[0], 1, &ko[0], 1, &b), b, 0, 0, 0, 0, 34, 0x12,
                    17, 0x12, 15, 0x0a, 4, AB, 0x12, 5, HELLO, 0x18, 3, 0x1a, 13, 0x0a, 11, 0x0a,
                    4, AB, 0x12, 1, 0, 0x18, 1);
        /* nothing at all: an empty message */
        check_bytes(etcd_grpc_txn(NULL, 0, NULL, 0, NULL, 0, &b), b, 0, 0, 0, 0, 0);

        /* refused: an op of no known type, a bad op in either branch, arrays missing */
        b = (EtcdBytes) {};
        assert_int_equal(etcd_grpc_txn(NULL, 0, &bad_type, 1, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_txn(NULL, 0, ok, 2, &bad_key, 1, &b), -EINVAL);
        assert_int_equal(etcd_grpc_txn(NULL, 0, &bad_limit, 1, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_txn(NULL, 0, NULL, 0, &bad_lease, 1, &b), -EINVAL);
        assert_int_equal(etcd_grpc_txn(NULL, 1, NULL, 0, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_txn(NULL, 0, NULL, 1, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_txn(NULL, 0, NULL, 0, NULL, 1, &b), -EINVAL);
        assert_null(b.data);
}

static void test_encode_nested(_unused_ void **state) {
        const EtcdOp put = { .type = ETCD_OP_PUT, .key = "/a/b", .value = "x" };
        const EtcdOp inner = { .type = ETCD_OP_TXN, .success = &put, .n_success = 1 };
        const EtcdCompare cmp1[] = {
                { .key = "/a/b", .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
        };
        const EtcdOp ok1[] = { { .type = ETCD_OP_PUT, .key = "/a/b", .value = "hello" } };
        const EtcdOp ko1[] = { { .type = ETCD_OP_RANGE, .key = "/a/b", .limit = 1 } };
        const EtcdOp ok2[] = { { .type = ETCD_OP_DELETE, .key = "/a/" } };
        const EtcdOp nested[] = {
                { .type = ETCD_OP_TXN, .compare = cmp1, .n_compare = 1, .success = ok1,
                  .n_success = 1, .failure = ko1, .n_failure = 1 },
                { .type = ETCD_OP_TXN, .success = ok2, .n_success = 1 },
        };
        const EtcdOp deep3 = { .type = ETCD_OP_TXN, .success = nested, .n_success = 2 };
        const EtcdOp deep2 = { .type = ETCD_OP_TXN, .success = &deep3, .n_success = 1 };
        const EtcdOp deep1 = { .type = ETCD_OP_TXN, .failure = &deep2, .n_failure = 1 };
        const EtcdOp bad = { .type = ETCD_OP_TXN, .success = NULL, .n_success = 1 };
        const EtcdOp bad_inner = { .type = ETCD_OP_TXN, .compare = cmp1, .n_compare = 1,
                                   .failure = &(const EtcdOp) { .type = ETCD_OP_RANGE },
                                   .n_failure = 1 };
        Etcdserverpb__TxnRequest *t, *t1, *t2, *t3;
        const uint8_t *m;
        EtcdBytes b;
        size_t n;

        /* a RequestOp's request_txn (4) is a TxnRequest, lengths from the inside out: the put
         * is 9 bytes, its RequestOp 11, the nested txn 13, its RequestOp 15, the txn 17 */
        check_bytes(etcd_grpc_txn(NULL, 0, &inner, 1, NULL, 0, &b), b, 0, 0, 0, 0, 17, 0x12, 15,
                    0x22, 13, 0x12, 11, 0x12, 9, 0x0a, 4, AB, 0x12, 1, 'x');

        /* three levels below the txn are the most, in either branch */
        assert_int_equal(etcd_grpc_txn(NULL, 0, &deep2, 1, NULL, 0, &b), 0);
        m = grpc_unprefix(&b, &n);
        t = etcdserverpb__txn_request__unpack(NULL, n, m);
        assert_non_null(t);
        assert_int_equal(t->n_success, 1);
        assert_int_equal(t->success[0]->request_case,
                         ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN);
        t1 = t->success[0]->request_txn;
        assert_int_equal(t1->n_success, 1);
        assert_int_equal(t1->success[0]->request_case,
                         ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN);
        t2 = t1->success[0]->request_txn;
        assert_int_equal(t2->n_success, 2);
        t3 = t2->success[0]->request_txn;
        assert_int_equal(t3->n_compare, 1);
        assert_int_equal(t3->compare[0]->target_union_case,
                         ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION);
        assert_int_equal(t3->n_success, 1);
        assert_bytes(t3->success[0]->request_put->value, "hello");
        assert_int_equal(t3->n_failure, 1);
        assert_int_equal(t3->failure[0]->request_range->limit, 1);
        t3 = t2->success[1]->request_txn;
        assert_int_equal(t3->n_compare, 0);
        assert_int_equal(t3->n_failure, 0);
        assert_int_equal(t3->success[0]->request_case,
                         ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE);
        assert_bytes(t3->success[0]->request_delete_range->key, "/a/");
        etcdserverpb__txn_request__free_unpacked(t, NULL);
        etcd_bytes_done(&b);

        b = (EtcdBytes) {};
        assert_int_equal(etcd_grpc_txn(NULL, 0, &deep1, 1, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_txn(NULL, 0, NULL, 0, &deep1, 1, &b), -EINVAL);
        /* as a piece of a group commit, a txn is an op: one level down already */
        assert_int_equal(etcd_grpc_op(&deep2, &b), 0);
        etcd_bytes_done(&b);
        assert_int_equal(etcd_grpc_op(&deep1, &b), -EINVAL);
        /* a bad op deep down refuses the whole */
        assert_int_equal(etcd_grpc_op(&bad, &b), -EINVAL);
        assert_int_equal(etcd_grpc_op(&bad_inner, &b), -EINVAL);
        assert_int_equal(etcd_grpc_txn(NULL, 0, &bad_inner, 1, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_op(NULL, &b), -EINVAL);
        assert_null(b.data);
}

/* The group commit's way: each op packed once, the txn made of the pieces. */
static void test_txn_of_ops(_unused_ void **state) {
        char big[301];
        const EtcdCompare cmp = { .key = "/a/b", .target = ETCD_TARGET_CREATE,
                                  .result = ETCD_EQUAL };
        const EtcdOp put = { .type = ETCD_OP_PUT, .key = "/a/b", .value = "x" };
        const EtcdOp inner = { .type = ETCD_OP_TXN, .compare = &cmp, .n_compare = 1,
                               .success = &put, .n_success = 1 };
        const EtcdOp inner2 = { .type = ETCD_OP_TXN, .success = &inner, .n_success = 1 };
        EtcdOp ops[] = {
                { .type = ETCD_OP_RANGE, .key = "/a/", .range_end = "/a0", .limit = 3 },
                { .type = ETCD_OP_PUT, .key = "/big", .value = big, .lease = 77 },
                { .type = ETCD_OP_DELETE, .key = "/a/", .range_end = "" },
                inner,
                inner2,
                { .type = ETCD_OP_TXN },
        };
        EtcdBytes pieces[ELEMENTSOF(ops)] = {}, b, want;
        Etcdserverpb__TxnRequest *t;
        const uint8_t *m;
        size_t n;

        /* a value long enough that its RequestOp's length takes a varint of 2 bytes */
        memset(big, 'v', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(ops); i++) {
                assert_int_equal(etcd_grpc_op(&ops[i], &pieces[i]), 0);
                assert_non_null(pieces[i].data);
        }
        assert_true(pieces[1].size > 127);
        /* an empty nested txn is an empty TxnRequest inside its RequestOp */
        assert_int_equal(pieces[5].size, 2);
        assert_memory_equal(pieces[5].data, "\x22\x00", 2);

        for (size_t k = 0; k <= ELEMENTSOF(ops); k++) {
                assert_int_equal(etcd_grpc_txn_of_ops(pieces, k, &b), 0);
                assert_int_equal(etcd_grpc_txn(NULL, 0, ops, k, NULL, 0, &want), 0);
                assert_int_equal(b.size, want.size);
                assert_memory_equal(b.data, want.data, want.size);
                etcd_bytes_done(&want);
                etcd_bytes_done(&b);
        }
        /* none at all */
        check_bytes(etcd_grpc_txn_of_ops(NULL, 0, &b), b, 0, 0, 0, 0, 0);
        assert_int_equal(etcd_grpc_txn_of_ops(NULL, 1, &b), -EINVAL);

        assert_int_equal(etcd_grpc_txn_of_ops(pieces, ELEMENTSOF(ops), &b), 0);
        m = grpc_unprefix(&b, &n);
        t = etcdserverpb__txn_request__unpack(NULL, n, m);
        assert_non_null(t);
        assert_int_equal(t->n_compare, 0);
        assert_int_equal(t->n_failure, 0);
        assert_int_equal(t->n_success, ELEMENTSOF(ops));
        assert_int_equal(t->success[1]->request_put->value.len, 300);
        assert_int_equal(t->success[1]->request_put->lease, 77);
        assert_int_equal(t->success[4]->request_txn->success[0]->request_txn->n_compare, 1);
        etcdserverpb__txn_request__free_unpacked(t, NULL);
        etcd_bytes_done(&b);

        for (size_t i = 0; i < ELEMENTSOF(ops); i++)
                etcd_bytes_done(&pieces[i]);
        /* a piece without its bytes */
        pieces[0] = (EtcdBytes) { .data = NULL, .size = 3 };
        b = (EtcdBytes) {};
        assert_int_equal(etcd_grpc_txn_of_ops(pieces, 1, &b), -EINVAL);
        assert_null(b.data);
}

/* ---- answers ---- */

/* m packed behind gRPC's prefix, as etcd answers. */

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_path),
                cmocka_unit_test(test_encode_kv),
                cmocka_unit_test(test_encode_compare),
                cmocka_unit_test(test_encode_txn),
                cmocka_unit_test(test_encode_nested),
                cmocka_unit_test(test_txn_of_ops),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
