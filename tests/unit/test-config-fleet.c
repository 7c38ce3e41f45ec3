/* SPDX-License-Identifier: MIT */
/* Fleet files: every key of a fleet, its defaults, and the checks across its keys. */
#include "test-config-util.h"

static void test_fleet_defaults(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        FleetConfig *f;

        f = parse_one_fleet(c, "/etc/slotd/fleets.d/shooter.ini", "; a fleet\n" FLEET_MIN);
        assert_int_equal(c->n_fleets, 1);

        assert_string_equal(f->file, "/etc/slotd/fleets.d/shooter.ini");
        assert_int_equal(f->line, 2);
        assert_string_equal(f->name, "shooter");
        assert_string_equal(f->build, "/bin/true");
        assert_non_null(f->args);
        assert_int_equal(strv_length(f->args), 0);
        assert_non_null(f->environment);
        assert_int_equal(strv_length(f->environment), 0);
        assert_string_equal(f->build_configuration, "default");
        assert_string_equal(f->user, "nobody");
        assert_string_equal(f->group, "nogroup");
        assert_true(f->start_on_provision);
        assert_int_equal(f->stop_timeout, 10 * USEC_PER_SEC);
        assert_true(double_eq(f->usage_cpu, 0.5));
        assert_int_equal(f->usage_memory, UINT64_C(1) << 30);
        assert_int_equal(f->usage_servers, 0);
        assert_int_equal(f->game_port_base, 9000);
        assert_int_equal(f->query_port_base, 9600);
        assert_int_equal(f->check_interval, USEC_PER_MINUTE);
        assert_true(double_eq(f->cpu_tolerance, 0.10));
        assert_int_equal(f->memory_tolerance, UINT64_C(200) << 20);
        assert_int_equal(f->strikes, 3);
        assert_int_equal(f->strike_window, 30 * USEC_PER_MINUTE);
        assert_true(double_eq(f->machine_fault_share, 0.5));
        assert_int_equal(f->check_signal, SIGSEGV);
        assert_int_equal(f->query, QUERY_NONE);
        assert_int_equal(f->query_timeout, 2 * USEC_PER_SEC);
        assert_int_equal(f->heartbeat, 0);
        assert_int_equal(f->start_timeout, 0);
        assert_int_equal(f->crash_restarts, 1);
        assert_int_equal(f->crash_window, 30 * USEC_PER_MINUTE);
        assert_true(f->pre_recovery);
        assert_int_equal(f->memory_max, (UINT64_C(1) << 30) + 2 * (UINT64_C(200) << 20));
        assert_true(f->memory_high == UINT64_MAX); /* off: memory.high = max */
        assert_true(f->cpu_max == 0);
        assert_int_equal(f->pids_max, 4096);
        assert_int_equal(f->log_max_size, UINT64_C(64) << 20);
        assert_int_equal(f->log_keep, 4);
        assert_int_equal(f->build_line, 3);
        assert_int_equal(f->usage_servers_line, 0);
        assert_int_equal(f->game_port_base_line, 0);
        assert_int_equal(f->query_port_base_line, 0);
        assert_int_equal(f->slots, 0);
        assert_string_equal(f->region_id, "");
        assert_string_equal(f->region_name, "");
        assert_int_equal(f->readiness, READINESS_EXEC);
        assert_int_equal(f->n_build_configs, 1);

        /* a name without a directory or .ini is the name itself */
        f = parse_one_fleet(c, "racing", FLEET_MIN);
        assert_string_equal(f->name, "racing");
        assert_ptr_equal(config_find_fleet(c, "shooter"), &c->fleets[0]);
        assert_ptr_equal(config_find_fleet(c, "racing"), &c->fleets[1]);
        assert_null(config_find_fleet(c, "nosuch"));
}

