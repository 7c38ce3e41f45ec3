/* SPDX-License-Identifier: MIT */
/* Multiplay config-as-code (.gsh) files as fleets (config/gsh.c, gsh-map.c, gsh-fleet.c): the
 * YAML tree, the mapping of each field, every refusal's message with FILE:LINE:COLUMN, every
 * error of a file in one run, the name clash with an INI fleet, and regions. The files are
 * Unity's documented examples typed out here. */
#include "gsh.h"
#include "gsh-map.h"
#include "test-config-util.h"

#define GSH "fleets.d/game.gsh"

/* The Unity editor's template ("Create > Services > Multiplay Config"), comments shortened. */
static const char unity_template[] =
        "version: 1.0\n"                                                    /* 1 */
        "builds:\n"
        "  my build: # replace with the name for your build\n"
        "    executableName: Build.x86_64 # the name of your build executable\n"
        "    buildPath: Builds/Multiplay # the location of the build files\n" /* 5 */
        "    excludePaths: # paths to exclude from upload\n"
        "      - Builds/Multiplay/DoNotShip/*.*\n"
        "      - Builds/Multiplay/Server_Data/app.info\n"
        "buildConfigurations:\n"
        "  my build configuration: # replace with the name\n"              /* 10 */
        "    build: my build # replace with the name for your build\n"
        "    queryType: sqp # sqp or a2s\n"
        "    binaryPath: Build.x86_64 # the name of your build executable\n"
        "    commandLine: -port $$port$$ -queryport $$query_port$$ -log $$log_dir$$/Engine.log\n"
        "    variables: {}\n"                                               /* 15 */
        "fleets:\n"
        "  my fleet: # replace with the name for your fleet\n"
        "    buildConfigurations:\n"
        "      - my build configuration\n"
        "    regions:\n"                                                    /* 20 */
        "      North America: # North America, Europe, Asia, South America, Australia\n"
        "        minAvailable: 0 # minimum number of servers running in the region\n"
        "        maxServers: 1 # maximum number of servers running in the region\n"
        "    usageSettings:\n"
        "      - hardwareType: CLOUD # CLOUD or METAL\n"                    /* 25 */
        "        machineType: GCP-N2 # for CLOUD\n"
        "        maxServersPerMachine: 2\n";

/* A studio's file for bare metal: the same shape, names that slotd takes, two build
 * configurations with variables, two fleets in two regions, METAL usage settings. */
static const char studio[] =
        "version: 1.0\n"                                                    /* 1 */
        "builds:\n"
        "  LinuxServer:\n"
        "    executableName: Game.x86_64\n"
        "    buildPath: Builds/Server\n"                                    /* 5 */
        "    excludePaths: []\n"
        "buildConfigurations:\n"
        "  ranked:\n"
        "    build: LinuxServer\n"
        "    queryType: sqp\n"                                              /* 10 */
        "    binaryPath: Game.x86_64\n"
        "    commandLine: -port $$port$$ -queryport $$query_port$$ -logFile $$log_dir$$/server.log -batchmode -nographics\n"
        "    variables:\n"
        "      map: de_dust\n"
        "      maxPlayers: 10\n"                                            /* 15 */
        "    readiness: true\n"
        "  casual:\n"
        "    build: LinuxServer\n"
        "    queryType: sqp\n"
        "    binaryPath: /opt/casual/Game.x86_64\n"                         /* 20 */
        "    commandLine: '-mode \"casual play\" -port $$port$$'\n"
        "    variables: {mode: casual}\n"
        "fleets:\n"
        "  eu-fleet:\n"
        "    buildConfigurations:\n"                                        /* 25 */
        "      - ranked\n"
        "      - casual\n"
        "    regions:\n"
        "      Europe:\n"
        "        minAvailable: 2\n"                                         /* 30 */
        "        maxServers: 20\n"
        "      North America:\n"
        "        minAvailable: 1\n"
        "        maxServers: 10\n"
        "    usageSettings:\n"                                              /* 35 */
        "      - hardwareType: METAL\n"
        "        speed: 1500\n"
        "        memory: 2048\n"
        "        maxServersPerCore: 2\n"
        "        maxServersPerMachine: 12\n"                                /* 40 */
        "  us-fleet:\n"
        "    buildConfigurations: [casual]\n"
        "    regions:\n"
        "      North America: {minAvailable: 1, maxServers: 5}\n";

static Config *machine(const char *slotd_ini) {
        Config *c = new_config();
        char *err = NULL;

        assert_int_equal(config_parse_machine(c, "slotd.ini", slotd_ini, &err), 0);
        assert_null(err);
        return c;
}

static int parse_gsh(Config *c, const char *text, char **err) {
        return config_parse_gsh(c, GSH, text, strlen(text), err);
}

/* The lines of s. */
static char **split_lines(const char *s) {
        char **l = calloc(1, sizeof(char *));

        assert_non_null(l);
        for (const char *p = s; p;) {
                const char *nl = strchr(p, '\n');
                _cleanup_free_ char *line = nl ? strndup(p, (size_t) (nl - p)) : strdup(p);

                assert_non_null(line);
                assert_int_equal(strv_extend(&l, line), 0);
                p = nl ? nl + 1 : NULL;
        }
        return l;
}

static void assert_strv_is(char **l, const char *const *expect, size_t n) {
        assert_non_null(l);
        assert_int_equal(strv_length(l), n);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(l[i], expect[i]);
}

