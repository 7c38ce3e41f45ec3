/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgroup.h"

static void test_mountinfo_hybrid(_unused_ void **state) {
        const char *text =
                "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
                "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
                "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        _cleanup_free_ char *m = NULL;

        assert_int_equal(cg_parse_mountinfo(text, &m), 0);
        assert_string_equal(m, "/sys/fs/cgroup/unified");
}

static void test_mountinfo_unified_and_none(_unused_ void **state) {
        _cleanup_free_ char *m = NULL;
        char *none = NULL;

        assert_int_equal(cg_parse_mountinfo("26 1 0:23 / /sys/fs/cgroup rw,nosuid shared:4 - "
                                            "cgroup2 cgroup2 rw,nsdelegate\n", &m), 0);
        assert_string_equal(m, "/sys/fs/cgroup");
        assert_int_equal(cg_parse_mountinfo("1 0 0:1 / / rw - ext4 /dev/vda rw\n", &none), -ENOENT);
        assert_null(none);
        assert_int_equal(cg_parse_mountinfo("", &none), -ENOENT);
        assert_int_equal(cg_parse_mountinfo("garbage - cgroup2 x\n", &none), -ENOENT);
}

static void test_proc_cgroup(_unused_ void **state) {
        _cleanup_free_ char *p = NULL, *q = NULL;
        char *none = NULL;

        assert_int_equal(cg_parse_proc_cgroup("4:memory:/x\n0::/system.slice/slotd.service\n", &p), 0);
        assert_string_equal(p, "/system.slice/slotd.service");
        assert_int_equal(cg_parse_proc_cgroup("0::/\n", &q), 0);
        assert_string_equal(q, "/");
        assert_int_equal(cg_parse_proc_cgroup("4:memory:/x\n", &none), -ENOENT);
}

static void test_unit_slots_scope(_unused_ void **state) {
        _cleanup_free_ char *scope = NULL, *path = NULL, *s2 = NULL, *p2 = NULL, *s3 = NULL,
                            *p3 = NULL;
        char *none = NULL, *none2 = NULL;

        assert_int_equal(cg_unit_slots_scope("/system.slice/slotd.service", "slotd.service",
                                             &scope, &path), 0);
        assert_string_equal(scope, "slotd-slots.scope");
        assert_string_equal(path, "/system.slice/slotd-slots.scope");
        /* An older slotd's leaf below the unit, a nested slice, a unit name met earlier in a
         * longer component. */
        assert_int_equal(cg_unit_slots_scope("/games.slice/games-eu.slice/slotd.service/supervisor",
                                             "slotd.service", &s2, &p2), 0);
        assert_string_equal(s2, "slotd-slots.scope");
        assert_string_equal(p2, "/games.slice/games-eu.slice/slotd-slots.scope");
        assert_int_equal(cg_unit_slots_scope("/my-slotd.service.slice/slotd.service", "slotd.service",
                                             &s3, &p3), 0);
        assert_string_equal(p3, "/my-slotd.service.slice/slotd-slots.scope");
        /* Not a service, not in the path, a bare suffix. */
        assert_int_equal(cg_unit_slots_scope("/user.slice/session-1.scope", "session-1.scope",
                                             &none, &none2), -EINVAL);
        assert_int_equal(cg_unit_slots_scope("/system.slice/other.service", "slotd.service",
                                             &none, &none2), -EINVAL);
        assert_int_equal(cg_unit_slots_scope("/system.slice/xslotd.service", "slotd.service",
                                             &none, &none2), -EINVAL);
        assert_int_equal(cg_unit_slots_scope("/system.slice/.service", ".service", &none, &none2),
                         -EINVAL);
        assert_null(none);
        assert_null(none2);
}

static void test_controllers(_unused_ void **state) {
        assert_int_equal(cg_parse_controllers("cpuset cpu io memory hugetlb pids rdma misc\n"),
                         CGROUP_MASK_ALL);
        assert_int_equal(cg_parse_controllers("hugetlb\n"), 0);
        assert_int_equal(cg_parse_controllers("cpuset io memory"), CGROUP_MASK(CGROUP_MEMORY));
        assert_int_equal(cg_parse_controllers(""), 0);
        assert_string_equal(cgroup_controller_to_string(CGROUP_PIDS), "pids");
}

/* The memory of a slot from a descriptor kept open: memory.current as it is, or without
 * the controller the resident sets of the processes cgroup.procs lists, the keeper's left
 * out; the file is re-read from its start each time. */
