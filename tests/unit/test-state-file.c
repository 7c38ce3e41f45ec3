/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "macro.h"
#include "state-file.h"

static void test_round_trip(void **state) {
        SlotRecord slots[2] = {
                { .id = 3, .fleet = "shooter", .allocation_uuid = "u-1", .build_configuration = "b:2",
                  .hold_until = 0, .failure = "pre-recovery", .restarts = 4, .last_exit_code = 0,
                  .last_exit_signal = 11, .keeper = 1234, .keeper_restarts = 3 },
                { .id = 7, .fleet = "shooter", .reservation_uuid = "r-9", .reserved_until = 1234567,
                  .hold_until = 99, .failed = true, .last_exit_code = -1 },
        };
        StateRecord in = { .draining = true, .idle_since = 42, .slots = slots, .n_slots = 2 }, out;
        _cleanup_free_ char *text = NULL;
        unsigned skipped = 99;
        int n = state_format(&in, &text);

        assert_true(n > 0);
        assert_int_equal(state_parse(text, (size_t) n, &out, &skipped), 0);
        assert_int_equal(skipped, 0);
        assert_true(out.draining);
        assert_int_equal(out.idle_since, 42);
        assert_int_equal(out.n_slots, 2);
        assert_int_equal(out.slots[0].id, 3);
        assert_string_equal(out.slots[0].fleet, "shooter");
        assert_string_equal(out.slots[0].allocation_uuid, "u-1");
        assert_string_equal(out.slots[0].build_configuration, "b:2");
        assert_null(out.slots[0].reservation_uuid);
        assert_string_equal(out.slots[0].failure, "pre-recovery");
        assert_int_equal(out.slots[0].restarts, 4);
        assert_int_equal(out.slots[0].last_exit_signal, 11);
        assert_false(out.slots[0].failed);
        assert_int_equal(out.slots[0].keeper, 1234);
        assert_int_equal(out.slots[0].keeper_restarts, 3);
        assert_int_equal(out.slots[1].id, 7);
        assert_int_equal(out.slots[1].keeper_restarts, 0);
        assert_null(out.slots[1].allocation_uuid);
        assert_string_equal(out.slots[1].reservation_uuid, "r-9");
        assert_int_equal(out.slots[1].reserved_until, 1234567);
        assert_int_equal(out.slots[1].hold_until, 99);
        assert_true(out.slots[1].failed);
        assert_int_equal(out.slots[1].last_exit_code, -1);
        state_record_done(&out);
}

static void test_hostile(void **state) {
        StateRecord out;
        unsigned skipped;
        const char *cases[] = {
                "slotd-state 1\nslot id=1\n",                         /* no fleet */
                "slotd-state 1\nslot fleet=a\n",                      /* no id */
                "slotd-state 1\nslot id=99999999999 fleet=a\n",       /* id too big */
                "slotd-state 1\nslot id=1 fleet=a restarts=1x\n",     /* bad number */
                "slotd-state 1\nslot id=1 fleet=a exit_code=99999999999999999999999\n",
                "slotd-state 1\nslot id=1 fleet= \n",                 /* empty value */
                "slotd-state 1\nslot id=1 fleet=a uuid\n",            /* no '=' */
                "slotd-state 1\nsomething else\n",
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                assert_int_equal(state_parse(cases[i], strlen(cases[i]), &out, &skipped), 0);
                assert_int_equal(out.n_slots, 0);
                assert_int_equal(skipped, 1);
                state_record_done(&out);
        }
        assert_int_equal(state_parse("", 0, &out, &skipped), -EBADMSG);
        assert_int_equal(state_parse("slotd-state 2\n", 14, &out, &skipped), -EBADMSG);

        /* A NUL inside a line is skipped, and so is a last line without its newline (an
         * append cut short by a crash). */
        const char nul[] = "slotd-state 1\nslot id=1 fleet=a\0x\nslot id=3 fleet=c\nslot id=2 fleet=b";
        assert_int_equal(state_parse(nul, sizeof(nul) - 1, &out, &skipped), 0);
        assert_int_equal(skipped, 2);
        assert_int_equal(out.n_slots, 1);
        assert_int_equal(out.slots[0].id, 3);
        state_record_done(&out);

        /* Fields without their owner are dropped, as the writer drops them: what parses
         * formats back to the same text. */
        const char orphan[] = "slotd-state 1\nslot id=1 fleet=a reserved_until=5 ready=1 started=9\n";
        assert_int_equal(state_parse(orphan, sizeof(orphan) - 1, &out, &skipped), 0);
        assert_int_equal(out.n_slots, 1);
        assert_int_equal(out.slots[0].reserved_until, 0);
        assert_false(out.slots[0].ready);
        assert_int_equal(out.slots[0].started_at, 0);
        state_record_done(&out);

        /* Unknown keys are ignored: a newer slotd's file still reads. */
        const char newer[] = "slotd-state 1\nslot id=5 fleet=a future=1 uuid=u\n";
        assert_int_equal(state_parse(newer, sizeof(newer) - 1, &out, &skipped), 0);
        assert_int_equal(out.n_slots, 1);
        assert_string_equal(out.slots[0].allocation_uuid, "u");
        state_record_done(&out);
}

