/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
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

/* Multiplay's usage settings for bare metal (speed MHz and memory per server, capped by
 * maxServersPerCore and maxServersPerMachine), as its Admin API and config-as-code files have
 * them:
 * https://docs.unity3d.com/Packages/com.unity.services.multiplayer@1.1/api/Unity.Services.Multiplay.Authoring.Core.Assets.MultiplayConfig.FleetUsageSetting.html
 * https://docs.unity.com/game-server-hosting/en/manual/concepts/server-density */

/* What the servers of fleets may use: cores, memory and MHz (cores × MHz of a core; 0 when
 * the MHz are unknown and no fleet needs them). */
typedef struct DensityRoom {
        double cpus;
        uint64_t memory;
        double mhz;
} DensityRoom;

#define NO_BOUND UINT_MAX

static unsigned bound_div(double have, double need) {
        double v = have / need + DENSITY_EPSILON;

        /* Truncation is floor() here (v >= 0), and spares the project a libm. */
        return v <= 0 ? 0 : v >= (double) UINT_MAX ? UINT_MAX : (unsigned) v;
}

/* A fleet's bounds on the machine: by_* for what room holds, caps from its usage settings;
 * NO_BOUND where it has none. */
typedef struct DensityBounds {
        unsigned by_cpu, by_memory, by_speed, by_core, by_machine;
} DensityBounds;

static DensityBounds density_bounds(const FleetConfig *f, const DensityRoom *room,
                                    double machine_cpus) {
        DensityBounds b = {
                .by_cpu = bound_div(room->cpus, f->usage_cpu),
                .by_memory = (unsigned) MIN(room->memory / f->usage_memory, (uint64_t) UINT_MAX),
                .by_speed = f->usage_speed_mhz > 0 ? bound_div(room->mhz, f->usage_speed_mhz)
                                                   : NO_BOUND,
                .by_core = f->usage_max_per_core > 0 ?
                                   bound_div(f->usage_max_per_core * machine_cpus, 1) : NO_BOUND,
                .by_machine = f->usage_max_per_machine > 0 ? f->usage_max_per_machine : NO_BOUND,
        };
        return b;
}

static unsigned bounds_min(const DensityBounds *b) {
        return MIN(MIN(MIN(b->by_cpu, b->by_memory), MIN(b->by_speed, b->by_core)),
                   b->by_machine);
}

/* How many servers of f fit into room, within its caps less the 'taken' it already has. */
static unsigned density_fit(const FleetConfig *f, const DensityRoom *room, double machine_cpus,
                            unsigned taken) {
        DensityBounds b = density_bounds(f, room, machine_cpus);

        /* The caps are on the fleet's whole count; the room is what is left. */
        b.by_core = b.by_core == NO_BOUND ? NO_BOUND : b.by_core > taken ? b.by_core - taken : 0;
        b.by_machine = b.by_machine == NO_BOUND ? NO_BOUND :
                       b.by_machine > taken ? b.by_machine - taken : 0;
        /* Never more than a count can hold (the port ranges refuse anything near that). */
        return MIN(bounds_min(&b), UINT_MAX - taken);
}

static void room_take(DensityRoom *room, const FleetConfig *f, unsigned n) {
        room->cpus -= n * f->usage_cpu;
        if (room->cpus < 0)
                room->cpus = 0;
        room->memory -= MIN(room->memory, (uint64_t) n * f->usage_memory);
        room->mhz -= (double) n * f->usage_speed_mhz;
        if (room->mhz < 0)
                room->mhz = 0;
}

/* The share of room that n servers of f use, by its dominant resource. */
static double room_use(const FleetConfig *f, const DensityRoom *room, unsigned n) {
        double u = 0;

        if (n == 0)
                return 0;
        u = room->cpus > 0 ? n * f->usage_cpu / room->cpus : INFINITY;
        u = MAX(u, room->memory > 0 ? (double) n * f->usage_memory / (double) room->memory :
                                      INFINITY);
        if (f->usage_speed_mhz > 0)
                u = MAX(u, room->mhz > 0 ? (double) n * f->usage_speed_mhz / room->mhz : INFINITY);
        return u;
}

/* Equal shares of room by dominant resource among the active fleets: one whose all
 * (alone[i]) fits in its share takes it and leaves the rest of its share to the others, until
 * every fleet left needs more than its share; those get what fits in it. Adds to slots[];
 * returns whether any fleet got a slot. */
