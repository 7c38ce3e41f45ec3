/* SPDX-License-Identifier: MIT */
#include "expand.h"
#include "macro.h"

const char *const expand_known_names[] = {
        "PORT", "QUERY_PORT", "SERVER_ID", "ALLOCATION_UUID", "SERVER_LOG_DIR", "HOME",
        "BUILD_CONFIGURATION",
};
const unsigned expand_n_known_names = ELEMENTSOF(expand_known_names);

int expand_variables(const char *in, const ExpandVariable *vars, unsigned n_vars, char **ret,
                     const char **ret_bad) {
        size_t allocated = strlen(in) + 1, len = 0;
        _cleanup_free_ char *out = malloc(allocated);

        if (!out)
                return -ENOMEM;
        for (const char *p = in; *p;) {
                const char *value = NULL;
                size_t vlen;

                if (p[0] != '$' || p[1] != '{') {
                        out[len++] = *p++;
                        continue;
                }
                const char *end = strchr(p + 2, '}');
                if (!end || end == p + 2) {
                        if (ret_bad)
                                *ret_bad = p;
                        return -EINVAL;
                }
                for (unsigned i = 0; i < n_vars; i++)
                        if (strlen(vars[i].name) == (size_t) (end - p - 2) &&
                            strncmp(vars[i].name, p + 2, (size_t) (end - p - 2)) == 0) {
                                value = strempty(vars[i].value);
                                break;
                        }
                if (!value) {
                        if (ret_bad)
                                *ret_bad = p;
                        return -EINVAL;
                }
                vlen = strlen(value);
                if (len + vlen + strlen(end + 1) + 1 > allocated) {
                        size_t n = len + vlen + strlen(end + 1) + 1;
                        char *t = realloc(out, n);
                        if (!t)
                                return -ENOMEM;
                        out = t;
                        allocated = n;
                }
                memcpy(out + len, value, vlen);
                len += vlen;
                p = end + 1;
        }
        out[len] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}
