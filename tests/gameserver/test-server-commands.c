/* SPDX-License-Identifier: MIT */
/*
 * One command grammar for the options, test-server.at-start and
 * test-server.control, and the rule by which only what changed in the
 * control file runs.
 */

#include "test-server.h"

typedef int (*command_fn)(struct server *s, const char *arg);

static int cmd_burn_cpu(struct server *s, const char *arg)
{
        double cores;
        int r;

        r = parse_double(arg, &cores);
        if (r < 0 || cores > BURN_MAX_CORES)
                return -EINVAL;
        r = burn_start(s, cores);
        if (r < 0)
                return r;
        log_line("burning %.3f cores in %zu threads", cores, s->n_burners);
        return 0;
}

static int cmd_grow_memory(struct server *s, const char *arg)
{
        uint64_t bytes, page;
        int r;

        r = parse_size(arg, &bytes);
        if (r < 0 || bytes > MEMORY_RATE_MAX)
                return -EINVAL;
        /* Memory is charged by the page, so a request is rounded up to whole pages. */
        page = (uint64_t) sysconf(_SC_PAGESIZE);
        s->memory_pending += (bytes + page - 1) / page * page;
        s->memory_error_shown = false;
        return 0;
}

static int cmd_grow_memory_rate(struct server *s, const char *arg)
{
        uint64_t rate;
        int r;

        r = parse_size(arg, &rate);
        if (r < 0 || rate > MEMORY_RATE_MAX)
                return -EINVAL;
        s->leak_rate = rate;
        s->leak_carry = 0;
        s->leak_last = now_usec(CLOCK_MONOTONIC);
        s->memory_error_shown = false;
        return 0;
}

static int cmd_free_memory(struct server *s, const char *arg)
{
        (void) arg;
        memory_free(s);
        s->leak_rate = 0;
        return 0;
}

static int cmd_query(struct server *s, const char *arg)
{
        return parse_bool(arg, &s->query_enabled);
}

static int cmd_a2s_challenge(struct server *s, const char *arg)
{
        return parse_bool(arg, &s->a2s_challenge);
}

static int cmd_ready(struct server *s, const char *arg)
{
        bool ready;
        int r;

        r = parse_bool(arg, &ready);
        if (r < 0)
                return r;
        /* An SDK server tells the proxy; its answer sets ready (sdk_handle). */
        if (s->sdk.enabled)
                return sdk_ready_request(s, ready);
        ready_set(s, ready);
        return 0;
}

static int cmd_watchdog(struct server *s, const char *arg)
{
        bool on;
        int r;

        r = parse_bool(arg, &on);
        if (r < 0)
                return r;
        if (on && s->watchdog_usec == 0)
                return -EDESTADDRREQ;
        s->watchdog_enabled = on;
        /* Due at once, sent by the main loop: at start that puts it after READY=1. */
        s->watchdog_next = now_usec(CLOCK_MONOTONIC);
        return 0;
}

static int cmd_watchdog_usec(struct server *s, const char *arg)
{
        uint64_t usec;
        int r;

        r = parse_uint(arg, UINT64_MAX / 2, &usec);
        if (r < 0)
                return r;
        s->watchdog_usec = usec;
        s->watchdog_enabled = usec > 0;
        s->watchdog_next = now_usec(CLOCK_MONOTONIC);
        return 0;
}

static int cmd_status(struct server *s, const char *arg)
{
        char msg[VALUE_MAX + 8];

        copy_string(s->status, sizeof(s->status), arg ? arg : "");
        snprintf(msg, sizeof(msg), "STATUS=%s", s->status);
        (void) notify_send(s, msg);
        return 0;
}

static int cmd_notify(struct server *s, const char *arg)
{
        char msg[1024];
        size_t n = 0;

        if (!arg)
                return -EINVAL;
        /* "\n" in the argument separates assignments, so one datagram can carry several. */
        for (const char *p = arg; *p && n + 1 < sizeof(msg); p++) {
                if (p[0] == '\\' && p[1] == 'n') {
                        msg[n++] = '\n';
                        p++;
                } else
                        msg[n++] = *p;
        }
        msg[n] = '\0';
        return notify_send(s, msg) ? 0 : -EIO;
}

static int cmd_crash(struct server *s, const char *arg)
{
        int sig = SIGABRT;

        (void) s;
        if (arg && parse_signal(arg, &sig) < 0)
                return -EINVAL;
        die_by_signal(sig);
}

static int cmd_crash_after(struct server *s, const char *arg)
{
        char ms[32];
        const char *sig;
        usec_t usec;
        size_t n;

        if (!arg)
                return -EINVAL;
        n = strcspn(arg, " \t");
        if (n >= sizeof(ms))
                return -EINVAL;
        memcpy(ms, arg, n);
        ms[n] = '\0';
        sig = arg + n + strspn(arg + n, " \t");
        if (*sig && parse_signal(sig, &s->crash_signal) < 0)
                return -EINVAL;
        if (parse_msec(ms, &usec) < 0)
                return -EINVAL;
        s->crash_at = now_usec(CLOCK_MONOTONIC) + usec;
        return 0;
}

