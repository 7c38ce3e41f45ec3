/* SPDX-License-Identifier: MIT */
/* fleet/etcd/etcd-grpc-parse.c: the answers etcd's KV service sends back, made by protobuf-c's
 * packing of the messages etcd sends (etcd is Go's protobuf: the same wire format), behind
 * gRPC's 5-byte prefix, or written out by hand where protobuf-c would not make them. The
 * requests are test-etcd-grpc-encode.c's. */
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

/* A successful call: HTTP 200, grpc-status 0. Frees b. */
static int parse_ok(EtcdAnswerKind kind, EtcdBytes *b, EtcdAnswer *a) {
        int r = etcd_grpc_answer_parse(kind, 200, "0", NULL, b->data, b->size, a);
        etcd_bytes_done(b);
        return r;
}

static Etcdserverpb__ResponseHeader header5 = RESPONSE_HEADER(5);

static void test_decode_range(_unused_ void **state) {
        Etcdserverpb__KeyValue kv0 = ETCDSERVERPB__KEY_VALUE__INIT,
                               kv1 = ETCDSERVERPB__KEY_VALUE__INIT;
        Etcdserverpb__KeyValue *kvs[] = { &kv0, &kv1 };
        Etcdserverpb__RangeResponse range = ETCDSERVERPB__RANGE_RESPONSE__INIT;
        EtcdAnswer a;
        EtcdBytes b;

        kv0.key = bin("/a/b", 4);
        kv0.create_revision = 2;
        kv0.mod_revision = 3;
        kv0.version = 2;
        kv0.value = bin("hello", 5);
        /* a value is bytes: a NUL inside is kept and counted */
        kv1.key = bin("/a/", 3);
        kv1.create_revision = 5;
        kv1.mod_revision = 6;
        kv1.version = 1;
        kv1.value = bin("a\0b", 3);
        kv1.lease = 8588824136662307345LL;
        range.header = &header5;
        range.n_kvs = 2;
        range.kvs = kvs;
        range.more = 1;
        range.count = 3;
        b = grpc_packed(&range);
        assert_int_equal(parse_ok(ETCD_ANSWER_RANGE, &b, &a), 0);
        assert_int_equal(a.response.error, 0);
        assert_string_equal(a.response.message, "");
        assert_int_equal(a.response.revision, 5);
        assert_int_equal(a.response.n_kvs, 2);
        assert_true(a.response.more);
        assert_int_equal(a.response.count, 3);
        assert_string_equal(a.response.kvs[0].key, "/a/b");
        assert_string_equal(a.response.kvs[0].value, "hello");
        assert_int_equal(a.response.kvs[0].value_len, 5);
        assert_int_equal(a.response.kvs[0].create_revision, 2);
        assert_int_equal(a.response.kvs[0].mod_revision, 3);
        assert_int_equal(a.response.kvs[0].version, 2);
        assert_int_equal(a.response.kvs[0].lease, 0);
        assert_string_equal(a.response.kvs[1].key, "/a/");
        assert_int_equal(a.response.kvs[1].value_len, 3);
        assert_memory_equal(a.response.kvs[1].value, "a\0b", 4);
        assert_int_equal(a.response.kvs[1].lease, 8588824136662307345LL);
        assert_int_equal(a.response.n_responses, 0);
        etcd_answer_done(&a);
        assert_null(a.message);
        assert_int_equal(a.response.n_kvs, 0);

        /* nothing found: no kvs, no count, no more; an empty value is a "" */
        range = (Etcdserverpb__RangeResponse) ETCDSERVERPB__RANGE_RESPONSE__INIT;
        range.header = &header5;
        b = grpc_packed(&range);
        assert_int_equal(parse_ok(ETCD_ANSWER_RANGE, &b, &a), 0);
        assert_int_equal(a.response.revision, 5);
        assert_int_equal(a.response.n_kvs, 0);
        assert_null(a.response.kvs);
        assert_int_equal(a.response.count, 0);
        assert_false(a.response.more);
        etcd_answer_done(&a);
        kv0.value = bin(NULL, 0);
        range.n_kvs = 1;
        range.kvs = kvs;
        b = grpc_packed(&range);
        assert_int_equal(parse_ok(ETCD_ANSWER_RANGE, &b, &a), 0);
        assert_string_equal(a.response.kvs[0].value, "");
        assert_int_equal(a.response.kvs[0].value_len, 0);
        etcd_answer_done(&a);

        /* a field etcd adds later is skipped: count (4) 1, then field 15 as a varint */
        b = grpc_raw((const uint8_t[]) { 0x20, 1, 0x78, 42 }, 4);
        assert_int_equal(parse_ok(ETCD_ANSWER_RANGE, &b, &a), 0);
        assert_int_equal(a.response.count, 1);
        etcd_answer_done(&a);
}

