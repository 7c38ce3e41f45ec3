/* SPDX-License-Identifier: MIT */
/* A .gsh file's fleets (fleets.NAME): their build configurations, regions and usage settings
 * as a FleetConfig, and the region this machine (machine.region) runs them in; a fleet of
 * another CPU architecture (multiplayer 1.2) runs elsewhere. */
#include <limits.h>
#include <strings.h>

#include "gsh-map.h"
#include "strv.h"

static int build_config_copy(const BuildConfig *from, BuildConfig *to) {
        *to = (BuildConfig) {
                .id = strdup(from->id),
                .gsh_name = from->gsh_name ? strdup(from->gsh_name) : NULL,
                .build = strdup(from->build),
                .args = strv_copy(from->args),
                .environment = strv_copy(from->environment),
                .query = from->query,
                .variable_names = strv_copy(from->variable_names),
                .variable_values = strv_copy(from->variable_values),
                .n_variables = from->n_variables,
                .line = from->line,
                .build_line = from->build_line,
        };
        if (!to->id || !to->build || !to->args || !to->environment || !to->variable_names ||
            !to->variable_values || (from->gsh_name && !to->gsh_name)) {
                build_config_done(to);
                return -ENOMEM;
        }
        return 0;
}

static ReadinessSource gsh_readiness(const GshBuildConfig *g) {
        /* Multiplay's readiness: the server says when it is ready. slotd knows that by its
         * first query answer when it has a query protocol; without one, by its start. */
        return g->readiness && g->bc.query != QUERY_NONE ? READINESS_QUERY : READINESS_EXEC;
}

/* One usage and one readiness for the fleet's servers: its build configurations must agree
 * with the default (list[0]) on cores, speedMhz, memoryMiB and readiness. */
static int fleet_configs_agree(GshMap *m, const GshNode *n, const GshBuildConfig **list,
                               size_t k) {
        int r = 0;

        for (size_t i = 1; i < k; i++) {
                static const char *const usage[] = { "cores", "speedMhz", "memoryMiB" };
                unsigned a[] = { list[0]->cores, list[0]->speed_mhz, list[0]->memory_mib };
                unsigned b[] = { list[i]->cores, list[i]->speed_mhz, list[i]->memory_mib };
                _cleanup_free_ char *bp = gsh_path(m, "buildConfigurations",
                                                    list[i]->node->key, 0);

                if (!bp)
                        return -ENOMEM;
                for (size_t u = 0; u < ELEMENTSOF(usage); u++)
                        if (a[u] != b[u])
                                r = gsh_error(m, list[i]->usage_node[u] ?: list[i]->node, bp,
                                              "%s %u differs from %u of fleet %s's default "
                                              "build configuration %s: slotd gives a fleet's "
                                              "servers one size", usage[u], b[u], a[u], n->key,
                                              list[0]->node->key);
                if (gsh_readiness(list[i]) != gsh_readiness(list[0]))
                        r = gsh_error(m, list[i]->readiness_node ?: list[i]->node, bp,
                                      "readiness makes its servers ready by %s, fleet %s's "
                                      "default build configuration %s by %s: slotd has one "
                                      "readiness a fleet",
                                      readiness_source_to_string(gsh_readiness(list[i])), n->key,
                                      list[0]->node->key,
                                      readiness_source_to_string(gsh_readiness(list[0])));
        }
        return r;
}

