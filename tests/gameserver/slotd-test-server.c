/* SPDX-License-Identifier: MIT */
/*
 * slotd-test-server: the fake game server behind the demo and every
 * integration test.  It reads server.json the way a Unity Multiplay server
 * does, answers SQP and A2S_INFO queries, speaks sd_notify, and misbehaves
 * on request (CPU, memory, crashes, exit codes, ignored SIGTERM, stray
 * children) so that each of the supervisor's checks can be driven from a
 * test.  What it did is recorded in $HOME/test-server.state.
 *
 * Deliberately self-contained: it runs as nobody from an unknown working
 * directory and must not depend on anything the project builds.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef uint64_t usec_t;

#define USEC_PER_SEC  1000000ULL
#define USEC_PER_MSEC 1000ULL

#define FILE_CHECK_USEC    (50 * USEC_PER_MSEC)
#define STATE_REFRESH_USEC (1 * USEC_PER_SEC)
/* An unterminated last line is applied only once the file has been still this long. */
#define CONTROL_TAIL_USEC  (100 * USEC_PER_MSEC)
#define CONTROL_MAX_BYTES  (64 * 1024)
#define JSON_MAX_BYTES     (64 * 1024)

#define BURN_PERIOD_USEC  (10 * USEC_PER_MSEC)
#define BURN_MAX_CORES    1024.0
/* Pages are touched at most this much per loop turn so signals and queries stay answered. */
#define MEMORY_STEP_BYTES   (64ULL << 20)
#define MEMORY_REGION_BYTES (64ULL << 20)
#define MEMORY_RATE_MAX     (1ULL << 40)
#define CHILDREN_MAX      1024
#define PEERS_MAX         128
#define PACKET_MAX        1400
#define VALUE_MAX         256

#define STATE_NAME    "test-server.state"
#define STARTS_NAME   "test-server.starts"
#define CONTROL_NAME  "test-server.control"
#define AT_START_NAME "test-server.at-start"
#define JSON_NAME     "server.json"

#define SQP_CHUNK_SERVER_INFO 0x01

enum {
        SJ_SERVER_ID,
        SJ_ALLOCATED_UUID,
        SJ_MACHINE_ID,
        SJ_FLEET_ID,
        SJ_IP,
        SJ_IPV6,
        SJ_PORT,
        SJ_QUERY_PORT,
        SJ_QUERY_TYPE,
        SJ_SERVER_LOG_DIR,
        _SJ_MAX,
};

