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

/* 'fd' as 'target' for the exec, through a high number, so that it loses close-on-exec
 * even where fd == target. */
static int put_fd(int fd, int target) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 64);

        return high < 0 ? -1 : dup2(high, target);
}

/* The server, in the keeper's child: a clean signal mask, no descriptor above 2. */
_Noreturn static void exec_server(char *const argv[], char *const envp[]) {
        sigset_t none;

        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        (void) syscall(SYS_close_range, 3U, ~0U, 0U);
        execve(argv[0], argv, envp);
        _exit(127);
}

/* Forks the keeper, which forks 'server_argv' and execs KEEPER_PATH with its PID (or with
 * 'arg' when given). Returns the keeper's PID; *ret_status is the status file. */
static pid_t start_keeper(char *const server_argv[], const char *arg, int *ret_status) {
        sigset_t old;
        int fd = status_file_and_block(&old);
        pid_t pid;

        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char buf[16];
                pid_t server = fork();

                if (server == 0)
                        exec_server(server_argv, environ);
                snprintf(buf, sizeof(buf), "%d", (int) server);
                if (put_fd(fd, 3) < 0)
                        _exit(126);
                execl(keeper, "slotd-keeper", arg ?: buf, (char *) NULL);
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
}

/* A keeper that may restart (keeper.c "Restarts"), as spawn.c starts it: PID 1 of a PID
 * namespace of its own, the server's command line after its PID, the server's environment
 * as its own, the restart eventfd as fd 5. Returns the keeper's PID, or 0 when this process
 * may not make a namespace (the test is then skipped). */
static pid_t start_restarting_keeper_argv(char *const argv[], int token, int *ret_status) {
        sigset_t old;
        int fd = status_file_and_block(&old);
        pid_t pid;

        pid = (pid_t) syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
        if (pid < 0) {
                sigprocmask(SIG_SETMASK, &old, NULL);
                close(fd);
                return 0;
        }
        if (pid == 0) {
                char buf[16];
                char *const envp[] = { (char *) "MARK=from-the-keeper", NULL };
                char *kargv[8] = { (char *) "slotd-keeper", buf };
                pid_t server = fork();

                if (server == 0)
                        exec_server(argv, envp);
                snprintf(buf, sizeof(buf), "%d", (int) server);
                /* Both through high numbers first, so that neither lands on the other. */
                fd = fcntl(fd, F_DUPFD_CLOEXEC, 64);
                token = fcntl(token, F_DUPFD_CLOEXEC, 64);
                if (fd < 0 || token < 0 || dup2(fd, 3) < 0 || dup2(token, 5) < 0)
                        _exit(126);
                (void) syscall(SYS_close_range, 6U, ~0U, 0U);
                for (size_t i = 0; argv[i] && i < 5; i++)
                        kargv[2 + i] = argv[i];
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
}

static void test_bad_arguments(void **state) {
        char *const argv[] = { (char *) "/bin/true", NULL };
        const char *bad[] = { "", "x", "12x", "1", "99999999999999999999" };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int fd;
                pid_t pid = start_keeper(argv, bad[i], &fd);
                assert_int_equal(wait_exit(pid), 2);
                close(fd);
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
                cmocka_unit_test(test_bad_arguments),
        };

        keeper = KEEPER_PATH;
        return cmocka_run_group_tests(tests, NULL, NULL);
}
