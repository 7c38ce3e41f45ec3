/* SPDX-License-Identifier: MIT */
/*
 * The leaves of slotd-test-server, which know nothing of struct server: the
 * log line, the clock, strings, the value parsers that options and control
 * commands share, and whole-file reads.
 */

#include "test-server.h"

void log_line(const char *fmt, ...)
{
        va_list ap;

        /* stdout is line-buffered and appended to the slot's log by the supervisor. Locked
         * so that a line of the SDK thread never lands inside one of the main thread. */
        flockfile(stdout);
        fputs("slotd-test-server: ", stdout);
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
        fputc('\n', stdout);
        funlockfile(stdout);
}

usec_t now_usec(clockid_t clock)
{
        struct timespec ts;

        (void) clock_gettime(clock, &ts);
        return (usec_t) ts.tv_sec * USEC_PER_SEC + (usec_t) ts.tv_nsec / 1000;
}

void copy_string(char *dst, size_t size, const char *src)
{
        size_t n = strnlen(src, size - 1);

        memcpy(dst, src, n);
        dst[n] = '\0';
}

const char *signal_name(int sig)
{
        const char *n = sigabbrev_np(sig);

        return n ? n : "?";
}

/* ---- value parsers (shared by options and control commands) ---- */

int parse_uint(const char *s, uint64_t max, uint64_t *ret)
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

int parse_double(const char *s, double *ret)
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
int parse_size(const char *s, uint64_t *ret)
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

int parse_bool(const char *s, bool *ret)
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
int parse_signal(const char *s, int *ret)
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

int parse_msec(const char *s, usec_t *ret)
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

int read_file(const char *path, size_t max, char **ret, size_t *ret_len)
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

int write_all(int fd, const char *buf, size_t len)
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

void file_stamp_get(const char *path, struct file_stamp *ret)
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

bool file_stamp_equal(const struct file_stamp *a, const struct file_stamp *b)
{
        if (a->exists != b->exists)
                return false;
        if (!a->exists)
                return true;
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec &&
               a->ctim.tv_sec == b->ctim.tv_sec && a->ctim.tv_nsec == b->ctim.tv_nsec;
}