static void test_fleet_all_keys(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        FleetConfig *f;
        const char *text =
                "[fleet]\n"
                "name = shooter-eu_1.prod\n"
                "build = /opt/games//shooter/server\n"
                "args = -batchmode -port ${PORT} -name \"Big Game\" 'a b' c\\ d\n"
                "environment = GAME_MODE=ranked \"MOTD=hello world\" _X1=\n"
                "build_configuration = build-42\n"
                "user = game\n"
                "group = games\n"
                "start_on_provision = no\n"
                "stop_timeout = 250ms\n"
                "[usage]\n"
                "cpu = 150%\n"
                "memory = 512M\n"
                "servers = 8\n"
                "[ports]\n"
                "game_base = 7000\n"
                "query_base = 27015\n"
                "[checks]\n"
                "interval = 30s\n"
                "cpu_tolerance = 12.5%\n"
                "memory_tolerance = 64M\n"
                "strikes = 5\n"
                "window = 1h\n"
                "signal = SIGABRT\n"
                "query = a2s\n"
                "query_timeout = 1500ms\n"
                "heartbeat = 20s\n"
                "start_timeout = 5m\n"
                "[crash]\n"
                "restarts = 0\n"
                "window = 10m\n"
                "pre_recovery = off\n"
                "[limits]\n"
                "memory_max = 1G\n"
                "cpu_max = 2\n"
                "pids = 512\n"
                /* later keys, so that the lines above stay as they are */
                "[fleet]\n"
                "region_id = 3fa85f64-5717-4562-b3fc-2c963f66afa6\n"
                "region_name = Europe West (Frankfurt) \xe2\x80\x94 \"fra\"\n"
                "[checks]\n"
                "readiness = notify\n"
                "[logs]\n"
                "max_size = 64K\n"
                "keep = 2\n";

        f = parse_one_fleet(c, "f.ini", text);

        assert_string_equal(f->name, "shooter-eu_1.prod");
        assert_string_equal(f->build, "/opt/games/shooter/server");
        assert_int_equal(strv_length(f->args), 7);
        assert_string_equal(f->args[0], "-batchmode");
        assert_string_equal(f->args[1], "-port");
        assert_string_equal(f->args[2], "${PORT}");
        assert_string_equal(f->args[3], "-name");
        assert_string_equal(f->args[4], "Big Game");
        assert_string_equal(f->args[5], "a b");
        assert_string_equal(f->args[6], "c d");
        assert_int_equal(strv_length(f->environment), 3);
        assert_string_equal(f->environment[0], "GAME_MODE=ranked");
        assert_string_equal(f->environment[1], "MOTD=hello world");
        assert_string_equal(f->environment[2], "_X1=");
        assert_string_equal(f->build_configuration, "build-42");
        assert_string_equal(f->user, "game");
        assert_string_equal(f->group, "games");
        assert_false(f->start_on_provision);
        assert_int_equal(f->stop_timeout, 250 * USEC_PER_MSEC);
        assert_true(double_eq(f->usage_cpu, 1.5));
        assert_int_equal(f->usage_memory, UINT64_C(512) << 20);
        assert_int_equal(f->usage_servers, 8);
        assert_int_equal(f->game_port_base, 7000);
        assert_int_equal(f->query_port_base, 27015);
        assert_int_equal(f->check_interval, 30 * USEC_PER_SEC);
        assert_true(double_eq(f->cpu_tolerance, 0.125));
        assert_int_equal(f->memory_tolerance, UINT64_C(64) << 20);
        assert_int_equal(f->strikes, 5);
        assert_int_equal(f->strike_window, USEC_PER_HOUR);
        assert_int_equal(f->check_signal, SIGABRT);
        assert_int_equal(f->query, QUERY_A2S);
        assert_int_equal(f->query_timeout, 1500 * USEC_PER_MSEC);
        assert_int_equal(f->heartbeat, 20 * USEC_PER_SEC);
        assert_int_equal(f->start_timeout, 5 * USEC_PER_MINUTE);
        assert_int_equal(f->crash_restarts, 0);
        assert_int_equal(f->crash_window, 10 * USEC_PER_MINUTE);
        assert_false(f->pre_recovery);
        assert_int_equal(f->memory_max, UINT64_C(1) << 30);
        assert_true(double_eq(f->cpu_max, 2.0));
        assert_int_equal(f->pids_max, 512);
        assert_int_equal(f->log_max_size, UINT64_C(64) << 10);
        assert_int_equal(f->log_keep, 2);
        assert_string_equal(f->region_id, "3fa85f64-5717-4562-b3fc-2c963f66afa6");
        assert_string_equal(f->region_name, "Europe West (Frankfurt) \xe2\x80\x94 \"fra\"");
        assert_int_equal(f->readiness, READINESS_NOTIFY);
        assert_int_equal(f->build_configs[0].query, QUERY_A2S);

        assert_int_equal(f->line, 1);
        assert_int_equal(f->build_line, 3);
        assert_int_equal(f->usage_servers_line, 14);
        assert_int_equal(f->game_port_base_line, 16);
        assert_int_equal(f->query_port_base_line, 17);
}