static void test_decode_simple(_unused_ void **state) {
        Etcdserverpb__PutResponse put = ETCDSERVERPB__PUT_RESPONSE__INIT;
        Etcdserverpb__DeleteRangeResponse del = ETCDSERVERPB__DELETE_RANGE_RESPONSE__INIT;
        EtcdAnswer a;
        EtcdBytes b;

        put.header = &header5;
        b = grpc_packed(&put);
        assert_int_equal(parse_ok(ETCD_ANSWER_PUT, &b, &a), 0);
        assert_int_equal(a.response.revision, 5);
        assert_string_equal(a.response.message, "");
        etcd_answer_done(&a);
        del.header = &header5;
        del.deleted = 4;
        b = grpc_packed(&del);
        assert_int_equal(parse_ok(ETCD_ANSWER_DELETE, &b, &a), 0);
        assert_int_equal(a.response.revision, 5);
        assert_int_equal(a.response.deleted, 4);
        etcd_answer_done(&a);
        /* an empty message is a message: every field at its default */
        b = grpc_raw(NULL, 0);
        assert_int_equal(parse_ok(ETCD_ANSWER_PUT, &b, &a), 0);
        assert_int_equal(a.response.revision, 0);
        etcd_answer_done(&a);
        b = grpc_raw(NULL, 0);
        assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), 0);
        assert_false(a.response.succeeded);
        assert_int_equal(a.response.n_responses, 0);
        etcd_answer_done(&a);
}