static void test_write_atomic(void **state) {
        char dir[] = "/tmp/test-state-XXXXXX", path[256], tmp[256];
        _cleanup_close_ int dfd = -EBADF;
        _cleanup_free_ char *a = NULL, *b = NULL;
        size_t size;

        assert_non_null(mkdtemp(dir));
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_int_equal(state_read(dfd, "state", &a, &size), -ENOENT);
        assert_int_equal(state_write_atomic(dfd, "state", "one\n", 4), 0);
        assert_int_equal(state_read(dfd, "state", &a, &size), 0);
        assert_int_equal(size, 4);
        assert_string_equal(a, "one\n");
        assert_int_equal(state_write_atomic(dfd, "state", "two", 3), 0);
        assert_int_equal(state_read(dfd, "state", &b, &size), 0);
        assert_string_equal(b, "two");
        /* No temp file is left behind. */
        snprintf(tmp, sizeof(tmp), "%s/.state.tmp", dir);
        assert_int_equal(access(tmp, F_OK), -1);
        snprintf(path, sizeof(path), "%s/state", dir);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(rmdir(dir), 0);
}

/* A snapshot and the journal after it: the last line of a slot is its record, the last
 * machine lines count, and a torn last append is dropped. */
static void test_journal(void **state) {
        SlotRecord slots[3] = {
                { .id = 5, .fleet = (char *) "a", .allocation_uuid = (char *) "u-1" },
                { .id = 1, .fleet = (char *) "a", .restarts = 2 },
                { .id = 9, .fleet = (char *) "b" },
        };
        StateRecord snap = { .idle_since = 5, .slots = slots, .n_slots = 3 }, out;
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *text = NULL;
        unsigned skipped = 9;
        int na, nb, nc;

        na = state_format(&snap, &a);
        assert_true(na > 0);
        /* Slot 5 deallocated, then slot 1 restarted, the machine draining meanwhile. */
        slots[0].allocation_uuid = NULL;
        nb = state_format_journal(&(StateRecord){ .draining = true, .slots = slots, .n_slots = 1 }, &b);
        assert_true(nb > 0);
        assert_null(strstr(b, "slotd-state"));
        slots[1].restarts = 3;
        nc = state_format_journal(&(StateRecord){ .draining = true, .idle_since = 77,
                                                  .slots = slots + 1, .n_slots = 1 }, &c);
        assert_true(nc > 0);
        assert_true(asprintf(&text, "%s%s%sslot id=9 fleet=b uuid=torn", a, b, c) > 0);

        assert_int_equal(state_parse(text, strlen(text), &out, &skipped), 0);
        assert_int_equal(skipped, 1);
        assert_true(out.draining);
        assert_int_equal(out.idle_since, 77);
        assert_int_equal(out.n_slots, 3);
        assert_int_equal(out.slots[0].id, 1);
        assert_int_equal(out.slots[0].restarts, 3);
        assert_int_equal(out.slots[1].id, 5);
        assert_null(out.slots[1].allocation_uuid);
        assert_int_equal(out.slots[2].id, 9);
        assert_null(out.slots[2].allocation_uuid);
        state_record_done(&out);
}

