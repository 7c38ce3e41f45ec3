/* SPDX-License-Identifier: MIT */
/* slotd-keeper on its own: started the way spawn.c starts it (every signal blocked, the
 * status file as fd 3, its server as its child), it forwards signals, writes how the server
 * ended, and refuses bad arguments. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static const char *keeper;

/* The servers' output as spawn.c gives it to a keeper (spawn.h): a pipe whose read end
 * (non-blocking) the keeper holds as fd 7 and whose write end is the servers' stdout and
 * stderr, a logs directory as fd 8 and its server.log as fd 9. Made anew for each keeper. */
static struct {
        char dir[64];
        int dir_fd, file, pipe[2];
        const char *max_size, *keep;
} klog = { .dir_fd = -1, .file = -1, .pipe = { -1, -1 } };

static void log_make(void) {
        char path[128];

        strcpy(klog.dir, "/tmp/slotd-test-keeper-logs.XXXXXX");
        assert_non_null(mkdtemp(klog.dir));
        klog.dir_fd = open(klog.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        snprintf(path, sizeof(path), "%s/server.log", klog.dir);
        klog.file = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
        assert_true(klog.dir_fd >= 0 && klog.file >= 0);
        assert_int_equal(pipe2(klog.pipe, O_CLOEXEC), 0);
        assert_int_equal(fcntl(klog.pipe[0], F_SETFL, O_NONBLOCK), 0);
}

/* In the keeper's child, before its exec: fds 7-9, and the pipe as stdout and stderr. */
static int log_place(void) {
        int p = fcntl(klog.pipe[0], F_DUPFD_CLOEXEC, 64), d = fcntl(klog.dir_fd, F_DUPFD_CLOEXEC, 64);
        int f = fcntl(klog.file, F_DUPFD_CLOEXEC, 64), w = fcntl(klog.pipe[1], F_DUPFD_CLOEXEC, 64);

        if (p < 0 || d < 0 || f < 0 || w < 0 || dup2(p, 7) < 0 || dup2(d, 8) < 0 ||
            dup2(f, 9) < 0 || dup2(w, 1) < 0 || dup2(w, 2) < 0)
                return -1;
        return 0;
}

/* The status file as fd 3 and the log's fds (log_place()), none overwriting another. */
static int place_status_and_log(int status) {
        int high = fcntl(status, F_DUPFD_CLOEXEC, 64);

        if (high < 0 || log_place() < 0 || dup2(high, 3) < 0)
                return -1;
        return 0;
}

/* The keeper has exited: the test's ends of it closed, the files' sizes (-1: none) in
 * sizes[0] (server.log), sizes[1] (server.log.1)... */
static void log_sizes(off_t *sizes, int n) {
        for (int i = 0; i < n; i++) {
                char path[128];
                struct stat st;

                if (i == 0)
                        snprintf(path, sizeof(path), "%s/server.log", klog.dir);
                else
                        snprintf(path, sizeof(path), "%s/server.log.%d", klog.dir, i);
                sizes[i] = stat(path, &st) == 0 ? st.st_size : -1;
        }
}

static void log_done(void) {
        char cmd[128];

        close(klog.dir_fd);
        close(klog.file);
        close(klog.pipe[0]);
        close(klog.pipe[1]);
        klog.dir_fd = klog.file = klog.pipe[0] = klog.pipe[1] = -1;
        snprintf(cmd, sizeof(cmd), "rm -rf %s", klog.dir);
        assert_int_equal(system(cmd), 0);
}

/* The status file (unlinked), and every signal blocked as the spawner blocks them; the old
 * mask in *old. */
static int status_file_and_block(sigset_t *old) {
        char path[] = "/tmp/slotd-test-keeper.XXXXXX";
        int fd = mkostemp(path, O_CLOEXEC);
        sigset_t all;

        assert_true(fd >= 0);
        unlink(path);
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, old);
        return fd;
}

/* The server, in the keeper's child: a clean signal mask, default dispositions (what slotd
 * gives it: it undoes what its own parent ignored, main.c; a test run under nohup has SIGHUP
 * ignored, which the first server would otherwise keep), no descriptor above 2. */
