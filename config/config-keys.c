/* SPDX-License-Identifier: MIT */
/* The parsers of single keys that any section may use: each turns a value into its field, or
 * records an error naming the key and the value. */
#include <arpa/inet.h>

#include "config-internal.h"
#include "expand.h"
#include "strv.h"
#include "window.h"

int parse_string_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
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

int parse_path_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
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

int parse_ipv4_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        return parse_address_key(ctx, k, value, AF_INET, data);
}

int parse_ipv6_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        return parse_address_key(ctx, k, value, AF_INET6, data);
}

int parse_cores_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
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

int parse_cpu_max_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
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

int parse_memory_high_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        uint64_t v;
        int r;

        if (streq(value, "off") || streq(value, "max")) { /* "max": memory.high's own word */
                *(uint64_t *) data = UINT64_MAX;
                return 0;
        }
        r = parse_size(value, &v);
        if (r == -ERANGE || (r >= 0 && v == UINT64_MAX))
                return key_error(ctx, k, value, -ERANGE, "size too large");
        if (r < 0)
                return key_error(ctx, k, value, r, "expected a size like 200M or 2G, or 'off'");
        if (v == 0)
                return key_error(ctx, k, value, -ERANGE, "must be greater than 0, or 'off'");
        *(uint64_t *) data = v;
        return 0;
}

int parse_size_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
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

int parse_duration_key(ParseContext *ctx, const ConfigKey *k, const char *value,
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

int parse_percent_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
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
int parse_window_count_key(ParseContext *ctx, const ConfigKey *k, const char *value,
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

int parse_port_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        uint16_t v;
        int r;

        r = parse_port(value, &v);
        if (r < 0)
                return key_error(ctx, k, value, r, "expected a port between 1 and 65535");

        *(uint16_t *) data = v;
        return 0;
}

int parse_signal_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        int v;
        int r;

        r = parse_signal(value, &v);
        if (r < 0)
                return key_error(ctx, k, value, r, "expected a signal like SIGSEGV, SEGV or 11");

        *(int *) data = v;
        return 0;
}

int parse_boolean_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        bool v;
        int r;

        r = parse_boolean(value, &v);
        if (r < 0)
                return key_error(ctx, k, value, r, "expected yes or no");

        *(bool *) data = v;
        return 0;
}

int parse_positive_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        unsigned v;
        int r;

        r = parse_unsigned(value, &v);
        if (r < 0 || v == 0)
                return key_error(ctx, k, value, r < 0 ? r : -ERANGE, "expected a positive integer");
        *(unsigned *) data = v;
        return 0;
}

int parse_query_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        QueryType t = query_type_from_string(value);

        if ((int) t < 0)
                return key_error(ctx, k, value, -EINVAL, "expected sqp, a2s or none");

        *(QueryType *) data = t;
        return 0;
}

/* "known: ${PORT} ... ${BUILD_CONFIGURATION}, Multiplay's $$port$$ ... $$commandline$$ and
 * the build configuration's variables as $$NAME$$", for messages. */
const char *expand_known_text(void) {
        static char text[512];

        if (text[0] == '\0') {
                size_t n = 0;

                n += snprintf(text + n, sizeof(text) - n, "known:");
                for (unsigned i = 0; i < expand_n_known_names; i++)
                        n += snprintf(text + n, sizeof(text) - n, " ${%s}", expand_known_names[i]);
                n += snprintf(text + n, sizeof(text) - n, ", Multiplay's");
                for (unsigned i = 0; i < expand_n_launch_names; i++)
                        n += snprintf(text + n, sizeof(text) - n, " $$%s$$",
                                      expand_launch_names[i]);
                (void) snprintf(text + n, sizeof(text) - n,
                                " and the build configuration's variables as $$NAME$$");
        }
        return text;
}

/* Every ${NAME} known and every $$name$$ of Multiplay's server variables, with empty values:
 * what parsing checks words against. A $$name$$ that is none of them may be a build
 * configuration's variable, checked once the file is read (config-build.c). */
static unsigned expand_check_table(ExpandVariable vars[static EXPAND_CHECK_MAX]) {
        unsigned n = 0;

        for (unsigned j = 0; j < expand_n_known_names && n < EXPAND_CHECK_MAX; j++)
                vars[n++] = (ExpandVariable){ expand_known_names[j], "", false };
        for (unsigned j = 0; j < expand_n_launch_names && n < EXPAND_CHECK_MAX; j++)
                vars[n++] = (ExpandVariable){ expand_launch_names[j], "", true };
        return n;
}

static int parse_words_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data,
                           bool commandline) {
        _cleanup_strv_free_ char **l = NULL;
        char ***p = data;
        int r;

        r = strv_split_quoted(value, &l);
        if (r == -ENOMEM)
                return ctx_oom(ctx);
        if (r < 0)
                return key_error(ctx, k, value, r, "unterminated quote or trailing backslash");

        /* An unknown ${NAME} would fail every start of every slot: refuse it here. */
        for (size_t i = 0; l[i]; i++) {
                ExpandVariable vars[EXPAND_CHECK_MAX];
                unsigned n = expand_check_table(vars);
                const char *bad = NULL;
                char *expanded = NULL;
                char what[256];

                r = expand_variables_full(l[i], vars, n, EXPAND_KEEP_UNKNOWN_LAUNCH, &expanded,
                                          &bad);
                free(expanded);
                if (r == -ENOMEM)
                        return ctx_oom(ctx);
                if (r < 0) {
                        /* Described before l goes: 'bad' points into it. */
                        expand_describe_error(bad, what, sizeof(what));
                        return key_error(ctx, k, value, -EINVAL, "%s; %s", what,
                                         expand_known_text());
                }
                /* $$commandline$$ is the launch parameters themselves (SPEC "Launch
                 * parameters"): in args it would name itself. */
                if (!commandline && strstr(l[i], "$$commandline$$"))
                        return key_error(ctx, k, value, -EINVAL,
                                         "$$commandline$$ is these launch parameters themselves; "
                                         "it may be used in environment, not in args");
        }

        strv_free(*p);
        *p = TAKE_PTR(l);
        return 0;
}

int parse_args_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        return parse_words_key(ctx, k, value, data, false);
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

int parse_environment_key(ParseContext *ctx, const ConfigKey *k, const char *value,
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

        r = parse_words_key(ctx, k, value, &l, true);
        if (r < 0)
                return r;

        for (size_t i = 0; l[i]; i++) {
                const char *eq = strchr(l[i], '=');
                size_t n = eq ? (size_t) (eq - l[i]) : 0;

                if (!eq || !env_name_is_valid(l[i], n))
                        return key_error(ctx, k, value, -EINVAL,
                                         "expected KEY=value words, KEY made of A-Z a-z 0-9 _ "
                                         "and not starting with a digit; '%s' is not",
                                         config_quote(l[i], q));
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

bool text_is_printable(const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        return false;
                /* U+0080..U+009F, the C1 controls, in UTF-8. */
                if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
                        return false;
        }
        return true;
}
