/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <sys/stat.h>

#include "macro.h"
#include "server-json.h"

static int append(char *buf, size_t size, size_t *pos, const char *s, size_t n) {
        if (*pos + n >= size)
                return -ENOBUFS;
        memcpy(buf + *pos, s, n);
        *pos += n;
        buf[*pos] = '\0';
        return 0;
}

static int append_string(char *buf, size_t size, size_t *pos, const char *s) {
        int r = append(buf, size, pos, "\"", 1);

        for (const unsigned char *p = (const unsigned char *) strempty(s); r == 0 && *p; p++) {
                char esc[8];
                if (*p == '"' || *p == '\\') {
                        esc[0] = '\\';
                        esc[1] = (char) *p;
                        r = append(buf, size, pos, esc, 2);
                } else if (*p < 0x20) {
                        snprintf(esc, sizeof(esc), "\\u%04x", *p);
                        r = append(buf, size, pos, esc, 6);
                } else
                        r = append(buf, size, pos, (const char *) p, 1);
        }
        return r < 0 ? r : append(buf, size, pos, "\"", 1);
}

int server_json_format(const ServerJson *j, char *buf, size_t size) {
        const struct {
                const char *key;
                const char *value;
        } fields[] = {
                { "serverID", j->server_id },       { "allocatedUUID", j->allocated_uuid },
                { "machineID", j->machine_id },     { "fleetID", j->fleet_id },
                { "ip", j->ip },                    { "ipv6", j->ipv6 },
                { "port", j->port },                { "queryPort", j->query_port },
                { "queryType", j->query_type },     { "serverLogDir", j->server_log_dir },
        };
        size_t pos = 0;
        int r;

        if (size == 0)
                return -ENOBUFS;
        buf[0] = '\0';
        r = append(buf, size, &pos, "{\n", 2);
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(fields); i++) {
                r = append(buf, size, &pos, "  ", 2);
                if (r == 0)
                        r = append_string(buf, size, &pos, fields[i].key);
                if (r == 0)
                        r = append(buf, size, &pos, ": ", 2);
                if (r == 0)
                        r = append_string(buf, size, &pos, fields[i].value);
                if (r == 0)
                        r = i + 1 < ELEMENTSOF(fields) ? append(buf, size, &pos, ",\n", 2)
                                                       : append(buf, size, &pos, "\n}\n", 3);
        }
        return r < 0 ? r : (int) pos;
}

int server_json_write_at(int dirfd, const ServerJson *j, uid_t uid, gid_t gid) {
        char buf[8192];
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int n = server_json_format(j, buf, sizeof(buf));
        ssize_t w;

        if (n < 0)
                return n;
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
        /* O_TRUNC only after the checks above, so a planted link is never truncated. */
        if (ftruncate(fd, 0) < 0)
                return negative_errno();
        w = pwrite(fd, buf, (size_t) n, 0);
        if (w < 0)
                return negative_errno();
        return w == n ? 0 : -EIO;
}