static void test_gsh_unity_template(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\nregion = North America\n");
        _cleanup_free_ char *err = NULL;

        assert_int_equal(parse_gsh(c, unity_template, &err), -EINVAL);
        /* Its names are taken (as my-build-configuration, my-fleet); CLOUD is not. */
        assert_string_equal(err,
                GSH ":25:23: fleets.my fleet.usageSettings[0].hardwareType: CLOUD is not "
                "supported: slotd runs on the machines it is given (expected METAL)");
        assert_int_equal(c->n_fleets, 0);
}

static void test_gsh_studio(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\nregion = Europe\n"
                                                    "[supervisor]\nbuilds_dir = /srv/builds/\n");
        _cleanup_free_ char *err = NULL;
        const BuildConfig *b;
        FleetConfig *f;

        assert_int_equal(parse_gsh(c, studio, &err), 0);
        assert_null(err);
        /* us-fleet runs only in North America: not on this machine, and --check says why. */
        assert_int_equal(c->n_fleets, 1);
        assert_strv_is(c->fleets_elsewhere, (const char *[]) {
                GSH ":41:3: fleets.us-fleet: gets no slots on this machine: its regions are "
                "North America, and machine.region is 'Europe'" }, 1);

        f = &c->fleets[0];
        assert_string_equal(f->name, "eu-fleet");
        assert_string_equal(f->file, GSH);
        assert_int_equal(f->line, 24);
        assert_string_equal(f->build, "/srv/builds/Builds/Server/Game.x86_64");
        assert_string_equal(f->build_configuration, "ranked");
        assert_strv_is(f->args, (const char *[]) { "-port", "$$port$$", "-queryport",
                       "$$query_port$$", "-logFile", "$$log_dir$$/server.log", "-batchmode",
                       "-nographics" }, 8);
        assert_strv_is(f->environment, NULL, 0);
        assert_int_equal(f->query, QUERY_SQP);
        assert_int_equal(f->readiness, READINESS_QUERY);
        assert_string_equal(f->region_id, "Europe");
        assert_string_equal(f->region_name, "Europe");
        assert_true(f->ports_auto);

        /* usageSettings (METAL): memory in MiB; cores from the build configuration (1). */
        assert_true(double_eq(f->usage_cpu, 1));
        assert_int_equal(f->usage_memory, UINT64_C(2048) << 20);
        assert_int_equal(f->usage_speed_mhz, 1500);
        assert_int_equal(f->usage_max_per_core, 2);
        assert_int_equal(f->usage_max_per_machine, 12);
        assert_int_equal(f->usage_servers, 0);
        assert_int_equal(f->memory_max, (UINT64_C(2048) << 20) + 2 * f->memory_tolerance);

        assert_int_equal(f->n_regions, 2);
        assert_string_equal(f->regions[0].name, "Europe");
        assert_int_equal(f->regions[0].min_available, 2);
        assert_int_equal(f->regions[0].max_servers, 20);
        assert_true(f->regions[0].online);
        assert_string_equal(f->regions[1].name, "North America");
        assert_int_equal(f->regions[1].min_available, 1);
        assert_int_equal(f->regions[1].max_servers, 10);

        assert_int_equal(f->n_build_configs, 2);
        b = &f->build_configs[0];
        assert_string_equal(b->id, "ranked");
        assert_string_equal(b->build, "/srv/builds/Builds/Server/Game.x86_64");
        assert_int_equal(b->query, QUERY_SQP);
        assert_strv_is(b->variable_names, (const char *[]) { "map", "maxPlayers" }, 2);
        assert_strv_is(b->variable_values, (const char *[]) { "de_dust", "10" }, 2);
        assert_int_equal(b->n_variables, 2);
        assert_int_equal(b->line, 8);
        b = &f->build_configs[1];
        assert_string_equal(b->id, "casual");
        assert_string_equal(b->build, "/opt/casual/Game.x86_64");
        assert_strv_is(b->args, (const char *[]) { "-mode", "casual play", "-port", "$$port$$" },
                       4);
        assert_strv_is(b->variable_names, (const char *[]) { "mode" }, 1);
        assert_strv_is(b->variable_values, (const char *[]) { "casual" }, 1);
        assert_ptr_equal(fleet_config_find_build(f, "casual"), b);
        assert_null(fleet_config_find_build(f, "nope"));
}

/* Multiplay's names are free text: each maps onto a slotd name by one rule, and the file's
 * own name is kept for --check. */
