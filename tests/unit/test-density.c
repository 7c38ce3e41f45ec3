/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <string.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "config.h"

#define GiB (UINT64_C(1) << 30)

static Config *machine(const char *text) {
        Config *c = config_new();

        assert_non_null(c);
        assert_int_equal(config_parse_machine(c, "slotd.ini", text, NULL), 0);
        return c;
}

/* A fleet file whose usage.servers, when given in extra, is on line 6. */
static void add_fleet(Config *c, const char *file, const char *cpu, const char *memory,
                      const char *extra) {
        _cleanup_free_ char *text = NULL, *err = NULL;

        assert_true(asprintf(&text, "[fleet]\nbuild = /bin/true\n[usage]\ncpu = %s\nmemory = %s\n%s",
                             cpu, memory, extra ?: "") > 0);
        assert_int_equal(config_parse_fleet(c, file, text, &err), 0);
        assert_null(err);
}

static void check_density_error(Config *c, const MachineResources *m, int expect_r,
                                const char *expect) {
        _cleanup_free_ char *err = NULL;

        assert_int_equal(density_compute(c, m, &err), expect_r);
        assert_non_null(err);
        assert_string_equal(err, expect);
}

static void test_one_fleet(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("");
        MachineResources cpu_bound = { .cpus = 16, .memory = 64 * GiB };
        MachineResources mem_bound = { .cpus = 16, .memory = 8 * GiB };
        MachineResources odd = { .cpus = 16, .memory = 8 * GiB - 1 };

        add_fleet(c, "a.ini", "0.5", "1G", NULL);

        assert_int_equal(density_compute(c, &cpu_bound, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 32);
        assert_int_equal(density_compute(c, &mem_bound, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 8);
        /* a byte short of the 8th server */
        assert_int_equal(density_compute(c, &odd, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 7);
}

static void test_no_fleets(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\nreserved_cpus = 4\n");
        MachineResources m = { .cpus = 4, .memory = GiB };

        assert_int_equal(density_compute(c, &m, NULL), 0);
        assert_int_equal(c->n_fleets, 0);
}

static void test_reserved(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\nreserved_cpus = 2\n"
                                                    "reserved_memory = 4G\n");
        _cleanup_(config_freep) Config *d = machine("[machine]\nreserved_cpus = 150%\n"
                                                    "reserved_memory = 4G\n");
        MachineResources m = { .cpus = 16, .memory = 64 * GiB };
        MachineResources small = { .cpus = 64, .memory = 16 * GiB };

        add_fleet(c, "a.ini", "0.5", "1G", NULL);
        assert_int_equal(density_compute(c, &m, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 28); /* 14 cores left */
        assert_int_equal(density_compute(c, &small, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 12); /* 12G left */

        add_fleet(d, "a.ini", "0.5", "1G", NULL);
        assert_int_equal(density_compute(d, &m, NULL), 0);
        assert_int_equal(d->fleets[0].slots, 29); /* 14.5 cores left */
}

static void test_reserved_exceeds(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\nreserved_cpus = 20\n");
        _cleanup_(config_freep) Config *d = machine("; x\n[machine]\nreserved_memory = 128G\n");
        _cleanup_(config_freep) Config *e = machine("[machine]\nreserved_cpus = 16\n");
        MachineResources m = { .cpus = 16, .memory = 64 * GiB };

        check_density_error(c, &m, -ERANGE,
                            "slotd.ini:2: machine.reserved_cpus: 20 cores reserved, but the "
                            "machine has only 16");
        check_density_error(d, &m, -ERANGE,
                            "slotd.ini:3: machine.reserved_memory: 128G reserved, but the "
                            "machine has only 64G");

        /* everything reserved is fine until a fleet wants a slot */
        assert_int_equal(density_compute(e, &m, NULL), 0);
        add_fleet(e, "a.ini", "0.5", "1G", NULL);
        check_density_error(e, &m, -ERANGE,
                            "a.ini: fleet a gets no slot: needs 0.5 cores and 1G per server, 0 "
                            "cores and 64G left");
}

static void test_configured_machine(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\ncpus = 4\nmemory = 6G\n");
        _cleanup_(config_freep) Config *d = machine("[machine]\ncpus = 4\n");
        _cleanup_(config_freep) Config *e = machine("");
        MachineResources big = { .cpus = 64, .memory = 256 * GiB };

        add_fleet(c, "a.ini", "0.5", "1G", NULL);
        assert_int_equal(density_compute(c, &big, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 6);
        /* both configured: nothing detected is needed */
        assert_int_equal(density_compute(c, NULL, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 6);

        /* cpus configured, memory detected */
        add_fleet(d, "a.ini", "0.5", "1G", NULL);
        assert_int_equal(density_compute(d, &big, NULL), 0);
        assert_int_equal(d->fleets[0].slots, 8);
        check_density_error(d, NULL, -EINVAL,
                            "slotd.ini: the machine's memory is unknown; set machine.memory");

        assert_int_equal(free_and_strdup(&e->config_file, "/etc/slotd/slotd.ini"), 0);
        check_density_error(e, NULL, -EINVAL,
                            "/etc/slotd/slotd.ini: the machine's CPU count is unknown; set "
                            "machine.cpus");
}

static void test_several_fleets(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("");
        MachineResources m = { .cpus = 16, .memory = 64 * GiB };

        add_fleet(c, "a.ini", "1", "2G", "servers = 4\n");
        add_fleet(c, "b.ini", "0.5", "4G", NULL);
        add_fleet(c, "c.ini", "25%", "256M", NULL);

        /* a: 4 fixed (12 cores, 56G left). Alone, b would take min(24, 14) = 14 and c
         * min(48, 224) = 48: 19 cores of 12, so they share. Each takes all of its dominant
         * resource alone, so each gets half: b min(6 / 0.5, 28G / 4G) = 7, c min(6 / 0.25,
         * 28G / 256M) = 24. Again with the 2.5 cores and 22G left: b min(1.25 / 0.5, 11G / 4G)
         * = 2, c 1.25 / 0.25 = 5; then with 0.25 cores and 12.75G only c fits one more. */
        assert_int_equal(density_compute(c, &m, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 4);
        assert_int_equal(c->fleets[1].slots, 9);
        assert_int_equal(c->fleets[2].slots, 30);

        /* the same again gives the same */
        assert_int_equal(density_compute(c, &m, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 4);
        assert_int_equal(c->fleets[1].slots, 9);
        assert_int_equal(c->fleets[2].slots, 30);

        /* what is fixed does not fit: nothing is set on failure */
        c->fleets[0].usage_servers = 17;
        c->fleets[0].slots = c->fleets[1].slots = c->fleets[2].slots = 0;
        check_density_error(c, &m, -ERANGE,
                            "a.ini:6: usage.servers: needs 17 servers but only 16 fit (16 cores "
                            "and 64G left)");
        assert_int_equal(c->fleets[0].slots, 0);
        assert_int_equal(c->fleets[1].slots, 0);
}

static void test_floating_point(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("");
        _cleanup_(config_freep) Config *d = machine("");
        _cleanup_(config_freep) Config *e = machine("");
        _cleanup_(config_freep) Config *f = machine("[machine]\nreserved_cpus = 0.3\n");
        MachineResources one = { .cpus = 1, .memory = 64 * GiB };
        MachineResources three = { .cpus = 3, .memory = 64 * GiB };
        MachineResources point6 = { .cpus = 0.6, .memory = 64 * GiB };

        /* 1 / 0.1 is 9.999999999999998 in binary */
        add_fleet(c, "a.ini", "0.1", "1M", NULL);
        assert_int_equal(density_compute(c, &one, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 10);

        /* 3 - 0.7 = 2.3000000000000003, and 0.1 × 3 leftovers */
        add_fleet(d, "a.ini", "0.1", "1M", "servers = 7\n");
        add_fleet(d, "b.ini", "0.1", "1M", "servers = 3\n");
        add_fleet(d, "c.ini", "0.1", "1M", NULL);
        assert_int_equal(density_compute(d, &three, NULL), 0);
        assert_int_equal(d->fleets[0].slots, 7);
        assert_int_equal(d->fleets[1].slots, 3);
        assert_int_equal(d->fleets[2].slots, 20);

        /* 0.6 / 0.2 is 2.9999999999999996 */
        add_fleet(e, "a.ini", "0.2", "1M", NULL);
        assert_int_equal(density_compute(e, &point6, NULL), 0);
        assert_int_equal(e->fleets[0].slots, 3);

        /* 1 - 0.3 reserved = 0.7, / 0.1 = 6.999999999999999 */
        add_fleet(f, "a.ini", "10%", "1M", NULL);
        assert_int_equal(density_compute(f, &one, NULL), 0);
        assert_int_equal(f->fleets[0].slots, 7);
}

static void test_servers_cap(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("");
        _cleanup_(config_freep) Config *d = machine("");
        _cleanup_(config_freep) Config *e = machine("");
        MachineResources m = { .cpus = 16, .memory = 64 * GiB };

        add_fleet(c, "a.ini", "0.5", "1G", "servers = 4\n");
        assert_int_equal(density_compute(c, &m, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 4);

        add_fleet(d, "a.ini", "0.5", "1G", "servers = 32\n");
        assert_int_equal(density_compute(d, &m, NULL), 0);
        assert_int_equal(d->fleets[0].slots, 32);

        add_fleet(e, "/etc/slotd/fleets.d/a.ini", "0.5", "1G", "servers = 33\n");
        check_density_error(e, &m, -ERANGE,
                            "/etc/slotd/fleets.d/a.ini:6: usage.servers: needs 33 servers but "
                            "only 32 fit (16 cores and 64G left)");
}

static void test_no_slot(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("");
        _cleanup_(config_freep) Config *d = machine("");
        MachineResources m = { .cpus = 2, .memory = 64 * GiB };
        MachineResources little_memory = { .cpus = 16, .memory = GiB };

        add_fleet(c, "/etc/slotd/fleets.d/a.ini", "2", "2G", NULL);
        add_fleet(c, "/etc/slotd/fleets.d/b.ini", "0.5", "1G", NULL);
        /* a alone takes both cores, b alone 4 servers: they share, and a's half (1 core)
         * holds none of its 2-core servers. */
        check_density_error(c, &m, -ERANGE,
                            "/etc/slotd/fleets.d/a.ini: fleet a gets no slot: needs 2 cores and "
                            "2G per server; its fair share of the 2 cores and 64G that the fixed "
                            "fleets leave, shared by 2 automatic fleets, holds none");

        add_fleet(d, "shooter.ini", "0.5", "1536M", NULL);
        check_density_error(d, &little_memory, -ERANGE,
                            "shooter.ini: fleet shooter gets no slot: needs 0.5 cores and 1.5G per "
                            "server, 16 cores and 1G left");
}

static void test_bad_usage(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("");
        MachineResources m = { .cpus = 16, .memory = 64 * GiB };

        /* a Config edited by hand must not divide by zero */
        add_fleet(c, "a.ini", "1", "1G", NULL);
        c->fleets[0].usage_cpu = 0;
        check_density_error(c, &m, -EINVAL,
                            "a.ini: fleet a: usage.cpu and usage.memory must be greater than 0");
        c->fleets[0].usage_cpu = 1;
        c->fleets[0].usage_memory = 0;
        check_density_error(c, &m, -EINVAL,
                            "a.ini: fleet a: usage.cpu and usage.memory must be greater than 0");
}

static void test_huge_count(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\ncpus = 1000000\n"
                                                    "memory = 16777215T\n");

        /* more than UINT_MAX would fit: capped, port validation refuses it later */
        add_fleet(c, "a.ini", "0.000000001", "1", NULL);
        assert_int_equal(density_compute(c, NULL, NULL), 0);
        assert_int_equal(c->fleets[0].slots, UINT_MAX);
        assert_int_equal(config_validate(c, NULL), -ERANGE);
}

/* usage.speed: MHz per server against cores × MHz of a core; machine.cpu_mhz wins over the
 * detected MHz, and without either a fleet that sets usage.speed is an error. */
static void test_speed(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\ncpus = 8\ncpu_mhz = 2500\n");
        _cleanup_(config_freep) Config *d = machine("[machine]\nreserved_cpus = 2\n");
        _cleanup_free_ char *text = NULL;
        MachineResources m = { .cpus = 64, .memory = 64 * GiB, .cpu_mhz = 1000 };
        MachineResources no_mhz = { .cpus = 8, .memory = 64 * GiB };

        assert_int_equal(c->cpu_mhz, 2500);
        add_fleet(c, "a.ini", "0.1", "1M", "speed = 3000\n");
        assert_int_equal(c->fleets[0].usage_speed_mhz, 3000);
        /* 8 × 2500 = 20000 MHz / 3000 = 6 (cpu alone: 80, memory: 65536) */
        assert_int_equal(density_compute(c, &m, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 6);
        assert_int_equal(density_format(c, &m, &text, NULL), 0);
        assert_non_null(strstr(text, "speed floor(20000 MHz / 3000 MHz) = 6"));
        assert_non_null(strstr(text, "density: fleet a: 6 slots (automatic, all it can take)"));

        /* detected: (8 - 2) × 1000 MHz / 700 = 8 */
        add_fleet(d, "a.ini", "0.1", "1M", "speed = 700\n");
        m.cpus = 8;
        assert_int_equal(density_compute(d, &m, NULL), 0);
        assert_int_equal(d->fleets[0].slots, 8);
        check_density_error(d, &no_mhz, -EINVAL,
                            "a.ini: fleet a sets usage.speed, but the MHz of this machine's cores "
                            "are unknown (no cpufreq, no \"cpu MHz\" in /proc/cpuinfo); set "
                            "machine.cpu_mhz in slotd.ini");
        /* a fleet without usage.speed needs no MHz */
        d->fleets[0].usage_speed_mhz = 0;
        assert_int_equal(density_compute(d, &no_mhz, NULL), 0);
        assert_int_equal(d->fleets[0].slots, 60);
}

/* usage.max_per_core (× the cores left for servers) and usage.max_per_machine cap a fleet. */
static void test_max_per(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\ncpus = 8\nreserved_cpus = 2\n");
        _cleanup_(config_freep) Config *d = machine("[machine]\ncpus = 8\n");
        _cleanup_free_ char *text = NULL;
        MachineResources m = { .cpus = 8, .memory = 64 * GiB };

        add_fleet(c, "a.ini", "0.1", "1M", "max_per_core = 2\n");
        assert_int_equal(density_compute(c, &m, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 12); /* 2 × 6 cores; cpu alone: 60 */
        assert_int_equal(density_format(c, &m, &text, NULL), 0);
        assert_non_null(strstr(text, "max_per_core 2 × 6 cores = 12"));

        add_fleet(d, "a.ini", "0.1", "1M", "max_per_core = 2\nmax_per_machine = 5\n");
        assert_int_equal(density_compute(d, &m, NULL), 0);
        assert_int_equal(d->fleets[0].slots, 5);
}

/* Automatic fleets that all fit get all they ask; none takes the machine by being first. */
static void test_fair_fits(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("[machine]\ncpus = 16\n");
        MachineResources m = { .cpus = 16, .memory = 64 * GiB };

        add_fleet(c, "a.ini", "0.5", "1G", "max_per_machine = 10\n");
        add_fleet(c, "b.ini", "0.5", "1G", "max_per_machine = 12\n");
        /* 10 + 12 servers: 11 cores and 22G of 16 and 64 */
        assert_int_equal(density_compute(c, &m, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 10);
        assert_int_equal(c->fleets[1].slots, 12);
}

/* When they ask too much: equal shares, whatever the file order. */
static void test_fair_equal(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("");
        _cleanup_(config_freep) Config *d = machine("");
        _cleanup_(config_freep) Config *e = machine("");
        _cleanup_free_ char *text = NULL;
        MachineResources m = { .cpus = 16, .memory = 64 * GiB };

        add_fleet(c, "a.ini", "1", "1G", NULL);
        add_fleet(c, "b.ini", "1", "1G", NULL);
        assert_int_equal(density_compute(c, &m, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 8);
        assert_int_equal(c->fleets[1].slots, 8);
        assert_int_equal(density_format(c, &m, &text, NULL), 0);
        assert_non_null(strstr(text, "2 automatic fleets share 16 cores, 64G after the fixed "
                                     "ones (more than that asked: fair shares)"));

        /* three on 16 cores: 5 each; the 16th core holds a third of a server for each */
        add_fleet(d, "a.ini", "1", "1G", NULL);
        add_fleet(d, "b.ini", "1", "1G", NULL);
        add_fleet(d, "c.ini", "1", "1G", NULL);
        assert_int_equal(density_compute(d, &m, NULL), 0);
        assert_int_equal(d->fleets[0].slots, 5);
        assert_int_equal(d->fleets[1].slots, 5);
        assert_int_equal(d->fleets[2].slots, 5);

        /* Different sizes, either order. Each first gets half of its dominant resource:
         * heavy-cpu 8 cores → 4, heavy-mem 32G → 4. What is left (6 cores, 28G) is shared
         * again: 1 and 1; then (3.5 cores, 19G) both fit what they ask alone, 1 and 2. In all
         * 6 × 2 + 7 × 0.5 = 15.5 cores and 6 × 1G + 7 × 8G = 62G. */
        add_fleet(e, "heavy-cpu.ini", "2", "1G", NULL);
        add_fleet(e, "heavy-mem.ini", "0.5", "8G", NULL);
        assert_int_equal(density_compute(e, &m, NULL), 0);
        assert_int_equal(e->fleets[0].slots, 6);
        assert_int_equal(e->fleets[1].slots, 7);
        /* swapped file order gives each the same */
        FleetConfig t = e->fleets[0];
        e->fleets[0] = e->fleets[1];
        e->fleets[1] = t;
        assert_int_equal(density_compute(e, &m, NULL), 0);
        assert_int_equal(e->fleets[0].slots, 7);
        assert_int_equal(e->fleets[1].slots, 6);
}

/* A fleet capped below its share takes only what it needs; the other gets the rest. */
static void test_fair_redistributed(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = machine("");
        MachineResources m = { .cpus = 16, .memory = 64 * GiB };

        add_fleet(c, "a.ini", "1", "1G", "max_per_machine = 2\n");
        add_fleet(c, "b.ini", "1", "1G", NULL);
        add_fleet(c, "c.ini", "1", "1G", "servers = 4\n");
        /* c fixed: 4 (12 cores left); a 2 of its 6-core half, b the other 10 */
        assert_int_equal(density_compute(c, &m, NULL), 0);
        assert_int_equal(c->fleets[0].slots, 2);
        assert_int_equal(c->fleets[1].slots, 10);
        assert_int_equal(c->fleets[2].slots, 4);
}

static void test_detect(_unused_ void **state) {
        MachineResources m = { .cpus = -1, .memory = 0 };
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        assert_int_equal(machine_resources_detect(&m), 0);
        assert_true(m.cpus == (double) n);
        assert_true(m.cpus >= 1);
        assert_true(m.memory >= UINT64_C(16) << 20);
        assert_int_equal(m.memory % 1024, 0);

        /* The MHz: cpufreq's when there is one, else /proc/cpuinfo's first "cpu MHz". */
        if (access("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", F_OK) < 0) {
                _cleanup_fclose_ FILE *f = fopen("/proc/cpuinfo", "re");
                _cleanup_free_ char *line = NULL;
                size_t size = 0;
                double mhz = 0;

                assert_non_null(f);
                while (getline(&line, &size, f) > 0 && sscanf(line, "cpu MHz : %lf", &mhz) != 1)
                        ;
                assert_int_equal(m.cpu_mhz, (unsigned) mhz);
        } else
                assert_true(m.cpu_mhz > 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_one_fleet),
                cmocka_unit_test(test_no_fleets),
                cmocka_unit_test(test_reserved),
                cmocka_unit_test(test_reserved_exceeds),
                cmocka_unit_test(test_configured_machine),
                cmocka_unit_test(test_several_fleets),
                cmocka_unit_test(test_floating_point),
                cmocka_unit_test(test_servers_cap),
                cmocka_unit_test(test_no_slot),
                cmocka_unit_test(test_bad_usage),
                cmocka_unit_test(test_huge_count),
                cmocka_unit_test(test_speed),
                cmocka_unit_test(test_max_per),
                cmocka_unit_test(test_fair_fits),
                cmocka_unit_test(test_fair_equal),
                cmocka_unit_test(test_fair_redistributed),
                cmocka_unit_test(test_detect),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
