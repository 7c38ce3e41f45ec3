/* SPDX-License-Identifier: MIT */
/* The scaler's targets (fleet/allocator/scaler-plan.c, scaler_targets_parse()): allocator.ini's
 * [scaler] targets, with "FLEET/REGION" in double quotes. Properties: a refusal says why and
 * leaves nothing; an accepted list has a fleet in each entry (no '/' in it, no blank when it
 * was not quoted), floor <= ceiling, no fleet and region twice, and written back (quoted when
 * it has a blank) it parses to the same; scaler_target_find() finds each. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "macro.h"
#include "scaler-plan.h"

static bool same_str(const char *a, const char *b) {
        return (!a && !b) || (a && b && streq(a, b));
}

/* Appends t as "FLEET[/REGION] buffer=N floor=N[ ceiling=N];" to buf; false when it cannot be
 * written back (a blank and a '"' both in its name), or buf is full. */
static bool write_back(const ScalerTarget *t, char *buf, size_t size) {
        size_t used = strlen(buf);
        char name[4096];
        bool quote;
        int k;

        k = snprintf(name, sizeof(name), "%s%s%s", t->fleet, t->region ? "/" : "",
                     t->region ?: "");
        if (k < 0 || (size_t) k >= sizeof(name))
                return false;
        quote = strpbrk(name, " \t") != NULL;
        if (quote && strchr(name, '"'))
                return false;
        char ceiling[32] = "";

        if (t->ceiling != SCALER_CEILING_NONE)
                (void) snprintf(ceiling, sizeof(ceiling), " ceiling=%u", t->ceiling);
        k = snprintf(buf + used, size - used, "%s%s%s buffer=%u floor=%u%s;",
                     quote ? "\"" : "", name, quote ? "\"" : "", t->buffer, t->floor,
                     ceiling);
        return k >= 0 && (size_t) k < size - used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text, *error = NULL, back[1 << 16] = "";
        ScalerTarget *t = NULL, *u = NULL;
        size_t n = 0, m = 0;
        bool all = true;
        int r;

        if (size > 8192)
                return 0;
        text = strndup((const char *) data, size);
        if (!text)
                return 0;
        r = scaler_targets_parse(text, &t, &n, &error);
        if (r < 0) {
                FUZZ_ASSERT(r == -EINVAL || r == -ENOMEM);
                FUZZ_ASSERT(r == -ENOMEM || error);
                free(error);
                free(text);
                return 0;
        }
        FUZZ_ASSERT(!error);
        for (size_t i = 0; i < n; i++) {
                FUZZ_ASSERT(t[i].fleet && t[i].fleet[0] != '\0' && !strchr(t[i].fleet, '/'));
                FUZZ_ASSERT(t[i].floor <= t[i].ceiling);
                for (size_t j = 0; j < i; j++)
                        FUZZ_ASSERT(!streq(t[i].fleet, t[j].fleet) ||
                                    !same_str(t[i].region, t[j].region));
                FUZZ_ASSERT(scaler_target_find(t, n, t[i].fleet, t[i].region ?: "") == &t[i] ||
                            !t[i].region);
                all = all && write_back(&t[i], back, sizeof(back));
        }
        if (all) {
                FUZZ_ASSERT(scaler_targets_parse(back, &u, &m, &error) == 0);
                FUZZ_ASSERT(m == n);
                for (size_t i = 0; i < n; i++) {
                        FUZZ_ASSERT(streq(u[i].fleet, t[i].fleet));
                        FUZZ_ASSERT(same_str(u[i].region, t[i].region));
                        FUZZ_ASSERT(u[i].buffer == t[i].buffer && u[i].floor == t[i].floor &&
                                    u[i].ceiling == t[i].ceiling);
                }
                scaler_targets_free(u, m);
        }
        scaler_targets_free(t, n);
        free(text);
        return 0;
}
