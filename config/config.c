/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <ini.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "config.h"
#include "window.h"
#include "expand.h"
#include "strv.h"

#define CONFIG_FILE_SIZE_MAX ((size_t) 1024 * 1024)
/* Longest line accepted, without its line break. */
#define CONFIG_LINE_MAX 4096
#define FLEET_NAME_MAX 64
/* The kernel's PID_MAX_LIMIT on 64-bit: a larger pids.max means nothing. */
#define PIDS_MAX_LIMIT UINT64_C(4194304)
/* How much of a bad value a message quotes; each character may take 4 bytes escaped. */
#define QUOTE_MAX 100
#define QUOTE_BUF (QUOTE_MAX * 4 + 4)
#define KEYS_MAX 48

static const char *const query_type_table[_QUERY_TYPE_MAX] = {
        [QUERY_NONE] = "none",
        [QUERY_SQP] = "sqp",
        [QUERY_A2S] = "a2s",
};

const char *query_type_to_string(QueryType t) {
        if ((unsigned) t >= _QUERY_TYPE_MAX)
                return NULL;
        return query_type_table[t];
}

QueryType query_type_from_string(const char *s) {
        if (s)
                for (size_t i = 0; i < _QUERY_TYPE_MAX; i++)
                        if (streq(s, query_type_table[i]))
                                return (QueryType) i;
        return (QueryType) -1;
}

static bool isempty(const char *s) {
        return !s || *s == '\0';
}

/* Length of the valid UTF-8 sequence at s (1 for ASCII), 0 when the bytes there are not
 * one: overlong forms, surrogates and code points past U+10FFFF included. */
static size_t utf8_char_len(const char *s) {
        const unsigned char *p = (const unsigned char *) s;
        uint32_t cp;
        size_t n;

        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf) {
                n = 2;
                cp = p[0] & 0x1f;
        } else if ((p[0] & 0xf0) == 0xe0) {
                n = 3;
                cp = p[0] & 0x0f;
        } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
                n = 4;
                cp = p[0] & 0x07;
        } else
                return 0;

        for (size_t i = 1; i < n; i++) {
                /* The terminating NUL fails this test too, so a cut sequence is caught. */
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }

        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

static bool utf8_is_valid(const char *s) {
        for (size_t n; *s; s += n) {
                n = utf8_char_len(s);
                if (n == 0)
                        return false;
        }
        return true;
}

/* Messages end up in the journal and in D-Bus errors, which must be valid UTF-8, so a bad
 * value is quoted with control characters and stray bytes as \xNN, and cut when long. */
static const char *quote(const char *s, char buf[static QUOTE_BUF]) {
        size_t o = 0;

        for (unsigned n = 0; *s; n++) {
                size_t l;

                if (n >= QUOTE_MAX) {
                        memcpy(buf + o, "...", 3);
                        o += 3;
                        break;
                }
                l = (unsigned char) *s >= 0x20 && *s != 0x7f ? utf8_char_len(s) : 0;
                if (l > 0) {
                        memcpy(buf + o, s, l);
                        o += l;
                        s += l;
                } else {
                        snprintf(buf + o, 5, "\\x%02x", (unsigned char) *s);
                        o += 4;
                        s++;
                }
        }
        buf[o] = '\0';
        return buf;
}

/* Stores "FILE:LINE: BODY" (or "FILE: BODY" when line is 0) in *ret_error; returns r. */
_printf_(5, 6)
static int set_error(char **ret_error, int r, const char *file, unsigned line, const char *fmt,
                     ...) {
        _cleanup_free_ char *body = NULL;
        va_list ap;
        char *m;
        int k;

        if (!ret_error)
                return r;

        /* So that a %m in fmt always describes r. */
        errno = -r;
        va_start(ap, fmt);
        k = vasprintf(&body, fmt, ap);
        va_end(ap);
        if (k < 0) {
                body = NULL; /* undefined after a failure */
                return r;
        }

        if (line > 0)
                k = asprintf(&m, "%s:%u: %s", file, line, body);
        else
                k = asprintf(&m, "%s: %s", file, body);
        if (k >= 0)
                *ret_error = m;
        return r;
}

typedef struct ConfigKey ConfigKey;
typedef struct ParseContext ParseContext;

/* Parses value into data (the key's field); on failure records the error in ctx. */
typedef int (*ConfigParser)(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);

struct ConfigKey {
        const char *section;
        const char *name;
        ConfigParser parse;
        size_t offset;  /* of the field in Config or FleetConfig */
        bool nonzero;   /* 0 would mean nothing sensible for this key */
};

typedef struct ConfigSchema {
        const ConfigKey *keys;
        size_t n_keys;
        const char *sections; /* for the "unknown section" message */
} ConfigSchema;

struct ParseContext {
        const char *file;
        const ConfigSchema *schema;
        void *base; /* the Config or FleetConfig the keys' offsets point into */

        const char *data;
        size_t size;
        size_t pos;
        /* The line the reader handed to inih last: inih parses one line per read, so this is
         * the line of the key the handler is called for. Debian's inih 55 has no line
         * numbers in the handler. */
        unsigned line;
        unsigned fleet_line;
        unsigned key_lines[KEYS_MAX]; /* per key: line it was set on, 0 = unset */

        int r;
        char *error;
};

/* Records the first error only: later ones are consequences. */
_printf_(5, 6)
static int ctx_error(ParseContext *ctx, int r, unsigned line, const char *value, const char *fmt,
                     ...) {
        _cleanup_free_ char *body = NULL;
        char q[QUOTE_BUF];
        va_list ap;
        int k;

        if (ctx->r < 0)
                return ctx->r;
        ctx->r = r;

        va_start(ap, fmt);
        k = vasprintf(&body, fmt, ap);
        va_end(ap);
        if (k < 0) {
                body = NULL;
                return r;
        }

        if (value)
                return set_error(&ctx->error, r, ctx->file, line, "%s (got '%s')", body,
                                 quote(value, q));
        return set_error(&ctx->error, r, ctx->file, line, "%s", body);
}