static const char *const server_json_keys[_SJ_MAX] = {
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

struct server_json {
        bool present[_SJ_MAX];
        char value[_SJ_MAX][VALUE_MAX];
};

/* Enough of a stat result to notice a rewrite without reading the file. */
struct file_stamp {
        bool exists;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtim;
        struct timespec ctim;
};

struct memory_region {
        uint8_t *base;
        size_t size;
        size_t used;
};

struct peer {
        bool in_use;
        struct sockaddr_in addr;
        usec_t last_used;
        bool has_sqp;
        uint32_t sqp_challenge;
        bool has_a2s;
        uint8_t a2s_challenge[4];
};

struct server {
        usec_t start_monotonic;
        usec_t start_realtime;
        char *argv_joined;

        char home[PATH_MAX];
        char state_path[PATH_MAX + 32];
        char starts_path[PATH_MAX + 32];
        char control_path[PATH_MAX + 32];
        char at_start_path[PATH_MAX + 32];
        char json_path[PATH_MAX + 32];

        /* Identity: command line, then environment, then server.json. */
        char server_id[VALUE_MAX];
        char allocated_uuid[VALUE_MAX];
        char server_log_dir[PATH_MAX];
        char notify_socket[sizeof(((struct sockaddr_un *) NULL)->sun_path) + 1];
        char build_id[VALUE_MAX];
        uint16_t port;
        uint16_t query_port;

        struct server_json json;
        bool json_valid;
        struct file_stamp json_stamp;
        struct file_stamp json_bad_stamp;
        unsigned json_seq;

        /* Behaviour. */
        bool query_enabled;
        bool a2s_challenge;
        bool ready;
        bool ready_wanted;
        usec_t ready_delay;
        usec_t ready_at;
        bool watchdog_enabled;
        usec_t watchdog_usec;
        usec_t watchdog_next;
        char status[VALUE_MAX];
        unsigned players;
        unsigned max_players;
        char map[VALUE_MAX];
        char name[VALUE_MAX];
        bool ignore_term;
        bool core_dump;
        int crash_signal;
        usec_t crash_at;
        int exit_code;
        usec_t exit_at;
        double burn_cores;
        pthread_t *burners;
        size_t n_burners;

        struct memory_region *regions;
        size_t n_regions;
        uint64_t memory_bytes;
        uint64_t memory_pending;
        uint64_t leak_rate;
        uint64_t leak_carry;
        usec_t leak_last;
        bool memory_error_shown;

        pid_t children[CHILDREN_MAX];
        size_t n_children;

        /* File descriptors. */
        int query_fd;
        int notify_fd;
        int signal_fd;
        int inotify_fd;
        struct sockaddr_un notify_addr;
        socklen_t notify_addr_len;
        bool notify_error_shown;
        bool state_error_shown;

        /* Control file. */
        char *control_applied;
        size_t control_applied_len;
        struct file_stamp control_stamp;
        usec_t control_stamp_since;
        unsigned control_seq;

        struct peer peers[PEERS_MAX];
        uint64_t queries_answered;
        uint64_t queries_dropped;
        uint64_t watchdogs_sent;

        char cgroup[PATH_MAX];
        bool state_dirty;
        bool counters_dirty;
        usec_t state_written_at;
        usec_t next_file_check;
        usec_t file_check_usec;     /* the stat backstop's period (--file-check) */
        usec_t next_refresh;
        bool control_event;
        bool json_event;
};

static atomic_uint burn_generation;

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void log_line(const char *fmt, ...)
{
        va_list ap;

        /* stdout is line-buffered and appended to the slot's log by the supervisor. */
        fputs("slotd-test-server: ", stdout);
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
        fputc('\n', stdout);
}

static usec_t now_usec(clockid_t clock)
{
        struct timespec ts;

        (void) clock_gettime(clock, &ts);
        return (usec_t) ts.tv_sec * USEC_PER_SEC + (usec_t) ts.tv_nsec / 1000;
}

static void copy_string(char *dst, size_t size, const char *src)
{
        size_t n = strnlen(src, size - 1);

        memcpy(dst, src, n);
        dst[n] = '\0';
}

static const char *signal_name(int sig)
{
        const char *n = sigabbrev_np(sig);

        return n ? n : "?";
}

/* ---- value parsers (shared by options and control commands) ---- */

static int parse_uint(const char *s, uint64_t max, uint64_t *ret)
{
        unsigned long long v;
        char *end;

        if (!s || !isdigit((unsigned char) *s))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0' || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

static int parse_double(const char *s, double *ret)
{
        double v;
        char *end;

        if (!s || *s == '\0')
                return -EINVAL;
        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || end == s || !(v >= 0.0))
                return -EINVAL;
        *ret = v;
        return (int) (end - s);
}

/* "512", "64K", "1.5G", "10MiB": powers of 1024, like the supervisor's config. */
static int parse_size(const char *s, uint64_t *ret)
{
        static const char units[] = "KMGT";
        double v, factor = 1.0;
        const char *u;
        int r;

        r = parse_double(s, &v);
        if (r < 0)
                return r;
        u = s + r;
        if (*u != '\0') {
                const char *p = strchr(units, toupper((unsigned char) *u));

                if (!p)
                        return -EINVAL;
                for (const char *q = units; q <= p; q++)
                        factor *= 1024.0;
                u++;
                if (*u == 'i' || *u == 'I')
                        u++;
                if (*u == 'b' || *u == 'B')
                        u++;
                if (*u != '\0')
                        return -EINVAL;
        }
        v *= factor;
        if (v >= 18446744073709551615.0)
                return -ERANGE;
        *ret = (uint64_t) v;
        return 0;
}

static int parse_bool(const char *s, bool *ret)
{
        static const char *const yes[] = { "1", "on", "yes", "true" };
        static const char *const no[] = { "0", "off", "no", "false" };

        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < 4; i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

/* "segv", "SIGSEGV", "11", and "abort" for SIGABRT. */
static int parse_signal(const char *s, int *ret)
{
        uint64_t n;

        if (!s)
                return -EINVAL;
        if (parse_uint(s, NSIG - 1, &n) == 0 && n > 0) {
                *ret = (int) n;
                return 0;
        }
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        if (strcasecmp(s, "abort") == 0) {
                *ret = SIGABRT;
                return 0;
        }
        for (int sig = 1; sig < NSIG; sig++) {
                const char *name = sigabbrev_np(sig);

                if (name && strcasecmp(s, name) == 0) {
                        *ret = sig;
                        return 0;
                }
        }
        return -EINVAL;
}

static int parse_msec(const char *s, usec_t *ret)
{
        uint64_t ms;
        int r;

        r = parse_uint(s, UINT64_MAX / USEC_PER_MSEC, &ms);
        if (r < 0)
                return r;
        *ret = ms * USEC_PER_MSEC;
        return 0;
}

/* ---- files ---- */

static int read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
        char *buf;
        size_t len = 0;
        int fd;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        buf = malloc(max + 1);
        if (!buf) {
                close(fd);
                return -ENOMEM;
        }
        while (len < max) {
                ssize_t n = read(fd, buf + len, max - len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int r = -errno;

                        free(buf);
                        close(fd);
                        return r;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        close(fd);
        buf[len] = '\0';
        *ret = buf;
        *ret_len = len;
        return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, buf, len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                buf += n;
                len -= (size_t) n;
        }
        return 0;
}

static void file_stamp_get(const char *path, struct file_stamp *ret)
{
        struct stat st;

        *ret = (struct file_stamp) {};
        if (stat(path, &st) < 0)
                return;
        *ret = (struct file_stamp) {
                .exists = true,
                .dev = st.st_dev,
                .ino = st.st_ino,
                .size = st.st_size,
                .mtim = st.st_mtim,
                .ctim = st.st_ctim,
        };
}

static bool file_stamp_equal(const struct file_stamp *a, const struct file_stamp *b)
{
        if (a->exists != b->exists)
                return false;
        if (!a->exists)
                return true;
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec &&
               a->ctim.tv_sec == b->ctim.tv_sec && a->ctim.tv_nsec == b->ctim.tv_nsec;
}

/* ---- server.json: a flat object of strings, parsed tolerantly ---- */

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

/* ---- sd_notify, by hand ---- */

static int notify_open(struct server *s)
{
        size_t len = strlen(s->notify_socket);

        if (len == 0)
                return 0;
        if (len >= sizeof(s->notify_addr.sun_path) || (s->notify_socket[0] != '/' &&
                                                       s->notify_socket[0] != '@'))
                return -EINVAL;
        s->notify_addr = (struct sockaddr_un) { .sun_family = AF_UNIX };
        memcpy(s->notify_addr.sun_path, s->notify_socket, len);
        /* "@name" is Linux's abstract namespace: a leading NUL, no terminator counted. */
        if (s->notify_socket[0] == '@')
                s->notify_addr.sun_path[0] = '\0';
        s->notify_addr_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len +
                                          (s->notify_socket[0] == '/'));
        /* Blocking, as sd_notify() is: a full queue at the supervisor (many servers starting
         * at once) delays the message instead of losing it; the timeout bounds the wait. */
        s->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s->notify_fd < 0)
                return -errno;
        (void) setsockopt(s->notify_fd, SOL_SOCKET, SO_SNDTIMEO,
                          &(struct timeval){ .tv_sec = 2 }, sizeof(struct timeval));
        return 0;
}

static bool notify_send(struct server *s, const char *msg)
{
        if (s->notify_fd < 0)
                return false;
        if (sendto(s->notify_fd, msg, strlen(msg), MSG_NOSIGNAL,
                   (const struct sockaddr *) &s->notify_addr, s->notify_addr_len) >= 0)
                return true;
        if (!s->notify_error_shown) {
                log_line("notify: sending \"%s\" to %s failed: %s (further failures not shown)",
                         msg, s->notify_socket, strerror(errno));
                s->notify_error_shown = true;
        }
        return false;
}

static void ready_set(struct server *s, bool ready)
{
        s->ready_at = 0;
        s->ready_wanted = false;
        if (ready)
                (void) notify_send(s, "READY=1");
        if (s->ready != ready)
                log_line("ready=%d", ready);
        s->ready = ready;
        s->state_dirty = true;
}

static void watchdog_ping(struct server *s, usec_t now)
{
        if (notify_send(s, "WATCHDOG=1")) {
                s->watchdogs_sent++;
                s->counters_dirty = true;
        }
        s->watchdog_next = now + s->watchdog_usec;
}

/* ---- memory ---- */

