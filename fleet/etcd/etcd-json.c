/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-json.h"
#include "macro.h"
#include "strv.h"

#define _cleanup_json_ _cleanup_(json_decrefp) /* jansson's own */

static const char *const answer_paths[_ETCD_ANSWER_MAX] = {
        [ETCD_ANSWER_RANGE] = "/v3/kv/range",
        [ETCD_ANSWER_PUT] = "/v3/kv/put",
        [ETCD_ANSWER_DELETE] = "/v3/kv/deleterange",
        [ETCD_ANSWER_TXN] = "/v3/kv/txn",
        [ETCD_ANSWER_LEASE_GRANT] = "/v3/lease/grant",
        [ETCD_ANSWER_LEASE_KEEPALIVE] = "/v3/lease/keepalive",
        [ETCD_ANSWER_LEASE_REVOKE] = "/v3/lease/revoke",
};

const char *etcd_answer_path(EtcdAnswerKind kind) {
        if ((unsigned) kind >= _ETCD_ANSWER_MAX)
                return NULL;
        return answer_paths[kind];
}

/* ---- base64 ---- */

static const char b64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int etcd_base64_encode(const void *data, size_t size, char **ret) {
        const uint8_t *p = data;
        char *s, *o;
        size_t i;

        if (size > (SIZE_MAX - 1) / 4 * 3 - 3)
                return -ENOMEM;
        s = malloc((size + 2) / 3 * 4 + 1);
        if (!s)
                return -ENOMEM;
        o = s;
        for (i = 0; i + 2 < size; i += 3) {
                uint32_t v = (uint32_t) p[i] << 16 | (uint32_t) p[i + 1] << 8 | p[i + 2];
                *o++ = b64_alphabet[v >> 18];
                *o++ = b64_alphabet[(v >> 12) & 63];
                *o++ = b64_alphabet[(v >> 6) & 63];
                *o++ = b64_alphabet[v & 63];
        }
        if (i < size) {
                uint32_t v = (uint32_t) p[i] << 16 | (i + 1 < size ? (uint32_t) p[i + 1] << 8 : 0);
                *o++ = b64_alphabet[v >> 18];
                *o++ = b64_alphabet[(v >> 12) & 63];
                *o++ = i + 1 < size ? b64_alphabet[(v >> 6) & 63] : '=';
                *o++ = '=';
        }
        *o = '\0';
        *ret = s;
        return 0;
}

static int b64_value(char c) {
        const char *p;

        if (c == '\0')
                return -1;
        p = strchr(b64_alphabet, c);
        return p ? (int) (p - b64_alphabet) : -1;
}

int etcd_base64_decode(const char *s, size_t len, char **ret, size_t *ret_size) {
        _cleanup_free_ char *out = NULL;
        uint32_t acc = 0;
        size_t n = 0, bits = 0, i;

        while (len > 0 && s[len - 1] == '=')
                len--;
        if (len % 4 == 1)
                return -EBADMSG;
        out = malloc(len / 4 * 3 + 3);
        if (!out)
                return -ENOMEM;
        for (i = 0; i < len; i++) {
                int v = b64_value(s[i]);
                if (v < 0)
                        return -EBADMSG;
                acc = (acc << 6) | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (char) ((acc >> bits) & 0xff);
                }
        }
        out[n] = '\0';
        *ret = TAKE_PTR(out);
        if (ret_size)
                *ret_size = n;
        return 0;
}

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

/* ---- request bodies ---- */

static int set_bytes(json_t *o, const char *name, const char *s) {
        _cleanup_free_ char *b = NULL;
        int r;

        /* "" as a range_end is etcd's "\0" (every key from key on). */
        if (name && streq(name, "range_end") && s[0] == '\0')
                r = etcd_base64_encode("", 1, &b);
        else
                r = etcd_base64_encode(s, strlen(s), &b);
        if (r < 0)
                return r;
        return json_object_set_new(o, name, json_string(b)) < 0 ? -ENOMEM : 0;
}

static int set_int64(json_t *o, const char *name, int64_t v) {
        char buf[24];

        (void) snprintf(buf, sizeof(buf), "%" PRId64, v);
        return json_object_set_new(o, name, json_string(buf)) < 0 ? -ENOMEM : 0;
}

