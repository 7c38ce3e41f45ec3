/* SPDX-License-Identifier: MIT */
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

static Config *new_config(void) {
        Config *c = config_new();

        assert_non_null(c);
        return c;
}

static bool double_eq(double a, double b) {
        return a - b < 1e-9 && b - a < 1e-9;
}

static void check_machine_error(const char *text, const char *expect) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL;

        assert_true(config_parse_machine(c, "m.ini", text, &err) < 0);
        assert_non_null(err);
        assert_string_equal(err, expect);
}

/* Parses a fleet whose line 2 is "key = value" of [section]; the required keys the test does
 * not replace follow. */
static int parse_fleet_with(Config *c, const char *section, const char *key, const char *value,
                            char **err) {
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

static void check_fleet_value_error(const char *section, const char *key, const char *value,
                                    const char *what) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL, *expect = NULL;

        assert_true(parse_fleet_with(c, section, key, value, &err) < 0);
        assert_int_equal(c->n_fleets, 0);
        assert_true(asprintf(&expect, "f.ini:2: %s.%s: %s (got '%s')", section, key, what,
                             value) > 0);
        assert_non_null(err);
        assert_string_equal(err, expect);
}

static FleetConfig *parse_one_fleet(Config *c, const char *name, const char *text) {
        _cleanup_free_ char *err = NULL;
        int r;

        r = config_parse_fleet(c, name, text, &err);
        if (r < 0)
                print_error("unexpected error: %s\n", err ?: "(null)");
        assert_int_equal(r, 0);
        assert_null(err);
        return &c->fleets[c->n_fleets - 1];
}

static void test_machine_defaults(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_parse_machine(c, "m.ini", "; nothing but a comment\n", &err), 0);
        assert_null(err);

        assert_null(c->machine_id);
        assert_null(c->ip);
        assert_null(c->ipv6);
        assert_true(c->cpus == 0);
        assert_int_equal(c->memory, 0);
        assert_true(c->reserved_cpus == 0);
        assert_int_equal(c->reserved_memory, 0);
        assert_int_equal(c->idle_ttl, 30 * USEC_PER_MINUTE);
        assert_null(c->cgroup);
        assert_string_equal(c->state_dir, "/var/lib/slotd");
        assert_string_equal(c->slots_dir, "/var/lib/slotd/slots");
        assert_string_equal(c->bus, "system");
        assert_null(c->admin_group);
        assert_int_equal(c->n_fleets, 0);
        assert_null(c->fleets);
        assert_int_equal(c->reserved_cpus_line, 0);
        assert_int_equal(c->reserved_memory_line, 0);
}

static void test_machine_all_keys(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL;
        const char *text =
                "; slotd.ini\n"
                "[machine]\n"
                "id = 0123456789abcdef0123456789abcdef\n"
                "ip = 192.0.2.10\n"
                "ipv6 = 2001:db8::10\n"
                "cpus = 12.5\n"
                "memory = 64G\n"
                "reserved_cpus = 50%\n"
                "reserved_memory = 2G\n"
                "idle_ttl = 2h\n"
                "\n"
                "[supervisor]\n"
                "cgroup = /sys/fs/cgroup/slotd.slice//slots/\n"
                "state_dir = /srv//slotd/\n"
                "bus = unix:path=/run/slotd/bus\n"
                "admin_group = gameops\n";

        assert_int_equal(config_parse_machine(c, "m.ini", text, &err), 0);
        assert_null(err);

        assert_string_equal(c->machine_id, "0123456789abcdef0123456789abcdef");
        assert_string_equal(c->ip, "192.0.2.10");
        assert_string_equal(c->ipv6, "2001:db8::10");
        assert_true(double_eq(c->cpus, 12.5));
        assert_int_equal(c->memory, UINT64_C(64) << 30);
        assert_true(double_eq(c->reserved_cpus, 0.5));
        assert_int_equal(c->reserved_memory, UINT64_C(2) << 30);
        assert_int_equal(c->idle_ttl, 2 * USEC_PER_HOUR);
        assert_string_equal(c->cgroup, "/sys/fs/cgroup/slotd.slice/slots");
        assert_string_equal(c->state_dir, "/srv/slotd");
        /* follows state_dir when not set itself */
        assert_string_equal(c->slots_dir, "/srv/slotd/slots");
        assert_string_equal(c->bus, "unix:path=/run/slotd/bus");
        assert_string_equal(c->admin_group, "gameops");
        assert_int_equal(c->reserved_cpus_line, 8);
        assert_int_equal(c->reserved_memory_line, 9);
}

