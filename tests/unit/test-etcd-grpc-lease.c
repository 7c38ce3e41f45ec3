/* SPDX-License-Identifier: MIT */
/* fleet/etcd/etcd-grpc.c and etcd-grpc-parse.c: the Lease service's calls (LeaseGrant,
 * LeaseKeepAlive, LeaseRevoke), and the LeaseKeepAlive stream's messages one by one
 * (etcd_grpc_lease_keepalive_message_parse, as etcd-keepalive.c reads them). The requests' bytes are written out
 * by hand from protobuf's wire format (tag 0x08: field 1, a varint); the answers are made by
 * protobuf-c's packing of the messages etcd sends, behind gRPC's 5-byte prefix. */
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

static void check_body(int r, EtcdBytes *b, const uint8_t *want, size_t n) {
        assert_int_equal(r, 0);
        assert_int_equal(b->size, n);
        assert_memory_equal(b->data, want, n);
        etcd_bytes_done(b);
        assert_null(b->data);
}

static void test_encode(_unused_ void **state) {
        EtcdBytes b = {};

        /* TTL 10 s; no ID (0: etcd picks it) */
        check_body(etcd_grpc_lease_grant(10, &b), &b,
                   (const uint8_t[]) { 0, 0, 0, 0, 2, 0x08, 10 }, 7);
        /* ID 300: a varint of two bytes, 7 bits each, lowest first */
        check_body(etcd_grpc_lease_keepalive(300, &b), &b,
                   (const uint8_t[]) { 0, 0, 0, 0, 3, 0x08, 0xac, 0x02 }, 8);
        check_body(etcd_grpc_lease_revoke(300, &b), &b,
                   (const uint8_t[]) { 0, 0, 0, 0, 3, 0x08, 0xac, 0x02 }, 8);
        /* etcd's IDs are positive int64s, up to 2^63 - 1: ten bytes at most */
        check_body(etcd_grpc_lease_keepalive(INT64_MAX, &b), &b,
                   (const uint8_t[]) { 0, 0, 0, 0, 10, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0x7f },
                   15);
        /* refused: no TTL, no ID; nothing to free */
        assert_int_equal(etcd_grpc_lease_grant(0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_lease_grant(-5, &b), -EINVAL);
        assert_int_equal(etcd_grpc_lease_keepalive(0, &b), -EINVAL);
        assert_int_equal(etcd_grpc_lease_revoke(-1, &b), -EINVAL);
        assert_null(b.data);
}

static Etcdserverpb__ResponseHeader header7 = RESPONSE_HEADER(7);

static int parse_ok(EtcdAnswerKind kind, EtcdBytes *b, EtcdAnswer *a) {
        int r = etcd_grpc_answer_parse(kind, 200, "0", NULL, b->data, b->size, a);
        etcd_bytes_done(b);
        return r;
}

static void test_decode_grant(_unused_ void **state) {
        Etcdserverpb__LeaseGrantResponse g = ETCDSERVERPB__LEASE_GRANT_RESPONSE__INIT;
        EtcdAnswer a;
        EtcdBytes b;

        g.header = &header7;
        g.id = 7587888136662307345LL;
        g.ttl = 10;
        b = grpc_packed(&g);
        assert_int_equal(parse_ok(ETCD_ANSWER_LEASE_GRANT, &b, &a), 0);
        assert_string_equal(a.response.message, "");
        assert_int_equal(a.response.revision, 7);
        assert_int_equal(a.response.lease_id, 7587888136662307345LL);
        assert_int_equal(a.response.ttl, 10);
        assert_int_equal(a.response.n_kvs, 0);
        etcd_answer_done(&a);

        /* the old way of refusing a grant: its error field */
        g.id = 0;
        g.error = (char *) "lease already exists";
        b = grpc_packed(&g);
        assert_int_equal(parse_ok(ETCD_ANSWER_LEASE_GRANT, &b, &a), -EIO);
        assert_int_equal(a.response.error, -EIO);
        assert_int_equal(a.response.lease_id, 0);
        assert_non_null(strstr(a.response.message, "LeaseGrant"));
        etcd_answer_done(&a);

        /* etcd's refusal as gRPC says it: no body, grpc-status 9 (FAILED_PRECONDITION) */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_LEASE_GRANT, 200, "9",
                                                "etcdserver%3A too many requests", NULL, 0, &a),
                         -EIO);
        assert_non_null(strstr(a.response.message, "etcdserver: too many requests"));
        assert_non_null(strstr(a.response.message, "gRPC code 9"));
        etcd_answer_done(&a);
}

