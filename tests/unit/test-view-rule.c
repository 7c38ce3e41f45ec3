/* SPDX-License-Identifier: MIT */
/* view-rule.h: the fleet view's rule of order. A toy view keeps keys as allocator-cache.c
 * does (an entry, its mod_revision and generation; made, seen, dropped as the rule says) and
 * is fed a range, the watch's events and transactions' answers in each order: whatever the
 * order, once the watch has caught up the view is etcd's state, no key missing, none extra
 * (issue 25: a claim put back by an answer that came after the watch deleted it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "macro.h"
#include "view-rule.h"

#define KEYS 4

typedef struct Toy {
        ViewClock clock;
        bool present[KEYS];
        ViewStamp stamp[KEYS];
} Toy;

/* What allocator-cache.c's *_put do. */
static void toy_put(Toy *t, ViewFrom from, int64_t answer_revision, int key, int64_t mod) {
        ViewAction act = view_put(&t->clock, from, answer_revision,
                                  t->present[key] ? &t->stamp[key] : NULL, mod);

        assert_true(act != VIEW_DROP);
        if (act == VIEW_SEEN)
                view_stamp_seen(&t->clock, from, &t->stamp[key]);
        else if (act == VIEW_SET) {
                if (!t->present[key])
                        t->stamp[key] = (ViewStamp){}; /* new0() */
                t->present[key] = true;
                view_stamp_set(&t->clock, from, &t->stamp[key], mod);
        }
}

/* What apply_delete does. */
static void toy_delete(Toy *t, ViewFrom from, int64_t revision, int key) {
        ViewAction act = view_delete(&t->clock, from, revision,
                                     t->present[key] ? &t->stamp[key] : NULL);

        assert_true(act == VIEW_IGNORE || act == VIEW_DROP);
        if (act == VIEW_DROP)
                t->present[key] = false;
}

static void watch_put(Toy *t, int key, int64_t revision) {
        toy_put(t, VIEW_FROM_WATCH, 0, key, revision);
        view_watch_advanced(&t->clock, revision);
}

static void watch_delete(Toy *t, int key, int64_t revision) {
        toy_delete(t, VIEW_FROM_WATCH, revision, key);
        view_watch_advanced(&t->clock, revision);
}

/* A range read at revision: mods[k] the key's mod_revision then, 0 when absent. What
 * on_range and sweep do. */
static void toy_range(Toy *t, int64_t revision, const int64_t mods[KEYS]) {
        view_range_read(&t->clock, revision);
        for (int k = 0; k < KEYS; k++)
                if (mods[k] > 0)
                        toy_put(t, VIEW_FROM_RANGE, 0, k, mods[k]);
        for (int k = 0; k < KEYS; k++)
                if (t->present[k] && view_swept(&t->clock, &t->stamp[k]))
                        t->present[k] = false;
}

/* A view read at revision 5 with nothing, watching. */
static Toy toy_new(void) {
        Toy t = {};

        view_range_asked(&t.clock);
        toy_range(&t, 5, (const int64_t[KEYS]){});
        return t;
}

/* ---- a claim made at 10 by this replica's transaction, deleted at 12 by another ---- */

static void test_answer_then_watch(void **state) {
        Toy t = toy_new();

        toy_put(&t, VIEW_FROM_ANSWER, 10, 0, 10);
        assert_true(t.present[0]);
        watch_put(&t, 0, 10);
        assert_true(t.present[0]);
        assert_int_equal(t.stamp[0].mod_revision, 10);
        watch_delete(&t, 0, 12);
        assert_false(t.present[0]);
}

static void test_watch_put_then_answer(void **state) {
        Toy t = toy_new();

        watch_put(&t, 0, 10);
        toy_put(&t, VIEW_FROM_ANSWER, 10, 0, 10);
        assert_true(t.present[0]);
        watch_delete(&t, 0, 12);
        assert_false(t.present[0]);
}

