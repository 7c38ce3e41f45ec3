/* SPDX-License-Identifier: MIT */
/* fleet/etcd/etcd-answer.c: the range end of a prefix, what etcd checks of a txn's ops beside
 * others in one request (etcd-batch.c's group commit), and the failure of an answer in words
 * fit for a log. (The gRPC messages are test-etcd-grpc-*.c's.) */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd-answer.h"
#include "macro.h"
#include "strv.h"

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

static void test_answer_fail(void **state) {
        EtcdAnswer a = { .response.message = "" };
        char *s;

        /* "<what>: <detail>", the detail made printable ASCII */
        etcd_answer_fail(&a, -EIO, "POST http://127.0.0.1:2379/etcdserverpb.KV/Put",
                         "bad\nline\x7f\xc3\xa9");
        assert_int_equal(a.response.error, -EIO);
        assert_string_equal(a.response.message,
                            "POST http://127.0.0.1:2379/etcdserverpb.KV/Put: bad?line???");
        assert_ptr_equal(a.response.message, a.message);
        /* again: the first message is freed, not leaked */
        etcd_answer_fail(&a, -ETIMEDOUT, "what", NULL);
        assert_string_equal(a.response.message, "what");
        assert_int_equal(a.response.error, -ETIMEDOUT);
        etcd_answer_done(&a);
        assert_null(a.message);
        assert_string_equal(a.response.message, "");
        /* at most max bytes */
        s = etcd_sanitized("abcdef", 3);
        assert_string_equal(s, "abc");
        free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_prefix_end),
                cmocka_unit_test(test_nested_checks),
                cmocka_unit_test(test_answer_fail),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