static void test_gsh_names(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\nregion = Europe\n");
        _cleanup_free_ char *err = NULL;
        static const struct {
                const char *name, *id;
                size_t max;
                bool colon;
        } cases[] = {
                { "my fleet", "my-fleet", 64, false },
                /* A build configuration named by Multiplay's number keeps it as its ID. */
                { "1234567", "1234567", 128, true },
                { "  EU  Fleet #2 ", "EU-Fleet-2", 64, false },
                { ".hidden", "hidden", 64, false },
                { "Mode: Ranked/5v5", "Mode:-Ranked-5v5", 128, true },
                { "Mode: Ranked/5v5", "Mode-Ranked-5v5", 64, false },
                { "Flotte Européenne", "Flotte-Europ-enne", 64, false },
                { "abcdefgh", "abcde", 5, false },
                { "ab   cd", "ab-", 3, false }, /* cut, then a trailing '-' stays cut: "ab" */
                { "!!!", NULL, 64, false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *id = gsh_name_to_id(cases[i].name, cases[i].max,
                                                         cases[i].colon);

                if (!cases[i].id)
                        assert_null(id);
                else if (streq(cases[i].id, "ab-"))
                        assert_string_equal(id, "ab");
                else
                        assert_string_equal(id, cases[i].id);
        }
        assert_int_equal(parse_gsh(c, "builds: {b: {buildPath: /srv/b}}\n"
                                      "buildConfigurations: {EU game: {build: b}}\n"
                                      "fleets: {EU fleet: {buildConfigurations: [EU game]}}\n",
                                   &err), 0);
        assert_int_equal(c->n_fleets, 1);
        assert_string_equal(c->fleets[0].name, "EU-fleet");
        assert_string_equal(c->fleets[0].gsh_name, "EU fleet");
        assert_string_equal(c->fleets[0].build_configs[0].id, "EU-game");
        assert_string_equal(c->fleets[0].build_configs[0].gsh_name, "EU game");
        assert_string_equal(c->fleets[0].build_configuration, "EU-game");
        {
                _cleanup_(config_freep) Config *n = machine("");
                assert_int_equal(parse_gsh(n, "builds: {b: {buildPath: /srv/b}}\n"
                                              "buildConfigurations: {1234567: {build: b}}\n"
                                              "fleets: {f: {buildConfigurations: [1234567]}}\n",
                                           &err), 0);
                assert_int_equal(n->n_fleets, 1);
                assert_string_equal(n->fleets[0].build_configs[0].id, "1234567");
                assert_null(n->fleets[0].build_configs[0].gsh_name);
        }
}

static void test_gsh_regions(_unused_ void **state) {
        static const char one[] =
                "builds: {b: {buildPath: /srv/b}}\n"
                "buildConfigurations: {c: {build: b}}\n"
                "fleets:\n"
                "  f:\n"
                "    buildConfigurations: [c]\n"
                "    regions:\n"
                "      Asia: {minAvailable: 1, maxServers: 2, online: false}\n"
                "      Europe: {}\n";
        _cleanup_free_ char *err = NULL;

        {
                /* No machine.region: a fleet with regions runs nowhere here. */
                _cleanup_(config_freep) Config *c = machine("");
                assert_int_equal(parse_gsh(c, one, &err), 0);
                assert_int_equal(c->n_fleets, 0);
                assert_strv_is(c->fleets_elsewhere, (const char *[]) {
                        GSH ":4:3: fleets.f: gets no slots on this machine: its regions are "
                        "Asia (offline), Europe, and machine.region is not set" }, 1);
        }
        {
                /* An offline region runs nothing. */
                _cleanup_(config_freep) Config *c = machine("[machine]\nregion = Asia\n");
                assert_int_equal(parse_gsh(c, one, &err), 0);
                assert_int_equal(c->n_fleets, 0);
                assert_int_equal(strv_length(c->fleets_elsewhere), 1);
        }
        {
                _cleanup_(config_freep) Config *c = machine("[machine]\nregion = Europe\n");
                assert_int_equal(parse_gsh(c, one, &err), 0);
                assert_int_equal(c->n_fleets, 1);
                assert_null(c->fleets_elsewhere);
                assert_string_equal(c->fleets[0].region_id, "Europe");
                assert_int_equal(c->fleets[0].regions[1].min_available, 0);
                assert_int_equal(c->fleets[0].regions[1].max_servers, 0);
                assert_false(c->fleets[0].regions[0].online);
                /* The build configuration's defaults: 1 core, 800 MiB, 750 MHz, no query. */
                assert_true(double_eq(c->fleets[0].usage_cpu, 1));
                assert_int_equal(c->fleets[0].usage_memory, UINT64_C(800) << 20);
                assert_int_equal(c->fleets[0].usage_speed_mhz, 750);
                assert_int_equal(c->fleets[0].readiness, READINESS_EXEC);
                assert_string_equal(c->fleets[0].build, "/srv/b/Server");
        }
        {
                /* Without regions: on every machine, in none. */
                _cleanup_(config_freep) Config *c = machine("[machine]\nregion = Europe\n");
                assert_int_equal(parse_gsh(c, "builds: {b: {buildPath: /srv/b}}\n"
                                              "buildConfigurations: {c: {build: b}}\n"
                                              "fleets: {f: {buildConfigurations: [c]}}\n",
                                           &err), 0);
                assert_int_equal(c->n_fleets, 1);
                assert_string_equal(c->fleets[0].region_id, "");
                assert_string_equal(c->fleets[0].region_name, "");
        }
}

/* Unity's multiplayer 1.2 fields: a build's buildOptions and buildProfile (how the editor
 * builds it) are taken and unused; a fleet's architecture keeps it off a machine of another. */
static void test_gsh_multiplayer_1_2(_unused_ void **state) {
#if defined(__x86_64__)
        const char *this_arch = "Amd64", *other_arch = "ARM64";
#elif defined(__aarch64__)
        const char *this_arch = "arm64", *other_arch = "AMD64";
#else
        const char *this_arch = NULL, *other_arch = "AMD64";
#endif
        _cleanup_free_ char *text = NULL, *err = NULL, *why = NULL;

        assert_true(asprintf(&text,
                             "builds:\n"
                             "  b:\n"
                             "    buildPath: /srv/b\n"
                             "    buildOptions: 16384\n"
                             "    buildProfile:\n"
                             "      guid: 5e8f3a0c2b1d4e6f9a7b8c0d1e2f3a4b\n"
                             "      id: -7253436483453474034\n"
                             "buildConfigurations: {c: {build: b}}\n"
                             "fleets:\n"
                             "  here: {buildConfigurations: [c], architecture: %s}\n"
                             "  there: {buildConfigurations: [c], architecture: %s}\n",
                             this_arch ?: "AMD64", other_arch) > 0);
        assert_true(asprintf(&why, GSH ":11:51: fleets.there: gets no slots on this machine: its "
                             "architecture is %s, and this machine's is %s", other_arch,
                             GSH_MACHINE_ARCHITECTURE ?: "neither") > 0);
        {
                _cleanup_(config_freep) Config *c = machine("");
                assert_int_equal(parse_gsh(c, text, &err), 0);
                assert_null(err);
                assert_int_equal(c->n_fleets, this_arch ? 1 : 0);
                if (this_arch)
                        assert_string_equal(c->fleets[0].name, "here");
                assert_non_null(c->fleets_elsewhere);
                assert_string_equal(c->fleets_elsewhere[this_arch ? 0 : 1], why);
                assert_string_equal(c->fleets_elsewhere_names[this_arch ? 0 : 1], "there");
        }
        {
                /* The fleet layer (slotd-allocator's scaler) keeps every fleet. */
                _cleanup_(config_freep) Config *c = machine("");
                c->gsh_every_region = true;
                assert_int_equal(parse_gsh(c, text, &err), 0);
                assert_int_equal(c->n_fleets, 2);
                assert_null(c->fleets_elsewhere);
        }
}

/* One refusal: the text's only error is expect. */
static void check_refusal(const char *text, const char *expect) {
        _cleanup_(config_freep) Config *c = machine("[machine]\nregion = Europe\n");
        _cleanup_free_ char *err = NULL;

        assert_int_equal(parse_gsh(c, text, &err), -EINVAL);
        if (!err || !streq(err, expect)) {
                print_error("got:      %s\nexpected: %s\n", err ?: "(null)", expect);
                fail();
        }
        assert_int_equal(c->n_fleets, 0);
}

/* Lines 1-3 of a file that is good but for what follows. */
#define BASE "builds: {b: {buildPath: /srv/b}}\nbuildConfigurations: {c: {build: b}}\nfleets:\n"
#define FLEET "  f:\n    buildConfigurations: [c]\n"
#define METAL "    usageSettings:\n      - hardwareType: METAL\n        speed: 1000\n" \
              "        memory: 1024\n"

static void test_gsh_refusals(_unused_ void **state) {
        check_refusal("version: 2\n" BASE FLEET,
                      GSH ":1:10: version: expected 1.0, the version of Multiplay's "
                      "config-as-code files slotd reads");
        check_refusal(BASE FLEET "scaling: {}\n",
                      GSH ":6:1: scaling: unknown key; a .gsh file has version, builds, "
                      "buildConfigurations and fleets");
        check_refusal("builds: {b: {buildPath: /srv/b, uploadPath: x}}\n"
                      "buildConfigurations: {c: {build: b}}\nfleets:\n" FLEET,
                      GSH ":1:33: builds.b.uploadPath: unknown key; a build has executableName, "
                      "buildPath, excludePaths, buildOptions and buildProfile");
        check_refusal("builds: {b: {executableName: x}}\n"
                      "buildConfigurations: {c: {build: b}}\nfleets:\n" FLEET,
                      GSH ":1:13: builds.b: buildPath is missing: the build's directory "
                      "(absolute, or under supervisor.builds_dir)");
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations: {c: {build: b, queryType: gamespy}}\n"
                      "fleets:\n" FLEET,
                      GSH ":2:48: buildConfigurations.c.queryType: expected sqp, a2s or none "
                      "(got 'gamespy')");
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations: {c: {build: b, readiness: yes}}\n"
                      "fleets:\n" FLEET,
                      GSH ":2:48: buildConfigurations.c.readiness: expected true or false (got "
                      "'yes')");
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations: {c: {build: b, cores: 0}}\n"
                      "fleets:\n" FLEET,
                      GSH ":2:44: buildConfigurations.c.cores: expected an integer from 1 to "
                      "1024 (got '0')");
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations: {c: {build: b, variables: {queryPort: 1}}}\n"
                      "fleets:\n" FLEET,
                      GSH ":2:60: buildConfigurations.c.variables.queryPort: slotd writes "
                      "queryPort into server.json itself (got '1')");
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations: {c: {build: b, commandLine: '-x \"open'}}\n"
                      "fleets:\n" FLEET,
                      GSH ":2:50: buildConfigurations.c.commandLine: unterminated quote or "
                      "trailing backslash (got '-x \"open')");
        check_refusal("builds: {b: {buildPath: relative/..}}\n"
                      "buildConfigurations: {c: {build: x}}\nfleets:\n" FLEET,
                      GSH ":2:34: buildConfigurations.c.build: no build 'x' in builds");
        check_refusal(BASE "  f:\n    buildConfigurations: [c, d]\n",
                      GSH ":5:30: fleets.f.buildConfigurations[1]: no build configuration 'd' "
                      "in buildConfigurations");
        check_refusal(BASE "  f:\n    buildConfigurations: []\n",
                      GSH ":5:26: fleets.f.buildConfigurations: expected a list of one or more "
                      "of buildConfigurations' names");
        check_refusal(BASE FLEET "    regions: {Europe: {minAvailable: 3, maxServers: 2}}\n",
                      GSH ":6:53: fleets.f.regions.Europe.maxServers: 2 is below minAvailable 3");
        check_refusal(BASE FLEET "    regions: {Europe: {buffer: 3}}\n",
                      GSH ":6:24: fleets.f.regions.Europe.buffer: unknown key; a region has "
                      "minAvailable, maxServers and online");
        check_refusal(BASE FLEET "    usageSettings:\n      - hardwareType: CLOUD\n",
                      GSH ":7:23: fleets.f.usageSettings[0].hardwareType: CLOUD is not "
                      "supported: slotd runs on the machines it is given (expected METAL)");
        check_refusal(BASE FLEET METAL "        machineType: GCP-N2\n",
                      GSH ":10:9: fleets.f.usageSettings[0].machineType: is for CLOUD settings; "
                      "a METAL setting applies to every machine (Unity: omit it)");
        check_refusal(BASE FLEET "    usageSettings:\n      - hardwareType: METAL\n"
                      "        memory: 1024\n",
                      GSH ":7:9: fleets.f.usageSettings[0]: speed is missing: the MHz of CPU a "
                      "server takes");
        check_refusal(BASE FLEET METAL "        maxServersPerCore: -1\n",
                      GSH ":10:28: fleets.f.usageSettings[0].maxServersPerCore: expected an "
                      "integer from 1 to 65535 (got '-1')");
        check_refusal(BASE FLEET METAL "      - hardwareType: METAL\n        speed: 1000\n"
                      "        memory: 1024\n",
                      GSH ":10:23: fleets.f.usageSettings[1].hardwareType: a second METAL "
                      "setting: Multiplay's METAL setting applies to every machine of the fleet");
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations:\n  c: {build: b}\n  d: {build: b, memoryMiB: 900}\n"
                      "fleets: {f: {buildConfigurations: [c, d]}}\n",
                      GSH ":4:28: buildConfigurations.d: memoryMiB 900 differs from 800 of fleet "
                      "f's default build configuration c: slotd gives a fleet's servers one "
                      "size");
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations:\n  c: {build: b, queryType: a2s}\n"
                      "  d: {build: b, queryType: a2s, readiness: false}\n"
                      "fleets: {f: {buildConfigurations: [c, d]}}\n",
                      GSH ":4:44: buildConfigurations.d: readiness makes its servers ready by "
                      "exec, fleet f's default build configuration c by query: slotd has one "
                      "readiness a fleet");
}

