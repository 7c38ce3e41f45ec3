/* SPDX-License-Identifier: MIT */
/* fleet/etcd/etcd-grpc.c and etcd-grpc-parse.c: the Election service's calls (v3election's
 * Campaign, Leader, Resign). The requests' bytes are written out by hand from protobuf's wire
 * format; the answers are made by protobuf-c's packing of the messages etcd sends, behind
 * gRPC's 5-byte prefix. With FUZZ_SEEDS=DIR in the environment, the answers are also written
 * there as seeds of fuzz-etcd-grpc (its selector byte, 0x00, the body). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

static void test_paths(_unused_ void **state) {
        assert_string_equal(etcd_grpc_path(ETCD_ANSWER_ELECTION_CAMPAIGN),
                            "/v3electionpb.Election/Campaign");
        assert_string_equal(etcd_grpc_path(ETCD_ANSWER_ELECTION_LEADER),
                            "/v3electionpb.Election/Leader");
        assert_string_equal(etcd_grpc_path(ETCD_ANSWER_ELECTION_RESIGN),
                            "/v3electionpb.Election/Resign");
}

static void test_encode(_unused_ void **state) {
        EtcdLeaderKey k = { .name = (char *) "e", .key = (char *) "e/1", .rev = 5, .lease = 300 };
        EtcdBytes b = {};

        /* name "e" (0x0a: field 1, bytes), lease 300 (0x10: field 2, varint), value "v" (0x1a) */
        check_body(etcd_grpc_election_campaign("e", 300, "v", &b), &b,
                   (const uint8_t[]) { 0, 0, 0, 0, 9, 0x0a, 1, 'e', 0x10, 0xac, 0x02, 0x1a, 1,
                                       'v' },
                   14);
        /* no value: none on the wire (proto3 leaves an empty field out) */
        check_body(etcd_grpc_election_campaign("e", 1, NULL, &b), &b,
                   (const uint8_t[]) { 0, 0, 0, 0, 5, 0x0a, 1, 'e', 0x10, 1 }, 10);
        check_body(etcd_grpc_election_leader("e", &b), &b,
                   (const uint8_t[]) { 0, 0, 0, 0, 3, 0x0a, 1, 'e' }, 8);
        /* ResignRequest{leader = LeaderKey{name, key, rev 5, lease 300}} */
        check_body(etcd_grpc_election_resign(&k, &b), &b,
                   (const uint8_t[]) { 0, 0, 0, 0, 15, 0x0a, 13, 0x0a, 1, 'e', 0x12, 3, 'e', '/',
                                       '1', 0x18, 5, 0x20, 0xac, 0x02 },
                   20);
        /* refused: nothing to free */
        assert_int_equal(etcd_grpc_election_campaign("", 1, "v", &b), -EINVAL);
        assert_int_equal(etcd_grpc_election_campaign(NULL, 1, "v", &b), -EINVAL);
        assert_int_equal(etcd_grpc_election_campaign("e", 0, "v", &b), -EINVAL);
        assert_int_equal(etcd_grpc_election_leader("", &b), -EINVAL);
        assert_int_equal(etcd_grpc_election_resign(NULL, &b), -EINVAL);
        k.rev = 0;
        assert_int_equal(etcd_grpc_election_resign(&k, &b), -EINVAL);
        k.rev = 5;
        k.key = NULL;
        assert_int_equal(etcd_grpc_election_resign(&k, &b), -EINVAL);
        assert_null(b.data);
}

static Etcdserverpb__ResponseHeader header7 = RESPONSE_HEADER(7);

/* A seed of fuzz-etcd-grpc for kind's answer b, when FUZZ_SEEDS names a directory. */
static void seed(const char *name, EtcdAnswerKind kind, const EtcdBytes *b) {
        const char *dir = getenv("FUZZ_SEEDS");
        char path[4096];
        FILE *f;

        if (!dir)
                return;
        (void) snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fputc((int) kind, f), (int) kind);
        assert_int_equal(fputc(0, f), 0);
        assert_int_equal(fwrite(b->data, 1, b->size, f), b->size);
        assert_int_equal(fclose(f), 0);
}

static int parse_ok(EtcdAnswerKind kind, EtcdBytes *b, EtcdAnswer *a) {
        int r = etcd_grpc_answer_parse(kind, 200, "0", NULL, b->data, b->size, a);
        etcd_bytes_done(b);
        return r;
}

