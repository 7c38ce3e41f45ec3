/* SPDX-License-Identifier: MIT */
/*
 * server.json, read the way a Unity Multiplay server reads it: a flat object
 * of strings, parsed tolerantly, because the supervisor rewrites it in place
 * while the server runs.
 */

#include "test-server.h"

const char *const server_json_keys[_SJ_MAX] = {
        [SJ_SERVER_ID] = "serverID",
        [SJ_ALLOCATED_UUID] = "allocatedUUID",
        [SJ_MACHINE_ID] = "machineID",
        [SJ_FLEET_ID] = "fleetID",
        [SJ_IP] = "ip",
        [SJ_IPV6] = "ipv6",
        [SJ_PORT] = "port",
        [SJ_QUERY_PORT] = "queryPort",
        [SJ_QUERY_TYPE] = "queryType",
        [SJ_SERVER_LOG_DIR] = "serverLogDir",
};

struct json_cursor {
        const char *p;
        const char *end;
};

static void json_skip_space(struct json_cursor *c)
{
        while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
                c->p++;
}

static int json_hex4(struct json_cursor *c, uint32_t *ret)
{
        uint32_t v = 0;

        if (c->end - c->p < 4)
                return -EINVAL;
        for (int i = 0; i < 4; i++) {
                char ch = *c->p++;

                v <<= 4;
                if (ch >= '0' && ch <= '9')
                        v |= (uint32_t) (ch - '0');
                else if (ch >= 'a' && ch <= 'f')
                        v |= (uint32_t) (ch - 'a' + 10);
                else if (ch >= 'A' && ch <= 'F')
                        v |= (uint32_t) (ch - 'A' + 10);
                else
                        return -EINVAL;
        }
        *ret = v;
        return 0;
}

static size_t utf8_encode(uint32_t cp, char out[static 4])
{
        if (cp < 0x80) {
                out[0] = (char) cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char) (0xc0 | (cp >> 6));
                out[1] = (char) (0x80 | (cp & 0x3f));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char) (0xe0 | (cp >> 12));
                out[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
                out[2] = (char) (0x80 | (cp & 0x3f));
                return 3;
        }
        out[0] = (char) (0xf0 | (cp >> 18));
        out[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
        out[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
        out[3] = (char) (0x80 | (cp & 0x3f));
        return 4;
}

static int json_unicode_escape(struct json_cursor *c, char out[static 4], size_t *ret_len)
{
        uint32_t cp, low;
        int r;

        r = json_hex4(c, &cp);
        if (r < 0)
                return r;
        if (cp >= 0xd800 && cp <= 0xdbff && c->end - c->p >= 6 && c->p[0] == '\\' &&
            c->p[1] == 'u') {
                struct json_cursor save = *c;

                c->p += 2;
                if (json_hex4(c, &low) == 0 && low >= 0xdc00 && low <= 0xdfff)
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                else
                        *c = save;
        }
        /* A lone surrogate or NUL cannot live in a C string. */
        if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff))
                cp = '?';
        *ret_len = utf8_encode(cp, out);
        return 0;
}

/* Reads the string at the cursor's opening quote; out may be NULL to skip it. */
static int json_string(struct json_cursor *c, char *out, size_t size)
{
        size_t n = 0;

        if (c->p >= c->end || *c->p != '"')
                return -EINVAL;
        c->p++;
        while (c->p < c->end) {
                char ch = *c->p++, piece[4];
                size_t len = 1;
                int r;

                if (ch == '"') {
                        if (out)
                                out[n] = '\0';
                        return 0;
                }
                piece[0] = ch;
                if (ch == '\\') {
                        if (c->p >= c->end)
                                return -EINVAL;
                        ch = *c->p++;
                        switch (ch) {
                        case '"':
                        case '\\':
                        case '/':
                                piece[0] = ch;
                                break;
                        case 'b':
                                piece[0] = '\b';
                                break;
                        case 'f':
                                piece[0] = '\f';
                                break;
                        case 'n':
                                piece[0] = '\n';
                                break;
                        case 'r':
                                piece[0] = '\r';
                                break;
                        case 't':
                                piece[0] = '\t';
                                break;
                        case 'u':
                                r = json_unicode_escape(c, piece, &len);
                                if (r < 0)
                                        return r;
                                break;
                        default:
                                return -EINVAL;
                        }
                }
                /* Truncate at a whole character, never inside one. */
                if (out && n + len < size) {
                        memcpy(out + n, piece, len);
                        n += len;
                }
        }
        return -EINVAL;
}

/* Numbers, true, false, null: kept as their text, since a tolerant reader takes port: 9000 too. */
static int json_scalar(struct json_cursor *c, char *out, size_t size)
{
        const char *start = c->p;
        size_t n;

        while (c->p < c->end && (isalnum((unsigned char) *c->p) || strchr("+-.", *c->p)))
                c->p++;
        if (c->p == start)
                return -EINVAL;
        n = (size_t) (c->p - start);
        if (n == 4 && memcmp(start, "null", 4) == 0)
                n = 0;
        if (out) {
                if (n >= size)
                        n = size - 1;
                memcpy(out, start, n);
                out[n] = '\0';
        }
        return 0;
}