static void test_gsh_refusals_more(_unused_ void **state) {
        check_refusal("builds: {b: {buildPath: /srv/b, buildOptions: -1}}\n"
                      "buildConfigurations: {c: {build: b}}\nfleets:\n" FLEET,
                      GSH ":1:47: builds.b.buildOptions: expected an integer from 0 to "
                      "2147483647 (got '-1')");
        check_refusal("builds: {b: {buildPath: /srv/b, buildProfile: {id: 1.5, name: x}}}\n"
                      "buildConfigurations: {c: {build: b}}\nfleets:\n" FLEET,
                      GSH ":1:52: builds.b.buildProfile.id: expected an integer (got '1.5')\n"
                      GSH ":1:57: builds.b.buildProfile.name: unknown key; a build profile has "
                      "guid and id");
        check_refusal("builds: {b: {buildPath: /srv/b, buildProfile: x}}\n"
                      "buildConfigurations: {c: {build: b}}\nfleets:\n" FLEET,
                      GSH ":1:47: builds.b.buildProfile: expected a map, got a scalar");
        check_refusal(BASE FLEET "    architecture: x86\n",
                      GSH ":6:19: fleets.f.architecture: expected AMD64 or ARM64 (got 'x86')");
        check_refusal("builds: {b: {buildPath: /srv/b, excludePaths: x}}\n"
                      "buildConfigurations: {c: {build: b}}\nfleets:\n" FLEET,
                      GSH ":1:47: builds.b.excludePaths: expected a list, got a scalar");
        check_refusal("builds: {b: {buildPath: [a]}}\n"
                      "buildConfigurations: {c: {build: b}}\nfleets:\n" FLEET,
                      GSH ":1:25: builds.b.buildPath: expected a scalar, got a list");
        check_refusal("builds: x\nbuildConfigurations: {}\nfleets: {}\n",
                      GSH ":1:9: builds: expected a map, got a scalar");
        check_refusal(BASE "  f:\n    buildConfigurations: [c, c]\n",
                      GSH ":5:30: fleets.f.buildConfigurations[1]: 'c' is listed twice");
        check_refusal(BASE FLEET "    regions: {Europe: {online: maybe}}\n",
                      GSH ":6:32: fleets.f.regions.Europe.online: expected true or false (got "
                      "'maybe')");
        check_refusal(BASE FLEET "    usageSettings: [{hardwareType: METAL, speed: 100, "
                      "memory: 100, fleetUsageID: x}]\n",
                      GSH ":6:82: fleets.f.usageSettings[0].fleetUsageID: expected an integer "
                      "from 0 to 4294967295 (got 'x')");
        check_refusal(BASE FLEET "    usageSettings: [{speed: 100}]\n",
                      GSH ":6:21: fleets.f.usageSettings[0]: hardwareType is missing: slotd "
                      "takes METAL");
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations: {c: {build: b, commandLine: '-x $$nope$$ $$map$$',"
                      " variables: {map: dust}}}\nfleets: {}\n",
                      GSH ":2:50: buildConfigurations.c.commandLine: unknown variable "
                      "'$$nope$$'; known: ${PORT} ${QUERY_PORT} ${SERVER_ID} ${ALLOCATION_UUID} "
                      "${SERVER_LOG_DIR} ${HOME} ${BUILD_CONFIGURATION}, Multiplay's $$port$$ "
                      "$$query_port$$ $$query_type$$ $$log_dir$$ $$file_dir$$ $$config_dir$$ "
                      "$$game_exe$$ $$serverid$$ $$machineid$$ $$fleetid$$ $$regionid$$ "
                      "$$regionname$$ $$ip$$ $$ipv6$$ $$timestamp$$ $$commandline$$ and the "
                      "build configuration's variables as $$NAME$$");
        check_refusal(BASE "  '!!!':\n    buildConfigurations: [c]\n",
                      GSH ":4:3: fleets.!!!: the name ('!!!') makes no fleet name: expected a "
                      "letter or digit among its characters");
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations: {'++': {build: b}}\nfleets: {}\n",
                      GSH ":2:23: buildConfigurations.++: the name makes no build "
                      "configuration ID: expected a letter or digit among its characters");
        /* Two names, one slotd name: the later is refused, naming the earlier. */
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations: {EU game: {build: b}, EU-game: {build: b}}\n"
                      "fleets: {}\n",
                      GSH ":2:44: buildConfigurations.EU-game: its ID 'EU-game' is also that of "
                      "buildConfigurations.EU game (line 2)");
        check_refusal(BASE "  EU fleet:\n    buildConfigurations: [c]\n"
                      "  EU_fleet:\n    buildConfigurations: [c]\n"
                      "  EU.fleet: {buildConfigurations: [c]}\n  ' EU fleet ':\n"
                      "    buildConfigurations: [c]\n",
                      GSH ":9:3: fleets. EU fleet : fleet EU-fleet is already defined by "
                      "fleets.d/game.gsh");
        check_refusal("builds: {b: {buildPath: /srv/b}}\n"
                      "buildConfigurations: {c: {build: b, variables: {map: [a]}}}\n"
                      "fleets:\n" FLEET,
                      GSH ":2:54: buildConfigurations.c.variables.map: expected a scalar, got a "
                      "list");
}

