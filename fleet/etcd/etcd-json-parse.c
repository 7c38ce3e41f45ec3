/* SPDX-License-Identifier: MIT */
/* The gateway's answers (etcd-json.h): parsed as hostile input. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-json.h"
#include "macro.h"

#define _cleanup_json_ _cleanup_(json_decrefp) /* jansson's own */

/* An int64 field: a JSON string of decimal digits (the gateway's way), or a number. Absent:
 * 0. */
static int get_int64(const json_t *o, const char *name, int64_t *ret) {
        const json_t *v = json_object_get(o, name);
        const char *s;
        char *end;
        long long n;

        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        if (json_is_integer(v)) {
                *ret = json_integer_value(v);
                return 0;
        }
        if (!json_is_string(v))
                return -EBADMSG;
        s = json_string_value(v);
        if (!((s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && s[1] >= '0' && s[1] <= '9')))
                return -EBADMSG;
        errno = 0;
        n = strtoll(s, &end, 10);
        if (errno != 0 || *end != '\0' || (size_t) (end - s) != json_string_length(v))
                return -EBADMSG;
        *ret = n;
        return 0;
}

static int get_bool(const json_t *o, const char *name, bool *ret) {
        const json_t *v = json_object_get(o, name);

        *ret = false;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_boolean(v))
                return -EBADMSG;
        *ret = json_is_true(v);
        return 0;
}

/* A base64 field, decoded; absent: "". */
static int get_bytes(const json_t *o, const char *name, char **ret, size_t *ret_size) {
        const json_t *v = json_object_get(o, name);

        if (!v || json_is_null(v)) {
                *ret = strdup("");
                if (ret_size)
                        *ret_size = 0;
                return *ret ? 0 : -ENOMEM;
        }
        if (!json_is_string(v))
                return -EBADMSG;
        return etcd_base64_decode(json_string_value(v), json_string_length(v), ret, ret_size);
}

/* An optional object member: NULL when absent, -EBADMSG when not an object. */
static int get_object(const json_t *o, const char *name, json_t **ret) {
        json_t *v = json_object_get(o, name);

        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v))
                return -EBADMSG;
        *ret = v;
        return 0;
}

static int get_array(const json_t *o, const char *name, json_t **ret) {
        json_t *v = json_object_get(o, name);

        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_array(v))
                return -EBADMSG;
        *ret = v;
        return 0;
}

static int get_header_revision(const json_t *o, int64_t *ret) {
        json_t *h;
        int r;

        *ret = 0;
        r = get_object(o, "header", &h);
        if (r < 0 || !h)
                return r;
        return get_int64(h, "revision", ret);
}

void etcd_kvs_free(EtcdKv *kvs, size_t n) {
        if (!kvs)
                return;
        for (size_t i = 0; i < n; i++) {
                free(kvs[i].key);
                free(kvs[i].value);
        }
        free(kvs);
}

static int parse_kv(const json_t *o, EtcdKv *kv) {
        size_t key_size;
        int r;

        if (!json_is_object(o))
                return -EBADMSG;
        if (!json_is_string(json_object_get(o, "key")))
                return -EBADMSG;
        r = get_bytes(o, "key", &kv->key, &key_size);
        if (r < 0)
                return r;
        if (key_size == 0 || strlen(kv->key) != key_size)
                return -EBADMSG; /* a key is never empty, and ours are C strings */
        r = get_bytes(o, "value", &kv->value, &kv->value_len);
        if (r >= 0)
                r = get_int64(o, "create_revision", &kv->create_revision);
        if (r >= 0)
                r = get_int64(o, "mod_revision", &kv->mod_revision);
        if (r >= 0)
                r = get_int64(o, "version", &kv->version);
        if (r >= 0)
                r = get_int64(o, "lease", &kv->lease);
        return r;
}

