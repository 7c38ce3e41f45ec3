/* SPDX-License-Identifier: MIT */
#include <grp.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/seccomp.h>

#include "confine.h"
#include "macro.h"

/* Close to systemd's @system-service: what ordinary servers need (I/O, files, sockets,
 * threads, memory, signals, timers, identity queries), and none of: ptrace and
 * process_vm_* (@debug), mount and friends, module loading, clock setting, reboot, kexec,
 * swap, bpf, perf events, keyrings, raw I/O, chroot, namespaces, syslog, acct. */
const char *const confine_default_allow[] = {
        /* process and threads */
        "arch_prctl", "brk", "capget", "clone", "clone3", "execve", "execveat", "exit",
        "exit_group", "fork", "vfork", "futex", "futex_waitv", "get_robust_list",
        "set_robust_list", "get_thread_area", "set_thread_area", "set_tid_address", "getpid",
        "getppid", "gettid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid", "prctl",
        "rseq", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
        "sched_getscheduler", "sched_setparam", "sched_setscheduler", "sched_get_priority_max",
        "sched_get_priority_min", "sched_rr_get_interval", "sched_yield", "sched_getattr",
        "sched_setattr", "getpriority", "setpriority", "ioprio_get", "ioprio_set", "wait4",
        "waitid", "pidfd_open", "pidfd_send_signal", "getcpu", "personality", "uname",
        "sysinfo", "getrandom", "membarrier", "restart_syscall",
        /* identity */
        "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
        "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
        "setfsuid", "setfsgid",
        /* memory */
        "mmap", "munmap", "mremap", "mprotect", "madvise", "mlock", "mlock2", "munlock",
        "mlockall", "munlockall", "mincore", "msync", "memfd_create", "get_mempolicy",
        "set_mempolicy", "mbind", "pkey_alloc", "pkey_free", "pkey_mprotect",
        /* signals */
        "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend",
        "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "kill",
        "tkill", "tgkill", "signalfd", "signalfd4", "pause",
        /* time and timers */
        "clock_gettime", "clock_getres", "clock_nanosleep", "gettimeofday", "time", "nanosleep",
        "alarm", "getitimer", "setitimer", "timer_create", "timer_delete", "timer_getoverrun",
        "timer_gettime", "timer_settime", "timerfd_create", "timerfd_gettime",
        "timerfd_settime", "times", "getrusage", "getrlimit", "setrlimit", "prlimit64",
        /* file descriptors and I/O */
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
        "preadv2", "pwritev2", "lseek", "close", "close_range", "dup", "dup2", "dup3", "fcntl",
        "ioctl", "flock", "fsync", "fdatasync", "sync_file_range", "syncfs", "pipe", "pipe2",
        "sendfile", "splice", "tee", "vmsplice", "copy_file_range", "fadvise64",
        "fallocate", "readahead", "eventfd", "eventfd2",
        /* polling */
        "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
        "epoll_wait", "epoll_pwait", "epoll_pwait2", "inotify_init", "inotify_init1",
        "inotify_add_watch", "inotify_rm_watch", "io_setup", "io_destroy", "io_submit",
        "io_cancel", "io_getevents", "io_pgetevents", "io_uring_setup", "io_uring_enter",
        "io_uring_register",
        /* files */
        "open", "openat", "openat2", "creat", "stat", "fstat", "lstat", "newfstatat", "statx",
        "statfs", "fstatfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat",
        "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir",
        "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink",
        "unlinkat", "truncate", "ftruncate", "chmod", "fchmod", "fchmodat", "chown", "fchown",
        "fchownat", "lchown", "umask", "utime", "utimes", "utimensat", "futimesat",
        "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
        "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
        "fremovexattr", "fanotify_mark", "name_to_handle_at",
        /* sockets */
        "socket", "socketpair", "bind", "listen", "accept", "accept4", "connect",
        "getsockname", "getpeername", "getsockopt", "setsockopt", "sendto", "recvfrom",
        "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
        /* System V and POSIX IPC within the machine */
        "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
        "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
        "mq_timedreceive", "mq_notify", "mq_getsetattr",
        NULL,
};

/* What slotd-keeper does once it is confined (keeper.c, and spawn.c from its confinement to
 * its exec): a filter must allow all of these for the keeper to run under it and restart
 * servers itself. clone is allowed without namespace flags whatever the list says. */