static void test_memory_current_fd(_unused_ void **state) {
        char path[] = "/tmp/slotd-test-cgroup.XXXXXX", line[64];
        int fd = mkostemp(path, O_CLOEXEC), n;
        uint64_t v = 0;

        assert_true(fd >= 0);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(pwrite(fd, "123456789\n", 10, 0), 10);
        assert_int_equal(cg_memory_current_fd(fd, true, 0, NULL, &v), 0);
        assert_int_equal(v, 123456789);
        assert_string_equal(cg_memory_file(true), "memory.current");
        assert_string_equal(cg_memory_file(false), "cgroup.procs");

        /* This process's resident set, then none when it is the one left out. */
        n = snprintf(line, sizeof(line), "%d\n", (int) getpid());
        assert_int_equal(ftruncate(fd, 0), 0);
        assert_int_equal(pwrite(fd, line, (size_t) n, 0), n);
        assert_int_equal(cg_memory_current_fd(fd, false, 0, NULL, &v), 0);
        assert_true(v > 0);
        assert_int_equal(cg_memory_current_fd(fd, false, getpid(), NULL, &v), 0);
        assert_int_equal(v, 0);
        close(fd);
}

static void write_procs(int fd, pid_t pid) {
        char line[32];
        int n = snprintf(line, sizeof(line), "%d\n", (int) pid);

        assert_int_equal(ftruncate(fd, 0), 0);
        assert_int_equal(pwrite(fd, line, (size_t) n, 0), n);
}

/* Without the controller, a check keeps the first process's statm open: the next read of
 * the same process goes through it; an ended process's descriptor fails and is dropped;
 * another process in its place gets a descriptor of its own. */
static void test_memory_statm_kept(_unused_ void **state) {
        char path[] = "/tmp/slotd-test-cgroup.XXXXXX";
        int fd = mkostemp(path, O_CLOEXEC), kept, status;
        CgStatm keep = CG_STATM_INIT;
        uint64_t v = 0;
        pid_t child;

        assert_true(fd >= 0);
        assert_int_equal(unlink(path), 0);
        write_procs(fd, getpid());
        assert_int_equal(cg_memory_current_fd(fd, false, 0, &keep, &v), 0);
        assert_true(v > 0);
        assert_int_equal(keep.pid, getpid());
        assert_true(keep.fd >= 0);
        kept = keep.fd;
        v = 0;
        assert_int_equal(cg_memory_current_fd(fd, false, 0, &keep, &v), 0);
        assert_true(v > 0);
        assert_int_equal(keep.fd, kept);

        /* A child's statm, kept; the child ends and is reaped: its entry reads nothing. */
        child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                pause();
                _exit(0);
        }
        write_procs(fd, child);
        assert_int_equal(cg_memory_current_fd(fd, false, 0, &keep, &v), 0);
        assert_true(v > 0);
        assert_int_equal(keep.pid, child);
        assert_int_equal(kill(child, SIGKILL), 0);
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_int_equal(cg_memory_current_fd(fd, false, 0, &keep, &v), 0);
        assert_int_equal(v, 0);
        assert_true(keep.fd < 0);

        /* Another process listed: kept in its turn. */
        write_procs(fd, getpid());
        assert_int_equal(cg_memory_current_fd(fd, false, 0, &keep, &v), 0);
        assert_true(v > 0);
        assert_int_equal(keep.pid, getpid());
        cg_statm_close(&keep);
        assert_true(keep.fd < 0);
        close(fd);
}

/* cg_create is mkdir -p: every missing level, an existing path is no error, a file in the
 * way is. */
static void test_create(_unused_ void **state) {
        char top[] = "/tmp/test-cgroup.XXXXXX", path[256];
        struct stat st;

        assert_non_null(mkdtemp(top));
        snprintf(path, sizeof(path), "%s/a/b/c", top);
        assert_int_equal(cg_create(path), 0);
        assert_int_equal(stat(path, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(cg_create(path), 0); /* exists */
        snprintf(path, sizeof(path), "%s/a/d/", top);
        assert_int_equal(cg_create(path), 0); /* a trailing slash */
        snprintf(path, sizeof(path), "%s/a/d", top);
        assert_int_equal(stat(path, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        snprintf(path, sizeof(path), "%s/f", top);
        assert_int_equal(close(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)), 0);
        snprintf(path, sizeof(path), "%s/f/g/h", top);
        assert_int_equal(cg_create(path), -ENOTDIR);
        snprintf(path, sizeof(path), "rm -rf '%s'", top);
        assert_int_equal(system(path), 0);
}

static void test_format_limit(_unused_ void **state) {
        char buf[24];
        cg_format_limit(UINT64_MAX, buf);
        assert_string_equal(buf, "max");
        cg_format_limit(0, buf);
        assert_string_equal(buf, "0");
        cg_format_limit(UINT64_MAX - 1, buf);
        assert_string_equal(buf, "18446744073709551614");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_mountinfo_hybrid),
                cmocka_unit_test(test_mountinfo_unified_and_none),
                cmocka_unit_test(test_proc_cgroup),
                cmocka_unit_test(test_unit_slots_scope),
                cmocka_unit_test(test_controllers),
                cmocka_unit_test(test_create),
                cmocka_unit_test(test_format_limit),
                cmocka_unit_test(test_memory_statm_kept),
                cmocka_unit_test(test_memory_current_fd),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