static int dump(json_t *o, char **ret) {
        char *s = json_dumps(o, JSON_COMPACT);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int build_range(const char *key, const char *range_end, int64_t limit, json_t **ret) {
        _cleanup_json_ json_t *o = NULL;
        int r;

        if (!key || key[0] == '\0' || limit < 0)
                return -EINVAL;
        o = json_object();
        if (!o)
                return -ENOMEM;
        r = set_bytes(o, "key", key);
        if (r >= 0 && range_end)
                r = set_bytes(o, "range_end", range_end);
        if (r >= 0 && limit > 0)
                r = set_int64(o, "limit", limit);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

static int build_put(const char *key, const char *value, int64_t lease, json_t **ret) {
        _cleanup_json_ json_t *o = NULL;
        int r;

        if (!key || key[0] == '\0' || lease < 0)
                return -EINVAL;
        o = json_object();
        if (!o)
                return -ENOMEM;
        r = set_bytes(o, "key", key);
        if (r >= 0)
                r = set_bytes(o, "value", strempty(value));
        if (r >= 0 && lease != 0)
                r = set_int64(o, "lease", lease);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

int etcd_json_range(const char *key, const char *range_end, int64_t limit, char **ret) {
        _cleanup_json_ json_t *o = NULL;
        int r = build_range(key, range_end, limit, &o);
        return r < 0 ? r : dump(o, ret);
}

int etcd_json_put(const char *key, const char *value, int64_t lease, char **ret) {
        _cleanup_json_ json_t *o = NULL;
        int r = build_put(key, value, lease, &o);
        return r < 0 ? r : dump(o, ret);
}

int etcd_json_delete(const char *key, const char *range_end, char **ret) {
        _cleanup_json_ json_t *o = NULL;
        int r = build_range(key, range_end, 0, &o);
        return r < 0 ? r : dump(o, ret);
}

static const char *const target_names[] = {
        [ETCD_TARGET_VERSION] = "VERSION", [ETCD_TARGET_CREATE] = "CREATE",
        [ETCD_TARGET_MOD] = "MOD",         [ETCD_TARGET_VALUE] = "VALUE",
        [ETCD_TARGET_LEASE] = "LEASE",
};
static const char *const target_fields[] = {
        [ETCD_TARGET_VERSION] = "version", [ETCD_TARGET_CREATE] = "create_revision",
        [ETCD_TARGET_MOD] = "mod_revision", [ETCD_TARGET_VALUE] = "value",
        [ETCD_TARGET_LEASE] = "lease",
};
static const char *const result_names[] = {
        [ETCD_EQUAL] = "EQUAL",
        [ETCD_GREATER] = "GREATER",
        [ETCD_LESS] = "LESS",
        [ETCD_NOT_EQUAL] = "NOT_EQUAL",
};

static int build_compare(const EtcdCompare *c, json_t **ret) {
        _cleanup_json_ json_t *o = NULL;
        int r;

        if (!c->key || c->key[0] == '\0' || (unsigned) c->target >= ELEMENTSOF(target_names) ||
            (unsigned) c->result >= ELEMENTSOF(result_names) ||
            (c->target == ETCD_TARGET_VALUE && !c->value))
                return -EINVAL;
        o = json_object();
        if (!o)
                return -ENOMEM;
        r = set_bytes(o, "key", c->key);
        if (r < 0)
                return r;
        if (json_object_set_new(o, "target", json_string(target_names[c->target])) < 0 ||
            json_object_set_new(o, "result", json_string(result_names[c->result])) < 0)
                return -ENOMEM;
        /* Always given, even at 0: the field is a oneof, and absent is not "0". */
        if (c->target == ETCD_TARGET_VALUE)
                r = set_bytes(o, "value", c->value);
        else
                r = set_int64(o, target_fields[c->target], c->number);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

static int build_txn(const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
                     size_t n_success, const EtcdOp *failure, size_t n_failure, unsigned depth,
                     json_t **ret);

static int build_op(const EtcdOp *op, unsigned depth, json_t **ret) {
        _cleanup_json_ json_t *inner = NULL, *o = NULL;
        const char *name;
        int r;

        switch (op->type) {
        case ETCD_OP_RANGE:
                name = "request_range";
                r = build_range(op->key, op->range_end, op->limit, &inner);
                break;
        case ETCD_OP_PUT:
                name = "request_put";
                r = build_put(op->key, op->value, op->lease, &inner);
                break;
        case ETCD_OP_DELETE:
                name = "request_delete_range";
                r = build_range(op->key, op->range_end, 0, &inner);
                break;
        case ETCD_OP_TXN:
                if (depth >= ETCD_TXN_NESTING_MAX)
                        return -EINVAL;
                name = "request_txn";
                r = build_txn(op->compare, op->n_compare, op->success, op->n_success,
                              op->failure, op->n_failure, depth + 1, &inner);
                break;
        default:
                return -EINVAL;
        }
        if (r < 0)
                return r;
        o = json_object();
        if (!o || json_object_set_new(o, name, TAKE_PTR(inner)) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int build_ops(const EtcdOp *ops, size_t n, unsigned depth, json_t **ret) {
        _cleanup_json_ json_t *a = json_array();
        int r;

        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_t *op = NULL;
                r = build_op(&ops[i], depth, &op);
                if (r < 0)
                        return r;
                if (json_array_append_new(a, op) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(a);
        return 0;
}

/* depth: how many txns enclose this one. */
static int build_txn(const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
                     size_t n_success, const EtcdOp *failure, size_t n_failure, unsigned depth,
                     json_t **ret) {
        _cleanup_json_ json_t *o = json_object(), *cmp = json_array();
        json_t *ops = NULL;
        int r;

        if (!o || !cmp)
                return -ENOMEM;
        if ((n_compare > 0 && !compare) || (n_success > 0 && !success) ||
            (n_failure > 0 && !failure))
                return -EINVAL;
        for (size_t i = 0; i < n_compare; i++) {
                json_t *c = NULL;
                r = build_compare(&compare[i], &c);
                if (r < 0)
                        return r;
                if (json_array_append_new(cmp, c) < 0)
                        return -ENOMEM;
        }
        if (json_object_set_new(o, "compare", TAKE_PTR(cmp)) < 0)
                return -ENOMEM;
        r = build_ops(success, n_success, depth, &ops);
        if (r < 0)
                return r;
        if (json_object_set_new(o, "success", ops) < 0)
                return -ENOMEM;
        r = build_ops(failure, n_failure, depth, &ops);
        if (r < 0)
                return r;
        if (json_object_set_new(o, "failure", ops) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

int etcd_json_txn(const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
                  size_t n_success, const EtcdOp *failure, size_t n_failure, char **ret) {
        _cleanup_json_ json_t *o = NULL;
        int r = build_txn(compare, n_compare, success, n_success, failure, n_failure, 0, &o);
        return r < 0 ? r : dump(o, ret);
}

int etcd_json_op(const EtcdOp *op, char **ret) {
        _cleanup_json_ json_t *o = NULL;
        int r;

        if (!op)
                return -EINVAL;
        /* As an op of a txn: a nested txn is one level down already. */
        r = build_op(op, 0, &o);
        return r < 0 ? r : dump(o, ret);
}

int etcd_json_txn_of_ops(char *const *ops, size_t n, char **ret) {
        static const char head[] = "{\"compare\":[],\"success\":[", tail[] = "],\"failure\":[]}";
        size_t size = sizeof(head) + sizeof(tail), off;
        char *s;

        for (size_t i = 0; i < n; i++) {
                if (!ops[i] || ops[i][0] != '{')
                        return -EINVAL;
                size += strlen(ops[i]) + 1;
        }
        s = malloc(size);
        if (!s)
                return -ENOMEM;
        memcpy(s, head, sizeof(head) - 1);
        off = sizeof(head) - 1;
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(ops[i]);
                if (i > 0)
                        s[off++] = ',';
                memcpy(s + off, ops[i], len);
                off += len;
        }
        memcpy(s + off, tail, sizeof(tail));
        *ret = s;
        return 0;
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

int etcd_json_lease_grant(int64_t ttl_sec, char **ret) {
        _cleanup_json_ json_t *o = json_object();

        if (!o)
                return -ENOMEM;
        if (ttl_sec <= 0)
                return -EINVAL;
        if (set_int64(o, "TTL", ttl_sec) < 0)
                return -ENOMEM;
        return dump(o, ret);
}

int etcd_json_lease_id(int64_t lease_id, char **ret) {
        _cleanup_json_ json_t *o = json_object();

        if (!o)
                return -ENOMEM;
        if (lease_id <= 0)
                return -EINVAL;
        if (set_int64(o, "ID", lease_id) < 0)
                return -ENOMEM;
        return dump(o, ret);
}

int etcd_json_watch(const char *key, const char *range_end, int64_t start_revision,
                    char **ret) {
        _cleanup_json_ json_t *o = NULL, *w = NULL;
        int r;

        if (start_revision < 0)
                return -EINVAL;
        r = build_range(key, range_end, 0, &w);
        if (r < 0)
                return r;
        if (start_revision > 0) {
                r = set_int64(w, "start_revision", start_revision);
                if (r < 0)
                        return r;
        }
        o = json_object();
        if (!o || json_object_set_new(o, "create_request", TAKE_PTR(w)) < 0)
                return -ENOMEM;
        return dump(o, ret);
}