/* The cached formatter writes what the plain one does, through changes of every field,
 * a slot more and a slot less. */
static void test_format_cached(void **state) {
        SlotRecord slots[3] = {
                { .id = 0, .fleet = (char *) "a", .restarts = 1 },
                { .id = 1, .fleet = (char *) "a", .allocation_uuid = (char *) "u-1",
                  .keeper = 42, .ready = true, .started_at = 7 },
                { .id = 2, .fleet = (char *) "b", .failure = (char *) "crashed", .failed = true },
        };
        StateRecord r = { .idle_since = 5, .slots = slots, .n_slots = 2 };
        StateCache cache = {};
        char uuid[] = "u-2";

        for (int step = 0; step < 8; step++) {
                _cleanup_free_ char *plain = NULL, *cached = NULL;
                int n = state_format(&r, &plain), m = state_format_cached(&cache, &r, &cached);

                assert_true(n > 0);
                assert_int_equal(n, m);
                assert_string_equal(plain, cached);
                switch (step) {
                case 0: slots[0].allocation_uuid = uuid; break;
                case 1: uuid[2] = '3'; break;                 /* same pointer, new text */
                case 2: r.n_slots = 3; break;
                case 3: slots[1].keeper_restarts = 2; slots[2].hold_until = 99; break;
                case 4: slots[1].keeper = 0; r.draining = true; break;
                case 5: r.n_slots = 1; break;
                case 6: slots[0].allocation_uuid = NULL; slots[0].last_exit_signal = 9; break;
                }
        }
        state_cache_done(&cache);
}

/* The clock line and payload_at come back as written; what has no owner is dropped. */
static void test_clock_round_trip(void **state) {
        SlotRecord slots[2] = {
                { .id = 0, .fleet = (char *) "a", .allocation_uuid = (char *) "u", .payload_at = 7,
                  .hold_until = 9 },
                { .id = 1, .fleet = (char *) "a", .payload_at = 8 },
        };
        StateRecord in = { .idle_since = 5, .wall_offset = 1700000000000000, .slots = slots,
                           .n_slots = 2 }, out;
        _cleanup_free_ char *text = NULL;
        unsigned skipped = 1;
        int n;

        strcpy(in.boot_id, "0123456789abcdef0123456789abcdef");
        n = state_format(&in, &text);
        assert_true(n > 0);
        assert_non_null(strstr(text, "\nclock=boottime 0123456789abcdef0123456789abcdef "
                                     "1700000000000000\n"));
        assert_non_null(strstr(text, " payload_at=7"));
        assert_null(strstr(text, " payload_at=8"));
        assert_int_equal(state_parse(text, (size_t) n, &out, &skipped), 0);
        assert_int_equal(skipped, 0);
        assert_string_equal(out.boot_id, in.boot_id);
        assert_int_equal(out.wall_offset, in.wall_offset);
        assert_int_equal(out.slots[0].payload_at, 7);
        assert_int_equal(out.slots[1].payload_at, 0);
        state_record_done(&out);

        /* A file without the line is an older slotd's: no boot, real time. */
        in.boot_id[0] = '\0';
        text = mfree(text);
        n = state_format(&in, &text);
        assert_null(strstr(text, "clock="));
        assert_int_equal(state_parse(text, (size_t) n, &out, &skipped), 0);
        assert_string_equal(out.boot_id, "");
        state_record_done(&out);

        /* Clock lines that do not parse are skipped; the file is then taken as real time. */
        const char *bad[] = {
                "slotd-state 1\nclock=boottime 0123456789abcdef0123456789abcde 5\n",   /* 31 */
                "slotd-state 1\nclock=boottime 0123456789ABCDEF0123456789abcdef 5\n",
                "slotd-state 1\nclock=boottime 0123456789abcdef0123456789abcdef\n",
                "slotd-state 1\nclock=boottime 0123456789abcdef0123456789abcdef x\n",
                "slotd-state 1\nclock=monotonic 0123456789abcdef0123456789abcdef 5\n",
                "slotd-state 1\nclock=boottime 0123456789abcdef0123456789abcdef 5 6\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(state_parse(bad[i], strlen(bad[i]), &out, &skipped), 0);
                assert_int_equal(skipped, 1);
                assert_string_equal(out.boot_id, "");
                state_record_done(&out);
        }
}

