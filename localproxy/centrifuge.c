/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <jansson.h>
#include <strings.h>

#include "centrifuge.h"
#include "macro.h"

#define CENTRIFUGE_SERVER_VERSION "slotd"
#define CENTRIFUGE_STRING_MAX 256   /* connect's name and version: only checked, never kept */

/* The method numbers of protocol v1 (client.proto, MethodType) and the request keys of v2
 * (Command's fields), in the same order: index i is the same request in both. */
static const struct {
        const char *v1_name;    /* what centrifuge's Go decoder accepts as a method string */
        const char *v2_key;
        CentrifugeMethod method;
} centrifuge_requests[] = {
        { "CONNECT",        "connect",        CENTRIFUGE_CONNECT },
        { "SUBSCRIBE",      "subscribe",      CENTRIFUGE_SUBSCRIBE },
        { "UNSUBSCRIBE",    "unsubscribe",    CENTRIFUGE_UNSUBSCRIBE },
        { "PUBLISH",        "publish",        CENTRIFUGE_UNSUPPORTED },
        { "PRESENCE",       "presence",       CENTRIFUGE_UNSUPPORTED },
        { "PRESENCE_STATS", "presence_stats", CENTRIFUGE_UNSUPPORTED },
        { "HISTORY",        "history",        CENTRIFUGE_UNSUPPORTED },
        { "PING",           "ping",           CENTRIFUGE_PING },
        { "SEND",           "send",           CENTRIFUGE_UNSUPPORTED },
        { "RPC",            "rpc",            CENTRIFUGE_UNSUPPORTED },
        { "REFRESH",        "refresh",        CENTRIFUGE_UNSUPPORTED },
        { "SUB_REFRESH",    "sub_refresh",    CENTRIFUGE_UNSUPPORTED },
};

/* jansson's own json_decrefp(), under the name of our other cleanup helpers. */
#define _cleanup_json_ _cleanup_(json_decrefp)

/* jansson's parser recurses once per nesting level and only stops at 2048. A command nests
 * three levels (four with connect's subs), and what the clients add as data little more, so
 * anything deeper than CENTRIFUGE_DEPTH_MAX is refused before jansson sees it. */
static bool depth_ok(const char *p, size_t n) {
        bool in_string = false, escaped = false;
        unsigned depth = 0;

        for (size_t i = 0; i < n; i++) {
                char c = p[i];

                if (in_string) {
                        if (escaped)
                                escaped = false;
                        else if (c == '\\')
                                escaped = true;
                        else if (c == '"')
                                in_string = false;
                } else if (c == '"')
                        in_string = true;
                else if (c == '{' || c == '[') {
                        if (++depth > CENTRIFUGE_DEPTH_MAX)
                                return false;
                } else if ((c == '}' || c == ']') && depth > 0)
                        depth--;
        }
        return true;
}

/* An optional unsigned integer field: absent leaves *ret alone; anything but an integer in
 * [0, max] is refused. jansson refuses integers beyond int64 while parsing. */
static int get_uint(json_t *o, const char *key, uint64_t max, uint64_t *ret) {
        json_t *v = json_object_get(o, key);
        json_int_t i;

        if (!v)
                return 0;
        if (!json_is_integer(v))
                return -EBADMSG;
        i = json_integer_value(v);
        if (i < 0 || (uint64_t) i > max)
                return -EBADMSG;
        *ret = (uint64_t) i;
        return 0;
}

static int get_bool(json_t *o, const char *key, bool *ret) {
        json_t *v = json_object_get(o, key);

        if (!v)
                return 0;
        if (!json_is_boolean(v))
                return -EBADMSG;
        *ret = json_is_true(v);
        return 0;
}

/* An optional string field of at most max bytes: *ret points into o (or stays NULL). */
static int get_string(json_t *o, const char *key, size_t max, const char **ret, size_t *ret_len) {
        json_t *v = json_object_get(o, key);

        if (!v)
                return 0;
        if (!json_is_string(v) || json_string_length(v) > max)
                return -EBADMSG;
        *ret = json_string_value(v);
        *ret_len = json_string_length(v);
        return 0;
}

/* A channel or an epoch: printable, since both end up in logs and in the proxy's lookups. */
static int copy_word(json_t *o, const char *key, size_t max, char *buf, bool required) {
        const char *s = NULL;
        size_t len = 0;
        int r;

        r = get_string(o, key, max, &s, &len);
        if (r < 0)
                return r;
        if (!s || len == 0)
                return required ? -EBADMSG : 0;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
                        return -EBADMSG;
        memcpy(buf, s, len);
        buf[len] = '\0';
        return 0;
}