static void test_machine_slots_dir(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_(config_freep) Config *d = new_config();
        _cleanup_(config_freep) Config *e = new_config();

        assert_int_equal(config_parse_machine(c, "m.ini",
                                              "[supervisor]\nslots_dir = /data/slots\n"
                                              "state_dir = /srv/slotd\n",
                                              NULL),
                         0);
        assert_string_equal(c->state_dir, "/srv/slotd");
        assert_string_equal(c->slots_dir, "/data/slots");

        assert_int_equal(config_parse_machine(d, "m.ini", "[supervisor]\nstate_dir = /\n", NULL), 0);
        assert_string_equal(d->state_dir, "/");
        assert_string_equal(d->slots_dir, "/slots");

        assert_int_equal(config_parse_machine(e, "m.ini", "[supervisor]\nslots_dir = /s\n", NULL), 0);
        assert_string_equal(e->state_dir, "/var/lib/slotd");
        assert_string_equal(e->slots_dir, "/s");
}

static void test_machine_bad_values(_unused_ void **state) {
        static const struct {
                const char *section, *key, *value, *what;
        } cases[] = {
                { "machine", "id", "", "must not be empty" },
                { "machine", "ip", "10.0.0.300", "expected an IPv4 address like 192.0.2.10" },
                { "machine", "ip", "::1", "expected an IPv4 address like 192.0.2.10" },
                { "machine", "ip", "gameserver.local", "expected an IPv4 address like 192.0.2.10" },
                { "machine", "ipv6", "10.0.0.1", "expected an IPv6 address like 2001:db8::10" },
                { "machine", "ipv6", "2001:db8::g", "expected an IPv6 address like 2001:db8::10" },
                { "machine", "cpus", "0", "must be more than 0 and at most 1000000 cores" },
                { "machine", "cpus", "many", "expected cores like 0.5 or 50%" },
                { "machine", "cpus", "10 %", "expected cores like 0.5 or 50%" },
                { "machine", "memory", "0", "must be greater than 0" },
                { "machine", "memory", "lots", "expected a size like 512K, 200M or 2G" },
                { "machine", "memory", "99999999999999999999G", "size too large" },
                { "machine", "reserved_cpus", "-1", "expected cores like 0.5 or 50%" },
                { "machine", "reserved_cpus", "1000001", "must be at most 1000000 cores" },
                { "machine", "reserved_memory", "1x", "expected a size like 512K, 200M or 2G" },
                { "machine", "reserved_memory", "-1G", "expected a size like 512K, 200M or 2G" },
                { "machine", "idle_ttl", "0", "must be greater than 0" },
                { "machine", "idle_ttl", "forever", "expected a duration like 250ms, 10s, 5m or 1h" },
                { "machine", "idle_ttl", "99999999999999999999h", "duration too large" },
                { "supervisor", "cgroup", "slots", "expected an absolute path" },
                { "supervisor", "state_dir", "var/lib/slotd", "expected an absolute path" },
                { "supervisor", "slots_dir", "", "expected an absolute path" },
                { "supervisor", "bus", "", "must not be empty" },
                { "supervisor", "admin_group", "", "must not be empty" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *text = NULL, *expect = NULL;

                assert_true(asprintf(&text, "; line 1\n\n[%s]\n%s = %s\n", cases[i].section,
                                     cases[i].key, cases[i].value) > 0);
                assert_true(asprintf(&expect, "m.ini:4: %s.%s: %s (got '%s')", cases[i].section,
                                     cases[i].key, cases[i].what, cases[i].value) > 0);
                check_machine_error(text, expect);
        }
}

static void test_structure_errors(_unused_ void **state) {
        _cleanup_free_ char *long_line = NULL, *expect = NULL;

        check_machine_error("[machine]\nfoo = 1\n", "m.ini:2: machine.foo: unknown key");
        check_machine_error("[machine]\nCPUS = 1\n", "m.ini:2: machine.CPUS: unknown key");
        check_machine_error("[fleet]\nbuild = /bin/true\n",
                            "m.ini:1: unknown section [fleet]; slotd.ini has [machine] and "
                            "[supervisor]");
        /* found even without keys in it */
        check_machine_error("[machine]\ncpus = 2\n[nosuch]\n",
                            "m.ini:3: unknown section [nosuch]; slotd.ini has [machine] and "
                            "[supervisor]");
        check_machine_error("[ machine ]\ncpus = 2\n",
                            "m.ini:1: unknown section [ machine ]; slotd.ini has [machine] and "
                            "[supervisor]");
        check_machine_error("cpus = 4\n",
                            "m.ini:1: cpus: key outside of any section; slotd.ini has [machine] "
                            "and [supervisor]");
        check_machine_error("[machine]\ncpus = 4\n\n[machine]\ncpus = 8\n",
                            "m.ini:5: machine.cpus: duplicate key, already set on line 2");
        check_machine_error("[machine]\ncpus = 4\ncpus = 4\n",
                            "m.ini:3: machine.cpus: duplicate key, already set on line 2");
        check_machine_error("[machine]\ncpus 4\n",
                            "m.ini:2: syntax error: expected [section], key = value, or a comment");
        check_machine_error("[machine\ncpus = 4\n",
                            "m.ini:1: syntax error: expected [section], key = value, or a comment");
        /* an indented line is not a continuation of the key before it */
        check_machine_error("[machine]\nid = a\n  b\n",
                            "m.ini:3: syntax error: expected [section], key = value, or a comment");
        /* '#' only starts a comment at the start of a line */
        check_machine_error("[machine]\ncpus = 4 # four\n",
                            "m.ini:2: machine.cpus: expected cores like 0.5 or 50% (got '4 # four')");
        /* control characters and stray bytes are escaped in messages */
        check_machine_error("[machine]\ncpus = a\x01z\n",
                            "m.ini:2: machine.cpus: expected cores like 0.5 or 50% (got 'a\\x01z')");
        check_machine_error("[machine]\nid = ab\xff" "cd\n",
                            "m.ini:2: machine.id: not valid UTF-8 (got 'ab\\xffcd')");
        check_machine_error("[machine]\nid = \xc0\xaf\n",
                            "m.ini:2: machine.id: not valid UTF-8 (got '\\xc0\\xaf')");
        check_machine_error("[machine]\nid = \xed\xa0\x80\n",
                            "m.ini:2: machine.id: not valid UTF-8 (got '\\xed\\xa0\\x80')");

        long_line = malloc(5000);
        assert_non_null(long_line);
        memcpy(long_line, "[machine]\nid = ", 15);
        memset(long_line + 15, 'x', 4500);
        strcpy(long_line + 4515, "\n");
        check_machine_error(long_line, "m.ini:2: line too long (at most 4096 characters)");

        /* a long bad value is quoted only in part */
        memcpy(long_line, "[machine]\ncpus=", 15);
        memset(long_line + 15, '9', 150);
        strcpy(long_line + 165, "x\n");
        assert_true(asprintf(&expect,
                             "m.ini:2: machine.cpus: expected cores like 0.5 or 50%% (got '%.100s...')",
                             long_line + 15) > 0);
        check_machine_error(long_line, expect);
}

static void test_syntax_accepted(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_(config_freep) Config *d = new_config();
        _cleanup_(config_freep) Config *e = new_config();

        assert_int_equal(config_parse_machine(c, "m.ini",
                                              "# comment\n"
                                              "; comment\n"
                                              "[machine]\n"
                                              "  cpus = 4 ; four cores\n"
                                              "memory: 8G\n"
                                              "id=x;y\n",
                                              NULL),
                         0);
        assert_true(double_eq(c->cpus, 4));
        assert_int_equal(c->memory, UINT64_C(8) << 30);
        assert_string_equal(c->machine_id, "x;y");

        assert_int_equal(config_parse_machine(d, "m.ini", "[machine]\r\ncpus = 3\r\n", NULL), 0);
        assert_true(double_eq(d->cpus, 3));

        assert_int_equal(config_parse_machine(e, "m.ini", "\xef\xbb\xbf[machine]\ncpus = 5", NULL),
                         0);
        assert_true(double_eq(e->cpus, 5));
}

static void test_too_large(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *text = NULL, *err = NULL;
        size_t n = 1024 * 1024 + 1;

        text = malloc(n + 1);
        assert_non_null(text);
        memset(text, '\n', n);
        text[n] = '\0';
        assert_int_equal(config_parse_machine(c, "m.ini", text, &err), -EFBIG);
        assert_string_equal(err, "m.ini: file too large (1048577 bytes, at most 1048576)");

        /* exactly 1 MiB is fine */
        text[n - 1] = '\0';
        assert_int_equal(config_parse_machine(c, "m.ini", text, NULL), 0);
}

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
        assert_int_equal(f->check_signal, SIGSEGV);
        assert_int_equal(f->query, QUERY_NONE);
        assert_int_equal(f->query_timeout, 2 * USEC_PER_SEC);
        assert_int_equal(f->heartbeat, 0);
        assert_int_equal(f->start_timeout, 0);
        assert_int_equal(f->crash_restarts, 1);
        assert_int_equal(f->crash_window, 30 * USEC_PER_MINUTE);
        assert_true(f->pre_recovery);
        assert_int_equal(f->memory_max, (UINT64_C(1) << 30) + 2 * (UINT64_C(200) << 20));
        assert_true(f->cpu_max == 0);
        assert_int_equal(f->pids_max, 4096);
        assert_int_equal(f->build_line, 3);
        assert_int_equal(f->usage_servers_line, 0);
        assert_int_equal(f->game_port_base_line, 0);
        assert_int_equal(f->query_port_base_line, 0);
        assert_int_equal(f->slots, 0);

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
                "pids = 512\n";

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
                { "fleet", "args", "-port ${PORTS}", "unknown or malformed variable at '${PORTS}'; known: ${PORT} ${QUERY_PORT} ${SERVER_ID} ${ALLOCATION_UUID} ${SERVER_LOG_DIR} ${HOME} ${BUILD_CONFIGURATION}" },
                { "fleet", "environment", "A=${", "unknown or malformed variable at '${'; known: ${PORT} ${QUERY_PORT} ${SERVER_ID} ${ALLOCATION_UUID} ${SERVER_LOG_DIR} ${HOME} ${BUILD_CONFIGURATION}" },
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
                { "fleet", "build_configuration", "", "must not be empty" },
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
                { "security", "seccomp", "strict", "expected default, off, or the absolute path of an allow-list" },
                { "security", "seccomp_action", "trap", "expected eperm or kill" },
                { "crash", "restarts", "x", "expected an integer between 0 and 63" },
                { "crash", "window", "0", "must be greater than 0" },
                { "crash", "pre_recovery", "2", "expected yes or no" },
                { "limits", "memory_max", "0", "must be greater than 0" },
                { "limits", "memory_max", "1.5G", "expected a size like 512K, 200M or 2G" },
                { "limits", "cpu_max", "none", "expected cores like 0.5 or 50%, or 'off'" },
                { "limits", "cpu_max", "0", "must be more than 0 and at most 1000000 cores, or 'off'" },
                { "limits", "pids", "0", "expected an integer between 1 and 4194304" },
                { "limits", "pids", "4194305", "expected an integer between 1 and 4194304" },
                { "limits", "pids", "max", "expected an integer between 1 and 4194304" },
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
                  "f.ini:6: unknown section [machine]; a fleet file has [fleet], [usage], [ports], "
                  "[checks], [crash], [limits] and [security]" },
                { FLEET_MIN "[usage]\ncpus = 4\n", "f.ini:7: usage.cpus: unknown key" },
                { FLEET_MIN "[fleet]\nbuild = /bin/sh\n",
                  "f.ini:7: fleet.build: duplicate key, already set on line 2" },
                { "build = /bin/true\n",
                  "f.ini:1: build: key outside of any section; a fleet file has [fleet], [usage], "
                  "[ports], [checks], [crash], [limits] and [security]" },
                { "[usage]\ncpu = 0.5\nmemory = 1G\n", "f.ini: fleet.build: required key is missing" },
                { "[fleet]\nbuild = /bin/true\n[usage]\nmemory = 1G\n",
                  "f.ini: usage.cpu: required key is missing" },
                { "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 1\n",
                  "f.ini: usage.memory: required key is missing" },
                { "", "f.ini: fleet.build: required key is missing" },
                { FLEET_MIN "[limits]\nmemory_max = 512M\n",
                  "f.ini:7: limits.memory_max: 512M is below usage.memory 1G" },
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

