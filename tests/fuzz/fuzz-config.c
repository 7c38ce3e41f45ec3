/* SPDX-License-Identifier: MIT */
/* The configuration parser, density and cross-fleet validation. The input is slotd.ini, then
 * up to FLEETS_MAX fleet files, separated by NUL bytes (a NUL can never be part of a valid
 * file, so nothing of interest is lost): "slotd.ini\0a.ini\0b.ini...". */
#include <errno.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

#define FLEETS_MAX 6

static const char *const fleet_files[FLEETS_MAX] = {
        "fleets.d/alpha.ini", "fleets.d/bravo.ini", "fleets.d/charlie.ini",
        "fleets.d/delta.ini", "fleets.d/echo.ini",  "fleets.d/foxtrot.ini",
};

/* The machine the density shares out when slotd.ini does not set its own size. */
static const MachineResources machine = { .cpus = 8, .memory = UINT64_C(16) << 30,
                                          .cpu_mhz = 2400 };

/* Errors name the file first: "FILE:LINE: …" or "FILE: …". */
static void assert_error(int r, const char *error, const char *file) {
        FUZZ_ASSERT(r < 0);
        if (r == -ENOMEM)
                return;
        FUZZ_ASSERT(error);
        if (file)
                FUZZ_ASSERT(strncmp(error, file, strlen(file)) == 0 && error[strlen(file)] == ':');
}

static void assert_fleet_sane(const Config *c, const FleetConfig *f, const char *file) {
        FUZZ_ASSERT(f->file && strcmp(f->file, file) == 0);
        FUZZ_ASSERT(f->name && f->name[0] != '\0' && config_find_fleet(c, f->name) == f);
        FUZZ_ASSERT(f->build && f->args && f->environment);
        FUZZ_ASSERT(f->build_configuration && f->user && f->group);
        FUZZ_ASSERT(f->usage_cpu > 0 && f->usage_memory > 0);
        FUZZ_ASSERT(f->memory_max >= f->usage_memory);
        FUZZ_ASSERT(f->cpu_max == 0 || f->cpu_max >= f->usage_cpu);
        FUZZ_ASSERT(f->query == QUERY_NONE || f->check_interval == 0 ||
                    f->query_timeout < f->check_interval);
        FUZZ_ASSERT(f->query >= QUERY_NONE && f->query < _QUERY_TYPE_MAX);
        FUZZ_ASSERT(f->slots == 0);
}

/* SPEC §2: what the fleets take fits the machine minus the reserve, every fleet has a slot,
 * and a fixed servers count is honoured. */
static void assert_density_sane(const Config *c) {
        double cpus = c->cpus > 0 ? c->cpus : machine.cpus, cpu_used = 0, mhz_used = 0;
        uint64_t memory = c->memory > 0 ? c->memory : machine.memory, mem_left;
        unsigned mhz = c->cpu_mhz > 0 ? c->cpu_mhz : machine.cpu_mhz;

        FUZZ_ASSERT(c->reserved_cpus <= cpus && c->reserved_memory <= memory);
        mem_left = memory - c->reserved_memory;
        for (size_t i = 0; i < c->n_fleets; i++) {
                const FleetConfig *f = &c->fleets[i];

                FUZZ_ASSERT(f->slots >= 1);
                FUZZ_ASSERT(f->usage_servers == 0 || f->slots == f->usage_servers);
                FUZZ_ASSERT(f->slots <= mem_left / f->usage_memory);
                mem_left -= (uint64_t) f->slots * f->usage_memory;
                cpu_used += f->slots * f->usage_cpu;
                mhz_used += (double) f->slots * f->usage_speed_mhz;
                /* Multiplay's usage settings cap the count (issue 26). */
                FUZZ_ASSERT(f->usage_max_per_machine == 0 || f->slots <= f->usage_max_per_machine);
                FUZZ_ASSERT(f->usage_max_per_core == 0 ||
                            f->slots <= f->usage_max_per_core * (cpus - c->reserved_cpus) + 1e-6);
        }
        /* The density nudges each division by 1e-9 against binary rounding. */
        FUZZ_ASSERT(cpu_used <= (cpus - c->reserved_cpus) * (1 + 1e-6) + 1e-6);
        FUZZ_ASSERT(mhz_used <= (cpus - c->reserved_cpus) * mhz * (1 + 1e-6) + 1e-6);
}