static int parse_connect(json_t *params, CentrifugeCommand *c) {
        const char *token = NULL, *s = NULL;
        size_t len = 0;
        json_t *subs;

        if (!params)
                return 0;
        if (get_string(params, "token", CENTRIFUGE_TOKEN_MAX, &token, &len) < 0 ||
            get_string(params, "name", CENTRIFUGE_STRING_MAX, &s, &len) < 0 ||
            get_string(params, "version", CENTRIFUGE_STRING_MAX, &s, &len) < 0)
                return -EBADMSG;
        subs = json_object_get(params, "subs");
        if (subs && !json_is_object(subs))
                return -EBADMSG;
        c->has_token = token && token[0] != '\0';
        return 0;
}

static int parse_subscribe(json_t *params, CentrifugeVersion v, CentrifugeCommand *c) {
        const char *token = NULL;
        uint64_t offset = 0, seq = 0, gen = 0;
        size_t len = 0;
        bool recover = false;

        if (!params ||
            copy_word(params, "channel", CENTRIFUGE_CHANNEL_MAX, c->channel, true) < 0 ||
            get_string(params, "token", CENTRIFUGE_TOKEN_MAX, &token, &len) < 0 ||
            get_bool(params, "recover", &recover) < 0 ||
            copy_word(params, "epoch", CENTRIFUGE_EPOCH_MAX, c->epoch, false) < 0 ||
            get_uint(params, "offset", INT64_MAX, &offset) < 0)
                return -EBADMSG;
        /* centrifuge-js 2.x still sends the seq and gen of servers before offsets; the
         * centrifuge server took them over the offset, packed this way. */
        if (v == CENTRIFUGE_V1 &&
            (get_uint(params, "seq", UINT32_MAX, &seq) < 0 ||
             get_uint(params, "gen", UINT32_MAX, &gen) < 0))
                return -EBADMSG;
        if (seq > 0 || gen > 0)
                offset = gen * UINT32_MAX + seq;

        c->recover = recover;
        if (recover)
                c->offset = offset;
        else
                c->epoch[0] = '\0';
        return 0;
}

/* The request's own fields, once its method and params are known. */
static int parse_request(CentrifugeVersion v, json_t *params, CentrifugeCommand *c) {
        if (params && !json_is_object(params))
                return -EBADMSG;
        if (c->id == 0 && c->method != CENTRIFUGE_UNSUPPORTED)
                return -EBADMSG;        /* a reply could not find its command */

        switch (c->method) {
        case CENTRIFUGE_CONNECT:
                return parse_connect(params, c);
        case CENTRIFUGE_SUBSCRIBE:
                return parse_subscribe(params, v, c);
        case CENTRIFUGE_UNSUBSCRIBE:
                if (!params)
                        return -EBADMSG;
                return copy_word(params, "channel", CENTRIFUGE_CHANNEL_MAX, c->channel, true);
        default:
                return 0;
        }
}

static int parse_v1_method(json_t *m, CentrifugeMethod *ret) {
        if (!m) {
                *ret = CENTRIFUGE_CONNECT;      /* 0, left out by omitempty */
                return 0;
        }
        if (json_is_integer(m)) {
                json_int_t i = json_integer_value(m);

                if (i < 0 || i > UINT32_MAX)
                        return -EBADMSG;
                /* An unknown number is a method this server lacks, not a broken frame: the
                 * centrifuge server answers it with "method not found". */
                *ret = (size_t) i < ELEMENTSOF(centrifuge_requests) ?
                        centrifuge_requests[i].method : CENTRIFUGE_UNSUPPORTED;
                return 0;
        }
        if (json_is_string(m))
                for (size_t i = 0; i < ELEMENTSOF(centrifuge_requests); i++)
                        if (strcasecmp(json_string_value(m), centrifuge_requests[i].v1_name) == 0) {
                                *ret = centrifuge_requests[i].method;
                                return 0;
                        }
        return -EBADMSG;
}

static int parse_v1(json_t *o, CentrifugeCommand *c) {
        uint64_t id = 0;

        if (get_uint(o, "id", UINT32_MAX, &id) < 0 ||
            parse_v1_method(json_object_get(o, "method"), &c->method) < 0)
                return -EBADMSG;
        c->id = (uint32_t) id;
        return parse_request(CENTRIFUGE_V1, json_object_get(o, "params"), c);
}

/* Which v2 request o makes: 1 and its index in centrifuge_requests, 0 when it makes none,
 * -EBADMSG when it makes more than one (the Go server would take the first, in its order). */
static int find_v2_request(json_t *o, size_t *ret_index) {
        bool found = false;

        for (size_t i = 0; i < ELEMENTSOF(centrifuge_requests); i++) {
                if (!json_object_get(o, centrifuge_requests[i].v2_key))
                        continue;
                if (found)
                        return -EBADMSG;
                found = true;
                *ret_index = i;
        }
        return found;
}

