/* SPDX-License-Identifier: MIT */
/* The local proxy's request side (localproxy/request.c). The input is "METHOD PATH\n" then a
 * body: the route parser gets the first line, every body parser the rest, the duration and
 * channel parsers the body as a string, and the reply shapers the body as slotd's result.
 * Properties: what a parser accepts is within the bounds it promises, and an error writes
 * nothing. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <string.h>

#include "fuzz.h"
#include "request.h"

static char *copy_string(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        FUZZ_ASSERT(s);
        memcpy(s, data, size);
        s[size] = '\0';
        return s;
}

static bool id_clean(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > PROXY_ID_MAX)
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == n;
}

static void fuzz_route(const char *line) {
        const char *space = strchr(line, ' ');
        ProxyRoute r, sentinel;
        char method[16];
        int ret;

        if (!space || (size_t) (space - line) >= sizeof(method))
                return;
        memcpy(method, line, (size_t) (space - line));
        method[space - line] = '\0';
        memset(&r, 0x5a, sizeof(r));
        sentinel = r;
        ret = request_route(method, space + 1, &r);
        FUZZ_ASSERT(ret == 0 || ret == -ENOENT || ret == -EOPNOTSUPP || ret == -EINVAL);
        if (ret == -ENOENT || ret == -EINVAL) {
                FUZZ_ASSERT(memcmp(&r, &sentinel, sizeof(r)) == 0);
                return;
        }
        FUZZ_ASSERT(r.allow && r.allow[0] != '\0');
        if (ret < 0)
                return;
        FUZZ_ASSERT((unsigned) r.op < _PROXY_OP_MAX);
        FUZZ_ASSERT(r.server < UINT_MAX);
        FUZZ_ASSERT(strstr(r.allow, method));
        if (r.op == PROXY_OP_READY || r.op == PROXY_OP_PAYLOAD)
                FUZZ_ASSERT(id_clean(r.allocation));
        FUZZ_ASSERT(r.op == PROXY_OP_WEBSOCKET || proxy_op_to_string(r.op));
}

static void fuzz_bodies(const uint8_t *body, size_t size) {
        bool ready = false;
        usec_t t = 7;
        int ret;

        ret = request_parse_ready((const char *) body, size, &ready);
        FUZZ_ASSERT(ret == 0 || ret == -EBADMSG);
        ret = request_parse_hold((const char *) body, size, &t);
        FUZZ_ASSERT(ret == 0 || ret == -EBADMSG || ret == -ERANGE);
        FUZZ_ASSERT(ret == 0 ? t <= PROXY_DURATION_MAX_USEC : t == 7);
        ret = request_parse_reserve((const char *) body, size);
        FUZZ_ASSERT(ret == 0 || ret == -EBADMSG);
}

static void fuzz_strings(const char *s) {
        unsigned server = 77;
        usec_t t = 7;
        int ret;

        ret = request_parse_duration(s, &t);
        FUZZ_ASSERT(ret == 0 || ret == -EINVAL || ret == -ERANGE);
        FUZZ_ASSERT(ret == 0 ? t <= PROXY_DURATION_MAX_USEC : t == 7);
        ret = request_parse_channel(s, &server);
        FUZZ_ASSERT(ret == 0 || ret == -EINVAL);
        FUZZ_ASSERT(ret == 0 ? server < UINT_MAX && strncmp(s, "server#", 7) == 0
                             : server == 77);
        FUZZ_ASSERT(request_error_status(s) >= 400);
}

/* What slotd might send back, shaped for the SDKs: NULL or an object, never a crash. */
static void fuzz_shapers(const uint8_t *body, size_t size) {
        json_t *result = json_loadb((const char *) body, size, 0, NULL);
        json_t *(*const shapers[])(const json_t *) = {
                request_hold_body, request_reservation_body, request_token_body,
        };

        if (!result)
                return;
        for (size_t i = 0; i < sizeof(shapers) / sizeof(shapers[0]); i++) {
                json_t *out = shapers[i](result);

                FUZZ_ASSERT(!out || json_is_object(out));
                json_decref(out);
        }
        json_decref(result);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *nl = memchr(data, '\n', size);
        size_t line_size = nl ? (size_t) (nl - data) : size;
        const uint8_t *body = nl ? nl + 1 : data + size;
        size_t body_size = size - line_size - (nl ? 1 : 0);
        char *line, *text;

        if (size > 64 * 1024)
                return 0;
        line = copy_string(data, line_size);
        if (!memchr(line, '\0', line_size))
                fuzz_route(line);
        free(line);
        fuzz_bodies(body, body_size);
        text = copy_string(body, body_size);
        fuzz_strings(text);
        free(text);
        fuzz_shapers(body, body_size);
        return 0;
}
