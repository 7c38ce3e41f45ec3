/* SPDX-License-Identifier: MIT */
/* [build_configuration ID] sections of fleet files: inheritance from [fleet] and [checks],
 * the default configuration first, variables, checks.readiness, lookup and comparison. */
#include "test-config-util.h"

/* A fleet with three sections; its default (ranked) is the second one in the file. */
static const char three_sections[] =
        "[fleet]\n"                                         /* 1 */
        "build = /bin/true\n"
        "args = -port ${PORT}\n"
        "environment = MODE=fleet\n"
        "build_configuration = ranked\n"                    /* 5 */
        "[usage]\n"
        "cpu = 0.5\n"
        "memory = 1G\n"
        "[checks]\n"
        "query = sqp\n"                                     /* 10 */
        "[build_configuration casual]\n"
        "build = /bin/false\n"
        "args = -casual ${BUILD_CONFIGURATION}\n"
        "\n"
        "[build_configuration ranked]\n"                    /* 15 */
        "variables.map = de_dust 2\n"
        "variables.max-players.v2 = 10\n"
        "[build_configuration 1234]\n"
        "environment = MODE=numeric \"MOTD=hi there\"\n"
        "query = a2s\n"                                     /* 20 */
        "variables.empty =\n";

static void assert_strv(char **l, const char *const *expect, size_t n) {
        assert_non_null(l);
        assert_int_equal(strv_length(l), n);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(l[i], expect[i]);
}

static void test_build_without_sections(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        const BuildConfig *b;
        FleetConfig *f;

        f = parse_one_fleet(c, "f.ini", FLEET_MIN "[fleet]\nargs = -x ${PORT}\n"
                                                  "environment = A=1\n[checks]\nquery = a2s\n");
        assert_int_equal(f->n_build_configs, 1);
        b = &f->build_configs[0];
        assert_string_equal(b->id, "default");
        assert_string_equal(b->build, "/bin/true");
        assert_strv(b->args, (const char *[]) { "-x", "${PORT}" }, 2);
        assert_strv(b->environment, (const char *[]) { "A=1" }, 1);
        assert_ptr_not_equal(b->args, f->args); /* a copy: each frees its own */
        assert_int_equal(b->query, QUERY_A2S);
        assert_strv(b->variable_names, NULL, 0);
        assert_strv(b->variable_values, NULL, 0);
        assert_int_equal(b->n_variables, 0);
        assert_int_equal(b->line, 0);
        assert_int_equal(b->build_line, 0);

        /* Any ID runs the fleet's build, as before there were sections. */
        assert_ptr_equal(fleet_config_find_build(f, NULL), b);
        assert_ptr_equal(fleet_config_find_build(f, ""), b);
        assert_ptr_equal(fleet_config_find_build(f, "default"), b);
        assert_ptr_equal(fleet_config_find_build(f, "anything-else"), b);

        /* fleet.build_configuration names the one entry. */
        f = parse_one_fleet(c, "g.ini", FLEET_MIN "[fleet]\nbuild_configuration = 7:a.b_c-d\n");
        assert_int_equal(f->n_build_configs, 1);
        assert_string_equal(f->build_configs[0].id, "7:a.b_c-d");
        assert_ptr_equal(fleet_config_find_build(f, "x"), &f->build_configs[0]);
}

