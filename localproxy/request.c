/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "macro.h"
#include "request.h"

#define SEGMENTS_MAX 6
#define SERVER_ID_DIGITS_MAX 10

typedef struct Segments {
        const char *s[SEGMENTS_MAX];
        size_t len[SEGMENTS_MAX];
        size_t n;
} Segments;

typedef struct RouteMethod {
        const char *method;
        ProxyOp op;
} RouteMethod;

static const char *const op_names[_PROXY_OP_MAX] = {
        [PROXY_OP_READY] = "ready",
        [PROXY_OP_HOLD] = "hold",
        [PROXY_OP_HOLD_STATUS] = "hold_status",
        [PROXY_OP_RELEASE_HOLD] = "release_hold",
        [PROXY_OP_RESERVE] = "reserve",
        [PROXY_OP_UNRESERVE] = "unreserve",
        [PROXY_OP_PAYLOAD] = "payload",
        [PROXY_OP_TOKEN] = "token",
};

const char *proxy_op_to_string(ProxyOp op) {
        if ((unsigned) op >= _PROXY_OP_MAX)
                return NULL;
        return op_names[op];
}

/* Empty segments ("//", a trailing "/") match no route: the SDKs never send them. */
static int split_path(const char *path, Segments *ret) {
        Segments g = {};

        if (path[0] != '/')
                return -ENOENT;
        for (const char *p = path + 1;;) {
                const char *e = strchrnul(p, '/');

                if (e == p || g.n == SEGMENTS_MAX)
                        return -ENOENT;
                g.s[g.n] = p;
                g.len[g.n++] = (size_t) (e - p);
                if (*e == '\0')
                        break;
                p = e + 1;
        }
        *ret = g;
        return 0;
}

static bool segment_is(const Segments *g, size_t i, const char *word) {
        return i < g->n && g->len[i] == strlen(word) && memcmp(g->s[i], word, g->len[i]) == 0;
}

/* Decimal without sign or leading zeros; UINT_MAX is slotd's "no slot" and never a server. */
static int parse_server_id(const char *s, size_t len, unsigned *ret) {
        unsigned long long v = 0;

        if (len == 0 || len > SERVER_ID_DIGITS_MAX || (s[0] == '0' && len > 1))
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned long long) (s[i] - '0');
        }
        if (v >= UINT_MAX)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

static bool id_char_ok(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == ':' || c == '-';
}

static int parse_id(const char *s, size_t len, char ret[static PROXY_ID_MAX + 1]) {
        if (len == 0 || len > PROXY_ID_MAX)
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                if (!id_char_ok(s[i]))
                        return -EINVAL;
        memcpy(ret, s, len);
        ret[len] = '\0';
        return 0;
}

static int match_method(const char *method, const RouteMethod *m, size_t n, const char *allow,
                        ProxyRoute *route) {
        route->allow = allow;
        for (size_t i = 0; i < n; i++)
                if (streq(method, m[i].method)) {
                        route->op = m[i].op;
                        return 0;
                }
        return -EOPNOTSUPP;
}

/* /v1/servers/<id>/… */
static int route_server(const char *method, const Segments *g, ProxyRoute *route) {
        static const RouteMethod ready[] = { { "PATCH", PROXY_OP_READY } };
        static const RouteMethod hold[] = {
                { "POST", PROXY_OP_HOLD },
                { "GET", PROXY_OP_HOLD_STATUS },
                { "DELETE", PROXY_OP_RELEASE_HOLD },
        };
        static const RouteMethod reservations[] = {
                { "POST", PROXY_OP_RESERVE },
                { "DELETE", PROXY_OP_UNRESERVE },
        };
        static const RouteMethod reservation[] = { { "DELETE", PROXY_OP_UNRESERVE } };
        char id[PROXY_ID_MAX + 1];
        int r;

        if (g->n < 4)
                return -ENOENT;
        if (g->n == 5 && segment_is(g, 3, "allocations")) {
                r = parse_id(g->s[4], g->len[4], route->allocation);
                if (r < 0)
                        return r;
                r = match_method(method, ready, ELEMENTSOF(ready), "PATCH", route);
        } else if (g->n == 4 && segment_is(g, 3, "hold"))
                r = match_method(method, hold, ELEMENTSOF(hold), "GET, POST, DELETE", route);
        else if (g->n == 4 && segment_is(g, 3, "reservations"))
                r = match_method(method, reservations, ELEMENTSOF(reservations), "POST, DELETE",
                                 route);
        else if (g->n == 5 && segment_is(g, 3, "reservations")) {
                /* slotd knows a slot's one reservation; the ID in the path is only checked. */
                r = parse_id(g->s[4], g->len[4], id);
                if (r < 0)
                        return r;
                r = match_method(method, reservation, ELEMENTSOF(reservation), "DELETE", route);
        } else
                return -ENOENT;
        if (parse_server_id(g->s[2], g->len[2], &route->server) < 0)
                return -EINVAL;
        return r;
}

