/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>

#include "config.h"

/* cpu_left / usage_cpu is computed in binary floating point: 1.0 / 0.1 may come out as
 * 9.999999999999998. Counts are whole numbers, so a nudge far below one slot is safe. */
#define DENSITY_EPSILON 1e-9

_printf_(3, 4)
static int density_error(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;
        char *m;

        if (!ret_error)
                return r;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) >= 0)
                *ret_error = m;
        va_end(ap);
        return r;
}

/* Whole units as an operator would have typed them; one decimal keeps odd leftovers
 * readable. */
const char *format_bytes(uint64_t v, char buf[static FORMAT_BYTES_MAX]) {
        static const char units[] = "KMGT";
        int i = -1;

        while (i + 1 < (int) sizeof(units) - 1 && v >= (UINT64_C(1) << (10 * (i + 2))))
                i++;

        if (i < 0)
                snprintf(buf, FORMAT_BYTES_MAX, "%" PRIu64 " bytes", v);
        else if (v % (UINT64_C(1) << (10 * (i + 1))) == 0)
                snprintf(buf, FORMAT_BYTES_MAX, "%" PRIu64 "%c", v >> (10 * (i + 1)), units[i]);
        else
                snprintf(buf, FORMAT_BYTES_MAX, "%.1f%c",
                         (double) v / (double) (UINT64_C(1) << (10 * (i + 1))), units[i]);
        return buf;
}

static const char *line_prefix(char buf[static 32], unsigned line) {
        if (line > 0)
                snprintf(buf, FORMAT_BYTES_MAX, ":%u", line);
        else
                buf[0] = '\0';
        return buf;
}

/* How many servers of a fleet fit into what is left; capped to UINT_MAX (port ranges refuse
 * anything near that much later). */
static unsigned density_fit(const FleetConfig *f, double cpu_left, uint64_t mem_left) {
        double by_cpu = cpu_left / f->usage_cpu + DENSITY_EPSILON;
        uint64_t n = mem_left / f->usage_memory;

        /* Truncation is floor() here (by_cpu >= 0), and spares the project a libm. */
        if (by_cpu < (double) n)
                n = (uint64_t) by_cpu;
        return (unsigned) MIN(n, (uint64_t) UINT_MAX);
}

/* The cores and memory left for servers once the machine's own reservation is taken: the
 * configured amounts, else the detected ones. */
static int density_left(const Config *c, const MachineResources *m, double *ret_cpu,
                        uint64_t *ret_mem, char **ret_error) {
        const char *file = c->config_file ?: "slotd.ini";
        char b1[FORMAT_BYTES_MAX], b2[FORMAT_BYTES_MAX], b3[FORMAT_BYTES_MAX];
        double cpus = c->cpus > 0 ? c->cpus : m ? m->cpus : 0;
        uint64_t memory = c->memory > 0 ? c->memory : m ? m->memory : 0;

        if (!(cpus > 0))
                return density_error(ret_error, -EINVAL,
                                     "%s: the machine's CPU count is unknown; set machine.cpus",
                                     file);
        if (memory == 0)
                return density_error(ret_error, -EINVAL,
                                     "%s: the machine's memory is unknown; set machine.memory",
                                     file);

        if (c->reserved_cpus > cpus)
                return density_error(ret_error, -ERANGE,
                                     "%s%s: machine.reserved_cpus: %g cores reserved, but the "
                                     "machine has only %g",
                                     file, line_prefix(b1, c->reserved_cpus_line),
                                     c->reserved_cpus, cpus);
        if (c->reserved_memory > memory)
                return density_error(ret_error, -ERANGE,
                                     "%s%s: machine.reserved_memory: %s reserved, but the "
                                     "machine has only %s",
                                     file, line_prefix(b1, c->reserved_memory_line),
                                     format_bytes(c->reserved_memory, b2),
                                     format_bytes(memory, b3));

        *ret_cpu = cpus - c->reserved_cpus;
        *ret_mem = memory - c->reserved_memory;
        return 0;
}

/* One fleet's slot count out of what the fleets before it left: usage.servers if it fits,
 * else as many as fit. */
static int density_fleet(const FleetConfig *f, double cpu_left, uint64_t mem_left,
                         unsigned *ret, char **ret_error) {
        char b1[FORMAT_BYTES_MAX], b2[FORMAT_BYTES_MAX];
        unsigned n;

        if (!(f->usage_cpu > 0) || f->usage_memory == 0)
                return density_error(ret_error, -EINVAL,
                                     "%s: fleet %s: usage.cpu and usage.memory must be "
                                     "greater than 0",
                                     f->file, f->name);

        n = density_fit(f, cpu_left, mem_left);
        if (f->usage_servers > 0) {
                if (f->usage_servers > n)
                        return density_error(ret_error, -ERANGE,
                                             "%s%s: usage.servers: needs %u servers but "
                                             "only %u fit (%g cores and %s left)",
                                             f->file, line_prefix(b1, f->usage_servers_line),
                                             f->usage_servers, n, cpu_left,
                                             format_bytes(mem_left, b2));
                n = f->usage_servers;
        }
        if (n == 0)
                return density_error(ret_error, -ERANGE,
                                     "%s: fleet %s gets no slot: needs %g cores and %s "
                                     "per server, %g cores and %s left",
                                     f->file, f->name, f->usage_cpu,
                                     format_bytes(f->usage_memory, b1), cpu_left,
                                     format_bytes(mem_left, b2));
        *ret = n;
        return 0;
}

int density_compute(Config *c, const MachineResources *m, char **ret_error) {
        _cleanup_free_ unsigned *slots = NULL;
        double cpu_left = 0;
        uint64_t mem_left = 0;
        int r;

        r = density_left(c, m, &cpu_left, &mem_left, ret_error);
        if (r < 0)
                return r;

        slots = calloc(MAX(c->n_fleets, (size_t) 1), sizeof(unsigned));
        if (!slots)
                return -ENOMEM;

        for (size_t i = 0; i < c->n_fleets; i++) {
                const FleetConfig *f = &c->fleets[i];

                r = density_fleet(f, cpu_left, mem_left, &slots[i], ret_error);
                if (r < 0)
                        return r;
                cpu_left -= slots[i] * f->usage_cpu;
                if (cpu_left < 0)
                        cpu_left = 0;
                mem_left -= (uint64_t) slots[i] * f->usage_memory;
        }

        for (size_t i = 0; i < c->n_fleets; i++)
                c->fleets[i].slots = slots[i];
        return 0;
}

int machine_resources_detect(MachineResources *ret) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        uint64_t kib = 0;
        bool found = false;
        long n;

        errno = 0;
        n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1)
                return errno > 0 ? -errno : -EIO;

        f = fopen("/proc/meminfo", "re");
        if (!f)
                return negative_errno();

        while (getline(&line, &size, f) > 0)
                if (sscanf(line, "MemTotal: %" SCNu64 " kB", &kib) == 1) {
                        found = true;
                        break;
                }
        if (!found || kib == 0 || kib > UINT64_MAX / 1024)
                return -EBADMSG;

        *ret = (MachineResources) {
                .cpus = (double) n,
                .memory = kib * 1024,
        };
        return 0;
}