static void test_fleet_long_args(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *text = NULL;
        char arg[301];
        FleetConfig *f;

        /* Longer than inih's default 200-byte line: must arrive whole. */
        memset(arg, 'a', 300);
        arg[300] = '\0';
        assert_true(asprintf(&text, FLEET_MIN "[fleet]\nargs = -x %s -y\n", arg) > 0);
        f = parse_one_fleet(c, "f.ini", text);
        assert_int_equal(strv_length(f->args), 3);
        assert_string_equal(f->args[1], arg);
        assert_string_equal(f->args[2], "-y");
}

static void test_fleet_bad_values(_unused_ void **state) {
        static const struct {
                const char *section, *key, *value, *what;
        } cases[] = {
                { "fleet", "name", "a/b", "expected 1 to 64 characters from A-Z a-z 0-9 _ . -, "
                                          "not starting with '.'" },
                { "fleet", "name", ".hidden", "expected 1 to 64 characters from A-Z a-z 0-9 _ . -, "
                                              "not starting with '.'" },
                { "fleet", "name", "", "expected 1 to 64 characters from A-Z a-z 0-9 _ . -, "
                                       "not starting with '.'" },
                { "fleet", "name", "two words", "expected 1 to 64 characters from A-Z a-z 0-9 _ . "
                                                "-, not starting with '.'" },
                { "fleet", "name", "caf\xc3\xa9", "expected 1 to 64 characters from A-Z a-z 0-9 _ "
                                                  ". -, not starting with '.'" },
                { "fleet", "name", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                  "expected 1 to 64 characters from A-Z a-z 0-9 _ . -, not starting with '.'" },
                { "fleet", "build", "bin/true", "expected an absolute path" },
                { "fleet", "build", "", "expected an absolute path" },
                { "fleet", "args", "-name \"unterminated", "unterminated quote or trailing backslash" },
                { "fleet", "args", "trailing\\", "unterminated quote or trailing backslash" },
                { "fleet", "args", "-port ${PORTS}", "unknown variable '${PORTS}'; " EXPAND_KNOWN },
                { "fleet", "environment", "A=${", "unterminated '${'; " EXPAND_KNOWN },
                { "fleet", "args", "-port $$port", "unterminated '$$port' (a $$name$$ ends with $$); " EXPAND_KNOWN },
                { "fleet", "args", "-x $$commandline$$",
                  "$$commandline$$ is these launch parameters themselves; it may be used in "
                  "environment, not in args" },
                { "fleet", "environment", "FOO",
                  "expected KEY=value words, KEY made of A-Z a-z 0-9 _ and not starting with a "
                  "digit; 'FOO' is not" },
                { "fleet", "environment", "A=1 1X=2",
                  "expected KEY=value words, KEY made of A-Z a-z 0-9 _ and not starting with a "
                  "digit; '1X=2' is not" },
                { "fleet", "environment", "=x",
                  "expected KEY=value words, KEY made of A-Z a-z 0-9 _ and not starting with a "
                  "digit; '=x' is not" },
                { "fleet", "environment", "A-B=1",
                  "expected KEY=value words, KEY made of A-Z a-z 0-9 _ and not starting with a "
                  "digit; 'A-B=1' is not" },
                { "fleet", "environment", "PORT=1", "PORT is set by slotd for every slot" },
                { "fleet", "environment", "X=1 HOME=/tmp", "HOME is set by slotd for every slot" },
                { "fleet", "environment", "A=1 AB=2 A=3", "A is set twice" },
                { "fleet", "environment", "\"A=1", "unterminated quote or trailing backslash" },
                { "fleet", "build_configuration", "", "expected " BUILD_ID_RULE },
                { "fleet", "build_configuration", "two words", "expected " BUILD_ID_RULE },
                { "fleet", "user", "", "must not be empty" },
                { "fleet", "group", "", "must not be empty" },
                { "fleet", "start_on_provision", "maybe", "expected yes or no" },
                { "fleet", "stop_timeout", "10x", "expected a duration like 250ms, 10s, 5m or 1h" },
                { "fleet", "stop_timeout", "-1s", "expected a duration like 250ms, 10s, 5m or 1h" },
                { "fleet", "stop_timeout", "0", "must be greater than 0" },
                { "fleet", "stop_timeout", "99999999999999999999h", "duration too large" },
                { "usage", "cpu", "lots", "expected cores like 0.5 or 50%" },
                { "usage", "cpu", "10 %", "expected cores like 0.5 or 50%" },
                { "usage", "cpu", "-1", "expected cores like 0.5 or 50%" },
                { "usage", "cpu", "", "expected cores like 0.5 or 50%" },
                { "usage", "cpu", "0", "must be more than 0 and at most 1000000 cores" },
                { "usage", "cpu", "0%", "must be more than 0 and at most 1000000 cores" },
                { "usage", "memory", "0", "must be greater than 0" },
                { "usage", "memory", "1x", "expected a size like 512K, 200M or 2G" },
                { "usage", "memory", "99999999999999999999G", "size too large" },
                { "usage", "servers", "0", "expected a positive integer or 'auto'" },
                { "usage", "servers", "many", "expected a positive integer or 'auto'" },
                { "usage", "servers", "-1", "expected a positive integer or 'auto'" },
                { "usage", "speed", "0", "expected a positive integer" },
                { "usage", "speed", "2.5GHz", "expected a positive integer" },
                { "usage", "max_per_core", "0", "expected a positive integer" },
                { "usage", "max_per_machine", "-3", "expected a positive integer" },
                { "usage", "servers", "99999999999", "expected a positive integer or 'auto'" },
                { "ports", "game_base", "0", "expected a port between 1 and 65535" },
                { "ports", "game_base", "65536", "expected a port between 1 and 65535" },
                { "ports", "game_base", "http", "expected a port between 1 and 65535" },
                { "ports", "query_base", "-1", "expected a port between 1 and 65535" },
                { "checks", "interval", "1x", "expected a duration like 250ms, 10s, 5m or 1h" },
                { "checks", "cpu_tolerance", "10", "expected a percentage like 10%" },
                { "checks", "cpu_tolerance", "10 %", "expected a percentage like 10%" },
                { "checks", "cpu_tolerance", "-5%", "expected a percentage like 10%" },
                { "checks", "cpu_tolerance", "99999999999999999999%", "percentage too large" },
                { "checks", "memory_tolerance", "lots", "expected a size like 512K, 200M or 2G" },
                { "checks", "strikes", "0", "expected an integer between 1 and 63" },
                { "checks", "strikes", "-1", "expected an integer between 1 and 63" },
                { "checks", "strikes", "64", "expected an integer between 1 and 63" },
                { "checks", "strikes", "99999999999", "expected an integer between 1 and 63" },
                { "checks", "window", "0", "must be greater than 0" },
                { "checks", "signal", "SIGFOO", "expected a signal like SIGSEGV, SEGV or 11" },
                { "checks", "signal", "0", "expected a signal like SIGSEGV, SEGV or 11" },
                { "checks", "signal", "32", "expected a signal like SIGSEGV, SEGV or 11" },
                { "checks", "machine_fault_share", "150%", "expected a percentage between 0% and "
                                                           "100% like 50%, or off" },
                { "checks", "machine_fault_share", "0.5", "expected a percentage between 0% and "
                                                          "100% like 50%, or off" },
                { "checks", "machine_fault_share", "no", "expected a percentage between 0% and "
                                                         "100% like 50%, or off" },
                { "checks", "query", "http", "expected sqp, a2s or none" },
                { "checks", "query", "SQP", "expected sqp, a2s or none" },
                { "checks", "query_timeout", "0", "must be greater than 0" },
                { "checks", "heartbeat", "often", "expected a duration like 250ms, 10s, 5m or 1h" },
                { "checks", "start_timeout", "-5", "expected a duration like 250ms, 10s, 5m or 1h" },
                { "crash", "restarts", "-1", "expected an integer between 0 and 63" },
                { "crash", "restarts", "64", "expected an integer between 0 and 63" },
                { "limits", "nofile", "10", "expected an integer between 64 and 1073741824" },
                { "limits", "nofile", "lots", "expected an integer between 64 and 1073741824" },
                { "limits", "core", "big", "expected a size like 512K, 200M or 2G" },
                { "logs", "max_size", "lots", "expected a size like 512K, 200M or 2G" },
                { "logs", "keep", "0", "expected an integer between 1 and 99" },
                { "logs", "keep", "100", "expected an integer between 1 and 99" },
                { "logs", "keep", "all", "expected an integer between 1 and 99" },
                { "security", "seccomp", "strict", "expected default, off, or the absolute path of an allow-list" },
                { "security", "seccomp_action", "trap", "expected eperm or kill" },
                { "crash", "restarts", "x", "expected an integer between 0 and 63" },
                { "crash", "window", "0", "must be greater than 0" },
                { "crash", "pre_recovery", "2", "expected yes or no" },
                { "limits", "memory_max", "0", "must be greater than 0" },
                { "limits", "memory_max", "1.5G", "expected a size like 512K, 200M or 2G" },
                { "limits", "memory_high", "0", "must be greater than 0, or 'off'" },
                { "limits", "memory_high", "none", "expected a size like 200M or 2G, or 'off'" },
                { "limits", "cpu_max", "none", "expected cores like 0.5 or 50%, or 'off'" },
                { "limits", "cpu_max", "0", "must be more than 0 and at most 1000000 cores, or 'off'" },
                { "limits", "pids", "0", "expected an integer between 1 and 4194304" },
                { "limits", "pids", "4194305", "expected an integer between 1 and 4194304" },
                { "limits", "pids", "max", "expected an integer between 1 and 4194304" },
                { "fleet", "region_name", "\xc2\x9b", "expected at most 128 bytes without "
                                                    "control characters" },
                { "checks", "readiness", "ready", "expected notify, query or exec" },
                { "checks", "readiness", "Query", "expected notify, query or exec" },
                { "checks", "readiness", "", "expected notify, query or exec" },
                { "checks", "readiness", "query", "query needs checks.query sqp or a2s, not none" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                check_fleet_value_error(cases[i].section, cases[i].key, cases[i].value,
                                        cases[i].what);
}

/* The exact example of the brief, at its line. */
static void test_fleet_error_format(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_parse_fleet(c, "/etc/slotd/fleets.d/shooter.ini",
                                            "[fleet]\nbuild = /bin/true\n\n; usage\n[usage]\n"
                                            "memory = 1G\ncpu = lots\n",
                                            &err),
                         -EINVAL);
        assert_string_equal(err, "/etc/slotd/fleets.d/shooter.ini:7: usage.cpu: expected cores "
                                 "like 0.5 or 50% (got 'lots')");
        assert_int_equal(c->n_fleets, 0);

        /* no message wanted: still an error */
        assert_int_equal(config_parse_fleet(c, "f.ini", "[usage]\ncpu = lots\n", NULL), -EINVAL);
}

static void test_fleet_structure_errors(_unused_ void **state) {
        static const struct {
                const char *text, *expect;
        } cases[] = {
                { FLEET_MIN "[machine]\ncpus = 4\n",
                  "f.ini:6: unknown section [machine]; " FLEET_SECTIONS },
                { FLEET_MIN "[usage]\ncpus = 4\n", "f.ini:7: usage.cpus: unknown key" },
                { FLEET_MIN "[fleet]\nbuild = /bin/sh\n",
                  "f.ini:7: fleet.build: duplicate key, already set on line 2" },
                { "build = /bin/true\n",
                  "f.ini:1: build: key outside of any section; " FLEET_SECTIONS },
                { "[usage]\ncpu = 0.5\nmemory = 1G\n", "f.ini: fleet.build: required key is missing" },
                { "[fleet]\nbuild = /bin/true\n[usage]\nmemory = 1G\n",
                  "f.ini: usage.cpu: required key is missing" },
                { "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 1\n",
                  "f.ini: usage.memory: required key is missing" },
                { "", "f.ini: fleet.build: required key is missing" },
                { FLEET_MIN "[limits]\nmemory_max = 512M\n",
                  "f.ini:7: limits.memory_max: 512M is below usage.memory 1G" },
                { FLEET_MIN "[limits]\nmemory_high = 512M\n",
                  "f.ini:7: limits.memory_high: 512M is below usage.memory 1G" },
                { FLEET_MIN "[limits]\nmemory_max = 2G\nmemory_high = 2G\n",
                  "f.ini:8: limits.memory_high: 2G is not below limits.memory_max 2G" },
                { FLEET_MIN "[limits]\ncpu_max = 0.25\n",
                  "f.ini:7: limits.cpu_max: 0.25 cores is below usage.cpu 0.5" },
                { FLEET_MIN "[checks]\nquery = sqp\ninterval = 2s\n",
                  "f.ini:8: checks.query_timeout: must be shorter than checks.interval" },
                { FLEET_MIN "[checks]\nquery = a2s\ninterval = 5s\nquery_timeout = 5s\n",
                  "f.ini:9: checks.query_timeout: must be shorter than checks.interval" },
                { "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 1\nmemory = 16777215T\n[checks]\n"
                  "memory_tolerance = 16777215T\n",
                  "f.ini:7: checks.memory_tolerance: usage.memory + 2 × memory_tolerance (the "
                  "default limits.memory_max) is too large" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(config_freep) Config *c = new_config();
                _cleanup_free_ char *err = NULL;

                assert_true(config_parse_fleet(c, "f.ini", cases[i].text, &err) < 0);
                assert_int_equal(c->n_fleets, 0);
                assert_non_null(err);
                assert_string_equal(err, cases[i].expect);
        }
}

/* Region strings are bounded in bytes, not characters: server.json has room for them. */
static void test_fleet_region_length(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *text = NULL, *err = NULL;
        char region[130];

        memset(region, 'r', 128);
        region[128] = '\0';
        assert_true(asprintf(&text, FLEET_MIN "[fleet]\nregion_name = %s\n", region) > 0);
        assert_string_equal(parse_one_fleet(c, "a.ini", text)->region_name, region);

        /* control characters are refused, and escaped in the message */
        assert_int_equal(config_parse_fleet(c, "b.ini", FLEET_MIN "[fleet]\nregion_id = a\x01z\n",
                                            &err), -EINVAL);
        assert_string_equal(err, "b.ini:7: fleet.region_id: expected at most 128 bytes without "
                                 "control characters (got 'a\\x01z')");
        free(TAKE_PTR(err));
        assert_int_equal(config_parse_fleet(c, "b.ini", FLEET_MIN "[fleet]\nregion_name = a\tz\n",
                                            &err), -EINVAL);
        assert_string_equal(err, "b.ini:7: fleet.region_name: expected at most 128 bytes without "
                                 "control characters (got 'a\\x09z')");
        free(TAKE_PTR(err));

        strcpy(region + 127, "\xc3\xa9"); /* 129 bytes, 128 characters */
        free(text);
        assert_true(asprintf(&text, FLEET_MIN "[fleet]\nregion_id = %s\n", region) > 0);
        assert_int_equal(config_parse_fleet(c, "b.ini", text, &err), -EINVAL);
        assert_contains(err, "b.ini:7: fleet.region_id: expected at most 128 bytes without "
                             "control characters (got 'rrr");
}

/* checks.readiness: query when there is a probe, exec when there is none, unless set. */
static void test_fleet_readiness(_unused_ void **state) {
        static const struct {
                const char *checks;
                ReadinessSource expect;
        } cases[] = {
                { "", READINESS_EXEC },
                { "query = sqp\n", READINESS_QUERY },
                { "query = a2s\n", READINESS_QUERY },
                { "query = none\n", READINESS_EXEC },
                { "query = sqp\nreadiness = notify\n", READINESS_NOTIFY },
                { "query = sqp\nreadiness = exec\n", READINESS_EXEC },
                { "readiness = notify\n", READINESS_NOTIFY },
                { "readiness = query\nquery = a2s\n", READINESS_QUERY },
                /* checks off: the probe still decides readiness */
                { "interval = 0\nquery = sqp\n", READINESS_QUERY },
        };
        _cleanup_(config_freep) Config *c = new_config();

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *text = NULL;
                char name[16];

                snprintf(name, sizeof(name), "f%zu.ini", i);
                assert_true(asprintf(&text, FLEET_MIN "[checks]\n%s", cases[i].checks) > 0);
                assert_int_equal(parse_one_fleet(c, name, text)->readiness, cases[i].expect);
        }

        assert_string_equal(readiness_source_to_string(READINESS_NOTIFY), "notify");
        assert_string_equal(readiness_source_to_string(READINESS_QUERY), "query");
        assert_string_equal(readiness_source_to_string(READINESS_EXEC), "exec");
        assert_null(readiness_source_to_string(_READINESS_SOURCE_MAX));
        assert_int_equal(readiness_source_from_string("exec"), READINESS_EXEC);
        assert_int_equal((int) readiness_source_from_string("EXEC"), -1);
        assert_int_equal((int) readiness_source_from_string(NULL), -1);
}

/* checks.machine_fault_share: a share of the checked slots, off or 0 to judge each alone. */
static void test_fleet_machine_fault_share(_unused_ void **state) {
        static const struct {
                const char *value;
                double expect;
        } cases[] = {
                { "50%", 0.5 }, { "25%", 0.25 }, { "100%", 1.0 }, { "0%", 0.0 },
                { "off", 0.0 }, { "0", 0.0 }, { "12.5%", 0.125 },
        };
        _cleanup_(config_freep) Config *c = new_config();

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *text = NULL;
                char name[16];

                snprintf(name, sizeof(name), "m%zu.ini", i);
                assert_true(asprintf(&text, FLEET_MIN "[checks]\nmachine_fault_share = %s\n",
                                     cases[i].value) > 0);
                assert_true(double_eq(parse_one_fleet(c, name, text)->machine_fault_share,
                                      cases[i].expect));
        }
}

