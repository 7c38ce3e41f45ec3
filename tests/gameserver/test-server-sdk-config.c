/* SPDX-License-Identifier: MIT */
/*
 * server.json as Unity's Go SDK v0.5.4 decodes it: newConfigFromFile() in
 * game-server-hosting/server/config.go decodes the file twice with encoding/json, once into
 * its Config struct and once whole into map[string]string (the build configuration's
 * variables, Config.Extra).  What Go lets through is what passes here:
 *
 * - machineID, port, queryPort and serverID are json.Number: a number, or a string holding
 *   a valid number literal ("12", "-1.5e3").  Any other string stops the decoding at once
 *   ("invalid number literal"); a bool, object or array fails it at its end.
 * - the other fields (Config's string fields; queryType is a server.QueryProtocol) take a
 *   string; anything else fails the decoding at its end.
 * - keys find their field without regard to case ("SERVERID" sets serverID); null leaves a
 *   field as it was.
 * - the second pass wants every value of the object a string or null, so a number anywhere
 *   fails it: the SDK refuses "port": 9000 although its first pass took it.
 * - only the first JSON value is read, so whatever follows it is never looked at (a file
 *   being rewritten in place may end in the old content's tail).
 *
 * The messages are Go's, with the key at fault in front.  Checked against the SDK itself
 * (unity-sgs, built from v0.5.4) in tests/gameserver/test-double.sh.  Pure: no I/O, no
 * logging.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "test-server-sdk-config.h"

struct go_field {
        const char *name;               /* the json tag */
        const char *go_type;            /* as Go's UnmarshalTypeError names it */
        bool number;                    /* json.Number */
};

/* The Config struct of v0.5.4, as its binary names the fields in its errors. */
static const struct go_field config_fields[] = {
        { "allocatedUUID", "string", false },
        { "fleetID", "string", false },
        { "ip", "string", false },
        { "ipv6", "string", false },
        { "localProxyUrl", "string", false },
        { "machineID", "json.Number", true },
        { "port", "json.Number", true },
        { "queryPort", "json.Number", true },
        { "queryType", "server.QueryProtocol", false },
        { "regionID", "string", false },
        { "regionName", "string", false },
        { "serverID", "json.Number", true },
        { "serverLogDir", "string", false },
};

static const struct go_field *field_find(const char *key)
{
        for (size_t i = 0; i < sizeof(config_fields) / sizeof(config_fields[0]); i++)
                if (strcasecmp(key, config_fields[i].name) == 0)
                        return &config_fields[i];
        return NULL;
}

/* How Go's errors name a JSON value's kind. */
static const char *go_kind(json_t *v)
{
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return "object";
        case JSON_ARRAY:
                return "array";
        case JSON_STRING:
                return "string";
        case JSON_INTEGER:
        case JSON_REAL:
                return "number";
        case JSON_TRUE:
        case JSON_FALSE:
                return "bool";
        default:
                return "null";
        }
}