/* bytes is a multiple of the page size. */
static int memory_touch(struct server *s, uint64_t bytes)
{
        size_t page = (size_t) sysconf(_SC_PAGESIZE);

        while (bytes > 0) {
                struct memory_region *region = s->n_regions ? &s->regions[s->n_regions - 1] : NULL;
                size_t chunk;

                if (!region || region->used == region->size) {
                        size_t size = bytes > MEMORY_REGION_BYTES ? bytes : MEMORY_REGION_BYTES;
                        struct memory_region *regions;
                        void *base;

                        regions = realloc(s->regions, (s->n_regions + 1) * sizeof(*regions));
                        if (!regions)
                                return -ENOMEM;
                        s->regions = regions;
                        base = mmap(NULL, size, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                        if (base == MAP_FAILED)
                                return -errno;
                        /* A huge page would charge 2 MiB for a 4 KiB touch. */
                        (void) madvise(base, size, MADV_NOHUGEPAGE);
                        region = &s->regions[s->n_regions++];
                        *region = (struct memory_region) { .base = base, .size = size };
                }
                chunk = region->size - region->used;
                if (chunk > bytes)
                        chunk = bytes;
                for (size_t off = 0; off < chunk; off += page)
                        region->base[region->used + off] = 1;
                region->used += chunk;
                s->memory_bytes += chunk;
                bytes -= chunk;
        }
        return 0;
}

static void memory_free(struct server *s)
{
        for (size_t i = 0; i < s->n_regions; i++)
                (void) munmap(s->regions[i].base, s->regions[i].size);
        free(s->regions);
        s->regions = NULL;
        s->n_regions = 0;
        s->memory_bytes = 0;
        s->memory_pending = 0;
}

static void memory_step(struct server *s, usec_t now)
{
        uint64_t step;
        int r;

        /* now may predate leak_last when the rate was set during this loop turn. */
        if (s->leak_rate > 0 && now > s->leak_last) {
                usec_t elapsed = now - s->leak_last;
                uint64_t amount;

                /* Capped so rate × elapsed stays inside 64 bits after a long stall. */
                if (elapsed > USEC_PER_SEC)
                        elapsed = USEC_PER_SEC;
                amount = s->leak_rate * elapsed + s->leak_carry;
                s->memory_pending += amount / USEC_PER_SEC;
                s->leak_carry = amount % USEC_PER_SEC;
                s->leak_last = now;
        }
        /* Whole pages only: a leak's remainder waits for the next turn rather than rounding up. */
        step = s->memory_pending < MEMORY_STEP_BYTES ? s->memory_pending : MEMORY_STEP_BYTES;
        step -= step % (uint64_t) sysconf(_SC_PAGESIZE);
        if (step == 0)
                return;
        r = memory_touch(s, step);
        if (r < 0) {
                if (!s->memory_error_shown)
                        log_line("grow-memory: allocation failed at %" PRIu64 " bytes: %s",
                                 s->memory_bytes, strerror(-r));
                s->memory_error_shown = true;
                s->memory_pending = 0;
                return;
        }
        s->memory_pending -= step;
        s->counters_dirty = true;
        if (s->memory_pending == 0 && s->leak_rate == 0) {
                log_line("memory now %" PRIu64 " bytes", s->memory_bytes);
                s->state_dirty = true;
        }
}

/* ---- CPU burners: the only threads, and the only busy loops ---- */

struct burner_args {
        unsigned generation;
        usec_t busy_usec;
};

/*
 * Busy time is counted on the thread's own CPU clock, not the wall clock:
 * on a loaded host a wall-clock duty cycle would be preempted and burn less
 * than asked, and the supervisor measures CPU time.
 */
static void *burner_main(void *userdata)
{
        struct burner_args a = *(struct burner_args *) userdata;
        usec_t period_end = now_usec(CLOCK_MONOTONIC) + BURN_PERIOD_USEC;

        free(userdata);
        while (atomic_load_explicit(&burn_generation, memory_order_relaxed) == a.generation) {
                usec_t cpu_start = now_usec(CLOCK_THREAD_CPUTIME_ID);
                usec_t now = now_usec(CLOCK_MONOTONIC), next_cpu_check = now + a.busy_usec;

                /*
                 * The CPU clock is a real system call, so it is read only once
                 * the wall clock says the target could have been reached.
                 */
                while (now < period_end) {
                        if (atomic_load_explicit(&burn_generation, memory_order_relaxed) !=
                            a.generation)
                                return NULL;
                        now = now_usec(CLOCK_MONOTONIC);
                        if (now < next_cpu_check)
                                continue;
                        if (now_usec(CLOCK_THREAD_CPUTIME_ID) - cpu_start >= a.busy_usec)
                                break;
                        next_cpu_check = now + 200;
                }

                if (now < period_end) {
                        struct timespec ts = {
                                .tv_sec = (time_t) (period_end / USEC_PER_SEC),
                                .tv_nsec = (long) (period_end % USEC_PER_SEC) * 1000,
                        };

                        (void) clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
                }
                period_end += BURN_PERIOD_USEC;
                /* After a stall (throttled by cpu.max) start afresh instead of catching up. */
                now = now_usec(CLOCK_MONOTONIC);
                if (now > period_end)
                        period_end = now + BURN_PERIOD_USEC;
        }
        return NULL;
}

static void burn_stop(struct server *s)
{
        atomic_fetch_add(&burn_generation, 1);
        for (size_t i = 0; i < s->n_burners; i++)
                (void) pthread_join(s->burners[i], NULL);
        free(s->burners);
        s->burners = NULL;
        s->n_burners = 0;
        s->burn_cores = 0;
}

/* The load is spread evenly: 1.5 cores is two threads at 75 %, not one full and one half. */
static int burn_start(struct server *s, double cores)
{
        sigset_t all, saved;
        size_t n;
        int r = 0;

        burn_stop(s);
        if (cores <= 0.0)
                return 0;
        n = (size_t) cores;
        if ((double) n < cores)
                n++;
        s->burners = calloc(n, sizeof(pthread_t));
        if (!s->burners)
                return -ENOMEM;

        /* Signals belong to the main thread's signalfd, never to a burner. */
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &saved);
        for (size_t i = 0; i < n; i++) {
                struct burner_args *a = malloc(sizeof(*a));

                if (!a) {
                        r = -ENOMEM;
                        break;
                }
                *a = (struct burner_args) {
                        .generation = atomic_load(&burn_generation),
                        .busy_usec = (usec_t) (cores / (double) n * (double) BURN_PERIOD_USEC),
                };
                r = -pthread_create(&s->burners[i], NULL, burner_main, a);
                if (r < 0) {
                        free(a);
                        break;
                }
                s->n_burners++;
        }
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        s->burn_cores = cores;
        return r;
}

/* ---- children, crashes, exits ---- */

static void close_all_from(int lowfd)
{
        long max;

        if (syscall(SYS_close_range, (unsigned) lowfd, ~0U, 0) == 0)
                return;
        max = sysconf(_SC_OPEN_MAX);
        if (max < 0 || max > 65536)
                max = 65536;
        for (int fd = lowfd; fd < max; fd++)
                (void) close(fd);
}

static int child_spawn(struct server *s)
{
        sigset_t none;
        pid_t pid;

        if (s->n_children >= CHILDREN_MAX)
                return -EMFILE;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid > 0) {
                s->children[s->n_children++] = pid;
                return 0;
        }

        /*
         * The child only sleeps: it exists so the supervisor has to find and
         * kill the whole cgroup, not just the main process.  It must not hold
         * the query port, or a restarted server could not bind it.
         */
        (void) signal(SIGTERM, s->ignore_term ? SIG_IGN : SIG_DFL);
        (void) signal(SIGINT, SIG_DFL);
        (void) signal(SIGHUP, SIG_DFL);
        (void) signal(SIGCHLD, SIG_DFL);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        close_all_from(3);
        (void) prctl(PR_SET_NAME, "slotd-test-chld", 0, 0, 0);
        for (;;)
                pause();
}

static void children_reap(struct server *s)
{
        for (;;) {
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);

                if (pid <= 0)
                        return;
                for (size_t i = 0; i < s->n_children; i++) {
                        if (s->children[i] != pid)
                                continue;
                        s->children[i] = s->children[--s->n_children];
                        break;
                }
                if (WIFSIGNALED(status))
                        log_line("child %d killed by SIG%s", (int) pid,
                                 signal_name(WTERMSIG(status)));
                else
                        log_line("child %d exited with %d", (int) pid, WEXITSTATUS(status));
                s->state_dirty = true;
        }
}

