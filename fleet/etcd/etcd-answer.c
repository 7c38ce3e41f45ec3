/* SPDX-License-Identifier: MIT */
/* What etcd's answers become, and what etcd checks of a txn's ops (etcd-answer.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-answer.h"
#include "macro.h"
#include "strv.h"

char *etcd_prefix_end(const char *prefix) {
        size_t n;
        char *s;

        if (!prefix)
                return NULL;
        s = strdup(prefix);
        if (!s)
                return NULL;
        for (n = strlen(s); n > 0; n--) {
                if ((unsigned char) s[n - 1] < 0xff) {
                        s[n - 1]++;
                        s[n] = '\0';
                        return s;
                }
        }
        s[0] = '\0'; /* "\0" to etcd: every key from prefix on */
        return s;
}

/* ---- answers ---- */

void etcd_kvs_free(EtcdKv *kvs, size_t n) {
        if (!kvs)
                return;
        for (size_t i = 0; i < n; i++) {
                free(kvs[i].key);
                free(kvs[i].value);
        }
        free(kvs);
}

void etcd_response_done(EtcdResponse *r) {
        if (!r)
                return;
        etcd_kvs_free(r->kvs, r->n_kvs);
        free(r->leader.name);
        free(r->leader.key);
        for (size_t i = 0; i < r->n_responses; i++)
                etcd_response_done(&r->responses[i]);
        free(r->responses);
        *r = (EtcdResponse) { .message = "" };
}

void etcd_answer_done(EtcdAnswer *a) {
        if (!a)
                return;
        etcd_response_done(&a->response);
        a->message = mfree(a->message);
        a->response.message = "";
}

/* Only printable ASCII of a message from the wire goes into ours (it ends up in logs). */
char *etcd_sanitized(const char *s, size_t max) {
        size_t n = MIN(strlen(s), max);
        char *t = malloc(n + 1);

        if (!t)
                return NULL;
        for (size_t i = 0; i < n; i++)
                t[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
        t[n] = '\0';
        return t;
}

void etcd_answer_fail(EtcdAnswer *a, int error, const char *what, const char *detail) {
        char *m = NULL;

        etcd_response_done(&a->response);
        free(a->message);
        if (detail) {
                _cleanup_free_ char *d = etcd_sanitized(detail, 512);
                if (d && asprintf(&m, "%s: %s", what, d) < 0)
                        m = NULL;
        } else
                m = strdup(what);
        a->message = m;
        a->response.error = error;
        a->response.message = m ?: "";
}

void etcd_watch_message_done(EtcdWatchMessage *m) {
        if (!m)
                return;
        for (size_t i = 0; i < m->n_events; i++) {
                free(m->events[i].kv.key);
                free(m->events[i].kv.value);
        }
        free(m->events);
        free(m->error);
        *m = (EtcdWatchMessage) {};
}

/* ---- what etcd checks of a txn's ops ---- */

static unsigned txn_cost(const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
                         size_t n_success, const EtcdOp *failure, size_t n_failure,
                         unsigned depth);

static unsigned ops_cost(const EtcdOp *ops, size_t n, unsigned depth) {
        unsigned deepest = 0;

        for (size_t i = 0; ops && i < n; i++)
                if (ops[i].type == ETCD_OP_TXN)
                        deepest = MAX(deepest, txn_cost(ops[i].compare, ops[i].n_compare,
                                                        ops[i].success, ops[i].n_success,
                                                        ops[i].failure, ops[i].n_failure,
                                                        depth + 1));
        return deepest;
}

static unsigned txn_cost(const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
                         size_t n_success, const EtcdOp *failure, size_t n_failure,
                         unsigned depth) {
        size_t width = MAX(n_compare, MAX(n_success, n_failure));

        if (depth > ETCD_TXN_NESTING_MAX || width > UINT_MAX / 2)
                return UINT_MAX / 2;
        return (unsigned) width + MAX(ops_cost(success, n_success, depth),
                                      ops_cost(failure, n_failure, depth));
}

unsigned etcd_txn_op_cost(const EtcdOp *op) {
        if (!op || op->type != ETCD_OP_TXN)
                return 0;
        return txn_cost(op->compare, op->n_compare, op->success, op->n_success, op->failure,
                        op->n_failure, 1);
}

static int write_keys(const EtcdOp *ops, size_t n, unsigned depth, char ***keys,
                      bool *ret_range) {
        int r;

        for (size_t i = 0; ops && i < n; i++) {
                const EtcdOp *op = &ops[i];

                switch (op->type) {
                case ETCD_OP_PUT:
                case ETCD_OP_DELETE:
                        if (op->type == ETCD_OP_DELETE && op->range_end)
                                *ret_range = true;
                        if (!op->key)
                                return -EINVAL;
                        if (strv_contains(*keys, op->key))
                                break;
                        r = strv_extend(keys, op->key);
                        if (r < 0)
                                return r;
                        break;
                case ETCD_OP_TXN:
                        if (depth >= ETCD_TXN_NESTING_MAX)
                                return -EINVAL;
                        r = write_keys(op->success, op->n_success, depth + 1, keys, ret_range);
                        if (r >= 0)
                                r = write_keys(op->failure, op->n_failure, depth + 1, keys,
                                               ret_range);
                        if (r < 0)
                                return r;
                        break;
                default:
                        break;
                }
        }
        return 0;
}

static int compare_keys(const EtcdOp *ops, size_t n, unsigned depth, char ***keys) {
        int r;

        for (size_t i = 0; ops && i < n; i++) {
                const EtcdOp *op = &ops[i];

                if (op->type != ETCD_OP_TXN)
                        continue;
                if (depth >= ETCD_TXN_NESTING_MAX)
                        return -EINVAL;
                for (size_t j = 0; op->compare && j < op->n_compare; j++) {
                        if (!op->compare[j].key)
                                return -EINVAL;
                        if (strv_contains(*keys, op->compare[j].key))
                                continue;
                        r = strv_extend(keys, op->compare[j].key);
                        if (r < 0)
                                return r;
                }
                r = compare_keys(op->success, op->n_success, depth + 1, keys);
                if (r >= 0)
                        r = compare_keys(op->failure, op->n_failure, depth + 1, keys);
                if (r < 0)
                        return r;
        }
        return 0;
}

int etcd_txn_op_compare_keys(const EtcdOp *op, char ***ret) {
        _cleanup_strv_free_ char **keys = NULL;
        int r;

        if (!op)
                return -EINVAL;
        r = compare_keys(op, 1, 0, &keys);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(keys);
        return 0;
}

int etcd_txn_op_write_keys(const EtcdOp *op, char ***ret, bool *ret_range) {
        _cleanup_strv_free_ char **keys = NULL;
        bool range = false;
        int r;

        if (!op)
                return -EINVAL;
        r = write_keys(op, 1, 0, &keys, &range);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(keys);
        *ret_range = range;
        return 0;
}