_printf_(5, 6)
static int key_error(ParseContext *ctx, const ConfigKey *k, const char *value, int r,
                     const char *fmt, ...) {
        _cleanup_free_ char *what = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&what, fmt, ap);
        va_end(ap);
        if (n < 0)
                return ctx_error(ctx, -ENOMEM, ctx->line, NULL, "out of memory");

        return ctx_error(ctx, r, ctx->line, value, "%s.%s: %s", k->section, k->name, what);
}

static int ctx_oom(ParseContext *ctx) {
        return ctx_error(ctx, -ENOMEM, ctx->line, NULL, "out of memory");
}

static int store_string(ParseContext *ctx, char **p, const char *value) {
        if (free_and_strdup(p, value) < 0)
                return ctx_oom(ctx);
        return 0;
}

static int parse_string_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        if (isempty(value))
                return key_error(ctx, k, value, -EINVAL, "must not be empty");
        return store_string(ctx, data, value);
}

/* Collapses repeated slashes and drops a trailing one, so that "<state_dir>/slots" and
 * messages come out clean. */
static char *path_simplify_dup(const char *path) {
        char *s = malloc(strlen(path) + 1), *o = s;

        if (!s)
                return NULL;
        for (const char *p = path; *p; p++)
                if (*p != '/' || o == s || o[-1] != '/')
                        *o++ = *p;
        if (o - s > 1 && o[-1] == '/')
                o--;
        *o = '\0';
        return s;
}

static int parse_path_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        char **p = data;
        char *s;

        if (value[0] != '/')
                return key_error(ctx, k, value, -EINVAL, "expected an absolute path");

        s = path_simplify_dup(value);
        if (!s)
                return ctx_oom(ctx);
        free(*p);
        *p = s;
        return 0;
}

static int parse_address_key(ParseContext *ctx, const ConfigKey *k, const char *value, int family,
                             void *data) {
        unsigned char buf[sizeof(struct in6_addr)];

        if (inet_pton(family, value, buf) != 1)
                return key_error(ctx, k, value, -EINVAL, "expected an %s address like %s",
                                 family == AF_INET ? "IPv4" : "IPv6",
                                 family == AF_INET ? "192.0.2.10" : "2001:db8::10");
        return store_string(ctx, data, value);
}

static int parse_ipv4_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        return parse_address_key(ctx, k, value, AF_INET, data);
}

static int parse_ipv6_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        return parse_address_key(ctx, k, value, AF_INET6, data);
}

static int parse_cores_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        double v;
        int r;

        r = k->nonzero ? parse_cpu(value, &v) : parse_cores(value, &v);
        if (r == -ERANGE)
                return key_error(ctx, k, value, r, "%s",
                                 k->nonzero ? "must be more than 0 and at most 1000000 cores"
                                            : "must be at most 1000000 cores");
        if (r < 0)
                return key_error(ctx, k, value, r, "expected cores like 0.5 or 50%%");

        *(double *) data = v;
        return 0;
}

static int parse_cpu_max_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        double v;
        int r;

        if (streq(value, "off")) {
                *(double *) data = 0;
                return 0;
        }

        r = parse_cpu(value, &v);
        if (r == -ERANGE)
                return key_error(ctx, k, value, r,
                                 "must be more than 0 and at most 1000000 cores, or 'off'");
        if (r < 0)
                return key_error(ctx, k, value, r, "expected cores like 0.5 or 50%%, or 'off'");

        *(double *) data = v;
        return 0;
}

static int parse_size_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        uint64_t v;
        int r;

        r = parse_size(value, &v);
        if (r == -ERANGE)
                return key_error(ctx, k, value, r, "size too large");
        if (r < 0)
                return key_error(ctx, k, value, r, "expected a size like 512K, 200M or 2G");
        if (v == 0 && k->nonzero)
                return key_error(ctx, k, value, -ERANGE, "must be greater than 0");

        *(uint64_t *) data = v;
        return 0;
}

static int parse_duration_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                              void *data) {
        usec_t v;
        int r;

        r = parse_duration(value, &v);
        if (r == -ERANGE)
                return key_error(ctx, k, value, r, "duration too large");
        if (r < 0)
                return key_error(ctx, k, value, r,
                                 "expected a duration like 250ms, 10s, 5m or 1h");
        if (v == 0 && k->nonzero)
                return key_error(ctx, k, value, -ERANGE, "must be greater than 0");

        *(usec_t *) data = v;
        return 0;
}

static int parse_percent_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        double v;
        int r;

        r = parse_percent(value, &v);
        if (r == -ERANGE)
                return key_error(ctx, k, value, r, "percentage too large");
        if (r < 0)
                return key_error(ctx, k, value, r, "expected a percentage like 10%%");

        *(double *) data = v;
        return 0;
}

/* checks.strikes and crash.restarts are counted in a TimeWindow of TIME_WINDOW_MAX events. */
static int parse_window_count_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                  void *data) {
        unsigned v, lo = k->nonzero ? 1 : 0, hi = TIME_WINDOW_MAX - 1;
        int r;

        r = parse_unsigned(value, &v);
        if (r < 0 || v < lo || v > hi)
                return key_error(ctx, k, value, r < 0 ? r : -ERANGE,
                                 "expected an integer between %u and %u", lo, hi);
        *(unsigned *) data = v;
        return 0;
}

static int parse_servers_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        unsigned v;
        int r;

        if (streq(value, "auto")) {
                *(unsigned *) data = 0;
                return 0;
        }

        r = parse_unsigned(value, &v);
        if (r < 0 || v == 0)
                return key_error(ctx, k, value, r < 0 ? r : -ERANGE,
                                 "expected a positive integer or 'auto'");

        *(unsigned *) data = v;
        return 0;
}

static int parse_pids_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        uint64_t v;
        int r;

        r = parse_uint64(value, &v);
        if (r < 0 || v < 1 || v > PIDS_MAX_LIMIT)
                return key_error(ctx, k, value, r < 0 ? r : -ERANGE,
                                 "expected an integer between 1 and %" PRIu64, PIDS_MAX_LIMIT);

        *(uint64_t *) data = v;
        return 0;
}

static int parse_nofile_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        uint64_t v;
        int r;

        r = parse_uint64(value, &v);
        if (r < 0 || v < 64 || v > (UINT64_C(1) << 30))
                return key_error(ctx, k, value, r < 0 ? r : -ERANGE,
                                 "expected an integer between 64 and 1073741824");
        *(uint64_t *) data = v;
        return 0;
}

