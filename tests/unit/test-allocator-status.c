/* SPDX-License-Identifier: MIT */
/* allocator-status.h: the fleet status page's contents and its escaping of what etcd holds;
 * allocator-metrics.h's ring of per-second counts (its allocation rate). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "allocator-metrics.h"
#include "allocator-request.h"
#include "allocator-status.h"
#include "macro.h"

/* 2026-11-24T10:00:00.000Z */
#define MADE (1795514400ULL * USEC_PER_SEC)

static size_t count_of(const char *text, const char *needle) {
        size_t n = 0, len = strlen(needle);

        for (size_t i = 0; text[i]; i++)
                n += strncmp(text + i, needle, len) == 0;
        return n;
}

static char *page(const StatusPage *p) {
        char *text = NULL;

        assert_int_equal(status_page_format(p, &text), 0);
        assert_non_null(text);
        return text;
}

static void test_html_escape(void **state) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);

        assert_non_null(f);
        html_escape_to(f, "<script>alert('x')</script> & \"q\"");
        html_escape_to(f, NULL);
        assert_int_equal(fclose(f), 0);
        assert_string_equal(text, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; "
                                  "&quot;q&quot;");
        free(text);
}

/* Two fleets, two regions, three machines: counted by fleet, region and machine. */
static void test_contents(void **state) {
        char *faults[] = { (char *) "slots_dir", NULL };
        StatusMachine machines[] = {
                { .machine_id = "m1", .machine_number = 7 },
                { .machine_id = "m2", .faults = faults },
                { .machine_id = "m3", .draining = true },
        };
        StatusSlot slots[] = {
                { "arena", "eu", "m1", 1, "allocated", false, &machines[0] },
                { "arena", "eu", "m1", 2, "available", true, &machines[0] },
                { "arena", "us", "m2", 1, "allocated", false, &machines[1] },
                { "duel", "eu", "m3", 1, "online", false, &machines[2] },
                { "duel", "eu", "m3", 2, "weird", false, &machines[2] },
                { "duel", "eu", "m4", 1, "held", false, NULL },
        };
        StatusPage p = { .made = MADE, .view_ready = true, .revision_slots = 42,
                         .revision_machines = 17, .revision_hosts = 40, .slots = slots,
                         .n_slots = ELEMENTSOF(slots), .machines = machines,
                         .n_machines = ELEMENTSOF(machines), .n_claims = 1,
                         .allocations_last_minute = 5, .allocations_total = 9,
                         .posts_total = 11, .no_capacity_total = 2 };
        char *text = page(&p);

        assert_true(strncmp(text, "<!DOCTYPE html>\n", 16) == 0);
        assert_non_null(strstr(text, "<meta charset=\"utf-8\">"));
        assert_non_null(strstr(text, "<time id=\"made\" datetime=\"2026-11-24T10:00:00.000Z\">"));
        assert_non_null(strstr(text, "<td id=\"view-ready\">yes</td>"));
        assert_non_null(strstr(text, "<td id=\"revisions\">42, 17, 40</td>"));
        assert_non_null(strstr(text, "<td id=\"machines\" class=\"n\">3</td>"));
        assert_non_null(strstr(text, "<td id=\"slots\" class=\"n\">6</td>"));
        assert_non_null(strstr(text, "id=\"allocations-last-minute\" class=\"n\">5</td>"));
        assert_non_null(strstr(text, "id=\"allocations-total\" class=\"n\">9</td>"));
        assert_non_null(strstr(text, "id=\"posts-total\" class=\"n\">11</td>"));
        assert_non_null(strstr(text, "<section class=\"fleet\" data-fleet=\"arena\" "
                                     "data-machines=\"2\" data-slots=\"3\" data-available=\"1\" "
                                     "data-online=\"0\" data-held=\"0\" data-reserved=\"0\" "
                                     "data-allocated=\"2\">"));
        assert_non_null(strstr(text, "<section class=\"fleet\" data-fleet=\"duel\" "
                                     "data-machines=\"2\" data-slots=\"3\" data-available=\"0\" "
                                     "data-online=\"1\" data-held=\"1\" data-reserved=\"0\" "
                                     "data-allocated=\"0\">"));
        assert_int_equal(count_of(text, "<section class=\"fleet\""), 2);
        assert_int_equal(count_of(text, "<table class=\"region\""), 3);
        assert_int_equal(count_of(text, "<tr class=\"machine\""), 4);
        /* m1's row: 1 available, 1 allocated, 1 claimed, number 7; its strip of 2 cells */
        assert_non_null(strstr(text, "<tr class=\"machine\" data-machine=\"m1\"><td class=\"id\">"
                                     "m1 <small>(7)</small></td><td class=\"n n-available\">1"
                                     "</td><td class=\"n n-online\">0</td><td class=\"n n-held\">0"
                                     "</td><td class=\"n n-reserved\">0</td><td class=\"n "
                                     "n-allocated\">1</td><td class=\"n n-other\">0</td><td "
                                     "class=\"n n-claimed\">1</td>"));
        assert_non_null(strstr(text, "<span class=\"s st-available claimed\" title=\"slot 2: "
                                     "available, claimed\"></span>"));
        assert_non_null(strstr(text, "<span class=\"s st-other\" title=\"slot 2: weird\">"));
        assert_int_equal(count_of(text, "<span class=\"s "), 6);
        /* faults: m2's, m3 draining, m4 without a document */
        assert_int_equal(count_of(text, "<tr class=\"faulty\""), 2);
        assert_non_null(strstr(text, "<tr class=\"faulty\" data-machine=\"m2\"><td>m2</td><td "
                                     "class=\"faults\"><span class=\"fault\">slots_dir</span>"));
        assert_non_null(strstr(text, "<span class=\"fault draining\">draining</span>"));
        assert_non_null(strstr(text, "no machine document"));
        /* nothing fetched: no URL, no script */
        assert_null(strstr(text, "http"));
        assert_null(strstr(text, "<script"));
        assert_null(strstr(text, "src="));
        assert_true(strlen(text) > 0 && strcmp(text + strlen(text) - 8, "</html>\n") == 0);
        free(text);
}