static void test_build_sections(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        const BuildConfig *b;
        FleetConfig *f;

        f = parse_one_fleet(c, "f.ini", three_sections);
        assert_int_equal(f->n_build_configs, 3);

        /* The default first, merged with its section; the others in file order. */
        b = &f->build_configs[0];
        assert_string_equal(b->id, "ranked");
        assert_int_equal(b->line, 15);
        assert_string_equal(b->build, "/bin/true");
        assert_int_equal(b->build_line, 0);
        assert_strv(b->args, (const char *[]) { "-port", "${PORT}" }, 2);
        assert_strv(b->environment, (const char *[]) { "MODE=fleet" }, 1);
        assert_int_equal(b->query, QUERY_SQP);
        assert_int_equal(b->n_variables, 2);
        assert_strv(b->variable_names, (const char *[]) { "map", "max-players.v2" }, 2);
        assert_strv(b->variable_values, (const char *[]) { "de_dust 2", "10" }, 2);

        b = &f->build_configs[1];
        assert_string_equal(b->id, "casual");
        assert_int_equal(b->line, 11);
        assert_string_equal(b->build, "/bin/false");
        assert_int_equal(b->build_line, 12);
        assert_strv(b->args, (const char *[]) { "-casual", "${BUILD_CONFIGURATION}" }, 2);
        assert_strv(b->environment, (const char *[]) { "MODE=fleet" }, 1);
        assert_int_equal(b->query, QUERY_SQP);
        assert_int_equal(b->n_variables, 0);
        assert_strv(b->variable_names, NULL, 0);

        b = &f->build_configs[2];
        assert_string_equal(b->id, "1234");
        assert_int_equal(b->line, 18);
        assert_string_equal(b->build, "/bin/true");
        assert_strv(b->args, (const char *[]) { "-port", "${PORT}" }, 2);
        assert_strv(b->environment, (const char *[]) { "MODE=numeric", "MOTD=hi there" }, 2);
        assert_int_equal(b->query, QUERY_A2S);
        assert_strv(b->variable_names, (const char *[]) { "empty" }, 1);
        assert_strv(b->variable_values, (const char *[]) { "" }, 1);

        /* The [fleet] keys keep their own values. */
        assert_string_equal(f->build, "/bin/true");
        assert_string_equal(f->build_configuration, "ranked");
        assert_int_equal(f->query, QUERY_SQP);
        assert_int_equal(f->readiness, READINESS_QUERY);

        assert_ptr_equal(fleet_config_find_build(f, NULL), &f->build_configs[0]);
        assert_ptr_equal(fleet_config_find_build(f, ""), &f->build_configs[0]);
        assert_ptr_equal(fleet_config_find_build(f, "ranked"), &f->build_configs[0]);
        assert_ptr_equal(fleet_config_find_build(f, "casual"), &f->build_configs[1]);
        assert_ptr_equal(fleet_config_find_build(f, "1234"), &f->build_configs[2]);
        assert_null(fleet_config_find_build(f, "default"));
        assert_null(fleet_config_find_build(f, "CASUAL"));
}

/* No section names the default: it is made from [fleet] and put first. */
static void test_build_default_made(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        FleetConfig *f;

        f = parse_one_fleet(c, "f.ini", FLEET_MIN "[build_configuration b]\nbuild = /bin/sh\n"
                                                  "[build_configuration a]\nargs = -a\n");
        assert_int_equal(f->n_build_configs, 3);
        assert_string_equal(f->build_configs[0].id, "default");
        assert_int_equal(f->build_configs[0].line, 0);
        assert_string_equal(f->build_configs[0].build, "/bin/true");
        assert_string_equal(f->build_configs[1].id, "b");
        assert_string_equal(f->build_configs[1].build, "/bin/sh");
        assert_string_equal(f->build_configs[2].id, "a");
        assert_string_equal(f->build_configs[2].build, "/bin/true");
        assert_strv(f->build_configs[2].args, (const char *[]) { "-a" }, 1);

        /* With sections, an ID none of them has is refused; the default's is not. */
        assert_ptr_equal(fleet_config_find_build(f, "default"), &f->build_configs[0]);
        assert_ptr_equal(fleet_config_find_build(f, "a"), &f->build_configs[2]);
        assert_null(fleet_config_find_build(f, "c"));
}

/* A section of the default configuration alone counts as having sections. */
static void test_build_default_section_only(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        FleetConfig *f;

        f = parse_one_fleet(c, "f.ini", FLEET_MIN "[build_configuration default]\n"
                                                  "variables.mode = x\n");
        assert_int_equal(f->n_build_configs, 1);
        assert_int_equal(f->build_configs[0].line, 6);
        assert_non_null(fleet_config_find_build(f, "default"));
        assert_null(fleet_config_find_build(f, "other"));
}