static void __attribute__((noreturn)) die_by_signal(int sig)
{
        struct sigaction sa = { .sa_handler = SIG_DFL };
        sigset_t set;

        log_line("crashing with SIG%s", signal_name(sig));
        fflush(stdout);
        if (sig == SIGABRT)
                abort();
        (void) sigaction(sig, &sa, NULL);
        sigemptyset(&set);
        sigaddset(&set, sig);
        (void) pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        (void) raise(sig);
        /* A signal whose default action is not fatal (SIGCHLD, SIGCONT...) still has to crash. */
        log_line("SIG%s did not kill, using SIGKILL", signal_name(sig));
        fflush(stdout);
        (void) kill(getpid(), SIGKILL);
        _exit(128 + sig);
}

static void __attribute__((noreturn)) exit_with(int code, const char *why)
{
        log_line("%s, exiting with code %d", why, code);
        fflush(stdout);
        exit(code);
}

/* ---- control commands: one grammar for options, at-start and control files ---- */

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
};

/* One line: "command [argument...]"; the argument is the rest of the line, trimmed. */
static int command_run_line(struct server *s, const char *line, const char *origin)
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

static void command_run_text(struct server *s, const char *text, size_t len, const char *origin)
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
static void control_check(struct server *s, usec_t now, bool baseline, bool reread)
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

/* ---- server.json ---- */

enum json_read {
        JSON_IF_STAMP_CHANGED,
        /*
         * Timestamps tick by the jiffy: two same-size rewrites within one
         * tick look alike, so after an inotify event the content decides.
         */
        JSON_IF_CONTENT_CHANGED,
        JSON_ALWAYS,
};

static bool server_json_equal(const struct server_json *a, const struct server_json *b)
{
        for (int i = 0; i < _SJ_MAX; i++)
                if (a->present[i] != b->present[i] || strcmp(a->value[i], b->value[i]) != 0)
                        return false;
        return true;
}

static void json_check(struct server *s, enum json_read how)
{
        struct file_stamp stamp;
        struct server_json j;
        char old_uuid[VALUE_MAX];
        size_t len;
        char *buf;
        bool force;
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

/* ---- queries ---- */

static uint32_t random_u32(void)
{
        uint32_t v;

        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == sizeof(v))
                return v;
        /* Only predictable challenges are at stake, and only if getrandom() is unavailable. */
        v = (uint32_t) now_usec(CLOCK_MONOTONIC) * 2654435761u ^ (uint32_t) getpid();
        return v;
}

static struct peer *peer_get(struct server *s, const struct sockaddr_in *addr, bool create)
{
        struct peer *oldest = &s->peers[0];

        for (size_t i = 0; i < PEERS_MAX; i++) {
                struct peer *p = &s->peers[i];

                if (p->in_use && p->addr.sin_addr.s_addr == addr->sin_addr.s_addr &&
                    p->addr.sin_port == addr->sin_port) {
                        p->last_used = now_usec(CLOCK_MONOTONIC);
                        return p;
                }
                if (!p->in_use || (oldest->in_use && p->last_used < oldest->last_used))
                        oldest = p;
        }
        if (!create)
                return NULL;
        *oldest = (struct peer) {
                .in_use = true,
                .addr = *addr,
                .last_used = now_usec(CLOCK_MONOTONIC),
        };
        return oldest;
}

struct packet {
        uint8_t data[PACKET_MAX];
        size_t len;
        bool overflow;
};

static void put_bytes(struct packet *p, const void *data, size_t n)
{
        if (p->overflow || n > sizeof(p->data) - p->len) {
                p->overflow = true;
                return;
        }
        memcpy(p->data + p->len, data, n);
        p->len += n;
}

static void put_u8(struct packet *p, uint8_t v)
{
        put_bytes(p, &v, 1);
}

static void put_u16be(struct packet *p, uint16_t v)
{
        uint8_t b[2] = { (uint8_t) (v >> 8), (uint8_t) v };

        put_bytes(p, b, 2);
}

static void put_u16le(struct packet *p, uint16_t v)
{
        uint8_t b[2] = { (uint8_t) v, (uint8_t) (v >> 8) };

        put_bytes(p, b, 2);
}

static void put_u32be(struct packet *p, uint32_t v)
{
        uint8_t b[4] = {
                (uint8_t) (v >> 24), (uint8_t) (v >> 16), (uint8_t) (v >> 8), (uint8_t) v,
        };

        put_bytes(p, b, 4);
}

static void patch_u16be(struct packet *p, size_t at, uint16_t v)
{
        p->data[at] = (uint8_t) (v >> 8);
        p->data[at + 1] = (uint8_t) v;
}

static void patch_u32be(struct packet *p, size_t at, uint32_t v)
{
        p->data[at] = (uint8_t) (v >> 24);
        p->data[at + 1] = (uint8_t) (v >> 16);
        p->data[at + 2] = (uint8_t) (v >> 8);
        p->data[at + 3] = (uint8_t) v;
}

/* SQP strings are a length byte and the bytes, so anything past 255 is cut. */
static void put_str8(struct packet *p, const char *str)
{
        size_t n = strlen(str);

        if (n > 255)
                n = 255;
        put_u8(p, (uint8_t) n);
        put_bytes(p, str, n);
}

static void put_cstr(struct packet *p, const char *str)
{
        put_bytes(p, str, strlen(str) + 1);
}

static uint32_t get_u32be(const uint8_t *b)
{
        return (uint32_t) b[0] << 24 | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 | b[3];
}

static const char *server_name(struct server *s, char *buf, size_t size)
{
        if (s->name[0] != '\0')
                return s->name;
        snprintf(buf, size, "slotd-test-%s", s->server_id);
        return buf;
}

static void sqp_handle(struct server *s, const struct sockaddr_in *from, const uint8_t *in,
                       size_t n, struct packet *out)
{
        char namebuf[VALUE_MAX + 16];
        struct peer *peer;
        uint32_t challenge;
        size_t chunk_at;

        if (in[0] == 0x00) {
                if (n < 5)
                        return;
                peer = peer_get(s, from, true);
                do {
                        peer->sqp_challenge = random_u32();
                } while (peer->sqp_challenge == 0);
                peer->has_sqp = true;
                put_u8(out, 0x00);
                put_u32be(out, peer->sqp_challenge);
                return;
        }

        /* A query: 01, challenge, version, requested chunks. */
        if (n < 8)
                return;
        challenge = get_u32be(in + 1);
        peer = peer_get(s, from, false);
        if (!peer || !peer->has_sqp || peer->sqp_challenge != challenge)
                return;

        put_u8(out, 0x01);
        put_u32be(out, challenge);
        put_u16be(out, 1);
        put_u8(out, 0);
        put_u8(out, 0);
        put_u16be(out, 0);
        if (in[7] & SQP_CHUNK_SERVER_INFO) {
                chunk_at = out->len;
                put_u32be(out, 0);
                put_u16be(out, (uint16_t) s->players);
                put_u16be(out, (uint16_t) s->max_players);
                put_str8(out, server_name(s, namebuf, sizeof(namebuf)));
                put_str8(out, "test");
                put_str8(out, s->build_id);
                put_str8(out, s->map);
                put_u16be(out, s->port);
                if (!out->overflow)
                        patch_u32be(out, chunk_at, (uint32_t) (out->len - chunk_at - 4));
        }
        if (!out->overflow)
                patch_u16be(out, 9, (uint16_t) (out->len - 11));
}