_Noreturn static void exec_server(char *const argv[], char *const envp[]) {
        sigset_t none;

        for (int sig = 1; sig < _NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void) sigaction(sig, &(struct sigaction){ .sa_handler = SIG_DFL }, NULL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (klog.pipe[1] >= 0 && (dup2(klog.pipe[1], 1) < 0 || dup2(klog.pipe[1], 2) < 0))
                _exit(126);
        (void) syscall(SYS_close_range, 3U, ~0U, 0U);
        execve(argv[0], argv, envp);
        _exit(127);
}

/* Forks the keeper, which forks 'server_argv' and execs KEEPER_PATH with its PID (or with
 * 'arg' when given). Returns the keeper's PID; *ret_status is the status file. */
static pid_t start_keeper(char *const server_argv[], const char *arg, int *ret_status) {
        sigset_t old;
        int fd;
        pid_t pid;

        log_make();
        fd = status_file_and_block(&old);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char buf[16];
                pid_t server = fork();

                if (server == 0)
                        exec_server(server_argv, environ);
                snprintf(buf, sizeof(buf), "%d", (int) server);
                if (place_status_and_log(fd) < 0)
                        _exit(126);
                execl(keeper, "slotd-keeper", arg ?: buf, klog.max_size ?: "0", klog.keep ?: "1",
                      (char *) NULL);
                _exit(125);
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
        *ret_status = fd;
        return pid;
}

static void read_status(int fd, char *buf, size_t size) {
        ssize_t n = pread(fd, buf, size - 1, 0);

        assert_true(n >= 0);
        buf[n] = '\0';
}

static int wait_exit(pid_t pid) {
        int wstatus;

        assert_int_equal(waitpid(pid, &wstatus, 0), pid);
        assert_true(WIFEXITED(wstatus));
        return WEXITSTATUS(wstatus);
}

static void test_exit_code(void **state) {
        char *const argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) "exit 7", NULL };
        char buf[64];
        int fd;
        pid_t pid = start_keeper(argv, NULL, &fd);

        assert_int_equal(wait_exit(pid), 0);
        read_status(fd, buf, sizeof(buf));
        assert_string_equal(buf, "exited 7\n");
        close(fd);
        log_done();
}

static void test_forwards_signal(void **state) {
        char *const argv[] = { (char *) "/bin/sleep", (char *) "30", NULL };
        char buf[64];
        int fd;
        pid_t pid = start_keeper(argv, NULL, &fd);

        /* The signal may come before the keeper has its handlers: it stays pending, since
         * the keeper was exec'd with every signal blocked. */
        assert_int_equal(kill(pid, SIGTERM), 0);
        assert_int_equal(wait_exit(pid), 0);
        read_status(fd, buf, sizeof(buf));
        assert_string_equal(buf, "killed 15\n");
        close(fd);
        log_done();
}

static void test_server_with_children(void **state) {
        /* The server has a child of its own first (the namespace's orphans that a keeper
         * also reaps need a PID namespace: test-lifecycle covers those). */
        char *const argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) "sleep 0 & wait; exit 3", NULL };
        char buf[64];
        int fd;
        pid_t pid = start_keeper(argv, NULL, &fd);

        assert_int_equal(wait_exit(pid), 0);
        read_status(fd, buf, sizeof(buf));
        assert_string_equal(buf, "exited 3\n");
        close(fd);
        log_done();
}

/* A keeper that may restart (keeper.c "Restarts"), as spawn.c starts it: PID 1 of a PID
 * namespace of its own, the server's command line after its PID, the server's environment
 * as its own, the restart eventfd as fd 5. Returns the keeper's PID, or 0 when this process
 * may not make a namespace (the test is then skipped). */
static pid_t start_restarting_keeper_argv(char *const argv[], int token, int *ret_status) {
        sigset_t old;
        int fd;
        pid_t pid;

        log_make();
        fd = status_file_and_block(&old);
        pid = (pid_t) syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
        if (pid < 0) {
                sigprocmask(SIG_SETMASK, &old, NULL);
                close(fd);
                log_done();
                log_done();
                return 0;
        }
        if (pid == 0) {
                char buf[16];
                char *const envp[] = { (char *) "MARK=from-the-keeper", NULL };
                char *kargv[10] = { (char *) "slotd-keeper", buf, (char *) (klog.max_size ?: "0"),
                                    (char *) (klog.keep ?: "1") };
                pid_t server = fork();

                if (server == 0)
                        exec_server(argv, envp);
                snprintf(buf, sizeof(buf), "%d", (int) server);
                /* Both through high numbers first, so that neither lands on the other. */
                fd = fcntl(fd, F_DUPFD_CLOEXEC, 64);
                token = fcntl(token, F_DUPFD_CLOEXEC, 64);
                if (fd < 0 || token < 0 || log_place() < 0 || dup2(fd, 3) < 0 ||
                    dup2(token, 5) < 0)
                        _exit(126);
                (void) syscall(SYS_close_range, 10U, ~0U, 0U);
                for (size_t i = 0; argv[i] && i < 5; i++)
                        kargv[4 + i] = argv[i];
                execve(keeper, kargv, envp);
                _exit(125);
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
        *ret_status = fd;
        return pid;
}

static pid_t start_restarting_keeper(const char *script, int token, int *ret_status) {
        char *const argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) script, NULL };

        return start_restarting_keeper_argv(argv, token, ret_status);
}

