/* SPDX-License-Identifier: MIT */
/* What execve() makes of a build's first bytes (exec-check.c): the input is those bytes. */
#include <string.h>

#include "exec-check.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char interp[64];
        ExecFormat f;

        memset(interp, 0x5a, sizeof(interp));
        f = exec_parse_header(data, size, interp, sizeof(interp));
        FUZZ_ASSERT(f >= EXEC_FORMAT_UNKNOWN && f <= EXEC_FORMAT_SCRIPT_BAD);
        /* The interpreter is always a terminated string; only a script names one always, and
         * what it names is a word: no blank, newline or NUL inside. */
        FUZZ_ASSERT(memchr(interp, '\0', sizeof(interp)));
        FUZZ_ASSERT(f == EXEC_FORMAT_SCRIPT || f == EXEC_FORMAT_ELF || interp[0] == '\0');
        if (f == EXEC_FORMAT_SCRIPT) {
                FUZZ_ASSERT(interp[0] != '\0');
                FUZZ_ASSERT(!strpbrk(interp, " \t\n"));
        }
        /* Tiny buffers never overflow either. */
        (void) exec_parse_header(data, size, interp, 1);
        FUZZ_ASSERT(interp[0] == '\0');
        return 0;
}
