/* SPDX-License-Identifier: MIT */
/* The text exposition format (prom-text.h): HELP and TYPE lines, label escaping, numbers as
 * Prometheus reads them, histograms' cumulative buckets, and the names it refuses. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "macro.h"
#include "prom-text.h"

/* Takes t's text and compares it whole. */
static void assert_text(PromText *t, const char *want) {
        _cleanup_free_ char *text = NULL;
        size_t size;

        assert_int_equal(prom_text_take(t, &text, &size), 0);
        assert_string_equal(text, want);
        assert_int_equal(size, strlen(want));
        assert_null(t->data);
}

static void test_family(void **state) {
        PromText t = {};

        prom_family(&t, "slotd_slots", PROM_GAUGE, "Slots by fleet.");
        prom_family(&t, "a:b_total", PROM_COUNTER, "back\\slash and\nnewline \"quoted\"");
        prom_family(&t, "h", PROM_HISTOGRAM, NULL);
        assert_text(&t, "# HELP slotd_slots Slots by fleet.\n"
                        "# TYPE slotd_slots gauge\n"
                        /* HELP escapes \ and newline, not quotes */
                        "# HELP a:b_total back\\\\slash and\\nnewline \"quoted\"\n"
                        "# TYPE a:b_total counter\n"
                        "# HELP h \n"
                        "# TYPE h histogram\n");
}

static void test_sample_labels(void **state) {
        PromText t = {};

        prom_sample_u64(&t, "x", NULL, 0);
        prom_sample_u64(&t, "x", (const char *[]){ NULL }, UINT64_MAX);
        prom_sample_u64(&t, "x", (const char *[]){ "fleet", "game", "state", "online", NULL }, 3);
        /* every character a label value must escape, and UTF-8 as it is */
        prom_sample_u64(&t, "x", (const char *[]){ "v", "a\\b\"c\nd é", NULL }, 1);
        prom_sample_u64(&t, "x", (const char *[]){ "v", "", NULL }, 2);
        assert_text(&t, "x 0\n"
                        "x 18446744073709551615\n"
                        "x{fleet=\"game\",state=\"online\"} 3\n"
                        "x{v=\"a\\\\b\\\"c\\nd é\"} 1\n"
                        "x{v=\"\"} 2\n");
}

static void test_numbers(void **state) {
        PromText t = {};

        prom_sample(&t, "n", NULL, 0.5);
        prom_sample(&t, "n", NULL, 0.1);
        prom_sample(&t, "n", NULL, 1e-5);
        prom_sample(&t, "n", NULL, 123456789.0);
        prom_sample(&t, "n", NULL, -2);
        prom_sample(&t, "n", NULL, NAN);
        prom_sample(&t, "n", NULL, INFINITY);
        prom_sample(&t, "n", NULL, -INFINITY);
        /* 15 digits do not give this back: 17 are written */
        prom_sample(&t, "n", NULL, 0.1 + 0.2);
        assert_text(&t, "n 0.5\nn 0.1\nn 1e-05\nn 123456789\nn -2\nn NaN\nn +Inf\nn -Inf\n"
                        "n 0.30000000000000004\n");
}

static void test_names(void **state) {
        static const char *const good_metrics[] = { "a", "_a", "a:b", ":a", "slotd_x_total",
                                                    "A9" };
        static const char *const bad_metrics[] = { "", "9a", "a-b", "a b", "a{", "é" };
        static const char *const good_labels[] = { "a", "_a", "fleet", "le", "A_9" };
        static const char *const bad_labels[] = { "", "__name__", "__x", "a:b", "9a", "a-b" };

        for (size_t i = 0; i < ELEMENTSOF(good_metrics); i++)
                assert_true(prom_metric_name_is_valid(good_metrics[i]));
        for (size_t i = 0; i < ELEMENTSOF(bad_metrics); i++)
                assert_false(prom_metric_name_is_valid(bad_metrics[i]));
        assert_false(prom_metric_name_is_valid(NULL));
        for (size_t i = 0; i < ELEMENTSOF(good_labels); i++)
                assert_true(prom_label_name_is_valid(good_labels[i]));
        for (size_t i = 0; i < ELEMENTSOF(bad_labels); i++)
                assert_false(prom_label_name_is_valid(bad_labels[i]));
}