static void read_at(int fd, off_t offset, char *buf, size_t size) {
        ssize_t n = pread(fd, buf, size - 1, offset);

        assert_true(n >= 0);
        buf[n] = '\0';
}

static int count_lines(const char *path, const char *line) {
        char buf[256];
        FILE *f = fopen(path, "re");
        int n = 0;

        if (!f)
                return 0;
        while (fgets(buf, sizeof(buf), f))
                if (!line || strcmp(buf, line) == 0)
                        n++;
        fclose(f);
        return n;
}

/* One restart armed: the keeper takes it at the first exit, starts the same command line
 * with the same environment and none of its own descriptors, records the restart at offset
 * 32, and ends at the second exit, for which there is none. */
static void test_restarts_once_when_armed(void **state) {
        char out[] = "/tmp/slotd-test-keeper-out.XXXXXX", script[256], buf[64];
        int token = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK), status, o = mkstemp(out);
        uint64_t v;
        pid_t pid;

        assert_true(token >= 0 && o >= 0);
        close(o);
        snprintf(script, sizeof(script),
                 "echo \"run $MARK $(ls /proc/self/fd | wc -l)\" >> %s; exit 5", out);
        pid = start_restarting_keeper(script, token, &status);
        if (pid == 0) {
                unlink(out);
                close(token);
                skip(); /* not root: no PID namespace */
        }
        assert_int_equal(wait_exit(pid), 0);
        /* Both runs saw the environment and fds 0-2 only (and the one ls reads): the
         * keeper's own are not passed on to the server it starts. */
        assert_int_equal(count_lines(out, NULL), 2);
        assert_int_equal(count_lines(out, "run from-the-keeper 4\n"), 2);
        read_status(status, buf, sizeof(buf));
        assert_string_equal(buf, "exited 5\n");
        read_at(status, 32, buf, sizeof(buf));
        assert_int_equal(strlen(buf), 32);
        assert_true(strncmp(buf, "restart 1 exited 5 ", 19) == 0);
        assert_int_equal(buf[31], '\n');
        /* The one restart was taken. */
        assert_int_equal(read(token, &v, sizeof(v)), -1);
        assert_int_equal(errno, EAGAIN);
        unlink(out);
        close(token);
        close(status);
        log_done();
}

/* Not armed, or a process of the server left behind in the namespace: no restart. */
static void test_no_restart_unarmed_or_orphans(void **state) {
        char out[] = "/tmp/slotd-test-keeper-out.XXXXXX", script[256], buf[64];
        int token = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), status, o = mkstemp(out);
        uint64_t v = 1;
        pid_t pid;

        assert_true(token >= 0 && o >= 0);
        close(o);
        snprintf(script, sizeof(script), "echo run >> %s; exit 6", out);
        pid = start_restarting_keeper(script, token, &status);
        if (pid == 0) {
                unlink(out);
                close(token);
                skip();
        }
        assert_int_equal(wait_exit(pid), 0);
        assert_int_equal(count_lines(out, "run\n"), 1);
        read_status(status, buf, sizeof(buf));
        assert_string_equal(buf, "exited 6\n");
        read_at(status, 32, buf, sizeof(buf));
        assert_string_equal(buf, "");
        close(status);
        log_done();

        /* Armed, but an orphan still runs: the namespace ends with the keeper instead, and
         * the restart stays where it was. */
        assert_int_equal(write(token, &v, sizeof(v)), sizeof(v));
        snprintf(script, sizeof(script), "echo run >> %s; sleep 30 & exit 7", out);
        pid = start_restarting_keeper(script, token, &status);
        assert_true(pid > 0);
        assert_int_equal(wait_exit(pid), 0);
        assert_int_equal(count_lines(out, "run\n"), 2);
        read_status(status, buf, sizeof(buf));
        assert_string_equal(buf, "exited 7\n");
        assert_int_equal(read(token, &v, sizeof(v)), sizeof(v));
        assert_int_equal(v, 1);
        unlink(out);
        close(token);
        close(status);
        log_done();
}