/* fleets.NAME.buildConfigurations: the fleet's build configurations, the first the default. */
static int map_fleet_configs(GshMap *m, const GshNode *n, const char *path, FleetConfig *f,
                             const GshBuildConfig ***ret) {
        _cleanup_free_ char *p = gsh_path(m, path, "buildConfigurations", 0);
        _cleanup_free_ const GshBuildConfig **list = NULL;
        const GshNode *v = gsh_map_get(n, "buildConfigurations");
        size_t k = 0;
        int r = 0;

        if (!p)
                return -ENOMEM;
        if (!v || gsh_is_null(v) || (v->type == GSH_LIST && v->n_children == 0))
                return gsh_error(m, v ?: n, p, "expected a list of one or more of "
                                 "buildConfigurations' names");
        if (gsh_expect(m, v, p, GSH_LIST) < 0)
                return -EINVAL;
        list = calloc(v->n_children + 1, sizeof(*list));
        if (!list)
                return m->oom = true, -ENOMEM;
        for (size_t i = 0; i < v->n_children; i++) {
                _cleanup_free_ char *pi = gsh_path(m, p, NULL, i), *name = NULL;
                const GshBuildConfig *g;

                if (!pi || gsh_get_string(m, v->children[i], pi, false, &name) < 0) {
                        r = -EINVAL;
                        continue;
                }
                g = gsh_find_build_config(m, name);
                if (!g) {
                        r = gsh_error(m, v->children[i], pi, "no build configuration '%s' in "
                                      "buildConfigurations", name);
                        continue;
                }
                for (size_t j = 0; j < k; j++)
                        if (list[j] == g)
                                r = gsh_error(m, v->children[i], pi, "'%s' is listed twice",
                                              name);
                if (!g->ok)
                        r = -EINVAL; /* its own errors are reported where it is */
                list[k++] = g;
        }
        if (r < 0)
                return r;
        r = fleet_configs_agree(m, n, list, k);
        if (r < 0)
                return r;

        f->build_configs = calloc(k, sizeof(BuildConfig));
        if (!f->build_configs)
                return m->oom = true, -ENOMEM;
        for (size_t i = 0; i < k; i++) {
                if (build_config_copy(&list[i]->bc, &f->build_configs[i]) < 0)
                        return m->oom = true, -ENOMEM;
                f->n_build_configs++;
        }
        *ret = TAKE_PTR(list);
        return 0;
}

/* fleets.NAME.regions.REGION */
static int map_region(GshMap *m, const GshNode *n, const char *path, FleetRegion *region) {
        static const char *const keys[] = { "minAvailable", "maxServers", "online", NULL };
        _cleanup_free_ char *p = gsh_path(m, path, n->key, 0);
        const GshNode *v;
        int r = 0;

        region->online = true;
        region->line = n->key_line;
        region->column = n->key_column;
        if (!p)
                return -ENOMEM;
        if (strlen(n->key) > REGION_MAX || !text_is_printable(n->key) || n->key[0] == '\0')
                r = gsh_key_error(m, n, p, "a region's name is regionName in server.json: "
                                  "expected 1 to %d bytes without control characters",
                                  REGION_MAX);
        if (!(region->name = strdup(n->key)))
                return m->oom = true, -ENOMEM;
        if (gsh_is_null(n))
                return r;
        if (gsh_expect(m, n, p, GSH_MAP) < 0)
                return -EINVAL;
        if (gsh_check_keys(m, n, p, keys, "a region has minAvailable, maxServers and online") < 0)
                r = -EINVAL;
        if ((v = gsh_map_get(n, "minAvailable"))) {
                _cleanup_free_ char *pk = gsh_path(m, p, "minAvailable", 0);
                if (!pk || gsh_get_unsigned(m, v, pk, 0, 1000000, &region->min_available) < 0)
                        r = -EINVAL;
        }
        if ((v = gsh_map_get(n, "maxServers"))) {
                _cleanup_free_ char *pk = gsh_path(m, p, "maxServers", 0);
                region->max_servers_set = true;
                if (!pk || gsh_get_unsigned(m, v, pk, 0, 1000000, &region->max_servers) < 0)
                        r = -EINVAL;
                else if (region->min_available > region->max_servers)
                        r = gsh_error(m, v, pk, "%u is below minAvailable %u",
                                      region->max_servers, region->min_available);
        }
        if ((v = gsh_map_get(n, "online"))) {
                _cleanup_free_ char *pk = gsh_path(m, p, "online", 0);
                if (!pk || gsh_get_bool(m, v, pk, &region->online) < 0)
                        r = -EINVAL;
        }
        return r;
}