/* machine.region and supervisor.builds_dir in slotd.ini. */
static void test_gsh_machine_keys(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        char *err = NULL;

        assert_null(c->region);
        assert_string_equal(c->builds_dir, "/srv/slotd/builds");
        assert_int_equal(c->game_port_base, 9000);
        assert_int_equal(c->query_port_base, 9600);
        assert_int_equal(config_parse_machine(c, "slotd.ini", "[machine]\nregion = \n", &err),
                         -EINVAL);
        assert_string_equal(err, "slotd.ini:2: machine.region: expected 1 to 128 bytes without "
                            "control characters (got '')");
        err = mfree(err);
        assert_int_equal(config_parse_machine(c, "slotd.ini",
                                              "[supervisor]\nbuilds_dir = builds\n", &err),
                         -EINVAL);
        assert_string_equal(err, "slotd.ini:2: supervisor.builds_dir: expected an absolute path "
                            "(got 'builds')");
        err = mfree(err);
        config_free(c);
        c = new_config();
        assert_int_equal(config_parse_machine(c, "slotd.ini", "[machine]\nregion = South "
                                              "America\ngame_port_base = 20000\n"
                                              "query_port_base = 20100\n"
                                              "[supervisor]\nbuilds_dir = /b//x/\n",
                                              &err), 0);
        assert_string_equal(c->region, "South America");
        assert_int_equal(c->game_port_base, 20000);
        assert_int_equal(c->query_port_base, 20100);
        assert_string_equal(c->builds_dir, "/b/x");
}

