/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The libFuzzer entry point, defined once per harness; replay.c calls it for corpus files. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A violated property must end the run where libFuzzer (or the replay) sees it: abort() gives
 * a stack trace under the sanitizers and a failing test under plain meson test. */
static inline _Noreturn void fuzz_fail(const char *file, int line, const char *expr) {
        fprintf(stderr, "%s:%d: property violated: %s\n", file, line, expr);
        abort();
}

#define FUZZ_ASSERT(expr)                                                                      \
        do {                                                                                   \
                if (!(expr))                                                                   \
                        fuzz_fail(__FILE__, __LINE__, #expr);                                  \
        } while (0)

/* A string field of a parsed reply: NUL-terminated inside its array and free of the bytes the
 * parsers promise to replace (< 0x20 and 0x7f). */
static inline void fuzz_assert_clean_string(const char *s, size_t size) {
        size_t i;

        for (i = 0; i < size && s[i] != '\0'; i++)
                FUZZ_ASSERT((unsigned char) s[i] >= 0x20 && s[i] != 0x7f);
        FUZZ_ASSERT(i < size);
}

#define FUZZ_ASSERT_CLEAN_STRING(field) fuzz_assert_clean_string(field, sizeof(field))