static int parse_v2(json_t *o, CentrifugeCommand *c) {
        uint64_t id = 0;
        size_t index = 0;
        json_t *params;
        int r;

        if (json_object_size(o) == 0) {
                c->method = CENTRIFUGE_PONG;
                return 0;
        }
        if (get_uint(o, "id", UINT32_MAX, &id) < 0)
                return -EBADMSG;
        c->id = (uint32_t) id;

        r = find_v2_request(o, &index);
        if (r < 0)
                return r;
        if (r == 0) {
                /* A request of a newer protocol: answered "method not found". */
                c->method = CENTRIFUGE_UNSUPPORTED;
                return 0;
        }
        c->method = centrifuge_requests[index].method;
        params = json_object_get(o, centrifuge_requests[index].v2_key);
        if (!json_is_object(params))
                return -EBADMSG;
        return parse_request(CENTRIFUGE_V2, params, c);
}

/* Which version's shape o has: V1, V2, or UNKNOWN when it could be either. */
static int detect_shape(json_t *o, CentrifugeVersion *ret) {
        bool v1 = json_object_get(o, "method") || json_object_get(o, "params");
        size_t index;
        int r;

        r = find_v2_request(o, &index);
        if (r < 0 || (v1 && r > 0))
                return -EBADMSG;
        if (v1)
                *ret = CENTRIFUGE_V1;
        else if (r > 0 || json_object_size(o) == 0)
                *ret = CENTRIFUGE_V2;
        else
                *ret = CENTRIFUGE_UNKNOWN;
        return 0;
}

static int parse_command(const char *p, size_t n, CentrifugeVersion *version,
                         CentrifugeCommand *c) {
        _cleanup_json_ json_t *o = NULL;
        CentrifugeVersion shape;

        if (!depth_ok(p, n))
                return -EBADMSG;
        o = json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
        if (!o || !json_is_object(o))
                return -EBADMSG;
        if (detect_shape(o, &shape) < 0)
                return -EBADMSG;

        if (*version == CENTRIFUGE_UNKNOWN) {
                /* {} cannot open a connection: a pong answers a ping, which needs one. */
                if (json_object_size(o) == 0)
                        return -EBADMSG;
                *version = shape == CENTRIFUGE_UNKNOWN ? CENTRIFUGE_V1 : shape;
        } else if (shape != CENTRIFUGE_UNKNOWN && shape != *version)
                return -EBADMSG;

        *c = (CentrifugeCommand) {};
        return *version == CENTRIFUGE_V1 ? parse_v1(o, c) : parse_v2(o, c);
}

static bool is_blank(const char *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
                        return false;
        return true;
}

int centrifuge_parse(const char *buf, size_t len, CentrifugeVersion *version,
                     CentrifugeCommand *cmds, size_t max, size_t *ret_n) {
        CentrifugeCommand parsed[CENTRIFUGE_COMMANDS_MAX];
        CentrifugeVersion v = *version;
        size_t n = 0, limit = MIN(max, (size_t) CENTRIFUGE_COMMANDS_MAX);

        if (!buf || len > CENTRIFUGE_FRAME_MAX)
                return -EBADMSG;

        for (size_t start = 0; start < len;) {
                const char *nl = memchr(buf + start, '\n', len - start);
                size_t end = nl ? (size_t) (nl - buf) : len;

                if (!is_blank(buf + start, end - start)) {
                        if (n >= limit)
                                return -EBADMSG;
                        if (parse_command(buf + start, end - start, &v, &parsed[n]) < 0)
                                return -EBADMSG;
                        n++;
                }
                start = end + 1;
        }
        if (n == 0)
                return -EBADMSG;

        memcpy(cmds, parsed, n * sizeof(CentrifugeCommand));
        *version = v;
        *ret_n = n;
        return 0;
}

/* Encoding. Every builder takes ownership of the json_t it is given, NULL included, so that
 * a failed allocation anywhere ends in one NULL check at the end. */

static char *dump(json_t *o) {
        char *s;

        if (!o)
                return NULL;
        s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        return s;
}

static bool valid_version(CentrifugeVersion v) {
        return v == CENTRIFUGE_V1 || v == CENTRIFUGE_V2;
}

/* json_object_set_new() that leaves o NULL (and frees it) once anything failed. */
static json_t *set(json_t *o, const char *key, json_t *value) {
        if (!o || !value || json_object_set_new(o, key, value) < 0) {
                json_decref(value);
                json_decref(o);
                return NULL;
        }
        return o;
}