static void test_fleet_cross_key_ok(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        FleetConfig *f;

        f = parse_one_fleet(c, "a.ini", FLEET_MIN "[limits]\nmemory_max = 1G\ncpu_max = off\n");
        assert_int_equal(f->memory_max, UINT64_C(1) << 30);
        assert_true(f->cpu_max == 0);

        f = parse_one_fleet(c, "b.ini", FLEET_MIN "[checks]\nmemory_tolerance = 0\n[limits]\n"
                                        "cpu_max = 50%\n");
        assert_int_equal(f->memory_max, UINT64_C(1) << 30);
        assert_true(double_eq(f->cpu_max, 0.5));

        /* a slow probe is fine when there is no probe, or no checks */
        f = parse_one_fleet(c, "c.ini", FLEET_MIN "[checks]\ninterval = 1s\nquery_timeout = 5s\n");
        assert_int_equal(f->query, QUERY_NONE);
        f = parse_one_fleet(c, "d.ini", FLEET_MIN "[checks]\nquery = sqp\ninterval = 0\n");
        assert_int_equal(f->check_interval, 0);
        assert_int_equal(f->query, QUERY_SQP);
        assert_int_equal(c->n_fleets, 4);
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

/* Temporary directories for config_load(). */

static char *make_tmpdir(void) {
        char *d = strdup("/tmp/test-config-XXXXXX");

        assert_non_null(d);
        assert_non_null(mkdtemp(d));
        return d;
}

static int rm_one(const char *path, _unused_ const struct stat *st, _unused_ int flag,
                  _unused_ struct FTW *ftw) {
        return remove(path);
}

static void rm_rf(char *dir) {
        if (!dir)
                return;
        assert_int_equal(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
        free(dir);
}

static void rm_rfp(char **dir) {
        rm_rf(*dir);
}

static void write_file_n(const char *dir, const char *name, const char *data, size_t n,
                         mode_t mode) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;

        assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, n), (ssize_t) n);
}

