/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "macro.h"
#include "machine-number.h"

#define SENTINEL UINT64_C(0xdeadbeefcafe)

static void check_parse(const char *s, int expect_r, uint64_t expect) {
        uint64_t v = SENTINEL;

        assert_int_equal(machine_number_parse(s, &v), expect_r);
        assert_true(v == (expect_r == 0 ? expect : SENTINEL));
}

static void test_parse(_unused_ void **state) {
        check_parse("1", 0, 1);
        check_parse("42", 0, 42);
        check_parse("1234567890", 0, UINT64_C(1234567890));
        check_parse("9223372036854775807", 0, UINT64_C(9223372036854775807));

        /* What Go's json.Number, C#'s long and Unreal's Strtoi64 would not all read alike. */
        check_parse("0", -ERANGE, 0);
        check_parse("9223372036854775808", -ERANGE, 0);
        check_parse("18446744073709551615", -ERANGE, 0);
        check_parse("99999999999999999999999", -ERANGE, 0);
        check_parse("", -EINVAL, 0);
        check_parse(NULL, -EINVAL, 0);
        check_parse("00", -EINVAL, 0);
        check_parse("0123", -EINVAL, 0); /* octal to Unreal, invalid to Go */
        check_parse("0x10", -EINVAL, 0);
        check_parse("-1", -EINVAL, 0);
        check_parse("+1", -EINVAL, 0);
        check_parse(" 1", -EINVAL, 0);
        check_parse("1 ", -EINVAL, 0);
        check_parse("1.0", -EINVAL, 0);
        check_parse("1e3", -EINVAL, 0);
        check_parse("3d1219c7c4c5404aaa1f6d2a48adfda4", -EINVAL, 0);
        check_parse("99999999999999999999999x", -EINVAL, 0); /* the bad character wins */
}

static void test_from_id(_unused_ void **state) {
        /* A machine ID that is already a machine number is taken as it is. */
        assert_true(machine_number_from_id("42") == 42);
        assert_true(machine_number_from_id("9223372036854775807") == UINT64_C(9223372036854775807));

        /* Known vectors: the first 8 bytes of SHA-256, big-endian, top bit cleared. SHA-256 of
         * tests/integration/lib.sh's machine.id starts 3eb1bd439947eb76. */
        assert_true(machine_number_from_id("0123456789abcdef0123456789abcdef") ==
                    UINT64_C(4517599999261404022));
        assert_true(machine_number_from_id("3d1219c7c4c5404aaa1f6d2a48adfda4") ==
                    UINT64_C(15083782423932543));
        /* e3b0c44298fc1c14 and c5c29af0c2b1ba23: the top bit set, and cleared. */
        assert_true(machine_number_from_id("") == UINT64_C(7183457195969485844));
        assert_true(machine_number_from_id(NULL) == UINT64_C(7183457195969485844));
        assert_true(machine_number_from_id("9223372036854775808") ==
                    UINT64_C(5026750492948150819));
        /* Not numbers as Unity's SDKs read them: hashed like any other ID. */
        assert_true(machine_number_from_id("0") == UINT64_C(6912158355717386040));
        assert_true(machine_number_from_id("0123") == UINT64_C(2009419427626187277));
        assert_true(machine_number_from_id("-5") == UINT64_C(4011050095673115011));

        /* Always a valid machine number. */
        for (unsigned i = 0; i < 1000; i++) {
                char id[32];
                uint64_t n;

                (void) snprintf(id, sizeof(id), "host-%u", i);
                n = machine_number_from_id(id);
                assert_true(n >= 1 && n <= MACHINE_NUMBER_MAX);
                assert_true(machine_number_from_id(id) == n); /* stable */
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_from_id),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