const char *const confine_keeper_needs[] = {
        "close", "execve", "execveat", "exit", "exit_group", "fcntl", "fstat", "kill", "lseek",
        "openat", "personality", "ppoll", "prctl", "pwrite64", "read", "renameat2",
        "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigtimedwait", "signalfd4",
        "splice", "wait4", "write", NULL,
};

/* Marks in 'seen' (a bit per entry of confine_keeper_needs) the one that 'name' is. */
static void keeper_need_seen(const char *name, uint32_t *seen) {
        for (size_t i = 0; confine_keeper_needs[i]; i++)
                if (streq(confine_keeper_needs[i], name))
                        *seen |= UINT32_C(1) << i;
}

static bool keeper_needs_all_seen(uint32_t seen) {
        size_t n = 0;

        while (confine_keeper_needs[n])
                n++;
        return seen == (UINT32_C(1) << n) - 1;
}

/* Namespaces: creating or joining one is how a process would build itself a private mount
 * table or a root of its own; clone3 passes its flags in memory, where seccomp cannot look,
 * so it answers ENOSYS and the C library falls back to clone, whose flags are checked. */
#define NAMESPACE_FLAGS                                                                      \
        (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |          \
         CLONE_NEWNET | CLONE_NEWCGROUP | CLONE_NEWTIME)

static int allow_name(scmp_filter_ctx ctx, const char *name, bool strict) {
        int nr = seccomp_syscall_resolve_name(name);

        if (nr == __NR_SCMP_ERROR)
                return strict ? -EINVAL : 0; /* not on this architecture */
        if (streq(name, "clone") || streq(name, "clone3"))
                return 0; /* with conditions, below */
        return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
}

int confine_seccomp_new(const char *list_path, bool kill, scmp_filter_ctx *ret,
                        bool *ret_keeper_allowed, char **ret_error) {
        uint32_t deny = kill ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(EPERM), seen = 0;
        scmp_filter_ctx ctx = seccomp_init(deny);
        int r = 0;

        if (!ctx)
                return -ENOMEM;
        if (list_path) {
                _cleanup_fclose_ FILE *f = fopen(list_path, "re");
                char line[256];
                unsigned n = 0;

                if (!f) {
                        r = negative_errno();
                        if (asprintf(ret_error, "%s: %s", list_path, strerror(-r)) < 0)
                                *ret_error = NULL;
                        goto fail;
                }
                while (fgets(line, sizeof(line), f)) {
                        char *p = line + strspn(line, " \t");
                        n++;
                        p[strcspn(p, " \t\r\n#")] = '\0';
                        if (!*p)
                                continue;
                        keeper_need_seen(p, &seen);
                        r = allow_name(ctx, p, true);
                        if (r < 0) {
                                if (asprintf(ret_error, "%s:%u: unknown system call '%s'",
                                             list_path, n, p) < 0)
                                        *ret_error = NULL;
                                goto fail;
                        }
                }
        } else
                for (size_t i = 0; confine_default_allow[i]; i++) {
                        keeper_need_seen(confine_default_allow[i], &seen);
                        r = allow_name(ctx, confine_default_allow[i], false);
                        if (r < 0)
                                goto fail;
                }

        /* clone for threads and plain forks only. */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, NAMESPACE_FLAGS, 0));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0)
                goto fail;
        /* The filter is loaded after setuid, with no_new_privs already set. */
        (void) seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        /* A binary tree instead of a list: fewer instructions on every system call of the
         * server, and the kernel's JIT and action cache work at load (done once per start)
         * drop from ~290 to ~120 µs here. libseccomp < 2.5 has no such attribute. */
        (void) seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        *ret = ctx;
        if (ret_keeper_allowed)
                *ret_keeper_allowed = keeper_needs_all_seen(seen);
        return 0;
fail:
        seccomp_release(ctx);
        return r;
}

/* Runs in a child that may share slotd's memory (see spawn.c): system calls only, no
 * allocation, nothing that writes to libc's or slotd's state. The uid and gid calls are
 * raw because glibc's wrappers would try to reach every thread of the process. */