static int json_skip_value(struct json_cursor *c, unsigned depth)
{
        char close;
        int r;

        if (depth > 32)
                return -EINVAL;
        json_skip_space(c);
        if (c->p >= c->end)
                return -EINVAL;
        if (*c->p == '"')
                return json_string(c, NULL, 0);
        if (*c->p != '{' && *c->p != '[')
                return json_scalar(c, NULL, 0);
        close = *c->p == '{' ? '}' : ']';
        c->p++;
        json_skip_space(c);
        if (c->p < c->end && *c->p == close) {
                c->p++;
                return 0;
        }
        for (;;) {
                if (close == '}') {
                        json_skip_space(c);
                        r = json_string(c, NULL, 0);
                        if (r < 0)
                                return r;
                        json_skip_space(c);
                        if (c->p >= c->end || *c->p != ':')
                                return -EINVAL;
                        c->p++;
                }
                r = json_skip_value(c, depth + 1);
                if (r < 0)
                        return r;
                json_skip_space(c);
                if (c->p >= c->end)
                        return -EINVAL;
                if (*c->p == close) {
                        c->p++;
                        return 0;
                }
                if (*c->p != ',')
                        return -EINVAL;
                c->p++;
        }
}

static int json_key_index(const char *key)
{
        for (int i = 0; i < _SJ_MAX; i++)
                if (strcmp(key, server_json_keys[i]) == 0)
                        return i;
        return -1;
}

/*
 * The supervisor rewrites server.json in place (O_TRUNC, then write), so a
 * reader can see it empty or cut short; anything without the closing brace
 * is refused and the previous values kept.
 */
static int server_json_parse(const char *buf, size_t len, struct server_json *ret)
{
        struct server_json j = {};
        struct json_cursor c = { buf, buf + len };
        int r;

        if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
                c.p += 3;
        json_skip_space(&c);
        if (c.p >= c.end || *c.p != '{')
                return -EINVAL;
        c.p++;
        json_skip_space(&c);
        if (c.p < c.end && *c.p == '}') {
                *ret = j;
                return 0;
        }
        for (;;) {
                char key[64];
                int idx;

                json_skip_space(&c);
                r = json_string(&c, key, sizeof(key));
                if (r < 0)
                        return r;
                json_skip_space(&c);
                if (c.p >= c.end || *c.p != ':')
                        return -EINVAL;
                c.p++;
                json_skip_space(&c);
                if (c.p >= c.end)
                        return -EINVAL;
                idx = json_key_index(key);
                if (idx >= 0 && *c.p == '"')
                        r = json_string(&c, j.value[idx], VALUE_MAX);
                else if (idx >= 0 && *c.p != '{' && *c.p != '[')
                        r = json_scalar(&c, j.value[idx], VALUE_MAX);
                else
                        r = json_skip_value(&c, 0);
                if (r < 0)
                        return r;
                if (idx >= 0)
                        j.present[idx] = true;
                json_skip_space(&c);
                if (c.p >= c.end)
                        return -EINVAL;
                if (*c.p == '}')
                        break;
                if (*c.p != ',')
                        return -EINVAL;
                c.p++;
        }
        *ret = j;
        return 0;
}

/* ---- reading it ---- */

static bool server_json_equal(const struct server_json *a, const struct server_json *b)
{
        for (int i = 0; i < _SJ_MAX; i++)
                if (a->present[i] != b->present[i] || strcmp(a->value[i], b->value[i]) != 0)
                        return false;
        return true;
}

void json_check(struct server *s, enum json_read how)
{
        struct file_stamp stamp;
        struct server_json j;
        char old_uuid[VALUE_MAX];
        size_t len;
        char *buf;
        bool force, report;
        int r;

        file_stamp_get(s->json_path, &stamp);
        if (how == JSON_IF_STAMP_CHANGED && file_stamp_equal(&stamp, &s->json_stamp))
                return;
        force = how == JSON_ALWAYS;
        r = read_file(s->json_path, JSON_MAX_BYTES, &buf, &len);
        if (r < 0) {
                if (force || !file_stamp_equal(&stamp, &s->json_bad_stamp))
                        log_line("cannot read %s: %s", s->json_path, strerror(-r));
                s->json_bad_stamp = stamp;
                return;
        }
        /* An SDK server keeps its configuration when it cannot decode the new one. */
        report = force || !file_stamp_equal(&stamp, &s->json_bad_stamp);
        if (s->sdk.enabled && !sdk_config_reread(s, buf, len, report)) {
                free(buf);
                s->json_bad_stamp = stamp;
                return;
        }
        r = server_json_parse(buf, len, &j);
        free(buf);
        if (r < 0) {
                /* Empty means a rewrite is under way; only a complete bad file is worth a line. */
                if (len > 0 && (force || !file_stamp_equal(&stamp, &s->json_bad_stamp)))
                        log_line("%s is not a JSON object, keeping the previous values",
                                 s->json_path);
                s->json_bad_stamp = stamp;
                return;
        }

        s->json_stamp = stamp;
        if (!force && s->json_valid && server_json_equal(&j, &s->json))
                return;
        copy_string(old_uuid, sizeof(old_uuid), s->allocated_uuid);
        s->json = j;
        s->json_valid = true;
        s->json_seq++;
        copy_string(s->allocated_uuid, sizeof(s->allocated_uuid), j.value[SJ_ALLOCATED_UUID]);
        if (s->json_seq > 1 && strcmp(old_uuid, s->allocated_uuid) != 0)
                log_line("allocatedUUID changed: \"%s\" -> \"%s\"", old_uuid, s->allocated_uuid);
        s->state_dirty = true;
}