static void write_file(const char *dir, const char *name, const char *data) {
        write_file_n(dir, name, data, strlen(data), 0644);
}

static char *path_join(const char *a, const char *b) {
        char *p;

        assert_true(asprintf(&p, "%s/%s", a, b) > 0);
        return p;
}

static void test_load(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *ini = path_join(dir, "slotd.ini"), *fleets = path_join(dir, "fleets.d");
        _cleanup_free_ char *sub = NULL, *fa = NULL, *fb = NULL, *fz = NULL, *slash = NULL;
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *err = NULL;

        write_file(dir, "slotd.ini", "[machine]\ncpus = 8\n[supervisor]\nbus = session\n");
        assert_int_equal(mkdir(fleets, 0755), 0);
        write_file(fleets, "b.ini", FLEET_MIN);
        write_file(fleets, "a.ini", FLEET_MIN "[ports]\ngame_base = 7000\nquery_base = 7500\n");
        write_file(fleets, "10-z.ini", FLEET_MIN "[fleet]\nname = zed\n");
        /* not fleets: dotfiles, other suffixes, a bare ".ini" */
        write_file(fleets, ".hidden.ini", "garbage");
        write_file(fleets, "README", "garbage");
        write_file(fleets, "c.ini.bak", "garbage");
        write_file(fleets, "d.ini~", "garbage");
        write_file(fleets, ".ini", "garbage");
        sub = path_join(fleets, "sub");
        assert_int_equal(mkdir(sub, 0755), 0);

        assert_int_equal(config_load(ini, fleets, &c, &err), 0);
        assert_null(err);
        assert_string_equal(c->config_file, ini);
        assert_string_equal(c->fleets_dir, fleets);
        assert_true(double_eq(c->cpus, 8));
        assert_string_equal(c->bus, "session");

        assert_int_equal(c->n_fleets, 3);
        fz = path_join(fleets, "10-z.ini");
        fa = path_join(fleets, "a.ini");
        fb = path_join(fleets, "b.ini");
        assert_string_equal(c->fleets[0].name, "zed");
        assert_string_equal(c->fleets[0].file, fz);
        assert_string_equal(c->fleets[1].name, "a");
        assert_string_equal(c->fleets[1].file, fa);
        assert_int_equal(c->fleets[1].game_port_base, 7000);
        assert_int_equal(c->fleets[1].game_port_base_line, 7);
        assert_int_equal(c->fleets[1].query_port_base_line, 8);
        assert_string_equal(c->fleets[2].name, "b");
        assert_string_equal(c->fleets[2].file, fb);
        config_free(TAKE_PTR(c));

        /* a trailing slash on the directory does not double up in file names */
        slash = path_join(fleets, "");
        assert_int_equal(config_load(ini, slash, &c, NULL), 0);
        assert_string_equal(c->fleets_dir, fleets);
        assert_string_equal(c->fleets[1].file, fa);
}