/* A restart whose exec fails: the errno at offset 96 of the status file, exit 203, and no
 * further restart though one is armed (slotd judges a build that cannot run). */
static void test_failed_exec_not_restarted(void **state) {
        char out[] = "/tmp/slotd-test-keeper-out.XXXXXX", build[] = "/tmp/slotd-test-keeper-build.XXXXXX";
        char script[512], buf[64];
        int token = eventfd(2, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE), status;
        int o = mkstemp(out), b = mkstemp(build);
        char *const argv[] = { build, NULL };
        uint64_t v;
        pid_t pid;

        assert_true(token >= 0 && o >= 0 && b >= 0);
        close(o);
        /* Runs once, then takes its own execute bit away. */
        snprintf(script, sizeof(script), "#!/bin/sh\necho run >> %s\nchmod 0644 %s\nexit 5\n",
                 out, build);
        assert_int_equal(write(b, script, strlen(script)), (ssize_t) strlen(script));
        assert_int_equal(fchmod(b, 0755), 0);
        close(b);
        pid = start_restarting_keeper_argv(argv, token, &status);
        if (pid == 0) {
                unlink(out);
                unlink(build);
                close(token);
                skip();
        }
        assert_int_equal(wait_exit(pid), 0);
        assert_int_equal(count_lines(out, "run\n"), 1);
        read_status(status, buf, sizeof(buf));
        assert_string_equal(buf, "exited 203\n");
        read_at(status, 96, buf, sizeof(buf));
        assert_string_equal(buf, "exec 13\n");
        read_at(status, 32, buf, sizeof(buf));
        assert_true(strncmp(buf, "restart 1 exited 5 ", 19) == 0);
        /* Of two restarts armed (one at a time: a semaphore), one is left. */
        assert_int_equal(read(token, &v, sizeof(v)), sizeof(v));
        assert_int_equal(v, 1);
        unlink(out);
        unlink(build);
        close(token);
        close(status);
        log_done();
}

/* Polls (deadline 20 s) until 'path' holds 'n' lines 'line'. */
static void wait_lines(const char *path, const char *line, int n) {
        for (int i = 0; i < 2000 && count_lines(path, line) < n; i++)
                usleep(10000);
        assert_int_equal(count_lines(path, line), n);
}

/* A SIGTERM to the keeper ends its restarts, though two are armed (systemd stopping
 * slotd-slots.scope at shutdown, with no slotd left to take them back): the server gets it
 * and is not started again. Any other signal is only passed on: a SIGHUP's exit before it
 * is restarted. Without the rule the third run exits 9. The script counts its runs before it
 * writes "run": once the test sees that line, the server forks nothing more before its exec,
 * so the SIGHUP leaves no orphan (the keeper restarts only into an empty namespace). */
static void test_sigterm_ends_restarts(void **state) {
        char out[] = "/tmp/slotd-test-keeper-out.XXXXXX", script[512], buf[64];
        int token = eventfd(2, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE), status, o = mkstemp(out);
        uint64_t v;
        pid_t pid;

        assert_true(token >= 0 && o >= 0);
        close(o);
        snprintf(script, sizeof(script),
                 "n=$(wc -l < %s); echo run >> %s; [ $n -ge 2 ] && exit 9; exec sleep 30", out, out);
        pid = start_restarting_keeper(script, token, &status);
        if (pid == 0) {
                unlink(out);
                close(token);
                skip();
        }
        wait_lines(out, "run\n", 1);
        assert_int_equal(kill(pid, SIGHUP), 0);
        wait_lines(out, "run\n", 2);
        assert_int_equal(kill(pid, SIGTERM), 0);
        assert_int_equal(wait_exit(pid), 0);
        assert_int_equal(count_lines(out, "run\n"), 2);
        read_status(status, buf, sizeof(buf));
        assert_string_equal(buf, "killed 15\n");
        read_at(status, 32, buf, sizeof(buf));
        assert_true(strncmp(buf, "restart 1 killed 1 ", 19) == 0);
        /* The SIGHUP's restart took one; the other is still there, for no one. */
        assert_int_equal(read(token, &v, sizeof(v)), sizeof(v));
        assert_int_equal(v, 1);
        assert_int_equal(read(token, &v, sizeof(v)), -1);
        unlink(out);
        close(token);
        close(status);
        log_done();
}

