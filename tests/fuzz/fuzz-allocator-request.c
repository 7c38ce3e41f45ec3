/* SPDX-License-Identifier: MIT */
/* slotd-allocator's requests (fleet/allocator/allocator-request.c). The input is "METHOD PATH[?query]\n"
 * then a body: the route parser gets the first line, the allocation body parser the rest.
 * Properties: a refused route or body writes nothing; what is accepted is within the bounds
 * the header promises (IDs are key components, a UUID lowercased, strings bounded); the
 * answer's JSON of a record made from an accepted body formats. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "allocator-request.h"
#include "fuzz.h"
#include "macro.h"

static bool id_ok(const char *s) {
        return fleet_key_component_valid(s) && strlen(s) <= API_ID_MAX;
}

/* A regionId: at most API_ID_MAX bytes, no control character (C0, DEL, C1). */
static bool region_ok(const char *s) {
        if (strlen(s) > API_ID_MAX)
                return false;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
                        return false;
        return true;
}

static bool lower_if_uuid(const char *s) {
        if (!api_is_uuid(s))
                return true;
        for (; *s; s++)
                if (isupper((unsigned char) *s))
                        return false;
        return true;
}

/* The query "k=v&k=v…" (in place) as the route's parameters: status, age, limit, offset,
 * ids; a part without "=" is status (the corpus's older "?claimed"). */
static const ApiQuery *query_of(char *s, ApiQuery *q) {
        *q = (ApiQuery){};
        for (char *part = strtok(s, "&"); part; part = strtok(NULL, "&")) {
                char *eq = strchr(part, '=');
                const char *v = eq ? eq + 1 : part;

                if (eq)
                        *eq = '\0';
                if (!eq || streq(part, "status"))
                        q->status = v;
                else if (streq(part, "age"))
                        q->age = v;
                else if (streq(part, "limit"))
                        q->limit = v;
                else if (streq(part, "offset"))
                        q->offset = v;
                else if (streq(part, "ids"))
                        q->ids = v;
        }
        return q;
}

static void fuzz_route(const char *line) {
        const char *space = strchr(line, ' '), *q, *error = NULL;
        char method[16], path[2048], status[8192];
        static ApiRoute r, sentinel;
        ApiQuery query;
        size_t n;
        int ret;

        if (!space || (size_t) (space - line) >= sizeof(method))
                return;
        memcpy(method, line, (size_t) (space - line));
        method[space - line] = '\0';
        q = strchr(space + 1, '?');
        n = q ? (size_t) (q - space - 1) : strlen(space + 1);
        if (n >= sizeof(path) || (q && strlen(q + 1) >= sizeof(status)))
                return;
        memcpy(path, space + 1, n);
        path[n] = '\0';
        if (q)
                strcpy(status, q + 1);
        memset(&r, 0x5a, sizeof(r));
        sentinel = r;
        ret = api_route(method, path, q ? query_of(status, &query) : NULL, &r, &error);
        FUZZ_ASSERT(ret == 0 || ret == -ENOENT || ret == -EOPNOTSUPP || ret == -EINVAL);
        if (ret == -EINVAL)
                FUZZ_ASSERT(error && *error);
        if (ret == -ENOENT || ret == -EINVAL) {
                FUZZ_ASSERT(memcmp(&r, &sentinel, sizeof(r)) == 0);
                return;
        }
        FUZZ_ASSERT(r.allow && strstr(r.allow, "GET"));
        if (ret < 0)
                return;
        FUZZ_ASSERT((unsigned) r.op < _API_OP_MAX && api_op_to_string(r.op));
        FUZZ_ASSERT(strstr(r.allow, method));
        if (r.op == API_METRICS)
                return;
        FUZZ_ASSERT(id_ok(r.fleet) && lower_if_uuid(r.fleet));
        if (r.op == API_CAPACITY)
                return;
        FUZZ_ASSERT(id_ok(r.project) && id_ok(r.environment));
        if (r.op == API_LIST)
                FUZZ_ASSERT(r.limit >= 1 && r.limit <= API_LIST_LIMIT_MAX &&
                            r.offset <= INT32_MAX && strlen(r.ids) < API_LIST_IDS_BUF &&
                            lower_if_uuid(r.ids));
        if (r.op == API_GET || r.op == API_DELETE)
                FUZZ_ASSERT(id_ok(r.allocation) && lower_if_uuid(r.allocation));
}

static void fuzz_body(const char *body, size_t size) {
        ApiAllocateBody b, zero = {};
        const char *error = NULL;
        AllocationRecord rec;
        json_t *j;
        int ret;

        memset(&b, 0, sizeof(b));
        ret = api_parse_allocate(body, size, &b, &error);
        FUZZ_ASSERT(ret == 0 || ret == -EBADMSG || ret == -ENOMEM);
        if (ret < 0) {
                FUZZ_ASSERT(ret != -EBADMSG || (error && *error));
                FUZZ_ASSERT(memcmp(&b, &zero, sizeof(b)) == 0);
                return;
        }
        FUZZ_ASSERT(api_is_uuid(b.allocation_id) && lower_if_uuid(b.allocation_id));
        FUZZ_ASSERT(strlen(b.build_configuration_id) <= API_ID_MAX + 20);
        FUZZ_ASSERT(region_ok(b.region_id));
        FUZZ_ASSERT(strlen(b.payload) <= FLEET_PAYLOAD_MAX);
        rec = (AllocationRecord){ .allocation_id = b.allocation_id, .fleet_id = (char *) "f",
                                  .build_configuration_id = b.build_configuration_id,
                                  .region_id = b.region_id, .payload = b.payload };
        j = api_allocation_json(&rec, "claimed", size % 2 == 0, size);
        FUZZ_ASSERT(j);
        json_decref(j);
        api_allocate_body_done(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *nl = memchr(data, '\n', size);
        char *line;
        size_t n;

        if (!nl)
                return 0;
        n = (size_t) (nl - data);
        line = malloc(n + 1);
        FUZZ_ASSERT(line);
        memcpy(line, data, n);
        line[n] = '\0';
        if (strlen(line) == n)
                fuzz_route(line);
        free(line);
        fuzz_body((const char *) nl + 1, size - n - 1);
        return 0;
}