/* security.seccomp: "default", "off", or the absolute path of an allow-list; the path goes
 * to FleetConfig.seccomp_list, next to the flag. */
static int parse_seccomp_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        FleetConfig *f = container_of((bool *) data, FleetConfig, seccomp);

        if (streq(value, "default") || streq(value, "off")) {
                f->seccomp = streq(value, "default");
                f->seccomp_list = mfree_str(f->seccomp_list);
                return 0;
        }
        if (value[0] != '/')
                return key_error(ctx, k, value, -EINVAL,
                                 "expected default, off, or the absolute path of an allow-list");
        f->seccomp = true;
        return store_string(ctx, &f->seccomp_list, value);
}

static int parse_seccomp_action_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                    void *data) {
        if (!streq(value, "eperm") && !streq(value, "kill"))
                return key_error(ctx, k, value, -EINVAL, "expected eperm or kill");
        *(bool *) data = streq(value, "kill");
        return 0;
}

static int parse_port_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        uint16_t v;
        int r;

        r = parse_port(value, &v);
        if (r < 0)
                return key_error(ctx, k, value, r, "expected a port between 1 and 65535");

        *(uint16_t *) data = v;
        return 0;
}

static int parse_signal_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        int v;
        int r;

        r = parse_signal(value, &v);
        if (r < 0)
                return key_error(ctx, k, value, r, "expected a signal like SIGSEGV, SEGV or 11");

        *(int *) data = v;
        return 0;
}

static int parse_boolean_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        bool v;
        int r;

        r = parse_boolean(value, &v);
        if (r < 0)
                return key_error(ctx, k, value, r, "expected yes or no");

        *(bool *) data = v;
        return 0;
}

static int parse_query_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        QueryType t = query_type_from_string(value);

        if ((int) t < 0)
                return key_error(ctx, k, value, -EINVAL, "expected sqp, a2s or none");

        *(QueryType *) data = t;
        return 0;
}

/* Fleet names become cgroup directory names and D-Bus strings: no slash, no leading dot
 * (".", ".." and hidden directories), nothing that needs quoting. */
static bool fleet_name_is_valid(const char *s) {
        size_t n = strlen(s);

        if (n < 1 || n > FLEET_NAME_MAX || s[0] == '.')
                return false;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

#define FLEET_NAME_RULE "1 to 64 characters from A-Z a-z 0-9 _ . -, not starting with '.'"

static int parse_fleet_name_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                void *data) {
        if (!fleet_name_is_valid(value))
                return key_error(ctx, k, value, -EINVAL, "expected %s", FLEET_NAME_RULE);
        return store_string(ctx, data, value);
}

static int parse_args_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        char ***p = data;
        char **l;
        int r;

        r = strv_split_quoted(value, &l);
        if (r == -ENOMEM)
                return ctx_oom(ctx);
        if (r < 0)
                return key_error(ctx, k, value, r, "unterminated quote or trailing backslash");

        /* An unknown ${NAME} would fail every start of every slot: refuse it here. */
        for (size_t i = 0; l[i]; i++) {
                ExpandVariable vars[16];
                const char *bad = NULL;
                char *expanded = NULL;

                for (unsigned j = 0; j < expand_n_known_names && j < ELEMENTSOF(vars); j++)
                        vars[j] = (ExpandVariable){ expand_known_names[j], "" };
                r = expand_variables(l[i], vars, MIN(expand_n_known_names, ELEMENTSOF(vars)),
                                     &expanded, &bad);
                free(expanded);
                if (r == -ENOMEM) {
                        strv_free(l);
                        return ctx_oom(ctx);
                }
                if (r < 0) {
                        char q[QUOTE_BUF];
                        /* quote() before the free: 'bad' points into l. */
                        quote(bad, q);
                        strv_free(l);
                        return key_error(ctx, k, value, -EINVAL,
                                         "unknown or malformed variable at '%s'; known: ${PORT} "
                                         "${QUERY_PORT} ${SERVER_ID} ${ALLOCATION_UUID} "
                                         "${SERVER_LOG_DIR} ${HOME} ${BUILD_CONFIGURATION}", q);
                }
        }

        strv_free(*p);
        *p = l;
        return 0;
}

static bool env_name_is_valid(const char *s, size_t n) {
        static const char chars[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_";

        if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr(chars, s[i]))
                        return false;
        return true;
}

static int parse_environment_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                 void *data) {
        /* slotd sets these for every slot (SPEC §3); a fleet overriding them would break the
         * contract with the game server. */
        static const char *const reserved[] = {
                "SERVER_ID", "PORT", "QUERY_PORT", "ALLOCATION_UUID", "SERVER_LOG_DIR",
                "NOTIFY_SOCKET", "HOME", "BUILD_CONFIGURATION",
        };
        _cleanup_strv_free_ char **l = NULL;
        char ***p = data;
        char q[QUOTE_BUF];
        int r;

        r = parse_args_key(ctx, k, value, &l);
        if (r < 0)
                return r;

        for (size_t i = 0; l[i]; i++) {
                const char *eq = strchr(l[i], '=');
                size_t n = eq ? (size_t) (eq - l[i]) : 0;

                if (!eq || !env_name_is_valid(l[i], n))
                        return key_error(ctx, k, value, -EINVAL,
                                         "expected KEY=value words, KEY made of A-Z a-z 0-9 _ "
                                         "and not starting with a digit; '%s' is not",
                                         quote(l[i], q));
                for (size_t j = 0; j < ELEMENTSOF(reserved); j++)
                        if (strlen(reserved[j]) == n && strncmp(l[i], reserved[j], n) == 0)
                                return key_error(ctx, k, value, -EINVAL,
                                                 "%s is set by slotd for every slot", reserved[j]);
                for (size_t j = 0; j < i; j++)
                        if (strncmp(l[j], l[i], n + 1) == 0)
                                return key_error(ctx, k, value, -EINVAL, "%.*s is set twice",
                                                 (int) n, l[i]);
        }

        strv_free(*p);
        *p = TAKE_PTR(l);
        return 0;
}

