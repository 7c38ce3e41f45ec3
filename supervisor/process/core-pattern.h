/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Where the kernel put a crashed server's core (core(5)): from /proc/sys/kernel/core_pattern
 * and core_uses_pid, and what is known of the process. Pure. */

typedef enum CoreWhere {
        CORE_IN_CWD,        /* a file of that name in the process's working directory (the
                             * slot's home): slotd keeps it */
        CORE_PIPE,          /* given to a program ("|/lib/systemd/systemd-coredump ..."):
                             * that program keeps it; the name is the program's path */
        CORE_ELSEWHERE,     /* a file at that path (it names a directory): left there */
        CORE_UNKNOWN,       /* a specifier slotd cannot know (%t, %i, %I, %c, %d, %F...), or
                             * an empty or too long name */
} CoreWhere;

typedef struct CoreProcess {
        pid_t pid;          /* 0 = not known: then %p/%P and core_uses_pid are unknown */
        uid_t uid;
        gid_t gid;
        int signal;
        const char *exe;    /* the executable's path: %e (its first 15 bytes), %f, %E */
        const char *hostname;
} CoreProcess;

#define CORE_NAME_MAX 256

/* Resolves 'pattern' (core_pattern's content without its newline) for process 'p' into ret
 * (CORE_NAME_MAX bytes): the file's name or path, or the pipe's program. */
CoreWhere core_pattern_resolve(const char *pattern, bool uses_pid, const CoreProcess *p,
                               char ret[static CORE_NAME_MAX]);
