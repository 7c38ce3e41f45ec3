/* SPDX-License-Identifier: MIT */
/* Checks across fleets and against the disk, done after the density: unique names, port
 * ranges, builds that can run. And config_load_full(), the density glue. */
#include <limits.h>
#include <sys/stat.h>

#include "config-internal.h"

/* section names the key in messages: "fleet" or "build_configuration ID". */
static int validate_build(const char *file, unsigned line, const char *section,
                          const char *build, char **ret_error) {
        struct stat st;

        if (stat(build, &st) < 0)
                return config_set_error(ret_error, negative_errno(), file, line,
                                        "%s.build: %m (got '%s')", section, build);
        if (!S_ISREG(st.st_mode))
                return config_set_error(ret_error, -EINVAL, file, line,
                                        "%s.build: not a regular file (got '%s')", section, build);
        if (access(build, X_OK) < 0)
                return config_set_error(ret_error, negative_errno(), file, line,
                                        "%s.build: not executable: %m (got '%s')", section, build);
        return 0;
}

static int validate_fleet_builds(const FleetConfig *f, char **ret_error) {
        /* A fleet.build taken from the default build configuration's section is checked as
         * that section's. */
        bool from_section = f->build_line == 0 && f->n_build_configs > 0 &&
                            f->build_configs[0].build_line > 0;
        int r;

        if (!from_section) {
                if (!f->build || f->build[0] != '/')
                        return config_set_error(ret_error, -EINVAL, f->file, f->build_line,
                                                "fleet.build: expected an absolute path");
                r = validate_build(f->file, f->build_line, "fleet", f->build, ret_error);
                if (r < 0)
                        return r;
        }

        for (size_t i = 0; i < f->n_build_configs; i++) {
                const BuildConfig *b = &f->build_configs[i];
                _cleanup_free_ char *section = NULL;

                if (b->build_line == 0)
                        continue; /* fleet.build */
                if (asprintf(&section, "build_configuration %s", b->id) < 0)
                        return -ENOMEM;
                r = validate_build(f->file, b->build_line, section, b->build, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* One check's result: its message (taken from *error) added to the run's, and the first
 * error's code kept. Only ENOMEM stops the run. */
static int validate_add(int r, char **error, char **all, int *first) {
        if (r == -ENOMEM) {
                *error = mfree_str(*error);
                return r;
        }
        if (r < 0 && *first == 0)
                *first = r;
        config_errors_add(all, error);
        return 0;
}

typedef struct PortRange {
        const FleetConfig *fleet;
        const char *key;
        unsigned line;
        unsigned first, last;
} PortRange;

static PortRange port_range(const FleetConfig *f, bool query) {
        /* Before the density every fleet still has at least one slot. */
        unsigned n = MAX(f->slots, 1u);
        unsigned base = query ? f->query_port_base : f->game_port_base;

        return (PortRange) {
                .fleet = f,
                .key = query ? "ports.query_base" : "ports.game_base",
                .line = query ? f->query_port_base_line : f->game_port_base_line,
                .first = base,
                .last = n - 1 > UINT_MAX - base ? UINT_MAX : base + (n - 1),
        };
}

/* A range's first overlap with one before it. */
static int validate_range(const PortRange *ranges, size_t i, char **ret_error) {
        const PortRange *b = &ranges[i];

        if (b->last > UINT16_MAX)
                return config_set_error(ret_error, -ERANGE, b->fleet->file, b->line,
                                        "%s: %u slots from port %u run past port 65535",
                                        b->key, MAX(b->fleet->slots, 1u), b->first);
        for (size_t j = 0; j < i; j++) {
                const PortRange *a = &ranges[j];

                if (b->first > a->last || a->first > b->last)
                        continue;
                if (a->fleet == b->fleet)
                        return config_set_error(ret_error, -EADDRINUSE, b->fleet->file,
                                                b->line,
                                                "%s: ports %u-%u overlap %s %u-%u of the "
                                                "same fleet",
                                                b->key, b->first, b->last, a->key, a->first,
                                                a->last);
                if (a->line > 0)
                        return config_set_error(ret_error, -EADDRINUSE, b->fleet->file,
                                                b->line,
                                                "%s: ports %u-%u of fleet %s overlap %s "
                                                "%u-%u of fleet %s (%s:%u)",
                                                b->key, b->first, b->last, b->fleet->name,
                                                a->key, a->first, a->last, a->fleet->name,
                                                a->fleet->file, a->line);
                return config_set_error(ret_error, -EADDRINUSE, b->fleet->file, b->line,
                                        "%s: ports %u-%u of fleet %s overlap %s %u-%u of "
                                        "fleet %s (%s)",
                                        b->key, b->first, b->last, b->fleet->name, a->key,
                                        a->first, a->last, a->fleet->name, a->fleet->file);
        }
        return 0;
}

/* Every range: one error for each that runs past 65535 or overlaps one before it. */
static int validate_ports(const Config *c, char **all, int *first) {
        _cleanup_free_ PortRange *ranges = NULL;
        size_t n = c->n_fleets * 2;

        ranges = calloc(MAX(n, (size_t) 1), sizeof(PortRange));
        if (!ranges)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                char *e = NULL;

                ranges[i] = port_range(&c->fleets[i / 2], i % 2 == 1);
                if (validate_add(validate_range(ranges, i, &e), &e, all, first) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* The local proxy listens on TCP ports of this machine's addresses, and game servers bind
 * their ports on every address: they must not share one. */
static int validate_proxy_ports(const Config *c, char **ret_error) {
        _cleanup_free_ char *where = NULL;

        if (!c->localproxy.enabled)
                return 0;
        if (c->localproxy_listen_line > 0 &&
            asprintf(&where, "%s:%u", c->config_file ?: "slotd.ini", c->localproxy_listen_line) < 0)
                return -ENOMEM;

        for (size_t i = 0; i < c->n_fleets * 2; i++) {
                PortRange b = port_range(&c->fleets[i / 2], i % 2 == 1);

                for (size_t j = 0; j < c->localproxy.n_listen; j++) {
                        const ProxyListen *l = &c->localproxy.listen[j];

                        if (l->port < b.first || l->port > b.last)
                                continue;
                        return config_set_error(ret_error, -EADDRINUSE, b.fleet->file, b.line,
                                                "%s: ports %u-%u of fleet %s include port %u of "
                                                "localproxy.listen %s (%s)",
                                                b.key, b.first, b.last, b.fleet->name,
                                                (unsigned) l->port, l->text,
                                                where ?: "its default");
                }
        }
        return 0;
}

/* The default metrics.listen steps aside for a port the configuration gives the local proxy
 * or a fleet: metrics are then off, as when the default cannot be bound. */
static bool metrics_default_taken(const Config *c) {
        const ProxyListen *l = &c->metrics_listen;

        for (size_t j = 0; c->localproxy.enabled && j < c->localproxy.n_listen; j++)
                if (proxy_listen_overlaps(&c->localproxy.listen[j], l))
                        return true;
        for (size_t i = 0; i < c->n_fleets * 2; i++) {
                PortRange b = port_range(&c->fleets[i / 2], i % 2 == 1);

                if (l->port >= b.first && l->port <= b.last)
                        return true;
        }
        return false;
}

/* metrics.listen: a port of its own, neither the local proxy's nor a game server's. */
static int validate_metrics_port(Config *c, char **ret_error) {
        const ProxyListen *l = &c->metrics_listen;
        const char *file = c->config_file ?: "slotd.ini";

        if (l->family != AF_UNSPEC && c->metrics_listen_default && metrics_default_taken(c)) {
                c->metrics_listen.text = mfree(c->metrics_listen.text);
                c->metrics_listen = (ProxyListen){};
        }
        if (l->family == AF_UNSPEC)
                return 0;
        for (size_t j = 0; c->localproxy.enabled && j < c->localproxy.n_listen; j++)
                if (proxy_listen_overlaps(&c->localproxy.listen[j], l))
                        return config_set_error(ret_error, -EADDRINUSE, file,
                                                c->metrics_listen_line,
                                                "metrics.listen: %s overlaps localproxy.listen %s",
                                                l->text, c->localproxy.listen[j].text);
        for (size_t i = 0; i < c->n_fleets * 2; i++) {
                PortRange b = port_range(&c->fleets[i / 2], i % 2 == 1);

                if (l->port >= b.first && l->port <= b.last)
                        return config_set_error(ret_error, -EADDRINUSE, file,
                                                c->metrics_listen_line,
                                                "metrics.listen: port %u is in ports %u-%u of "
                                                "fleet %s (%s in %s)",
                                                (unsigned) l->port, b.first, b.last,
                                                b.fleet->name, b.key, b.fleet->file);
        }
        return 0;
}

static int validate_fleet_name(const Config *c, size_t i, char **ret_error) {
        const FleetConfig *f = &c->fleets[i];

        if (!f->name || !fleet_name_is_valid(f->name))
                return config_set_error(ret_error, -EINVAL, f->file, 0, "fleet.name: expected %s",
                                        FLEET_NAME_RULE);
        for (size_t j = 0; j < i; j++)
                if (streq_ptr(c->fleets[j].name, f->name))
                        return config_set_error(ret_error, -EEXIST, f->file, 0,
                                                "fleet.name: fleet %s is already defined by %s",
                                                f->name, c->fleets[j].file);
        return 0;
}

/* Each fleet's name and builds: what needs no slot count (so also after a failed density). */
static int validate_fleets(const Config *c, char **all, int *first) {
        for (size_t i = 0; i < c->n_fleets; i++) {
                char *e = NULL;

                if (validate_add(validate_fleet_name(c, i, &e), &e, all, first) < 0 ||
                    validate_add(validate_fleet_builds(&c->fleets[i], &e), &e, all, first) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Every check is made: the error of each is told, one a line. */
int config_validate(Config *c, char **ret_error) {
        _cleanup_free_ char *all = NULL;
        char *e = NULL;
        int first = 0;

        if (validate_fleets(c, &all, &first) < 0 ||
            validate_ports(c, &all, &first) < 0 ||
            validate_add(validate_metrics_port(c, &e), &e, &all, &first) < 0 ||
            validate_add(validate_proxy_ports(c, &e), &e, &all, &first) < 0)
                return -ENOMEM;
        if (first < 0 && ret_error)
                *ret_error = TAKE_PTR(all);
        return first;
}

/* Whether [first, last] meets a port taken by a fleet with fixed ports (or already placed),
 * the local proxy or the metrics. */
static bool ports_taken(const Config *c, const FleetConfig *self, unsigned first, unsigned last) {
        for (size_t i = 0; i < c->n_fleets; i++) {
                const FleetConfig *f = &c->fleets[i];
                unsigned n = MAX(f->slots, 1u);

                if (f->ports_auto && f > self)
                        continue;
                if (!(first > f->game_port_base + n - 1 || f->game_port_base > last) ||
                    !(first > f->query_port_base + n - 1 || f->query_port_base > last))
                        return true;
        }
        for (size_t i = 0; i < c->localproxy.n_listen; i++)
                if (c->localproxy.listen[i].port >= first && c->localproxy.listen[i].port <= last)
                        return true;
        return c->metrics_listen.family != AF_UNSPEC && c->metrics_listen.port >= first &&
               c->metrics_listen.port <= last;
}

static uint16_t lowest_free_base(const Config *c, const FleetConfig *f, unsigned from) {
        unsigned n = MAX(f->slots, 1u);

        for (unsigned base = from; base + n - 1 <= UINT16_MAX; base++)
                if (!ports_taken(c, f, base, base + n - 1))
                        return (uint16_t) base;
        return (uint16_t) from; /* config_validate() says it does not fit */
}

/* A .gsh fleet's ports (the format has none): in file order, the lowest game ports from
 * machine.game_port_base and query ports from machine.query_port_base that no other fleet,
 * the local proxy nor the metrics take. */
static void config_assign_ports(Config *c) {
        for (size_t i = 0; i < c->n_fleets; i++) {
                FleetConfig *f = &c->fleets[i];

                if (!f->ports_auto)
                        continue;
                /* Out of the way while its own ranges are looked for. */
                f->game_port_base = f->query_port_base = 0;
                f->game_port_base = lowest_free_base(c, f, c->game_port_base);
                f->query_port_base = lowest_free_base(c, f, c->query_port_base);
        }
}

/* The density failed, or a file had errors: the fleets read are still checked on their own,
 * their errors added to *ret_error, for --check to tell every error of the run. */
static int load_failed(Config *c, int r, char **ret_error) {
        _cleanup_free_ char *all = NULL;
        int first = 0;

        if (r == -ENOMEM || !c || !ret_error)
                return r;
        all = TAKE_PTR(*ret_error);
        if (validate_fleets(c, &all, &first) < 0)
                return -ENOMEM;
        *ret_error = TAKE_PTR(all);
        return r;
}

static int load_full(const char *config_file, const char *fleets_dir,
                     const MachineResources *detected, bool keep, Config **ret, char **ret_error) {
        _cleanup_(config_freep) Config *c = NULL;
        MachineResources m = {};
        int r;

        r = config_load_keep(config_file, fleets_dir, keep, &c, ret_error);
        if (r < 0) {
                r = keep ? load_failed(c, r, ret_error) : r;
                goto finish;
        }

        if (detected)
                m = *detected;
        else if (!(c->cpus > 0) || c->memory == 0) {
                r = machine_resources_detect(&m);
                if (r < 0)
                        return config_set_error(ret_error, r, config_file ?: "slotd.ini", 0,
                                                "cannot detect the machine's CPUs and memory "
                                                "(%s): set machine.cpus and machine.memory",
                                                strerror(-r));
        }

        r = density_compute(c, &m, ret_error);
        if (r < 0) {
                r = keep ? load_failed(c, r, ret_error) : r;
                goto finish;
        }
        config_assign_ports(c);

        r = config_validate(c, ret_error);
finish:
        if (r >= 0 || (keep && r != -ENOMEM))
                *ret = TAKE_PTR(c);
        return r;
}

int config_load_full(const char *config_file, const char *fleets_dir,
                     const MachineResources *detected, Config **ret, char **ret_error) {
        return load_full(config_file, fleets_dir, detected, false, ret, ret_error);
}

int config_load_for_check(const char *config_file, const char *fleets_dir,
                          const MachineResources *detected, Config **ret, char **ret_error) {
        return load_full(config_file, fleets_dir, detected, true, ret, ret_error);
}