/* The report's order: the watch delivered the claim and its deletion before the answer. */
static void test_watch_delete_then_late_answer(void **state) {
        Toy t = toy_new();

        watch_put(&t, 0, 10);
        watch_delete(&t, 0, 12);
        toy_put(&t, VIEW_FROM_ANSWER, 10, 0, 10);
        assert_false(t.present[0]);
        /* A failure branch that read it at 11 (made at 10): as late. */
        toy_put(&t, VIEW_FROM_ANSWER, 11, 0, 10);
        assert_false(t.present[0]);
}

/* A failure branch read the claim (made at 10) at 11, before the watch told of it. */
static void test_failure_read_before_watch(void **state) {
        Toy t = toy_new();

        toy_put(&t, VIEW_FROM_ANSWER, 11, 0, 10);
        assert_true(t.present[0]);
        watch_put(&t, 0, 10);
        assert_true(t.present[0]);
        watch_delete(&t, 0, 12);
        assert_false(t.present[0]);
}

/* The key deleted (8) and made again (10) before the watch told of either: the answer's
 * newer entry survives the watch's older events, then the watch tells of it. */
static void test_answer_newer_than_old_events(void **state) {
        Toy t = toy_new();

        watch_put(&t, 0, 6);
        toy_put(&t, VIEW_FROM_ANSWER, 10, 0, 10);
        watch_delete(&t, 0, 8);
        assert_true(t.present[0]);
        assert_int_equal(t.stamp[0].mod_revision, 10);
        watch_put(&t, 0, 10);
        assert_true(t.present[0]);
        watch_delete(&t, 0, 15);
        assert_false(t.present[0]);
}

/* ---- the watch lost, the view read anew ---- */

/* The answer comes while the range is read; the claim is deleted before the range's
 * revision: the range does not show it, and it goes. */
static void test_answer_during_resync_deleted(void **state) {
        Toy t = toy_new();

        view_range_asked(&t.clock); /* the watch broke at 5 */
        toy_put(&t, VIEW_FROM_ANSWER, 10, 0, 10);
        assert_true(t.present[0]);
        toy_range(&t, 13, (const int64_t[KEYS]){}); /* deleted at 12 */
        assert_false(t.present[0]);
}

/* The answer is newer than the range: it stays, and its watch tells of it. */
static void test_answer_during_resync_newer(void **state) {
        Toy t = toy_new();

        view_range_asked(&t.clock);
        toy_put(&t, VIEW_FROM_ANSWER, 12, 0, 12);
        toy_range(&t, 11, (const int64_t[KEYS]){});
        assert_true(t.present[0]);
        watch_put(&t, 0, 12);
        assert_true(t.present[0]);
        watch_delete(&t, 0, 14);
        assert_false(t.present[0]);
}

/* A key the old watch had, gone from the new range; one still there, and one made. */
static void test_resync_sweeps(void **state) {
        Toy t = toy_new();

        watch_put(&t, 0, 6);
        watch_put(&t, 1, 7);
        view_range_asked(&t.clock);
        toy_range(&t, 20, (const int64_t[KEYS]){ 0, 7, 18, 0 });
        assert_false(t.present[0]);
        assert_true(t.present[1]);
        assert_true(t.present[2]);
        assert_int_equal(t.stamp[2].mod_revision, 18);
        /* An answer older than the range tells nothing. */
        toy_put(&t, VIEW_FROM_ANSWER, 19, 0, 6);
        assert_false(t.present[0]);
}

/* ---- absent, as an answer read it (a slot document) ---- */

static void test_answer_absent(void **state) {
        Toy t = toy_new();

        watch_put(&t, 0, 6);
        toy_delete(&t, VIEW_FROM_ANSWER, 9, 0); /* deleted at 8, the watch not there yet */
        assert_false(t.present[0]);
        watch_put(&t, 0, 7); /* an older change: made again a while */
        watch_delete(&t, 0, 8);
        assert_false(t.present[0]);

        /* Absent at 9 but made again at 10, which the watch told first: it stays. */
        watch_put(&t, 0, 10);
        toy_delete(&t, VIEW_FROM_ANSWER, 9, 0);
        assert_true(t.present[0]);
}

/* ---- every order: random histories, deterministic ---- */

typedef struct Op {
        int key;
        bool put;
} Op;

#define REVS 40
#define FIRST 6 /* revisions FIRST.. are the history's; toy_new read 5 */

