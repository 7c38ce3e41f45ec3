/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/filter.h>
#include <seccomp.h>
#include <stdbool.h>
#include <sys/types.h>

/* What a build executable may do (issue 5's threat model, docs/security.md): run as the
 * fleet's user with no capability, unable to gain one, inside a seccomp allow-list close to
 * systemd's @system-service. */

typedef struct ConfineParams {
        uid_t uid;
        gid_t gid;
        unsigned long nofile;       /* RLIMIT_NOFILE, 0 = leave */
        unsigned long core;         /* RLIMIT_CORE */
        const struct sock_fprog *seccomp;   /* NULL = no filter */
} ConfineParams;

/* Builds the filter: the default allow-list, or the syscall names in 'list_path' (one per
 * line, '#' comments). Denied calls fail with EPERM, or kill the process when kill is set.
 * Namespaces cannot be created or joined whatever the list says. Returns -EINVAL with a
 * message naming the file and line for a name the kernel does not know. */
int confine_seccomp_new(const char *list_path, bool kill, scmp_filter_ctx *ret,
                        bool *ret_keeper_allowed, char **ret_error);

/* Compiles the filter to BPF once, so that a start costs one prctl() instead of a
 * compilation in every child. Free with confine_seccomp_program_free(). */
int confine_seccomp_program(scmp_filter_ctx ctx, struct sock_fprog **ret);
struct sock_fprog *confine_seccomp_program_free(struct sock_fprog *p);

/* The default allow-list's program, as confine_seccomp_new(NULL, kill, …) and
 * confine_seccomp_program() make it: with EPERM the one the build compiled
 * (confine_default_eperm[], by confine-gen), copied; with kill, or in a cross build, compiled
 * now. Free with confine_seccomp_program_free(). */
int confine_seccomp_default(bool kill, struct sock_fprog **ret, bool *ret_keeper_allowed);
extern const struct sock_filter confine_default_eperm[];
extern const unsigned short confine_default_eperm_len; /* 0: none was built */

/* In the child, after the fork and before exec: identity, capabilities, no_new_privs,
 * rlimits, and the seccomp filter last. On failure errno is set and the step is named. */
int confine_apply(const ConfineParams *p, const char **ret_step);

/* The names of the default allow-list, for documentation and tests. */
extern const char *const confine_default_allow[];
/* The system calls slotd-keeper makes once confined: *ret_keeper_allowed of
 * confine_seccomp_new() says whether the filter allows every one of them, so that the keeper
 * can run under it and restart the server itself (spawn.h). */
extern const char *const confine_keeper_needs[];