#define MACHINE_KEY(s, n, parser, field, nz) { s, n, parser, offsetof(Config, field), nz }

static const ConfigKey machine_keys[] = {
        MACHINE_KEY("machine", "id", parse_string_key, machine_id, false),
        MACHINE_KEY("machine", "ip", parse_ipv4_key, ip, false),
        MACHINE_KEY("machine", "ipv6", parse_ipv6_key, ipv6, false),
        MACHINE_KEY("machine", "cpus", parse_cores_key, cpus, true),
        MACHINE_KEY("machine", "memory", parse_size_key, memory, true),
        MACHINE_KEY("machine", "reserved_cpus", parse_cores_key, reserved_cpus, false),
        MACHINE_KEY("machine", "reserved_memory", parse_size_key, reserved_memory, false),
        MACHINE_KEY("machine", "idle_ttl", parse_duration_key, idle_ttl, true),
        MACHINE_KEY("supervisor", "cgroup", parse_path_key, cgroup, false),
        MACHINE_KEY("supervisor", "state_dir", parse_path_key, state_dir, false),
        MACHINE_KEY("supervisor", "slots_dir", parse_path_key, slots_dir, false),
        MACHINE_KEY("supervisor", "bus", parse_string_key, bus, false),
        MACHINE_KEY("supervisor", "admin_group", parse_string_key, admin_group, false),
};

#define FLEET_KEY(s, n, parser, field, nz) { s, n, parser, offsetof(FleetConfig, field), nz }

static const ConfigKey fleet_keys[] = {
        FLEET_KEY("fleet", "name", parse_fleet_name_key, name, false),
        FLEET_KEY("fleet", "build", parse_path_key, build, false),
        FLEET_KEY("fleet", "args", parse_args_key, args, false),
        FLEET_KEY("fleet", "environment", parse_environment_key, environment, false),
        FLEET_KEY("fleet", "build_configuration", parse_string_key, build_configuration, false),
        FLEET_KEY("fleet", "user", parse_string_key, user, false),
        FLEET_KEY("fleet", "group", parse_string_key, group, false),
        FLEET_KEY("fleet", "start_on_provision", parse_boolean_key, start_on_provision, false),
        FLEET_KEY("fleet", "stop_timeout", parse_duration_key, stop_timeout, true),
        FLEET_KEY("usage", "cpu", parse_cores_key, usage_cpu, true),
        FLEET_KEY("usage", "memory", parse_size_key, usage_memory, true),
        FLEET_KEY("usage", "servers", parse_servers_key, usage_servers, false),
        FLEET_KEY("ports", "game_base", parse_port_key, game_port_base, false),
        FLEET_KEY("ports", "query_base", parse_port_key, query_port_base, false),
        FLEET_KEY("checks", "interval", parse_duration_key, check_interval, false),
        FLEET_KEY("checks", "cpu_tolerance", parse_percent_key, cpu_tolerance, false),
        FLEET_KEY("checks", "memory_tolerance", parse_size_key, memory_tolerance, false),
        FLEET_KEY("checks", "strikes", parse_window_count_key, strikes, true),
        FLEET_KEY("checks", "window", parse_duration_key, strike_window, true),
        FLEET_KEY("checks", "signal", parse_signal_key, check_signal, false),
        FLEET_KEY("checks", "query", parse_query_key, query, false),
        FLEET_KEY("checks", "query_timeout", parse_duration_key, query_timeout, true),
        FLEET_KEY("checks", "heartbeat", parse_duration_key, heartbeat, false),
        FLEET_KEY("checks", "start_timeout", parse_duration_key, start_timeout, false),
        FLEET_KEY("crash", "restarts", parse_window_count_key, crash_restarts, false),
        FLEET_KEY("crash", "window", parse_duration_key, crash_window, true),
        FLEET_KEY("crash", "pre_recovery", parse_boolean_key, pre_recovery, false),
        FLEET_KEY("limits", "memory_max", parse_size_key, memory_max, true),
        FLEET_KEY("limits", "cpu_max", parse_cpu_max_key, cpu_max, false),
        FLEET_KEY("limits", "pids", parse_pids_key, pids_max, false),
        FLEET_KEY("limits", "nofile", parse_nofile_key, nofile, false),
        FLEET_KEY("limits", "core", parse_size_key, core_size, false),
        FLEET_KEY("security", "seccomp", parse_seccomp_key, seccomp, false),
        FLEET_KEY("security", "seccomp_action", parse_seccomp_action_key, seccomp_kill, false),
};

_Static_assert(ELEMENTSOF(machine_keys) <= KEYS_MAX, "raise KEYS_MAX");
_Static_assert(ELEMENTSOF(fleet_keys) <= KEYS_MAX, "raise KEYS_MAX");

static const ConfigSchema machine_schema = {
        .keys = machine_keys,
        .n_keys = ELEMENTSOF(machine_keys),
        .sections = "slotd.ini has [machine] and [supervisor]",
};

static const ConfigSchema fleet_schema = {
        .keys = fleet_keys,
        .n_keys = ELEMENTSOF(fleet_keys),
        .sections = "a fleet file has [fleet], [usage], [ports], [checks], [crash], [limits] and [security]",
};

static bool schema_has_section(const ConfigSchema *s, const char *section) {
        for (size_t i = 0; i < s->n_keys; i++)
                if (streq(s->keys[i].section, section))
                        return true;
        return false;
}

/* Index of the key in the schema, or -1. */
static ssize_t schema_find(const ConfigSchema *s, const char *section, const char *name) {
        for (size_t i = 0; i < s->n_keys; i++)
                if (streq(s->keys[i].section, section) && streq(s->keys[i].name, name))
                        return (ssize_t) i;
        return -1;
}

/* Line a key was set on, 0 when unset. */
static unsigned key_line(const ParseContext *ctx, const char *section, const char *name) {
        ssize_t i = schema_find(ctx->schema, section, name);

        assert(i >= 0);
        return ctx->key_lines[i];
}

/* inih only calls the handler for keys, so an empty unknown section and the line of [fleet]
 * are found here, on the raw line. */