/* Every string from etcd is escaped, in text and attributes alike. */
static void test_escaped(void **state) {
        char *faults[] = { (char *) "<img src=x onerror=alert(1)>", NULL };
        StatusMachine machines[] = { { .machine_id = "m\"1", .faults = faults } };
        StatusSlot slots[] = {
                { "<b>f</b>", "r'1", "m\"1", 1, "<i>", false, &machines[0] },
        };
        StatusPage p = { .made = MADE, .slots = slots, .n_slots = 1, .machines = machines,
                         .n_machines = 1 };
        char *text = page(&p);

        assert_null(strstr(text, "<b>"));
        assert_null(strstr(text, "<i>"));
        assert_null(strstr(text, "<img"));
        assert_null(strstr(text, "m\"1"));
        assert_null(strstr(text, "r'1"));
        assert_non_null(strstr(text, "data-fleet=\"&lt;b&gt;f&lt;/b&gt;\""));
        assert_non_null(strstr(text, "data-region=\"r&#39;1\""));
        assert_non_null(strstr(text, "data-machine=\"m&quot;1\""));
        assert_non_null(strstr(text, "&lt;img src=x onerror=alert(1)&gt;"));
        assert_non_null(strstr(text, "title=\"slot 1: &lt;i&gt;\""));
        /* the view not ready is said */
        assert_non_null(strstr(text, "id=\"not-ready\""));
        assert_non_null(strstr(text, "<td id=\"view-ready\">no</td>"));
        free(text);
}

static void test_empty(void **state) {
        StatusPage p = { .made = MADE, .view_ready = true };
        char *text = page(&p);

        assert_non_null(strstr(text, "<p id=\"no-slots\">"));
        assert_non_null(strstr(text, "<p id=\"no-faults\">None.</p>"));
        assert_null(strstr(text, "<section class=\"fleet\""));
        free(text);
}

static void test_sort(void **state) {
        StatusSlot v[] = {
                { "b", "r", "m1", 1 }, { "a", "r2", "m1", 1 }, { "a", "r1", "m2", 2 },
                { "a", "r1", "m2", 1 }, { "a", "r1", "m1", 9 },
        };

        qsort(v, ELEMENTSOF(v), sizeof(v[0]), status_slot_compare);
        assert_string_equal(v[0].machine_id, "m1");
        assert_int_equal(v[1].slot_id, 1);
        assert_string_equal(v[1].machine_id, "m2");
        assert_int_equal(v[2].slot_id, 2);
        assert_string_equal(v[3].region, "r2");
        assert_string_equal(v[4].fleet, "b");
}

/* GET / is the page; another method is 405 with its Allow; "//" or "/x" no route. */
static void test_route(void **state) {
        ApiRoute r = {};
        const char *error = NULL;

        assert_int_equal(api_route("GET", "/", NULL, &r, &error), 0);
        assert_int_equal(r.op, API_STATUS);
        assert_string_equal(api_op_to_string(API_STATUS), "status");
        r = (ApiRoute){};
        assert_int_equal(api_route("POST", "/", NULL, &r, &error), -EOPNOTSUPP);
        assert_string_equal(r.allow, "GET");
        assert_int_equal(api_route("GET", "//", NULL, &r, &error), -ENOENT);
        assert_int_equal(api_route("GET", "/index.html", NULL, &r, &error), -ENOENT);
        assert_int_equal(api_route("GET", "/metrics", NULL, &r, &error), 0);
        assert_int_equal(r.op, API_METRICS);
}

static void test_rate_ring(void **state) {
        RateRing r = {};

        assert_int_equal(rate_ring_sum(&r, 1000), 0);
        rate_ring_add(&r, 1000);
        rate_ring_add(&r, 1000);
        rate_ring_add(&r, 1030);
        assert_int_equal(rate_ring_sum(&r, 1030), 3);
        assert_int_equal(rate_ring_sum(&r, 1059), 3);
        assert_int_equal(rate_ring_sum(&r, 1060), 1); /* 1000 is 61 s back */
        assert_int_equal(rate_ring_sum(&r, 1089), 1);
        assert_int_equal(rate_ring_sum(&r, 1090), 0);
        /* a second 59 s later reuses none of the ring's slots still wanted */
        rate_ring_add(&r, 1089);
        assert_int_equal(rate_ring_sum(&r, 1089), 2);
        /* a long gap clears the whole ring */
        rate_ring_add(&r, 5000);
        assert_int_equal(rate_ring_sum(&r, 5000), 1);
        /* an earlier second counts in the latest */
        rate_ring_add(&r, 4990);
        assert_int_equal(rate_ring_sum(&r, 5000), 2);
        /* 60 in 60 distinct seconds, all counted; one more second drops the first */
        r = (RateRing){};
        for (uint64_t s = 100; s < 160; s++)
                rate_ring_add(&r, s);
        assert_int_equal(rate_ring_sum(&r, 159), 60);
        assert_int_equal(rate_ring_sum(&r, 160), 59);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_html_escape), cmocka_unit_test(test_contents),
                cmocka_unit_test(test_escaped),     cmocka_unit_test(test_empty),
                cmocka_unit_test(test_sort),        cmocka_unit_test(test_rate_ring),
                cmocka_unit_test(test_route),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
