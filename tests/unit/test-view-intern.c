/* SPDX-License-Identifier: MIT */
/* view-intern.h: the strings the fleet view's slots share, one counted copy each. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "macro.h"
#include "view-intern.h"

static void test_refs(_unused_ void **state) {
        Hashmap pool = {};
        char a[] = "machine-1", b[] = "machine-1";
        const char *x = intern_ref(&pool, a), *y = intern_ref(&pool, b), *z;

        assert_non_null(x);
        assert_ptr_equal(x, y); /* one copy for equal strings */
        assert_ptr_not_equal(x, a);
        assert_string_equal(x, "machine-1");
        assert_int_equal(pool.size, 1);
        z = intern_ref(&pool, "eu");
        assert_int_equal(pool.size, 2);
        intern_unref(&pool, x);
        assert_ptr_equal(hashmap_get(&pool, "machine-1") != NULL, true); /* one left */
        intern_unref(&pool, y);
        assert_null(hashmap_get(&pool, "machine-1"));
        assert_int_equal(pool.size, 1);
        intern_unref(&pool, z);
        intern_unref(&pool, NULL);
        assert_int_equal(pool.size, 0);
        intern_pool_done(&pool);
}

static void test_slot_docs(_unused_ void **state) {
        const char *text = "{\"machineID\":\"m1\",\"slotID\":%u,\"fleetId\":\"shooter\","
                           "\"regionId\":\"eu\",\"state\":\"online\",\"processState\":\"running\","
                           "\"buildConfigurationId\":\"1001\",\"buildConfigurations\":[\"1001\",\"1002\"],"
                           "\"ipv4\":\"10.0.0.1\",\"allocationId\":\"%s\"}";
        Hashmap pool = {};
        SlotDoc d[3];

        for (unsigned i = 0; i < ELEMENTSOF(d); i++) {
                char buf[512];

                snprintf(buf, sizeof(buf), text, i, i == 1 ? "a1" : "");
                assert_int_equal(slot_doc_parse(buf, strlen(buf), &d[i]), 0);
                assert_int_equal(slot_doc_intern(&pool, &d[i]), 0);
                assert_int_equal(d[i].slot_id, i);
        }
        /* the repeated strings shared, the allocationId each document's own */
        assert_ptr_equal(d[0].machine_id, d[2].machine_id);
        assert_ptr_equal(d[0].fleet_id, d[1].fleet_id);
        assert_ptr_equal(d[0].build_configurations[1], d[2].build_configurations[1]);
        assert_ptr_equal(d[0].build_configuration_id, d[2].build_configurations[0]);
        assert_ptr_not_equal(d[0].allocation_id, d[2].allocation_id);
        assert_string_equal(d[1].allocation_id, "a1");
        assert_string_equal(d[2].ipv4, "10.0.0.1");
        assert_null(d[2].ipv6); /* absent: NULL, as the parser left it */
        assert_true(slot_doc_runs_build(&d[1], "1002"));
        /* m1 shooter eu online running 1001 1002 10.0.0.1 */
        assert_int_equal(pool.size, 8);
        for (unsigned i = 0; i < ELEMENTSOF(d); i++) {
                slot_doc_unintern(&pool, &d[i]);
                assert_null(d[i].machine_id);
        }
        assert_int_equal(pool.size, 0);
        intern_pool_done(&pool);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_refs),
                cmocka_unit_test(test_slot_docs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
