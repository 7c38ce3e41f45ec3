/* SPDX-License-Identifier: MIT */
#pragma once

/* What the test-config*.c programs share: building configs from text, and temporary
 * directories for config_load(). Included by each; every helper is static inline so that a
 * program that does not use one is not warned about it. */

#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "config.h"
#include "strv.h"

#define FLEET_SECTIONS                                                                          \
        "a fleet file has [fleet], [usage], [ports], [checks], [crash], [limits], [logs], [security] and " \
        "[build_configuration ID]"
/* What an args or environment error lists as known variables. */
#define EXPAND_KNOWN                                                                            \
        "known: ${PORT} ${QUERY_PORT} ${SERVER_ID} ${ALLOCATION_UUID} ${SERVER_LOG_DIR} ${HOME} " \
        "${BUILD_CONFIGURATION}, Multiplay's $$port$$ $$query_port$$ $$query_type$$ "           \
        "$$log_dir$$ $$file_dir$$ $$config_dir$$ $$game_exe$$ $$serverid$$ $$machineid$$ "     \
        "$$fleetid$$ $$regionid$$ $$regionname$$ $$ip$$ $$ipv6$$ $$timestamp$$ $$commandline$$ " \
        "and the build configuration's variables as $$NAME$$"
#define BUILD_ID_RULE "1 to 128 characters from A-Z a-z 0-9 . _ : -"

/* The keys every fleet must have, on lines 1-5. */
#define FLEET_MIN "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 0.5\nmemory = 1G\n"

#define assert_contains(haystack, needle)                                                    \
        do {                                                                                 \
                const char *_h = (haystack);                                                 \
                if (!_h || !strstr(_h, (needle))) {                                          \
                        print_error("'%s' does not contain '%s'\n", _h ?: "(null)", (needle)); \
                        fail();                                                              \
                }                                                                            \
        } while (0)

static inline Config *new_config(void) {
        Config *c = config_new();

        assert_non_null(c);
        return c;
}

static inline bool double_eq(double a, double b) {
        return a - b < 1e-9 && b - a < 1e-9;
}

/* Parses a fleet whose line 2 is "key = value" of [section]; the required keys the test does
 * not replace follow. */
static inline int parse_fleet_with(Config *c, const char *section, const char *key,
                                   const char *value, char **err) {
        _cleanup_free_ char *text = NULL;
        bool is_build = streq(section, "fleet") && streq(key, "build");
        bool is_cpu = streq(section, "usage") && streq(key, "cpu");
        bool is_memory = streq(section, "usage") && streq(key, "memory");

        assert_true(asprintf(&text, "[%s]\n%s = %s\n%s%s%s", section, key, value,
                             is_build ? "" : "[fleet]\nbuild = /bin/true\n",
                             is_cpu ? "" : "[usage]\ncpu = 0.5\n",
                             is_memory ? "" : "[usage]\nmemory = 1G\n") > 0);
        return config_parse_fleet(c, "f.ini", text, err);
}

static inline void check_fleet_value_error(const char *section, const char *key,
                                           const char *value, const char *what) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL, *expect = NULL;

        assert_true(parse_fleet_with(c, section, key, value, &err) < 0);
        assert_int_equal(c->n_fleets, 0);
        assert_true(asprintf(&expect, "f.ini:2: %s.%s: %s (got '%s')", section, key, what,
                             value) > 0);
        assert_non_null(err);
        assert_string_equal(err, expect);
}

static inline FleetConfig *parse_one_fleet(Config *c, const char *name, const char *text) {
        _cleanup_free_ char *err = NULL;
        int r;

        r = config_parse_fleet(c, name, text, &err);
        if (r < 0)
                print_error("unexpected error: %s\n", err ?: "(null)");
        assert_int_equal(r, 0);
        assert_null(err);
        return &c->fleets[c->n_fleets - 1];
}

/* Temporary directories for config_load(). */

static inline char *make_tmpdir(void) {
        char *d = strdup("/tmp/test-config-XXXXXX");

        assert_non_null(d);
        assert_non_null(mkdtemp(d));
        return d;
}

static inline int rm_one(const char *path, _unused_ const struct stat *st, _unused_ int flag,
                         _unused_ struct FTW *ftw) {
        return remove(path);
}

static inline void rm_rf(char *dir) {
        if (!dir)
                return;
        assert_int_equal(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
        free(dir);
}

static inline void rm_rfp(char **dir) {
        rm_rf(*dir);
}

static inline void write_file_n(const char *dir, const char *name, const char *data, size_t n,
                                mode_t mode) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;

        assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, n), (ssize_t) n);
}

static inline void write_file(const char *dir, const char *name, const char *data) {
        write_file_n(dir, name, data, strlen(data), 0644);
}

static inline char *path_join(const char *a, const char *b) {
        char *p;

        assert_true(asprintf(&p, "%s/%s", a, b) > 0);
        return p;
}

static inline void build_two_fleets(Config *c, const char *a_extra, const char *b_extra,
                                    unsigned a_slots, unsigned b_slots) {
        _cleanup_free_ char *ta = NULL, *tb = NULL;

        assert_true(asprintf(&ta, FLEET_MIN "%s", a_extra) > 0);
        assert_true(asprintf(&tb, FLEET_MIN "%s", b_extra) > 0);
        parse_one_fleet(c, "/d/a.ini", ta)->slots = a_slots;
        parse_one_fleet(c, "/d/b.ini", tb)->slots = b_slots;
}

static inline void check_validate(Config *c, int expect_r, const char *expect) {
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_validate(c, &err), expect_r);
        if (expect)
                assert_string_equal(err, expect);
        else
                assert_null(err);
}
