/* SPDX-License-Identifier: MIT */
/* slotd-keeper on its own: started the way spawn.c starts it (every signal blocked, the
 * status file as fd 3, its server as its child), it forwards signals, writes how the server
 * ended, and refuses bad arguments. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static const char *keeper;

/* Forks the keeper, which forks 'server_argv' and execs KEEPER_PATH with its PID (or with
 * 'arg' when given). Returns the keeper's PID; *ret_status is the status file. */
static pid_t start_keeper(char *const server_argv[], const char *arg, int *ret_status) {
        char path[] = "/tmp/slotd-test-keeper.XXXXXX";
        int fd = mkstemp(path);
        sigset_t all, old;
        pid_t pid;

        assert_true(fd >= 0);
        unlink(path);
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &old);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char buf[16];
                pid_t server = fork();

                if (server == 0) {
                        sigset_t none;
                        sigemptyset(&none);
                        sigprocmask(SIG_SETMASK, &none, NULL);
                        execv(server_argv[0], server_argv);
                        _exit(127);
                }
                snprintf(buf, sizeof(buf), "%d", (int) server);
                if (dup2(fd, 3) < 0)
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
                cmocka_unit_test(test_bad_arguments),
        };

        keeper = KEEPER_PATH;
        return cmocka_run_group_tests(tests, NULL, NULL);
}
