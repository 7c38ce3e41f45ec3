/* SPDX-License-Identifier: MIT */
/* The journal's reserve (state-reserve.h): its accounting, and the bound on a line that it
 * rests on; and the preallocation it is kept with (state-file.h), on the filesystem of the
 * test's temporary directory. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "macro.h"
#include "state-file.h"
#include "state-reserve.h"

static void fill(char *buf, size_t n, char c) {
        memset(buf, c, n);
        buf[n] = '\0';
}

/* The longest line the writer can make: every ID at its longest, every number at its
 * widest. A field added to SlotRecord must keep this under STATE_SLOT_LINE_MAX. */
static void test_line_max(void **state) {
        char fleet[65], uuid[129], build[129], reserved[129];
        SlotRecord slot;
        StateRecord rec;
        _cleanup_free_ char *text = NULL;
        int n;

        fill(fleet, 64, 'f');
        fill(uuid, 128, 'u');
        fill(build, 128, 'b');
        fill(reserved, 128, 'r');
        slot = (SlotRecord){
                .id = UINT32_MAX, .fleet = fleet, .allocation_uuid = uuid,
                .build_configuration = build, .reservation_uuid = reserved,
                .reserved_until = UINT64_MAX, .hold_until = UINT64_MAX, .failure = "start-timeout",
                .failed = true, .restarts = UINT32_MAX, .last_exit_code = -INT32_MAX,
                .last_exit_signal = -INT32_MAX, .keeper = INT32_MAX, .keeper_restarts = UINT32_MAX,
                .ready = true, .started_at = UINT64_MAX, .events = UINT64_MAX,
                .ready_for_players = true, .payload_at = UINT64_MAX,
        };
        rec = (StateRecord){ .draining = true, .idle_since = UINT64_MAX, .epoch = UINT64_MAX,
                             .wall_offset = UINT64_MAX, .slots = &slot, .n_slots = 1 };
        fill(rec.boot_id, 32, 'b');
        n = state_format_journal(&rec, &text);
        assert_true(n > 0);
        /* The machine's lines, then the slot's. */
        char *line = strstr(text, "slot ");
        assert_non_null(line);
        assert_non_null(strstr(text, "clock=boottime "));
        assert_non_null(strstr(line, " payload_at="));
        assert_true((size_t) (line - text) <= STATE_MACHINE_LINES_MAX);
        assert_true(strlen(line) <= STATE_SLOT_LINE_MAX);
        /* One commit of n slots fits the need of n slots. */
        assert_true((uint64_t) n <= state_reserve_need(1));
}

static void test_need(void **state) {
        assert_int_equal(state_reserve_need(0), STATE_MACHINE_LINES_MAX);
        assert_int_equal(state_reserve_need(40), 40 * STATE_SLOT_LINE_MAX + STATE_MACHINE_LINES_MAX);
        /* Refills to need and a half, in whole 4 KiB. */
        assert_int_equal(state_reserve_target(4096), 8192);
        assert_int_equal(state_reserve_target(40 * 1024 + 256), 61440 + 4096);
        assert_int_equal(state_reserve_target(0), 0);
}

static void test_covers(void **state) {
        assert_true(state_reserve_covers(100, 200, 100));
        assert_false(state_reserve_covers(100, 200, 101));
        assert_true(state_reserve_covers(100, 100, 0));
        /* A file that grew past what was preallocated (an append past the reserve). */
        assert_false(state_reserve_covers(300, 200, 0));
        assert_false(state_reserve_covers(300, 200, 1));
}

static void test_top_up(void **state) {
        uint64_t need = 10000, target = state_reserve_target(need);

        /* Fresh: nothing preallocated. */
        assert_int_equal(state_reserve_top_up(500, 500, need), target);
        /* Enough: need and a quarter is left. */
        assert_int_equal(state_reserve_top_up(500, 500 + 12500, need), 0);
        assert_int_equal(state_reserve_top_up(500, 500 + 12499, need), target);
        /* After the refill, commits take it down to need and a quarter before the next. */
        uint64_t size = 500, end = size + target, commits = 0;
        while (state_reserve_top_up(size, end, need) == 0) {
                size += 200;
                commits++;
        }
        assert_true(commits >= (target - need - need / 4) / 200);
        assert_true(state_reserve_covers(size, end, need));
        /* Past the end (appends beyond the reserve): a whole target from the end of the file. */
        assert_int_equal(state_reserve_top_up(900, 800, need), target);
}

static void test_retry(void **state) {
        usec_t t = 0;

        t = state_retry_next(t);
        assert_int_equal(t, 1 * USEC_PER_SEC);
        t = state_retry_next(t);
        assert_int_equal(t, 2 * USEC_PER_SEC);
        t = state_retry_next(state_retry_next(t));
        assert_int_equal(t, 8 * USEC_PER_SEC);
        t = state_retry_next(t);
        assert_int_equal(t, 10 * USEC_PER_SEC);
        assert_int_equal(state_retry_next(t), 10 * USEC_PER_SEC);
}

/* The preallocation leaves the file's size, and so what the parser reads, as it was. */
static void test_preallocate(void **state) {
        char dir[] = "/tmp/test-state-reserve.XXXXXX";
        _cleanup_free_ char *text = NULL;
        int dfd, fd, r;
        size_t size;
        struct stat st;

        assert_non_null(mkdtemp(dir));
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        r = state_write_atomic_reserve(dfd, "state", "slotd-state 1\n", 14, 64 * 1024);
        if (r == 0)
                skip(); /* (the filesystem cannot preallocate) */
        assert_int_equal(r, 1);
        fd = openat(dfd, "state", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_size, 14);
        assert_true((uint64_t) st.st_blocks * 512 >= 64 * 1024);
        close(fd);
        fd = openat(dfd, "state", O_WRONLY | O_APPEND | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(state_preallocate(fd, 14, 128 * 1024), 0);
        assert_int_equal(state_append(fd, "draining=1\n", 11), 0);
        close(fd);
        assert_int_equal(state_read(dfd, "state", &text, &size), 0);
        assert_int_equal(size, 25);
        assert_memory_equal(text, "slotd-state 1\ndraining=1\n", 25);
        assert_int_equal(state_probe_write(dfd, ".probe", STATE_PROBE_BYTES), 0);
        assert_int_equal(faccessat(dfd, ".probe", F_OK, 0), -1);
        assert_int_equal(unlinkat(dfd, "state", 0), 0);
        close(dfd);
        assert_int_equal(rmdir(dir), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_line_max),
                cmocka_unit_test(test_need),
                cmocka_unit_test(test_covers),
                cmocka_unit_test(test_top_up),
                cmocka_unit_test(test_retry),
                cmocka_unit_test(test_preallocate),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