static int cmd_exit(struct server *s, const char *arg)
{
        uint64_t code = 0;

        (void) s;
        if (arg && parse_uint(arg, 255, &code) < 0)
                return -EINVAL;
        exit_with((int) code, "exit command");
}

static int cmd_exit_after(struct server *s, const char *arg)
{
        char ms[32];
        const char *code;
        uint64_t c;
        usec_t usec;
        size_t n;

        if (!arg)
                return -EINVAL;
        n = strcspn(arg, " \t");
        if (n >= sizeof(ms))
                return -EINVAL;
        memcpy(ms, arg, n);
        ms[n] = '\0';
        code = arg + n + strspn(arg + n, " \t");
        if (*code) {
                if (parse_uint(code, 255, &c) < 0)
                        return -EINVAL;
                s->exit_code = (int) c;
        }
        if (parse_msec(ms, &usec) < 0)
                return -EINVAL;
        s->exit_at = now_usec(CLOCK_MONOTONIC) + usec;
        return 0;
}

static int cmd_ignore_term(struct server *s, const char *arg)
{
        return parse_bool(arg, &s->ignore_term);
}

static int cmd_fork(struct server *s, const char *arg)
{
        uint64_t n;
        int r;

        r = parse_uint(arg, CHILDREN_MAX, &n);
        if (r < 0)
                return r;
        for (uint64_t i = 0; i < n; i++) {
                r = child_spawn(s);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int cmd_kill_children(struct server *s, const char *arg)
{
        (void) arg;
        for (size_t i = 0; i < s->n_children; i++)
                (void) kill(s->children[i], SIGKILL);
        return 0;
}

static int cmd_players(struct server *s, const char *arg)
{
        uint64_t n;
        int r;

        r = parse_uint(arg, UINT16_MAX, &n);
        if (r == 0)
                s->players = (unsigned) n;
        return r;
}

static int cmd_max_players(struct server *s, const char *arg)
{
        uint64_t n;
        int r;

        r = parse_uint(arg, UINT16_MAX, &n);
        if (r == 0)
                s->max_players = (unsigned) n;
        return r;
}

static int cmd_map(struct server *s, const char *arg)
{
        if (!arg)
                return -EINVAL;
        copy_string(s->map, sizeof(s->map), arg);
        return 0;
}

static int cmd_name(struct server *s, const char *arg)
{
        copy_string(s->name, sizeof(s->name), arg ? arg : "");
        return 0;
}

/* "spam BYTES [TAG]": BYTES of output (rounded down to whole lines) on stdout, in lines of
 * SPAM_LINE bytes "TAG NUMBER xxx...\n" numbered from 0, written as they go (a full pipe
 * blocks the server, as it would a real one), then "TAG done LINES\n". */
#define SPAM_LINE 64
static int cmd_spam(struct server *s, const char *arg)
{
        char bytes[32], line[SPAM_LINE + 1], tag[24] = "spam";
        const char *t;
        uint64_t total, lines;
        size_t n;
        int len, r;

        (void) s;
        if (!arg)
                return -EINVAL;
        n = strcspn(arg, " \t");
        if (n >= sizeof(bytes))
                return -EINVAL;
        memcpy(bytes, arg, n);
        bytes[n] = '\0';
        t = arg + n + strspn(arg + n, " \t");
        if (*t)
                copy_string(tag, sizeof(tag), t);
        if (parse_uint(bytes, UINT64_C(1) << 40, &total) < 0)
                return -EINVAL;
        lines = total / SPAM_LINE;
        for (uint64_t i = 0; i < lines; i++) {
                len = snprintf(line, sizeof(line), "%s %010" PRIu64 " ", tag, i);
                if (len < 0 || len >= SPAM_LINE)
                        return -EINVAL;
                memset(line + len, 'x', SPAM_LINE - 1 - (size_t) len);
                line[SPAM_LINE - 1] = '\n';
                r = write_all(STDOUT_FILENO, line, SPAM_LINE);
                if (r < 0)
                        return r;
        }
        len = snprintf(line, sizeof(line), "%s done %" PRIu64 "\n", tag, lines);
        return write_all(STDOUT_FILENO, line, (size_t) len);
}

static const struct command {
        const char *name;
        command_fn fn;
} commands[] = {
        { "burn-cpu", cmd_burn_cpu },
        { "grow-memory", cmd_grow_memory },
        { "grow-memory-rate", cmd_grow_memory_rate },
        { "free-memory", cmd_free_memory },
        { "query", cmd_query },
        { "a2s-challenge", cmd_a2s_challenge },
        { "ready", cmd_ready },
        { "watchdog", cmd_watchdog },
        { "watchdog-usec", cmd_watchdog_usec },
        { "status", cmd_status },
        { "notify", cmd_notify },
        { "crash", cmd_crash },
        { "crash-after", cmd_crash_after },
        { "exit", cmd_exit },
        { "exit-after", cmd_exit_after },
        { "ignore-term", cmd_ignore_term },
        { "fork", cmd_fork },
        { "kill-children", cmd_kill_children },
        { "players", cmd_players },
        { "max-players", cmd_max_players },
        { "map", cmd_map },
        { "name", cmd_name },
        { "spam", cmd_spam },
};

/* One line: "command [argument...]"; the argument is the rest of the line, trimmed. */
int command_run_line(struct server *s, const char *line, const char *origin)
{
        char buf[1024], *cmd, *arg, *end;
        int r;

        copy_string(buf, sizeof(buf), line);
        /* Control characters would garble the log the line is echoed to; CRLF files are fine. */
        for (char *p = buf; *p; p++)
                if (*p == '\r')
                        *p = ' ';
                else if ((unsigned char) *p < 0x20 && *p != '\t')
                        *p = '?';
        cmd = buf + strspn(buf, " \t");
        end = cmd + strlen(cmd);
        while (end > cmd && isspace((unsigned char) end[-1]))
                *--end = '\0';
        if (*cmd == '\0' || *cmd == '#')
                return 0;
        arg = cmd + strcspn(cmd, " \t");
        if (*arg != '\0') {
                *arg++ = '\0';
                arg += strspn(arg, " \t");
        }
        if (*arg == '\0')
                arg = NULL;

        log_line("%s: %s%s%s", origin, cmd, arg ? " " : "", arg ? arg : "");
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
                if (strcmp(cmd, commands[i].name) != 0)
                        continue;
                r = commands[i].fn(s, arg);
                if (r < 0)
                        log_line("%s: %s %s: %s", origin, cmd, arg ? arg : "(no argument)",
                                 r == -EINVAL ? "invalid argument" : strerror(-r));
                s->state_dirty = true;
                return r;
        }
        log_line("%s: unknown command \"%s\", ignoring", origin, cmd);
        return -EINVAL;
}

void command_run_text(struct server *s, const char *text, size_t len, const char *origin)
{
        const char *p = text, *end = text + len;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t n = nl ? (size_t) (nl - p) : (size_t) (end - p);
                char line[1024];

                if (n >= sizeof(line))
                        n = sizeof(line) - 1;
                memcpy(line, p, n);
                line[n] = '\0';
                (void) command_run_line(s, line, origin);
                if (!nl)
                        break;
                p = nl + 1;
        }
}

