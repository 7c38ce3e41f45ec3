/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "allocator-request.h"
#include "macro.h"

#define SEGMENTS_MAX 12

static const char *const op_names[_API_OP_MAX] = {
        [API_ALLOCATE] = "allocate", [API_LIST] = "list",         [API_GET] = "get",
        [API_DELETE] = "delete",     [API_CAPACITY] = "capacity", [API_METRICS] = "metrics",
        [API_STATUS] = "status",
};

const char *api_op_to_string(ApiOp op) {
        return op >= 0 && op < _API_OP_MAX ? op_names[op] : NULL;
}

bool api_is_uuid(const char *s) {
        static const unsigned groups[] = { 8, 4, 4, 4, 12 };

        for (size_t g = 0; g < ELEMENTSOF(groups); g++) {
                for (unsigned i = 0; i < groups[g]; i++, s++)
                        if (!isxdigit((unsigned char) *s))
                                return false;
                if (*s != (g + 1 < ELEMENTSOF(groups) ? '-' : '\0'))
                        return false;
                s++;
        }
        return true;
}

/* Splits path ("/a/b/c") into at most SEGMENTS_MAX segments of buf; -ENOENT for anything
 * else (no leading slash, an empty segment, too many). */
static int split_path(const char *path, char *buf, size_t size, char **seg, size_t *ret_n) {
        size_t n = 0, len = strlen(path);
        char *p;

        if (path[0] != '/' || len >= size)
                return -ENOENT;
        memcpy(buf, path + 1, len);
        for (p = buf; n < SEGMENTS_MAX;) {
                char *slash = strchr(p, '/');

                if (*p == '\0' || p == slash)
                        return -ENOENT;
                seg[n++] = p;
                if (!slash) {
                        *ret_n = n;
                        return 0;
                }
                *slash = '\0';
                p = slash + 1;
        }
        return -ENOENT;
}

static int copy_id(char dst[static API_ID_MAX + 1], const char *s, const char *what,
                   const char **ret_error) {
        if (!fleet_key_component_valid(s) || strlen(s) > API_ID_MAX) {
                *ret_error = what;
                return -EINVAL;
        }
        strcpy(dst, s);
        if (api_is_uuid(dst))
                for (char *c = dst; *c; c++)
                        *c = (char) tolower((unsigned char) *c);
        return 0;
}

static int route_allocations(const char *method, char **seg, size_t n, ApiRoute *r,
                             const char **ret_error) {
        bool one = n == 10;
        int q;

        /* v1 allocations projects P environments E fleets F allocations [A] */
        if ((n != 9 && n != 10) || !streq(seg[2], "projects") ||
            !streq(seg[4], "environments") || !streq(seg[6], "fleets") ||
            !streq(seg[8], "allocations"))
                return -ENOENT;
        r->allow = one ? "GET, DELETE" : "GET, POST";
        if (one && streq(method, "GET"))
                r->op = API_GET;
        else if (one && streq(method, "DELETE"))
                r->op = API_DELETE;
        else if (!one && streq(method, "GET"))
                r->op = API_LIST;
        else if (!one && streq(method, "POST"))
                r->op = API_ALLOCATE;
        else
                return -EOPNOTSUPP;
        q = copy_id(r->project, seg[3], "malformed projectId in the path", ret_error);
        if (q >= 0)
                q = copy_id(r->environment, seg[5], "malformed environmentId in the path",
                            ret_error);
        if (q >= 0)
                q = copy_id(r->fleet, seg[7], "malformed fleetId in the path", ret_error);
        if (q >= 0 && one)
                q = copy_id(r->allocation, seg[9], "malformed allocationId in the path",
                            ret_error);
        return q;
}

/* ---- the list's query ---- */