static void test_decode_txn(_unused_ void **state) {
        Etcdserverpb__ResponseHeader h4 = ETCDSERVERPB__RESPONSE_HEADER__INIT;
        Etcdserverpb__KeyValue kv = ETCDSERVERPB__KEY_VALUE__INIT, *kvs[] = { &kv };
        Etcdserverpb__PutResponse put = ETCDSERVERPB__PUT_RESPONSE__INIT;
        Etcdserverpb__RangeResponse range = ETCDSERVERPB__RANGE_RESPONSE__INIT;
        Etcdserverpb__DeleteRangeResponse del = ETCDSERVERPB__DELETE_RANGE_RESPONSE__INIT;
        Etcdserverpb__TxnResponse nested = ETCDSERVERPB__TXN_RESPONSE__INIT;
        Etcdserverpb__TxnResponse txn = ETCDSERVERPB__TXN_RESPONSE__INIT;
        Etcdserverpb__ResponseOp op[5], *ops[5], nested_op, *nested_ops[2];
        const EtcdResponse *n;
        EtcdAnswer a;
        EtcdBytes b;

        for (size_t i = 0; i < ELEMENTSOF(op); i++) {
                etcdserverpb__response_op__init(&op[i]);
                ops[i] = &op[i];
        }
        put.header = &header5;
        op[0].response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
        op[0].response_put = &put;
        h4.revision = 4;
        kv.key = bin("/a/b", 4);
        kv.value = bin("hello", 5);
        kv.create_revision = kv.mod_revision = 4;
        kv.version = 1;
        range.header = &h4;
        range.n_kvs = 1;
        range.kvs = kvs;
        range.count = 1;
        op[1].response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE;
        op[1].response_range = &range;
        del.header = &header5;
        del.deleted = 2;
        op[2].response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE;
        op[2].response_delete_range = &del;
        /* etcd gives a nested txn no header (its ops have theirs): it is made at the
         * enclosing txn's revision */
        etcdserverpb__response_op__init(&nested_op);
        nested_op.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
        nested_op.response_put = &put;
        nested_ops[0] = &nested_op;
        nested_ops[1] = &op[1];
        nested.succeeded = 1;
        nested.n_responses = 2;
        nested.responses = nested_ops;
        op[3].response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
        op[3].response_txn = &nested;
        /* and a nested txn that took its failure branch, with nothing in it */
        op[4].response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
        op[4].response_txn = &(Etcdserverpb__TxnResponse) ETCDSERVERPB__TXN_RESPONSE__INIT;
        txn.header = &header5;
        txn.succeeded = 1;
        txn.n_responses = 5;
        txn.responses = ops;
        b = grpc_packed(&txn);
        assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), 0);
        assert_true(a.response.succeeded);
        assert_int_equal(a.response.revision, 5);
        assert_int_equal(a.response.n_responses, 5);
        assert_int_equal(a.response.responses[0].revision, 5);
        assert_int_equal(a.response.responses[0].error, 0);
        assert_string_equal(a.response.responses[0].message, "");
        assert_int_equal(a.response.responses[1].revision, 4);
        assert_int_equal(a.response.responses[1].n_kvs, 1);
        assert_int_equal(a.response.responses[1].count, 1);
        assert_string_equal(a.response.responses[1].kvs[0].key, "/a/b");
        assert_string_equal(a.response.responses[1].kvs[0].value, "hello");
        assert_int_equal(a.response.responses[1].kvs[0].mod_revision, 4);
        assert_int_equal(a.response.responses[2].deleted, 2);
        assert_int_equal(a.response.responses[2].n_kvs, 0);
        n = &a.response.responses[3];
        assert_true(n->succeeded);
        assert_int_equal(n->revision, 5);
        assert_string_equal(n->message, "");
        assert_int_equal(n->n_responses, 2);
        assert_int_equal(n->responses[0].revision, 5);
        assert_string_equal(n->responses[0].message, "");
        assert_int_equal(n->responses[1].revision, 4);
        assert_string_equal(n->responses[1].kvs[0].key, "/a/b");
        n = &a.response.responses[4];
        assert_false(n->succeeded);
        assert_int_equal(n->revision, 5);
        assert_int_equal(n->n_responses, 0);
        assert_null(n->responses);
        etcd_answer_done(&a);
        assert_int_equal(a.response.n_responses, 0);

        /* the failure branch: succeeded false, proto3's default, not on the wire */
        txn.succeeded = 0;
        txn.n_responses = 1;
        txn.responses = &ops[1];
        b = grpc_packed(&txn);
        assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), 0);
        assert_false(a.response.succeeded);
        assert_int_equal(a.response.n_responses, 1);
        assert_int_equal(a.response.responses[0].n_kvs, 1);
        etcd_answer_done(&a);

        /* a ResponseOp of no known kind (one etcd adds later, or none) */
        txn.n_responses = 1;
        txn.responses = (Etcdserverpb__ResponseOp *[]) {
                &(Etcdserverpb__ResponseOp) ETCDSERVERPB__RESPONSE_OP__INIT
        };
        b = grpc_packed(&txn);
        assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), -EBADMSG);
        assert_int_equal(a.response.error, -EBADMSG);
        assert_int_equal(a.response.n_responses, 0);
        assert_null(a.response.responses);
        assert_non_null(strstr(a.response.message, "/etcdserverpb.KV/Txn"));
        etcd_answer_done(&a);
}

