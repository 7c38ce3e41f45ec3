/* SPDX-License-Identifier: MIT */
/* The default seccomp filter the build compiled (confine-gen, confine_default_eperm[]) is,
 * instruction for instruction, the one libseccomp compiles here from the default allow-list;
 * confine_seccomp_default() hands out a copy of it, and compiles the kill variant. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "confine.h"
#include "macro.h"

static struct sock_fprog *compile(bool kill, bool *ret_keeper) {
        struct sock_fprog *prog = NULL;
        scmp_filter_ctx ctx = NULL;

        assert_int_equal(confine_seccomp_new(NULL, kill, &ctx, ret_keeper, NULL), 0);
        assert_int_equal(confine_seccomp_program(ctx, &prog), 0);
        seccomp_release(ctx);
        return prog;
}

static void assert_same_program(const struct sock_fprog *a, const struct sock_fprog *b) {
        assert_int_equal(a->len, b->len);
        assert_memory_equal(a->filter, b->filter, a->len * sizeof(struct sock_filter));
}

static void test_prebuilt_is_compiled(_unused_ void **state) {
        bool keeper_compiled = false, keeper_default = false;
        struct sock_fprog *compiled = compile(false, &keeper_compiled), *prog = NULL;

        /* This build runs on the machine it was built for: the generator ran. */
        assert_true(confine_default_eperm_len > 0);
        assert_int_equal(confine_default_eperm_len, compiled->len);
        assert_memory_equal(confine_default_eperm, compiled->filter,
                            compiled->len * sizeof(struct sock_filter));
        assert_int_equal(confine_seccomp_default(false, &prog, &keeper_default), 0);
        assert_same_program(prog, compiled);
        assert_ptr_not_equal(prog->filter, confine_default_eperm); /* a copy, freed by the caller */
        assert_int_equal(keeper_default, keeper_compiled);
        assert_true(keeper_default); /* the keeper runs under the default list */
        confine_seccomp_program_free(prog);
        confine_seccomp_program_free(compiled);
}

static void test_kill_compiled(_unused_ void **state) {
        bool keeper_compiled = false, keeper_default = false;
        struct sock_fprog *compiled = compile(true, &keeper_compiled), *prog = NULL;

        assert_int_equal(confine_seccomp_default(true, &prog, &keeper_default), 0);
        assert_same_program(prog, compiled);
        assert_int_equal(keeper_default, keeper_compiled);
        /* Not the EPERM program: the denial differs. */
        assert_false(prog->len == confine_default_eperm_len &&
                     memcmp(prog->filter, confine_default_eperm,
                            prog->len * sizeof(struct sock_filter)) == 0);
        confine_seccomp_program_free(prog);
        confine_seccomp_program_free(compiled);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_prebuilt_is_compiled),
                cmocka_unit_test(test_kill_compiled),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