static void test_fleet_cross_key_ok(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        FleetConfig *f;

        f = parse_one_fleet(c, "a.ini", FLEET_MIN "[limits]\nmemory_max = 1G\ncpu_max = off\n");
        assert_int_equal(f->memory_max, UINT64_C(1) << 30);
        assert_true(f->memory_high == UINT64_MAX);
        assert_true(f->cpu_max == 0);

        f = parse_one_fleet(c, "b.ini", FLEET_MIN "[checks]\nmemory_tolerance = 0\n[limits]\n"
                                        "cpu_max = 50%\n");
        assert_int_equal(f->memory_max, UINT64_C(1) << 30);
        assert_true(double_eq(f->cpu_max, 0.5));

        f = parse_one_fleet(c, "h.ini", FLEET_MIN "[limits]\nmemory_high = 1200M\n");
        assert_int_equal(f->memory_high, UINT64_C(1200) << 20);
        f = parse_one_fleet(c, "o.ini", FLEET_MIN "[limits]\nmemory_high = off\n");
        assert_true(f->memory_high == UINT64_MAX);
        /* "max", memory.high's own word for it, is the same as off (SPEC §2) */
        f = parse_one_fleet(c, "x.ini", FLEET_MIN "[limits]\nmemory_high = max\n");
        assert_true(f->memory_high == UINT64_MAX);

        /* a slow probe is fine when there is no probe, or no checks */
        f = parse_one_fleet(c, "c.ini", FLEET_MIN "[checks]\ninterval = 1s\nquery_timeout = 5s\n");
        assert_int_equal(f->query, QUERY_NONE);
        f = parse_one_fleet(c, "d.ini", FLEET_MIN "[checks]\nquery = sqp\ninterval = 0\n");
        assert_int_equal(f->check_interval, 0);
        assert_int_equal(f->query, QUERY_SQP);
        assert_int_equal(c->n_fleets, 7);
}