/* levels nested txns as protobuf-c packs them, without headers as etcd sends them, the
 * innermost holding a put's answer (with its header, revision 5). */
static EtcdBytes nested_answer(unsigned levels) {
        Etcdserverpb__TxnResponse txn[8];
        Etcdserverpb__ResponseOp op[8], *ops[8];
        Etcdserverpb__PutResponse put = ETCDSERVERPB__PUT_RESPONSE__INIT;

        put.header = &header5;

        assert_true(levels < ELEMENTSOF(txn));
        for (unsigned i = 0; i <= levels; i++) {
                etcdserverpb__txn_response__init(&txn[i]);
                etcdserverpb__response_op__init(&op[i]);
                ops[i] = &op[i];
                txn[i].n_responses = 1;
                txn[i].responses = &ops[i];
                txn[i].succeeded = 1;
                if (i < levels) {
                        op[i].response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
                        op[i].response_txn = &txn[i + 1];
                } else {
                        op[i].response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
                        op[i].response_put = &put;
                }
        }
        txn[0].header = &header5;
        return grpc_packed(&txn[0]);
}

/* levels nested txns written out by hand from the inside out, backwards from the end of the
 * buffer: each level is a TxnResponse whose responses (3) hold a ResponseOp whose
 * response_txn (4) is the level below. Deep enough that protobuf-c, which recurses, would run
 * out of stack were it not checked first. */
static EtcdBytes deep_answer(size_t levels) {
        size_t allocated = levels * 2 * 11 + ETCD_GRPC_PREFIX, start = allocated, len;
        uint8_t *p = malloc(allocated);

        assert_non_null(p);
        for (size_t i = 0; i < 2 * levels; i++) {
                uint8_t v[10];
                size_t nv = 0, inner = allocated - start;

                do {
                        v[nv++] = (uint8_t) ((inner & 0x7f) | (inner > 0x7f ? 0x80 : 0));
                        inner >>= 7;
                } while (inner > 0);
                start -= nv;
                memcpy(p + start, v, nv);
                p[--start] = i % 2 == 0 ? 0x22 : 0x1a;
        }
        len = allocated - start;
        assert_true(start >= ETCD_GRPC_PREFIX);
        start -= ETCD_GRPC_PREFIX;
        p[start] = 0;
        p[start + 1] = (uint8_t) (len >> 24);
        p[start + 2] = (uint8_t) (len >> 16);
        p[start + 3] = (uint8_t) (len >> 8);
        p[start + 4] = (uint8_t) len;
        memmove(p, p + start, ETCD_GRPC_PREFIX + len);
        return (EtcdBytes) { .data = p, .size = ETCD_GRPC_PREFIX + len };
}

static void test_decode_nesting(_unused_ void **state) {
        const EtcdResponse *r;
        EtcdAnswer a;
        EtcdBytes b;

        /* as deep as a txn may be sent (ETCD_TXN_NESTING_MAX levels below it), and no deeper */
        b = nested_answer(ETCD_TXN_NESTING_MAX);
        assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), 0);
        r = &a.response;
        for (unsigned i = 0; i < ETCD_TXN_NESTING_MAX; i++) {
                assert_true(r->succeeded);
                /* no nested txn has a header: each has the outermost's revision */
                assert_int_equal(r->revision, 5);
                assert_int_equal(r->n_responses, 1);
                r = &r->responses[0];
        }
        assert_int_equal(r->n_responses, 1);
        assert_int_equal(r->responses[0].revision, 5);
        assert_int_equal(r->responses[0].n_responses, 0);
        etcd_answer_done(&a);
        b = nested_answer(ETCD_TXN_NESTING_MAX + 1);
        assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), -EBADMSG);
        assert_int_equal(a.response.n_responses, 0);
        assert_true(a.response.message[0] != '\0');
        etcd_answer_done(&a);

        /* by hand: the same limit, and far beyond it */
        b = deep_answer(ETCD_TXN_NESTING_MAX);
        assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), 0);
        assert_int_equal(a.response.responses[0].responses[0].responses[0].n_responses, 0);
        etcd_answer_done(&a);
        b = deep_answer(ETCD_TXN_NESTING_MAX + 1);
        assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), -EBADMSG);
        etcd_answer_done(&a);
        b = deep_answer(200000);
        assert_true(b.size < ETCD_ANSWER_MAX);
        assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), -EBADMSG);
        assert_int_equal(a.response.n_responses, 0);
        etcd_answer_done(&a);
}