static bool density_water_fill(const Config *c, bool *active, size_t n_active,
                               const unsigned *alone, unsigned *slots, const DensityRoom *room,
                               double machine_cpus) {
        double left = 1;
        bool any = false;

        for (bool settled = false; n_active > 0 && !settled;) {
                double share = left / (double) n_active;

                settled = true;
                for (size_t i = 0; i < c->n_fleets; i++) {
                        double u = active[i] ? room_use(&c->fleets[i], room, alone[i]) : 0;
                        if (!active[i] || u > share + DENSITY_EPSILON)
                                continue;
                        /* Needs less than its share: takes all it can, leaves the rest. */
                        slots[i] += alone[i];
                        any = true;
                        left -= u;
                        active[i] = false;
                        n_active--;
                        settled = false;
                }
                if (!settled)
                        continue;
                for (size_t i = 0; i < c->n_fleets; i++) {
                        DensityRoom part = {
                                room->cpus * share, (uint64_t) ((double) room->memory * share),
                                room->mhz * share,
                        };
                        unsigned n;

                        if (!active[i])
                                continue;
                        n = density_fit(&c->fleets[i], &part, machine_cpus, slots[i]);
                        slots[i] += n;
                        any = any || n > 0;
                }
        }
        return any;
}

/* One round of sharing room among the automatic fleets (auto_fleet[i]): adds to slots[i].
 * Each gets all it can take alone when all of that fits together; otherwise equal shares by
 * dominant resource, a fleet that needs less than its share taking only that and leaving the
 * rest to the others (water-filling). Returns whether any fleet got a slot; *ret_shared when
 * the fleets asked more than room holds. */