static void test_decode_keepalive(_unused_ void **state) {
        Etcdserverpb__LeaseKeepAliveResponse k = ETCDSERVERPB__LEASE_KEEP_ALIVE_RESPONSE__INIT;
        EtcdAnswer a;
        EtcdBytes b, two;

        k.header = &header7;
        k.id = 300;
        k.ttl = 9;
        b = grpc_packed(&k);
        assert_int_equal(parse_ok(ETCD_ANSWER_LEASE_KEEPALIVE, &b, &a), 0);
        assert_int_equal(a.response.lease_id, 300);
        assert_int_equal(a.response.ttl, 9);
        assert_int_equal(a.response.revision, 7);
        etcd_answer_done(&a);

        /* a lease etcd no longer has: TTL 0 (not on the wire at all), still an answer */
        k.ttl = 0;
        b = grpc_packed(&k);
        assert_int_equal(parse_ok(ETCD_ANSWER_LEASE_KEEPALIVE, &b, &a), 0);
        assert_int_equal(a.response.error, 0);
        assert_int_equal(a.response.lease_id, 300);
        assert_int_equal(a.response.ttl, 0);
        etcd_answer_done(&a);

        /* the stream of one request has one answer: two are not etcd's */
        k.ttl = 9;
        b = grpc_packed(&k);
        two = (EtcdBytes) { .data = malloc(2 * b.size), .size = 2 * b.size };
        assert_non_null(two.data);
        memcpy(two.data, b.data, b.size);
        memcpy(two.data + b.size, b.data, b.size);
        etcd_bytes_done(&b);
        assert_int_equal(parse_ok(ETCD_ANSWER_LEASE_KEEPALIVE, &two, &a), -EBADMSG);
        assert_int_equal(a.response.lease_id, 0);
        etcd_answer_done(&a);

        /* the stream ended without an answer (etcd's leader was lost, say): grpc-status 14 */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_LEASE_KEEPALIVE, 200, "14",
                                                "etcdserver%3A no leader", NULL, 0, &a),
                         -EIO);
        assert_non_null(strstr(a.response.message, "no leader"));
        etcd_answer_done(&a);
}

/* The open stream's answers, one message at a time, matched by their ID. */
static void test_keepalive_stream_message(_unused_ void **state) {
        Etcdserverpb__LeaseKeepAliveResponse k = ETCDSERVERPB__LEASE_KEEP_ALIVE_RESPONSE__INIT;
        static const uint8_t cut[] = { 0x10, 0xac };
        EtcdAnswer a;
        EtcdBytes b;

        k.header = &header7;
        k.id = 7587888136662307345LL;
        k.ttl = 5;
        b = grpc_packed(&k);
        assert_int_equal(etcd_grpc_lease_keepalive_message_parse(b.data, b.size, &a), 0);
        assert_int_equal(a.response.error, 0);
        assert_string_equal(a.response.message, "");
        assert_int_equal(a.response.lease_id, 7587888136662307345LL);
        assert_int_equal(a.response.ttl, 5);
        assert_int_equal(a.response.revision, 7);
        etcd_answer_done(&a);
        /* exactly one message: a byte fewer (cut) or more (the next one's) is not one */
        assert_int_equal(etcd_grpc_lease_keepalive_message_parse(b.data, b.size - 1, &a),
                         -EBADMSG);
        assert_int_equal(a.response.lease_id, 0);
        assert_non_null(strstr(a.response.message, "LeaseKeepAlive"));
        etcd_answer_done(&a);
        assert_int_equal(etcd_grpc_lease_keepalive_message_parse(b.data, b.size + 1, &a),
                         -EBADMSG);
        etcd_answer_done(&a);
        /* a compressed one */
        b.data[0] = 1;
        assert_int_equal(etcd_grpc_lease_keepalive_message_parse(b.data, b.size, &a), -EBADMSG);
        etcd_answer_done(&a);
        etcd_bytes_done(&b);

        /* an expired lease: TTL 0, still an answer for its ID */
        k.ttl = 0;
        b = grpc_packed(&k);
        assert_int_equal(etcd_grpc_lease_keepalive_message_parse(b.data, b.size, &a), 0);
        assert_int_equal(a.response.lease_id, 7587888136662307345LL);
        assert_int_equal(a.response.ttl, 0);
        etcd_answer_done(&a);
        etcd_bytes_done(&b);

        /* no ID (or a negative one): no request of ours to match it with */
        k.id = 0;
        k.ttl = 5;
        b = grpc_packed(&k);
        assert_int_equal(etcd_grpc_lease_keepalive_message_parse(b.data, b.size, &a), -EBADMSG);
        assert_int_equal(a.response.error, -EBADMSG);
        assert_non_null(strstr(a.response.message, "malformed keepalive answer"));
        etcd_answer_done(&a);
        etcd_bytes_done(&b);
        k.id = -3;
        b = grpc_packed(&k);
        assert_int_equal(etcd_grpc_lease_keepalive_message_parse(b.data, b.size, &a), -EBADMSG);
        assert_int_equal(a.response.lease_id, 0);
        etcd_answer_done(&a);
        etcd_bytes_done(&b);

        /* not protobuf: a varint cut short */
        b = grpc_raw(cut, sizeof(cut));
        assert_int_equal(etcd_grpc_lease_keepalive_message_parse(b.data, b.size, &a), -EBADMSG);
        etcd_answer_done(&a);
        etcd_bytes_done(&b);
        assert_int_equal(etcd_grpc_lease_keepalive_message_parse(NULL, 0, &a), -EBADMSG);
        etcd_answer_done(&a);
}

