/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include "log.h"
#include "timestamp.h"

static int max_level = LOG_INFO;
static bool use_journal;
static const char *program = "slotd";

void log_set_program(const char *name) {
        program = name;
}

/* journald sets JOURNAL_STREAM=dev:ino for the stream it connected to our stderr; only then
 * are structured entries better than plain lines. */
static bool stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

void log_open(void) {
        const char *e = getenv("SLOTD_LOG_LEVEL");

        use_journal = stderr_is_journal();
        if (e) {
                if (streq(e, "debug"))
                        max_level = LOG_DEBUG;
                else if (streq(e, "info"))
                        max_level = LOG_INFO;
                else if (streq(e, "notice"))
                        max_level = LOG_NOTICE;
                else if (streq(e, "warning"))
                        max_level = LOG_WARNING;
                else if (streq(e, "err") || streq(e, "error"))
                        max_level = LOG_ERR;
        }
}

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

static const char *level_name(int level) {
        static const char *const names[] = {
                [LOG_EMERG] = "emerg",  [LOG_ALERT] = "alert", [LOG_CRIT] = "crit",
                [LOG_ERR] = "error",    [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
                [LOG_INFO] = "info",    [LOG_DEBUG] = "debug",
        };
        return level >= 0 && level < (int) ELEMENTSOF(names) ? names[level] : "log";
}

int log_internal(int level, int error, const char *prefix, char *const *fields,
                 const char *file, int line, const char *func, const char *format, ...) {
        char message[2048];
        int saved_errno = errno;
        va_list ap;

        if (error != 0)
                errno = abs(error);
        va_start(ap, format);
        (void) vsnprintf(message, sizeof(message), format, ap);
        va_end(ap);

        if (use_journal) {
                char m[2100], p[16], cf[256], cl[32], cfn[128], en[32];
                struct iovec iov[32];
                size_t n = 0;

                snprintf(m, sizeof(m), "MESSAGE=%s", message);
                snprintf(p, sizeof(p), "PRIORITY=%d", level);
                snprintf(cf, sizeof(cf), "CODE_FILE=%s", file);
                snprintf(cl, sizeof(cl), "CODE_LINE=%d", line);
                snprintf(cfn, sizeof(cfn), "CODE_FUNC=%s", func);
                iov[n++] = (struct iovec){ m, strlen(m) };
                iov[n++] = (struct iovec){ p, strlen(p) };
                iov[n++] = (struct iovec){ cf, strlen(cf) };
                iov[n++] = (struct iovec){ cl, strlen(cl) };
                iov[n++] = (struct iovec){ cfn, strlen(cfn) };
                if (error != 0) {
                        snprintf(en, sizeof(en), "ERRNO=%d", abs(error));
                        iov[n++] = (struct iovec){ en, strlen(en) };
                }
                for (size_t i = 0; fields && fields[i] && n < ELEMENTSOF(iov); i++)
                        iov[n++] = (struct iovec){ fields[i], strlen(fields[i]) };
                if (sd_journal_sendv(iov, (int) n) >= 0)
                        goto finish;
        }

        /* Not the journal: a line of its own carries the time (UTC, RFC 3339), so that a log
         * file or a terminal can be read without journald's timestamps. */
        char when[RFC3339_MAX];
        fprintf(stderr, "%s %s[%s]: %s%s\n", rfc3339_format(now_usec(CLOCK_REALTIME), when),
                program, level_name(level), strempty(prefix), message);
finish:
        errno = saved_errno;
        return -abs(error);
}
