/* SPDX-License-Identifier: MIT */
/* fleet/etcd/etcd-json.c: the bodies we send to etcd 3.4's gateway and the answers it sends back.
 * The answers below are the gateway's own, captured from etcd 3.4.23 with curl. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "etcd-json.h"
#include "macro.h"
#include "strv.h"

#define HDR "\"header\":{\"cluster_id\":\"11942735582411456322\",\"member_id\":\"1288\"," \
            "\"revision\":\"5\",\"raft_term\":\"2\"}"

/* "/a/b" = L2EvYg==, "hello" = aGVsbG8=, "/a/" = L2Ev, "/a0" = L2Ew */

/* check_body(CALL, B, WANT): CALL (which fills B) succeeds with the text WANT. */
#define check_body(call, b, want)                       \
        do {                                            \
                (b) = NULL;                             \
                assert_int_equal((call), 0);            \
                assert_string_equal((b), (want));       \
                free(b);                                \
        } while (0)

static void test_base64(void **state) {
        static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
        static const char *const coded[] = { "",         "Zg==",     "Zm8=",    "Zm9v",
                                             "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
        char *s;
        size_t n;

        for (size_t i = 0; i < ELEMENTSOF(plain); i++) {
                assert_int_equal(etcd_base64_encode(plain[i], strlen(plain[i]), &s), 0);
                assert_string_equal(s, coded[i]);
                free(s);
                assert_int_equal(etcd_base64_decode(coded[i], strlen(coded[i]), &s, &n), 0);
                assert_int_equal(n, strlen(plain[i]));
                assert_string_equal(s, plain[i]);
                free(s);
        }
        /* unpadded is taken; junk is not */
        assert_int_equal(etcd_base64_decode("Zm8", 3, &s, &n), 0);
        assert_string_equal(s, "fo");
        free(s);
        assert_int_equal(etcd_base64_decode("Zm9v!", 5, &s, &n), -EBADMSG);
        assert_int_equal(etcd_base64_decode("Z", 1, &s, &n), -EBADMSG);
        assert_int_equal(etcd_base64_decode("Zm=v", 4, &s, &n), -EBADMSG);
        /* a NUL inside the value is kept, counted and terminated */
        assert_int_equal(etcd_base64_decode("YQBi", 4, &s, &n), 0);
        assert_int_equal(n, 3);
        assert_memory_equal(s, "a\0b", 4);
        free(s);
}

static void test_prefix_end(void **state) {
        char *s;

        s = etcd_prefix_end("/slotd/v1/");
        assert_string_equal(s, "/slotd/v10");
        free(s);
        s = etcd_prefix_end("a\xff\xff");
        assert_string_equal(s, "b");
        free(s);
        s = etcd_prefix_end("\xff");
        assert_string_equal(s, ""); /* "\0": every key */
        free(s);
}

static void test_encode_kv(void **state) {
        char *b;

        check_body(etcd_json_range("/a/b", NULL, 0, &b), b, "{\"key\":\"L2EvYg==\"}");
        check_body(etcd_json_range("/a/", "/a0", 10, &b), b,
                   "{\"key\":\"L2Ev\",\"range_end\":\"L2Ew\",\"limit\":\"10\"}");
        check_body(etcd_json_range("/a/", "", 0, &b), b,
                   "{\"key\":\"L2Ev\",\"range_end\":\"AA==\"}");
        check_body(etcd_json_put("/a/b", "hello", 0, &b), b,
                   "{\"key\":\"L2EvYg==\",\"value\":\"aGVsbG8=\"}");
        check_body(etcd_json_put("/a/b", "", 7587888, &b), b,
                   "{\"key\":\"L2EvYg==\",\"value\":\"\",\"lease\":\"7587888\"}");
        check_body(etcd_json_delete("/a/", "/a0", &b), b,
                   "{\"key\":\"L2Ev\",\"range_end\":\"L2Ew\"}");
        assert_int_equal(etcd_json_range("", NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_json_range(NULL, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_json_put("/a", "x", -1, &b), -EINVAL);
}

static void test_encode_lease_watch(void **state) {
        char *b;

        check_body(etcd_json_lease_grant(5, &b), b, "{\"TTL\":\"5\"}");
        check_body(etcd_json_lease_id(8588824136662307345LL, &b), b,
                   "{\"ID\":\"8588824136662307345\"}");
        check_body(etcd_json_watch("/a/", "/a0", 0, &b), b,
                   "{\"create_request\":{\"key\":\"L2Ev\",\"range_end\":\"L2Ew\"}}");
        check_body(etcd_json_watch("/a/b", NULL, 42, &b), b,
                   "{\"create_request\":{\"key\":\"L2EvYg==\",\"start_revision\":\"42\"}}");
        assert_int_equal(etcd_json_lease_grant(0, &b), -EINVAL);
        assert_int_equal(etcd_json_lease_id(0, &b), -EINVAL);
        assert_int_equal(etcd_json_watch("/a", NULL, -1, &b), -EINVAL);
}

static void test_encode_txn(void **state) {
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
        const EtcdOp ko[] = { { .type = ETCD_OP_RANGE, .key = "/a/b", .limit = 1 } };
        EtcdCompare bad = { .key = "/a", .target = ETCD_TARGET_VALUE };
        EtcdOp bad_op = { .type = 7, .key = "/a" };
        char *b;

        check_body(etcd_json_txn(cmp, ELEMENTSOF(cmp), ok, ELEMENTSOF(ok), ko, ELEMENTSOF(ko),
                                 &b),
                   b,
                   "{\"compare\":["
                   "{\"key\":\"L2EvYg==\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
                   "\"create_revision\":\"0\"},"
                   "{\"key\":\"L2EvYg==\",\"target\":\"MOD\",\"result\":\"LESS\","
                   "\"mod_revision\":\"9\"},"
                   "{\"key\":\"L2EvYg==\",\"target\":\"VERSION\",\"result\":\"GREATER\","
                   "\"version\":\"1\"},"
                   "{\"key\":\"L2EvYg==\",\"target\":\"VALUE\",\"result\":\"NOT_EQUAL\","
                   "\"value\":\"aGVsbG8=\"},"
                   "{\"key\":\"L2EvYg==\",\"target\":\"LEASE\",\"result\":\"EQUAL\","
                   "\"lease\":\"3\"}],"
                   "\"success\":["
                   "{\"request_put\":{\"key\":\"L2EvYg==\",\"value\":\"aGVsbG8=\","
                   "\"lease\":\"3\"}},"
                   "{\"request_delete_range\":{\"key\":\"L2Ev\",\"range_end\":\"L2Ew\"}}],"
                   "\"failure\":["
                   "{\"request_range\":{\"key\":\"L2EvYg==\",\"limit\":\"1\"}}]}");
        check_body(etcd_json_txn(NULL, 0, NULL, 0, NULL, 0, &b), b,
                   "{\"compare\":[],\"success\":[],\"failure\":[]}");
        assert_int_equal(etcd_json_txn(&bad, 1, NULL, 0, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_json_txn(NULL, 0, &bad_op, 1, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_json_txn(NULL, 1, NULL, 0, NULL, 0, &b), -EINVAL);
}

static int parse(EtcdAnswerKind kind, long status, const char *body, EtcdAnswer *a) {
        return etcd_answer_parse(kind, status, body, strlen(body), a);
}

static void test_decode_range(void **state) {
        EtcdAnswer a;

        assert_int_equal(parse(ETCD_ANSWER_RANGE, 200,
                               "{" HDR ",\"kvs\":[{\"key\":\"L2EvYg==\",\"create_revision\":\"2\","
                               "\"mod_revision\":\"3\",\"version\":\"2\",\"value\":\"aGVsbG8=\"},"
                               "{\"key\":\"L2Ev\",\"create_revision\":\"5\",\"mod_revision\":\"6\","
                               "\"version\":\"1\",\"lease\":\"8588824136662307345\"}],"
                               "\"more\":true,\"count\":\"3\"}",
                               &a),
                         0);
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
        /* an empty value is omitted by the gateway */
        assert_string_equal(a.response.kvs[1].value, "");
        assert_int_equal(a.response.kvs[1].value_len, 0);
        assert_int_equal(a.response.kvs[1].lease, 8588824136662307345LL);
        etcd_answer_done(&a);

        /* nothing found: no kvs, no count */
        assert_int_equal(parse(ETCD_ANSWER_RANGE, 200, "{" HDR "}", &a), 0);
        assert_int_equal(a.response.n_kvs, 0);
        assert_null(a.response.kvs);
        assert_int_equal(a.response.count, 0);
        etcd_answer_done(&a);
}

static void test_decode_simple(void **state) {
        EtcdAnswer a;

        assert_int_equal(parse(ETCD_ANSWER_PUT, 200, "{" HDR "}", &a), 0);
        assert_int_equal(a.response.revision, 5);
        etcd_answer_done(&a);
        assert_int_equal(parse(ETCD_ANSWER_DELETE, 200, "{" HDR ",\"deleted\":\"4\"}", &a), 0);
        assert_int_equal(a.response.deleted, 4);
        etcd_answer_done(&a);
        assert_int_equal(parse(ETCD_ANSWER_LEASE_GRANT, 200,
                               "{" HDR ",\"ID\":\"8588824136662307339\",\"TTL\":\"5\"}", &a),
                         0);
        assert_int_equal(a.response.lease_id, 8588824136662307339LL);
        assert_int_equal(a.response.ttl, 5);
        etcd_answer_done(&a);
        /* keepalive is a stream of {"result":...}; an expired lease has no TTL */
        assert_int_equal(parse(ETCD_ANSWER_LEASE_KEEPALIVE, 200,
                               "{\"result\":{" HDR ",\"ID\":\"77\",\"TTL\":\"5\"}}\n", &a),
                         0);
        assert_int_equal(a.response.lease_id, 77);
        assert_int_equal(a.response.ttl, 5);
        etcd_answer_done(&a);
        assert_int_equal(parse(ETCD_ANSWER_LEASE_KEEPALIVE, 200,
                               "{\"result\":{" HDR ",\"ID\":\"77\"}}\n", &a),
                         0);
        assert_int_equal(a.response.ttl, 0);
        etcd_answer_done(&a);
        assert_int_equal(parse(ETCD_ANSWER_LEASE_REVOKE, 200, "{" HDR "}", &a), 0);
        assert_int_equal(a.response.revision, 5);
        etcd_answer_done(&a);
}

static void test_decode_txn(void **state) {
        EtcdAnswer a;

        assert_int_equal(parse(ETCD_ANSWER_TXN, 200,
                               "{" HDR ",\"succeeded\":true,\"responses\":["
                               "{\"response_put\":{\"header\":{\"revision\":\"5\"}}},"
                               "{\"response_range\":{\"header\":{\"revision\":\"5\"},\"kvs\":["
                               "{\"key\":\"L2EvYg==\",\"create_revision\":\"5\","
                               "\"mod_revision\":\"5\",\"version\":\"1\","
                               "\"value\":\"aGVsbG8=\"}],\"count\":\"1\"}},"
                               "{\"response_delete_range\":{\"header\":{\"revision\":\"5\"},"
                               "\"deleted\":\"2\"}}]}",
                               &a),
                         0);
        assert_true(a.response.succeeded);
        assert_int_equal(a.response.n_responses, 3);
        assert_int_equal(a.response.responses[0].revision, 5);
        assert_string_equal(a.response.responses[0].message, "");
        assert_int_equal(a.response.responses[1].n_kvs, 1);
        assert_int_equal(a.response.responses[1].count, 1);
        assert_string_equal(a.response.responses[1].kvs[0].key, "/a/b");
        assert_string_equal(a.response.responses[1].kvs[0].value, "hello");
        assert_int_equal(a.response.responses[2].deleted, 2);
        etcd_answer_done(&a);

        /* the failure branch: "succeeded" omitted */
        assert_int_equal(parse(ETCD_ANSWER_TXN, 200,
                               "{" HDR ",\"responses\":[{\"response_range\":{\"header\":"
                               "{\"revision\":\"5\"}}}]}",
                               &a),
                         0);
        assert_false(a.response.succeeded);
        assert_int_equal(a.response.n_responses, 1);
        assert_int_equal(a.response.responses[0].n_kvs, 0);
        etcd_answer_done(&a);

        /* an op answer of no known kind */
        assert_int_equal(parse(ETCD_ANSWER_TXN, 200,
                               "{" HDR ",\"responses\":[{\"response_lease\":{}}]}", &a),
                         -EBADMSG);
        assert_int_equal(a.response.n_responses, 0);
        etcd_answer_done(&a);
}

static void test_encode_nested(void **state) {
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
        const EtcdOp deep1 = { .type = ETCD_OP_TXN, .success = &deep2, .n_success = 1 };
        const EtcdOp bad = { .type = ETCD_OP_TXN, .success = NULL, .n_success = 1 };
        char *b, *ops[3] = {};

        check_body(etcd_json_txn(NULL, 0, nested, 2, NULL, 0, &b), b,
                   "{\"compare\":[],\"success\":["
                   "{\"request_txn\":{\"compare\":["
                   "{\"key\":\"L2EvYg==\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
                   "\"create_revision\":\"0\"}],"
                   "\"success\":[{\"request_put\":{\"key\":\"L2EvYg==\",\"value\":\"aGVsbG8=\"}}],"
                   "\"failure\":[{\"request_range\":{\"key\":\"L2EvYg==\",\"limit\":\"1\"}}]}},"
                   "{\"request_txn\":{\"compare\":[],"
                   "\"success\":[{\"request_delete_range\":{\"key\":\"L2Ev\"}}],"
                   "\"failure\":[]}}],\"failure\":[]}");
        /* the same, made of its ops (the group commit's way) */
        assert_int_equal(etcd_json_op(&nested[0], &ops[0]), 0);
        assert_int_equal(etcd_json_op(&nested[1], &ops[1]), 0);
        assert_int_equal(etcd_json_txn_of_ops(ops, 2, &b), 0);
        {
                char *want = NULL;
                assert_int_equal(etcd_json_txn(NULL, 0, nested, 2, NULL, 0, &want), 0);
                assert_string_equal(b, want);
                free(want);
        }
        free(b);
        check_body(etcd_json_txn_of_ops(ops, 0, &b), b,
                   "{\"compare\":[],\"success\":[],\"failure\":[]}");
        free(ops[0]);
        free(ops[1]);
        /* three levels below the txn are the most */
        assert_int_equal(etcd_json_txn(NULL, 0, &deep3, 1, NULL, 0, &b), 0);
        free(b);
        assert_int_equal(etcd_json_txn(NULL, 0, &deep2, 1, NULL, 0, &b), 0);
        assert_non_null(strstr(b, "{\"request_txn\":{\"compare\":[],\"success\":["
                                  "{\"request_txn\":{\"compare\":[],\"success\":["
                                  "{\"request_txn\":{\"compare\":[{"));
        free(b);
        assert_int_equal(etcd_json_txn(NULL, 0, &deep1, 1, NULL, 0, &b), -EINVAL);
        assert_int_equal(etcd_json_op(&bad, &b), -EINVAL);
}

static void test_nested_checks(void **state) {
        const EtcdCompare cmp[3] = {
                { .key = "/r", .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
                { .key = "/s", .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL },
                { .key = "/c", .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
        };
        const EtcdOp ok[] = {
                { .type = ETCD_OP_PUT, .key = "/r", .value = "x" },
                { .type = ETCD_OP_PUT, .key = "/c", .value = "y" },
        };
        const EtcdOp ko[] = {
                { .type = ETCD_OP_RANGE, .key = "/r" },
                { .type = ETCD_OP_PUT, .key = "/c", .value = "z" },
                { .type = ETCD_OP_DELETE, .key = "/d" },
                { .type = ETCD_OP_RANGE, .key = "/s" },
        };
        const EtcdOp claim = { .type = ETCD_OP_TXN, .compare = cmp, .n_compare = 3,
                               .success = ok, .n_success = 2, .failure = ko, .n_failure = 4 };
        const EtcdOp ranged = { .type = ETCD_OP_DELETE, .key = "/a", .range_end = "/b" };
        const EtcdOp inner = { .type = ETCD_OP_TXN, .success = &ranged, .n_success = 1 };
        const EtcdOp outer = { .type = ETCD_OP_TXN, .compare = cmp, .n_compare = 2,
                               .success = &inner, .n_success = 1 };
        const EtcdOp put = { .type = ETCD_OP_PUT, .key = "/p", .value = "" };
        char **keys = NULL;
        bool range = true;

        /* the longest of its lists, plus its deepest nested txn's share */
        assert_int_equal(etcd_txn_op_cost(&claim), 4);
        assert_int_equal(etcd_txn_op_cost(&outer), 3);
        assert_int_equal(etcd_txn_op_cost(&put), 0);
        /* every key it may put or delete, once */
        assert_int_equal(etcd_txn_op_write_keys(&claim, &keys, &range), 0);
        assert_false(range);
        assert_int_equal(strv_length(keys), 3);
        assert_string_equal(keys[0], "/r");
        assert_string_equal(keys[1], "/c");
        assert_string_equal(keys[2], "/d");
        keys = strv_free(keys);
        assert_int_equal(etcd_txn_op_write_keys(&outer, &keys, &range), 0);
        assert_true(range);
        assert_int_equal(strv_length(keys), 1);
        keys = strv_free(keys);
        /* every key its compares name, nested ones' included, once */
        assert_int_equal(etcd_txn_op_compare_keys(&claim, &keys), 0);
        assert_int_equal(strv_length(keys), 3);
        assert_string_equal(keys[0], "/r");
        assert_string_equal(keys[1], "/s");
        assert_string_equal(keys[2], "/c");
        keys = strv_free(keys);
        {
                const EtcdOp both[] = { claim, outer };
                const EtcdOp top = { .type = ETCD_OP_TXN, .success = both, .n_success = 2 };

                assert_int_equal(etcd_txn_op_compare_keys(&top, &keys), 0);
                assert_int_equal(strv_length(keys), 3);
                keys = strv_free(keys);
        }
        assert_int_equal(etcd_txn_op_compare_keys(&put, &keys), 0);
        assert_int_equal(strv_length(keys), 0);
        keys = strv_free(keys);
}

static void test_decode_nested(void **state) {
        EtcdAnswer a;
        const EtcdResponse *n0, *n1;

        /* etcd 3.4.23's answer to test_encode_nested's txn, /a/b being there already (the
         * first compare fails): a nested txn's header is empty */
        assert_int_equal(parse(ETCD_ANSWER_TXN, 200,
                               "{" HDR ",\"succeeded\":true,\"responses\":["
                               "{\"response_txn\":{\"header\":{},\"responses\":["
                               "{\"response_range\":{\"header\":{\"revision\":\"4\"},\"kvs\":["
                               "{\"key\":\"L2EvYg==\",\"create_revision\":\"2\","
                               "\"mod_revision\":\"3\",\"version\":\"2\","
                               "\"value\":\"aGVsbG8=\"}],\"count\":\"1\"}}]}},"
                               "{\"response_txn\":{\"header\":{},\"succeeded\":true,"
                               "\"responses\":[{\"response_delete_range\":{\"header\":"
                               "{\"revision\":\"5\"},\"deleted\":\"1\"}}]}}]}",
                               &a),
                         0);
        assert_true(a.response.succeeded);
        assert_int_equal(a.response.revision, 5);
        assert_int_equal(a.response.n_responses, 2);
        n0 = &a.response.responses[0];
        n1 = &a.response.responses[1];
        assert_false(n0->succeeded);
        assert_int_equal(n0->error, 0);
        assert_string_equal(n0->message, "");
        assert_int_equal(n0->revision, 5); /* the enclosing txn's */
        assert_int_equal(n0->n_responses, 1);
        assert_int_equal(n0->responses[0].n_kvs, 1);
        assert_int_equal(n0->responses[0].revision, 4);
        assert_string_equal(n0->responses[0].kvs[0].value, "hello");
        assert_int_equal(n0->responses[0].kvs[0].mod_revision, 3);
        assert_true(n1->succeeded);
        assert_int_equal(n1->revision, 5);
        assert_int_equal(n1->n_responses, 1);
        assert_int_equal(n1->responses[0].deleted, 1);
        etcd_answer_done(&a);

        /* nested as deep as it may be sent, and one deeper */
        assert_int_equal(parse(ETCD_ANSWER_TXN, 200,
                               "{" HDR ",\"responses\":[{\"response_txn\":{\"responses\":["
                               "{\"response_txn\":{\"responses\":[{\"response_txn\":{"
                               "\"responses\":[{\"response_put\":{}}]}}]}}]}}]}",
                               &a),
                         0);
        assert_int_equal(a.response.responses[0].responses[0].responses[0].n_responses, 1);
        /* none of them has a header: each level, and the put below, is at the outermost's */
        assert_int_equal(a.response.responses[0].revision, 5);
        assert_int_equal(a.response.responses[0].responses[0].revision, 5);
        assert_int_equal(a.response.responses[0].responses[0].responses[0].revision, 5);
        assert_int_equal(a.response.responses[0].responses[0].responses[0].responses[0].revision,
                         5);
        etcd_answer_done(&a);
        assert_int_equal(parse(ETCD_ANSWER_TXN, 200,
                               "{" HDR ",\"responses\":[{\"response_txn\":{\"responses\":["
                               "{\"response_txn\":{\"responses\":[{\"response_txn\":{"
                               "\"responses\":[{\"response_txn\":{}}]}}]}}]}}]}",
                               &a),
                         -EBADMSG);
        etcd_answer_done(&a);
        /* a nested txn's answer of the wrong type */
        assert_int_equal(parse(ETCD_ANSWER_TXN, 200,
                               "{" HDR ",\"responses\":[{\"response_txn\":[]}]}", &a),
                         -EBADMSG);
        assert_int_equal(a.response.n_responses, 0);
        etcd_answer_done(&a);
}

static void test_decode_errors(void **state) {
        EtcdAnswer a;

        assert_int_equal(parse(ETCD_ANSWER_PUT, 400,
                               "{\"error\":\"etcdserver: key is not provided\",\"message\":"
                               "\"etcdserver: key is not provided\",\"code\":3}",
                               &a),
                         -EIO);
        assert_int_equal(a.response.error, -EIO);
        assert_non_null(strstr(a.response.message, "etcdserver: key is not provided"));
        assert_non_null(strstr(a.response.message, "code 3"));
        etcd_answer_done(&a);
        assert_int_equal(parse(ETCD_ANSWER_LEASE_KEEPALIVE, 404,
                               "{\"error\":\"etcdserver: requested lease not found\",\"message\":"
                               "\"etcdserver: requested lease not found\",\"code\":5}",
                               &a),
                         -EIO);
        assert_non_null(strstr(a.response.message, "requested lease not found"));
        etcd_answer_done(&a);
        /* an error inside a stream (HTTP 200 already sent) */
        assert_int_equal(parse(ETCD_ANSWER_LEASE_KEEPALIVE, 200,
                               "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":"
                               "\"etcdserver: no leader\",\"http_status\":\"Service Unavailable\"}}",
                               &a),
                         -EIO);
        assert_non_null(strstr(a.response.message, "etcdserver: no leader"));
        assert_non_null(strstr(a.response.message, "code 14"));
        etcd_answer_done(&a);
        /* a proxy's HTML page, an empty 200, a 503 with nothing to say */
        assert_int_equal(parse(ETCD_ANSWER_RANGE, 502, "<html>Bad Gateway</html>", &a), -EIO);
        assert_non_null(strstr(a.response.message, "HTTP 502"));
        etcd_answer_done(&a);
        assert_int_equal(parse(ETCD_ANSWER_RANGE, 200, "", &a), -EBADMSG);
        etcd_answer_done(&a);
        assert_int_equal(parse(ETCD_ANSWER_RANGE, 503, "{}", &a), -EIO);
        etcd_answer_done(&a);
        /* control bytes of a message do not reach the logs */
        assert_int_equal(parse(ETCD_ANSWER_PUT, 400, "{\"error\":\"bad\\nline\"}", &a), -EIO);
        assert_null(strchr(a.response.message, '\n'));
        etcd_answer_done(&a);
}

static void test_decode_malformed(void **state) {
        static const char *const bodies[] = {
                "[]",
                "{\"header\":5}",
                "{" HDR ",\"kvs\":{}}",
                "{" HDR ",\"kvs\":[5]}",
                "{" HDR ",\"kvs\":[{\"value\":\"aGVsbG8=\"}]}",   /* no key */
                "{" HDR ",\"kvs\":[{\"key\":\"not base64!\"}]}",
                "{" HDR ",\"kvs\":[{\"key\":\"YQBi\"}]}",         /* "a\0b" */
                "{" HDR ",\"kvs\":[{\"key\":\"\"}]}",             /* empty key */
                "{" HDR ",\"count\":\"12x\"}",
                "{" HDR ",\"count\":\"99999999999999999999\"}",
                "{" HDR ",\"count\":true}",
                "{" HDR ",\"more\":\"yes\"}",
                "{\"header\":{\"revision\":\"-\"}}",
                "{" HDR ",\"kvs\":[],\"kvs\":[]}",                /* duplicate member */
        };
        EtcdAnswer a;

        for (size_t i = 0; i < ELEMENTSOF(bodies); i++) {
                assert_int_equal(parse(ETCD_ANSWER_RANGE, 200, bodies[i], &a), -EBADMSG);
                assert_int_equal(a.response.n_kvs, 0);
                assert_true(a.response.message[0] != '\0');
                etcd_answer_done(&a);
        }
        /* numbers as JSON numbers are taken too */
        assert_int_equal(parse(ETCD_ANSWER_RANGE, 200, "{\"header\":{\"revision\":7},\"count\":0}",
                               &a),
                         0);
        assert_int_equal(a.response.revision, 7);
        etcd_answer_done(&a);
}

static int wparse(const char *line, EtcdWatchMessage *m) {
        return etcd_watch_message_parse(line, strlen(line), m);
}

static void test_watch_messages(void **state) {
        EtcdWatchMessage m;

        assert_int_equal(wparse("{\"result\":{" HDR ",\"created\":true}}", &m), 0);
        assert_true(m.created);
        assert_false(m.canceled);
        assert_int_equal(m.revision, 5);
        assert_int_equal(m.n_events, 0);
        etcd_watch_message_done(&m);

        assert_int_equal(wparse("{\"result\":{" HDR ",\"events\":["
                                "{\"kv\":{\"key\":\"L2EvYg==\",\"create_revision\":\"8\","
                                "\"mod_revision\":\"8\",\"version\":\"1\",\"value\":\"eA==\"}},"
                                "{\"type\":\"DELETE\",\"kv\":{\"key\":\"L2EvYg==\","
                                "\"mod_revision\":\"9\"}}]}}",
                                &m),
                         0);
        assert_int_equal(m.n_events, 2);
        assert_int_equal(m.events[0].type, ETCD_EVENT_PUT);
        assert_string_equal(m.events[0].kv.key, "/a/b");
        assert_string_equal(m.events[0].kv.value, "x");
        assert_int_equal(m.events[0].kv.create_revision, 8);
        assert_int_equal(m.events[1].type, ETCD_EVENT_DELETE);
        assert_int_equal(m.events[1].kv.mod_revision, 9);
        assert_string_equal(m.events[1].kv.value, "");
        etcd_watch_message_done(&m);

        /* a watch from a compacted revision: created, then canceled (the header has no
         * revision) */
        assert_int_equal(wparse("{\"result\":{\"header\":{\"cluster_id\":\"1\",\"raft_term\":\"2\"},"
                                "\"canceled\":true,\"compact_revision\":\"5\"}}",
                                &m),
                         0);
        assert_true(m.canceled);
        assert_int_equal(m.compact_revision, 5);
        assert_int_equal(m.revision, 0);
        etcd_watch_message_done(&m);

        assert_int_equal(wparse("{\"result\":{" HDR ",\"canceled\":true,"
                                "\"cancel_reason\":\"etcdserver: no leader\"}}",
                                &m),
                         0);
        assert_true(m.canceled);
        assert_string_equal(m.error, "etcdserver: no leader");
        etcd_watch_message_done(&m);

        assert_int_equal(wparse("{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":"
                                "\"etcdserver: no leader\"}}",
                                &m),
                         0);
        assert_string_equal(m.error, "etcdserver: no leader");
        etcd_watch_message_done(&m);

        assert_int_equal(wparse("{\"result\":{\"events\":[{\"type\":\"BOOM\",\"kv\":"
                                "{\"key\":\"YQ==\"}}]}}",
                                &m),
                         -EBADMSG);
        assert_int_equal(wparse("{\"result\":{\"events\":[{\"type\":\"PUT\"}]}}", &m), -EBADMSG);
        assert_int_equal(wparse("{\"result\":5}", &m), -EBADMSG);
        assert_int_equal(wparse("not json", &m), -EBADMSG);
        assert_null(m.events);
}

static void test_line_buffer(void **state) {
        const char stream[] = "{\"a\":1}\n\n{\"b\":2}\r\n{\"c\"";
        EtcdLineBuffer b = {};
        const char *line;
        size_t n;

        /* byte by byte: lines come out whole, only once complete */
        for (size_t i = 0; i < strlen(stream); i++) {
                assert_int_equal(etcd_line_buffer_append(&b, stream + i, 1), 0);
                line = etcd_line_buffer_next(&b, &n);
                if (i == 7) {
                        assert_non_null(line);
                        assert_string_equal(line, "{\"a\":1}");
                        assert_int_equal(n, 7);
                } else if (i == 17) {
                        assert_non_null(line);
                        assert_string_equal(line, "{\"b\":2}");
                } else
                        assert_null(line);
        }
        assert_int_equal(etcd_line_buffer_append(&b, ":3}\n", 4), 0);
        line = etcd_line_buffer_next(&b, &n);
        assert_string_equal(line, "{\"c\":3}");
        assert_null(etcd_line_buffer_next(&b, &n));
        etcd_line_buffer_done(&b);

        /* an endless line is refused */
        {
                size_t big = 1024 * 1024;
                char *chunk = malloc(big);
                int r = 0;
                assert_non_null(chunk);
                memset(chunk, 'x', big);
                for (size_t i = 0; i <= ETCD_JSON_MAX / big + 1 && r == 0; i++)
                        r = etcd_line_buffer_append(&b, chunk, big);
                assert_int_equal(r, -ENOBUFS);
                free(chunk);
                etcd_line_buffer_done(&b);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_base64),
                cmocka_unit_test(test_prefix_end),
                cmocka_unit_test(test_encode_kv),
                cmocka_unit_test(test_encode_lease_watch),
                cmocka_unit_test(test_encode_txn),
                cmocka_unit_test(test_decode_range),
                cmocka_unit_test(test_decode_simple),
                cmocka_unit_test(test_decode_txn),
                cmocka_unit_test(test_encode_nested),
                cmocka_unit_test(test_nested_checks),
                cmocka_unit_test(test_decode_nested),
                cmocka_unit_test(test_decode_errors),
                cmocka_unit_test(test_decode_malformed),
                cmocka_unit_test(test_watch_messages),
                cmocka_unit_test(test_line_buffer),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
