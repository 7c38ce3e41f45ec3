/* SPDX-License-Identifier: MIT */
/* The scaler's targets from a Multiplay .gsh file (fleet/allocator/scaler-gsh.c and
 * allocator-config.c's allocator_config_add_gsh()): fleet names as slotd spells them, region
 * names as the file has them, minAvailable the buffer, maxServers the ceiling, floor 0;
 * allocator.ini's targets over the file's; and FLEET/REGION in quotes in [scaler] targets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocator-config.h"
#include "strv.h"

#define GSH "/etc/slotd/fleets.d/game.gsh"

/* Two fleets with blanks in their names, in two regions each (one with a blank, one
 * offline); maxServers left out of one region. */
static const char game_gsh[] =
        "version: 1.0\n"                                      /* 1 */
        "builds:\n"
        "  my build:\n"
        "    buildPath: Builds/Server\n"
        "buildConfigurations:\n"                              /* 5 */
        "  my build configuration:\n"
        "    build: my build\n"
        "    queryType: sqp\n"
        "    commandLine: -port $$port$$ -queryport $$query_port$$\n"
        "fleets:\n"                                           /* 10 */
        "  my fleet:\n"
        "    buildConfigurations:\n"
        "      - my build configuration\n"
        "    regions:\n"
        "      North America:\n"                              /* 15 */
        "        minAvailable: 2\n"
        "        maxServers: 3\n"
        "      Europe:\n"
        "        minAvailable: 1\n"
        "  \"EU Fleet #2\":\n"                                /* 20 */
        "    buildConfigurations:\n"
        "      - my build configuration\n"
        "    regions:\n"
        "      Europe:\n"
        "        minAvailable: 0\n"                           /* 25 */
        "        maxServers: 5\n"
        "      Asia Pacific:\n"
        "        minAvailable: 4\n"
        "        maxServers: 8\n"
        "        online: false\n"                             /* 30 */
        "  no regions:\n"
        "    buildConfigurations:\n"
        "      - my build configuration\n";

static const char ini_head[] =
        "[etcd]\n"
        "endpoints = http://127.0.0.1:2379\n"
        "[scaler]\n";

static Config *gsh_config(void) {
        Config *c = config_new();
        char *error = NULL;

        assert_non_null(c);
        c->gsh_every_region = true;
        assert_int_equal(config_parse_gsh(c, GSH, game_gsh, strlen(game_gsh), &error), 0);
        assert_null(error);
        return c;
}

static AllocatorConfig *allocator_config(const char *scaler) {
        _cleanup_free_ char *text = NULL, *error = NULL;
        AllocatorConfig *a = NULL;

        assert_true(asprintf(&text, "%s%s", ini_head, scaler) > 0);
        assert_int_equal(allocator_config_parse("allocator.ini", text, strlen(text), &a, &error),
                         0);
        assert_null(error);
        return a;
}

static void assert_target(const AllocatorConfig *a, const char *fleet, const char *region,
                          uint32_t buffer, uint32_t floor, uint32_t ceiling, const char *origin) {
        const ScalerTargets *t = &a->scaler_targets;
        const ScalerTarget *x = scaler_target_find(t->targets, t->n, fleet, region);

        assert_non_null(x);
        assert_int_equal(x->buffer, buffer);
        assert_int_equal(x->floor, floor);
        assert_int_equal(x->ceiling, ceiling);
        assert_string_equal(t->origins[x - t->targets], origin);
}

