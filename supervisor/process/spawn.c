/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "macro.h"
#include "slotd-config.h"
#include "spawn.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

int pidfd_send_signal_wrapper(int pidfd, int sig) {
        if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0)
                return negative_errno();
        return 0;
}

int pidfd_open_wrapper(pid_t pid) {
        long fd = syscall(SYS_pidfd_open, pid, 0);
        return fd < 0 ? negative_errno() : (int) fd;
}

bool pid_is_our_child(pid_t pid) {
        char path[64], stat[512], *paren;
        _cleanup_close_ int fd = -EBADF;
        long ppid;
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        n = read(fd, stat, sizeof(stat) - 1);
        if (n <= 0)
                return false;
        stat[n] = '\0';
        paren = strrchr(stat, ')');
        return paren && sscanf(paren + 1, " %*c %ld", &ppid) == 1 && ppid == getpid();
}

/* The keeper and the server are started the way posix_spawn() starts a program: where it
 * can (x86_64, no sanitizer), each child shares its parent's memory and the parent sleeps
 * until the child has exec'd (CLONE_VM | CLONE_VFORK), so that no page table of slotd is
 * copied, whatever slotd's size. The children then run on stacks of their own, allocate
 * nothing and change nothing but their own registers and stacks (errno aside: the parent is
 * asleep and reads none after). Elsewhere they are ordinary copies, with the same code. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define SPAWN_SHARED_VM 1

/* clone3() onto a new stack, calling fn(arg) there and exiting with its result; the
 * parent gets the child's PID or a negative errno. */
long slotd_clone3(struct clone_args *args, size_t size, int (*fn)(void *), void *arg);
__asm__(".text\n"
        ".globl slotd_clone3\n"
        ".type slotd_clone3, @function\n"
        "slotd_clone3:\n"
        "        mov %rcx, %r8\n"       /* arg: the syscall clobbers rcx */
        "        mov $435, %eax\n"      /* __NR_clone3 */
        "        syscall\n"
        "        test %rax, %rax\n"
        "        jz 1f\n"
        "        ret\n"
        "1:      xor %ebp, %ebp\n"      /* the child, on its own stack */
        "        mov %r8, %rdi\n"
        "        call *%rdx\n"
        "        mov %eax, %edi\n"
        "        mov $60, %eax\n"       /* __NR_exit */
        "        syscall\n"
        "        hlt\n"
        ".size slotd_clone3, .-slotd_clone3\n");

#define SPAWN_STACK_SIZE (64 * 1024)
static _Alignas(64) char keeper_stack[SPAWN_STACK_SIZE], server_stack[SPAWN_STACK_SIZE];
#else
#define SPAWN_SHARED_VM 0
#endif

/* Starts fn(arg) in a child per 'args' (flags, exit signal, cgroup); returns its PID or -1
 * with errno set. */
static pid_t spawn_clone(struct clone_args *args, char *stack, int (*fn)(void *), void *arg) {
#if SPAWN_SHARED_VM
        args->flags |= CLONE_VM | CLONE_VFORK;
        args->stack = (uint64_t) (uintptr_t) stack;
        args->stack_size = SPAWN_STACK_SIZE;
        long r = slotd_clone3(args, sizeof(*args), fn, arg);
        if (r < 0) {
                errno = (int) -r;
                return -1;
        }
        return (pid_t) r;
#else
        long r = syscall(SYS_clone3, args, sizeof(*args));
        if (r == 0)
                _exit(fn(arg));
        return (pid_t) r;
#endif
}

/* A message to the slot's server.log from a child: no stdio (it allocates), no strerror()
 * (it may translate). */
static void child_say(int fd, const char *what, const char *path, int error) {
        char buf[512];
        const char *desc = strerrordesc_np(error);
        int n = snprintf(buf, sizeof(buf), "slotd: cannot start %s: %s: %s\n", path, what,
                         desc ?: "unknown error");

        if (n > 0)
                (void) write(fd, buf, MIN((size_t) n, sizeof(buf) - 1));
}

_Noreturn static void child_fail(const char *step, const char *path) {
        child_say(STDERR_FILENO, step, path, errno);
        _exit(SPAWN_EXIT_SETUP);
}