static void test_gsh_yaml_errors(_unused_ void **state) {
        check_refusal("builds: {b: [}\n", GSH ":1:14: YAML syntax error: did not find expected "
                      "node content while parsing a flow node");
        check_refusal("builds: &x {}\nfleets: *x\n",
                      GSH ":2:9: YAML aliases (*x) are not supported");
        check_refusal("builds: {}\nbuilds: {}\n", GSH ":2:1: duplicate key 'builds'");
        check_refusal("\"a\\nb\": {}\n\"a\\nb\": {}\n", GSH ":2:1: duplicate key 'a\\x0ab'");
        /* A key's line break stays out of the message: one error, one line. */
        check_refusal("\"a\\nb\": 1\n", GSH ":1:1: a\\x0ab: unknown key; a .gsh file has version, "
                      "builds, buildConfigurations and fleets");
        check_refusal("builds: {}\n---\nfleets: {}\n",
                      GSH ":2:1: a .gsh file holds one YAML document");
        check_refusal("builds: !!map {}\n", GSH ":1:9: YAML tags are not supported");
        {
                /* The root map and 31 lists fit GSH_DEPTH_MAX (32); the 32nd list does not. */
                char deep[3 + 40 + 40 + 2] = "a: ";

                memset(deep + 3, '[', 40);
                memset(deep + 43, ']', 40);
                strcpy(deep + 83, "\n");
                check_refusal(deep, GSH ":1:35: nested more than 32 deep");
        }
        check_refusal("", GSH ":1:1: (file): empty: expected version, builds, buildConfigurations "
                      "and fleets");
        check_refusal("- a\n", GSH ":1:1: (file): expected a map, got a list");
        check_refusal("builds:\n  b:\n    buildPath: \"/srv/\\0b\"\n",
                      GSH ":3:16: a NUL character in a scalar");
}

