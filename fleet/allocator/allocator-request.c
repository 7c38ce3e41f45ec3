/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <stdio.h>

#include "allocator-request.h"
#include "macro.h"

#define SEGMENTS_MAX 12

static const char *const op_names[_API_OP_MAX] = {
        [API_ALLOCATE] = "allocate", [API_LIST] = "list",         [API_GET] = "get",
        [API_DELETE] = "delete",     [API_CAPACITY] = "capacity", [API_METRICS] = "metrics",
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

int api_route(const char *method, const char *path, const char *status, ApiRoute *ret,
              const char **ret_error) {
        char buf[1024], *seg[SEGMENTS_MAX];
        ApiRoute r = { .status = -1 };
        size_t n;
        int q;

        if (!method || !path || split_path(path, buf, sizeof(buf), seg, &n) < 0)
                return -ENOENT;
        if (n == 1 && streq(seg[0], "metrics")) {
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
        if ((r.op == API_METRICS || r.op == API_CAPACITY) && !streq(method, "GET")) {
                ret->allow = r.allow;
                return -EOPNOTSUPP;
        }
        if (r.op == API_LIST && status) {
                r.status_lost = streq(status, "lost");
                r.status = allocation_status_from_string(status);
                if (!r.status_lost && r.status < 0) {
                        *ret_error = "status must be claimed, fulfilled or lost";
                        return -EINVAL;
                }
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
        json_t *id = json_object_get(o, "allocationId");
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
        r = body_string(o, "regionId", API_ID_MAX, &b->region_id);
        if (r == -EBADMSG || (r >= 0 && b->region_id[0] != '\0' &&
                              !fleet_key_component_valid(b->region_id)))
                return body_error(ret_error, "regionId must be a string of at most 128 "
                                             "characters from A-Z a-z 0-9 . _ -");
        if (r < 0)
                return r;
        r = body_string(o, "payload", FLEET_PAYLOAD_MAX, &b->payload);
        if (r == -EBADMSG)
                return body_error(ret_error, "payload must be a string of at most 30 KiB");
        return r;
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

json_t *api_allocation_json(const AllocationRecord *rec, const char *status_word, bool ready) {
        char requested[RFC3339_MAX], created[RFC3339_MAX], fulfilled[RFC3339_MAX];

        /* machineId is Multiplay's machine ID, an integer (int64 in Unity's clients): the
         * machine number. The record's machineID (the hex ID of the etcd keys) stays inside. */
        return json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:i, s:s, s:s, s:s, s:b, s:s}",
                         "allocationId", strempty(rec->allocation_id),
                         "buildConfigurationId", strempty(rec->build_configuration_id),
                         "fleetId", strempty(rec->fleet_id),
                         "regionId", strempty(rec->region_id),
                         "machineId", (json_int_t) rec->machine_number, /* <= INT64_MAX */
                         "serverId", (json_int_t) rec->slot_id,
                         "ipv4", strempty(rec->ipv4),
                         "ipv6", strempty(rec->ipv6),
                         "gamePort", (int) rec->game_port,
                         "requested", rfc3339_format(rec->requested, requested),
                         "created", rfc3339_format(rec->claimed, created),
                         "fulfilled", rfc3339_format(rec->fulfilled, fulfilled),
                         "ready", ready,
                         "status", status_word);
}