#define BOOT_A "0123456789abcdef0123456789abcdef"
#define BOOT_B "fedcba9876543210fedcba9876543210"

/* Every time of a record moves to this boot's CLOCK_BOOTTIME: not at all within the same
 * boot, through the wall clock across a reboot, from real time for an older slotd's file. */
static void test_clock_rebase(void **state) {
        const usec_t s = USEC_PER_SEC, wall_now = 1700000000 * s;
        /* Real time = boottime + offset. Boot A started at wall_now − 1000 s, boot B (this
         * one) at wall_now − 100 s. */
        const usec_t off_a = wall_now - 1000 * s, off_b = wall_now - 100 * s;
        const char legacy[] =
                "slotd-state 1\ndraining=0\nidle_since=1699999950000000\n"
                "slot id=1 fleet=a uuid=u payload_at=1699999990000000 reserved=r "
                "reserved_until=1700000060000000 hold_until=1700000030000000 keeper=5 ready=1 "
                "started=1699999000000000 failed=0 restarts=0 exit_code=0 exit_signal=0\n";
        StateRecord r;
        unsigned skipped;

        /* An older slotd's file: real time − this boot's offset; before the boot → 1. */
        assert_int_equal(state_parse(legacy, sizeof(legacy) - 1, &r, &skipped), 0);
        assert_int_equal(skipped, 0);
        assert_int_equal(state_record_rebase(&r, BOOT_B, off_b), STATE_CLOCK_REALTIME);
        assert_int_equal(r.idle_since, 50 * s);
        assert_int_equal(r.slots[0].payload_at, 90 * s);
        assert_int_equal(r.slots[0].reserved_until, 160 * s);
        assert_int_equal(r.slots[0].hold_until, 130 * s);
        assert_int_equal(r.slots[0].started_at, 1);
        state_record_done(&r);

        /* The same boot: nothing moves, whatever the wall clock did. */
        SlotRecord slot = { .id = 1, .fleet = (char *) "a", .hold_until = 1030 * s,
                            .reserved_until = 1060 * s, .started_at = 10 * s };
        r = (StateRecord){ .idle_since = 950 * s, .wall_offset = off_a, .slots = &slot,
                           .n_slots = 1 };
        strcpy(r.boot_id, BOOT_A);
        assert_int_equal(state_record_rebase(&r, BOOT_A, off_a + 3600 * s), STATE_CLOCK_SAME_BOOT);
        assert_int_equal(r.idle_since, 950 * s);
        assert_int_equal(slot.hold_until, 1030 * s);

        /* A reboot: boot A's times through the wall clock into boot B's. The hold and the
         * reservation keep their wall-clock deadlines (30 s and 60 s from now); the machine
         * idle since 50 s ago counts from its boot's start; the start of the old server was
         * before this boot. */
        assert_int_equal(state_record_rebase(&r, BOOT_B, off_b), STATE_CLOCK_OTHER_BOOT);
        assert_int_equal(slot.hold_until, 130 * s);
        assert_int_equal(slot.reserved_until, 160 * s);
        assert_int_equal(r.idle_since, 50 * s);
        assert_int_equal(slot.started_at, 1);

        /* None stays none; infinity stays. */
        assert_int_equal(boottime_rebase(0, off_a, off_b), 0);
        assert_int_equal(boottime_rebase(USEC_INFINITY, off_a, off_b), USEC_INFINITY);
        assert_int_equal(boottime_rebase(5, 0, 10), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_clock_round_trip),
                cmocka_unit_test(test_clock_rebase),
                cmocka_unit_test(test_hostile),
                cmocka_unit_test(test_journal),
                cmocka_unit_test(test_write_atomic),
                cmocka_unit_test(test_format_cached),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