static uint64_t rng;
static unsigned next_rand(unsigned n) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return (unsigned) (rng % n);
}

/* The key's mod_revision at revision (0: absent). */
static int64_t mod_at(const Op *ops, int key, int64_t revision) {
        int64_t mod = 0;

        for (int64_t r = FIRST; r <= revision; r++)
                if (ops[r].key == key)
                        mod = ops[r].put ? r : 0;
        return mod;
}

typedef struct Answer {
        int64_t revision;
        int key;
        int64_t mod; /* 0: read absent */
} Answer;

static void deliver_answer(Toy *t, const Answer *ans) {
        if (ans->mod > 0)
                toy_put(t, VIEW_FROM_ANSWER, ans->revision, ans->key, ans->mod);
        else
                toy_delete(t, VIEW_FROM_ANSWER, ans->revision, ans->key);
}

static void deliver_event(Toy *t, const Op *ops, int64_t r) {
        if (ops[r].put)
                watch_put(t, ops[r].key, r);
        else
                watch_delete(t, ops[r].key, r);
}

/* One history: etcd commits a revision at a time; the watch lags behind and breaks now and
 * then (the view read anew at the revision etcd is at when the range is served); answers
 * (what a transaction wrote, or read of a key) come whenever after their revision. */
static void run_history(uint64_t seed) {
        Op ops[REVS + 1] = {};
        Answer answers[4 * REVS];
        size_t n_answers = 0;
        Toy t = toy_new();
        int64_t now = FIRST - 1, watched = FIRST - 1;
        bool range_asked = false;

        rng = seed;
        for (int64_t r = FIRST; r <= REVS; r++)
                ops[r] = (Op){ .key = (int) next_rand(KEYS), .put = next_rand(3) != 0 };
        while (now < REVS || watched < REVS || n_answers > 0 || range_asked) {
                unsigned what = next_rand(12);

                if (what < 3 && now < REVS) {
                        now++;
                        if (ops[now].put && next_rand(2))
                                answers[n_answers++] = (Answer){ now, ops[now].key, now };
                        if (next_rand(3) == 0) {
                                int k = (int) next_rand(KEYS);
                                answers[n_answers++] = (Answer){ now, k, mod_at(ops, k, now) };
                        }
                } else if (what < 7 && !range_asked && watched < now) {
                        deliver_event(&t, ops, ++watched);
                } else if (what < 10 && n_answers > 0) {
                        size_t i = next_rand((unsigned) n_answers);

                        deliver_answer(&t, &answers[i]);
                        answers[i] = answers[--n_answers];
                } else if (what == 10 && !range_asked) {
                        view_range_asked(&t.clock); /* the watch broke */
                        range_asked = true;
                } else if (what == 11 && range_asked) {
                        int64_t mods[KEYS];

                        for (int k = 0; k < KEYS; k++)
                                mods[k] = mod_at(ops, k, now);
                        toy_range(&t, now, mods);
                        watched = now;
                        range_asked = false;
                }
        }
        for (int k = 0; k < KEYS; k++) {
                int64_t want = mod_at(ops, k, REVS);

                if (t.present[k] != (want > 0) || (want > 0 && t.stamp[k].mod_revision != want))
                        fail_msg("seed %" PRIu64 ": key %d is %s (mod %" PRId64 "), etcd has "
                                 "mod %" PRId64, seed, k, t.present[k] ? "present" : "absent",
                                 t.stamp[k].mod_revision, want);
        }
}

static void test_every_order(void **state) {
        for (uint64_t seed = 1; seed <= 20000; seed++)
                run_history(seed * 0x9e3779b97f4a7c15ULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_answer_then_watch),
                cmocka_unit_test(test_watch_put_then_answer),
                cmocka_unit_test(test_watch_delete_then_late_answer),
                cmocka_unit_test(test_failure_read_before_watch),
                cmocka_unit_test(test_answer_newer_than_old_events),
                cmocka_unit_test(test_answer_during_resync_deleted),
                cmocka_unit_test(test_answer_during_resync_newer),
                cmocka_unit_test(test_resync_sweeps),
                cmocka_unit_test(test_answer_absent),
                cmocka_unit_test(test_every_order),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