static void test_fleet_names(_unused_ void **state) {
        static const char *const good[] = {
                "a", "Shooter_EU-1.prod", "0", "a..b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        };
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL;

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                _cleanup_free_ char *text = NULL;

                assert_true(asprintf(&text, FLEET_MIN "[fleet]\nname = %s\n", good[i]) > 0);
                assert_string_equal(parse_one_fleet(c, "f.ini", text)->name, good[i]);
        }
        assert_int_equal(c->n_fleets, ELEMENTSOF(good));

        /* the default from a file name that cannot be a fleet name */
        assert_int_equal(config_parse_fleet(c, "/d/my fleet.ini", FLEET_MIN, &err), -EINVAL);
        assert_string_equal(err, "/d/my fleet.ini: the file name does not make a valid fleet name "
                                 "('my fleet'; expected 1 to 64 characters from A-Z a-z 0-9 _ . -, "
                                 "not starting with '.'): rename the file or set fleet.name");
        assert_string_equal(parse_one_fleet(c, "/d/my fleet.ini",
                                            FLEET_MIN "[fleet]\nname = my-fleet\n")->name,
                            "my-fleet");
}

static void test_fleet_duplicate_names(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err1 = NULL, *err2 = NULL;

        parse_one_fleet(c, "/d/a.ini", FLEET_MIN);
        parse_one_fleet(c, "/d/b.ini", FLEET_MIN "[fleet]\nname = x\n");

        assert_int_equal(config_parse_fleet(c, "/d/c.ini", FLEET_MIN "[fleet]\nname = a\n", &err1),
                         -EEXIST);
        assert_string_equal(err1, "/d/c.ini:7: fleet.name: fleet a is already defined by /d/a.ini");
        assert_int_equal(config_parse_fleet(c, "/e/x.ini", FLEET_MIN, &err2), -EEXIST);
        assert_string_equal(err2, "/e/x.ini: fleet.name: fleet x is already defined by /d/b.ini");
        assert_int_equal(c->n_fleets, 2);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fleet_defaults),
                cmocka_unit_test(test_fleet_all_keys),
                cmocka_unit_test(test_fleet_long_args),
                cmocka_unit_test(test_fleet_bad_values),
                cmocka_unit_test(test_fleet_error_format),
                cmocka_unit_test(test_fleet_structure_errors),
                cmocka_unit_test(test_fleet_machine_fault_share),
                cmocka_unit_test(test_fleet_cross_key_ok),
                cmocka_unit_test(test_fleet_names),
                cmocka_unit_test(test_fleet_duplicate_names),
                cmocka_unit_test(test_fleet_region_length),
                cmocka_unit_test(test_fleet_readiness),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