int request_route(const char *method, const char *path, ProxyRoute *ret) {
        static const RouteMethod get_payload[] = { { "GET", PROXY_OP_PAYLOAD } };
        static const RouteMethod get_token[] = { { "GET", PROXY_OP_TOKEN } };
        static const RouteMethod get_ws[] = { { "GET", PROXY_OP_WEBSOCKET } };
        ProxyRoute route = {};
        Segments g;
        int r;

        r = split_path(path, &g);
        if (r < 0)
                return r;
        if (segment_is(&g, 0, "v1") && segment_is(&g, 1, "servers"))
                r = route_server(method, &g, &route);
        else if (g.n == 3 && segment_is(&g, 0, "v1") && segment_is(&g, 1, "connection") &&
                 segment_is(&g, 2, "websocket"))
                r = match_method(method, get_ws, 1, "GET", &route);
        else if (g.n == 2 && segment_is(&g, 0, "payload")) {
                r = parse_id(g.s[1], g.len[1], route.allocation);
                if (r >= 0)
                        r = match_method(method, get_payload, 1, "GET", &route);
        } else if (g.n == 1 && segment_is(&g, 0, "token"))
                r = match_method(method, get_token, 1, "GET", &route);
        else
                return -ENOENT;
        if (r < 0 && r != -EOPNOTSUPP)
                return r;
        *ret = route;
        return r;
}

static json_t *load_object(const char *body, size_t size) {
        json_error_t error;
        json_t *j;

        j = json_loadb(body, size, JSON_REJECT_DUPLICATES, &error);
        if (j && !json_is_object(j))
                j = (json_decref(j), NULL);
        return j;
}

int request_parse_ready(const char *body, size_t size, bool *ret) {
        json_t *j, *ready;
        int r = -EBADMSG;

        j = load_object(body, size);
        if (!j)
                return -EBADMSG;
        ready = json_object_get(j, "ready");
        if (json_is_boolean(ready)) {
                *ret = json_is_true(ready);
                r = 0;
        }
        json_decref(j);
        return r;
}

int request_parse_hold(const char *body, size_t size, usec_t *ret) {
        json_t *j, *timeout;
        int r = -EBADMSG;

        j = load_object(body, size);
        if (!j)
                return -EBADMSG;
        timeout = json_object_get(j, "timeout");
        if (json_is_string(timeout)) {
                r = request_parse_duration(json_string_value(timeout), ret);
                if (r == -EINVAL)
                        r = -EBADMSG;
        }
        json_decref(j);
        return r;
}

int request_parse_reserve(const char *body, size_t size) {
        json_t *j;

        if (size == 0)
                return 0;
        j = load_object(body, size);
        if (!j)
                return -EBADMSG;
        json_decref(j);
        return 0;
}

static usec_t unit_usec(char c) {
        switch (c) {
        case 's':
                return USEC_PER_SEC;
        case 'm':
                return USEC_PER_MINUTE;
        case 'h':
                return USEC_PER_HOUR;
        default:
                return 0;
        }
}

int request_parse_duration(const char *s, usec_t *ret) {
        usec_t total = 0;

        if (streq(s, "0")) {
                *ret = 0;
                return 0;
        }
        if (*s == '\0')
                return -EINVAL;
        while (*s != '\0') {
                uint64_t n = 0;
                size_t digits = 0;
                usec_t unit;

                for (; *s >= '0' && *s <= '9'; s++, digits++) {
                        /* Past 12 digits every unit is beyond the bound; stop before overflow. */
                        if (digits == 12)
                                return -ERANGE;
                        n = n * 10 + (uint64_t) (*s - '0');
                }
                unit = unit_usec(*s);
                if (digits == 0 || unit == 0)
                        return -EINVAL;
                s++;
                if (n > PROXY_DURATION_MAX_USEC / unit ||
                    total + n * unit > PROXY_DURATION_MAX_USEC)
                        return -ERANGE;
                total += n * unit;
        }
        *ret = total;
        return 0;
}