int api_parse_duration(const char *s, usec_t *ret) {
        static const struct {
                const char *unit;
                usec_t ns;
        } units[] = {
                /* longest first: "ms" before "m" */
                { "ns", 1 }, { "us", 1000 }, { "\u00b5s", 1000 }, { "ms", 1000000 },
                { "h", 3600 * UINT64_C(1000000000) }, { "m", 60 * UINT64_C(1000000000) },
                { "s", UINT64_C(1000000000) },
        };
        uint64_t total = 0; /* ns */

        if (!s || s[0] == '\0')
                return -EINVAL;
        if (streq(s, "0")) {
                *ret = 0;
                return 0;
        }
        while (*s) {
                uint64_t n = 0;
                size_t i, digits = 0;

                for (; *s >= '0' && *s <= '9'; s++, digits++) {
                        if (n > (UINT64_MAX - 9) / 10)
                                return -EINVAL;
                        n = n * 10 + (uint64_t) (*s - '0');
                }
                if (digits == 0)
                        return -EINVAL;
                for (i = 0; i < ELEMENTSOF(units); i++)
                        if (strncmp(s, units[i].unit, strlen(units[i].unit)) == 0)
                                break;
                if (i == ELEMENTSOF(units) || n > (UINT64_MAX - total) / units[i].ns)
                        return -EINVAL;
                total += n * units[i].ns;
                s += strlen(units[i].unit);
        }
        *ret = total / 1000;
        return 0;
}

/* ?ids=: UUIDs, comma-separated, at most API_LIST_IDS_MAX, lowercased into ret. */
static int parse_ids(const char *s, char ret[static API_LIST_IDS_BUF]) {
        size_t n = 0, len = strlen(s);

        if (len == 0 || len >= API_LIST_IDS_BUF)
                return -EINVAL;
        memcpy(ret, s, len + 1);
        for (char *p = ret; p;) {
                char *comma = strchr(p, ',');

                if (comma)
                        *comma = '\0';
                if (!api_is_uuid(p) || ++n > API_LIST_IDS_MAX)
                        return -EINVAL;
                for (char *c = p; *c; c++)
                        *c = (char) tolower((unsigned char) *c);
                if (comma)
                        *comma = ',';
                p = comma ? comma + 1 : NULL;
        }
        return 0;
}

/* A decimal from min to max, without sign or leading zero. */
static int parse_unsigned(const char *s, unsigned min, unsigned max, unsigned *ret) {
        unsigned long v;
        char *end;

        if (!s || s[0] < '0' || s[0] > '9' || (s[0] == '0' && s[1] != '\0'))
                return -EINVAL;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno != 0 || *end != '\0' || v < min || v > max)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

static int route_list_query(const ApiQuery *q, ApiRoute *r, const char **ret_error) {
        r->limit = API_LIST_LIMIT_DEFAULT;
        if (q->status) {
                r->status_lost = streq(q->status, "lost");
                r->status = allocation_status_from_string(q->status);
                if (!r->status_lost && r->status < 0) {
                        *ret_error = "status must be claimed, fulfilled, failed or lost";
                        return -EINVAL;
                }
        }
        if (q->age && api_parse_duration(q->age, &r->age) < 0) {
                *ret_error = "age must be a duration such as 90s, 30m or 24h";
                return -EINVAL;
        }
        if (q->limit && parse_unsigned(q->limit, 1, API_LIST_LIMIT_MAX, &r->limit) < 0) {
                *ret_error = "limit must be a number from 1 to 1000";
                return -EINVAL;
        }
        if (q->offset && parse_unsigned(q->offset, 0, INT32_MAX, &r->offset) < 0) {
                *ret_error = "offset must be a number from 0 to 2147483647";
                return -EINVAL;
        }
        if (q->ids && parse_ids(q->ids, r->ids) < 0) {
                *ret_error = "ids must be at most 100 allocation UUIDs, comma-separated";
                return -EINVAL;
        }
        return 0;
}

