/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "macro.h"
#include "spawn.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

int pidfd_send_signal_wrapper(int pidfd, int sig) {
        if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0)
                return negative_errno();
        return 0;
}

static int pidfd_open_wrapper(pid_t pid) {
        long fd = syscall(SYS_pidfd_open, pid, 0);
        return fd < 0 ? negative_errno() : (int) fd;
}

_Noreturn static void child_fail(const char *step, const char *path) {
        int e = errno;
        dprintf(STDERR_FILENO, "slotd: cannot start %s: %s: %s\n", path, step, strerror(e));
        _exit(SPAWN_EXIT_SETUP);
}

/* In the child: everything here must be safe in a copy of a single-threaded parent. */
_Noreturn static void child_exec(const SpawnParams *p, bool attach_self) {
        sigset_t none;
        int null_fd;

        /* sd-event blocks the signals it handles; a game server must start with a clean mask
         * and default dispositions. */
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        for (int sig = 1; sig < _NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void) signal(sig, SIG_DFL);

        if (dup2(p->output_fd, STDOUT_FILENO) < 0 || dup2(p->output_fd, STDERR_FILENO) < 0)
                _exit(SPAWN_EXIT_SETUP);
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0)
                child_fail("stdin", p->path);

        if (attach_self) {
                /* Must happen before exec so that no instruction of the build runs outside its
                 * cgroup. "0" moves the writer itself. */
                if (cg_write_at(p->cgroup_fd, "cgroup.procs", "0") < 0)
                        child_fail("joining the slot's cgroup", p->path);
        }
        (void) syscall(SYS_close_range, 3U, ~0U, 0U);
        if (p->nofile > 0) {
                /* slotd raised its own soft limit for its sockets; the build gets the usual
                 * one back (select() breaks above 1024). */
                struct rlimit rl;
                if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                        rl.rlim_cur = MIN((rlim_t) p->nofile, rl.rlim_max);
                        (void) setrlimit(RLIMIT_NOFILE, &rl);
                }
        }

        if (setsid() < 0)
                child_fail("setsid", p->path);
        if (p->working_directory && chdir(p->working_directory) < 0)
                child_fail("chdir to home", p->path);
        if (setgroups(1, &p->gid) < 0)
                child_fail("setgroups", p->path);
        if (setresgid(p->gid, p->gid, p->gid) < 0)
                child_fail("setgid", p->path);
        if (setresuid(p->uid, p->uid, p->uid) < 0)
                child_fail("setuid", p->path);

        execve(p->path, p->argv, p->envp);
        child_fail("exec", p->path);
}

static bool clone3_unsupported;

int spawn_process(const SpawnParams *p, pid_t *ret_pid, int *ret_pidfd) {
        pid_t pid;
        int pidfd = -1;

        if (!clone3_unsupported && !p->fork_and_attach) {
                struct clone_args args = {
                        .flags = CLONE_PIDFD | CLONE_INTO_CGROUP,
                        .pidfd = (uint64_t) (uintptr_t) &pidfd,
                        .exit_signal = SIGCHLD,
                        .cgroup = (uint64_t) p->cgroup_fd,
                };
                long r = syscall(SYS_clone3, &args, sizeof(args));
                if (r == 0)
                        child_exec(p, false);
                if (r > 0) {
                        *ret_pid = (pid_t) r;
                        *ret_pidfd = pidfd;
                        return 0;
                }
                /* ENOSYS: no clone3; E2BIG/EINVAL: a kernel without CLONE_INTO_CGROUP. */
                if (errno != ENOSYS && errno != E2BIG && errno != EINVAL)
                        return negative_errno();
                clone3_unsupported = true;
        }

        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0)
                child_exec(p, true);
        /* The child cannot have been reaped yet: we are its parent and have not waited. */
        pidfd = pidfd_open_wrapper(pid);
        if (pidfd < 0) {
                (void) kill(pid, SIGKILL);
                return pidfd;
        }
        *ret_pid = pid;
        *ret_pidfd = pidfd;
        return 0;
}

int spawn_probe_killed_cgroup_bug(const char *parent_path) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        siginfo_t si = {};
        long pid;
        int r;

        if (asprintf(&path, "%s/.slotd-probe-%d", parent_path, (int) getpid()) < 0)
                return -ENOMEM;
        r = cg_create(path);
        if (r < 0)
                return r;
        r = cg_open(path, &fd);
        if (r < 0)
                goto finish;
        r = cg_write_at(fd, "cgroup.kill", "1");
        if (r < 0)
                goto finish; /* no cgroup.kill: nothing to be bitten by */

        struct clone_args args = {
                .flags = CLONE_INTO_CGROUP,
                .exit_signal = SIGCHLD,
                .cgroup = (uint64_t) fd,
        };
        pid = syscall(SYS_clone3, &args, sizeof(args));
        if (pid == 0)
                _exit(0);
        if (pid < 0) {
                r = negative_errno();
                goto finish;
        }
        if (waitid(P_PID, (id_t) pid, &si, WEXITED) < 0) {
                r = negative_errno();
                goto finish;
        }
        r = si.si_code == CLD_KILLED && si.si_status == SIGKILL;
finish:
        (void) cg_remove(path);
        return r;
}