/* Errors of every part of a file come at once, each at its place. */
static void test_gsh_every_error(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("");
        _cleanup_free_ char *err = NULL;
        _cleanup_strv_free_ char **lines = NULL;

        assert_int_equal(parse_gsh(c,
                "version: 1.0\n"
                "builds:\n"
                "  b: {buildPath: /srv/b, colour: red}\n"
                "buildConfigurations:\n"
                "  c: {build: b, queryType: x, readiness: 1, speedMhz: fast}\n"    /* 5 */
                "fleets:\n"
                "  f:\n"
                "    buildConfigurations: [c, z]\n"
                "    regions: {Europe: {minAvailable: -1}}\n"
                "    usageSettings: [{hardwareType: METAL, speed: 50, memory: 5}]\n",
                &err), -EINVAL);
        assert_non_null(err);
        lines = split_lines(err);
        assert_strv_is(lines, (const char *[]) {
                GSH ":3:26: builds.b.colour: unknown key; a build has executableName, buildPath, "
                "excludePaths, buildOptions and buildProfile",
                GSH ":5:28: buildConfigurations.c.queryType: expected sqp, a2s or none (got 'x')",
                GSH ":5:42: buildConfigurations.c.readiness: expected true or false (got '1')",
                GSH ":5:55: buildConfigurations.c.speedMhz: expected an integer from 1 to "
                "1048576 (got 'fast')",
                GSH ":8:30: fleets.f.buildConfigurations[1]: no build configuration 'z' in "
                "buildConfigurations",
                GSH ":9:38: fleets.f.regions.Europe.minAvailable: expected an integer from 0 to "
                "1000000 (got '-1')",
                GSH ":10:50: fleets.f.usageSettings[0].speed: expected an integer from 100 to "
                "10000000 (got '50')",
                GSH ":10:62: fleets.f.usageSettings[0].memory: expected an integer from 100 to "
                "16777216 (got '5')",
        }, 8);
}

/* A .gsh fleet and an INI fleet of the same name, in either order, name both files. */
static void test_gsh_ini_clash(_unused_ void **state) {
        static const char gsh[] = "builds: {b: {buildPath: /srv/b}}\n"
                                  "buildConfigurations: {c: {build: b}}\n"
                                  "fleets:\n  game:\n    buildConfigurations: [c]\n";
        _cleanup_free_ char *err = NULL;

        {
                _cleanup_(config_freep) Config *c = machine("");
                assert_non_null(parse_one_fleet(c, "fleets.d/game.ini", FLEET_MIN));
                assert_int_equal(parse_gsh(c, gsh, &err), -EINVAL);
                assert_string_equal(err, GSH ":4:3: fleets.game: fleet game is already defined "
                                    "by fleets.d/game.ini");
                assert_int_equal(c->n_fleets, 1);
                err = mfree(err);
        }
        {
                _cleanup_(config_freep) Config *c = machine("");
                assert_int_equal(parse_gsh(c, gsh, &err), 0);
                assert_int_equal(config_parse_fleet(c, "fleets.d/x.ini",
                                                    FLEET_MIN "[fleet]\nname = game\n", &err),
                                 -EEXIST);
                assert_string_equal(err, "fleets.d/x.ini:7: fleet.name: fleet game is already "
                                    "defined by " GSH);
                err = mfree(err);
        }
        {
                /* A .gsh fleet of another region still takes its name. */
                _cleanup_(config_freep) Config *c = machine("");
                char text[sizeof(gsh) + 64];

                assert_true(snprintf(text, sizeof(text), "%s    regions: {Asia: {}}\n", gsh) > 0);
                assert_int_equal(parse_gsh(c, text, &err), 0);
                assert_int_equal(c->n_fleets, 0);
                assert_string_equal(c->fleets_elsewhere_names[0], "game");
                assert_string_equal(c->fleets_elsewhere_files[0], GSH);
                assert_int_equal(config_parse_fleet(c, "fleets.d/x.ini",
                                                    FLEET_MIN "[fleet]\nname = game\n", &err),
                                 -EEXIST);
                assert_string_equal(err, "fleets.d/x.ini:7: fleet.name: fleet game is already "
                                    "defined by " GSH);
        }
}

/* config_load reads *.gsh beside *.ini in name order; config_load_full gives .gsh fleets
 * ports after the others'; a changed file is a changed fleet for Reload. */