/* Without allocator.ini targets: one target per region of each fleet with regions. */
static void test_gsh_targets(void **state) {
        _cleanup_(config_freep) Config *gsh = gsh_config();
        _cleanup_(allocator_config_freep) AllocatorConfig *a = allocator_config("interval = 1s\n");

        (void) state;
        assert_int_equal(a->scaler_targets.n, 0);
        assert_int_equal(allocator_config_add_gsh(a, gsh), 0);
        assert_int_equal(a->scaler_targets.n, 4);
        assert_int_equal(strv_length(a->scaler_targets.origins), 4);
        assert_target(a, "my-fleet", "North America", 2, 0, 3,
                      GSH ":15:7: fleets.my fleet.regions.North America");
        /* No maxServers: no ceiling. */
        assert_target(a, "my-fleet", "Europe", 1, 0, SCALER_CEILING_NONE,
                      GSH ":18:7: fleets.my fleet.regions.Europe");
        assert_target(a, "EU-Fleet-2", "Europe", 0, 0, 5,
                      GSH ":24:7: fleets.EU Fleet #2.regions.Europe");
        /* Offline: the region runs nothing. */
        assert_target(a, "EU-Fleet-2", "Asia Pacific", 0, 0, 0,
                      GSH ":27:7: fleets.EU Fleet #2.regions.Asia Pacific (offline)");
        /* A region the file does not name, a fleet without regions, the file's own names:
         * no target. */
        assert_null(scaler_target_find(a->scaler_targets.targets, a->scaler_targets.n,
                                       "my-fleet", "Asia Pacific"));
        assert_null(scaler_target_find(a->scaler_targets.targets, a->scaler_targets.n,
                                       "no-regions", ""));
        assert_null(scaler_target_find(a->scaler_targets.targets, a->scaler_targets.n,
                                       "my fleet", "Europe"));
        assert_int_equal(strv_length(a->scaler_notes), 1);
        assert_string_equal(a->scaler_notes[0], GSH ":31: fleets.no regions: no regions, so "
                            "no target of the scaler (fleet no-regions)");
}

/* allocator.ini's FLEET/REGION wins over that region, its FLEET over every region of the
 * fleet; each replaced target is a note naming both. */
static void test_gsh_explicit_wins(void **state) {
        _cleanup_(config_freep) Config *gsh = gsh_config();
        _cleanup_(allocator_config_freep) AllocatorConfig *a = allocator_config(
                "interval = 1s\n"
                "targets = \"my-fleet/North America\" buffer=5 floor=1 ceiling=9; "
                "EU-Fleet-2 buffer=1; other buffer=3\n");
        const char *ini = "allocator.ini:5: scaler.targets";

        (void) state;
        assert_int_equal(a->scaler_targets.n, 3);
        assert_int_equal(allocator_config_add_gsh(a, gsh), 0);
        /* The three of allocator.ini and my-fleet/Europe of the file. */
        assert_int_equal(a->scaler_targets.n, 4);
        assert_target(a, "my-fleet", "North America", 5, 1, 9, ini);
        assert_target(a, "my-fleet", "Europe", 1, 0, SCALER_CEILING_NONE,
                      GSH ":18:7: fleets.my fleet.regions.Europe");
        assert_target(a, "EU-Fleet-2", "Europe", 1, 0, SCALER_CEILING_NONE, ini);
        assert_target(a, "EU-Fleet-2", "Asia Pacific", 1, 0, SCALER_CEILING_NONE, ini);
        assert_target(a, "other", "Europe", 3, 0, SCALER_CEILING_NONE, ini);
        assert_int_equal(strv_length(a->scaler_notes), 4);
        assert_string_equal(a->scaler_notes[1], "allocator.ini:5: scaler.targets: "
                            "\"my-fleet/North America\" buffer=5 floor=1 ceiling=9 replaces "
                            "\"my-fleet/North America\" buffer=2 floor=0 ceiling=3 of "
                            GSH ":15:7: fleets.my fleet.regions.North America");
        assert_string_equal(a->scaler_notes[2], "allocator.ini:5: scaler.targets: "
                            "EU-Fleet-2 buffer=1 floor=0 replaces EU-Fleet-2/Europe buffer=0 "
                            "floor=0 ceiling=5 of " GSH ":24:7: fleets.EU Fleet #2.regions.Europe");
        assert_string_equal(a->scaler_notes[3], "allocator.ini:5: scaler.targets: "
                            "EU-Fleet-2 buffer=1 floor=0 replaces \"EU-Fleet-2/Asia Pacific\" "
                            "buffer=0 floor=0 ceiling=0 of " GSH ":27:7: fleets.EU Fleet "
                            "#2.regions.Asia Pacific (offline)");
}

