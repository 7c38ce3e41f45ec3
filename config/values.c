/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <signal.h>
#include <strings.h>

#include "config.h"

/* Beyond this a core count is a typo, and cores × the cpu.max period must stay far from
 * overflowing a uint64_t. */
#define CORES_MAX 1000000.0
/* More decimals than this cannot mean anything for cores or percentages. */
#define DECIMALS_MAX 9

static bool is_digit(char c) {
        /* Not isdigit(): that one follows the locale. */
        return c >= '0' && c <= '9';
}

/* Reads one or more decimal digits. No sign, no spaces, no base prefix: strtoull() would take
 * all three, and "010" must not be octal. On overflow the digits are still consumed, so that
 * the caller can tell a bad suffix (-EINVAL) from a big number (-ERANGE). */
static int parse_digits(const char *s, const char **ret_end, uint64_t *ret) {
        uint64_t v = 0;
        bool overflow = false;
        const char *p;

        if (!is_digit(*s))
                return -EINVAL;

        for (p = s; is_digit(*p); p++) {
                unsigned d = (unsigned) (*p - '0');

                if (v > (UINT64_MAX - d) / 10)
                        overflow = true;
                else
                        v = v * 10 + d;
        }

        *ret_end = p;
        *ret = v;
        return overflow ? -ERANGE : 0;
}

/* "12" or "12.5": digits, optionally a dot and more digits. No exponent, no "inf", no locale
 * decimal comma, unlike strtod(). */
static int parse_decimal(const char *s, const char **ret_end, double *ret) {
        const char *p;
        uint64_t whole, frac = 0, scale = 1;
        int r;

        r = parse_digits(s, &p, &whole);
        if (r == -EINVAL)
                return r;

        if (*p == '.') {
                p++;
                if (!is_digit(*p))
                        return -EINVAL;
                for (unsigned n = 0; is_digit(*p); p++, n++) {
                        if (n >= DECIMALS_MAX)
                                return -EINVAL;
                        frac = frac * 10 + (uint64_t) (*p - '0');
                        scale *= 10;
                }
        }

        *ret_end = p;
        if (r < 0)
                return r;
        *ret = (double) whole + (double) frac / (double) scale;
        return 0;
}

int parse_uint64(const char *s, uint64_t *ret) {
        const char *end;
        uint64_t v;
        int r;

        r = parse_digits(s, &end, &v);
        if (r == -EINVAL || *end != '\0')
                return -EINVAL;
        if (r < 0)
                return r;

        *ret = v;
        return 0;
}

int parse_unsigned(const char *s, unsigned *ret) {
        uint64_t v;
        int r;

        r = parse_uint64(s, &v);
        if (r < 0)
                return r;
        if (v > UINT_MAX)
                return -ERANGE;

        *ret = (unsigned) v;
        return 0;
}

typedef struct Unit {
        const char *suffix;
        uint64_t factor;
} Unit;

/* A whole number followed by exactly one of the units; "" is the bare number. */
static int parse_with_units(const char *s, const Unit *units, size_t n_units, uint64_t max,
                            uint64_t *ret) {
        const char *end;
        uint64_t v;
        int r;

        r = parse_digits(s, &end, &v);
        if (r == -EINVAL)
                return r;

        for (size_t i = 0; i < n_units; i++) {
                if (!streq(end, units[i].suffix))
                        continue;
                if (r < 0)
                        return r;
                if (v > max / units[i].factor)
                        return -ERANGE;
                *ret = v * units[i].factor;
                return 0;
        }

        return -EINVAL;
}

int parse_duration(const char *s, usec_t *ret) {
        static const Unit units[] = {
                { "ms", USEC_PER_MSEC },
                { "s", USEC_PER_SEC },
                { "m", USEC_PER_MINUTE },
                { "h", USEC_PER_HOUR },
                { "", USEC_PER_SEC },
        };

        /* USEC_INFINITY means "never" elsewhere, so a configured time stays below it. */
        return parse_with_units(s, units, ELEMENTSOF(units), USEC_INFINITY - 1, ret);
}

int parse_size(const char *s, uint64_t *ret) {
        static const Unit units[] = {
                { "K", UINT64_C(1) << 10 },
                { "M", UINT64_C(1) << 20 },
                { "G", UINT64_C(1) << 30 },
                { "T", UINT64_C(1) << 40 },
                { "", 1 },
        };

        return parse_with_units(s, units, ELEMENTSOF(units), UINT64_MAX, ret);
}