static uint8_t clamp_u8(unsigned v)
{
        return v > 255 ? 255 : (uint8_t) v;
}

static void a2s_handle(struct server *s, const struct sockaddr_in *from, const uint8_t *in,
                       size_t n, struct packet *out)
{
        static const uint8_t info_request[25] = "\xff\xff\xff\xff" "TSource Engine Query";
        char namebuf[VALUE_MAX + 16];

        if (n < sizeof(info_request) || memcmp(in, info_request, sizeof(info_request)) != 0)
                return;

        if (s->a2s_challenge) {
                struct peer *peer = peer_get(s, from, true);

                if (!peer->has_a2s) {
                        uint32_t v;

                        /* 0xFFFFFFFF is what clients send to ask for a challenge. */
                        do {
                                v = random_u32();
                        } while (v == 0 || v == UINT32_MAX);
                        memcpy(peer->a2s_challenge, &v, 4);
                        peer->has_a2s = true;
                }
                if (n < sizeof(info_request) + 4 ||
                    memcmp(in + sizeof(info_request), peer->a2s_challenge, 4) != 0) {
                        put_bytes(out, "\xff\xff\xff\xff\x41", 5);
                        put_bytes(out, peer->a2s_challenge, 4);
                        return;
                }
        }

        put_bytes(out, "\xff\xff\xff\xff\x49", 5);
        put_u8(out, 17);
        put_cstr(out, server_name(s, namebuf, sizeof(namebuf)));
        put_cstr(out, s->map);
        put_cstr(out, "slotd");
        put_cstr(out, "slotd test");
        put_u16le(out, 0);
        put_u8(out, clamp_u8(s->players));
        put_u8(out, clamp_u8(s->max_players));
        put_u8(out, 0);
        put_u8(out, 'd');
        put_u8(out, 'l');
        put_u8(out, 0);
        put_u8(out, 0);
        put_cstr(out, "1.0.0.0");
        put_u8(out, 0x80);
        put_u16le(out, s->port);
}

static void query_handle(struct server *s)
{
        /* Bounded per wake-up so a flood cannot starve signals and the control file. */
        for (int i = 0; i < 64; i++) {
                struct sockaddr_in from;
                socklen_t fromlen = sizeof(from);
                uint8_t in[PACKET_MAX];
                struct packet out = {};
                ssize_t n;

                n = recvfrom(s->query_fd, in, sizeof(in), 0, (struct sockaddr *) &from, &fromlen);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return;
                if (n == 0 || !s->query_enabled || fromlen < sizeof(from)) {
                        s->queries_dropped++;
                        s->counters_dirty = true;
                        continue;
                }
                if (in[0] == 0x00 || in[0] == 0x01)
                        sqp_handle(s, &from, in, (size_t) n, &out);
                else if (in[0] == 0xff)
                        a2s_handle(s, &from, in, (size_t) n, &out);
                if (out.len == 0 || out.overflow) {
                        s->queries_dropped++;
                        s->counters_dirty = true;
                        continue;
                }
                (void) sendto(s->query_fd, out.data, out.len, MSG_DONTWAIT,
                              (struct sockaddr *) &from, fromlen);
                s->queries_answered++;
                s->counters_dirty = true;
        }
}

static int query_open(struct server *s)
{
        struct sockaddr_in addr = {
                .sin_family = AF_INET,
                .sin_port = htons(s->query_port),
                .sin_addr.s_addr = htonl(INADDR_ANY),
        };
        int fd, r;

        /* No SO_REUSEADDR: two servers sharing a query port must show up as a bind failure. */
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &addr, sizeof(addr)) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        s->query_fd = fd;
        return 0;
}

/* ---- state file ---- */

static void cgroup_read(char *buf, size_t size)
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


/* Our PID as the supervisor sees it. slotd starts servers in a PID namespace of their own,
 * where getpid() is small; /proc is the host's, and its "self" link names us in the host's
 * namespace. */
static int host_pid(void)
{
        char buf[32];
        ssize_t n = readlink("/proc/self", buf, sizeof(buf) - 1);

        if (n <= 0)
                return (int) getpid();
        buf[n] = '\0';
        return atoi(buf) > 0 ? atoi(buf) : (int) getpid();
}

static void state_write(struct server *s, usec_t now)
{
        char *buf = NULL, tmp[PATH_MAX + 64], key[64], pids[CHILDREN_MAX * 12] = "";
        size_t len = 0, off = 0;
        FILE *f;
        int fd, r;

        s->state_dirty = false;
        s->counters_dirty = false;
        s->state_written_at = now;
        f = open_memstream(&buf, &len);
        if (!f)
                return;
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
        put_kv(f, "name", server_name(s, tmp, sizeof(tmp)));
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
        if (fclose(f) != 0) {
                free(buf);
                return;
        }

        /* Rename, so a test never reads a half-written state. */
        snprintf(tmp, sizeof(tmp), "%s.tmp", s->state_path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        r = fd < 0 ? -errno : write_all(fd, buf, len);
        if (fd >= 0 && close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, s->state_path) < 0)
                r = -errno;
        free(buf);
        if (r < 0 && !s->state_error_shown) {
                log_line("cannot write %s: %s (further failures not shown)", s->state_path,
                         strerror(-r));
                s->state_error_shown = true;
        }
}

static void starts_append(struct server *s)
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

/* ---- signals and the main loop ---- */

static void reload(struct server *s, usec_t now)
{
        json_check(s, JSON_ALWAYS);
        control_check(s, now, false, true);
        s->state_dirty = true;
}

static void signals_handle(struct server *s, usec_t now)
{
        struct signalfd_siginfo si;

        while (read(s->signal_fd, &si, sizeof(si)) == sizeof(si)) {
                switch (si.ssi_signo) {
                case SIGTERM:
                        if (s->ignore_term) {
                                log_line("SIGTERM from pid %u ignored", si.ssi_pid);
                                break;
                        }
                        log_line("SIGTERM, exiting");
                        (void) notify_send(s, "STOPPING=1");
                        fflush(stdout);
                        exit(0);
                case SIGINT:
                        log_line("SIGINT, exiting");
                        fflush(stdout);
                        exit(0);
                case SIGHUP:
                        log_line("SIGHUP, re-reading %s and %s", JSON_NAME, CONTROL_NAME);
                        reload(s, now);
                        break;
                case SIGCHLD:
                        children_reap(s);
                        break;
                }
        }
}