static int map_regions(GshMap *m, const GshNode *n, const char *path, FleetConfig *f) {
        _cleanup_free_ char *p = gsh_path(m, path, "regions", 0);
        const GshNode *v = gsh_map_get(n, "regions");
        int r = 0;

        if (!p)
                return -ENOMEM;
        if (!v || gsh_is_null(v))
                return 0;
        if (gsh_expect(m, v, p, GSH_MAP) < 0)
                return -EINVAL;
        f->regions = calloc(v->n_children, sizeof(FleetRegion));
        if (!f->regions && v->n_children > 0)
                return m->oom = true, -ENOMEM;
        for (size_t i = 0; i < v->n_children; i++) {
                if (map_region(m, v->children[i], p, &f->regions[f->n_regions]) < 0)
                        r = -EINVAL;
                f->n_regions++;
        }
        return r;
}

/* An integer field of a usage setting: 1 when set (in *ret), 0 when not, < 0 when bad. */
static int usage_field(GshMap *m, const GshNode *n, const char *path, const char *key,
                       unsigned min, unsigned max, unsigned *ret) {
        const GshNode *v = gsh_map_get(n, key);
        _cleanup_free_ char *p = NULL;

        if (!v)
                return 0;
        p = gsh_path(m, path, key, 0);
        if (!p || gsh_get_unsigned(m, v, p, min, max, ret) < 0)
                return -EINVAL;
        return 1;
}

/* fleets.NAME.usageSettings[I]: bare metal only, and one setting (Multiplay's METAL setting
 * applies to every machine of the fleet). */
static int map_usage_setting(GshMap *m, const GshNode *n, const char *path, FleetConfig *f,
                             unsigned *metal) {
        static const char *const keys[] = { "fleetUsageID", "hardwareType", "machineType",
                                            "speed", "memory", "maxServersPerMachine",
                                            "maxServersPerCore", NULL };
        _cleanup_free_ char *ph = gsh_path(m, path, "hardwareType", 0);
        const GshNode *v;
        char q[QUOTE_BUF];
        unsigned x;
        int r, k;

        if (!ph)
                return -ENOMEM;
        if (gsh_expect(m, n, path, GSH_MAP) < 0)
                return -EINVAL;
        r = gsh_check_keys(m, n, path, keys, "a usage setting has fleetUsageID, hardwareType, "
                           "machineType, speed, memory, maxServersPerMachine and "
                           "maxServersPerCore");

        v = gsh_map_get(n, "hardwareType");
        if (!v)
                return gsh_error(m, n, path, "hardwareType is missing: slotd takes METAL");
        if (v->type != GSH_SCALAR || !streq(v->value, "METAL"))
                return gsh_error(m, v, ph, "%s is not supported: slotd runs on the machines it "
                                 "is given (expected METAL)",
                                 v->type == GSH_SCALAR && !isempty(v->value) ?
                                 config_quote(v->value, q) : "this");
        if ((*metal)++ > 0)
                return gsh_error(m, v, ph, "a second METAL setting: Multiplay's METAL setting "
                                 "applies to every machine of the fleet");
        if ((v = gsh_map_get(n, "machineType"))) {
                _cleanup_free_ char *pm = gsh_path(m, path, "machineType", 0);
                r = gsh_key_error(m, v, pm ?: path, "is for CLOUD settings; a METAL setting "
                                  "applies to every machine (Unity: omit it)");
        }
        if (usage_field(m, n, path, "fleetUsageID", 0, UINT_MAX, &x) < 0)
                r = -EINVAL;
        /* Each, not the first that fails: every error of the file is reported. */
        k = usage_field(m, n, path, "speed", 100, 10000000, &f->usage_speed_mhz);
        if (k <= 0)
                r = k < 0 ? k : gsh_error(m, n, path, "speed is missing: the MHz of CPU a "
                                          "server takes");
        k = usage_field(m, n, path, "memory", 100, 16 * 1048576, &x);
        if (k <= 0)
                r = k < 0 ? k : gsh_error(m, n, path, "memory is missing: the MiB a server "
                                          "takes");
        else
                f->usage_memory = (uint64_t) x << 20;
        if (usage_field(m, n, path, "maxServersPerMachine", 1, 65535,
                        &f->usage_max_per_machine) < 0)
                r = -EINVAL;
        if (usage_field(m, n, path, "maxServersPerCore", 1, 65535, &f->usage_max_per_core) < 0)
                r = -EINVAL;
        return r;
}