int api_route(const char *method, const char *path, const ApiQuery *query, ApiRoute *ret,
              const char **ret_error) {
        char buf[1024], *seg[SEGMENTS_MAX];
        static ApiRoute r; /* ~4 KiB of ids: off the stack (one thread) */
        size_t n;
        int q;

        if (!method || !path)
                return -ENOENT;
        r = (ApiRoute){ .status = -1 };
        if (streq(path, "/")) {
                r.op = API_STATUS;
                r.allow = "GET";
        } else if (split_path(path, buf, sizeof(buf), seg, &n) < 0)
                return -ENOENT;
        else if (n == 1 && streq(seg[0], "metrics")) {
                r.op = API_METRICS;
                r.allow = "GET";
        } else if (n == 4 && streq(seg[0], "v1") && streq(seg[1], "fleets") &&
                   streq(seg[3], "capacity")) {
                r.op = API_CAPACITY;
                r.allow = "GET";
                q = copy_id(r.fleet, seg[2], "malformed fleetId in the path", ret_error);
                if (q < 0)
                        return q;
        } else if (n >= 2 && streq(seg[0], "v1") && streq(seg[1], "allocations")) {
                q = route_allocations(method, seg, n, &r, ret_error);
                if (q == -EOPNOTSUPP)
                        ret->allow = r.allow;
                if (q < 0)
                        return q;
        } else
                return -ENOENT;
        if ((r.op == API_METRICS || r.op == API_CAPACITY || r.op == API_STATUS) &&
            !streq(method, "GET")) {
                ret->allow = r.allow;
                return -EOPNOTSUPP;
        }
        if (r.op == API_LIST) {
                q = route_list_query(query ?: &(const ApiQuery){}, &r, ret_error);
                if (q < 0)
                        return q;
        }
        *ret = r;
        return 0;
}

/* ---- the allocation's body ---- */

static int body_error(const char **ret_error, const char *message) {
        *ret_error = message;
        return -EBADMSG;
}

/* A string field, "" when absent or null; max bytes at most. */
/* No control character, C0 or C1 (jansson has checked the UTF-8). */
static bool region_id_valid(const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
                        return false;
        return true;
}