/* The first error sticks and nothing more is written; take() returns it. */
static void test_errors(void **state) {
        static const char *const bad[][3] = {
                { "1x", "fleet", "a" },      /* metric name */
                { "x", "__x", "a" },         /* reserved label name */
                { "x", "a-b", "a" },
        };
        char *text = NULL;
        size_t size = 0;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                PromText t = {};

                prom_sample_u64(&t, "ok", NULL, 1);
                prom_sample_u64(&t, bad[i][0], (const char *[]){ bad[i][1], bad[i][2], NULL }, 1);
                assert_int_equal(t.error, -EINVAL);
                prom_sample_u64(&t, "later", NULL, 1);
                assert_null(strstr(t.data, "later"));
                assert_int_equal(prom_text_take(&t, &text, &size), -EINVAL);
                assert_null(text);
                assert_null(t.data);
        }
        /* a label without its value */
        PromText t = {};
        prom_sample_u64(&t, "x", (const char *[]){ "fleet", NULL, NULL }, 1);
        assert_int_equal(t.error, -EINVAL);
        prom_text_done(&t);
        prom_family(&t, "bad name", PROM_GAUGE, "x");
        assert_int_equal(t.error, -EINVAL);
        prom_text_done(&t);
        prom_family(&t, "x", _PROM_TYPE_MAX, "x");
        assert_int_equal(t.error, -EINVAL);
        prom_text_done(&t);
        /* more labels than a sample may have */
        prom_sample_u64(&t, "x", (const char *[]){ "a", "1", "b", "1", "c", "1", "d", "1", "e",
                                                   "1", "f", "1", "g", "1", "h", "1", "i", "1",
                                                   NULL },
                        1);
        assert_int_equal(t.error, -EINVAL);
        prom_text_done(&t);
}

static void test_empty(void **state) {
        PromText t = {};

        assert_text(&t, "");
}

static const double bounds[] = { 0.001, 0.01, 0.1, 1 };

static void test_histogram(void **state) {
        PromHistogram h;
        PromText t = {};

        assert_int_equal(prom_histogram_init(&h, bounds, ELEMENTSOF(bounds)), 0);
        /* (powers of two: the sum is exact) */
        prom_histogram_observe(&h, 0x1p-11);
        prom_histogram_observe(&h, 0x1p-10);
        prom_histogram_observe(&h, 0.0625);
        prom_histogram_observe(&h, 0.0625);
        prom_histogram_observe(&h, 1);       /* on a bound: in that bucket (le is <=) */
        prom_histogram_observe(&h, 7);       /* above every bound: +Inf only */
        assert_int_equal(h.count, 6);
        prom_histogram(&t, "lat_seconds", (const char *[]){ "door", "dbus", NULL }, &h);
        assert_text(&t, "lat_seconds_bucket{door=\"dbus\",le=\"0.001\"} 2\n"
                        "lat_seconds_bucket{door=\"dbus\",le=\"0.01\"} 2\n"
                        "lat_seconds_bucket{door=\"dbus\",le=\"0.1\"} 4\n"
                        "lat_seconds_bucket{door=\"dbus\",le=\"1\"} 5\n"
                        "lat_seconds_bucket{door=\"dbus\",le=\"+Inf\"} 6\n"
                        "lat_seconds_sum{door=\"dbus\"} 8.12646484375\n"
                        "lat_seconds_count{door=\"dbus\"} 6\n");
        /* no labels, nothing observed */
        assert_int_equal(prom_histogram_init(&h, bounds, 2), 0);
        prom_histogram(&t, "h", NULL, &h);
        assert_text(&t, "h_bucket{le=\"0.001\"} 0\nh_bucket{le=\"0.01\"} 0\n"
                        "h_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
}

static void test_histogram_invalid(void **state) {
        static const double descending[] = { 1, 0.5 }, equal[] = { 1, 1 },
                            infinite[] = { 1, INFINITY }, many[PROM_BUCKETS_MAX + 1] = { 0 };
        PromHistogram h;
        PromText t = {};

        assert_int_equal(prom_histogram_init(&h, descending, 2), -EINVAL);
        assert_int_equal(prom_histogram_init(&h, equal, 2), -EINVAL);
        assert_int_equal(prom_histogram_init(&h, infinite, 2), -EINVAL);
        assert_int_equal(prom_histogram_init(&h, many, ELEMENTSOF(many)), -EINVAL);
        assert_int_equal(prom_histogram_init(&h, bounds, 0), 0);
        /* "le" is the histogram's own */
        prom_histogram(&t, "h", (const char *[]){ "le", "1", NULL }, &h);
        assert_int_equal(t.error, -EINVAL);
        prom_text_done(&t);
        prom_histogram(&t, "bad-name", NULL, &h);
        assert_int_equal(t.error, -EINVAL);
        prom_text_done(&t);
}

/* A text far larger than the first buffer grows intact. */
static void test_growth(void **state) {
        _cleanup_free_ char *text = NULL;
        PromText t = {};
        size_t size, lines = 0;

        for (unsigned i = 0; i < 20000; i++)
                prom_sample_u64(&t, "slotd_grow_total", (const char *[]){ "i", "0123456789", NULL },
                                i);
        assert_int_equal(prom_text_take(&t, &text, &size), 0);
        for (size_t i = 0; i < size; i++)
                lines += text[i] == '\n';
        assert_int_equal(lines, 20000);
        assert_int_equal(strlen(text), size);
        assert_non_null(strstr(text, "slotd_grow_total{i=\"0123456789\"} 19999\n"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_family),
                cmocka_unit_test(test_sample_labels),
                cmocka_unit_test(test_numbers),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_empty),
                cmocka_unit_test(test_histogram),
                cmocka_unit_test(test_histogram_invalid),
                cmocka_unit_test(test_growth),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