static int map_usage_settings(GshMap *m, const GshNode *n, const char *path, FleetConfig *f) {
        _cleanup_free_ char *p = gsh_path(m, path, "usageSettings", 0);
        const GshNode *v = gsh_map_get(n, "usageSettings");
        unsigned metal = 0;
        int r = 0;

        if (!p)
                return -ENOMEM;
        if (!v || gsh_is_null(v))
                return 0;
        if (gsh_expect(m, v, p, GSH_LIST) < 0)
                return -EINVAL;
        for (size_t i = 0; i < v->n_children; i++) {
                _cleanup_free_ char *pi = gsh_path(m, p, NULL, i);

                if (!pi)
                        return -ENOMEM;
                if (map_usage_setting(m, v->children[i], pi, f, &metal) < 0)
                        r = -EINVAL;
        }
        return r;
}

/* The region of this machine among the fleet's: 1 when it runs here, 0 when not (with why in
 * m->elsewhere). A fleet without regions runs everywhere, in no region. */
static int fleet_pick_region(GshMap *m, const GshNode *n, FleetConfig *f) {
        _cleanup_free_ char *names = NULL, *msg = NULL;
        const char *mine = m->c->region;

        if (f->n_regions == 0 || m->c->gsh_every_region)
                return 1;
        for (size_t i = 0; i < f->n_regions; i++) {
                char *t = NULL;

                if (mine && streq(f->regions[i].name, mine) && f->regions[i].online) {
                        if (free_and_strdup(&f->region_id, mine) < 0 ||
                            free_and_strdup(&f->region_name, mine) < 0)
                                return m->oom = true, -ENOMEM;
                        return 1;
                }
                if (asprintf(&t, "%s%s%s%s", names ?: "", names ? ", " : "", f->regions[i].name,
                             f->regions[i].online ? "" : " (offline)") < 0)
                        return m->oom = true, -ENOMEM;
                free(names);
                names = t;
        }
        if ((mine ? asprintf(&msg, "%s:%u:%u: fleets.%s: gets no slots on this machine: its "
                             "regions are %s, and machine.region is '%s'", m->file, n->key_line,
                             n->key_column, n->key, names, mine)
                  : asprintf(&msg, "%s:%u:%u: fleets.%s: gets no slots on this machine: its "
                             "regions are %s, and machine.region is not set", m->file,
                             n->key_line, n->key_column, n->key, names)) < 0 ||
            strv_extend(&m->elsewhere, msg) < 0 || strv_extend(&m->elsewhere_names, f->name) < 0)
                return m->oom = true, -ENOMEM;
        return 0;
}

/* fleets.NAME.architecture (Unity's multiplayer 1.2: Amd64 or Arm64, any case here): the CPU of
 * the fleet's machines. 1 when the fleet runs here (no architecture, or this machine's), 0
 * when not (with why in m->elsewhere), < 0 when bad. The fleet layer keeps every fleet. */
static int fleet_pick_architecture(GshMap *m, const GshNode *n, const char *path,
                                   const FleetConfig *f) {
        static const char *const known[] = { "AMD64", "ARM64" };
        _cleanup_free_ char *p = gsh_path(m, path, "architecture", 0), *msg = NULL;
        const GshNode *v = gsh_map_get(n, "architecture");
        const char *arch = NULL;
        char q[QUOTE_BUF];

        if (!p)
                return -ENOMEM;
        if (!v || gsh_is_null(v))
                return 1;
        if (gsh_expect(m, v, p, GSH_SCALAR) < 0)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                if (strcasecmp(v->value, known[i]) == 0)
                        arch = known[i];
        if (!arch)
                return gsh_error(m, v, p, "expected AMD64 or ARM64 (got '%s')",
                                 config_quote(v->value, q));
        if (m->c->gsh_every_region || streq_ptr(arch, GSH_MACHINE_ARCHITECTURE))
                return 1;
        if (asprintf(&msg, "%s:%u:%u: fleets.%s: gets no slots on this machine: its "
                     "architecture is %s, and this machine's is %s", m->file, v->line, v->column,
                     n->key, arch, GSH_MACHINE_ARCHITECTURE ?: "neither") < 0 ||
            strv_extend(&m->elsewhere, msg) < 0 || strv_extend(&m->elsewhere_names, f->name) < 0)
                return m->oom = true, -ENOMEM;
        return 0;
}