static void test_gsh_load(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *fleets = path_join(dir, "fleets.d");
        _cleanup_free_ char *ini = path_join(dir, "slotd.ini");
        _cleanup_free_ char *build = NULL, *text = NULL, *err = NULL;
        MachineResources m = { .cpus = 8, .memory = UINT64_C(16) << 30, .cpu_mhz = 2000 };
        _cleanup_(config_freep) Config *c = NULL, *c2 = NULL;

        assert_int_equal(mkdir(fleets, 0755), 0);
        build = path_join(dir, "Game.x86_64");
        write_file_n(dir, "Game.x86_64", "#!/bin/sh\n", 10, 0755);
        assert_true(asprintf(&text, "[machine]\nregion = Europe\n[supervisor]\nbuilds_dir = %s\n",
                             dir) > 0);
        write_file(dir, "slotd.ini", text);
        write_file(fleets, "a.ini", "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 1\n"
                                    "memory = 1G\nservers = 2\n");
        write_file(fleets, "b.gsh", "builds: {b: {buildPath: ., executableName: Game.x86_64}}\n"
                                    "buildConfigurations: {c: {build: b}}\n"
                                    "fleets:\n"
                                    "  g1: {buildConfigurations: [c], regions: {Europe: {}},\n"
                                    "       usageSettings: [{hardwareType: METAL, speed: 1000,\n"
                                    "                        memory: 1024}]}\n"
                                    "  g2: {buildConfigurations: [c], regions: {Asia: {}}}\n");
        write_file(fleets, "b.gsh~", "not read");

        assert_int_equal(config_load_full(ini, fleets, &m, &c, &err), 0);
        assert_null(err);
        assert_int_equal(c->n_fleets, 2);
        assert_string_equal(c->fleets[0].name, "a");
        assert_string_equal(c->fleets[1].name, "g1");
        assert_string_equal(c->fleets[1].build, build);
        assert_int_equal(strv_length(c->fleets_elsewhere), 1);
        /* a: 9000-9001 and 9600-9601; g1 takes the next ones. */
        assert_int_equal(c->fleets[0].game_port_base, 9000);
        assert_true(c->fleets[1].slots >= 1);
        assert_int_equal(c->fleets[1].game_port_base, 9002);
        assert_int_equal(c->fleets[1].query_port_base, 9602);

        /* The same files again: the same fleets. A changed commandLine: a changed fleet. */
        assert_int_equal(config_load_full(ini, fleets, &m, &c2, &err), 0);
        assert_true(fleet_config_build_equal(&c->fleets[1], &c2->fleets[1]));
        c2 = config_free(c2);
        write_file(fleets, "b.gsh", "builds: {b: {buildPath: ., executableName: Game.x86_64}}\n"
                                    "buildConfigurations: {c: {build: b, commandLine: -x}}\n"
                                    "fleets:\n"
                                    "  g1: {buildConfigurations: [c], regions: {Europe: {}},\n"
                                    "       usageSettings: [{hardwareType: METAL, speed: 1000,\n"
                                    "                        memory: 1024}]}\n");
        assert_int_equal(config_load_full(ini, fleets, &m, &c2, &err), 0);
        assert_false(fleet_config_build_equal(&c->fleets[1], &c2->fleets[1]));
        assert_null(c2->fleets_elsewhere);

        /* machine.game_port_base and query_port_base move them. */
        c2 = config_free(c2);
        text = mfree(text);
        assert_true(asprintf(&text, "[machine]\nregion = Europe\ngame_port_base = 20000\n"
                             "query_port_base = 20100\n[supervisor]\nbuilds_dir = %s\n", dir) > 0);
        write_file(dir, "slotd.ini", text);
        assert_int_equal(config_load_full(ini, fleets, &m, &c2, &err), 0);
        assert_int_equal(c2->fleets[0].game_port_base, 9000);
        assert_int_equal(c2->fleets[1].game_port_base, 20000);
        assert_int_equal(c2->fleets[1].query_port_base, 20100);
}

static void test_gsh_tree(_unused_ void **state) {
        _cleanup_(gsh_node_freep) GshNode *root = NULL;
        _cleanup_free_ char *msg = NULL;
        unsigned line = 0, column = 0;
        const GshNode *n;
        static const char text[] = "a:\n  - x\n  - 'y'\nb: ~\n";

        assert_int_equal(gsh_parse(text, strlen(text), &root, &line, &column, &msg), 0);
        assert_int_equal(root->type, GSH_MAP);
        n = gsh_map_get(root, "a");
        assert_int_equal(n->type, GSH_LIST);
        assert_int_equal(n->key_line, 1);
        assert_int_equal(n->n_children, 2);
        assert_string_equal(n->children[1]->value, "y");
        assert_false(n->children[1]->plain);
        assert_int_equal(n->children[1]->line, 3);
        assert_int_equal(n->children[1]->column, 5);
        assert_true(gsh_is_null(gsh_map_get(root, "b")));
        assert_null(gsh_map_get(root, "c"));

        root = gsh_node_free(root);
        assert_int_equal(gsh_parse("", 0, &root, &line, &column, &msg), 0);
        assert_null(root);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_gsh_tree),
                cmocka_unit_test(test_gsh_unity_template),
                cmocka_unit_test(test_gsh_studio),
                cmocka_unit_test(test_gsh_names),
                cmocka_unit_test(test_gsh_regions),
                cmocka_unit_test(test_gsh_multiplayer_1_2),
                cmocka_unit_test(test_gsh_refusals),
                cmocka_unit_test(test_gsh_refusals_more),
                cmocka_unit_test(test_gsh_machine_keys),
                cmocka_unit_test(test_gsh_yaml_errors),
                cmocka_unit_test(test_gsh_every_error),
                cmocka_unit_test(test_gsh_ini_clash),
                cmocka_unit_test(test_gsh_load),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
