/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hashmap.h"
#include "macro.h"

static void test_put_get_remove(void **state) {
        Hashmap h = {};
        char keys[2000][16];
        int values[2000];

        assert_null(hashmap_get(&h, "x"));
        assert_null(hashmap_remove(&h, "x", NULL));
        for (int i = 0; i < 2000; i++) {
                snprintf(keys[i], sizeof(keys[i]), "uuid-%d", i);
                values[i] = i;
                assert_int_equal(hashmap_put(&h, keys[i], &values[i]), 0);
        }
        assert_int_equal(h.size, 2000);
        assert_int_equal(hashmap_put(&h, "uuid-5", &values[0]), -EEXIST);
        for (int i = 0; i < 2000; i++)
                assert_ptr_equal(hashmap_get(&h, keys[i]), &values[i]);
        /* Removal only of the given value. */
        assert_null(hashmap_remove(&h, "uuid-7", &values[8]));
        assert_ptr_equal(hashmap_remove(&h, "uuid-7", &values[7]), &values[7]);
        assert_null(hashmap_get(&h, "uuid-7"));
        assert_ptr_equal(hashmap_remove(&h, "uuid-9", NULL), &values[9]);
        assert_int_equal(h.size, 1998);
        hashmap_done(&h);
        assert_int_equal(h.size, 0);
        assert_null(hashmap_get(&h, "uuid-1"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_put_get_remove),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
