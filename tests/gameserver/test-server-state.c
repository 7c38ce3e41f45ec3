/* SPDX-License-Identifier: MIT */
/* What the server records for the tests: test-server.state and test-server.starts. */

#include "test-server.h"

void cgroup_read(char *buf, size_t size)
{
        char *content, *line;
        size_t len;

        copy_string(buf, size, "");
        if (read_file("/proc/self/cgroup", 64 * 1024, &content, &len) < 0)
                return;
        for (line = content; line && *line; line = strchr(line, '\n')) {
                if (*line == '\n')
                        line++;
                if (strncmp(line, "0::", 3) == 0) {
                        copy_string(buf, size, line + 3);
                        buf[strcspn(buf, "\n")] = '\0';
                        break;
                }
        }
        free(content);
}

/* Values are one line each: embedded newlines would let one value forge another key. */
static void put_value(FILE *f, const char *value)
{
        for (const char *p = value; *p; p++)
                fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
        fputc('\n', f);
}

static void put_kv(FILE *f, const char *key, const char *value)
{
        fprintf(f, "%s=", key);
        put_value(f, value);
}


/* Only in SDK mode, so that the normal server's state stays as it was. */
static void sdk_state_put(FILE *f, const struct sdk_status *st)
{
        put_kv(f, "sdk_phase", st->phase);
        put_kv(f, "sdk_proxy", st->proxy);
        fprintf(f, "sdk_connects=%u\n", st->connects);
        put_kv(f, "sdk_allocation", st->allocation);
        fprintf(f, "sdk_allocations=%u\n", st->allocations);
        fprintf(f, "sdk_offset=%" PRIu64 "\n", st->offset);
        fprintf(f, "sdk_hold_status=%d\n", st->hold_status);
        fprintf(f, "sdk_payload_status=%d\n", st->payload_status);
        fprintf(f, "sdk_deaf=%d\n", st->deaf);
}

/* Our PID as the supervisor sees it. slotd starts servers in a PID namespace of their own,
 * where getpid() is small; /proc is the host's, and its "self" link names us in the host's
 * namespace. */
int host_pid(void)
{
        char buf[32];
        ssize_t n = readlink("/proc/self", buf, sizeof(buf) - 1);

        if (n <= 0)
                return (int) getpid();
        buf[n] = '\0';
        return atoi(buf) > 0 ? atoi(buf) : (int) getpid();
}

static void state_put_identity(FILE *f, const struct server *s)
{
        fprintf(f, "pid=%d\n", host_pid());
        fprintf(f, "ns_pid=%d\n", (int) getpid());
        fprintf(f, "start_monotonic_usec=%" PRIu64 "\n", s->start_monotonic);
        fprintf(f, "start_realtime_usec=%" PRIu64 "\n", s->start_realtime);
        fprintf(f, "uid=%u\ngid=%u\n", (unsigned) getuid(), (unsigned) getgid());
        put_kv(f, "serverID", s->server_id);
        put_kv(f, "allocatedUUID", s->allocated_uuid);
        fprintf(f, "port=%u\nqueryPort=%u\n", s->port, s->query_port);
        put_kv(f, "serverLogDir", s->server_log_dir);
        put_kv(f, "argv", s->argv_joined);
        put_kv(f, "cgroup", s->cgroup);
}

static void state_put_behaviour(FILE *f, struct server *s)
{
        char name[VALUE_MAX + 16], pids[CHILDREN_MAX * 12] = "";
        size_t off = 0;

        fprintf(f, "ready=%d\n", s->ready);
        fprintf(f, "query=%s\n", s->query_enabled ? "on" : "off");
        fprintf(f, "query_bound=%d\n", s->query_fd >= 0);
        fprintf(f, "a2s_challenge=%d\n", s->a2s_challenge);
        fprintf(f, "queries_answered=%" PRIu64 "\n", s->queries_answered);
        fprintf(f, "queries_dropped=%" PRIu64 "\n", s->queries_dropped);
        put_kv(f, "notify_socket", s->notify_socket);
        fprintf(f, "watchdog=%s\n", s->watchdog_enabled ? "on" : "off");
        fprintf(f, "watchdog_usec=%" PRIu64 "\n", s->watchdog_usec);
        fprintf(f, "watchdogs_sent=%" PRIu64 "\n", s->watchdogs_sent);
        put_kv(f, "status", s->status);
        fprintf(f, "players=%u\nmax_players=%u\n", s->players, s->max_players);
        put_kv(f, "map", s->map);
        put_kv(f, "name", server_name(s, name, sizeof(name)));
        put_kv(f, "build_id", s->build_id);
        fprintf(f, "burn_cpu=%.3f\n", s->burn_cores);
        fprintf(f, "memory_bytes=%" PRIu64 "\n", s->memory_bytes);
        fprintf(f, "grow_memory_rate=%" PRIu64 "\n", s->leak_rate);
        fprintf(f, "ignore_term=%d\n", s->ignore_term);
        for (size_t i = 0; i < s->n_children; i++)
                off += (size_t) snprintf(pids + off, sizeof(pids) - off, "%s%d", i ? " " : "",
                                         (int) s->children[i]);
        fprintf(f, "children=%s\n", pids);
        fprintf(f, "control_seq=%u\n", s->control_seq);
        fprintf(f, "server_json_seq=%u\n", s->json_seq);
}

static void state_put_inputs(FILE *f, const struct server *s)
{
        char key[64];

        for (int i = 0; i < _SJ_MAX; i++) {
                if (!s->json.present[i])
                        continue;
                snprintf(key, sizeof(key), "json.%s", server_json_keys[i]);
                put_kv(f, key, s->json.value[i]);
        }
        for (char **e = environ; e && *e; e++) {
                fputs("env.", f);
                put_value(f, *e);
        }
}

/* Rename, so a test never reads a half-written state. */
static int state_replace(const char *path, const char *buf, size_t len)
{
        char tmp[PATH_MAX + 64];
        int fd, r;

        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        r = fd < 0 ? -errno : write_all(fd, buf, len);
        if (fd >= 0 && close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        return r;
}

void state_write(struct server *s, usec_t now)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f;
        int r;

        s->state_dirty = false;
        s->counters_dirty = false;
        s->state_written_at = now;
        f = open_memstream(&buf, &len);
        if (!f)
                return;
        state_put_identity(f, s);
        state_put_behaviour(f, s);
        if (s->sdk.enabled)
                sdk_state_put(f, &s->sdk_status);
        state_put_inputs(f, s);
        if (fclose(f) != 0) {
                free(buf);
                return;
        }
        r = state_replace(s->state_path, buf, len);
        free(buf);
        if (r < 0 && !s->state_error_shown) {
                log_line("cannot write %s: %s (further failures not shown)", s->state_path,
                         strerror(-r));
                s->state_error_shown = true;
        }
}

void starts_append(struct server *s)
{
        char line[64];
        int fd, n, r;

        n = snprintf(line, sizeof(line), "exec %" PRIu64 "\n", s->start_monotonic);
        fd = open(s->starts_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) {
                log_line("cannot open %s: %s", s->starts_path, strerror(errno));
                return;
        }
        /* One write() with O_APPEND keeps lines whole even if starts overlap. */
        r = write_all(fd, line, (size_t) n);
        if (r < 0)
                log_line("cannot append to %s: %s", s->starts_path, strerror(-r));
        close(fd);
}