static void inotify_handle(struct server *s)
{
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n;

        /* Only a wake-up: the content comparison decides what changed, so nothing runs twice. */
        while ((n = read(s->inotify_fd, buf, sizeof(buf))) > 0) {
                for (char *p = buf; p < buf + n;) {
                        struct inotify_event *ev = (struct inotify_event *) p;

                        if (ev->len > 0 && strcmp(ev->name, CONTROL_NAME) == 0)
                                s->control_event = true;
                        if (ev->len > 0 && strcmp(ev->name, JSON_NAME) == 0)
                                s->json_event = true;
                        p += sizeof(*ev) + ev->len;
                }
        }
}

static void deadline_min(usec_t *next, usec_t deadline)
{
        if (deadline != 0 && deadline < *next)
                *next = deadline;
}

static void timers_run(struct server *s, usec_t now)
{
        if (s->ready_at != 0 && now >= s->ready_at)
                ready_set(s, true);
        if (s->exit_at != 0 && now >= s->exit_at)
                exit_with(s->exit_code, "exit-after expired");
        if (s->crash_at != 0 && now >= s->crash_at)
                die_by_signal(s->crash_signal);
        if (s->watchdog_enabled && s->watchdog_usec > 0 && now >= s->watchdog_next)
                watchdog_ping(s, now);
        if (now >= s->next_file_check || s->json_event || s->control_event) {
                json_check(s, s->json_event ? JSON_IF_CONTENT_CHANGED : JSON_IF_STAMP_CHANGED);
                control_check(s, now, false, s->control_event);
                s->json_event = false;
                s->control_event = false;
                s->next_file_check = now + s->file_check_usec;
        }
        if (now >= s->next_refresh) {
                char cgroup[sizeof(s->cgroup)];

                /* The supervisor's fork fallback moves us into the slot's cgroup after exec. */
                cgroup_read(cgroup, sizeof(cgroup));
                if (strcmp(cgroup, s->cgroup) != 0) {
                        copy_string(s->cgroup, sizeof(s->cgroup), cgroup);
                        s->state_dirty = true;
                }
                s->next_refresh = now + STATE_REFRESH_USEC;
        }
        memory_step(s, now);
        if (s->state_dirty ||
            (s->counters_dirty && now - s->state_written_at >= STATE_REFRESH_USEC))
                state_write(s, now);
}