/* A config that validates has port ranges that fit below 65536 and overlap nowhere. */
static void assert_ports_sane(const Config *c) {
        for (size_t i = 0; i < c->n_fleets * 2; i++) {
                const FleetConfig *a = &c->fleets[i / 2];
                unsigned a_first = i % 2 ? a->query_port_base : a->game_port_base;
                unsigned a_last = a_first + a->slots - 1;

                FUZZ_ASSERT(a_first >= 1 && a_last <= 65535 && a_last >= a_first);
                for (size_t j = 0; j < i; j++) {
                        const FleetConfig *b = &c->fleets[j / 2];
                        unsigned b_first = j % 2 ? b->query_port_base : b->game_port_base;
                        unsigned b_last = b_first + b->slots - 1;

                        FUZZ_ASSERT(a_first > b_last || b_first > a_last);
                }
        }
}

/* [fleet]'s TLS files (SPEC §2): absolute, the certificate with its key, and never beside a
 * plain http:// endpoint. */
static void assert_fleet_tls_sane(const FleetLayerConfig *f) {
        FUZZ_ASSERT(!f->etcd_cert == !f->etcd_key);
        FUZZ_ASSERT(!f->etcd_ca || f->etcd_ca[0] == '/');
        FUZZ_ASSERT(!f->etcd_cert || (f->etcd_cert[0] == '/' && f->etcd_key[0] == '/'));
        if (f->etcd_ca || f->etcd_cert)
                for (char **e = f->etcd_endpoints; e && *e; e++)
                        FUZZ_ASSERT(strncmp(*e, "https://", 8) == 0);
}

static void fuzz_config(char *files[], size_t n_files) {
        _cleanup_(config_freep) Config *c = NULL;
        char *error = NULL;
        int r;

        c = config_new();
        if (!c)
                return;

        r = config_parse_machine(c, "slotd.ini", files[0], &error);
        if (r < 0) {
                assert_error(r, error, "slotd.ini");
                free(error);
                return;
        }
        FUZZ_ASSERT(!error);
        FUZZ_ASSERT(c->state_dir && c->slots_dir && c->bus);
        /* metrics.listen: off, or one address that names itself */
        FUZZ_ASSERT(c->metrics_listen.family == AF_UNSPEC ||
                    (c->metrics_listen.text && c->metrics_listen.port > 0));
        FUZZ_ASSERT(c->cpus >= 0 && c->reserved_cpus >= 0);
        assert_fleet_tls_sane(&c->fleet);

        for (size_t i = 1; i < n_files; i++) {
                size_t n = c->n_fleets;

                r = config_parse_fleet(c, fleet_files[i - 1], files[i], &error);
                if (r < 0) {
                        assert_error(r, error, fleet_files[i - 1]);
                        FUZZ_ASSERT(c->n_fleets == n);
                        free(error);
                        error = NULL;
                        continue;
                }
                FUZZ_ASSERT(!error && c->n_fleets == n + 1);
                assert_fleet_sane(c, &c->fleets[n], fleet_files[i - 1]);
        }

        r = density_compute(c, &machine, &error);
        if (r < 0) {
                assert_error(r, error, NULL);
                for (size_t i = 0; i < c->n_fleets; i++)
                        FUZZ_ASSERT(c->fleets[i].slots == 0);
                free(error);
                return;
        }
        FUZZ_ASSERT(!error);
        assert_density_sane(c);

        /* Looks at fleet.build on disk (stat and access only). */
        r = config_validate(c, &error);
        if (r < 0) {
                assert_error(r, error, NULL);
                free(error);
                return;
        }
        FUZZ_ASSERT(!error);
        assert_ports_sane(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *files[1 + FLEETS_MAX], *text;
        size_t n_files = 0;

        /* The parsers take C strings: a copy with a NUL at the end. */
        text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';

        for (char *p = text; n_files < ELEMENTSOF(files);) {
                files[n_files++] = p;
                p = memchr(p, '\0', (size_t) (text + size - p) + 1);
                if (p == text + size)
                        break;
                p++;
        }

        fuzz_config(files, n_files);
        free(text);
        return 0;
}