static void test_decode_status(_unused_ void **state) {
        Etcdserverpb__PutResponse put = ETCDSERVERPB__PUT_RESPONSE__INIT;
        EtcdBytes b;
        EtcdAnswer a;

        put.header = &header5;
        b = grpc_packed(&put);
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_PUT, 200, "0", NULL, b.data, b.size,
                                                &a),
                         0);
        etcd_answer_done(&a);
        /* a good body without grpc-status: not gRPC's answer (the trailers got lost) */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_PUT, 200, NULL, NULL, b.data, b.size,
                                                &a),
                         -EBADMSG);
        assert_int_equal(a.response.error, -EBADMSG);
        assert_non_null(strstr(a.response.message, "grpc-status"));
        assert_ptr_equal(a.response.message, a.message);
        etcd_answer_done(&a);
        /* a status other than 0 wins over a body, whatever the body is */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_PUT, 200, "3",
                                                "etcdserver%3A duplicate key given in txn request",
                                                b.data, b.size, &a),
                         -EIO);
        assert_int_equal(a.response.error, -EIO);
        assert_int_equal(a.response.revision, 0);
        assert_non_null(strstr(a.message, "gRPC code 3"));
        assert_non_null(strstr(a.message, "etcdserver: duplicate key given in txn request"));
        assert_ptr_equal(a.response.message, a.message);
        etcd_answer_done(&a);
        /* HTTP 200 with anything but grpc-status 0 is not a success, nor 0 with another HTTP
         * status */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_PUT, 503, "0", NULL, b.data, b.size,
                                                &a),
                         -EIO);
        assert_non_null(strstr(a.message, "HTTP 503"));
        etcd_answer_done(&a);
        etcd_bytes_done(&b);

        /* trailers-only answers: the status in the headers, no body */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_TXN, 200, "4", NULL, NULL, 0, &a),
                         -ETIMEDOUT);
        assert_non_null(strstr(a.message, "gRPC code 4"));
        assert_non_null(strstr(a.message, "(no message)"));
        etcd_answer_done(&a);
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_TXN, 200, "14",
                                                "etcdserver: request timed out", NULL, 0, &a),
                         -ETIMEDOUT);
        assert_non_null(strstr(a.message, "etcdserver: request timed out"));
        etcd_answer_done(&a);
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_PUT, 200, "14",
                                                "etcdserver%3A request timed out%2C possibly due "
                                                "to previous leader failure",
                                                NULL, 0, &a),
                         -ETIMEDOUT);
        assert_non_null(strstr(a.message, "timed out, possibly due to previous leader failure"));
        etcd_answer_done(&a);
        /* UNAVAILABLE for another reason is an error like the others */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_PUT, 200, "14",
                                                "etcdserver: no leader", NULL, 0, &a),
                         -EIO);
        assert_non_null(strstr(a.message, "etcdserver: no leader"));
        etcd_answer_done(&a);
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_PUT, 200, "14", NULL, NULL, 0, &a),
                         -EIO);
        etcd_answer_done(&a);
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_RANGE, 503, "14", "", NULL, 0, &a),
                         -EIO);
        assert_non_null(strstr(a.message, "gRPC code 14"));
        etcd_answer_done(&a);
        /* not gRPC at all: a proxy's 404, a 502 */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_RANGE, 404, NULL, NULL,
                                                (const uint8_t *) "not found", 9, &a),
                         -EIO);
        assert_non_null(strstr(a.message, "HTTP 404"));
        etcd_answer_done(&a);
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_RANGE, 502, NULL, NULL, NULL, 0, &a),
                         -EIO);
        etcd_answer_done(&a);
        /* a grpc-status that is no code */
        static const char *const bad[] = { "",   "abc", "4x", "-1",  "256", "99999999999999999999",
                                           "00", "04",  "+4", " 4",  "4 " };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_PUT, 200, bad[i], "boom",
                                                        NULL, 0, &a),
                                 -EBADMSG);
                assert_true(a.message[0] != '\0');
                etcd_answer_done(&a);
        }
        /* control bytes of a message do not reach the logs */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_PUT, 200, "2", "bad%0Aline%00cut",
                                                NULL, 0, &a),
                         -EIO);
        assert_null(strchr(a.message, '\n'));
        assert_non_null(strstr(a.message, "bad?line"));
        etcd_answer_done(&a);
        /* a kind that is no call of ours */
        assert_int_equal(etcd_grpc_answer_parse(_ETCD_ANSWER_MAX, 200, "0", NULL, NULL, 0, &a),
                         -EINVAL);
        assert_int_equal(a.response.error, -EINVAL);
        etcd_answer_done(&a);
}