static size_t digits(const char *s, size_t len, size_t i)
{
        size_t start = i;

        while (i < len && s[i] >= '0' && s[i] <= '9')
                i++;
        return i - start;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, nothing else. */
bool sdk_config_number_valid(const char *s, size_t len)
{
        size_t i = 0, n;

        if (i < len && s[i] == '-')
                i++;
        if (i >= len)
                return false;
        if (s[i] == '0')
                i++;
        else if ((n = digits(s, len, i)) > 0)
                i += n;
        else
                return false;
        if (i < len && s[i] == '.') {
                n = digits(s, len, ++i);
                if (n == 0)
                        return false;
                i += n;
        }
        if (i < len && (s[i] == 'e' || s[i] == 'E')) {
                i++;
                if (i < len && (s[i] == '+' || s[i] == '-'))
                        i++;
                n = digits(s, len, i);
                if (n == 0)
                        return false;
                i += n;
        }
        return i == len;
}

/* Go's %q of the string's JSON literal, which its message quotes ("\"abc\""). */
static void go_quote_literal(json_t *v, char *out, size_t size)
{
        char *literal = json_dumps(v, JSON_ENCODE_ANY);
        size_t n = 0;

        if (size < 3 || !literal) {
                snprintf(out, size, "\"\"");
                free(literal);
                return;
        }
        out[n++] = '"';
        for (const char *p = literal; *p && n + 5 < size; p++) {
                if (*p == '"' || *p == '\\')
                        out[n++] = '\\';
                out[n++] = *p;
        }
        out[n++] = '"';
        out[n] = '\0';
        free(literal);
}

static bool only_space(const char *buf, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (!strchr(" \t\r\n", buf[i]) || buf[i] == '\0')
                        return false;
        return true;
}

/* The first pass: the Config struct.  A bad number literal ends it at once; a value of
 * the wrong kind is remembered and reported at its end, as Go's decoder does. */
static int config_pass(json_t *doc, char *error, size_t size)
{
        char quoted[512];
        bool saved = false;
        const char *key;
        json_t *v;

        json_object_foreach(doc, key, v) {
                const struct go_field *f = field_find(key);

                if (!f || json_is_null(v))
                        continue;
                if (f->number && json_is_string(v)) {
                        if (sdk_config_number_valid(json_string_value(v), json_string_length(v)))
                                continue;
                        go_quote_literal(v, quoted, sizeof(quoted));
                        snprintf(error, size, "%s: error decoding json: json: invalid number "
                                 "literal, trying to unmarshal %s into Number", key, quoted);
                        return -EINVAL;
                }
                if (f->number ? json_is_number(v) : json_is_string(v))
                        continue;
                if (!saved)
                        snprintf(error, size, "%s: error decoding json: json: cannot unmarshal "
                                 "%s into Go struct field Config.%s of type %s", key, go_kind(v),
                                 f->name, f->go_type);
                saved = true;
        }
        return saved ? -EINVAL : 0;
}

/* The second pass: the whole object into map[string]string. */
static int extra_pass(json_t *doc, char *error, size_t size)
{
        const char *key;
        json_t *v;

        json_object_foreach(doc, key, v) {
                if (json_is_string(v) || json_is_null(v))
                        continue;
                snprintf(error, size, "%s: error decoding json: json: cannot unmarshal %s into "
                         "Go value of type string", key, go_kind(v));
                return -EINVAL;
        }
        return 0;
}

int sdk_config_decode(const char *buf, size_t len, json_t **ret_doc, char *error, size_t size)
{
        json_error_t jerr;
        json_t *doc;
        int r;

        if (only_space(buf, len)) {
                snprintf(error, size, "error decoding json: EOF");
                return -ENODATA;
        }
        doc = json_loadb(buf, len, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL |
                         JSON_DECODE_INT_AS_REAL, &jerr);
        if (!doc) {
                if (json_error_code(&jerr) == json_error_premature_end_of_input)
                        snprintf(error, size, "error decoding json: unexpected EOF");
                else
                        snprintf(error, size, "error decoding json: not JSON at byte %d: %s",
                                 jerr.position, jerr.text);
                return -EINVAL;
        }
        if (json_is_null(doc)) {
                /* Config is decoded through a nil *Config, which null leaves nil. */
                snprintf(error, size, "panic: runtime error: invalid memory address or nil "
                         "pointer dereference");
                json_decref(doc);
                return -EFAULT;
        }
        if (!json_is_object(doc)) {
                snprintf(error, size, "error decoding json: json: cannot unmarshal %s into Go "
                         "value of type server.Config", go_kind(doc));
                json_decref(doc);
                return -EINVAL;
        }
        r = config_pass(doc, error, size);
        if (r == 0)
                r = extra_pass(doc, error, size);
        if (r < 0) {
                json_decref(doc);
                return r;
        }
        *ret_doc = doc;
        return 0;
}

const char *sdk_config_field(json_t *doc, const char *field)
{
        const char *key, *value = NULL;
        json_t *v;

        json_object_foreach(doc, key, v)
                if (json_is_string(v) && strcasecmp(key, field) == 0)
                        value = json_string_value(v);
        return value;
}

int sdk_config_server_id(const char *text, int64_t *ret, char *error, size_t size)
{
        const char *p = text;
        bool negative = false;
        uint64_t v = 0, limit;

        if (*p == '+' || *p == '-')
                negative = *p++ == '-';
        limit = negative ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX;
        if (*p == '\0')
                goto syntax;
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        goto syntax;
                if (v > (limit - (uint64_t) (*p - '0')) / 10) {
                        snprintf(error, size, "error parsing server ID: strconv.ParseInt: "
                                 "parsing \"%s\": value out of range", text);
                        return -ERANGE;
                }
                v = v * 10 + (uint64_t) (*p - '0');
        }
        *ret = negative ? (int64_t) (0 - v) : (int64_t) v;
        return 0;
syntax:
        snprintf(error, size, "error parsing server ID: strconv.ParseInt: parsing \"%s\": "
                 "invalid syntax", text);
        return -EINVAL;
}

int sdk_config_query_type(const char *text, enum sdk_query_type *ret)
{
        if (!text || *text == '\0' || strcmp(text, "sqp") == 0)
                *ret = SDK_QUERY_SQP;
        else if (strcmp(text, "a2s") == 0)
                *ret = SDK_QUERY_A2S;
        else
                return -EINVAL;
        return 0;
}
