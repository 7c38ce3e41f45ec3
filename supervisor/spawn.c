/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
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

/* The game server, in the keeper's fork: everything here runs in a copy of a
 * single-threaded parent. */
_Noreturn static void server_exec(const SpawnParams *p) {
        sigset_t none;
        const char *step = NULL;
        int null_fd;

        /* The keeper blocks everything and catches everything; a game server starts with a
         * clean mask and default dispositions. */
        for (int sig = 1; sig < _NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void) signal(sig, SIG_DFL);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);

        if (dup2(p->output_fd, STDOUT_FILENO) < 0 || dup2(p->output_fd, STDERR_FILENO) < 0)
                _exit(SPAWN_EXIT_SETUP);
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0)
                child_fail("stdin", p->path);
        (void) syscall(SYS_close_range, 3U, ~0U, 0U);
        if (p->working_directory && chdir(p->working_directory) < 0)
                child_fail("chdir to home", p->path);
        if (confine_apply(&p->confine, &step) < 0)
                child_fail(step, p->path);
        execve(p->path, p->argv, p->envp);
        child_fail("exec", p->path);
}

static void keeper_noop(int sig) {
}

static void keeper_write_status(int fd, int wstatus) {
        char buf[32];
        int n;

        if (WIFEXITED(wstatus))
                n = snprintf(buf, sizeof(buf), "exited %d\n", WEXITSTATUS(wstatus));
        else
                n = snprintf(buf, sizeof(buf), "killed %d\n", WTERMSIG(wstatus));
        (void) pwrite(fd, buf, (size_t) n, 0);
}

/* PID 1 of the slot's namespace. Signals from outside reach a namespace's init only if it
 * has a handler, hence the no-op handlers; they stay blocked and sigwaitinfo() takes them. */
_Noreturn static void keeper_main(const SpawnParams *p, bool attach_self) {
        struct sigaction sa = { .sa_handler = keeper_noop };
        sigset_t all;
        pid_t server;

        if (attach_self && cg_write_at(p->cgroup_fd, "cgroup.procs", "0") < 0) {
                dprintf(p->output_fd, "slotd: cannot join the slot's cgroup: %m\n");
                _exit(SPAWN_EXIT_SETUP);
        }
        sigfillset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        for (int sig = 1; sig < _NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void) sigaction(sig, &sa, NULL);
        (void) setsid();
        (void) prctl(PR_SET_NAME, "slotd-keeper", 0, 0, 0);

        server = fork();
        if (server < 0) {
                dprintf(p->output_fd, "slotd: cannot fork the server: %m\n");
                keeper_write_status(p->status_fd, SPAWN_EXIT_SETUP << 8);
                _exit(0);
        }
        if (server == 0)
                server_exec(p);

        /* Keep only the status file, as fd 3, and the notify socket, as fd 4; through high
         * numbers first, so that neither overwrites the other. */
        int status = fcntl(p->status_fd, F_DUPFD, 64), notify = fcntl(p->notify_fd, F_DUPFD, 64);
        if (status < 0 || notify < 0 || dup2(status, 3) < 0 || dup2(notify, KEEPER_NOTIFY_FD) < 0)
                _exit(SPAWN_EXIT_SETUP);
        (void) syscall(SYS_close_range, KEEPER_NOTIFY_FD + 1, ~0U, 0U);
        (void) close(STDIN_FILENO);
        (void) close(STDOUT_FILENO);
        (void) close(STDERR_FILENO);

        for (;;) {
                siginfo_t si;
                int sig = sigwaitinfo(&all, &si), wstatus;
                pid_t w;

                if (sig < 0)
                        continue;
                if (sig != SIGCHLD) {
                        (void) kill(server, sig);
                        continue;
                }
                while ((w = waitpid(-1, &wstatus, WNOHANG)) > 0)
                        if (w == server) {
                                /* Our exit ends the namespace: nothing the server left
                                 * behind outlives it. */
                                keeper_write_status(3, wstatus);
                                _exit(0);
                        }
        }
}

static bool clone3_unsupported;

int spawn_process(const SpawnParams *p, pid_t *ret_pid, int *ret_pidfd) {
        pid_t pid;
        int pidfd = -1;

        if (!clone3_unsupported) {
                struct clone_args args = {
                        .flags = CLONE_PIDFD | CLONE_NEWPID |
                                 (p->fork_and_attach ? 0 : CLONE_INTO_CGROUP),
                        .pidfd = (uint64_t) (uintptr_t) &pidfd,
                        .exit_signal = SIGCHLD,
                        .cgroup = p->fork_and_attach ? 0 : (uint64_t) p->cgroup_fd,
                };
                long r = syscall(SYS_clone3, &args, sizeof(args));
                if (r == 0)
                        keeper_main(p, p->fork_and_attach);
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

        /* Without clone3 the keeper cannot be the init of a namespace of its own: the
         * servers then share slotd's PID namespace. */
        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0)
                keeper_main(p, true);
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

int spawn_read_status(int status_fd, int *ret_code, int *ret_signal) {
        char buf[32] = {};
        int v;
        ssize_t n = pread(status_fd, buf, sizeof(buf) - 1, 0);

        if (n < 0)
                return negative_errno();
        if (sscanf(buf, "exited %d", &v) == 1) {
                *ret_code = v;
                *ret_signal = 0;
                return 1;
        }
        if (sscanf(buf, "killed %d", &v) == 1) {
                *ret_code = 0;
                *ret_signal = v;
                return 1;
        }
        return 0;
}

pid_t spawn_server_pid(int cgroup_fd, pid_t keeper) {
        char buf[8192], *save = NULL;

        /* /proc/PID/task/TID/children is not in every kernel: look for the keeper's child
         * among the processes of the slot's cgroup. */
        if (cg_read_at(cgroup_fd, "cgroup.procs", buf, sizeof(buf)) < 0)
                return 0;
        for (char *p = strtok_r(buf, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
                char path[64], stat[512], *close_paren;
                long pid = strtol(p, NULL, 10), ppid;
                _cleanup_close_ int fd = -EBADF;
                ssize_t n;

                if (pid <= 0 || pid == keeper)
                        continue;
                snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                n = read(fd, stat, sizeof(stat) - 1);
                if (n <= 0)
                        continue;
                stat[n] = '\0';
                /* "pid (comm) state ppid": comm may hold anything, so from its last ')'. */
                close_paren = strrchr(stat, ')');
                if (close_paren && sscanf(close_paren + 1, " %*c %ld", &ppid) == 1 && ppid == keeper)
                        return (pid_t) pid;
        }
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