int confine_apply(const ConfineParams *p, const char **ret_step) {
        struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {};
        struct rlimit rl;

        /* Limits first: raising a hard limit needs CAP_SYS_RESOURCE, gone after setuid. */
        if (p->nofile > 0) {
                rl = (struct rlimit){ p->nofile, p->nofile };
                /* Without CAP_SYS_RESOURCE (some containers) the hard limit cannot rise:
                 * then as close to limits.nofile as the hard limit allows. */
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0 &&
                    (errno != EPERM || getrlimit(RLIMIT_NOFILE, &rl) < 0 ||
                     setrlimit(RLIMIT_NOFILE, &(struct rlimit){ MIN(p->nofile, rl.rlim_max),
                                                                MIN(p->nofile, rl.rlim_max) }) < 0)) {
                        *ret_step = "RLIMIT_NOFILE";
                        return -1;
                }
        }
        rl = (struct rlimit){ p->core, p->core };
        if (setrlimit(RLIMIT_CORE, &rl) < 0) {
                *ret_step = "RLIMIT_CORE";
                return -1;
        }
        /* The bounding set and ambient set go while we still hold CAP_SETPCAP. */
        for (int c = 0; c <= CAP_LAST_CAP; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) {
                        *ret_step = "dropping the capability bounding set";
                        return -1;
                }
        (void) prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);

        if (syscall(SYS_setgroups, 1, &p->gid) < 0) {
                *ret_step = "setgroups";
                return -1;
        }
        if (syscall(SYS_setresgid, p->gid, p->gid, p->gid) < 0) {
                *ret_step = "setgid";
                return -1;
        }
        if (syscall(SYS_setresuid, p->uid, p->uid, p->uid) < 0) {
                *ret_step = "setuid";
                return -1;
        }
        /* Even a fleet that runs as root keeps no capability. */
        if (syscall(SYS_capset, &head, none) < 0) {
                *ret_step = "dropping capabilities";
                return -1;
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                *ret_step = "PR_SET_NO_NEW_PRIVS";
                return -1;
        }
        /* Last, so that everything above is not itself filtered. */
        if (p->seccomp && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, p->seccomp, 0, 0) < 0) {
                *ret_step = "loading the seccomp filter";
                return -1;
        }
        return 0;
}

int confine_seccomp_program(scmp_filter_ctx ctx, struct sock_fprog **ret) {
        _cleanup_close_ int fd = memfd_create("slotd-seccomp", MFD_CLOEXEC);
        _cleanup_free_ struct sock_fprog *prog = NULL;
        off_t size;
        int r;

        if (fd < 0)
                return negative_errno();
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        size = lseek(fd, 0, SEEK_END);
        if (size <= 0 || size % sizeof(struct sock_filter) != 0 ||
            size / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return -EBADMSG;
        prog = calloc(1, sizeof(struct sock_fprog) + (size_t) size);
        if (!prog)
                return -ENOMEM;
        prog->len = (unsigned short) (size / sizeof(struct sock_filter));
        prog->filter = (struct sock_filter *) (prog + 1);
        if (pread(fd, prog->filter, (size_t) size, 0) != size)
                return -EIO;
        *ret = TAKE_PTR(prog);
        return 0;
}

int confine_seccomp_default(bool kill, struct sock_fprog **ret, bool *ret_keeper_allowed) {
        _cleanup_free_ struct sock_fprog *prog = NULL;
        size_t size = confine_default_eperm_len * sizeof(struct sock_filter);
        scmp_filter_ctx ctx = NULL;
        uint32_t seen = 0;
        int r;

        if (kill || confine_default_eperm_len == 0) {
                r = confine_seccomp_new(NULL, kill, &ctx, ret_keeper_allowed, NULL);
                if (r < 0)
                        return r;
                r = confine_seccomp_program(ctx, ret);
                seccomp_release(ctx);
                return r;
        }
        prog = calloc(1, sizeof(struct sock_fprog) + size);
        if (!prog)
                return -ENOMEM;
        prog->len = confine_default_eperm_len;
        prog->filter = (struct sock_filter *) (prog + 1);
        memcpy(prog->filter, confine_default_eperm, size);
        for (size_t i = 0; confine_default_allow[i]; i++)
                keeper_need_seen(confine_default_allow[i], &seen);
        if (ret_keeper_allowed)
                *ret_keeper_allowed = keeper_needs_all_seen(seen);
        *ret = TAKE_PTR(prog);
        return 0;
}

struct sock_fprog *confine_seccomp_program_free(struct sock_fprog *p) {
        free(p);
        return NULL;
}