static void test_decode_framing(_unused_ void **state) {
        Etcdserverpb__DeleteRangeResponse del = ETCDSERVERPB__DELETE_RANGE_RESPONSE__INIT;
        EtcdAnswer a;
        EtcdBytes b;
        uint8_t *big;

        del.header = &header5;
        del.deleted = 1;
        b = grpc_packed(&del);
        /* gRPC's compression (the flag, 1): never asked for, never taken */
        b.data[0] = 1;
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_DELETE, 200, "0", NULL, b.data,
                                                b.size, &a),
                         -EBADMSG);
        assert_non_null(strstr(a.message, "compressed"));
        etcd_answer_done(&a);
        b.data[0] = 0;
        /* cut short: the prefix says more than there is, or less */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_DELETE, 200, "0", NULL, b.data,
                                                b.size - 1, &a),
                         -EBADMSG);
        etcd_answer_done(&a);
        b.data[4]--;
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_DELETE, 200, "0", NULL, b.data,
                                                b.size, &a),
                         -EBADMSG);
        etcd_answer_done(&a);
        b.data[4]++;
        /* the length's high bytes count */
        b.data[1] = 1;
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_DELETE, 200, "0", NULL, b.data,
                                                b.size, &a),
                         -EBADMSG);
        etcd_answer_done(&a);
        b.data[1] = 0;
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_DELETE, 200, "0", NULL, b.data,
                                                b.size, &a),
                         0);
        assert_int_equal(a.response.deleted, 1);
        etcd_answer_done(&a);
        /* less than a prefix, nothing at all */
        for (size_t n = 0; n < ETCD_GRPC_PREFIX; n++) {
                assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_DELETE, 200, "0", NULL,
                                                        b.data, n, &a),
                                 -EBADMSG);
                etcd_answer_done(&a);
        }
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_DELETE, 200, "0", NULL, NULL, 0, &a),
                         -EBADMSG);
        etcd_answer_done(&a);
        etcd_bytes_done(&b);
        /* two messages in one answer: a unary call has one */
        b = grpc_raw((const uint8_t[]) { 0x10, 1, 0, 0, 0, 0, 0 }, 7);
        b.data[4] = 2;
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_DELETE, 200, "0", NULL, b.data,
                                                b.size, &a),
                         -EBADMSG);
        etcd_answer_done(&a);
        etcd_bytes_done(&b);
        /* more than ETCD_ANSWER_MAX, whatever its prefix says */
        big = calloc(1, ETCD_ANSWER_MAX + ETCD_GRPC_PREFIX + 1);
        assert_non_null(big);
        big[1] = (uint8_t) ((ETCD_ANSWER_MAX + 1) >> 24);
        big[2] = (uint8_t) ((ETCD_ANSWER_MAX + 1) >> 16);
        big[3] = (uint8_t) ((ETCD_ANSWER_MAX + 1) >> 8);
        big[4] = (uint8_t) (ETCD_ANSWER_MAX + 1);
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_PUT, 200, "0", NULL, big,
                                                ETCD_ANSWER_MAX + ETCD_GRPC_PREFIX + 1, &a),
                         -EBADMSG);
        etcd_answer_done(&a);
        free(big);
}