/* Another fleet of this file with the same slotd name ("EU fleet", "EU-fleet"): where. */
static const char *fleet_defined_here(GshMap *m, const FleetConfig *f) {
        for (size_t i = 0; i < m->n_fleets; i++)
                if (&m->fleets[i] != f && m->fleets[i].name && streq(m->fleets[i].name, f->name))
                        return m->file;
        STRV_FOREACH(e, m->elsewhere_names)
                if (streq(*e, f->name))
                        return m->file;
        return NULL;
}

static int fleet_fill(GshMap *m, const GshNode *n, FleetConfig *f, const GshBuildConfig *def) {
        f->file = strdup(m->file);
        f->line = n->key_line;
        f->build = strdup(def->bc.build);
        f->args = strv_copy(def->bc.args);
        f->environment = calloc(1, sizeof(char *));
        f->build_configuration = strdup(def->bc.id);
        f->user = strdup("nobody");
        f->group = strdup("nogroup");
        if (!f->region_id)
                f->region_id = strdup("");
        if (!f->region_name)
                f->region_name = strdup("");
        if (!f->file || !f->name || !f->build || !f->args || !f->environment ||
            !f->build_configuration || !f->user || !f->group || !f->region_id || !f->region_name)
                return m->oom = true, -ENOMEM;

        f->query = def->bc.query;
        f->readiness = gsh_readiness(def);
        f->usage_cpu = def->cores;
        if (f->usage_memory == 0)
                f->usage_memory = (uint64_t) def->memory_mib << 20;
        if (f->usage_speed_mhz == 0)
                f->usage_speed_mhz = def->speed_mhz;
        f->memory_max = f->usage_memory + 2 * f->memory_tolerance;
        f->ports_auto = true;
        return 0;
}

int gsh_map_fleet(GshMap *m, const GshNode *n, FleetConfig *f) {
        static const char *const keys[] = { "buildConfigurations", "regions", "usageSettings",
                                            "architecture", NULL };
        _cleanup_free_ char *path = gsh_path(m, "fleets", n->key, 0);
        _cleanup_free_ const GshBuildConfig **list = NULL;
        const char *other;
        char q[QUOTE_BUF];
        int r, here;

        fleet_config_init(f);
        if (!path)
                return -ENOMEM;
        if (gsh_expect(m, n, path, GSH_MAP) < 0)
                return -EINVAL;
        r = gsh_check_keys(m, n, path, keys, "a fleet has buildConfigurations, regions, "
                           "usageSettings and architecture");
        /* Multiplay's names are free text: the fleet is the name as slotd spells fleets. */
        f->name = gsh_name_to_id(n->key, FLEET_NAME_MAX, false);
        if (f->name && !streq(f->name, n->key) && !(f->gsh_name = strdup(n->key)))
                return m->oom = true, -ENOMEM;
        if (!f->name || !fleet_name_is_valid(f->name))
                r = gsh_key_error(m, n, path, "the name ('%s') makes no fleet name: expected a "
                                  "letter or digit among its characters",
                                  config_quote(n->key, q));
        else if ((other = config_fleet_defined_by(m->c, f->name)) ||
                 (other = fleet_defined_here(m, f)))
                r = gsh_key_error(m, n, path, "fleet %s is already defined by %s", f->name,
                                  other);
        if (map_fleet_configs(m, n, path, f, &list) < 0)
                r = -EINVAL;
        if (map_regions(m, n, path, f) < 0)
                r = -EINVAL;
        if (map_usage_settings(m, n, path, f) < 0)
                r = -EINVAL;
        here = fleet_pick_architecture(m, n, path, f);
        if (r < 0 || here < 0 || m->oom)
                return -EINVAL;
        if (fleet_fill(m, n, f, list[0]) < 0)
                return -ENOMEM;
        return here == 0 ? 0 : fleet_pick_region(m, n, f);
}

