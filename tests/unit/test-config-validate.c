/* SPDX-License-Identifier: MIT */
/* config_validate() and config_load_full(): checks across fleets, against the disk, after the
 * density. */
#include "test-config-util.h"

static void test_validate_ports(_unused_ void **state) {
        static const struct {
                const char *a, *b;
                unsigned a_slots, b_slots;
                int r;
                const char *expect;
        } cases[] = {
                /* defaults: 9000.. and 9600..; every overlap told, one a line (SPEC §2: a
                 * run tells every error) */
                { "", "", 10, 10, -EADDRINUSE,
                  "/d/b.ini: ports.game_base: ports 9000-9009 of fleet b overlap ports.game_base "
                  "9000-9009 of fleet a (/d/a.ini)\n"
                  "/d/b.ini: ports.query_base: ports 9600-9609 of fleet b overlap "
                  "ports.query_base 9600-9609 of fleet a (/d/a.ini)" },
                { "", "[ports]\ngame_base = 9010\nquery_base = 9610\n", 10, 10, 0, NULL },
                { "", "[ports]\ngame_base = 9009\nquery_base = 9610\n", 10, 10, -EADDRINUSE,
                  "/d/b.ini:7: ports.game_base: ports 9009-9018 of fleet b overlap "
                  "ports.game_base 9000-9009 of fleet a (/d/a.ini)" },
                { "[ports]\nquery_base = 7000\n", "[ports]\ngame_base = 6995\nquery_base = 8000\n",
                  10, 6, -EADDRINUSE,
                  "/d/b.ini:7: ports.game_base: ports 6995-7000 of fleet b overlap "
                  "ports.query_base 7000-7009 of fleet a (/d/a.ini:7)" },
                { "", "[ports]\ngame_base = 100\nquery_base = 9605\n", 10, 1, -EADDRINUSE,
                  "/d/b.ini:8: ports.query_base: ports 9605-9605 of fleet b overlap "
                  "ports.query_base 9600-9609 of fleet a (/d/a.ini)" },
                /* within one fleet */
                { "[ports]\ngame_base = 9000\nquery_base = 9005\n", "[ports]\ngame_base = 20000\n"
                  "query_base = 30000\n", 10, 1, -EADDRINUSE,
                  "/d/a.ini:8: ports.query_base: ports 9005-9014 overlap ports.game_base "
                  "9000-9009 of the same fleet" },
                { "[ports]\nquery_base = 9000\n", "[ports]\ngame_base = 20000\n"
                  "query_base = 30000\n", 1, 1, -EADDRINUSE,
                  "/d/a.ini:7: ports.query_base: ports 9000-9000 overlap ports.game_base "
                  "9000-9000 of the same fleet" },
                /* past 65535 */
                { "[ports]\ngame_base = 65530\n", "[ports]\ngame_base = 20000\nquery_base = 30000\n",
                  6, 1, 0, NULL },
                { "[ports]\ngame_base = 65530\n", "[ports]\ngame_base = 20000\nquery_base = 30000\n",
                  7, 1, -ERANGE,
                  "/d/a.ini:7: ports.game_base: 7 slots from port 65530 run past port 65535" },
                { "", "[ports]\ngame_base = 20000\nquery_base = 65535\n", 1, 2, -ERANGE,
                  "/d/b.ini:8: ports.query_base: 2 slots from port 65535 run past port 65535" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(config_freep) Config *c = new_config();

                build_two_fleets(c, cases[i].a, cases[i].b, cases[i].a_slots, cases[i].b_slots);
                check_validate(c, cases[i].r, cases[i].expect);
        }
}

static void test_validate_build(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *text = NULL, *expect = NULL;

        write_file_n(dir, "server", "#!/bin/sh\n", 10, 0644);
        write_file_n(dir, "exec", "#!/bin/sh\n", 10, 0755);

        {
                _cleanup_(config_freep) Config *c = new_config();

                assert_true(asprintf(&text, "[fleet]\nbuild = %s/exec\n[usage]\ncpu = 1\n"
                                            "memory = 1G\n", dir) > 0);
                parse_one_fleet(c, "f.ini", text)->slots = 1;
                check_validate(c, 0, NULL);
        }
        {
                _cleanup_(config_freep) Config *c = new_config();

                parse_one_fleet(c, "f.ini", "[usage]\ncpu = 1\nmemory = 1G\n[fleet]\n"
                                            "build = /nonexistent/server\n");
                check_validate(c, -ENOENT,
                               "f.ini:5: fleet.build: No such file or directory (got "
                               "'/nonexistent/server')");
        }
        {
                _cleanup_(config_freep) Config *c = new_config();

                free(text);
                assert_true(asprintf(&text, "[fleet]\nbuild = %s/server\n[usage]\ncpu = 1\n"
                                            "memory = 1G\n", dir) > 0);
                parse_one_fleet(c, "f.ini", text);
                assert_true(asprintf(&expect, "f.ini:2: fleet.build: not executable: Permission "
                                              "denied (got '%s/server')", dir) > 0);
                check_validate(c, -EACCES, expect);
        }
        {
                _cleanup_(config_freep) Config *c = new_config();

                free(text);
                assert_true(asprintf(&text, "[fleet]\nbuild = %s\n[usage]\ncpu = 1\n"
                                            "memory = 1G\n", dir) > 0);
                parse_one_fleet(c, "f.ini", text);
                free(expect);
                assert_true(asprintf(&expect, "f.ini:2: fleet.build: not a regular file (got '%s')",
                                     dir) > 0);
                check_validate(c, -EINVAL, expect);
        }
}

static void test_validate_names(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();

        /* A Config edited by hand after parsing still gets its names checked. */
        build_two_fleets(c, "", "[ports]\ngame_base = 100\nquery_base = 200\n", 1, 1);
        check_validate(c, 0, NULL);

        assert_int_equal(free_and_strdup(&c->fleets[1].name, "a"), 0);
        check_validate(c, -EEXIST, "/d/b.ini: fleet.name: fleet a is already defined by /d/a.ini");

        assert_int_equal(free_and_strdup(&c->fleets[1].name, "../x"), 0);
        check_validate(c, -EINVAL, "/d/b.ini: fleet.name: expected 1 to 64 characters from A-Z "
                                   "a-z 0-9 _ . -, not starting with '.'");
}

static void test_load_full(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *ini = path_join(dir, "slotd.ini"), *fleets = path_join(dir, "fleets.d");
        _cleanup_(config_freep) Config *c = NULL, *d = NULL;
        _cleanup_free_ char *err = NULL, *expect = NULL;
        const MachineResources m = { .cpus = 64, .memory = UINT64_C(256) << 30 };
        Config *untouched = (Config *) 0x1;

        write_file(dir, "slotd.ini", "[machine]\ncpus = 8\nreserved_cpus = 1\n"
                                     "reserved_memory = 4G\n");
        assert_int_equal(mkdir(fleets, 0755), 0);
        write_file(fleets, "a.ini", FLEET_MIN "[usage]\nservers = 4\n");
        write_file(fleets, "b.ini", "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 1\nmemory = 2G\n"
                                    "[ports]\ngame_base = 9100\nquery_base = 9700\n");

        /* configured cpus (8 - 1 reserved) win over the detected 64; detected memory counts */
        assert_int_equal(config_load_full(ini, fleets, &m, &c, &err), 0);
        assert_null(err);
        assert_int_equal(c->n_fleets, 2);
        assert_int_equal(c->fleets[0].slots, 4); /* 2 cores, 4G */
        assert_int_equal(c->fleets[1].slots, 5); /* 5 cores left */

        /* b's 100 ports from 9550 now run into a's query ports at 9600 */
        write_file(fleets, "b.ini", "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 0.05\n"
                                    "memory = 1M\n[ports]\ngame_base = 9550\nquery_base = 20000\n");
        assert_int_equal(config_load_full(ini, fleets, &m, &untouched, &err), -EADDRINUSE);
        assert_ptr_equal(untouched, (Config *) 0x1);
        assert_true(asprintf(&expect, "%s/b.ini:7: ports.game_base: ports 9550-9649 of fleet b "
                                      "overlap ports.query_base 9600-9603 of fleet a (%s/a.ini)",
                             fleets, fleets) > 0);
        assert_string_equal(err, expect);
        free(TAKE_PTR(err));

        /* density errors come through too */
        write_file(fleets, "b.ini", "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 1\nmemory = 2G\n"
                                    "servers = 6\n");
        assert_int_equal(config_load_full(ini, fleets, &m, &untouched, &err), -ERANGE);
        free(expect);
        assert_true(asprintf(&expect, "%s/b.ini:6: usage.servers: needs 6 servers but only 5 fit "
                                      "(5 cores and 248G left)", fleets) > 0);
        assert_string_equal(err, expect);
        free(TAKE_PTR(err));

        /* with nothing configured and nothing passed, this machine is detected */
        write_file(dir, "slotd.ini", "");
        write_file(fleets, "b.ini", "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 1%\nmemory = 1M\n"
                                    "servers = 1\n[ports]\ngame_base = 100\nquery_base = 200\n");
        write_file(fleets, "a.ini", "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 1%\nmemory = 1M\n"
                                    "servers = 1\n");
        assert_int_equal(config_load_full(ini, fleets, NULL, &d, &err), 0);
        assert_int_equal(d->fleets[0].slots, 1);
        assert_int_equal(d->fleets[1].slots, 1);
}

/* The local proxy's ports and the slots' ports are the machine's: none may be both. */
static void test_validate_proxy_ports(_unused_ void **state) {
        static const struct {
                const char *machine, *a;
                unsigned a_slots;
                int r;
                const char *expect;
        } cases[] = {
                { "", "[ports]\ngame_base = 8080\n", 10, -EADDRINUSE,
                  "/d/a.ini:7: ports.game_base: ports 8080-8089 of fleet a include port 8086 of "
                  "localproxy.listen 127.0.0.1:8086 (its default)" },
                { "", "[ports]\ngame_base = 8079\n", 7, 0, NULL },
                { "", "[ports]\ngame_base = 8087\n", 7, 0, NULL },
                { "", "[ports]\nquery_base = 8086\n", 1, -EADDRINUSE,
                  "/d/a.ini:7: ports.query_base: ports 8086-8086 of fleet a include port 8086 of "
                  "localproxy.listen 127.0.0.1:8086 (its default)" },
                { "[localproxy]\nlisten = [::1]:9005\n", "", 10, -EADDRINUSE,
                  "/d/a.ini: ports.game_base: ports 9000-9009 of fleet a include port 9005 of "
                  "localproxy.listen [::1]:9005 (slotd.ini:2)" },
                { "[localproxy]\nlisten = off\n", "[ports]\ngame_base = 8080\n", 10, 0, NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(config_freep) Config *c = new_config();

                assert_int_equal(config_parse_machine(c, "slotd.ini", cases[i].machine, NULL), 0);
                build_two_fleets(c, cases[i].a, "[ports]\ngame_base = 20000\nquery_base = 30000\n",
                                 cases[i].a_slots, 1);
                check_validate(c, cases[i].r, cases[i].expect);
        }
}

/* metrics.listen has a port of its own: not the local proxy's, not a game server's. */
static void test_validate_metrics_port(_unused_ void **state) {
        static const struct {
                const char *machine;
                int r;
                const char *expect;
        } cases[] = {
                { "[metrics]\nlisten = 127.0.0.1:9187\n", 0, NULL },
                { "[metrics]\nlisten = 127.0.0.1:8086\n", -EADDRINUSE,
                  "slotd.ini:2: metrics.listen: 127.0.0.1:8086 overlaps localproxy.listen "
                  "127.0.0.1:8086" },
                /* a wildcard address takes the port on every address of its family */
                { "[metrics]\nlisten = [::]:8086\n", -EADDRINUSE,
                  "slotd.ini:2: metrics.listen: [::]:8086 overlaps localproxy.listen [::1]:8086" },
                { "[metrics]\nlisten = 0.0.0.0:8087\n", 0, NULL },
                { "[localproxy]\nlisten = off\n[metrics]\nlisten = 127.0.0.1:8086\n", 0, NULL },
                { "[metrics]\nlisten = 0.0.0.0:20000\n", -EADDRINUSE,
                  "slotd.ini:2: metrics.listen: port 20000 is in ports 20000-20000 of fleet b "
                  "(ports.game_base in /d/b.ini)" },
                { "[metrics]\nlisten = [::1]:9003\n", -EADDRINUSE,
                  "slotd.ini:2: metrics.listen: port 9003 is in ports 9000-9003 of fleet a "
                  "(ports.game_base in /d/a.ini)" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(config_freep) Config *c = new_config();

                assert_int_equal(config_parse_machine(c, "slotd.ini", cases[i].machine, NULL), 0);
                build_two_fleets(c, "", "[ports]\ngame_base = 20000\nquery_base = 30000\n", 4, 1);
                check_validate(c, cases[i].r, cases[i].expect);
        }
}

/* The default metrics.listen (127.0.0.1:8087) steps aside for ports the configuration gives
 * the local proxy or a fleet; set explicitly, the same address is an error. */
static void test_validate_metrics_default(_unused_ void **state) {
        static const struct {
                const char *machine, *fleet_b;
                bool off;
        } cases[] = {
                { "", "[ports]\ngame_base = 20000\nquery_base = 30000\n", false },
                { "", "[ports]\ngame_base = 8087\nquery_base = 30000\n", true },
                { "", "[ports]\ngame_base = 20000\nquery_base = 8087\n", true },
                { "[localproxy]\nlisten = 127.0.0.1:8087\n",
                  "[ports]\ngame_base = 20000\nquery_base = 30000\n", true },
                { "[localproxy]\nlisten = 0.0.0.0:8087\n",
                  "[ports]\ngame_base = 20000\nquery_base = 30000\n", true },
                { "[localproxy]\nlisten = [::1]:8087\n",
                  "[ports]\ngame_base = 20000\nquery_base = 30000\n", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(config_freep) Config *c = new_config();

                assert_int_equal(config_parse_machine(c, "slotd.ini", cases[i].machine, NULL), 0);
                build_two_fleets(c, "", cases[i].fleet_b, 4, 1);
                check_validate(c, 0, NULL);
                if (cases[i].off) {
                        assert_int_equal(c->metrics_listen.family, AF_UNSPEC);
                        assert_null(c->metrics_listen.text);
                } else
                        assert_string_equal(c->metrics_listen.text, "127.0.0.1:8087");
        }
        {
                _cleanup_(config_freep) Config *c = new_config();

                assert_int_equal(config_parse_machine(c, "slotd.ini", "[metrics]\nlisten = "
                                                      "127.0.0.1:8087\n", NULL), 0);
                build_two_fleets(c, "", "[ports]\ngame_base = 8087\nquery_base = 30000\n",
                                 4, 1);
                check_validate(c, -EADDRINUSE, "slotd.ini:2: metrics.listen: port 8087 is in "
                               "ports 8087-8087 of fleet b (ports.game_base in /d/b.ini)");
        }
}

/* Through config_load_full(), the message names slotd.ini's path. */
static void test_validate_proxy_ports_loaded(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *ini = path_join(dir, "slotd.ini"), *fleets = path_join(dir, "fleets.d");
        _cleanup_free_ char *err = NULL, *expect = NULL;
        const MachineResources m = { .cpus = 64, .memory = UINT64_C(256) << 30 };
        Config *untouched = (Config *) 0x1;

        write_file(dir, "slotd.ini", "[machine]\ncpus = 8\n[localproxy]\n"
                                     "listen = 127.0.0.1:9600 [::1]:9601\n");
        assert_int_equal(mkdir(fleets, 0755), 0);
        write_file(fleets, "a.ini", FLEET_MIN "[usage]\nservers = 2\n");
        assert_int_equal(config_load_full(ini, fleets, &m, &untouched, &err), -EADDRINUSE);
        assert_ptr_equal(untouched, (Config *) 0x1);
        assert_true(asprintf(&expect, "%s/a.ini: ports.query_base: ports 9600-9601 of fleet a "
                                      "include port 9600 of localproxy.listen 127.0.0.1:9600 "
                                      "(%s:4)", fleets, ini) > 0);
        assert_string_equal(err, expect);
}

/* Each build configuration's own build must run; one that inherits is fleet.build's. */
static void test_validate_build_configurations(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *text = NULL, *expect = NULL;

        write_file_n(dir, "server", "#!/bin/sh\n", 10, 0644);
        write_file_n(dir, "exec", "#!/bin/sh\n", 10, 0755);

        {
                _cleanup_(config_freep) Config *c = new_config();

                assert_true(asprintf(&text, "[usage]\ncpu = 1\nmemory = 1G\n"
                                            "[build_configuration a]\nargs = -a\n"
                                            "[build_configuration default]\nbuild = %s/exec\n"
                                            "[build_configuration b]\nbuild = %s/exec\n",
                                     dir, dir) > 0);
                parse_one_fleet(c, "f.ini", text)->slots = 1;
                check_validate(c, 0, NULL);
        }
        {
                _cleanup_(config_freep) Config *c = new_config();

                parse_one_fleet(c, "f.ini", FLEET_MIN "[build_configuration a]\n"
                                                      "build = /nonexistent/a\n");
                check_validate(c, -ENOENT,
                               "f.ini:7: build_configuration a.build: No such file or directory "
                               "(got '/nonexistent/a')");
        }
        {
                _cleanup_(config_freep) Config *c = new_config();

                /* fleet.build taken from the default's section: named as that section's */
                parse_one_fleet(c, "f.ini", "[usage]\ncpu = 1\nmemory = 1G\n"
                                            "[build_configuration default]\n"
                                            "build = /nonexistent/d\n");
                check_validate(c, -ENOENT,
                               "f.ini:5: build_configuration default.build: No such file or "
                               "directory (got '/nonexistent/d')");
        }
        {
                _cleanup_(config_freep) Config *c = new_config();

                free(text);
                assert_true(asprintf(&text, FLEET_MIN "[build_configuration x:1]\nbuild = %s/server\n",
                                     dir) > 0);
                parse_one_fleet(c, "f.ini", text);
                assert_true(asprintf(&expect, "f.ini:7: build_configuration x:1.build: not "
                                              "executable: Permission denied (got '%s/server')",
                                     dir) > 0);
                check_validate(c, -EACCES, expect);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_validate_ports),
                cmocka_unit_test(test_validate_build),
                cmocka_unit_test(test_validate_names),
                cmocka_unit_test(test_load_full),
                cmocka_unit_test(test_validate_proxy_ports),
                cmocka_unit_test(test_validate_metrics_port),
                cmocka_unit_test(test_validate_metrics_default),
                cmocka_unit_test(test_validate_proxy_ports_loaded),
                cmocka_unit_test(test_validate_build_configurations),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