/* The status file as the server child holds it until its exec: close-on-exec, so that only a
 * failed exec can write to it (spawn.h, KEEPER_EXEC_OFFSET). */
#define SERVER_STATUS_FD 3

/* execve() failed: its errno goes to the status file for slotd, then the log gets it too. */
_Noreturn static void child_exec_failed(const char *path) {
        int error = errno;
        char record[32];
        int n = snprintf(record, sizeof(record), "exec %d\n", error);

        (void) pwrite(SERVER_STATUS_FD, record, (size_t) n, KEEPER_EXEC_OFFSET);
        errno = error;
        child_fail("exec", path);
}

/* The game server, the keeper's child: confined, then the build exec'd. */
static int server_child(void *userdata) {
        const SpawnParams *p = userdata;
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        sigset_t none;
        const char *step = NULL;
        int null_fd;

        /* The keeper blocks everything; a game server starts with a clean mask and default
         * dispositions. The exec resets every handled signal; only ignored ones survive it,
         * and slotd ignores SIGPIPE alone (main.c). */
        (void) sigaction(SIGPIPE, &dfl, NULL);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);

        if (dup2(p->output_fd, STDOUT_FILENO) < 0 || dup2(p->output_fd, STDERR_FILENO) < 0)
                _exit(SPAWN_EXIT_SETUP);
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0)
                child_fail("stdin", p->path);
        if (p->status_fd == SERVER_STATUS_FD)
                (void) fcntl(SERVER_STATUS_FD, F_SETFD, FD_CLOEXEC);
        else if (dup3(p->status_fd, SERVER_STATUS_FD, O_CLOEXEC) < 0)
                child_fail("the status file", p->path);
        (void) syscall(SYS_close_range, SERVER_STATUS_FD + 1U, ~0U, 0U);
        if (p->working_directory && chdir(p->working_directory) < 0)
                child_fail("chdir to home", p->path);
        if (confine_apply(&p->confine, &step) < 0)
                child_fail(step, p->path);
        execve(p->path, p->argv, p->envp);
        child_exec_failed(p->path);
}

/* One past the highest reserved descriptor (spawn_reserve_fds()). */
static unsigned reserved_end = 3;

/* The status of a server that never got as far as exec (see spawn_read_status()). */
static void keeper_fail_status(int status_fd) {
        char status[32];
        int n = snprintf(status, sizeof(status), "exited %d\n", SPAWN_EXIT_SETUP);

        (void) pwrite(status_fd, status, (size_t) n, 0);
}

/* We share slotd's descriptor table (CLONE_FILES, slotd asleep): take a table of our own with
 * only the descriptors below the reserved ones' end, which costs what those few cost, not
 * what slotd's thousands would (see spawn_reserve_fds()). In the keeper child: system calls
 * only. */