int parse_percent(const char *s, double *ret) {
        const char *end;
        double v;
        int r;

        r = parse_decimal(s, &end, &v);
        if (r == -EINVAL || !streq(end, "%"))
                return -EINVAL;
        if (r < 0)
                return r;

        *ret = v / 100.0;
        return 0;
}

int parse_cores(const char *s, double *ret) {
        const char *end;
        double v;
        int r;

        r = parse_decimal(s, &end, &v);
        if (r == -EINVAL)
                return r;
        if (streq(end, "%"))
                v /= 100.0;
        else if (*end != '\0')
                return -EINVAL;
        if (r < 0)
                return r;
        if (v > CORES_MAX)
                return -ERANGE;

        *ret = v;
        return 0;
}

int parse_cpu(const char *s, double *ret) {
        double v;
        int r;

        r = parse_cores(s, &v);
        if (r < 0)
                return r;
        if (v <= 0.0)
                return -ERANGE;

        *ret = v;
        return 0;
}

int parse_boolean(const char *s, bool *ret) {
        static const char *const yes[] = { "yes", "true", "on", "1" };
        static const char *const no[] = { "no", "false", "off", "0" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
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

/* The standard signals by number; designated initialisers keep the numbering right on every
 * architecture. */
static const char *const signal_names[32] = {
        [SIGHUP] = "HUP",
        [SIGINT] = "INT",
        [SIGQUIT] = "QUIT",
        [SIGILL] = "ILL",
        [SIGTRAP] = "TRAP",
        [SIGABRT] = "ABRT",
        [SIGBUS] = "BUS",
        [SIGFPE] = "FPE",
        [SIGKILL] = "KILL",
        [SIGUSR1] = "USR1",
        [SIGSEGV] = "SEGV",
        [SIGUSR2] = "USR2",
        [SIGPIPE] = "PIPE",
        [SIGALRM] = "ALRM",
        [SIGTERM] = "TERM",
#ifdef SIGSTKFLT
        [SIGSTKFLT] = "STKFLT",
#endif
        [SIGCHLD] = "CHLD",
        [SIGCONT] = "CONT",
        [SIGSTOP] = "STOP",
        [SIGTSTP] = "TSTP",
        [SIGTTIN] = "TTIN",
        [SIGTTOU] = "TTOU",
        [SIGURG] = "URG",
        [SIGXCPU] = "XCPU",
        [SIGXFSZ] = "XFSZ",
        [SIGVTALRM] = "VTALRM",
        [SIGPROF] = "PROF",
        [SIGWINCH] = "WINCH",
        [SIGIO] = "IO",
#ifdef SIGPWR
        [SIGPWR] = "PWR",
#endif
        [SIGSYS] = "SYS",
};

int parse_signal(const char *s, int *ret) {
        static const struct {
                const char *name;
                int signo;
        } aliases[] = {
                { "IOT", SIGABRT },
                { "POLL", SIGIO },
                { "CLD", SIGCHLD },
        };
        const char *name = s;
        unsigned n;
        int r;

        if (is_digit(*s)) {
                r = parse_unsigned(s, &n);
                if (r == -EINVAL)
                        return r;
                if (r < 0 || n >= ELEMENTSOF(signal_names) || !signal_names[n])
                        return -ERANGE;
                *ret = (int) n;
                return 0;
        }

        if (strncasecmp(s, "SIG", 3) == 0)
                name = s + 3;

        for (size_t i = 1; i < ELEMENTSOF(signal_names); i++)
                if (signal_names[i] && strcasecmp(name, signal_names[i]) == 0) {
                        *ret = (int) i;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(aliases); i++)
                if (strcasecmp(name, aliases[i].name) == 0) {
                        *ret = aliases[i].signo;
                        return 0;
                }

        return -EINVAL;
}

int parse_port(const char *s, uint16_t *ret) {
        uint64_t v;
        int r;

        r = parse_uint64(s, &v);
        if (r < 0)
                return r;
        if (v < 1 || v > UINT16_MAX)
                return -ERANGE;

        *ret = (uint16_t) v;
        return 0;
}