static void test_decode_malformed(_unused_ void **state) {
        /* messages that are not protobuf, or not the kind's */
        static const struct {
                EtcdAnswerKind kind;
                size_t n;
                uint8_t m[16];
        } bad[] = {
                /* header (1) of 5 bytes with 1 there */
                { ETCD_ANSWER_RANGE, 3, { 0x0a, 5, 0x08 } },
                /* count (4) without its varint, a varint cut short */
                { ETCD_ANSWER_RANGE, 1, { 0x20 } },
                { ETCD_ANSWER_DELETE, 2, { 0x10, 0x80 } },
                /* a varint of 11 bytes */
                { ETCD_ANSWER_RANGE,
                  12,
                  { 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 } },
                /* kvs (2) as a varint: the wrong wire type */
                { ETCD_ANSWER_RANGE, 2, { 0x10, 1 } },
                /* a kv whose create_revision has no varint */
                { ETCD_ANSWER_RANGE, 3, { 0x12, 1, 0x10 } },
                /* a group (wire type 3) and wire type 7 */
                { ETCD_ANSWER_PUT, 1, { 0x0b } },
                { ETCD_ANSWER_TXN, 1, { 0x0f } },
                /* a ResponseOp of 2 bytes holding a response_txn of 5 */
                { ETCD_ANSWER_TXN, 4, { 0x1a, 2, 0x22, 5 } },
                /* a ResponseOp's response_txn as a varint */
                { ETCD_ANSWER_TXN, 4, { 0x1a, 2, 0x20, 1 } },
                /* a nested txn cut inside: its ResponseOp says 3 bytes, has 1 */
                { ETCD_ANSWER_TXN, 6, { 0x1a, 4, 0x22, 2, 0x1a, 3 } },
                /* field number 0 */
                { ETCD_ANSWER_PUT, 2, { 0x00, 1 } },
                /* a key with a NUL byte, an empty key */
                { ETCD_ANSWER_RANGE, 7, { 0x12, 5, 0x0a, 3, 'a', 0, 'b' } },
                { ETCD_ANSWER_RANGE, 4, { 0x12, 2, 0x20, 1 } },
                /* a kv without a key (a version only) inside a txn's range */
                { ETCD_ANSWER_TXN, 8, { 0x1a, 6, 0x0a, 4, 0x12, 2, 0x20, 1 } },
        };
        EtcdAnswer a;
        EtcdBytes b;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                print_message("malformed %zu\n", i);
                b = grpc_raw(bad[i].m, bad[i].n);
                assert_int_equal(parse_ok(bad[i].kind, &b, &a), -EBADMSG);
                assert_int_equal(a.response.error, -EBADMSG);
                assert_int_equal(a.response.n_kvs, 0);
                assert_null(a.response.kvs);
                assert_int_equal(a.response.n_responses, 0);
                assert_non_null(strstr(a.response.message, "malformed"));
                etcd_answer_done(&a);
        }
}

