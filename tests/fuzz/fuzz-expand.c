/* SPDX-License-Identifier: MIT */
/* ${NAME} and $$name$$ expansion (config/expand.c): the input is one args or environment word
 * (a NUL ends it early); its first byte, when there is one, chooses the parser's mode. */
#include <errno.h>
#include <string.h>

#include "expand.h"
#include "fuzz.h"
#include "macro.h"

/* Values without '$', so that no expansion can make one. */
static const ExpandVariable vars[] = {
        { "PORT", "9001" }, { "HOME", "/srv/h" }, { "EMPTY", "" },
        { "port", "9001", true }, { "query_port", "9601", true }, { "log_dir", "/srv/h/logs", true },
        { "commandline", "-port 9001 -x", true }, { "map", "de_dust2", true },
        { "a.b-c_D9", "v", true },
};

static size_t count_dollars(const char *s) {
        size_t n = 0;

        for (; *s; s++)
                n += *s == '$';
        return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *in = NULL, *out = NULL;
        ExpandFlags flags = 0;
        const char *bad = NULL;
        char what[256];
        int r;

        if (size > 0) {
                flags = (data[0] & 1) ? EXPAND_KEEP_UNKNOWN_LAUNCH : 0;
                data++;
                size--;
        }
        in = strndup((const char *) data, size);
        if (!in)
                return 0;

        r = expand_variables_full(in, vars, ELEMENTSOF(vars), flags, &out, &bad);
        FUZZ_ASSERT(r == 0 || r == -EINVAL || r == -ENOMEM);
        if (r == -EINVAL) {
                /* bad points at the offending "$" of the input, and can be described. */
                FUZZ_ASSERT(bad >= in && bad < in + strlen(in));
                FUZZ_ASSERT(bad[0] == '$' && (bad[1] == '{' || bad[1] == '$'));
                expand_describe_error(bad, what, sizeof(what));
                FUZZ_ASSERT(memchr(what, '\0', sizeof(what)) && what[0] != '\0');
        }
        if (r == 0) {
                /* Values have no '$': every '$' of the output is one of the input's, copied
                 * once (a reference's own are consumed; the output is not expanded again). */
                FUZZ_ASSERT(count_dollars(out) <= count_dollars(in));
                /* Without '$' the word is unchanged. */
                if (!strchr(in, '$'))
                        FUZZ_ASSERT(strcmp(in, out) == 0);
                /* Expansion only replaces: an input without "$$" and "${" is unchanged. */
                if (!strstr(in, "$$") && !strstr(in, "${"))
                        FUZZ_ASSERT(strcmp(in, out) == 0);
        }
        return 0;
}