static int reader_check_section(ParseContext *ctx, const char *line) {
        char q[QUOTE_BUF];
        _cleanup_free_ char *name = NULL;
        const char *end;

        if (ctx->line == 1 && strncmp(line, "\xef\xbb\xbf", 3) == 0)
                line += 3;
        line += strspn(line, " \t\r\v\f");
        if (*line != '[')
                return 0;
        end = strchr(line, ']');
        if (!end)
                return 0; /* inih reports the syntax error */

        name = strndup(line + 1, (size_t) (end - line - 1));
        if (!name)
                return ctx_oom(ctx);
        if (!schema_has_section(ctx->schema, name))
                return ctx_error(ctx, -EINVAL, ctx->line, NULL, "unknown section [%s]; %s",
                                 quote(name, q), ctx->schema->sections);
        if (streq(name, "fleet") && ctx->fleet_line == 0)
                ctx->fleet_line = ctx->line;
        return 0;
}

/* An fgets() over the file's bytes that counts lines and refuses what inih would silently
 * mangle: a NUL byte ends inih's line early, and a line longer than its buffer is split into
 * two lines. */
static char *config_ini_reader(char *str, int num, void *stream) {
        ParseContext *ctx = stream;
        const char *p, *nl;
        size_t len, content;

        if (ctx->r < 0 || ctx->pos >= ctx->size)
                return NULL;

        p = ctx->data + ctx->pos;
        nl = memchr(p, '\n', ctx->size - ctx->pos);
        len = nl ? (size_t) (nl - p) + 1 : ctx->size - ctx->pos;
        ctx->line++;

        if (memchr(p, '\0', len)) {
                ctx_error(ctx, -EINVAL, ctx->line, NULL, "line contains a NUL byte");
                return NULL;
        }
        content = len;
        while (content > 0 && (p[content - 1] == '\n' || p[content - 1] == '\r'))
                content--;
        if (content > CONFIG_LINE_MAX || len + 1 > (size_t) MAX(num, 0)) {
                ctx_error(ctx, -EINVAL, ctx->line, NULL, "line too long (at most %d characters)",
                          CONFIG_LINE_MAX);
                return NULL;
        }

        memcpy(str, p, len);
        str[len] = '\0';
        ctx->pos += len;

        if (reader_check_section(ctx, str) < 0)
                return NULL;
        return str;
}

static int config_ini_handler(void *user, const char *section, const char *name,
                              const char *value) {
        ParseContext *ctx = user;
        char q1[QUOTE_BUF], q2[QUOTE_BUF];
        const ConfigKey *k;
        ssize_t i;

        if (ctx->r < 0)
                return 0;

        if (isempty(section))
                return ctx_error(ctx, -EINVAL, ctx->line, NULL,
                                 "%s: key outside of any section; %s", quote(name, q1),
                                 ctx->schema->sections) >= 0;
        if (!schema_has_section(ctx->schema, section))
                return ctx_error(ctx, -EINVAL, ctx->line, NULL, "unknown section [%s]; %s",
                                 quote(section, q1), ctx->schema->sections) >= 0;

        i = schema_find(ctx->schema, section, name);
        if (i < 0)
                return ctx_error(ctx, -EINVAL, ctx->line, NULL, "%s.%s: unknown key",
                                 quote(section, q1), quote(name, q2)) >= 0;
        k = &ctx->schema->keys[i];

        if (ctx->key_lines[i] > 0)
                return ctx_error(ctx, -EINVAL, ctx->line, NULL,
                                 "%s.%s: duplicate key, already set on line %u", k->section,
                                 k->name, ctx->key_lines[i]) >= 0;
        if (!utf8_is_valid(value))
                return key_error(ctx, k, value, -EILSEQ, "not valid UTF-8") >= 0;

        if (k->parse(ctx, k, value, (uint8_t *) ctx->base + k->offset) < 0)
                return 0;
        ctx->key_lines[i] = ctx->line;
        return 1;
}

/* Debian builds inih 55 with its options as run-time globals. The defaults would cut lines
 * at 200 bytes (a long fleet.args becomes two lines) and read an indented line as the
 * continuation of the key before it, which the handler would take for a duplicate. */
static void ini_setup(void) {
        ini_max_line = CONFIG_LINE_MAX + 3; /* + "\r\n" and NUL */
        ini_allow_multiline = false;
        ini_allow_no_value = false;
        ini_stop_on_first_error = true;
}

static int parse_context_run(ParseContext *ctx) {
        int r;

        if (ctx->size > CONFIG_FILE_SIZE_MAX)
                return ctx_error(ctx, -EFBIG, 0, NULL, "file too large (%zu bytes, at most %zu)",
                                 ctx->size, CONFIG_FILE_SIZE_MAX);

        ini_setup();
        r = ini_parse_stream(config_ini_reader, ctx, config_ini_handler, ctx);
        if (ctx->r < 0)
                return ctx->r;
        if (r > 0)
                return ctx_error(ctx, -EINVAL, (unsigned) r, NULL,
                                 "syntax error: expected [section], key = value, or a comment");
        if (r < 0)
                return ctx_oom(ctx);
        return 0;
}

/* Hands the message to the caller on failure; returns r. */
static int parse_context_finish(ParseContext *ctx, int r, char **ret_error) {
        if (r < 0 && ret_error && ctx->error)
                *ret_error = TAKE_PTR(ctx->error);
        free(ctx->error);
        ctx->error = NULL;
        return r;
}

Config *config_new(void) {
        _cleanup_(config_freep) Config *c = NULL;

        c = calloc(1, sizeof(Config));
        if (!c)
                return NULL;

        c->idle_ttl = 30 * USEC_PER_MINUTE;
        c->state_dir = strdup("/var/lib/slotd");
        c->slots_dir = strdup("/var/lib/slotd/slots");
        c->bus = strdup("system");
        if (!c->state_dir || !c->slots_dir || !c->bus)
                return NULL;

        return TAKE_PTR(c);
}

void config_fleet_done(FleetConfig *f) {
        free(f->file);
        free(f->name);
        free(f->build);
        strv_free(f->args);
        strv_free(f->environment);
        free(f->build_configuration);
        free(f->user);
        free(f->group);
        free(f->seccomp_list);
        *f = (FleetConfig) {};
}