/* The keys of kvs, with protobuf-c packing them. */
static void test_decode_bad_keys(_unused_ void **state) {
        Etcdserverpb__KeyValue good = ETCDSERVERPB__KEY_VALUE__INIT,
                               bad = ETCDSERVERPB__KEY_VALUE__INIT;
        Etcdserverpb__KeyValue *kvs[] = { &good, &bad };
        Etcdserverpb__RangeResponse range = ETCDSERVERPB__RANGE_RESPONSE__INIT;
        Etcdserverpb__PutResponse put = ETCDSERVERPB__PUT_RESPONSE__INIT;
        Etcdserverpb__ResponseOp put_op = ETCDSERVERPB__RESPONSE_OP__INIT;
        Etcdserverpb__ResponseOp op = ETCDSERVERPB__RESPONSE_OP__INIT, *ops[] = { &put_op, &op };
        Etcdserverpb__TxnResponse txn = ETCDSERVERPB__TXN_RESPONSE__INIT;
        static const struct {
                const char *key;
                size_t len;
        } keys[] = { { "", 0 }, { "a\0b", 3 }, { "\0", 1 }, { "ab\0", 3 } };
        EtcdAnswer a;
        EtcdBytes b;

        good.key = bin("/a/b", 4);
        good.value = bin("hello", 5);
        range.header = &header5;
        range.n_kvs = 2;
        range.kvs = kvs;
        put_op.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
        put_op.response_put = &put;
        op.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE;
        op.response_range = &range;
        txn.header = &header5;
        txn.n_responses = 2;
        txn.responses = ops;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                bad.key = bin(keys[i].key, keys[i].len);
                /* the second kv, after a good one was copied already */
                b = grpc_packed(&range);
                assert_int_equal(parse_ok(ETCD_ANSWER_RANGE, &b, &a), -EBADMSG);
                assert_int_equal(a.response.n_kvs, 0);
                assert_null(a.response.kvs);
                etcd_answer_done(&a);
                /* in the second op of a txn */
                b = grpc_packed(&txn);
                assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), -EBADMSG);
                assert_int_equal(a.response.n_responses, 0);
                assert_null(a.response.responses);
                etcd_answer_done(&a);
        }
        /* and a good one in both */
        bad.key = bin("/a/c", 4);
        b = grpc_packed(&txn);
        assert_int_equal(parse_ok(ETCD_ANSWER_TXN, &b, &a), 0);
        assert_int_equal(a.response.n_responses, 2);
        assert_string_equal(a.response.responses[1].kvs[1].key, "/a/c");
        assert_string_equal(a.response.responses[1].kvs[1].value, "");
        etcd_answer_done(&a);
}

static void test_message_decode(_unused_ void **state) {
        static const char *const cases[][2] = {
                { "%41b%4", "Ab%4" },
                { "%zz", "%zz" },
                { "", "" },
                { "%", "%" },
                { "%4", "%4" },
                { "%%41", "%A" },
                { "%4g", "%4g" },
                { "100%25", "100%" },
                { "etcdserver%3A duplicate key", "etcdserver: duplicate key" },
                /* hex in either case; bytes above 0x7f as they are (UTF-8 of the sender) */
                { "%e2%82%AC", "\xe2\x82\xac" },
                { "no escapes at all", "no escapes at all" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *s = etcd_grpc_message_decode(cases[i][0]);
                assert_non_null(s);
                assert_string_equal(s, cases[i][1]);
                free(s);
        }
        /* %00 ends the text there */
        {
                char *s = etcd_grpc_message_decode("a%00b");
                assert_non_null(s);
                assert_string_equal(s, "a");
                assert_int_equal(s[2], 'b');
                free(s);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_decode_range),
                cmocka_unit_test(test_decode_simple),
                cmocka_unit_test(test_decode_txn),
                cmocka_unit_test(test_decode_nesting),
                cmocka_unit_test(test_decode_status),
                cmocka_unit_test(test_decode_framing),
                cmocka_unit_test(test_decode_malformed),
                cmocka_unit_test(test_decode_bad_keys),
                cmocka_unit_test(test_message_decode),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