int request_parse_channel(const char *channel, unsigned *ret_server) {
        static const char prefix[] = "server#";

        if (strncmp(channel, prefix, strlen(prefix)) != 0)
                return -EINVAL;
        channel += strlen(prefix);
        return parse_server_id(channel, strlen(channel), ret_server);
}

unsigned request_error_status(const char *code) {
        static const struct {
                const char *code;
                unsigned status;
        } map[] = {
                { "access-denied", 403 },      { "no-such-slot", 404 },
                { "no-such-allocation", 404 }, { "invalid-state", 409 },
                { "invalid-argument", 400 },   { "no-capacity", 409 },
                { "draining", 409 },           { "unavailable", 503 },
                { "failed", 500 },             { "state-unwritable", 503 },
        };

        for (size_t i = 0; code && i < ELEMENTSOF(map); i++)
                if (streq(code, map[i].code))
                        return map[i].status;
        return 500;
}

json_t *request_hold_body(const json_t *result) {
        json_t *held = json_object_get(result, "held"),
               *expires = json_object_get(result, "expires_at");

        if (!json_is_boolean(held) || !json_is_integer(expires))
                return NULL;
        return json_pack("{s:I,s:b}", "expiresAt", json_integer_value(expires), "held",
                         json_is_true(held));
}

/* Multiplay's build configuration IDs are numbers, and Unity's SDKs decode this field as an
 * int64 only: a string would fail the whole reply. slotd's IDs are any ID: the number when
 * the ID is one that JSON readers take exactly (at most 15 digits: within a double's
 * precision), otherwise 0, what an SDK reads for "none" (the ID itself is in server.json). */
static json_t *build_configuration_json(const char *id) {
        size_t n = strlen(id);

        if (n == 0 || n > 15 || strspn(id, "0123456789") != n || (id[0] == '0' && n > 1))
                return json_integer(0);
        return json_integer((json_int_t) strtoll(id, NULL, 10));
}

json_t *request_reservation_body(const json_t *result) {
        static const char *const strings[] = { "reservation_id", "build_configuration_id",
                                               "ipv4", "ipv6", "requested", "created",
                                               "fulfilled" };
        json_t *port = json_object_get(result, "game_port");

        for (size_t i = 0; i < ELEMENTSOF(strings); i++)
                if (!json_is_string(json_object_get(result, strings[i])))
                        return NULL;
        if (!json_is_integer(port))
                return NULL;
#define S(k) json_string_value(json_object_get(result, k))
        return json_pack("{s:s,s:o,s:I,s:s,s:s,s:s,s:s,s:s}",
                         "reservationId", S("reservation_id"),
                         "buildConfigurationId",
                         build_configuration_json(S("build_configuration_id")),
                         "gamePort", json_integer_value(port),
                         "ipv4", S("ipv4"), "ipv6", S("ipv6"),
                         "requested", S("requested"), "created", S("created"),
                         "fulfilled", S("fulfilled"));
#undef S
}

json_t *request_token_body(const json_t *result) {
        json_t *token = json_object_get(result, "token");

        if (!json_is_string(token))
                return NULL;
        return json_pack("{s:O,s:s}", "token", token, "error", "");
}

bool token_bucket_take(TokenBucket *b, unsigned rate, unsigned burst, usec_t now) {
        uint64_t cap = (uint64_t) burst * 1000000;

        /* Microtokens: 'rate' tokens a second is 'rate' microtokens a microsecond, so refills
         * are exact however often callers come. */
        if (!b->started) {
                *b = (TokenBucket){ .microtokens = cap, .last = now, .started = true };
        } else if (now > b->last) {
                usec_t elapsed = now - b->last;

                if (rate == 0 || elapsed >= cap / rate)
                        b->microtokens = rate == 0 ? b->microtokens : cap;
                else
                        b->microtokens = MIN(cap, b->microtokens + elapsed * rate);
                b->last = now;
        }
        if (b->microtokens < 1000000)
                return false;
        b->microtokens -= 1000000;
        return true;
}