static void test_decode_campaign(_unused_ void **state) {
        Etcdserverpb__CampaignResponse c = ETCDSERVERPB__CAMPAIGN_RESPONSE__INIT;
        Etcdserverpb__LeaderKey k = ETCDSERVERPB__LEADER_KEY__INIT;
        EtcdAnswer a;
        EtcdBytes b;

        c.header = &header7;
        k.name = bin("/slotd/v1/scaler", 16);
        k.key = bin("/slotd/v1/scaler/694d8a0f1c2b3d04", 33);
        k.rev = 6;
        k.lease = 0x694d8a0f1c2b3d04LL;
        c.leader = &k;
        b = grpc_packed(&c);
        seed("election-campaign", ETCD_ANSWER_ELECTION_CAMPAIGN, &b);
        assert_int_equal(parse_ok(ETCD_ANSWER_ELECTION_CAMPAIGN, &b, &a), 0);
        assert_int_equal(a.response.revision, 7);
        assert_string_equal(a.response.leader.name, "/slotd/v1/scaler");
        assert_string_equal(a.response.leader.key, "/slotd/v1/scaler/694d8a0f1c2b3d04");
        assert_int_equal(a.response.leader.rev, 6);
        assert_int_equal(a.response.leader.lease, 0x694d8a0f1c2b3d04LL);
        etcd_answer_done(&a);
        assert_null(a.response.leader.name);

        /* a leader key without its key, or with a NUL in it, or none at all: not etcd's */
        k.key = bin("", 0);
        b = grpc_packed(&c);
        assert_int_equal(parse_ok(ETCD_ANSWER_ELECTION_CAMPAIGN, &b, &a), -EBADMSG);
        assert_null(a.response.leader.name);
        etcd_answer_done(&a);
        k.key = bin("a\0b", 3);
        b = grpc_packed(&c);
        assert_int_equal(parse_ok(ETCD_ANSWER_ELECTION_CAMPAIGN, &b, &a), -EBADMSG);
        etcd_answer_done(&a);
        c.leader = NULL;
        b = grpc_packed(&c);
        assert_int_equal(parse_ok(ETCD_ANSWER_ELECTION_CAMPAIGN, &b, &a), -EBADMSG);
        etcd_answer_done(&a);

        /* the campaign's deadline passed in etcd: a timeout, campaigned again */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_ELECTION_CAMPAIGN, 200, "4",
                                                "context%20deadline%20exceeded", NULL, 0, &a),
                         -ETIMEDOUT);
        etcd_answer_done(&a);
}

static void test_decode_leader(_unused_ void **state) {
        Etcdserverpb__LeaderResponse l = ETCDSERVERPB__LEADER_RESPONSE__INIT;
        Etcdserverpb__KeyValue kv = ETCDSERVERPB__KEY_VALUE__INIT;
        EtcdAnswer a;
        EtcdBytes b;

        l.header = &header7;
        kv.key = bin("/slotd/v1/scaler/1f", 19);
        kv.value = bin("replica-a", 9);
        kv.create_revision = 6;
        kv.mod_revision = 6;
        kv.version = 1;
        kv.lease = 31;
        l.kv = &kv;
        b = grpc_packed(&l);
        seed("election-leader", ETCD_ANSWER_ELECTION_LEADER, &b);
        assert_int_equal(parse_ok(ETCD_ANSWER_ELECTION_LEADER, &b, &a), 0);
        assert_int_equal(a.response.n_kvs, 1);
        assert_string_equal(a.response.kvs[0].key, "/slotd/v1/scaler/1f");
        assert_string_equal(a.response.kvs[0].value, "replica-a");
        assert_int_equal(a.response.kvs[0].create_revision, 6);
        assert_int_equal(a.response.kvs[0].lease, 31);
        etcd_answer_done(&a);

        /* etcd's answer without a leader: the error "election: no leader" */
        assert_int_equal(etcd_grpc_answer_parse(ETCD_ANSWER_ELECTION_LEADER, 200, "2",
                                                "election%3A no leader", NULL, 0, &a),
                         -EIO);
        assert_non_null(strstr(a.response.message, "election: no leader"));
        etcd_answer_done(&a);
        /* an answer without its kv is not etcd's */
        l.kv = NULL;
        b = grpc_packed(&l);
        assert_int_equal(parse_ok(ETCD_ANSWER_ELECTION_LEADER, &b, &a), -EBADMSG);
        assert_int_equal(a.response.n_kvs, 0);
        etcd_answer_done(&a);
}

static void test_decode_resign(_unused_ void **state) {
        Etcdserverpb__ResignResponse r = ETCDSERVERPB__RESIGN_RESPONSE__INIT;
        EtcdAnswer a;
        EtcdBytes b;

        r.header = &header7;
        b = grpc_packed(&r);
        seed("election-resign", ETCD_ANSWER_ELECTION_RESIGN, &b);
        assert_int_equal(parse_ok(ETCD_ANSWER_ELECTION_RESIGN, &b, &a), 0);
        assert_int_equal(a.response.revision, 7);
        assert_null(a.response.leader.key);
        etcd_answer_done(&a);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_paths),
                cmocka_unit_test(test_encode),
                cmocka_unit_test(test_decode_campaign),
                cmocka_unit_test(test_decode_leader),
                cmocka_unit_test(test_decode_resign),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