static int keeper_unshare_fds(void) {
        struct rlimit rl;

        if (syscall(SYS_close_range, reserved_end, ~0U, CLOSE_RANGE_UNSHARE) >= 0)
                return 0;
        /* Before Linux 5.9: a whole copy, then closing one by one. */
        if (unshare(CLONE_FILES) < 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -1;
        for (rlim_t fd = reserved_end; fd < rl.rlim_cur; fd++)
                (void) close((int) fd);
        return 0;
}

/* Before the server is forked: a table of our own, every signal blocked, the slot's cgroup
 * joined when clone3() did not start us in it, and a session of our own. */
static int keeper_prepare(const SpawnParams *p) {
        sigset_t all;

        if (keeper_unshare_fds() < 0)
                return -1;
        sigfillset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        if (p->fork_and_attach && cg_write_at(p->cgroup_fd, "cgroup.procs", "0") < 0) {
                child_say(p->log_fd, "joining the slot's cgroup", p->path, errno);
                return -1;
        }
        (void) setsid();
        return 0;
}

/* The status file as fd 3 and the notify socket as fd 4, slotd-keeper as 6 until the exec,
 * and the log pipe's read end, the logs directory and server.log as 7-9 (spawn.h), through
 * high numbers first so that none overwrites another. A keeper that restarts keeps the
 * server's stdin, stdout and stderr (the pipe's write end) as 0-2 and has its restart eventfd
 * as 5. Everything else is closed. */
static bool keeper_place_fds(const SpawnParams *p) {
        int status, notify, output, keeper, pipe_fd, dir, log, token = -1;
        bool placed;

        status = fcntl(p->status_fd, F_DUPFD, 64);
        notify = fcntl(p->notify_fd, F_DUPFD, 64);
        output = fcntl(p->output_fd, F_DUPFD_CLOEXEC, 64);
        keeper = fcntl(p->keeper_fd, F_DUPFD_CLOEXEC, 64);
        pipe_fd = fcntl(p->pipe_fd, F_DUPFD, 64);
        dir = fcntl(p->logs_dir_fd, F_DUPFD, 64);
        log = fcntl(p->log_fd, F_DUPFD, 64);
        if (p->token_fd >= 0)
                token = fcntl(p->token_fd, F_DUPFD, 64);
        placed = status >= 0 && notify >= 0 && output >= 0 && keeper >= 0 && pipe_fd >= 0 &&
                 dir >= 0 && log >= 0 && dup2(status, 3) >= 0 &&
                 dup2(notify, KEEPER_NOTIFY_FD) >= 0 && dup3(keeper, 6, O_CLOEXEC) >= 0 &&
                 dup2(pipe_fd, KEEPER_PIPE_FD) >= 0 && dup2(dir, KEEPER_LOGS_DIR_FD) >= 0 &&
                 dup2(log, KEEPER_LOG_FD) >= 0;
        if (placed && p->token_fd >= 0)
                placed = token >= 0 && dup2(token, KEEPER_TOKEN_FD) >= 0 &&
                         dup2(p->null_fd, STDIN_FILENO) >= 0 && dup2(output, STDOUT_FILENO) >= 0 &&
                         dup2(output, STDERR_FILENO) >= 0;
        if (!placed)
                return false;
        (void) syscall(SYS_close_range, KEEPER_LOG_FD + 1U, ~0U, 0U);
        if (p->token_fd < 0) {
                (void) close(STDIN_FILENO);
                (void) close(STDOUT_FILENO);
                (void) close(STDERR_FILENO);
                (void) close(KEEPER_TOKEN_FD);
        }
        return true;
}

/* The keeper that restarts is confined as its servers are, so that they inherit all of it and
 * a restart is a fork and an exec. */
static int keeper_confine(const SpawnParams *p) {
        const char *step = "chdir to home";

        if ((p->working_directory && chdir(p->working_directory) < 0) ||
            confine_apply(&p->confine, &step) < 0) {
                child_say(KEEPER_LOG_FD, step, "slotd-keeper", errno);
                return -1;
        }
        return 0;
}

/* PID 1 of the slot's namespace, until it execs slotd-keeper: forks the server, arranges
 * the descriptors the keeper keeps, and becomes the keeper, every signal blocked throughout
 * so that none sent meanwhile is lost (see keeper.c). */
static int keeper_child(void *userdata) {
        const SpawnParams *p = userdata;
        struct clone_args args = { .exit_signal = SIGCHLD };
        pid_t server;

        if (keeper_prepare(p) < 0) {
                keeper_fail_status(p->status_fd);
                return 0;
        }

#if SPAWN_SHARED_VM
        server = spawn_clone(&args, server_stack, server_child, (void *) p);
#else
        server = spawn_clone(&args, NULL, server_child, (void *) p);
#endif
        if (server < 0) {
                child_say(p->log_fd, "forking the server", p->path, errno);
                keeper_fail_status(p->status_fd);
                return 0;
        }
        if (!keeper_place_fds(p)) {
                (void) kill(server, SIGKILL);
                keeper_fail_status(p->status_fd);
                return 0;
        }

        snprintf(p->keeper_argv[1], 16, "%d", (int) server);
        /* Without the random offset of its initial stack pointer (up to 8 KiB on x86_64) the
         * keeper's arguments and frames fit in one page: 4 KiB a slot instead of 8 to 12.
         * Its layout protects nothing: it parses no input, and the server (another uid)
         * cannot touch its memory. The server was forked before this and keeps ASLR, and
         * the keeper resets the flag for the servers it starts itself. */
        (void) personality(ADDR_NO_RANDOMIZE);
        if (p->token_fd >= 0 && keeper_confine(p) < 0) {
                (void) kill(server, SIGKILL);
                keeper_fail_status(3);
                return 0;
        }
        (void) syscall(SYS_execveat, 6, "", p->keeper_argv,
                       p->token_fd >= 0 ? p->envp : (char *const[]){ NULL }, AT_EMPTY_PATH);
        child_say(KEEPER_LOG_FD, "exec of slotd-keeper", p->path, errno);
        /* Our exit ends the namespace and the server with it. */
        keeper_fail_status(3);
        return 0;
}

/* Descriptors reserved at start-up, low in slotd's table: a spawn points them at the files
 * the keeper needs, so that the keeper, sharing slotd's table at first, can keep just the
 * table below them (close_range(CLOSE_RANGE_UNSHARE) copies only that much). Copying or
 * closing slotd's whole table, a few descriptors per slot, would make every start O(slots)
 * in the kernel: 0.4 ms at 200 slots here. */
enum { RESERVED_STATUS, RESERVED_NOTIFY, RESERVED_OUTPUT, RESERVED_KEEPER, RESERVED_CGROUP,
       RESERVED_TOKEN, RESERVED_PIPE, RESERVED_LOGS_DIR, RESERVED_LOG, RESERVED_NULL,
       _RESERVED_MAX };
static int reserved[_RESERVED_MAX] = { -1, -1, -1, -1, -1, -1, -1, -1, -1, -1 };

int spawn_reserve_fds(void) {
        if (reserved[RESERVED_NULL] >= 0)
                return 0;
        for (int i = 0; i < _RESERVED_MAX; i++) {
                reserved[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (reserved[i] < 0)
                        return negative_errno();
                reserved_end = MAX(reserved_end, (unsigned) reserved[i] + 1);
        }
        return 0;
}

/* Points the reserved descriptors at /dev/null again: slotd holds no extra reference to a
 * slot's files between spawns. */
static void spawn_release_fds(void) {
        for (int i = 0; i < RESERVED_NULL; i++)
                (void) dup3(reserved[RESERVED_NULL], reserved[i], O_CLOEXEC);
}

static bool clone3_unsupported;

/* slotd-keeper PID MAX-SIZE KEEP, and the build's own command line for a keeper that restarts
 * it; the child writes the PID into 'pid_arg' (see keeper_child()). */
static int keeper_argv_new(const SpawnParams *params, char *pid_arg, char log_args[2][24],
                           char ***ret) {
        char **argv;
        size_t n = 0;

        while (params->token_fd >= 0 && params->argv[n])
                n++;
        argv = new0(char *, n + 5);
        if (!argv)
                return -ENOMEM;
        snprintf(log_args[0], 24, "%" PRIu64, params->log_max_size);
        snprintf(log_args[1], 24, "%u", params->log_keep);
        argv[0] = (char *) "slotd-keeper";
        argv[1] = pid_arg;
        argv[2] = log_args[0];
        argv[3] = log_args[1];
        for (size_t i = 0; i < n; i++)
                argv[4 + i] = params->argv[i];
        *ret = argv;
        return 0;
}

/* Points the reserved descriptors at the slot's files, and 'q' at them. */
static int spawn_point_fds(const int from[static RESERVED_NULL], const SpawnParams *params,
                           SpawnParams *q) {
        int r;

        for (int i = 0; i < RESERVED_NULL; i++)
                if (dup3(from[i], reserved[i], O_CLOEXEC) < 0) {
                        r = negative_errno();
                        spawn_release_fds();
                        return r;
                }
        q->status_fd = reserved[RESERVED_STATUS];
        q->notify_fd = reserved[RESERVED_NOTIFY];
        q->output_fd = reserved[RESERVED_OUTPUT];
        q->keeper_fd = reserved[RESERVED_KEEPER];
        q->cgroup_fd = reserved[RESERVED_CGROUP];
        q->token_fd = params->token_fd >= 0 ? reserved[RESERVED_TOKEN] : -1;
        q->pipe_fd = reserved[RESERVED_PIPE];
        q->logs_dir_fd = reserved[RESERVED_LOGS_DIR];
        q->log_fd = reserved[RESERVED_LOG];
        q->null_fd = reserved[RESERVED_NULL];
        return 0;
}

/* The keeper as the init of a PID namespace of its own, started in the slot's cgroup: 1 when
 * started, 0 when this kernel cannot (the caller falls back to fork()), or a negative errno. */
static int spawn_keeper_clone3(SpawnParams *p, pid_t *ret_pid, int *ret_pidfd) {
        int pidfd = -1;
        /* CLONE_FILES needs CLONE_VFORK: slotd must not touch the shared table before the
         * keeper has a table of its own. */
        struct clone_args args = {
                .flags = CLONE_PIDFD | CLONE_NEWPID | CLONE_FILES | CLONE_VFORK |
                         (p->fork_and_attach ? 0 : CLONE_INTO_CGROUP),
                .pidfd = (uint64_t) (uintptr_t) &pidfd,
                .exit_signal = SIGCHLD,
                .cgroup = p->fork_and_attach ? 0 : (uint64_t) p->cgroup_fd,
        };
        pid_t pid;

#if SPAWN_SHARED_VM
        pid = spawn_clone(&args, keeper_stack, keeper_child, p);
#else
        pid = spawn_clone(&args, NULL, keeper_child, p);
#endif
        if (pid > 0) {
                *ret_pid = pid;
                *ret_pidfd = pidfd;
                return 1;
        }
        /* ENOSYS: no clone3; E2BIG/EINVAL: a kernel without CLONE_INTO_CGROUP. */
        if (errno != ENOSYS && errno != E2BIG && errno != EINVAL)
                return negative_errno();
        clone3_unsupported = true;
        return 0;
}

/* Without clone3 the keeper cannot be the init of a namespace of its own: the servers then
 * share slotd's PID namespace, and the keeper joins the cgroup. */
static int spawn_keeper_fork(SpawnParams *p, pid_t *ret_pid, int *ret_pidfd) {
        pid_t pid;
        int pidfd, r;

        p->fork_and_attach = true;
        p->token_fd = -1; /* no namespace to empty: orphans would outlive a restart */
        p->keeper_argv[4] = NULL;
        pid = fork();
        if (pid == 0)
                _exit(keeper_child(p));
        r = pid < 0 ? negative_errno() : 0;
        spawn_release_fds();
        if (r < 0)
                return r;
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

int spawn_process(const SpawnParams *params, pid_t *ret_pid, int *ret_pidfd) {
        SpawnParams q = *params;
        const int from[RESERVED_NULL] = {
                [RESERVED_STATUS] = params->status_fd, [RESERVED_NOTIFY] = params->notify_fd,
                [RESERVED_OUTPUT] = params->output_fd, [RESERVED_KEEPER] = params->keeper_fd,
                [RESERVED_CGROUP] = params->cgroup_fd,
                [RESERVED_TOKEN] = params->token_fd >= 0 ? params->token_fd : reserved[RESERVED_NULL],
                [RESERVED_PIPE] = params->pipe_fd, [RESERVED_LOGS_DIR] = params->logs_dir_fd,
                [RESERVED_LOG] = params->log_fd,
        };
        _cleanup_free_ char **keeper_argv = NULL;
        char pid_arg[16] = ""; /* in this frame: keeper_argv[1], the keeper writes into it */
        char log_args[2][24];
        pid_t pid;
        int pidfd, r;

        r = spawn_reserve_fds();
        if (r < 0)
                return r;
        r = keeper_argv_new(params, pid_arg, log_args, &keeper_argv);
        if (r < 0)
                return r;
        q.keeper_argv = keeper_argv;
        r = spawn_point_fds(from, params, &q);
        if (r < 0)
                return r;

        r = clone3_unsupported ? 0 : spawn_keeper_clone3(&q, &pid, &pidfd);
        if (r > 0) {
                spawn_release_fds();
                *ret_pid = pid;
                *ret_pidfd = pidfd;
                return 0;
        }
        if (r < 0) {
                spawn_release_fds();
                return r;
        }
        return spawn_keeper_fork(&q, ret_pid, ret_pidfd);
}

int spawn_read_status(int status_fd, int *ret_code, int *ret_signal, bool *ret_core) {
        char buf[32] = {};
        int v;
        ssize_t n = pread(status_fd, buf, sizeof(buf) - 1, 0);

        if (n < 0)
                return negative_errno();
        if (ret_core)
                *ret_core = false;
        if (sscanf(buf, "exited %d", &v) == 1) {
                *ret_code = v;
                *ret_signal = 0;
                return 1;
        }
        if (sscanf(buf, "killed %d", &v) == 1 || sscanf(buf, "dumped %d", &v) == 1) {
                *ret_code = 0;
                *ret_signal = v;
                if (ret_core)
                        *ret_core = strncmp(buf, "dumped ", 7) == 0;
                return 1;
        }
        return 0;
}

int spawn_read_restart(int status_fd, unsigned *ret_restarts, bool *ret_failed, int *ret_code,
                       int *ret_signal, bool *ret_core) {
        char buf[KEEPER_RESTART_OFFSET + 1] = {}, word[8], how[8];
        unsigned n;
        int v;
        ssize_t size = pread(status_fd, buf, KEEPER_RESTART_OFFSET, KEEPER_RESTART_OFFSET);

        if (size < 0)
                return negative_errno();
        if (sscanf(buf, "%7s %u %7s %d", word, &n, how, &v) != 4 ||
            (!streq(word, "restart") && !streq(word, "failed")) ||
            (!streq(how, "exited") && !streq(how, "killed") && !streq(how, "dumped")))
                return 0;
        *ret_restarts = n;
        *ret_failed = streq(word, "failed");
        *ret_code = streq(how, "exited") ? v : 0;
        *ret_signal = streq(how, "exited") ? 0 : v;
        if (ret_core)
                *ret_core = streq(how, "dumped");
        return 1;
}

int spawn_read_log_lost(int status_fd, uint64_t *ret_bytes, int *ret_errno) {
        char buf[32] = {};
        uint64_t bytes;
        int v;
        ssize_t size = pread(status_fd, buf, sizeof(buf) - 1, KEEPER_LOG_LOST_OFFSET);

        if (size < 0)
                return negative_errno();
        if (sscanf(buf, "lost %" SCNu64 " %d", &bytes, &v) != 2 || bytes == 0)
                return 0;
        *ret_bytes = bytes;
        *ret_errno = v;
        return 1;
}

int spawn_read_exec_failure(int status_fd, int *ret_errno) {
        char buf[32] = {};
        int v;
        ssize_t size = pread(status_fd, buf, sizeof(buf) - 1, KEEPER_EXEC_OFFSET);

        if (size < 0)
                return negative_errno();
        if (sscanf(buf, "exec %d", &v) != 1 || v <= 0)
                return 0;
        *ret_errno = v;
        return 1;
}

int spawn_mark_ready(int status_fd, unsigned restarts) {
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "ready %u\n", restarts);
        ssize_t k = pwrite(status_fd, buf, (size_t) n, KEEPER_READY_OFFSET);

        if (k < 0)
                return negative_errno();
        return k == n ? 0 : -EIO;
}

int spawn_marked_ready(int status_fd, unsigned restarts) {
        char buf[32] = {};
        unsigned n;
        ssize_t size = pread(status_fd, buf, sizeof(buf) - 1, KEEPER_READY_OFFSET);

        if (size < 0)
                return negative_errno();
        return sscanf(buf, "ready %u", &n) == 1 && n == restarts;
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

int spawn_open_helper(const char *self_exe, const char *name, const char *installed,
                      char **ret_path) {
        _cleanup_free_ char *sibling = NULL;
        const char *slash = self_exe ? strrchr(self_exe, '/') : NULL;
        int fd;

        if (slash && asprintf(&sibling, "%.*s/%s", (int) (slash - self_exe), self_exe, name) < 0)
                return -ENOMEM;
        for (int i = 0; i < 2; i++) {
                const char *path = i == 0 ? sibling : installed;

                if (!path)
                        continue;
                fd = open(path, O_PATH | O_CLOEXEC);
                if (fd >= 0 && faccessat(fd, "", X_OK, AT_EMPTY_PATH) == 0)
                        return fd;
                if (fd >= 0) {
                        errno = EACCES;
                        (void) close(fd);
                }
                if (i == 1 || errno != ENOENT) {
                        int r = negative_errno();
                        *ret_path = strdup(path);
                        return r;
                }
        }
        return -ENOENT; /* not reached */
}

int spawn_open_keeper(const char *self_exe, char **ret_path) {
        return spawn_open_helper(self_exe, "slotd-keeper", SLOTD_KEEPER_PATH, ret_path);
}