static void test_load_missing(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *ini = path_join(dir, "slotd.ini"), *fleets = path_join(dir, "fleets.d");
        _cleanup_(config_freep) Config *c = NULL, *d = NULL;

        assert_int_equal(config_load(ini, fleets, &c, NULL), 0);
        assert_string_equal(c->config_file, ini);
        assert_string_equal(c->state_dir, "/var/lib/slotd");
        assert_string_equal(c->slots_dir, "/var/lib/slotd/slots");
        assert_string_equal(c->bus, "system");
        assert_int_equal(c->idle_ttl, 30 * USEC_PER_MINUTE);
        assert_int_equal(c->n_fleets, 0);

        assert_int_equal(config_load(NULL, NULL, &d, NULL), 0);
        assert_null(d->config_file);
        assert_null(d->fleets_dir);
        assert_int_equal(d->n_fleets, 0);
}

static void check_load_error(const char *ini, const char *fleets, int expect_r, const char *expect) {
        Config *c = (Config *) 0x1;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_load(ini, fleets, &c, &err), expect_r);
        /* ret untouched on failure */
        assert_ptr_equal(c, (Config *) 0x1);
        assert_non_null(err);
        assert_string_equal(err, expect);
}

static void test_load_errors(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *ini = path_join(dir, "slotd.ini"), *fleets = path_join(dir, "fleets.d");
        _cleanup_free_ char *big = NULL, *expect = NULL, *isdir = NULL;
        size_t n = 1024 * 1024 + 1;

        /* a bad slotd.ini */
        write_file(dir, "slotd.ini", "[machine]\n\ncpus = lots\n");
        assert_true(asprintf(&expect, "%s:3: machine.cpus: expected cores like 0.5 or 50%% "
                                      "(got 'lots')", ini) > 0);
        check_load_error(ini, NULL, -EINVAL, expect);
        free(TAKE_PTR(expect));
        write_file(dir, "slotd.ini", "[machine]\ncpus = 8\n");

        /* a bad fleet after a good one */
        assert_int_equal(mkdir(fleets, 0755), 0);
        write_file(fleets, "a.ini", FLEET_MIN);
        write_file(fleets, "b.ini", "[fleet]\nbuild = /bin/true\n[usage]\ncpu = lots\n");
        assert_true(asprintf(&expect, "%s/b.ini:4: usage.cpu: expected cores like 0.5 or 50%% "
                                      "(got 'lots')", fleets) > 0);
        check_load_error(ini, fleets, -EINVAL, expect);
        free(TAKE_PTR(expect));

        /* a NUL byte would end inih's line early */
        write_file_n(fleets, "b.ini", "[usage]\ncpu = 0\0.5\n", 19, 0644);
        assert_true(asprintf(&expect, "%s/b.ini:2: line contains a NUL byte", fleets) > 0);
        check_load_error(ini, fleets, -EINVAL, expect);
        free(TAKE_PTR(expect));

        /* not UTF-8 */
        write_file(fleets, "b.ini", FLEET_MIN "[fleet]\nuser = \xc3\x28\n");
        assert_true(asprintf(&expect, "%s/b.ini:7: fleet.user: not valid UTF-8 (got '\\xc3(')",
                             fleets) > 0);
        check_load_error(ini, fleets, -EILSEQ, expect);
        free(TAKE_PTR(expect));

        /* over 1 MiB */
        big = malloc(n);
        assert_non_null(big);
        memset(big, '\n', n);
        write_file_n(fleets, "b.ini", big, n, 0644);
        assert_true(asprintf(&expect, "%s/b.ini: file too large (1048577 bytes, at most 1048576)",
                             fleets) > 0);
        check_load_error(ini, fleets, -EFBIG, expect);
        free(TAKE_PTR(expect));
        write_file(fleets, "b.ini", FLEET_MIN "[fleet]\nname = bee\n");

        /* a directory named like a fleet */
        isdir = path_join(fleets, "c.ini");
        assert_int_equal(mkdir(isdir, 0755), 0);
        assert_true(asprintf(&expect, "%s: not a regular file", isdir) > 0);
        check_load_error(ini, fleets, -EINVAL, expect);
        free(TAKE_PTR(expect));
        assert_int_equal(rmdir(isdir), 0);

        /* fleets.d that is a file */
        assert_true(asprintf(&expect, "%s: cannot open directory: Not a directory", ini) > 0);
        check_load_error(ini, ini, -ENOTDIR, expect);
        free(TAKE_PTR(expect));

        /* two files, one fleet name */
        write_file(fleets, "c.ini", FLEET_MIN "\n[fleet]\nname = bee\n");
        assert_true(asprintf(&expect, "%s/c.ini:8: fleet.name: fleet bee is already defined by "
                                      "%s/b.ini", fleets, fleets) > 0);
        check_load_error(ini, fleets, -EEXIST, expect);
}