static int parse_kvs(const json_t *o, EtcdResponse *resp) {
        json_t *a, *v;
        size_t i;
        int r;

        r = get_array(o, "kvs", &a);
        if (r < 0 || !a || json_array_size(a) == 0)
                return r;
        resp->kvs = new0(EtcdKv, json_array_size(a));
        if (!resp->kvs)
                return -ENOMEM;
        json_array_foreach(a, i, v) {
                resp->n_kvs = i + 1; /* so that done() frees the half-parsed one */
                r = parse_kv(v, &resp->kvs[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_body(EtcdAnswerKind kind, const json_t *o, EtcdResponse *resp, int depth);

/* A txn's responses: [{"response_range":{...}} | {"response_put":{...}} |
 * {"response_delete_range":{...}} | {"response_txn":{...}}, ...]. */
static int parse_txn_responses(const json_t *o, EtcdResponse *resp, int depth) {
        static const struct {
                const char *name;
                EtcdAnswerKind kind;
        } ops[] = {
                { "response_range", ETCD_ANSWER_RANGE },
                { "response_put", ETCD_ANSWER_PUT },
                { "response_delete_range", ETCD_ANSWER_DELETE },
                { "response_txn", ETCD_ANSWER_TXN },
        };
        json_t *a, *v;
        size_t i;
        int r;

        r = get_array(o, "responses", &a);
        if (r < 0 || !a || json_array_size(a) == 0)
                return r;
        resp->responses = new0(EtcdResponse, json_array_size(a));
        if (!resp->responses)
                return -ENOMEM;
        json_array_foreach(a, i, v) {
                json_t *inner = NULL;
                size_t j;

                resp->n_responses = i + 1;
                resp->responses[i].message = "";
                if (!json_is_object(v))
                        return -EBADMSG;
                for (j = 0; j < ELEMENTSOF(ops); j++) {
                        r = get_object(v, ops[j].name, &inner);
                        if (r < 0)
                                return r;
                        if (inner)
                                break;
                }
                if (!inner)
                        return -EBADMSG;
                /* etcd gives a nested txn no header: it is made at the enclosing revision,
                 * which parse_body() keeps when the op has none (a nested txn's ops too). */
                resp->responses[i].revision = resp->revision;
                r = parse_body(ops[j].kind, inner, &resp->responses[i], depth + 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* resp->revision is the enclosing txn's on entry (0 at the top), kept when o has no header. */
static int parse_body(EtcdAnswerKind kind, const json_t *o, EtcdResponse *resp, int depth) {
        int64_t enclosing = resp->revision;
        int r;

        /* depth: a txn's op answers are 1 down, a nested txn's 2, ... */
        if (!json_is_object(o) || depth > ETCD_TXN_NESTING_MAX + 1)
                return -EBADMSG;
        r = get_header_revision(o, &resp->revision);
        if (r < 0)
                return r;
        if (resp->revision == 0)
                resp->revision = enclosing;
        switch (kind) {
        case ETCD_ANSWER_RANGE:
                r = parse_kvs(o, resp);
                if (r >= 0)
                        r = get_bool(o, "more", &resp->more);
                if (r >= 0)
                        r = get_int64(o, "count", &resp->count);
                return r;
        case ETCD_ANSWER_PUT:
        case ETCD_ANSWER_LEASE_REVOKE:
                return 0;
        case ETCD_ANSWER_DELETE:
                return get_int64(o, "deleted", &resp->deleted);
        case ETCD_ANSWER_TXN:
                if (depth > ETCD_TXN_NESTING_MAX)
                        return -EBADMSG;
                r = get_bool(o, "succeeded", &resp->succeeded);
                if (r >= 0)
                        r = parse_txn_responses(o, resp, depth);
                return r;
        case ETCD_ANSWER_LEASE_GRANT:
        case ETCD_ANSWER_LEASE_KEEPALIVE:
                r = get_int64(o, "ID", &resp->lease_id);
                if (r >= 0)
                        r = get_int64(o, "TTL", &resp->ttl);
                return r;
        default:
                return -EINVAL;
        }
}

void etcd_response_done(EtcdResponse *r) {
        if (!r)
                return;
        etcd_kvs_free(r->kvs, r->n_kvs);
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

/* {"error":"etcdserver: ...","message":"...","code":N} (unary) or
 * {"error":{"grpc_code":N,"message":"...",...}} (in a stream). Fills a and returns -EIO when
 * o is such an error, 0 when it is not. */
static int parse_error(const json_t *o, long http_status, EtcdAnswer *a) {
        const json_t *e = json_object_get(o, "error");
        const char *msg = NULL;
        int64_t code = 0;
        char what[64];

        if (!e || (json_is_string(e) && json_string_length(e) == 0))
                return 0;
        if (json_is_string(e)) {
                const json_t *m = json_object_get(o, "message");
                msg = json_is_string(m) && json_string_length(m) > 0 ? json_string_value(m)
                                                                     : json_string_value(e);
                (void) get_int64(o, "code", &code);
        } else if (json_is_object(e)) {
                const json_t *m = json_object_get(e, "message");
                msg = json_is_string(m) ? json_string_value(m) : "(no message)";
                (void) get_int64(e, "grpc_code", &code);
        } else
                msg = "(an error of no known shape)";
        (void) snprintf(what, sizeof(what), "etcd error (gRPC code %lld, HTTP %ld)",
                        (long long) code, http_status);
        etcd_answer_fail(a, -EIO, what, msg);
        return -EIO;
}

static int answer_json(EtcdAnswerKind kind, long http_status, const char *body, size_t size,
                       json_t **ret, EtcdAnswer *a) {
        json_error_t err;
        size_t flags = JSON_REJECT_DUPLICATES;
        char what[64];

        /* keepalive is a stream: its first object is the answer. */
        if (kind == ETCD_ANSWER_LEASE_KEEPALIVE)
                flags |= JSON_DISABLE_EOF_CHECK;
        *ret = size <= ETCD_JSON_MAX ? json_loadb(body, size, flags, &err) : NULL;
        if (!*ret || !json_is_object(*ret)) {
                (void) snprintf(what, sizeof(what), "HTTP %ld", http_status);
                if (http_status != 200)
                        etcd_answer_fail(a, -EIO, what, "an answer that is not etcd's JSON");
                else
                        etcd_answer_fail(a, -EBADMSG, what, *ret ? "not a JSON object"
                                                                 : err.text);
                return a->response.error;
        }
        return 0;
}

int etcd_answer_parse(EtcdAnswerKind kind, long http_status, const char *body, size_t size,
                      EtcdAnswer *a) {
        _cleanup_json_ json_t *o = NULL;
        json_t *result;
        char what[64];
        int r;

        *a = (EtcdAnswer) { .response.message = "" };
        if ((unsigned) kind >= _ETCD_ANSWER_MAX) {
                etcd_answer_fail(a, -EINVAL, "unknown kind of answer", NULL);
                return -EINVAL;
        }
        r = answer_json(kind, http_status, body, size, &o, a);
        if (r < 0)
                return r;
        r = parse_error(o, http_status, a);
        if (r < 0)
                return r;
        if (http_status != 200) {
                (void) snprintf(what, sizeof(what), "HTTP %ld", http_status);
                etcd_answer_fail(a, -EIO, what, "without an error message");
                return -EIO;
        }
        result = o;
        if (kind == ETCD_ANSWER_LEASE_KEEPALIVE) {
                result = json_object_get(o, "result");
                if (!json_is_object(result)) {
                        etcd_answer_fail(a, -EBADMSG, "lease keepalive", "no result object");
                        return -EBADMSG;
                }
        }
        r = parse_body(kind, result, &a->response, 0);
        if (r < 0) {
                etcd_answer_fail(a, r, etcd_answer_path(kind),
                                 r == -ENOMEM ? "out of memory" : "malformed answer");
                return r;
        }
        return 0;
}

/* ---- watch ---- */

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

static int parse_event(const json_t *o, EtcdEvent *ev) {
        const json_t *type;
        json_t *kv;
        int r;

        if (!json_is_object(o))
                return -EBADMSG;
        type = json_object_get(o, "type");
        if (!type || json_is_null(type) || (json_is_string(type) &&
                                            streq(json_string_value(type), "PUT")))
                ev->type = ETCD_EVENT_PUT;
        else if (json_is_string(type) && streq(json_string_value(type), "DELETE"))
                ev->type = ETCD_EVENT_DELETE;
        else
                return -EBADMSG;
        r = get_object(o, "kv", &kv);
        if (r < 0)
                return r;
        if (!kv)
                return -EBADMSG;
        return parse_kv(kv, &ev->kv);
}

static int parse_watch_result(const json_t *res, EtcdWatchMessage *m) {
        const json_t *reason;
        json_t *a, *v;
        size_t i;
        int r;

        if (!json_is_object(res))
                return -EBADMSG;
        r = get_header_revision(res, &m->revision);
        if (r >= 0)
                r = get_bool(res, "created", &m->created);
        if (r >= 0)
                r = get_bool(res, "canceled", &m->canceled);
        if (r >= 0)
                r = get_int64(res, "compact_revision", &m->compact_revision);
        if (r >= 0)
                r = get_array(res, "events", &a);
        if (r < 0)
                return r;
        reason = json_object_get(res, "cancel_reason");
        if (json_is_string(reason) && json_string_length(reason) > 0) {
                m->error = etcd_sanitized(json_string_value(reason), 512);
                if (!m->error)
                        return -ENOMEM;
        }
        if (!a || json_array_size(a) == 0)
                return 0;
        m->events = new0(EtcdEvent, json_array_size(a));
        if (!m->events)
                return -ENOMEM;
        json_array_foreach(a, i, v) {
                m->n_events = i + 1;
                r = parse_event(v, &m->events[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int etcd_watch_message_parse(const char *line, size_t size, EtcdWatchMessage *m) {
        _cleanup_json_ json_t *o = NULL;
        const json_t *e;
        int r;

        *m = (EtcdWatchMessage) {};
        o = size <= ETCD_JSON_MAX ? json_loadb(line, size, JSON_REJECT_DUPLICATES, NULL) : NULL;
        if (!o || !json_is_object(o))
                return -EBADMSG;
        e = json_object_get(o, "error");
        if (e && !json_is_null(e)) {
                const json_t *msg = json_is_object(e) ? json_object_get(e, "message") : e;
                m->error = etcd_sanitized(json_is_string(msg) ? json_string_value(msg)
                                                              : "(no message)",
                                          512);
                return m->error ? 0 : -ENOMEM;
        }
        r = parse_watch_result(json_object_get(o, "result"), m);
        if (r < 0)
                etcd_watch_message_done(m);
        return r;
}

/* ---- lines of a stream ---- */

int etcd_line_buffer_append(EtcdLineBuffer *b, const void *data, size_t size) {
        size_t need;

        if (b->start > 0) {
                memmove(b->data, b->data + b->start, b->size - b->start);
                b->size -= b->start;
                b->start = 0;
        }
        if (size > ETCD_JSON_MAX || b->size + size > ETCD_JSON_MAX + 1)
                return -ENOBUFS;
        need = b->size + size + 1;
        if (need > b->allocated) {
                size_t a = MAX(need, MAX(b->allocated * 2, (size_t) 4096));
                char *p = realloc(b->data, a);
                if (!p)
                        return -ENOMEM;
                b->data = p;
                b->allocated = a;
        }
        memcpy(b->data + b->size, data, size);
        b->size += size;
        b->data[b->size] = '\0';
        return 0;
}

const char *etcd_line_buffer_next(EtcdLineBuffer *b, size_t *ret_size) {
        while (b->data && b->start < b->size) {
                char *s = b->data + b->start;
                char *nl = memchr(s, '\n', b->size - b->start);
                size_t n;

                if (!nl)
                        return NULL;
                *nl = '\0';
                n = (size_t) (nl - s);
                b->start += n + 1;
                if (n > 0 && s[n - 1] == '\r')
                        s[--n] = '\0';
                if (n == 0)
                        continue;
                *ret_size = n;
                return s;
        }
        return NULL;
}

void etcd_line_buffer_done(EtcdLineBuffer *b) {
        free(b->data);
        *b = (EtcdLineBuffer) {};
}