/* fleet.build may come from the default configuration's section alone. */
static void test_build_fleet_build_from_section(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL;
        FleetConfig *f;

        f = parse_one_fleet(c, "f.ini", "[usage]\ncpu = 1\nmemory = 1G\n"
                                        "[build_configuration other]\nargs = -o\n"
                                        "[build_configuration default]\nbuild = /bin/sh\n");
        assert_string_equal(f->build, "/bin/sh");
        assert_int_equal(f->build_line, 0);
        assert_string_equal(f->build_configs[0].id, "default");
        assert_int_equal(f->build_configs[0].build_line, 7);
        assert_string_equal(f->build_configs[1].build, "/bin/sh");

        /* Another section's build does not make one for the fleet. */
        assert_int_equal(config_parse_fleet(c, "g.ini", "[usage]\ncpu = 1\nmemory = 1G\n"
                                                        "[build_configuration x]\n"
                                                        "build = /bin/sh\n", &err), -EINVAL);
        assert_string_equal(err, "g.ini: fleet.build: required key is missing");
        free(TAKE_PTR(err));

        /* Nor does the default section without one; the other required keys still count. */
        assert_int_equal(config_parse_fleet(c, "h.ini", "[build_configuration default]\n"
                                                        "args = -x\n[usage]\ncpu = 1\n", &err),
                         -EINVAL);
        assert_string_equal(err, "h.ini: fleet.build: required key is missing");
        free(TAKE_PTR(err));
        assert_int_equal(config_parse_fleet(c, "i.ini", "[build_configuration default]\n"
                                                        "build = /bin/sh\n[usage]\ncpu = 1\n", &err),
                         -EINVAL);
        assert_string_equal(err, "i.ini: usage.memory: required key is missing");
        assert_int_equal(c->n_fleets, 1);
}

/* inih cuts section names at 49 bytes; the parser must see all 128 characters. */
static void test_build_long_ids(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *text = NULL, *err = NULL, *expect = NULL;
        char a[129], b[130];
        FleetConfig *f;

        memset(a, 'a', 128);
        a[128] = '\0';
        memset(b, 'a', 129);
        b[129] = '\0';

        assert_true(asprintf(&text, FLEET_MIN "[build_configuration %.127sx]\nargs = -x\n"
                                              "[build_configuration %s]\nargs = -y\n", a, a) > 0);
        f = parse_one_fleet(c, "f.ini", text);
        assert_int_equal(f->n_build_configs, 3);
        assert_int_equal(strlen(f->build_configs[1].id), 128);
        assert_int_equal(f->build_configs[1].id[127], 'x');
        assert_string_equal(f->build_configs[2].id, a);
        assert_string_equal(f->build_configs[2].args[0], "-y");

        free(text);
        assert_true(asprintf(&text, FLEET_MIN "[build_configuration %s]\n", b) > 0);
        assert_int_equal(config_parse_fleet(c, "g.ini", text, &err), -EINVAL);
        assert_true(asprintf(&expect, "g.ini:6: build_configuration: expected [build_configuration "
                                      "ID], the ID " BUILD_ID_RULE " (got '%.100s...')", b) > 0);
        assert_string_equal(err, expect);
}

static void test_build_variables(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *text = NULL, *value = NULL, *name = NULL;
        const BuildConfig *b;

        value = malloc(1025);
        assert_non_null(value);
        memset(value, 'v', 1024);
        value[1024] = '\0';
        name = malloc(65);
        assert_non_null(name);
        memset(name, 'N', 64);
        name[64] = '\0';

        assert_true(asprintf(&text, FLEET_MIN "[build_configuration x]\n"
                                              "variables.%s = %s\n"
                                              "variables.Motd = Caf\xc3\xa9 \"du\" \\ Monde\n"
                                              "variables.a.b-c_D9 = 1\n"
                                              "variables.server = not serverID\n",
                             name, value) > 0);
        b = &parse_one_fleet(c, "f.ini", text)->build_configs[1];
        assert_int_equal(b->n_variables, 4);
        assert_strv(b->variable_names, (const char *[]) { name, "Motd", "a.b-c_D9", "server" }, 4);
        assert_string_equal(b->variable_values[0], value);
        assert_string_equal(b->variable_values[1], "Caf\xc3\xa9 \"du\" \\ Monde");
}

