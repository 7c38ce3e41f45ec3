/* SPDX-License-Identifier: MIT */
/* The keeper's status file as slotd reads and marks it (spawn.c): the exit status at offset 0,
 * the keeper's last restart at KEEPER_RESTART_OFFSET, slotd's READY=1 mark at
 * KEEPER_READY_OFFSET; none of them disturbs the others. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "macro.h"
#include "spawn.h"

static int status_file(void) {
        int fd = memfd_create("status", MFD_CLOEXEC);

        assert_true(fd >= 0);
        return fd;
}

static void put(int fd, const char *s, off_t offset) {
        assert_int_equal(pwrite(fd, s, strlen(s), offset), (ssize_t) strlen(s));
}

static void test_ready_mark(_unused_ void **state) {
        int fd = status_file(), code, sig;
        unsigned n;
        bool failed, core;

        /* An empty file (a keeper just started): nothing marked. */
        assert_int_equal(spawn_marked_ready(fd, 0), 0);
        assert_int_equal(spawn_mark_ready(fd, 0), 0);
        assert_int_equal(spawn_marked_ready(fd, 0), 1);
        /* The mark is for the first server, not for the one after a keeper restart. */
        assert_int_equal(spawn_marked_ready(fd, 1), 0);
        /* The keeper's restart record and exit status leave the mark as it is, and it them. */
        put(fd, "restart 1 exited 3\n", KEEPER_RESTART_OFFSET);
        assert_int_equal(spawn_marked_ready(fd, 0), 1);
        assert_int_equal(spawn_read_restart(fd, &n, &failed, &code, &sig, NULL), 1);
        assert_int_equal(n, 1);
        assert_false(failed);
        assert_int_equal(code, 3);
        assert_int_equal(sig, 0);
        assert_int_equal(spawn_mark_ready(fd, 1), 0);
        assert_int_equal(spawn_marked_ready(fd, 1), 1);
        assert_int_equal(spawn_marked_ready(fd, 0), 0);
        put(fd, "killed 9\n", 0);
        assert_int_equal(spawn_read_status(fd, &code, &sig, NULL), 1);
        assert_int_equal(code, 0);
        assert_int_equal(sig, 9);
        /* A signal that left a core (WCOREDUMP): "dumped", as long as "killed". */
        put(fd, "dumped 11\n", 0);
        assert_int_equal(spawn_read_status(fd, &code, &sig, &core), 1);
        assert_int_equal(sig, 11);
        assert_true(core);
        put(fd, "killed 9\n", 0);
        assert_int_equal(spawn_read_status(fd, &code, &sig, &core), 1);
        assert_false(core);
        put(fd, "restart 2 dumped 6        \n", KEEPER_RESTART_OFFSET);
        assert_int_equal(spawn_read_restart(fd, &n, &failed, &code, &sig, &core), 1);
        assert_int_equal(n, 2);
        assert_int_equal(sig, 6);
        assert_int_equal(code, 0);
        assert_true(core);
        put(fd, "restart 1 exited 3         \n", KEEPER_RESTART_OFFSET);
        assert_int_equal(spawn_read_restart(fd, &n, &failed, &code, &sig, NULL), 1);
        assert_int_equal(n, 1);
        assert_int_equal(spawn_marked_ready(fd, 1), 1);
        /* Twelve restarts later the mark is longer than before: still read whole. */
        assert_int_equal(spawn_mark_ready(fd, 12), 0);
        assert_int_equal(spawn_marked_ready(fd, 12), 1);
        assert_int_equal(spawn_marked_ready(fd, 1), 0);
        close(fd);
}

static void test_ready_mark_errors(_unused_ void **state) {
        int fd = status_file();

        /* Something else at the mark's place is no mark. */
        put(fd, "garbage", KEEPER_READY_OFFSET);
        assert_int_equal(spawn_marked_ready(fd, 0), 0);
        close(fd);
        assert_int_equal(spawn_marked_ready(fd, 0), -EBADF);
        assert_int_equal(spawn_mark_ready(fd, 0), -EBADF);
}

/* A failed exec's record at KEEPER_EXEC_OFFSET: read back, and disturbed by none of the other
 * records (nor they by it). */
static void test_exec_failure_record(_unused_ void **state) {
        int fd = status_file(), code, sig, error = 0;

        assert_int_equal(spawn_read_exec_failure(fd, &error), 0);
        put(fd, "exited 203\n", 0);
        assert_int_equal(spawn_read_exec_failure(fd, &error), 0);
        put(fd, "exec 13\n", KEEPER_EXEC_OFFSET);
        assert_int_equal(spawn_read_exec_failure(fd, &error), 1);
        assert_int_equal(error, EACCES);
        assert_int_equal(spawn_read_status(fd, &code, &sig, NULL), 1);
        assert_int_equal(code, 203);
        assert_int_equal(spawn_mark_ready(fd, 0), 0);
        assert_int_equal(spawn_read_exec_failure(fd, &error), 1);
        assert_int_equal(spawn_marked_ready(fd, 0), 1);
        /* Anything else there is no record; 0 is no errno. */
        put(fd, "exec 0\n", KEEPER_EXEC_OFFSET);
        assert_int_equal(spawn_read_exec_failure(fd, &error), 0);
        put(fd, "garbage", KEEPER_EXEC_OFFSET);
        assert_int_equal(spawn_read_exec_failure(fd, &error), 0);
        close(fd);
        assert_int_equal(spawn_read_exec_failure(fd, &error), -EBADF);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec_failure_record),
                cmocka_unit_test(test_ready_mark),
                cmocka_unit_test(test_ready_mark_errors),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