/* {"id":N,key:result}; id 0 is left out, and so is the result with a NULL key. */
static char *reply_text(uint32_t id, const char *key, json_t *result) {
        json_t *o = json_object();

        if (id > 0)
                o = set(o, "id", json_integer(id));
        if (key)
                o = set(o, key, result);
        else
                json_decref(result);
        return dump(o);
}

char *centrifuge_connect_reply(CentrifugeVersion v, uint32_t id, const char *client_id,
                               unsigned ping_interval_sec) {
        json_t *r;

        if (!valid_version(v) || !client_id)
                return NULL;
        r = set(json_object(), "client", json_string(client_id));
        r = set(r, "version", json_string(CENTRIFUGE_SERVER_VERSION));
        if (v == CENTRIFUGE_V2 && ping_interval_sec > 0) {
                r = set(r, "ping", json_integer(ping_interval_sec));
                r = set(r, "pong", json_true());
        }
        return reply_text(id, v == CENTRIFUGE_V1 ? "result" : "connect", r);
}

/* {"data":{…},"offset":N}: data_json is parsed, so that what goes out is one compact line. */
static json_t *publication_new(const CentrifugePublication *p) {
        json_t *data, *o;

        if (!p || !p->data_json || p->offset > INT64_MAX)
                return NULL;
        data = json_loads(p->data_json, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(data)) {
                json_decref(data);
                return NULL;
        }
        o = set(json_object(), "data", data);
        if (p->offset > 0)
                o = set(o, "offset", json_integer((json_int_t) p->offset));
        return o;
}

static json_t *publications_new(const CentrifugePublication *p, size_t n) {
        json_t *a = json_array();

        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, publication_new(&p[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

char *centrifuge_subscribe_reply(CentrifugeVersion v, uint32_t id,
                                 const CentrifugeSubscribeResult *r) {
        json_t *o;

        if (!valid_version(v) || !r || (r->n_publications > 0 && !r->publications) ||
            r->offset > INT64_MAX)
                return NULL;
        o = json_object();
        if (r->recoverable)
                o = set(o, "recoverable", json_true());
        if (r->epoch && r->epoch[0] != '\0')
                o = set(o, "epoch", json_string(r->epoch));
        if (r->n_publications > 0)
                o = set(o, "publications", publications_new(r->publications, r->n_publications));
        if (r->recovered)
                o = set(o, "recovered", json_true());
        if (r->offset > 0)
                o = set(o, "offset", json_integer((json_int_t) r->offset));
        if (v == CENTRIFUGE_V2 && r->recoverable)
                o = set(o, "positioned", json_true());
        if (v == CENTRIFUGE_V2 && r->was_recovering)
                o = set(o, "was_recovering", json_true());
        return reply_text(id, v == CENTRIFUGE_V1 ? "result" : "subscribe", o);
}

char *centrifuge_empty_reply(CentrifugeVersion v, uint32_t id, CentrifugeMethod method) {
        if (!valid_version(v))
                return NULL;
        if (method == CENTRIFUGE_UNSUBSCRIBE)
                return reply_text(id, v == CENTRIFUGE_V1 ? "result" : "unsubscribe",
                                  json_object());
        if (method == CENTRIFUGE_PING)
                /* The centrifuge server's v1 ping reply had no result at all. */
                return v == CENTRIFUGE_V1 ? reply_text(id, NULL, NULL) :
                                            reply_text(id, "ping", json_object());
        return NULL;
}

static char *error_reply(CentrifugeVersion v, uint32_t id, unsigned code, const char *message,
                         bool temporary) {
        json_t *e;

        if (!valid_version(v) || !message)
                return NULL;
        e = set(json_object(), "code", json_integer(code));
        e = set(e, "message", json_string(message));
        if (temporary)
                e = set(e, "temporary", json_true());
        return reply_text(id, "error", e);
}

char *centrifuge_error_reply(CentrifugeVersion v, uint32_t id, unsigned code,
                             const char *message) {
        return error_reply(v, id, code, message, false);
}

char *centrifuge_temporary_error_reply(CentrifugeVersion v, uint32_t id, unsigned code,
                                       const char *message) {
        return error_reply(v, id, code, message, true);
}

char *centrifuge_publication_push(CentrifugeVersion v, const char *channel,
                                  const CentrifugePublication *p) {
        json_t *push;

        if (!valid_version(v) || !channel)
                return NULL;
        push = set(json_object(), "channel", json_string(channel));
        push = set(push, v == CENTRIFUGE_V1 ? "data" : "pub", publication_new(p));
        return reply_text(0, v == CENTRIFUGE_V1 ? "result" : "push", push);
}

char *centrifuge_server_ping(CentrifugeVersion v) {
        if (v != CENTRIFUGE_V2)
                return NULL;
        return strdup("{}");
}