/* slotd's own reading of the same file, on a machine without machine.region: no fleet with
 * regions runs here. The allocator's (gsh_every_region) keeps them all. */
static void test_gsh_every_region(void **state) {
        _cleanup_(config_freep) Config *c = config_new();
        _cleanup_(config_freep) Config *every = gsh_config();
        char *error = NULL;

        (void) state;
        assert_int_equal(config_parse_gsh(c, GSH, game_gsh, strlen(game_gsh), &error), 0);
        assert_int_equal(c->n_fleets, 1);
        assert_string_equal(c->fleets[0].name, "no-regions");
        assert_int_equal(strv_length(c->fleets_elsewhere), 2);
        assert_int_equal(every->n_fleets, 3);
        assert_null(every->fleets_elsewhere);
}

/* [scaler] gsh: absolute paths and patterns, blanks between. */
static void test_gsh_key(void **state) {
        _cleanup_(allocator_config_freep) AllocatorConfig *a = allocator_config(
                "gsh = /etc/slotd/fleets.d/*.gsh  /srv/game.gsh /srv/game.gsh\n");
        AllocatorConfig *b = NULL;
        _cleanup_free_ char *error = NULL;
        const char *bad = "[etcd]\nendpoints = http://127.0.0.1:2379\n[scaler]\ngsh = game.gsh\n";

        (void) state;
        assert_int_equal(strv_length(a->scaler_gsh), 2);
        assert_string_equal(a->scaler_gsh[0], "/etc/slotd/fleets.d/*.gsh");
        assert_string_equal(a->scaler_gsh[1], "/srv/game.gsh");
        assert_int_equal(allocator_config_parse("allocator.ini", bad, strlen(bad), &b, &error),
                         -EINVAL);
        assert_null(b);
        assert_non_null(strstr(error, "allocator.ini:4: scaler.gsh: expected absolute paths or "
                               "patterns of .gsh files; 'game.gsh' is not one"));
}

/* "FLEET/REGION" in double quotes holds blanks; what scaler_target_format() writes parses back
 * the same. */
static void test_targets_quoted(void **state) {
        const char *bad[] = { "\"f/North America buffer=1", "\"f/a\"b buffer=1", "\"\" buffer=1",
                              "\"f/a\nb\" buffer=1", "f/a\x7f buffer=1" };
        ScalerTarget *t = NULL, *u = NULL;
        size_t n = 0, m = 0;
        char *error = NULL;

        (void) state;
        assert_int_equal(scaler_targets_parse("\"my-fleet/North America\" buffer=2 ceiling=3;"
                                              "\"f\" floor=1; g/eu buffer=1", &t, &n, &error), 0);
        assert_int_equal(n, 3);
        assert_string_equal(t[0].fleet, "my-fleet");
        assert_string_equal(t[0].region, "North America");
        assert_int_equal(t[0].buffer, 2);
        assert_int_equal(t[0].ceiling, 3);
        assert_string_equal(t[1].fleet, "f");
        assert_null(t[1].region);
        assert_int_equal(t[1].floor, 1);
        assert_string_equal(t[2].region, "eu");
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *s = scaler_target_format(&t[i]);

                assert_non_null(s);
                assert_int_equal(scaler_targets_parse(s, &u, &m, &error), 0);
                assert_int_equal(m, 1);
                assert_string_equal(u[0].fleet, t[i].fleet);
                assert_true(t[i].region ? streq(u[0].region, t[i].region) : !u[0].region);
                assert_int_equal(u[0].buffer, t[i].buffer);
                assert_int_equal(u[0].floor, t[i].floor);
                assert_int_equal(u[0].ceiling, t[i].ceiling);
                scaler_targets_free(u, m);
        }
        scaler_targets_free(t, n);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(scaler_targets_parse(bad[i], &t, &n, &error), -EINVAL);
                assert_non_null(error);
                error = mfree(error);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_gsh_targets),
                cmocka_unit_test(test_gsh_explicit_wins),
                cmocka_unit_test(test_gsh_every_region),
                cmocka_unit_test(test_gsh_key),
                cmocka_unit_test(test_targets_quoted),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