Config *config_free(Config *c) {
        if (!c)
                return NULL;

        free(c->config_file);
        free(c->fleets_dir);
        free(c->machine_id);
        free(c->ip);
        free(c->ipv6);
        free(c->cgroup);
        free(c->state_dir);
        free(c->slots_dir);
        free(c->bus);
        free(c->admin_group);
        for (size_t i = 0; i < c->n_fleets; i++)
                config_fleet_done(&c->fleets[i]);
        free(c->fleets);
        free(c);
        return NULL;
}

FleetConfig *config_find_fleet(const Config *c, const char *name) {
        for (size_t i = 0; i < c->n_fleets; i++)
                if (streq_ptr(c->fleets[i].name, name))
                        return &c->fleets[i];
        return NULL;
}

static int machine_finalize(ParseContext *ctx, Config *c) {
        /* slots_dir follows a configured state_dir unless it is set itself. */
        if (key_line(ctx, "supervisor", "slots_dir") == 0 &&
            key_line(ctx, "supervisor", "state_dir") > 0) {
                char *s;

                if (asprintf(&s, "%s/slots", streq(c->state_dir, "/") ? "" : c->state_dir) < 0)
                        return ctx_oom(ctx);
                free(c->slots_dir);
                c->slots_dir = s;
        }

        c->reserved_cpus_line = key_line(ctx, "machine", "reserved_cpus");
        c->reserved_memory_line = key_line(ctx, "machine", "reserved_memory");
        return 0;
}

static int parse_machine_data(Config *c, const char *name, const char *data, size_t size,
                              char **ret_error) {
        ParseContext ctx = {
                .file = name,
                .schema = &machine_schema,
                .base = c,
                .data = data,
                .size = size,
        };
        int r;

        r = parse_context_run(&ctx);
        if (r >= 0)
                r = machine_finalize(&ctx, c);
        return parse_context_finish(&ctx, r, ret_error);
}

int config_parse_machine(Config *c, const char *name, const char *text, char **ret_error) {
        return parse_machine_data(c, name, text, strlen(text), ret_error);
}

static void fleet_config_init(FleetConfig *f) {
        *f = (FleetConfig) {
                .start_on_provision = true,
                .stop_timeout = 10 * USEC_PER_SEC,
                .game_port_base = 9000,
                .query_port_base = 9600,
                .check_interval = USEC_PER_MINUTE,
                .cpu_tolerance = 0.10,
                .memory_tolerance = UINT64_C(200) << 20,
                .strikes = 3,
                .strike_window = 30 * USEC_PER_MINUTE,
                .check_signal = SIGSEGV,
                .query = QUERY_NONE,
                .query_timeout = 2 * USEC_PER_SEC,
                .crash_restarts = 1,
                .crash_window = 30 * USEC_PER_MINUTE,
                .pre_recovery = true,
                .pids_max = 4096,
                .nofile = 65536,
                .seccomp = true,
        };
}

/* "/etc/slotd/fleets.d/shooter.ini" → "shooter". */
static char *fleet_name_from_file(const char *file) {
        const char *base = strrchr(file, '/');
        size_t n;

        base = base ? base + 1 : file;
        n = strlen(base);
        if (n > 4 && streq(base + n - 4, ".ini"))
                n -= 4;
        return strndup(base, n);
}

static int fleet_finalize_name(ParseContext *ctx, const Config *c, FleetConfig *f) {
        char q[QUOTE_BUF];
        const FleetConfig *other;
        unsigned line = key_line(ctx, "fleet", "name");

        if (!f->name) {
                f->name = fleet_name_from_file(ctx->file);
                if (!f->name)
                        return ctx_oom(ctx);
                if (!fleet_name_is_valid(f->name))
                        return ctx_error(ctx, -EINVAL, 0, NULL,
                                         "the file name does not make a valid fleet name "
                                         "('%s'; expected %s): rename the file or set "
                                         "fleet.name",
                                         quote(f->name, q), FLEET_NAME_RULE);
        }

        other = config_find_fleet(c, f->name);
        if (other)
                return ctx_error(ctx, -EEXIST, line, NULL,
                                 "fleet.name: fleet %s is already defined by %s", f->name,
                                 other->file);
        return 0;
}

static int fleet_set_default(ParseContext *ctx, char **p, const char *value) {
        if (*p)
                return 0;
        return store_string(ctx, p, value);
}

static int fleet_finalize(ParseContext *ctx, const Config *c, FleetConfig *f) {
        static const struct {
                const char *section, *name;
        } required[] = {
                { "fleet", "build" },
                { "usage", "cpu" },
                { "usage", "memory" },
        };
        char b1[FORMAT_BYTES_MAX], b2[FORMAT_BYTES_MAX];
        unsigned line;
        int r;

        f->file = strdup(ctx->file);
        if (!f->file)
                return ctx_oom(ctx);
        f->line = ctx->fleet_line;

        r = fleet_finalize_name(ctx, c, f);
        if (r < 0)
                return r;

        for (size_t i = 0; i < ELEMENTSOF(required); i++)
                if (key_line(ctx, required[i].section, required[i].name) == 0)
                        return ctx_error(ctx, -EINVAL, 0, NULL, "%s.%s: required key is missing",
                                         required[i].section, required[i].name);

        if (fleet_set_default(ctx, &f->build_configuration, "default") < 0 ||
            fleet_set_default(ctx, &f->user, "nobody") < 0 ||
            fleet_set_default(ctx, &f->group, "nogroup") < 0)
                return ctx->r;
        if ((!f->args && !(f->args = calloc(1, sizeof(char *)))) ||
            (!f->environment && !(f->environment = calloc(1, sizeof(char *)))))
                return ctx_oom(ctx);

        line = key_line(ctx, "limits", "memory_max");
        if (line == 0) {
                if (f->memory_tolerance > (UINT64_MAX - f->usage_memory) / 2)
                        return ctx_error(ctx, -ERANGE, key_line(ctx, "checks", "memory_tolerance"),
                                         NULL, "checks.memory_tolerance: usage.memory + 2 × "
                                         "memory_tolerance (the default limits.memory_max) "
                                         "is too large");
                f->memory_max = f->usage_memory + 2 * f->memory_tolerance;
        } else if (f->memory_max < f->usage_memory)
                return ctx_error(ctx, -ERANGE, line, NULL,
                                 "limits.memory_max: %s is below usage.memory %s",
                                 format_bytes(f->memory_max, b1),
                                 format_bytes(f->usage_memory, b2));

        line = key_line(ctx, "limits", "cpu_max");
        if (f->cpu_max > 0 && f->cpu_max < f->usage_cpu)
                return ctx_error(ctx, -ERANGE, line, NULL,
                                 "limits.cpu_max: %g cores is below usage.cpu %g", f->cpu_max,
                                 f->usage_cpu);

        /* A probe still waiting when the next one is due would overlap it. */
        if (f->query != QUERY_NONE && f->check_interval > 0 &&
            f->query_timeout >= f->check_interval) {
                line = key_line(ctx, "checks", "query_timeout") ?:
                       key_line(ctx, "checks", "interval");
                return ctx_error(ctx, -EINVAL, line, NULL,
                                 "checks.query_timeout: must be shorter than checks.interval");
        }

        f->build_line = key_line(ctx, "fleet", "build");
        f->usage_servers_line = key_line(ctx, "usage", "servers");
        f->game_port_base_line = key_line(ctx, "ports", "game_base");
        f->query_port_base_line = key_line(ctx, "ports", "query_base");
        return 0;
}

