/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include <jansson.h>

#include "macro.h"
#include "server-json.h"

int server_json_format(const ServerJson *j, char **ret) {
        const struct {
                const char *key;
                const char *value;
        } fields[] = {
                { "serverID", j->server_id },       { "allocatedUUID", j->allocated_uuid },
                { "machineID", j->machine_id },     { "fleetID", j->fleet_id },
                { "ip", j->ip },                    { "ipv6", j->ipv6 },
                { "port", j->port },                { "queryPort", j->query_port },
                { "queryType", j->query_type },     { "serverLogDir", j->server_log_dir },
                { "serverFilesDir", j->server_files_dir },
                { "localProxyUrl", j->local_proxy_url },
                { "regionID", j->region_id },       { "regionName", j->region_name },
        };
        _cleanup_(json_decrefp) json_t *o = json_object();
        char *text;
        int r = o ? 0 : -1;

        /* Fixed keys first, in this order (jansson keeps insertion order); a variable never
         * replaces one (the config refuses such names). */
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(fields); i++) {
                /* Absent, the SDKs use their default; an empty URL would be worse. */
                if (!fields[i].value && streq(fields[i].key, "localProxyUrl"))
                        continue;
                r = json_object_set_new(o, fields[i].key, json_string(strempty(fields[i].value)));
        }
        for (size_t i = 0; r == 0 && i < j->n_variables; i++)
                if (!json_object_get(o, j->variable_names[i]))
                        r = json_object_set_new(o, j->variable_names[i],
                                                json_string(strempty(j->variable_values[i])));
        /* jansson takes valid UTF-8 only (json_string() is NULL otherwise, and the set fails). */
        if (r < 0)
                return o ? -EINVAL : -ENOMEM;
        text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!text || asprintf(ret, "%s\n", text) < 0) {
                free(text);
                return -ENOMEM;
        }
        free(text);
        return (int) strlen(*ret);
}

/* The room the file keeps: this content, and the same with the longest allocation UUID (its
 * characters need no escaping, so the difference is exact), and what a refused write
 * needed. */
static size_t server_json_room(const ServerJson *j, size_t n) {
        size_t uuid = strlen(strempty(j->allocated_uuid));
        size_t room = n + (uuid < SERVER_JSON_UUID_MAX ? SERVER_JSON_UUID_MAX - uuid : 0);

        return MAX(room, j->reserve);
}

int server_json_write_at(int dirfd, const ServerJson *j, uid_t uid, gid_t gid,
                         size_t *ret_need) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int n = server_json_format(j, &buf);
        size_t room;
        ssize_t w;

        if (n < 0)
                return n;
        room = server_json_room(j, (size_t) n);
        if (ret_need)
                *ret_need = room;
        fd = openat(dirfd, "server.json", O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
                    0644);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
                return -EPERM;
        if (st.st_uid != uid || st.st_gid != gid)
                if (fchown(fd, uid, gid) < 0)
                        return negative_errno();
        /* Blocks already there are kept; a file system without fallocate gets plain writes. */
        if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t) room) < 0 && errno != EOPNOTSUPP &&
            errno != ENOSYS)
                return negative_errno();
        /* Over the file's own blocks, then cut: a shorter content never needs new space.
         * The truncation comes only after the checks above, so a planted link is never
         * truncated. */
        w = pwrite(fd, buf, (size_t) n, 0);
        if (w < 0)
                return negative_errno();
        if (w != n)
                return -EIO;
        if (st.st_size > n) {
                if (ftruncate(fd, n) < 0)
                        return negative_errno();
                /* Cutting frees whole blocks past the end, reserved ones too: again. */
                (void) fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t) room);
        }
        return 0;
}

int server_json_same_at(int dirfd, const ServerJson *j) {
        _cleanup_free_ char *want = NULL, *have = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int n = server_json_format(j, &want);
        ssize_t got;

        if (n < 0)
                return n;
        fd = openat(dirfd, "server.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_size != n)
                return 0;
        have = malloc((size_t) n + 1);
        if (!have)
                return -ENOMEM;
        got = pread(fd, have, (size_t) n + 1, 0);
        if (got < 0)
                return negative_errno();
        return got == n && memcmp(have, want, (size_t) n) == 0;
}
