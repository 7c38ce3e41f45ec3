/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "expand.h"
#include "macro.h"

const char *const expand_known_names[] = {
        "PORT", "QUERY_PORT", "SERVER_ID", "ALLOCATION_UUID", "SERVER_LOG_DIR", "HOME",
        "BUILD_CONFIGURATION",
};
const unsigned expand_n_known_names = ELEMENTSOF(expand_known_names);

/* Multiplay's server variables, as its "Launch parameters" page lists them:
 * https://docs.unity.com/ugs/en-us/manual/game-server-hosting/manual/concepts/launch-parameters */
const char *const expand_launch_names[] = {
        "port", "query_port", "query_type", "log_dir", "file_dir", "config_dir", "game_exe",
        "serverid", "machineid", "fleetid", "regionid", "regionname", "ip", "ipv6", "timestamp",
        "commandline",
};
const unsigned expand_n_launch_names = ELEMENTSOF(expand_launch_names);

static bool is_name_char(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
}

unsigned expand_launch_name_length(const char *p, bool *ret_closed) {
        unsigned n = 0;

        if (p[0] != '$' || p[1] != '$')
                return 0;
        while (is_name_char(p[2 + n]))
                n++;
        if (ret_closed)
                *ret_closed = n > 0 && p[2 + n] == '$' && p[3 + n] == '$';
        return n;
}

static const char *expand_lookup(const ExpandVariable *vars, unsigned n_vars, bool launch,
                                 const char *name, size_t len) {
        for (unsigned i = 0; i < n_vars; i++)
                if (vars[i].launch == launch && strlen(vars[i].name) == len &&
                    strncmp(vars[i].name, name, len) == 0)
                        return strempty(vars[i].value);
        return NULL;
}

/* Appends n bytes of s to out (len used, *allocated its size), with room for the NUL. */
static int expand_append(char **out, size_t *len, size_t *allocated, const char *s, size_t n) {
        if (*len + n + 1 > *allocated) {
                size_t want = MAX(*len + n + 1, 2 * *allocated);
                char *t = realloc(*out, want);
                if (!t)
                        return -ENOMEM;
                *out = t;
                *allocated = want;
        }
        memcpy(*out + *len, s, n);
        *len += n;
        return 0;
}

int expand_variables_full(const char *in, const ExpandVariable *vars, unsigned n_vars,
                          ExpandFlags flags, char **ret, const char **ret_bad) {
        size_t allocated = strlen(in) + 1, len = 0;
        _cleanup_free_ char *out = malloc(allocated);

        if (!out)
                return -ENOMEM;
        for (const char *p = in; *p;) {
                const char *value, *name, *next;
                size_t nlen;
                bool closed = false;

                if (p[0] == '$' && p[1] == '{') {
                        const char *end = strchr(p + 2, '}');
                        if (!end || end == p + 2)
                                goto bad;
                        name = p + 2;
                        nlen = (size_t) (end - name);
                        next = end + 1;
                        value = expand_lookup(vars, n_vars, false, name, nlen);
                } else if (p[0] == '$' && p[1] == '$' && is_name_char(p[2])) {
                        nlen = expand_launch_name_length(p, &closed);
                        if (!closed)
                                goto bad;
                        name = p + 2;
                        next = name + nlen + 2;
                        value = expand_lookup(vars, n_vars, true, name, nlen);
                        if (!value && (flags & EXPAND_KEEP_UNKNOWN_LAUNCH))
                                value = ""; /* checked later; the text is not used */
                } else {
                        /* Text, one byte at a time: a "$$" that names nothing gives its first
                         * "$", and its second may still start "${" or "$$name$$". */
                        if (expand_append(&out, &len, &allocated, p, 1) < 0)
                                return -ENOMEM;
                        p++;
                        continue;
                }
                if (!value)
                        goto bad;
                if (expand_append(&out, &len, &allocated, value, strlen(value)) < 0)
                        return -ENOMEM;
                p = next;
                continue;
        bad:
                if (ret_bad)
                        *ret_bad = p;
                return -EINVAL;
        }
        out[len] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

void expand_describe_error(const char *bad, char *buf, unsigned n) {
        bool closed = false;
        unsigned l;

        if (n == 0)
                return;
        if (bad[0] == '$' && bad[1] == '{') {
                const char *end = strchr(bad + 2, '}');
                if (!end)
                        snprintf(buf, n, "unterminated '${'");
                else if (end == bad + 2)
                        snprintf(buf, n, "empty variable name '${}'");
                else {
                        /* The name as written, control characters as \xNN: one line. */
                        char name[4 * 64 + 4];
                        size_t o = 0;

                        for (const char *c = bad; c <= end && o + 5 < sizeof(name); c++) {
                                if ((unsigned char) *c < 0x20 || *c == 0x7f)
                                        o += (size_t) snprintf(name + o, 5, "\\x%02x",
                                                               (unsigned char) *c);
                                else
                                        name[o++] = *c;
                        }
                        name[o] = '\0';
                        snprintf(buf, n, "unknown variable '%s'", name);
                }
                return;
        }
        l = expand_launch_name_length(bad, &closed);
        if (l > 0 && closed)
                snprintf(buf, n, "unknown variable '%.*s'", (int) MIN(l + 4, 200u), bad);
        else if (l > 0)
                snprintf(buf, n, "unterminated '%.*s' (a $$name$$ ends with $$)",
                         (int) MIN(l + 2, 200u), bad);
        else
                snprintf(buf, n, "malformed variable");
}