static int parse_fleet_data(Config *c, const char *name, const char *data, size_t size,
                            char **ret_error) {
        _cleanup_(config_fleet_done) FleetConfig f;
        ParseContext ctx = {
                .file = name,
                .schema = &fleet_schema,
                .base = &f,
                .data = data,
                .size = size,
        };
        FleetConfig *fleets;
        int r;

        fleet_config_init(&f);

        r = parse_context_run(&ctx);
        if (r >= 0)
                r = fleet_finalize(&ctx, c, &f);
        if (r >= 0) {
                fleets = reallocarray(c->fleets, c->n_fleets + 1, sizeof(FleetConfig));
                if (!fleets)
                        r = ctx_oom(&ctx);
                else {
                        c->fleets = fleets;
                        c->fleets[c->n_fleets++] = f;
                        f = (FleetConfig) {};
                }
        }
        return parse_context_finish(&ctx, r, ret_error);
}

int config_parse_fleet(Config *c, const char *name, const char *text, char **ret_error) {
        return parse_fleet_data(c, name, text, strlen(text), ret_error);
}

/* Reads a whole config file. A missing file is -ENOENT without a message when missing_ok, so
 * that an absent slotd.ini means defaults. */
static int read_config_file(const char *path, bool missing_ok, char **ret, size_t *ret_size,
                            char **ret_error) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, allocated;
        struct stat st;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                if (errno == ENOENT && missing_ok)
                        return -ENOENT;
                return set_error(ret_error, negative_errno(), path, 0, "cannot open: %m");
        }
        if (fstat(fd, &st) < 0)
                return set_error(ret_error, negative_errno(), path, 0, "cannot stat: %m");
        if (!S_ISREG(st.st_mode))
                return set_error(ret_error, -EINVAL, path, 0, "not a regular file");
        if ((uint64_t) st.st_size > CONFIG_FILE_SIZE_MAX)
                return set_error(ret_error, -EFBIG, path, 0,
                                 "file too large (%jd bytes, at most %zu)", (intmax_t) st.st_size,
                                 CONFIG_FILE_SIZE_MAX);

        /* The file may grow between fstat() and read(): read one byte past the limit to
         * notice. */
        allocated = (size_t) st.st_size + 2;
        buf = malloc(allocated);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n;

                if (size + 1 >= allocated) {
                        char *t;

                        if (allocated > CONFIG_FILE_SIZE_MAX + 1)
                                return set_error(ret_error, -EFBIG, path, 0,
                                                 "file too large (at most %zu bytes)",
                                                 CONFIG_FILE_SIZE_MAX);
                        allocated = MIN(allocated * 2, CONFIG_FILE_SIZE_MAX + 2);
                        t = realloc(buf, allocated);
                        if (!t)
                                return -ENOMEM;
                        buf = t;
                }
                n = read(fd, buf + size, allocated - size - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return set_error(ret_error, negative_errno(), path, 0, "cannot read: %m");
                }
                if (n == 0)
                        break;
                size += (size_t) n;
        }
        if (size > CONFIG_FILE_SIZE_MAX)
                return set_error(ret_error, -EFBIG, path, 0, "file too large (at most %zu bytes)",
                                 CONFIG_FILE_SIZE_MAX);
        buf[size] = '\0';

        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

static void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}

static int cmp_strings(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The *.ini files of dir sorted by strcmp(); a missing dir has none. Dotfiles are skipped:
 * editors and package managers leave ".foo.ini.swp"-style and ".dpkg-new" files around. */
static int list_fleet_files(const char *dir, char ***ret, char **ret_error) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_strv_free_ char **names = NULL;
        struct dirent *de;

        names = calloc(1, sizeof(char *));
        if (!names)
                return -ENOMEM;

        d = opendir(dir);
        if (!d) {
                if (errno == ENOENT) {
                        *ret = TAKE_PTR(names);
                        return 0;
                }
                return set_error(ret_error, negative_errno(), dir, 0, "cannot open directory: %m");
        }

        for (;;) {
                size_t n;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                return set_error(ret_error, negative_errno(), dir, 0,
                                                 "cannot read directory: %m");
                        break;
                }
                n = strlen(de->d_name);
                if (de->d_name[0] == '.' || n <= 4 || !streq(de->d_name + n - 4, ".ini"))
                        continue;
                if (strv_extend(&names, de->d_name) < 0)
                        return -ENOMEM;
        }

        qsort(names, strv_length(names), sizeof(char *), cmp_strings);
        *ret = TAKE_PTR(names);
        return 0;
}