/* Output through the pipe into server.log, rotated at max_size with 'keep' older files: a
 * server writing 10,000 bytes, max 1,000, keep 2: server.log.1 and .2 full, the newest last
 * (the output is "0123456789" a thousand times, so that what each file holds can be told
 * apart), nothing beyond .2. */
static void test_log_rotates(void **state) {
        char *const argv[] = { (char *) "/bin/sh", (char *) "-c",
                               (char *) "i=0; while [ $i -lt 1000 ]; do printf 0123456789; "
                                        "i=$((i+1)); done; printf end", NULL };
        char buf[64], path[128];
        off_t sizes[4];
        int fd;
        pid_t pid;

        klog.max_size = "1000";
        klog.keep = "2";
        pid = start_keeper(argv, NULL, &fd);
        klog.max_size = klog.keep = NULL;
        assert_int_equal(wait_exit(pid), 0);
        read_status(fd, buf, sizeof(buf));
        assert_string_equal(buf, "exited 0\n");
        log_sizes(sizes, 4);
        /* 10,003 bytes: ten full files, the last 3 in server.log, two older ones kept. */
        assert_int_equal(sizes[0], 3);
        assert_int_equal(sizes[1], 1000);
        assert_int_equal(sizes[2], 1000);
        assert_int_equal(sizes[3], -1);
        snprintf(path, sizeof(path), "%s/server.log", klog.dir);
        assert_int_equal(count_lines(path, "end"), 1);
        /* Nothing dropped. */
        read_at(fd, 128, buf, sizeof(buf));
        assert_string_equal(buf, "");
        close(fd);
        log_done();
}

/* The server's last output is in server.log before the keeper says it ended, though the
 * keeper still holds the pipe's write end (a keeper that restarts). */
static void test_log_drained_at_exit(void **state) {
        int token = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), status;
        char path[128], buf[64];
        pid_t pid;

        assert_true(token >= 0);
        pid = start_restarting_keeper("echo first; echo last >&2; exit 4", token, &status);
        if (pid == 0) {
                close(token);
                skip();
        }
        assert_int_equal(wait_exit(pid), 0);
        read_status(status, buf, sizeof(buf));
        assert_string_equal(buf, "exited 4\n");
        snprintf(path, sizeof(path), "%s/server.log", klog.dir);
        assert_int_equal(count_lines(path, NULL), 2);
        assert_int_equal(count_lines(path, "last\n"), 1);
        close(token);
        close(status);
        log_done();
}

/* server.log cannot take the output: the keeper drops it, the server is not blocked, and the
 * count is at offset 128 of the status file, with the errno. Here "server.log" is /dev/full,
 * which takes no splice() at all (EINVAL): any refusal is counted alike (a full disk's
 * ENOSPC is test-logs-rotate's). */
static void test_log_lost_counted(void **state) {
        char *const argv[] = { (char *) "/bin/sh", (char *) "-c",
                               (char *) "i=0; while [ $i -lt 100 ]; do printf 0123456789; "
                                        "i=$((i+1)); done", NULL };
        char buf[64];
        unsigned long bytes;
        int fd, error, full;
        sigset_t old;
        pid_t pid;

        log_make();
        full = open("/dev/full", O_WRONLY | O_CLOEXEC);
        assert_true(full >= 0);
        assert_int_equal(dup3(full, klog.file, O_CLOEXEC), klog.file);
        close(full);
        fd = status_file_and_block(&old);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char pidbuf[16];
                pid_t server = fork();

                if (server == 0)
                        exec_server(argv, environ);
                snprintf(pidbuf, sizeof(pidbuf), "%d", (int) server);
                if (place_status_and_log(fd) < 0)
                        _exit(126);
                execl(keeper, "slotd-keeper", pidbuf, "0", "1", (char *) NULL);
                _exit(125);
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
        assert_int_equal(wait_exit(pid), 0);
        read_status(fd, buf, sizeof(buf));
        assert_string_equal(buf, "exited 0\n");
        read_at(fd, 128, buf, sizeof(buf));
        assert_int_equal(strlen(buf), 32);
        assert_int_equal(sscanf(buf, "lost %lu %d", &bytes, &error), 2);
        assert_int_equal(bytes, 1000);
        assert_int_equal(error, EINVAL);
        close(fd);
        log_done();
}