/*
 * Only what changed is applied: lines appended to the file run alone (so
 * "echo fork 1 >> test-server.control" forks once more each time), a file
 * rewritten with other content runs whole, and a rewrite with the same
 * content runs nothing.  A last line without its newline may be a write in
 * progress, so it waits until the file has been still for a moment.
 */
void control_check(struct server *s, usec_t now, bool baseline, bool reread)
{
        struct file_stamp stamp;
        size_t len = 0, usable;
        char *buf = NULL, *nl;
        bool stamp_changed;
        int r;

        file_stamp_get(s->control_path, &stamp);
        stamp_changed = !file_stamp_equal(&stamp, &s->control_stamp);
        if (stamp_changed) {
                s->control_stamp = stamp;
                s->control_stamp_since = now;
        } else if (!baseline && !reread && stamp.size == (off_t) s->control_applied_len)
                return;

        if (stamp.exists) {
                r = read_file(s->control_path, CONTROL_MAX_BYTES, &buf, &len);
                if (r < 0) {
                        if (stamp_changed)
                                log_line("control: cannot read %s: %s", s->control_path,
                                         strerror(-r));
                        return;
                }
        }
        nl = len > 0 ? memrchr(buf, '\n', len) : NULL;
        usable = nl ? (size_t) (nl - buf) + 1 : 0;
        if (baseline || (usable < len && now - s->control_stamp_since >= CONTROL_TAIL_USEC))
                usable = len;

        if (!baseline) {
                if (usable >= s->control_applied_len &&
                    (s->control_applied_len == 0 ||
                     memcmp(buf, s->control_applied, s->control_applied_len) == 0)) {
                        if (usable > s->control_applied_len) {
                                command_run_text(s, buf + s->control_applied_len,
                                                 usable - s->control_applied_len, "control");
                                s->control_seq++;
                        }
                } else if (usable > 0) {
                        command_run_text(s, buf, usable, "control");
                        s->control_seq++;
                } else if (s->control_applied_len > 0 && usable == len)
                        log_line("control: file emptied");
        }
        free(s->control_applied);
        s->control_applied = buf;
        s->control_applied_len = usable;
        s->state_dirty = s->state_dirty || !baseline;
}