static void test_build_errors(_unused_ void **state) {
        static const struct {
                const char *text, *expect;
        } cases[] = {
                /* the section header */
                { "[build_configuration]\n",
                  "f.ini:6: build_configuration: expected [build_configuration ID], the ID "
                  BUILD_ID_RULE " (got '')" },
                { "[build_configuration a b]\n",
                  "f.ini:6: build_configuration: expected [build_configuration ID], the ID "
                  BUILD_ID_RULE " (got 'a b')" },
                { "[build_configuration  a]\n",
                  "f.ini:6: build_configuration: expected [build_configuration ID], the ID "
                  BUILD_ID_RULE " (got ' a')" },
                { "[build_configuration caf\xc3\xa9]\n",
                  "f.ini:6: build_configuration: expected [build_configuration ID], the ID "
                  BUILD_ID_RULE " (got 'caf\xc3\xa9')" },
                { "[build_configurations a]\n",
                  "f.ini:6: unknown section [build_configurations a]; " FLEET_SECTIONS },
                { "[build_configuration a]\nargs = -a\n[build_configuration a]\n",
                  "f.ini:8: build_configuration a: defined twice, first on line 6" },
                /* its keys */
                { "[build_configuration a]\nuser = game\n",
                  "f.ini:7: build_configuration a.user: unknown key" },
                { "[build_configuration a]\nargs = -a\nargs = -b\n",
                  "f.ini:8: build_configuration a.args: duplicate key, already set on line 7" },
                { "[build_configuration a]\nbuild = bin/x\n",
                  "f.ini:7: build_configuration a.build: expected an absolute path (got 'bin/x')" },
                { "[build_configuration a]\nargs = ${NOPE}\n",
                  "f.ini:7: build_configuration a.args: unknown variable '${NOPE}'; "
                  EXPAND_KNOWN " (got '${NOPE}')" },
                /* $$name$$: Multiplay's and the section's own variables, checked once the
                 * file is read (variables may follow args) */
                { "[build_configuration a]\nargs = -map $$map$$\nvariables.mode = x\n",
                  "f.ini:7: build_configuration a.args: unknown variable '$$map$$'; "
                  EXPAND_KNOWN },
                { "[fleet]\nargs = -map $$map$$\n[build_configuration a]\nvariables.map = x\n",
                  "f.ini:7: fleet.args: unknown variable '$$map$$' (build configuration default "
                  "has no such variable); " EXPAND_KNOWN },
                { "[build_configuration a]\nenvironment = MAP=$$Map$$\nvariables.map = x\n",
                  "f.ini:7: build_configuration a.environment: unknown variable '$$Map$$'; "
                  EXPAND_KNOWN },
                { "[build_configuration a]\nenvironment = X=1 PORT=2\n",
                  "f.ini:7: build_configuration a.environment: PORT is set by slotd for every "
                  "slot (got 'X=1 PORT=2')" },
                { "[build_configuration a]\nquery = http\n",
                  "f.ini:7: build_configuration a.query: expected sqp, a2s or none (got 'http')" },
                { "[build_configuration a]\nargs = \xff\n",
                  "f.ini:7: build_configuration a.args: not valid UTF-8 (got '\\xff')" },
                /* variables */
                { "[build_configuration a]\nvariables = 1\n",
                  "f.ini:7: build_configuration a.variables: unknown key" },
                { "[build_configuration a]\nvariables. = 1\n",
                  "f.ini:7: build_configuration a.variables.: expected variables.NAME, NAME 1 to "
                  "64 characters from A-Z a-z 0-9 _ . - (got '1')" },
                { "[build_configuration a]\nvariables.two words = 1\n",
                  "f.ini:7: build_configuration a.variables.two words: expected variables.NAME, "
                  "NAME 1 to 64 characters from A-Z a-z 0-9 _ . - (got '1')" },
                { "[build_configuration a]\nvariables.serverID = 1\n",
                  "f.ini:7: build_configuration a.variables.serverID: slotd writes serverID into "
                  "server.json itself (got '1')" },
                { "[build_configuration a]\nvariables.REGIONNAME = x\n",
                  "f.ini:7: build_configuration a.variables.REGIONNAME: slotd writes regionName "
                  "into server.json itself (got 'x')" },
                { "[build_configuration a]\nvariables.serverfilesdir = x\n",
                  "f.ini:7: build_configuration a.variables.serverfilesdir: slotd writes "
                  "serverFilesDir into server.json itself (got 'x')" },
                { "[build_configuration a]\nvariables.localproxyurl = x\n",
                  "f.ini:7: build_configuration a.variables.localproxyurl: slotd writes "
                  "localProxyUrl into server.json itself (got 'x')" },
                { "[build_configuration a]\nvariables.map = a\nvariables.Map = b\n",
                  "f.ini:8: build_configuration a.variables.Map: variables.map is already set "
                  "(case does not count) (got 'b')" },
                { "[build_configuration a]\nvariables.motd = a\tb\n",
                  "f.ini:7: build_configuration a.variables.motd: expected at most 1024 bytes "
                  "without control characters (got 'a\\x09b')" },
                { "[build_configuration a]\nvariables.motd = a\xc2\x85z\n",
                  "f.ini:7: build_configuration a.variables.motd: expected at most 1024 bytes "
                  "without control characters (got 'a\xc2\x85z')" },
                { "[build_configuration a]\nvariables.motd = \xc3\x28\n",
                  "f.ini:7: build_configuration a.variables.motd: not valid UTF-8 (got "
                  "'\\xc3(')" },
                /* across keys */
                { "[checks]\nreadiness = query\nquery = sqp\n[build_configuration a]\n"
                  "query = none\n",
                  "f.ini:10: build_configuration a.query: must be sqp or a2s, since "
                  "checks.readiness is query (got 'none')" },
                { "[checks]\nquery = a2s\n[build_configuration default]\nquery = none\n",
                  "f.ini:9: build_configuration default.query: must be sqp or a2s, since "
                  "checks.readiness is query (the default when checks.query is set) (got "
                  "'none')" },
                { "[checks]\nreadiness = query\n[build_configuration a]\nquery = sqp\n",
                  "f.ini:7: checks.readiness: query needs checks.query sqp or a2s, not none "
                  "(got 'query')" },
                /* a section's probe counts for the timeout rule too */
                { "[checks]\ninterval = 2s\n[build_configuration a]\nquery = sqp\n",
                  "f.ini:7: checks.query_timeout: must be shorter than checks.interval" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(config_freep) Config *c = new_config();
                _cleanup_free_ char *err = NULL, *text = NULL;

                assert_true(asprintf(&text, FLEET_MIN "%s", cases[i].text) > 0);
                assert_true(config_parse_fleet(c, "f.ini", text, &err) < 0);
                assert_int_equal(c->n_fleets, 0);
                if (!err || !streq(err, cases[i].expect))
                        print_error("case %zu\n", i);
                assert_string_equal(err, cases[i].expect);
        }
}

/* $$name$$ in args and environment: Multiplay's server variables and the configuration's own
 * variables, even those that follow the args in the file; each configuration is checked
 * against its own variables. */
static void test_build_launch_parameters(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        const FleetConfig *f;

        f = parse_one_fleet(c, "f.ini", FLEET_MIN "[fleet]\nbuild_configuration = a\n"
                                       "args = -port $$port$$ -map $$map$$\n"
                                       "[build_configuration a]\n"
                                       "environment = MODE=$$mode$$ CMD=$$commandline$$\n"
                                       "variables.map = dust\nvariables.mode = ctf\n"
                                       "[build_configuration b]\nargs = -q $$query_port$$ $$ x$$\n");
        assert_int_equal(f->n_build_configs, 2);
        assert_string_equal(f->build_configs[0].id, "a");
        assert_string_equal(f->build_configs[0].args[3], "$$map$$");
        assert_string_equal(f->build_configs[0].environment[1], "CMD=$$commandline$$");
        assert_string_equal(f->build_configs[1].args[2], "$$");
}

static void test_build_long_variable_errors(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *text = NULL, *err = NULL, *name = NULL, *value = NULL;

        name = malloc(66);
        value = malloc(1026);
        assert_non_null(name);
        assert_non_null(value);
        memset(name, 'n', 65);
        name[65] = '\0';
        memset(value, 'v', 1025);
        value[1025] = '\0';

        assert_true(asprintf(&text, FLEET_MIN "[build_configuration a]\nvariables.%s = 1\n",
                             name) > 0);
        assert_int_equal(config_parse_fleet(c, "f.ini", text, &err), -EINVAL);
        assert_contains(err, "f.ini:7: build_configuration a.variables.nnnnn");
        assert_contains(err, ": expected variables.NAME, NAME 1 to 64 characters");
        free(TAKE_PTR(err));
        free(TAKE_PTR(text));

        assert_true(asprintf(&text, FLEET_MIN "[build_configuration a]\nvariables.x = %s\n",
                             value) > 0);
        assert_int_equal(config_parse_fleet(c, "f.ini", text, &err), -EINVAL);
        assert_contains(err, "f.ini:7: build_configuration a.variables.x: expected at most 1024 "
                             "bytes without control characters (got 'vvvv");
}

/* Reload compares fleets by what their servers would run. */
static void test_build_equal(_unused_ void **state) {
        static const char reordered[] =
                "[build_configuration 1234]\n"
                "environment = MODE=numeric \"MOTD=hi there\"\n"
                "query = a2s\n"
                "variables.empty =\n"
                "[build_configuration casual]\n"
                "build = /bin/false\n"
                "args = -casual ${BUILD_CONFIGURATION}\n"
                "[fleet]\n"
                "build = /bin/true\n"
                "args = -port ${PORT}\n"
                "environment = MODE=fleet\n"
                "build_configuration = ranked\n"
                "[usage]\n"
                "cpu = 0.5\n"
                "memory = 1G\n"
                "[checks]\n"
                "query = sqp\n"
                "[build_configuration ranked]\n"
                "variables.map = de_dust 2\n"
                "variables.max-players.v2 = 10\n";
        static const char *const others[] = {
                FLEET_MIN,
                FLEET_MIN,
                FLEET_MIN "[build_configuration x]\n",        /* a section more */
                FLEET_MIN "[fleet]\nregion_id = eu\n",       /* server.json carries these */
                FLEET_MIN "[checks]\nquery = sqp\n",
                FLEET_MIN "[checks]\nstrikes = 5\n",         /* servers do not see this */
        };
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *changed = NULL;
        const FleetConfig *f;

        /* one variable's value */
        changed = strdup(three_sections);
        assert_non_null(changed);
        memcpy(strstr(changed, "= 10\n"), "= 11\n", 5);

        parse_one_fleet(c, "a.ini", three_sections);
        parse_one_fleet(c, "b.ini", reordered);
        parse_one_fleet(c, "c.ini", changed);
        for (size_t i = 0; i < ELEMENTSOF(others); i++) {
                char name[16];

                snprintf(name, sizeof(name), "o%zu.ini", i);
                parse_one_fleet(c, name, others[i]);
        }
        f = c->fleets; /* no more parsing: the pointer stays valid */

        assert_true(fleet_config_build_equal(&f[0], &f[1]));
        assert_true(fleet_config_build_equal(&f[1], &f[0]));
        assert_true(build_config_equal(&f[0].build_configs[0], &f[1].build_configs[0]));
        assert_false(build_config_equal(&f[0].build_configs[1], &f[0].build_configs[2]));

        assert_false(fleet_config_build_equal(&f[0], &f[2]));
        assert_false(build_config_equal(&f[0].build_configs[0], &f[2].build_configs[0]));
        assert_true(build_config_equal(&f[0].build_configs[1], &f[2].build_configs[1]));

        assert_true(fleet_config_build_equal(&f[3], &f[4]));
        assert_false(fleet_config_build_equal(&f[3], &f[5]));
        assert_false(fleet_config_build_equal(&f[3], &f[6]));
        assert_false(fleet_config_build_equal(&f[3], &f[7]));
        assert_true(fleet_config_build_equal(&f[3], &f[8]));
}

/* A FleetConfig not made by the parser has no build configurations. */
static void test_build_find_unparsed(_unused_ void **state) {
        FleetConfig f = {};

        assert_null(fleet_config_find_build(&f, NULL));
        assert_null(fleet_config_find_build(&f, "default"));
        assert_true(fleet_config_build_equal(&f, &f));
}

static void test_build_id_rule(_unused_ void **state) {
        assert_true(build_config_id_is_valid("1"));
        assert_true(build_config_id_is_valid("A-Za-z0-9._:-"));
        assert_false(build_config_id_is_valid(""));
        assert_false(build_config_id_is_valid("a/b"));
        assert_false(build_config_id_is_valid("a b"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_build_without_sections),
                cmocka_unit_test(test_build_sections),
                cmocka_unit_test(test_build_default_made),
                cmocka_unit_test(test_build_default_section_only),
                cmocka_unit_test(test_build_fleet_build_from_section),
                cmocka_unit_test(test_build_long_ids),
                cmocka_unit_test(test_build_variables),
                cmocka_unit_test(test_build_errors),
                cmocka_unit_test(test_build_launch_parameters),
                cmocka_unit_test(test_build_long_variable_errors),
                cmocka_unit_test(test_build_equal),
                cmocka_unit_test(test_build_find_unparsed),
                cmocka_unit_test(test_build_id_rule),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