/* A server.log that is no regular file of one link (a FIFO the server planted, where opening
 * it for writing would block the keeper, or a hard link to a file elsewhere) is refused: the
 * output is dropped and counted, and the keeper goes on. A FIFO without a reader fails the
 * non-blocking open (ENXIO); a link, the check of its link count (EPERM). fd 9 is not a file
 * at first (the pipe: lseek() fails), so the keeper opens server.log itself, as after a
 * rotation. */
/* kind 0: a FIFO; kind 1: a regular file with a second link. Returns the status file. */
static int run_with_planted_log(int kind) {
        char *const argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) "printf 12345", NULL };
        char path[128], other[160];
        sigset_t old;
        int fd;
        pid_t pid;

        log_make();
        snprintf(path, sizeof(path), "%s/server.log", klog.dir);
        snprintf(other, sizeof(other), "%s/elsewhere", klog.dir);
        if (kind == 0) {
                assert_int_equal(unlink(path), 0);
                assert_int_equal(mkfifo(path, 0640), 0);
        } else
                assert_int_equal(link(path, other), 0);
        assert_int_equal(dup3(klog.pipe[1], klog.file, O_CLOEXEC), klog.file);
        fd = status_file_and_block(&old);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char pidbuf[16];
                pid_t server = fork();

                if (server == 0)
                        exec_server(argv, environ);
                snprintf(pidbuf, sizeof(pidbuf), "%d", (int) server);
                if (place_status_and_log(fd) < 0)
                        _exit(126);
                execl(keeper, "slotd-keeper", pidbuf, "0", "1", (char *) NULL);
                _exit(125);
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
        assert_int_equal(wait_exit(pid), 0);
        return fd;
}

static void test_log_refuses_fifo(void **state) {
        char buf[64], path[160];
        struct stat st;
        int fd = run_with_planted_log(0);

        read_status(fd, buf, sizeof(buf));
        assert_string_equal(buf, "exited 0\n");
        read_at(fd, 128, buf, sizeof(buf));
        assert_true(strncmp(buf, "lost 5 6 ", 9) == 0); /* ENXIO */
        close(fd);
        log_done();

        /* a hard link: opened, refused by its link count, nothing written through it */
        fd = run_with_planted_log(1);
        read_at(fd, 128, buf, sizeof(buf));
        assert_true(strncmp(buf, "lost 5 1 ", 9) == 0); /* EPERM */
        snprintf(path, sizeof(path), "%s/elsewhere", klog.dir);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, 0);
        close(fd);
        log_done();
}

static void test_bad_arguments(void **state) {
        char *const argv[] = { (char *) "/bin/true", NULL };
        const char *bad[] = { "", "x", "12x", "1", "99999999999999999999" };
        const char *bad_log[][2] = { { "x", "1" }, { "", "1" }, { "0", "0" }, { "0", "100" },
                                     { "0", "1x" } };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int fd;
                pid_t pid = start_keeper(argv, bad[i], &fd);
                assert_int_equal(wait_exit(pid), 2);
                close(fd);
                log_done();
        }
        /* logs.max_size and logs.keep (1 to 99) as the keeper's second and third arguments. */
        for (size_t i = 0; i < sizeof(bad_log) / sizeof(bad_log[0]); i++) {
                int fd;
                pid_t pid;

                klog.max_size = bad_log[i][0];
                klog.keep = bad_log[i][1];
                pid = start_keeper(argv, NULL, &fd);
                klog.max_size = klog.keep = NULL;
                assert_int_equal(wait_exit(pid), 2);
                close(fd);
                log_done();
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exit_code),
                cmocka_unit_test(test_forwards_signal),
                cmocka_unit_test(test_server_with_children),
                cmocka_unit_test(test_restarts_once_when_armed),
                cmocka_unit_test(test_no_restart_unarmed_or_orphans),
                cmocka_unit_test(test_failed_exec_not_restarted),
                cmocka_unit_test(test_sigterm_ends_restarts),
                cmocka_unit_test(test_log_rotates),
                cmocka_unit_test(test_log_drained_at_exit),
                cmocka_unit_test(test_log_lost_counted),
                cmocka_unit_test(test_log_refuses_fifo),
                cmocka_unit_test(test_bad_arguments),
        };

        keeper = KEEPER_PATH;
        return cmocka_run_group_tests(tests, NULL, NULL);
}