static bool density_share_round(const Config *c, const bool *auto_fleet, unsigned *slots,
                                const DensityRoom *room, double machine_cpus, bool *ret_shared) {
        _cleanup_free_ unsigned *alone = new0(unsigned, MAX(c->n_fleets, (size_t) 1));
        _cleanup_free_ bool *active = new0(bool, MAX(c->n_fleets, (size_t) 1));
        DensityRoom all = *room;
        size_t n_active = 0;
        bool fits = true, any = false;

        if (!alone || !active)
                return false;
        for (size_t i = 0; i < c->n_fleets; i++) {
                if (!auto_fleet[i])
                        continue;
                alone[i] = density_fit(&c->fleets[i], room, machine_cpus, slots[i]);
                fits = fits && density_fit(&c->fleets[i], &all, machine_cpus, slots[i]) >= alone[i];
                room_take(&all, &c->fleets[i], alone[i]);
                active[i] = alone[i] > 0;
                n_active += active[i];
        }
        if (fits) {
                for (size_t i = 0; i < c->n_fleets; i++)
                        if (auto_fleet[i]) {
                                slots[i] += alone[i];
                                any = any || alone[i] > 0;
                        }
                return any;
        }
        *ret_shared = true;
        return density_water_fill(c, active, n_active, alone, slots, room, machine_cpus);
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

/* The machine's MHz for usage.speed: cores left × machine.cpu_mhz (or the detected MHz); an
 * error when a fleet needs it and neither is known. */
static int density_mhz(const Config *c, const MachineResources *m, double cpus, double *ret,
                       char **ret_error) {
        unsigned mhz = c->cpu_mhz > 0 ? c->cpu_mhz : m ? m->cpu_mhz : 0;

        *ret = cpus * mhz;
        if (mhz > 0)
                return 0;
        for (size_t i = 0; i < c->n_fleets; i++)
                if (c->fleets[i].usage_speed_mhz > 0)
                        return density_error(ret_error, -EINVAL,
                                             "%s: fleet %s sets usage.speed, but the MHz of this "
                                             "machine's cores are unknown (no cpufreq, no \"cpu "
                                             "MHz\" in /proc/cpuinfo); set machine.cpu_mhz in %s",
                                             c->fleets[i].file, c->fleets[i].name,
                                             c->config_file ?: "slotd.ini");
        return 0;
}

/* The plan: slots per fleet, and what --check prints about it. */
typedef struct DensityPlan {
        DensityRoom machine;       /* for servers, after the reservation */
        DensityRoom automatic;     /* what the fixed fleets leave */
        size_t n_automatic;
        bool shared;
        unsigned *slots;
} DensityPlan;

static void density_plan_done(DensityPlan *p) {
        p->slots = mfree(p->slots);
}

static int density_no_slot(const FleetConfig *f, const DensityPlan *p, char **ret_error) {
        char b1[FORMAT_BYTES_MAX], b2[FORMAT_BYTES_MAX], speed[48] = "";

        if (f->usage_speed_mhz > 0)
                snprintf(speed, sizeof(speed), " and %u MHz", f->usage_speed_mhz);
        if (p->shared)
                return density_error(ret_error, -ERANGE,
                                     "%s: fleet %s gets no slot: needs %g cores%s%s%s per "
                                     "server; its fair share of the %g cores and %s that the "
                                     "fixed fleets leave, shared by %zu automatic fleets, holds "
                                     "none",
                                     f->file, f->name, f->usage_cpu, speed[0] ? ", " : " and ",
                                     format_bytes(f->usage_memory, b1), speed,
                                     p->automatic.cpus, format_bytes(p->automatic.memory, b2),
                                     p->n_automatic);
        return density_error(ret_error, -ERANGE,
                             "%s: fleet %s gets no slot: needs %g cores%s%s%s per server, %g "
                             "cores and %s left",
                             f->file, f->name, f->usage_cpu, speed[0] ? ", " : " and ",
                             format_bytes(f->usage_memory, b1),
                             speed, p->automatic.cpus, format_bytes(p->automatic.memory, b2));
}

/* The fleets with usage.servers, in file order, each from what the ones before left. */
static int density_fixed(const Config *c, DensityPlan *p, DensityRoom *room, char **ret_error) {
        char b1[FORMAT_BYTES_MAX], b2[FORMAT_BYTES_MAX];

        for (size_t i = 0; i < c->n_fleets; i++) {
                const FleetConfig *f = &c->fleets[i];
                unsigned n;

                if (f->usage_servers == 0)
                        continue;
                n = density_fit(f, room, p->machine.cpus, 0);
                if (f->usage_servers > n)
                        return density_error(ret_error, -ERANGE,
                                             "%s%s: usage.servers: needs %u servers but "
                                             "only %u fit (%g cores and %s left)",
                                             f->file, line_prefix(b1, f->usage_servers_line),
                                             f->usage_servers, n, room->cpus,
                                             format_bytes(room->memory, b2));
                p->slots[i] = f->usage_servers;
                room_take(room, f, f->usage_servers);
        }
        return 0;
}

static int density_plan(const Config *c, const MachineResources *m, DensityPlan *ret,
                        char **ret_error) {
        _cleanup_free_ bool *automatic = NULL;
        _cleanup_(density_plan_done) DensityPlan p = {};
        DensityRoom room;
        int r;

        r = density_left(c, m, &p.machine.cpus, &p.machine.memory, ret_error);
        if (r < 0)
                return r;
        r = density_mhz(c, m, p.machine.cpus, &p.machine.mhz, ret_error);
        if (r < 0)
                return r;

        p.slots = new0(unsigned, MAX(c->n_fleets, (size_t) 1));
        automatic = new0(bool, MAX(c->n_fleets, (size_t) 1));
        if (!p.slots || !automatic)
                return -ENOMEM;
        for (size_t i = 0; i < c->n_fleets; i++)
                if (!(c->fleets[i].usage_cpu > 0) || c->fleets[i].usage_memory == 0)
                        return density_error(ret_error, -EINVAL,
                                             "%s: fleet %s: usage.cpu and usage.memory must be "
                                             "greater than 0",
                                             c->fleets[i].file, c->fleets[i].name);

        room = p.machine;
        r = density_fixed(c, &p, &room, ret_error);
        if (r < 0)
                return r;
        p.automatic = room;
        for (size_t i = 0; i < c->n_fleets; i++) {
                automatic[i] = c->fleets[i].usage_servers == 0;
                p.n_automatic += automatic[i];
        }

        /* Rounds: what the shares' floors leave is shared again, until nobody takes more. */
        for (unsigned round = 0; round < 64; round++) {
                if (!density_share_round(c, automatic, p.slots, &room, p.machine.cpus, &p.shared))
                        break;
                room = p.automatic;
                for (size_t i = 0; i < c->n_fleets; i++)
                        if (automatic[i])
                                room_take(&room, &c->fleets[i], p.slots[i]);
        }

        for (size_t i = 0; i < c->n_fleets; i++)
                if (p.slots[i] == 0)
                        return density_no_slot(&c->fleets[i], &p, ret_error);
        *ret = p;
        p.slots = NULL;
        return 0;
}

int density_compute(Config *c, const MachineResources *m, char **ret_error) {
        _cleanup_(density_plan_done) DensityPlan p = {};
        int r;

        r = density_plan(c, m, &p, ret_error);
        if (r < 0)
                return r;
        for (size_t i = 0; i < c->n_fleets; i++)
                c->fleets[i].slots = p.slots[i];
        return 0;
}

/* One fleet's line: its slots and the bounds they come from. */
static int density_format_fleet(FILE *out, const FleetConfig *f, const DensityPlan *p,
                                unsigned slots) {
        DensityBounds b = density_bounds(f, &p->machine, p->machine.cpus);
        char b1[FORMAT_BYTES_MAX], b2[FORMAT_BYTES_MAX];

        fprintf(out, "density: fleet %s: %u slots", f->name, slots);
        if (f->usage_servers > 0)
                fprintf(out, " (usage.servers, fixed)");
        else
                fprintf(out, " (automatic%s)",
                        p->shared ? ", a fair share: the automatic fleets ask more than there is"
                                  : ", all it can take");
        fprintf(out, "; per server %g cores, %s", f->usage_cpu, format_bytes(f->usage_memory, b1));
        if (f->usage_speed_mhz > 0)
                fprintf(out, ", %u MHz", f->usage_speed_mhz);
        fprintf(out, "; on the whole machine: cpu floor(%g / %g) = %u, memory floor(%s / %s) = %u",
                p->machine.cpus, f->usage_cpu, b.by_cpu, format_bytes(p->machine.memory, b2),
                format_bytes(f->usage_memory, b1), b.by_memory);
        if (f->usage_speed_mhz > 0)
                fprintf(out, ", speed floor(%.0f MHz / %u MHz) = %u", p->machine.mhz,
                        f->usage_speed_mhz, b.by_speed);
        if (f->usage_max_per_core > 0)
                fprintf(out, ", max_per_core %u × %g cores = %u", f->usage_max_per_core,
                        p->machine.cpus, b.by_core);
        if (f->usage_max_per_machine > 0)
                fprintf(out, ", max_per_machine %u", f->usage_max_per_machine);
        fprintf(out, "\n");
        return 0;
}

int density_format(const Config *c, const MachineResources *m, char **ret, char **ret_error) {
        _cleanup_(density_plan_done) DensityPlan p = {};
        _cleanup_free_ char *text = NULL;
        char b1[FORMAT_BYTES_MAX];
        size_t size = 0;
        FILE *out;
        int r;

        r = density_plan(c, m, &p, ret_error);
        if (r < 0)
                return r;
        out = open_memstream(&text, &size);
        if (!out)
                return -ENOMEM;
        fprintf(out, "density: for servers %g cores, %s", p.machine.cpus,
                format_bytes(p.machine.memory, b1));
        if (p.machine.mhz > 0)
                fprintf(out, ", %.0f MHz (%u MHz a core%s)", p.machine.mhz,
                        c->cpu_mhz > 0 ? c->cpu_mhz : m ? m->cpu_mhz : 0,
                        c->cpu_mhz > 0 ? ", machine.cpu_mhz" : ", detected");
        fprintf(out, "; %zu automatic fleets share %g cores, %s after the fixed ones%s\n",
                p.n_automatic, p.automatic.cpus, format_bytes(p.automatic.memory, b1),
                p.shared ? " (more than that asked: fair shares)" : " (all fit)");
        for (size_t i = 0; i < c->n_fleets; i++)
                density_format_fleet(out, &c->fleets[i], &p, p.slots[i]);
        if (fclose(out) != 0 || !text)
                return -ENOMEM;
        *ret = TAKE_PTR(text);
        return 0;
}

/* The MHz of a core: cpufreq's highest (kHz), else the first "cpu MHz" of /proc/cpuinfo (what
 * a VM without cpufreq shows); 0 when neither says. */
static unsigned detect_cpu_mhz(void) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        unsigned long khz = 0;
        double mhz = 0;

        f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "re");
        if (f && fscanf(f, "%lu", &khz) == 1 && khz >= 1000 && khz / 1000 < UINT_MAX)
                return (unsigned) (khz / 1000);
        if (f)
                fclose(f);
        f = fopen("/proc/cpuinfo", "re");
        if (!f)
                return 0;
        while (getline(&line, &size, f) > 0)
                if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
                        return mhz >= 1 && mhz < (double) UINT_MAX ? (unsigned) mhz : 0;
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
                .cpu_mhz = detect_cpu_mhz(),
        };
        return 0;
}