int config_load(const char *config_file, const char *fleets_dir, Config **ret, char **ret_error) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_strv_free_ char **names = NULL;
        int r;

        c = config_new();
        if (!c)
                return -ENOMEM;

        if (config_file) {
                _cleanup_free_ char *data = NULL;
                size_t size = 0;

                if (free_and_strdup(&c->config_file, config_file) < 0)
                        return -ENOMEM;
                r = read_config_file(config_file, true, &data, &size, ret_error);
                if (r >= 0)
                        r = parse_machine_data(c, config_file, data, size, ret_error);
                else if (r == -ENOENT)
                        r = 0; /* no slotd.ini: all defaults */
                if (r < 0)
                        return r;
        }

        if (fleets_dir) {
                size_t n = strlen(fleets_dir);

                while (n > 1 && fleets_dir[n - 1] == '/')
                        n--;
                c->fleets_dir = strndup(fleets_dir, n);
                if (!c->fleets_dir)
                        return -ENOMEM;

                r = list_fleet_files(c->fleets_dir, &names, ret_error);
                if (r < 0)
                        return r;
        }

        STRV_FOREACH(name, names) {
                _cleanup_free_ char *path = NULL, *data = NULL;
                size_t size = 0;

                if (asprintf(&path, "%s/%s", streq(c->fleets_dir, "/") ? "" : c->fleets_dir,
                             *name) < 0)
                        return -ENOMEM;
                r = read_config_file(path, false, &data, &size, ret_error);
                if (r < 0)
                        return r;
                r = parse_fleet_data(c, path, data, size, ret_error);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(c);
        return 0;
}

static int validate_build(const FleetConfig *f, char **ret_error) {
        struct stat st;

        if (stat(f->build, &st) < 0)
                return set_error(ret_error, negative_errno(), f->file, f->build_line,
                                 "fleet.build: %m (got '%s')", f->build);
        if (!S_ISREG(st.st_mode))
                return set_error(ret_error, -EINVAL, f->file, f->build_line,
                                 "fleet.build: not a regular file (got '%s')", f->build);
        if (access(f->build, X_OK) < 0)
                return set_error(ret_error, negative_errno(), f->file, f->build_line,
                                 "fleet.build: not executable: %m (got '%s')", f->build);
        return 0;
}

typedef struct PortRange {
        const FleetConfig *fleet;
        const char *key;
        unsigned line;
        unsigned first, last;
} PortRange;

static PortRange port_range(const FleetConfig *f, bool query) {
        /* Before the density every fleet still has at least one slot. */
        unsigned n = MAX(f->slots, 1u);
        unsigned base = query ? f->query_port_base : f->game_port_base;

        return (PortRange) {
                .fleet = f,
                .key = query ? "ports.query_base" : "ports.game_base",
                .line = query ? f->query_port_base_line : f->game_port_base_line,
                .first = base,
                .last = n - 1 > UINT_MAX - base ? UINT_MAX : base + (n - 1),
        };
}

static int validate_ports(const Config *c, char **ret_error) {
        _cleanup_free_ PortRange *ranges = NULL;
        size_t n = c->n_fleets * 2;

        ranges = calloc(MAX(n, (size_t) 1), sizeof(PortRange));
        if (!ranges)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                PortRange *b = &ranges[i];

                *b = port_range(&c->fleets[i / 2], i % 2 == 1);
                if (b->last > UINT16_MAX)
                        return set_error(ret_error, -ERANGE, b->fleet->file, b->line,
                                         "%s: %u slots from port %u run past port 65535",
                                         b->key, MAX(b->fleet->slots, 1u), b->first);

                for (size_t j = 0; j < i; j++) {
                        const PortRange *a = &ranges[j];

                        if (b->first > a->last || a->first > b->last)
                                continue;
                        if (a->fleet == b->fleet)
                                return set_error(ret_error, -EADDRINUSE, b->fleet->file, b->line,
                                                 "%s: ports %u-%u overlap %s %u-%u of the same "
                                                 "fleet",
                                                 b->key, b->first, b->last, a->key, a->first,
                                                 a->last);
                        if (a->line > 0)
                                return set_error(ret_error, -EADDRINUSE, b->fleet->file, b->line,
                                                 "%s: ports %u-%u of fleet %s overlap %s %u-%u "
                                                 "of fleet %s (%s:%u)",
                                                 b->key, b->first, b->last, b->fleet->name,
                                                 a->key, a->first, a->last, a->fleet->name,
                                                 a->fleet->file, a->line);
                        return set_error(ret_error, -EADDRINUSE, b->fleet->file, b->line,
                                         "%s: ports %u-%u of fleet %s overlap %s %u-%u of "
                                         "fleet %s (%s)",
                                         b->key, b->first, b->last, b->fleet->name, a->key,
                                         a->first, a->last, a->fleet->name, a->fleet->file);
                }
        }
        return 0;
}

int config_validate(Config *c, char **ret_error) {
        int r;

        for (size_t i = 0; i < c->n_fleets; i++) {
                const FleetConfig *f = &c->fleets[i];

                if (!f->name || !fleet_name_is_valid(f->name))
                        return set_error(ret_error, -EINVAL, f->file, 0,
                                         "fleet.name: expected %s", FLEET_NAME_RULE);
                for (size_t j = 0; j < i; j++)
                        if (streq(c->fleets[j].name, f->name))
                                return set_error(ret_error, -EEXIST, f->file, 0,
                                                 "fleet.name: fleet %s is already defined by %s",
                                                 f->name, c->fleets[j].file);

                if (!f->build || f->build[0] != '/')
                        return set_error(ret_error, -EINVAL, f->file, f->build_line,
                                         "fleet.build: expected an absolute path");
                r = validate_build(f, ret_error);
                if (r < 0)
                        return r;
        }

        return validate_ports(c, ret_error);
}

int config_load_full(const char *config_file, const char *fleets_dir,
                     const MachineResources *detected, Config **ret, char **ret_error) {
        _cleanup_(config_freep) Config *c = NULL;
        MachineResources m = {};
        int r;

        r = config_load(config_file, fleets_dir, &c, ret_error);
        if (r < 0)
                return r;

        if (detected)
                m = *detected;
        else if (!(c->cpus > 0) || c->memory == 0) {
                r = machine_resources_detect(&m);
                if (r < 0)
                        return set_error(ret_error, r, config_file ?: "slotd.ini", 0,
                                         "cannot detect the machine's CPUs and memory (%s): set "
                                         "machine.cpus and machine.memory",
                                         strerror(-r));
        }

        r = density_compute(c, &m, ret_error);
        if (r < 0)
                return r;

        r = config_validate(c, ret_error);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(c);
        return 0;
}
