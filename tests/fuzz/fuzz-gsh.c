/* SPDX-License-Identifier: MIT */
/* Multiplay config-as-code files (.gsh): libyaml's events into the tree (config/gsh.c), the
 * mapping onto fleets (gsh-map.c, gsh-fleet.c), then the density on a fixed machine. The
 * input is one .gsh file; slotd.ini is fixed: machine.region Europe, builds under /srv. */
#include <errno.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "strv.h"

#define FILE_NAME "fleets.d/game.gsh"

static const MachineResources machine = { .cpus = 8, .memory = UINT64_C(16) << 30 };

/* Every line of a message names the file first: "FILE:LINE:COLUMN: …" (or "FILE: …"), but
 * the last of a long list, which says more were left out. */
static void assert_lines_name_file(const char *s) {
        for (const char *p = s; p && *p;) {
                const char *nl = strchr(p, '\n');

                FUZZ_ASSERT(strncmp(p, FILE_NAME ":", strlen(FILE_NAME ":")) == 0 ||
                            (!nl && strcmp(p, "(more errors not shown)") == 0));
                p = nl ? nl + 1 : NULL;
        }
}

static void assert_fleet_sane(const FleetConfig *f) {
        FUZZ_ASSERT(f->file && strcmp(f->file, FILE_NAME) == 0);
        FUZZ_ASSERT(f->name && f->name[0] != '\0' && f->name[0] != '.');
        FUZZ_ASSERT(f->build && f->build[0] == '/' && f->args && f->environment);
        FUZZ_ASSERT(f->user && f->group && f->build_configuration);
        FUZZ_ASSERT(f->usage_cpu >= 1 && f->usage_memory >= (UINT64_C(1) << 20));
        FUZZ_ASSERT(f->memory_max >= f->usage_memory && f->ports_auto);
        FUZZ_ASSERT(f->n_build_configs >= 1);
        FUZZ_ASSERT(strcmp(f->build_configs[0].id, f->build_configuration) == 0);
        for (size_t i = 0; i < f->n_build_configs; i++) {
                const BuildConfig *b = &f->build_configs[i];

                FUZZ_ASSERT(b->build && b->build[0] == '/' && b->args && b->environment);
                FUZZ_ASSERT(b->variable_names && b->variable_values);
                FUZZ_ASSERT(b->variable_names[b->n_variables] == NULL);
                FUZZ_ASSERT(b->variable_values[b->n_variables] == NULL);
                FUZZ_ASSERT(b->query >= QUERY_NONE && b->query < _QUERY_TYPE_MAX);
        }
        /* With regions, it runs here only in machine.region's, online. */
        if (f->n_regions == 0)
                FUZZ_ASSERT(strcmp(f->region_id, "") == 0);
        else {
                bool found = false;

                FUZZ_ASSERT(strcmp(f->region_id, "Europe") == 0 &&
                            strcmp(f->region_name, "Europe") == 0);
                for (size_t i = 0; i < f->n_regions; i++) {
                        const FleetRegion *r = &f->regions[i];

                        FUZZ_ASSERT(r->min_available <= r->max_servers || r->max_servers == 0);
                        found = found || (strcmp(r->name, "Europe") == 0 && r->online);
                }
                FUZZ_ASSERT(found);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Config *c = config_new();
        char *error = NULL;
        int r;

        if (!c)
                return 0;
        r = config_parse_machine(c, "slotd.ini",
                                 "[machine]\nregion = Europe\n[supervisor]\nbuilds_dir = /srv\n",
                                 NULL);
        FUZZ_ASSERT(r == 0);

        r = config_parse_gsh(c, FILE_NAME, (const char *) data, size, &error);
        if (r < 0) {
                FUZZ_ASSERT(c->n_fleets == 0 && !c->fleets_elsewhere);
                if (r != -ENOMEM) {
                        FUZZ_ASSERT(error);
                        assert_lines_name_file(error);
                }
                free(error);
                config_free(c);
                return 0;
        }
        FUZZ_ASSERT(!error);
        FUZZ_ASSERT(strv_length(c->fleets_elsewhere) == strv_length(c->fleets_elsewhere_names));
        FUZZ_ASSERT(strv_length(c->fleets_elsewhere) == strv_length(c->fleets_elsewhere_files));
        for (size_t i = 0; c->fleets_elsewhere && c->fleets_elsewhere[i]; i++) {
                assert_lines_name_file(c->fleets_elsewhere[i]);
                FUZZ_ASSERT(strcmp(c->fleets_elsewhere_files[i], FILE_NAME) == 0);
                FUZZ_ASSERT(!config_find_fleet(c, c->fleets_elsewhere_names[i]));
        }
        for (size_t i = 0; i < c->n_fleets; i++) {
                assert_fleet_sane(&c->fleets[i]);
                for (size_t j = 0; j < i; j++)
                        FUZZ_ASSERT(strcmp(c->fleets[i].name, c->fleets[j].name) != 0);
        }

        r = density_compute(c, &machine, &error);
        if (r < 0) {
                FUZZ_ASSERT(r == -ENOMEM || error);
                free(error);
        } else
                for (size_t i = 0; i < c->n_fleets; i++)
                        FUZZ_ASSERT(c->fleets[i].slots >= 1);
        config_free(c);
        return 0;
}