static int body_string(json_t *o, const char *name, size_t max, char **ret) {
        json_t *v = json_object_get(o, name);
        const char *s = "";

        if (v && !json_is_null(v)) {
                if (!json_is_string(v) || json_string_length(v) > max ||
                    strlen(json_string_value(v)) != json_string_length(v))
                        return -EBADMSG;
                s = json_string_value(v);
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* Multiplay numbers build configurations; slotd names them (1..128 of [A-Za-z0-9._:-]):
 * either is taken, a number as its decimal digits. */
static int body_build(json_t *o, char **ret) {
        static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                    "0123456789._:-";
        json_t *v = json_object_get(o, "buildConfigurationId");
        int r;

        if (json_is_integer(v)) {
                if (json_integer_value(v) < 0)
                        return -EBADMSG;
                return asprintf(ret, "%" JSON_INTEGER_FORMAT, json_integer_value(v)) < 0
                               ? -ENOMEM
                               : 0;
        }
        r = body_string(o, "buildConfigurationId", API_ID_MAX, ret);
        if (r < 0)
                return r;
        if (strspn(*ret, chars) != strlen(*ret)) {
                *ret = mfree(*ret);
                return -EBADMSG;
        }
        return 0;
}

void api_allocate_body_done(ApiAllocateBody *b) {
        if (!b)
                return;
        free(b->build_configuration_id);
        free(b->region_id);
        free(b->payload);
        *b = (ApiAllocateBody){};
}

static int parse_allocate_object(json_t *o, ApiAllocateBody *b, const char **ret_error) {
        json_t *id = json_object_get(o, "allocationId"), *restart;
        int r;

        if (!json_is_string(id) || !api_is_uuid(json_string_value(id)))
                return body_error(ret_error, "allocationId must be a UUID string");
        strcpy(b->allocation_id, json_string_value(id));
        for (char *c = b->allocation_id; *c; c++)
                *c = (char) tolower((unsigned char) *c);
        r = body_build(o, &b->build_configuration_id);
        if (r == -EBADMSG)
                return body_error(ret_error, "buildConfigurationId must be a number, or a "
                                             "string of 1 to 128 characters from A-Z a-z 0-9 "
                                             ". _ : -");
        if (r < 0)
                return r;
        /* A region's ID is its name where slotd's fleets take it from a .gsh file ("North
         * America"): any text but control characters (it is in no etcd key). */
        r = body_string(o, "regionId", API_ID_MAX, &b->region_id);
        if (r == -EBADMSG || (r >= 0 && !region_id_valid(b->region_id)))
                return body_error(ret_error, "regionId must be a string of at most 128 "
                                             "bytes without control characters");
        if (r < 0)
                return r;
        r = body_string(o, "payload", FLEET_PAYLOAD_MAX, &b->payload);
        if (r == -EBADMSG)
                return body_error(ret_error, "payload must be a string of at most 30 KiB");
        if (r < 0)
                return r;
        restart = json_object_get(o, "restart");
        if (restart && !json_is_boolean(restart))
                return body_error(ret_error, "restart must be a boolean");
        b->restart = restart && json_is_true(restart);
        return 0;
}

int api_parse_allocate(const char *body, size_t size, ApiAllocateBody *ret,
                       const char **ret_error) {
        ApiAllocateBody b = {};
        json_t *o;
        int r;

        if (!body || size > API_BODY_MAX)
                return body_error(ret_error, "the body must be a JSON object of at most 256 KiB");
        o = json_loadb(body, size, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(o)) {
                json_decref(o);
                return body_error(ret_error, "the body must be a JSON object");
        }
        r = parse_allocate_object(o, &b, ret_error);
        json_decref(o);
        if (r < 0) {
                api_allocate_body_done(&b);
                return r;
        }
        *ret = b;
        return 0;
}

/* ---- answers ---- */

char *api_allocation_href(const char *project, const char *environment, const char *fleet,
                          const char *allocation_id) {
        char *s;

        if (asprintf(&s, "/v1/allocations/projects/%s/environments/%s/fleets/%s/allocations/%s",
                     project, environment, fleet, allocation_id) < 0)
                return NULL;
        return s;
}

void api_request_id_format(const uint8_t b[static 16], char ret[static 37]) {
        snprintf(ret, 37,
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], (b[6] & 0x0f) | 0x40, b[7], (b[8] & 0x3f) | 0x80,
                 b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

json_t *api_build_configuration_json(const char *id) {
        size_t n = strlen(strempty(id));

        if (n == 0 || n > 15 || strspn(id, "0123456789") != n || (id[0] == '0' && n > 1))
                return json_integer(0);
        return json_integer((json_int_t) strtoll(id, NULL, 10));
}

/* o[name] = the time t in RFC 3339, unless t is 0 (not yet): Unity's DateTime fields are not
 * nullable, so a time that has not happened is left out, never "" or null. */
static int set_time(json_t *o, const char *name, usec_t t) {
        char buf[RFC3339_MAX];

        if (t == 0)
                return 0;
        return json_object_set_new(o, name, json_string(rfc3339_format(t, buf)));
}

json_t *api_allocation_json(const AllocationRecord *rec, const char *status_word,
                            bool readiness, usec_t ready_at) {
        json_t *o;

        /* Unity's MultiplayAllocationsAllocation: the IDs Multiplay numbers are JSON integers
         * (machineId the machine number; serverId the slot id); the record's machineID (the
         * hex ID of the etcd keys) stays inside. status is slotd's own (Unity's clients ignore
         * it). */
        o = json_pack("{s:s, s:o, s:s, s:s, s:I, s:I, s:s, s:s, s:i, s:b, s:s}",
                      "allocationId", strempty(rec->allocation_id),
                      "buildConfigurationId",
                      api_build_configuration_json(rec->build_configuration_id),
                      "fleetId", strempty(rec->fleet_id),
                      "regionId", strempty(rec->region_id),
                      "machineId", (json_int_t) rec->machine_number, /* <= INT64_MAX */
                      "serverId", (json_int_t) rec->slot_id,
                      "ipv4", strempty(rec->ipv4),
                      "ipv6", strempty(rec->ipv6),
                      "gamePort", (int) rec->game_port,
                      "readiness", readiness,
                      "status", status_word);
        if (o && rec->request_id && rec->request_id[0] != '\0' &&
            json_object_set_new(o, "requestId", json_string(rec->request_id)) < 0) {
                json_decref(o);
                o = NULL;
        }
        if (o && (set_time(o, "requested", rec->requested) < 0 ||
                  set_time(o, "created", rec->claimed) < 0 ||
                  set_time(o, "fulfilled", rec->fulfilled) < 0 ||
                  set_time(o, "ready", readiness ? ready_at : 0) < 0)) {
                json_decref(o);
                o = NULL;
        }
        /* slotd's too: why and when it failed (a record kept allocator.failed_ttl) */
        if (o && rec->status == ALLOCATION_FAILED &&
            (json_object_set_new(o, "error", json_string(strempty(rec->error))) < 0 ||
             set_time(o, "failed", rec->failed) < 0)) {
                json_decref(o);
                o = NULL;
        }
        return o;
}