static int poll_timeout(struct server *s, usec_t now)
{
        usec_t next = s->next_file_check;

        if (s->memory_pending >= (uint64_t) sysconf(_SC_PAGESIZE))
                return 0;
        deadline_min(&next, s->ready_at);
        deadline_min(&next, s->exit_at);
        deadline_min(&next, s->crash_at);
        if (s->watchdog_enabled && s->watchdog_usec > 0)
                deadline_min(&next, s->watchdog_next);
        if (next <= now)
                return 0;
        return (int) ((next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
}

static void __attribute__((noreturn)) main_loop(struct server *s)
{
        for (;;) {
                struct pollfd fds[3];
                nfds_t n = 0;
                usec_t now;
                int r;

                now = now_usec(CLOCK_MONOTONIC);
                timers_run(s, now);
                fds[n++] = (struct pollfd) { .fd = s->signal_fd, .events = POLLIN };
                if (s->query_fd >= 0)
                        fds[n++] = (struct pollfd) { .fd = s->query_fd, .events = POLLIN };
                if (s->inotify_fd >= 0)
                        fds[n++] = (struct pollfd) { .fd = s->inotify_fd, .events = POLLIN };
                r = poll(fds, n, poll_timeout(s, now));
                if (r < 0 && errno != EINTR) {
                        log_line("poll failed: %s", strerror(errno));
                        exit(1);
                }
                if (r <= 0)
                        continue;
                now = now_usec(CLOCK_MONOTONIC);
                signals_handle(s, now);
                if (s->query_fd >= 0)
                        query_handle(s);
                if (s->inotify_fd >= 0)
                        inotify_handle(s);
        }
}

/* ---- start-up ---- */

static void usage(void)
{
        fputs("Usage: slotd-test-server [OPTION...]\n"
              "\n"
              "Fake dedicated game server for slotd's tests. Reads $HOME/server.json,\n"
              "answers SQP and A2S_INFO on the query port, speaks sd_notify, and\n"
              "misbehaves on request. State: $HOME/" STATE_NAME ".\n"
              "Run-time commands: $HOME/" CONTROL_NAME " (changes only) and\n"
              "$HOME/" AT_START_NAME " (applied at every start).\n"
              "Unknown options are ignored, so Unity-style arguments pass through.\n"
              "\n"
              "Identity (command line > environment > server.json):\n"
              "  --home DIR               home directory ($HOME)\n"
              "  --server-id ID           ($SERVER_ID)\n"
              "  --port N                 game port ($PORT)\n"
              "  --query-port N           UDP query port ($QUERY_PORT)\n"
              "  --allocation-uuid UUID   if server.json is unreadable ($ALLOCATION_UUID)\n"
              "  --server-log-dir DIR     ($SERVER_LOG_DIR)\n"
              "  --notify-socket PATH     sd_notify socket, \"@name\" = abstract ($NOTIFY_SOCKET)\n"
              "  --build-id ID            SQP build id ($BUILD_ID, else \"dev\")\n"
              "\n"
              "Queries and readiness:\n"
              "  --no-query               keep the query socket but answer nothing\n"
              "  --a2s-challenge          A2S_INFO demands the S2C_CHALLENGE round\n"
              "  --no-ready               never send READY=1 by itself\n"
              "  --ready-delay MS         send READY=1 this long after start\n"
              "  --file-check MS          stat server.json and the control file this often\n"
              "                           besides inotify (default 50; a bench of a\n"
              "                           thousand servers sets 1000)\n"
              "  --watchdog-usec USEC     send WATCHDOG=1 this often (default: half of\n"
              "                           $WATCHDOG_USEC, else never)\n"
              "  --status TEXT            send STATUS=TEXT at start\n"
              "  --players N  --max-players N  --map NAME  --name NAME\n"
              "                           query answers (0, 16, test-map, slotd-test-<serverID>)\n"
              "\n"
              "Misbehaviour:\n"
              "  --burn-cpu CORES         keep CORES cores busy (e.g. 1.5)\n"
              "  --grow-memory SIZE       allocate and touch SIZE more (K/M/G/T)\n"
              "  --grow-memory-rate SIZE  leak SIZE per second, without end\n"
              "  --crash-after MS         die by the crash signal after MS\n"
              "  --crash-signal SIG       signal for --crash-after (default SIGABRT)\n"
              "  --exit-after MS          exit after MS ...\n"
              "  --exit-code N            ... with this code (default 0)\n"
              "  --ignore-term            survive SIGTERM\n"
              "  --fork N                 fork N children that sleep forever\n"
              "  --core-dump              keep RLIMIT_CORE (default: set to 0)\n"
              "  --help                   this text\n"
              "\n"
              "Commands (control files; one per line, '#' comments):\n"
              "  burn-cpu CORES | grow-memory SIZE | grow-memory-rate SIZE | free-memory\n"
              "  query on|off | a2s-challenge on|off | ready 0|1 | watchdog on|off\n"
              "  watchdog-usec USEC | status TEXT | notify TEXT (\\n separates lines)\n"
              "  crash [SIG] | crash-after MS [SIG] | exit [CODE] | exit-after MS [CODE]\n"
              "  ignore-term on|off | fork N | kill-children\n"
              "  players N | max-players N | map NAME | name NAME\n"
              "Signals: SIGTERM exits 0 (unless ignore-term); SIGHUP re-reads server.json\n"
              "and the control file.\n",
              stdout);
}

enum {
        OPT_HOME = 256,
        OPT_SERVER_ID,
        OPT_PORT,
        OPT_QUERY_PORT,
        OPT_ALLOCATION_UUID,
        OPT_SERVER_LOG_DIR,
        OPT_NOTIFY_SOCKET,
        OPT_BUILD_ID,
        OPT_NO_READY,
        OPT_READY_DELAY,
        OPT_FILE_CHECK,
        OPT_CRASH_SIGNAL,
        OPT_EXIT_CODE,
        OPT_CORE_DUMP,
        OPT_NO_QUERY,
        OPT_A2S_CHALLENGE,
        OPT_IGNORE_TERM,
        OPT_COMMAND,
};


struct options {
        const char *home;
        const char *server_id;
        const char *port;
        const char *query_port;
        const char *allocation_uuid;
        const char *server_log_dir;
        const char *notify_socket;
        const char *build_id;
        char **lines;
        size_t n_lines;
};

static void __attribute__((noreturn)) usage_error(const char *what, const char *arg)
{
        fprintf(stderr, "slotd-test-server: invalid %s \"%s\"\n", what, arg);
        exit(2);
}

static void options_parse(struct server *s, struct options *o, int argc, char **argv)
{
        static const struct option longopts[] = {
                { "help", no_argument, NULL, 'h' },
                { "home", required_argument, NULL, OPT_HOME },
                { "server-id", required_argument, NULL, OPT_SERVER_ID },
                { "port", required_argument, NULL, OPT_PORT },
                { "query-port", required_argument, NULL, OPT_QUERY_PORT },
                { "allocation-uuid", required_argument, NULL, OPT_ALLOCATION_UUID },
                { "server-log-dir", required_argument, NULL, OPT_SERVER_LOG_DIR },
                { "notify-socket", required_argument, NULL, OPT_NOTIFY_SOCKET },
                { "build-id", required_argument, NULL, OPT_BUILD_ID },
                { "no-ready", no_argument, NULL, OPT_NO_READY },
                { "ready-delay", required_argument, NULL, OPT_READY_DELAY },
                { "file-check", required_argument, NULL, OPT_FILE_CHECK },
                { "crash-signal", required_argument, NULL, OPT_CRASH_SIGNAL },
                { "exit-code", required_argument, NULL, OPT_EXIT_CODE },
                { "core-dump", no_argument, NULL, OPT_CORE_DUMP },
                { "no-query", no_argument, NULL, OPT_NO_QUERY },
                { "a2s-challenge", no_argument, NULL, OPT_A2S_CHALLENGE },
                /* Named like a command: queued as "name argument" and run after start-up. */
                { "watchdog-usec", required_argument, NULL, OPT_COMMAND },
                { "status", required_argument, NULL, OPT_COMMAND },
                { "players", required_argument, NULL, OPT_COMMAND },
                { "max-players", required_argument, NULL, OPT_COMMAND },
                { "map", required_argument, NULL, OPT_COMMAND },
                { "name", required_argument, NULL, OPT_COMMAND },
                { "burn-cpu", required_argument, NULL, OPT_COMMAND },
                { "grow-memory", required_argument, NULL, OPT_COMMAND },
                { "grow-memory-rate", required_argument, NULL, OPT_COMMAND },
                { "crash-after", required_argument, NULL, OPT_COMMAND },
                { "exit-after", required_argument, NULL, OPT_COMMAND },
                { "ignore-term", no_argument, NULL, OPT_IGNORE_TERM },
                { "fork", required_argument, NULL, OPT_COMMAND },
                {}
        };
        uint64_t v;
        int c, idx;

        o->lines = calloc((size_t) argc + 1, sizeof(char *));
        if (!o->lines)
                usage_error("memory", "out of memory");

        /*
         * Long options also match with one dash ("-port 7777"), as Unity
         * servers take them, and anything unknown is passed over: a fleet's
         * arguments are written for real game servers.
         */
        opterr = 0;
        while ((c = getopt_long_only(argc, argv, "h", longopts, &idx)) != -1) {
                switch (c) {
                case 'h':
                        usage();
                        exit(0);
                case OPT_HOME:
                        o->home = optarg;
                        break;
                case OPT_SERVER_ID:
                        o->server_id = optarg;
                        break;
                case OPT_PORT:
                        o->port = optarg;
                        break;
                case OPT_QUERY_PORT:
                        o->query_port = optarg;
                        break;
                case OPT_ALLOCATION_UUID:
                        o->allocation_uuid = optarg;
                        break;
                case OPT_SERVER_LOG_DIR:
                        o->server_log_dir = optarg;
                        break;
                case OPT_NOTIFY_SOCKET:
                        o->notify_socket = optarg;
                        break;
                case OPT_BUILD_ID:
                        o->build_id = optarg;
                        break;
                case OPT_NO_READY:
                        s->ready_wanted = false;
                        break;
                case OPT_READY_DELAY:
                        if (parse_msec(optarg, &s->ready_delay) < 0)
                                usage_error("--ready-delay", optarg);
                        break;
                case OPT_FILE_CHECK:
                        if (parse_msec(optarg, &s->file_check_usec) < 0 || s->file_check_usec == 0)
                                usage_error("--file-check", optarg);
                        break;
                case OPT_CRASH_SIGNAL:
                        if (parse_signal(optarg, &s->crash_signal) < 0)
                                usage_error("--crash-signal", optarg);
                        break;
                case OPT_EXIT_CODE:
                        if (parse_uint(optarg, 255, &v) < 0)
                                usage_error("--exit-code", optarg);
                        s->exit_code = (int) v;
                        break;
                case OPT_CORE_DUMP:
                        s->core_dump = true;
                        break;
                /* Flags are set before any option command runs: "--fork 2 --ignore-term" works. */
                case OPT_NO_QUERY:
                        s->query_enabled = false;
                        break;
                case OPT_A2S_CHALLENGE:
                        s->a2s_challenge = true;
                        break;
                case OPT_IGNORE_TERM:
                        s->ignore_term = true;
                        break;
                case OPT_COMMAND:
                        if (asprintf(&o->lines[o->n_lines], "%s %s", longopts[idx].name,
                                     optarg) < 0)
                                usage_error("memory", "out of memory");
                        o->n_lines++;
                        break;
                default:
                        fprintf(stderr, "slotd-test-server: ignoring argument \"%s\"\n",
                                argv[optind - 1]);
                        break;
                }
        }
        for (int i = optind; i < argc; i++)
                fprintf(stderr, "slotd-test-server: ignoring argument \"%s\"\n", argv[i]);
}

static const char *pick(const char *option, const char *env, const char *json)
{
        if (option)
                return option;
        if (env && getenv(env))
                return getenv(env);
        return json;
}

static uint16_t pick_port(const char *what, const char *value)
{
        uint64_t v;

        if (!value || *value == '\0')
                return 0;
        if (parse_uint(value, UINT16_MAX, &v) < 0) {
                log_line("invalid %s \"%s\", ignoring", what, value);
                return 0;
        }
        return (uint16_t) v;
}

static void paths_init(struct server *s, const char *home)
{
        copy_string(s->home, sizeof(s->home), home);
        snprintf(s->state_path, sizeof(s->state_path), "%s/%s", s->home, STATE_NAME);
        snprintf(s->starts_path, sizeof(s->starts_path), "%s/%s", s->home, STARTS_NAME);
        snprintf(s->control_path, sizeof(s->control_path), "%s/%s", s->home, CONTROL_NAME);
        snprintf(s->at_start_path, sizeof(s->at_start_path), "%s/%s", s->home, AT_START_NAME);
        snprintf(s->json_path, sizeof(s->json_path), "%s/%s", s->home, JSON_NAME);
}

static char *argv_join(int argc, char **argv)
{
        size_t len = 1;
        char *buf;

        for (int i = 0; i < argc; i++)
                len += strlen(argv[i]) + 1;
        buf = calloc(1, len);
        if (!buf)
                return NULL;
        for (int i = 0; i < argc; i++) {
                if (i > 0)
                        strcat(buf, " ");
                strcat(buf, argv[i]);
        }
        return buf;
}

static int signals_open(void)
{
        sigset_t set;

        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return -errno;
        (void) signal(SIGPIPE, SIG_IGN);
        return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

static void identity_init(struct server *s, const struct options *o)
{
        const char *v;

        json_check(s, JSON_ALWAYS);
        if (!s->json_valid)
                copy_string(s->allocated_uuid, sizeof(s->allocated_uuid),
                            pick(o->allocation_uuid, "ALLOCATION_UUID", ""));

        v = pick(o->server_id, "SERVER_ID", s->json.value[SJ_SERVER_ID]);
        copy_string(s->server_id, sizeof(s->server_id), v);
        s->port = pick_port("port", pick(o->port, "PORT", s->json.value[SJ_PORT]));
        s->query_port = pick_port("query port", pick(o->query_port, "QUERY_PORT",
                                                     s->json.value[SJ_QUERY_PORT]));
        v = pick(o->server_log_dir, "SERVER_LOG_DIR", s->json.value[SJ_SERVER_LOG_DIR]);
        copy_string(s->server_log_dir, sizeof(s->server_log_dir), v);
        v = pick(o->notify_socket, "NOTIFY_SOCKET", "");
        copy_string(s->notify_socket, sizeof(s->notify_socket), v);
        v = pick(o->build_id, "BUILD_ID", "dev");
        copy_string(s->build_id, sizeof(s->build_id), v);
}

/* systemd's convention: WATCHDOG_USEC is the deadline, so ping at half of it. */
static void watchdog_from_env(struct server *s)
{
        const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
        uint64_t deadline, owner;

        if (!usec || parse_uint(usec, UINT64_MAX, &deadline) < 0 || deadline == 0)
                return;
        /* Meant for another process of the same environment (a wrapper, say). */
        if (pid && parse_uint(pid, INT_MAX, &owner) == 0 && (pid_t) owner != getpid())
                return;
        s->watchdog_usec = deadline / 2 > 0 ? deadline / 2 : 1;
        s->watchdog_enabled = true;
}

/* The 50 ms stat check works without it; inotify only makes changes land sooner. */
static void inotify_open(struct server *s)
{
        s->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (s->inotify_fd < 0)
                return;
        if (inotify_add_watch(s->inotify_fd, s->home, IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY |
                                                      IN_CREATE | IN_DELETE | IN_ATTRIB) < 0) {
                close(s->inotify_fd);
                s->inotify_fd = -1;
        }
}

/* Options first, then the at-start file, which may override them per slot. */
static int start_commands_run(struct server *s, const struct options *o)
{
        size_t len;
        char *text;
        int r;

        for (size_t i = 0; i < o->n_lines; i++) {
                r = command_run_line(s, o->lines[i], "option");
                if (r < 0)
                        return r;
        }
        if (read_file(s->at_start_path, CONTROL_MAX_BYTES, &text, &len) == 0) {
                command_run_text(s, text, len, AT_START_NAME);
                free(text);
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct server s = {
                .query_fd = -1,
                .notify_fd = -1,
                .signal_fd = -1,
                .inotify_fd = -1,
                .file_check_usec = FILE_CHECK_USEC,
                .query_enabled = true,
                .ready_wanted = true,
                .crash_signal = SIGABRT,
                .max_players = 16,
                .map = "test-map",
        };
        struct options o = {};
        const char *home;
        usec_t now;
        int r;

        /* First, so restart latency is measured from as close to exec as we can get. */
        s.start_monotonic = now_usec(CLOCK_MONOTONIC);
        s.start_realtime = now_usec(CLOCK_REALTIME);
        setvbuf(stdout, NULL, _IOLBF, 0);

        s.argv_joined = argv_join(argc, argv);
        if (!s.argv_joined)
                return 1;
        options_parse(&s, &o, argc, argv);

        home = o.home ? o.home : getenv("HOME");
        if (!home || *home == '\0')
                home = ".";
        paths_init(&s, home);
        starts_append(&s);

        if (!s.core_dump) {
                struct rlimit rl;

                /* A dumped core of a grown heap would make every crash test slow. */
                if (getrlimit(RLIMIT_CORE, &rl) == 0) {
                        rl.rlim_cur = 0;
                        (void) setrlimit(RLIMIT_CORE, &rl);
                }
        }

        s.signal_fd = signals_open();
        if (s.signal_fd < 0) {
                log_line("cannot set up signals: %s", strerror(errno));
                return 1;
        }

        identity_init(&s, &o);
        log_line("start pid=%d serverID=%s port=%u queryPort=%u allocatedUUID=%s",
                 host_pid(), s.server_id, s.port, s.query_port, s.allocated_uuid);

        r = notify_open(&s);
        if (r < 0)
                log_line("notify: cannot use \"%s\": %s", s.notify_socket, strerror(-r));
        watchdog_from_env(&s);

        if (s.query_port == 0)
                log_line("no query port, not answering queries");
        else {
                r = query_open(&s);
                if (r < 0)
                        log_line("cannot bind UDP 0.0.0.0:%u: %s, not answering queries",
                                 s.query_port, strerror(-r));
        }

        inotify_open(&s);
        now = now_usec(CLOCK_MONOTONIC);
        cgroup_read(s.cgroup, sizeof(s.cgroup));
        s.next_refresh = now + STATE_REFRESH_USEC;
        r = start_commands_run(&s, &o);
        if (r < 0)
                return 2;
        /* What the control file already says belongs to an earlier run. */
        control_check(&s, now, true, true);

        if (s.ready_wanted) {
                if (s.ready_delay > 0)
                        s.ready_at = now + s.ready_delay;
                else
                        ready_set(&s, true);
        }
        s.next_file_check = now + s.file_check_usec;
        state_write(&s, now);
        main_loop(&s);
}