static void build_two_fleets(Config *c, const char *a_extra, const char *b_extra,
                             unsigned a_slots, unsigned b_slots) {
        _cleanup_free_ char *ta = NULL, *tb = NULL;

        assert_true(asprintf(&ta, FLEET_MIN "%s", a_extra) > 0);
        assert_true(asprintf(&tb, FLEET_MIN "%s", b_extra) > 0);
        parse_one_fleet(c, "/d/a.ini", ta)->slots = a_slots;
        parse_one_fleet(c, "/d/b.ini", tb)->slots = b_slots;
}

static void check_validate(Config *c, int expect_r, const char *expect) {
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_validate(c, &err), expect_r);
        if (expect)
                assert_string_equal(err, expect);
        else
                assert_null(err);
}

static void test_validate_ports(_unused_ void **state) {
        static const struct {
                const char *a, *b;
                unsigned a_slots, b_slots;
                int r;
                const char *expect;
        } cases[] = {
                /* defaults: 9000.. and 9600.. */
                { "", "", 10, 10, -EADDRINUSE,
                  "/d/b.ini: ports.game_base: ports 9000-9009 of fleet b overlap ports.game_base "
                  "9000-9009 of fleet a (/d/a.ini)" },
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

/* The shipped examples must parse, and say what the parser does by default. */
static void test_examples(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_load(SOURCE_ROOT "/config/slotd.ini", SOURCE_ROOT "/config/fleets.d",
                                     &c, &err), 0);
        assert_null(err);
        assert_string_equal(c->state_dir, "/var/lib/slotd");
        assert_int_equal(c->n_fleets, 1);
        assert_string_equal(c->fleets[0].name, "example");
        assert_true(c->fleets[0].build[0] == '/');
        assert_true(c->fleets[0].seccomp);
        assert_null(c->fleets[0].seccomp_list);
        assert_int_equal(c->fleets[0].nofile, 65536);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_machine_defaults),
                cmocka_unit_test(test_machine_all_keys),
                cmocka_unit_test(test_machine_slots_dir),
                cmocka_unit_test(test_machine_bad_values),
                cmocka_unit_test(test_structure_errors),
                cmocka_unit_test(test_syntax_accepted),
                cmocka_unit_test(test_too_large),
                cmocka_unit_test(test_fleet_defaults),
                cmocka_unit_test(test_fleet_all_keys),
                cmocka_unit_test(test_fleet_long_args),
                cmocka_unit_test(test_fleet_bad_values),
                cmocka_unit_test(test_fleet_error_format),
                cmocka_unit_test(test_fleet_structure_errors),
                cmocka_unit_test(test_fleet_cross_key_ok),
                cmocka_unit_test(test_fleet_names),
                cmocka_unit_test(test_fleet_duplicate_names),
                cmocka_unit_test(test_load),
                cmocka_unit_test(test_load_missing),
                cmocka_unit_test(test_load_errors),
                cmocka_unit_test(test_validate_ports),
                cmocka_unit_test(test_validate_build),
                cmocka_unit_test(test_validate_names),
                cmocka_unit_test(test_load_full),
                cmocka_unit_test(test_examples),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
