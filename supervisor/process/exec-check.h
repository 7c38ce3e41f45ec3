/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Why a build cannot be executed by a fleet's identity: what slotd says when a server's
 * execve() failed (the errno comes from the status file, spawn.h), and what `slotd --check`
 * verifies before anything runs (SPEC §2). A slot runs as fleet.user with fleet.group as its
 * only group and no capability (confine.c), so the ordinary permission bits decide, also for
 * uid 0. */

typedef struct ExecIdentity {
        const char *user;
        uid_t uid;
        gid_t gid;
} ExecIdentity;

typedef enum ExecProblem {
        EXEC_OK,
        EXEC_MISSING,          /* 'component' does not exist (the build or a directory) */
        EXEC_NOT_DIRECTORY,    /* 'component', on the path, is not a directory */
        EXEC_NOT_SEARCHABLE,   /* the directory 'component' lacks x for the identity */
        EXEC_NOT_REGULAR,      /* the build is not a regular file */
        EXEC_NOT_EXECUTABLE,   /* the build lacks x for the identity */
        EXEC_NOT_READABLE,     /* a #! script its interpreter cannot read */
        EXEC_NOEXEC_MOUNT,     /* the build lies on a file system mounted noexec */
        EXEC_BAD_FORMAT,       /* neither ELF nor #!: the kernel says ENOEXEC */
        EXEC_FOREIGN_ELF,      /* an ELF file for another machine or class */
        EXEC_BAD_INTERPRETER,  /* the #! line or PT_INTERP names no usable interpreter */
        EXEC_INTERPRETER,      /* the interpreter itself has 'interpreter_problem' */
        EXEC_DENIED,           /* access() as the identity refused 'component' (ACLs, LSMs) */
        _EXEC_PROBLEM_MAX,
} ExecProblem;

#define EXEC_PATH_MAX 4096

typedef struct ExecFinding {
        ExecProblem problem;
        int error;                        /* the errno this stands for (EACCES, ENOENT...) */
        char component[EXEC_PATH_MAX];    /* the path (or prefix) that stops it */
        mode_t mode;                      /* of 'component', when it exists */
        uid_t owner;
        gid_t group;
        char interpreter[256];            /* for the two interpreter problems */
        ExecProblem interpreter_problem;  /* EXEC_INTERPRETER: what is wrong with it */
} ExecFinding;

/* Pure: whether 'mode' (owned by owner:group) grants 'bit' (4 read, 1 execute/search) to the
 * identity, by the owner, group, other classes and without any capability. */
bool exec_mode_grants(mode_t mode, uid_t owner, gid_t group, const ExecIdentity *id, unsigned bit);

typedef enum ExecFormat {
        EXEC_FORMAT_UNKNOWN,
        EXEC_FORMAT_ELF,           /* for this machine; 'interpreter' its PT_INTERP or "" */
        EXEC_FORMAT_ELF_FOREIGN,
        EXEC_FORMAT_SCRIPT,        /* 'interpreter' from its #! line */
        EXEC_FORMAT_SCRIPT_BAD,    /* #! without an interpreter path the kernel would take */
} ExecFormat;

/* Pure: what the first 'size' bytes of a file are to execve(). A PT_INTERP beyond them is not
 * seen (then 'interpreter' is ""). 'interpreter' gets at most interpreter_size - 1 bytes;
 * longer is EXEC_FORMAT_SCRIPT_BAD or, for ELF, "". */
ExecFormat exec_parse_header(const uint8_t *buf, size_t size, char *interpreter,
                             size_t interpreter_size);

/* Pure: "ENOENT", or "errno N". */
const char *exec_errno_name(int error, char buf[static 16]);

/* Pure: one clause saying what stops the identity, e.g. "the directory /srv/game is not
 * searchable by user game (uid 1001, gid 1001): mode 0700, owner 0:0". Empty for EXEC_OK. */
void exec_describe(const ExecFinding *f, const ExecIdentity *id, char *buf, size_t size);

/* From the file system as the caller (root) sees it: stats each directory of 'path' and the
 * build, then reads its first page (and follows its interpreter one level). Mode bits only:
 * ACLs are not read. 'path' must be absolute. Returns 0 with the finding (EXEC_OK: nothing
 * found), or a negative errno. */
int exec_diagnose(const char *path, const ExecIdentity *id, ExecFinding *ret);

/* What `slotd --check` runs: exec_diagnose(), then the truth of the kernel: a child that takes
 * the identity as a slot has it (groups, gid, uid, no capability) walks the path with
 * access(X_OK), so that ACLs and security modules count. Blocks for that child. *ret_as_user
 * is false when the child could not take the identity (not root): modes alone decided. */
int exec_check(const char *path, const ExecIdentity *id, ExecFinding *ret, bool *ret_as_user);