static void test_decode_revoke(_unused_ void **state) {
        Etcdserverpb__LeaseRevokeResponse v = ETCDSERVERPB__LEASE_REVOKE_RESPONSE__INIT;
        EtcdAnswer a;
        EtcdBytes b;

        v.header = &header7;
        b = grpc_packed(&v);
        assert_int_equal(parse_ok(ETCD_ANSWER_LEASE_REVOKE, &b, &a), 0);
        assert_int_equal(a.response.revision, 7);
        assert_int_equal(a.response.lease_id, 0);
        etcd_answer_done(&a);

        /* etcd's answer for an unknown lease: NOT_FOUND */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_LEASE_REVOKE, 200, "5",
                                                "etcdserver%3A requested lease not found", NULL,
                                                0, &a),
                         -EIO);
        assert_non_null(strstr(a.response.message, "requested lease not found"));
        etcd_answer_done(&a);
}

static void test_decode_malformed(_unused_ void **state) {
        /* ID as a length-delimited field (wire type 2 where etcd's is a varint) */
        static const uint8_t wrong_type[] = { 0x12, 0x01, 0x00 };
        /* a varint cut short */
        static const uint8_t cut[] = { 0x10, 0xac };
        const EtcdAnswerKind kinds[] = { ETCD_ANSWER_LEASE_GRANT, ETCD_ANSWER_LEASE_KEEPALIVE,
                                         ETCD_ANSWER_LEASE_REVOKE };
        EtcdAnswer a;
        EtcdBytes b;

        for (size_t i = 0; i < ELEMENTSOF(kinds); i++) {
                b = grpc_raw(cut, sizeof(cut));
                assert_int_equal(parse_ok(kinds[i], &b, &a), -EBADMSG);
                assert_non_null(strstr(a.response.message, "malformed answer"));
                etcd_answer_done(&a);
                /* no body at all, with grpc-status 0 */
                assert_int_equal(etcd_grpc_answer_parse(kinds[i], 200, "0", NULL, NULL, 0, &a),
                                 -EBADMSG);
                etcd_answer_done(&a);
        }
        b = grpc_raw(wrong_type, sizeof(wrong_type));
        assert_int_equal(parse_ok(ETCD_ANSWER_LEASE_GRANT, &b, &a), -EBADMSG);
        assert_int_equal(a.response.lease_id, 0);
        etcd_answer_done(&a);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_encode),
                cmocka_unit_test(test_decode_grant),
                cmocka_unit_test(test_decode_keepalive),
                cmocka_unit_test(test_keepalive_stream_message),
                cmocka_unit_test(test_decode_revoke),
                cmocka_unit_test(test_decode_malformed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
