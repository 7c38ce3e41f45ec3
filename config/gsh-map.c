/* SPDX-License-Identifier: MIT */
/* A Multiplay config-as-code file (.gsh) as slotd fleets: the GshNode tree (gsh.c) mapped onto
 * FleetConfig and BuildConfig. Every error of the file is collected, one
 * "FILE:LINE:COLUMN: path.to.key: what is wrong" each; the fleets are added only when there
 * is none.
 *
 * The fields, as Unity documents them (the payloads of Multiplay's Admin API):
 *   https://docs.unity3d.com/Packages/com.unity.services.multiplayer@1.2/manual/Multiplay/Authoring/multiplay-assets.html
 *   https://docs.unity3d.com/Packages/com.unity.services.multiplayer@1.0/api/Unity.Services.Multiplay.Authoring.Core.Assets
 *     (MultiplayConfig, BuildDefinition, BuildConfigurationDefinition, FleetDefinition,
 *     ScalingDefinition, FleetUsageSetting; and the editor's template, MultiplayConfigTemplate)
 *   https://docs.unity.com/en-us/multiplay-hosting/concepts/build-configurations
 *   https://docs.unity.com/zh-cn/services-cli/1.9.0/manual/game-server-hosting/commands/build-configuration/build-configuration-create
 *
 *   version                        "1.0"
 *   builds.NAME                    executableName (default "Server"), buildPath, excludePaths
 *   buildConfigurations.NAME       build, queryType (sqp, a2s, none), binaryPath, commandLine,
 *                                  variables {name: value}, readiness (bool, default true),
 *                                  cores (default 1), speedMhz (default 750),
 *                                  memoryMiB (default 800); the last three deprecated for
 *                                  the fleet's usageSettings
 *   fleets.NAME                    buildConfigurations [NAME], regions {NAME: {minAvailable,
 *                                  maxServers, online (default true)}}, usageSettings
 *                                  [{fleetUsageID, hardwareType (CLOUD, METAL), machineType,
 *                                  speed (MHz), memory (MiB), maxServersPerMachine,
 *                                  maxServersPerCore}]
 * What each becomes is SPEC's "Multiplay config-as-code" table. The format has no numeric
 * IDs: a build configuration's ID is its name. */
#include <limits.h>
#include <stdarg.h>
#include <strings.h>

#include "config-internal.h"
#include "gsh.h"
#include "strv.h"

#define GSH_ERRORS_MAX 100

typedef struct GshBuild {
        const GshNode *node;
        char *root;                /* the build's directory on this machine */
        char *executable;          /* executableName */
} GshBuild;

typedef struct GshBuildConfig {
        const GshNode *node;
        BuildConfig bc;
        bool readiness;
        const GshNode *readiness_node;
        unsigned cores, speed_mhz, memory_mib;
        const GshNode *usage_node[3]; /* cores, speedMhz, memoryMiB when set */
} GshBuildConfig;

typedef struct GshMap {
        Config *c;
        const char *file;
        char **errors;
        size_t n_errors;
        bool oom;

        GshBuild *builds;
        size_t n_builds;
        GshBuildConfig *configs;
        size_t n_configs;
        FleetConfig *fleets;
        size_t n_fleets;
        char **elsewhere;
} GshMap;

/* Records "FILE:LINE:COLUMN: PATH: BODY" at (line, column); always -EINVAL. */
_printf_(5, 6)
static int gsh_error_at(GshMap *m, unsigned line, unsigned column, const char *path,
                        const char *fmt, ...) {
        _cleanup_free_ char *body = NULL, *msg = NULL;
        va_list ap;
        int k;

        if (m->n_errors >= GSH_ERRORS_MAX)
                return -EINVAL;
        va_start(ap, fmt);
        k = vasprintf(&body, fmt, ap);
        va_end(ap);
        if (k < 0 || asprintf(&msg, "%s:%u:%u: %s: %s", m->file, line, column, path, body) < 0) {
                body = NULL;
                m->oom = true;
                return -ENOMEM;
        }
        if (strv_extend(&m->errors, msg) < 0) {
                m->oom = true;
                return -ENOMEM;
        }
        m->n_errors++;
        if (m->n_errors == GSH_ERRORS_MAX)
                (void) strv_extend(&m->errors, "(more errors not shown)");
        return -EINVAL;
}

#define gsh_error(m, node, path, ...) gsh_error_at(m, (node)->line, (node)->column, path, __VA_ARGS__)
/* An error about a key itself (unknown, not allowed here): at the key. */
#define gsh_key_error(m, node, path, ...) \
        gsh_error_at(m, (node)->key_line, (node)->key_column, path, __VA_ARGS__)

static const char *type_name(GshNodeType t) {
        return t == GSH_MAP ? "a map" : t == GSH_LIST ? "a list" : "a scalar";
}

static int expect_type(GshMap *m, const GshNode *n, const char *path, GshNodeType t) {
        if (n->type != t)
                return gsh_error(m, n, path, "expected %s, got %s", type_name(t),
                                 type_name(n->type));
        return 0;
}

/* "PATH.KEY" (or "PATH[I]" with key NULL) for messages; NULL on OOM, with m->oom set. */
static char *path_join(GshMap *m, const char *path, const char *key, size_t index) {
        char *s;
        int k;

        if (key)
                k = path ? asprintf(&s, "%s.%s", path, key) : asprintf(&s, "%s", key);
        else
                k = asprintf(&s, "%s[%zu]", path, index);
        if (k < 0) {
                m->oom = true;
                return NULL;
        }
        return s;
}

/* The keys of map must be among allowed (NULL-terminated); each other one is an error. */
static int check_keys(GshMap *m, const GshNode *map, const char *path,
                      const char *const *allowed, const char *which) {
        int r = 0;

        for (size_t i = 0; i < map->n_children; i++) {
                const GshNode *n = map->children[i];
                _cleanup_free_ char *p = path_join(m, path, n->key, 0);
                bool ok = false;

                if (!p)
                        return -ENOMEM;
                for (size_t j = 0; allowed[j]; j++)
                        ok = ok || streq(n->key, allowed[j]);
                if (!ok)
                        r = gsh_key_error(m, n, p, "unknown key; %s", which);
        }
        return r;
}

static int get_string(GshMap *m, const GshNode *n, const char *path, bool empty_ok, char **ret) {
        char q[QUOTE_BUF];

        if (expect_type(m, n, path, GSH_SCALAR) < 0)
                return -EINVAL;
        if (gsh_is_null(n) && !empty_ok)
                return gsh_error(m, n, path, "expected a value");
        if (!text_is_printable(n->value))
                return gsh_error(m, n, path, "expected text without control characters (got '%s')",
                                 config_quote(n->value, q));
        if (free_and_strdup(ret, gsh_is_null(n) ? "" : n->value) < 0) {
                m->oom = true;
                return -ENOMEM;
        }
        return 0;
}

static int get_unsigned(GshMap *m, const GshNode *n, const char *path, unsigned min,
                        unsigned max, unsigned *ret) {
        char q[QUOTE_BUF];
        unsigned v;

        if (expect_type(m, n, path, GSH_SCALAR) < 0)
                return -EINVAL;
        if (!n->plain || n->value[0] < '0' || n->value[0] > '9' ||
            parse_unsigned(n->value, &v) < 0 || v < min || v > max)
                return gsh_error(m, n, path, "expected an integer from %u to %u (got '%s')", min,
                                 max, config_quote(n->value, q));
        *ret = v;
        return 0;
}

static int get_bool(GshMap *m, const GshNode *n, const char *path, bool *ret) {
        char q[QUOTE_BUF];

        if (expect_type(m, n, path, GSH_SCALAR) < 0)
                return -EINVAL;
        if (n->plain && (streq(n->value, "true") || streq(n->value, "True") ||
                         streq(n->value, "TRUE"))) {
                *ret = true;
                return 0;
        }
        if (n->plain && (streq(n->value, "false") || streq(n->value, "False") ||
                         streq(n->value, "FALSE"))) {
                *ret = false;
                return 0;
        }
        return gsh_error(m, n, path, "expected true or false (got '%s')",
                         config_quote(n->value, q));
}

/* Runs an INI key parser of config-keys.c or config-build.c on a YAML value, so that the two
 * formats refuse the same things: its message ("FILE:L:C: section.name: ...") is recorded. */
typedef struct IniShim {
        ParseContext ctx;
        char *where;
} IniShim;

static int shim_open(GshMap *m, IniShim *s, const GshNode *n, const char *section) {
        *s = (IniShim) {};
        if (asprintf(&s->where, "%s:%u:%u", m->file, n->line, n->column) < 0) {
                s->where = NULL;
                m->oom = true;
                return -ENOMEM;
        }
        s->ctx.file = s->where;
        s->ctx.section = (char *) section;
        return 0;
}

static int shim_close(GshMap *m, IniShim *s, int r) {
        if (r == -ENOMEM)
                m->oom = true;
        else if (r < 0 && s->ctx.error) {
                if (m->n_errors < GSH_ERRORS_MAX && strv_extend(&m->errors, s->ctx.error) < 0)
                        m->oom = true;
                m->n_errors++;
        }
        free(s->ctx.error);
        free(s->where);
        return r < 0 ? r : 0;
}

/* builds.NAME */
static int map_build(GshMap *m, const GshNode *n, GshBuild *b) {
        static const char *const keys[] = { "executableName", "buildPath", "excludePaths", NULL };
        _cleanup_free_ char *path = path_join(m, "builds", n->key, 0), *dir = NULL;
        const GshNode *v;
        int r = 0;

        if (!path)
                return -ENOMEM;
        b->node = n;
        if (expect_type(m, n, path, GSH_MAP) < 0)
                return -EINVAL;
        r = check_keys(m, n, path, keys, "a build has executableName, buildPath and excludePaths");

        v = gsh_map_get(n, "executableName");
        if (v) {
                _cleanup_free_ char *p = path_join(m, path, "executableName", 0);
                if (!p || get_string(m, v, p, false, &b->executable) < 0)
                        r = -EINVAL;
        } else if (free_and_strdup(&b->executable, "Server") < 0)
                return m->oom = true, -ENOMEM;

        /* excludePaths: what the upload leaves out; a list of strings, nothing to do here. */
        v = gsh_map_get(n, "excludePaths");
        if (v && !gsh_is_null(v)) {
                _cleanup_free_ char *p = path_join(m, path, "excludePaths", 0);
                if (!p || expect_type(m, v, p, GSH_LIST) < 0)
                        r = -EINVAL;
                else
                        for (size_t i = 0; i < v->n_children; i++) {
                                _cleanup_free_ char *pi = path_join(m, p, NULL, i), *s = NULL;
                                if (!pi || get_string(m, v->children[i], pi, false, &s) < 0)
                                        r = -EINVAL;
                        }
        }

        v = gsh_map_get(n, "buildPath");
        if (!v)
                return gsh_error(m, n, path, "buildPath is missing: the build's directory "
                                 "(absolute, or under supervisor.builds_dir)");
        {
                _cleanup_free_ char *p = path_join(m, path, "buildPath", 0), *full = NULL;
                IniShim s;
                ConfigKey k = { .section = path, .name = "buildPath" };

                if (!p || get_string(m, v, p, false, &dir) < 0)
                        return -EINVAL;
                if (dir[0] == '/')
                        full = strdup(dir);
                else if (asprintf(&full, "%s/%s", m->c->builds_dir, dir) < 0)
                        full = NULL;
                if (!full)
                        return m->oom = true, -ENOMEM;
                if (shim_open(m, &s, v, path) < 0)
                        return -ENOMEM;
                if (shim_close(m, &s, parse_path_key(&s.ctx, &k, full, &b->root)) < 0)
                        return -EINVAL;
        }
        return r;
}

static const GshBuild *find_build(const GshMap *m, const char *name) {
        for (size_t i = 0; i < m->n_builds; i++)
                if (streq(m->builds[i].node->key, name))
                        return m->builds[i].root ? &m->builds[i] : NULL;
        return NULL;
}

/* buildConfigurations.NAME.binaryPath: relative to the build's directory, or absolute. */
static int map_binary_path(GshMap *m, const GshNode *n, const char *path, const GshBuild *b,
                           GshBuildConfig *g) {
        const GshNode *v = gsh_map_get(n, "binaryPath");
        _cleanup_free_ char *bin = NULL, *full = NULL;
        ConfigKey k = { .section = path, .name = "binaryPath" };
        IniShim s;

        if (v) {
                _cleanup_free_ char *p = path_join(m, path, "binaryPath", 0);
                if (!p || get_string(m, v, p, false, &bin) < 0)
                        return -EINVAL;
        }
        if (!b)
                return 0;
        if (!bin && !(bin = strdup(b->executable)))
                return m->oom = true, -ENOMEM;
        if (bin[0] == '/')
                full = strdup(bin);
        else if (asprintf(&full, "%s/%s", b->root, bin) < 0)
                full = NULL;
        if (!full)
                return m->oom = true, -ENOMEM;
        if (shim_open(m, &s, v ?: n, path) < 0)
                return -ENOMEM;
        g->bc.build_line = (v ?: n)->line;
        return shim_close(m, &s, parse_path_key(&s.ctx, &k, full, &g->bc.build));
}

static int map_query_type(GshMap *m, const GshNode *n, const char *path, GshBuildConfig *g) {
        _cleanup_free_ char *p = path_join(m, path, "queryType", 0), *s = NULL;
        const GshNode *v = gsh_map_get(n, "queryType");
        QueryType q;

        g->bc.query = QUERY_NONE;
        if (!v || gsh_is_null(v))
                return 0;
        if (!p || get_string(m, v, p, false, &s) < 0)
                return -EINVAL;
        for (char *c = s; *c; c++)
                *c = (char) (*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
        q = query_type_from_string(s);
        if ((int) q < 0)
                return gsh_error(m, v, p, "expected sqp, a2s or none (got '%s')", v->value);
        g->bc.query = q;
        return 0;
}

static int map_command_line(GshMap *m, const GshNode *n, const char *path, GshBuildConfig *g) {
        _cleanup_free_ char *p = path_join(m, path, "commandLine", 0), *s = NULL;
        const GshNode *v = gsh_map_get(n, "commandLine");
        ConfigKey k = { .section = path, .name = "commandLine" };
        IniShim sh;

        if (!v || gsh_is_null(v))
                return (g->bc.args = calloc(1, sizeof(char *))) ? 0 : (m->oom = true, -ENOMEM);
        if (!p || get_string(m, v, p, true, &s) < 0)
                return -EINVAL;
        if (shim_open(m, &sh, v, path) < 0)
                return -ENOMEM;
        return shim_close(m, &sh, parse_args_key(&sh.ctx, &k, s, &g->bc.args));
}

static int map_variables(GshMap *m, const GshNode *n, const char *path, GshBuildConfig *g) {
        _cleanup_free_ char *p = path_join(m, path, "variables", 0);
        const GshNode *v = gsh_map_get(n, "variables");
        int r = 0;

        if (!(g->bc.variable_names = calloc(1, sizeof(char *))) ||
            !(g->bc.variable_values = calloc(1, sizeof(char *))) || !p)
                return m->oom = true, -ENOMEM;
        if (!v || gsh_is_null(v))
                return 0;
        if (expect_type(m, v, p, GSH_MAP) < 0)
                return -EINVAL;
        for (size_t i = 0; i < v->n_children; i++) {
                const GshNode *var = v->children[i];
                _cleanup_free_ char *pv = path_join(m, p, var->key, 0), *value = NULL;
                IniShim s;

                if (!pv || get_string(m, var, pv, true, &value) < 0) {
                        r = -EINVAL;
                        continue;
                }
                if (shim_open(m, &s, var, path) < 0)
                        return -ENOMEM;
                if (shim_close(m, &s, build_section_variable(&s.ctx, &g->bc, var->key, value)) < 0)
                        r = -EINVAL;
        }
        return r;
}

/* buildConfigurations.NAME */
static int map_build_config(GshMap *m, const GshNode *n, GshBuildConfig *g) {
        static const char *const keys[] = { "build", "queryType", "binaryPath", "commandLine",
                                            "variables", "readiness", "cores", "speedMhz",
                                            "memoryMiB", NULL };
        static const char *const usage[] = { "cores", "speedMhz", "memoryMiB" };
        _cleanup_free_ char *path = path_join(m, "buildConfigurations", n->key, 0), *bn = NULL;
        const GshBuild *b = NULL;
        const GshNode *v;
        int r;

        g->node = n;
        g->readiness = true;
        g->cores = 1;
        g->speed_mhz = 750;
        g->memory_mib = 800;
        if (!path)
                return -ENOMEM;
        if (expect_type(m, n, path, GSH_MAP) < 0)
                return -EINVAL;
        r = check_keys(m, n, path, keys, "a build configuration has build, queryType, "
                       "binaryPath, commandLine, variables, readiness, cores, speedMhz and "
                       "memoryMiB");
        if (!build_config_id_is_valid(n->key))
                r = gsh_key_error(m, n, path, "the name is the build configuration's ID: "
                                  "expected %s", BUILD_CONFIG_ID_RULE);
        if (free_and_strdup(&g->bc.id, n->key) < 0)
                return m->oom = true, -ENOMEM;
        g->bc.line = n->key_line;

        v = gsh_map_get(n, "build");
        if (!v)
                r = gsh_error(m, n, path, "build is missing: the name of one of builds");
        else {
                _cleanup_free_ char *p = path_join(m, path, "build", 0);
                if (!p || get_string(m, v, p, false, &bn) < 0)
                        r = -EINVAL;
                else if (!(b = find_build(m, bn))) {
                        bool defined = false;
                        for (size_t i = 0; i < m->n_builds; i++)
                                defined = defined || streq(m->builds[i].node->key, bn);
                        if (!defined)
                                r = gsh_error(m, v, p, "no build '%s' in builds", bn);
                        else
                                r = -EINVAL; /* its own error is reported at builds */
                }
        }
        /* Each, not the first that fails: every error of the file is reported. */
        if (map_binary_path(m, n, path, b, g) < 0)
                r = -EINVAL;
        if (map_query_type(m, n, path, g) < 0)
                r = -EINVAL;
        if (map_command_line(m, n, path, g) < 0)
                r = -EINVAL;
        if (map_variables(m, n, path, g) < 0)
                r = -EINVAL;
        if (!(g->bc.environment = calloc(1, sizeof(char *))))
                return m->oom = true, -ENOMEM;

        v = g->readiness_node = gsh_map_get(n, "readiness");
        if (v) {
                _cleanup_free_ char *p = path_join(m, path, "readiness", 0);
                if (!p || get_bool(m, v, p, &g->readiness) < 0)
                        r = -EINVAL;
        }
        for (size_t i = 0; i < ELEMENTSOF(usage); i++) {
                unsigned *field[] = { &g->cores, &g->speed_mhz, &g->memory_mib };
                _cleanup_free_ char *p = NULL;

                v = g->usage_node[i] = gsh_map_get(n, usage[i]);
                if (!v)
                        continue;
                p = path_join(m, path, usage[i], 0);
                if (!p || get_unsigned(m, v, p, 1, i == 0 ? 1024 : 1048576, field[i]) < 0)
                        r = -EINVAL;
        }
        return r;
}

static const GshBuildConfig *find_build_config(const GshMap *m, const char *name) {
        for (size_t i = 0; i < m->n_configs; i++)
                if (streq(m->configs[i].node->key, name))
                        return &m->configs[i];
        return NULL;
}

static int build_config_copy(const BuildConfig *from, BuildConfig *to) {
        *to = (BuildConfig) {
                .id = strdup(from->id),
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
            !to->variable_values) {
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

/* fleets.NAME.buildConfigurations: the fleet's build configurations, the first the default. */
static int map_fleet_configs(GshMap *m, const GshNode *n, const char *path, FleetConfig *f,
                             const GshBuildConfig ***ret) {
        _cleanup_free_ char *p = path_join(m, path, "buildConfigurations", 0);
        _cleanup_free_ const GshBuildConfig **list = NULL;
        const GshNode *v = gsh_map_get(n, "buildConfigurations");
        size_t k = 0;
        int r = 0;

        if (!p)
                return -ENOMEM;
        if (!v || gsh_is_null(v) || (v->type == GSH_LIST && v->n_children == 0))
                return gsh_error(m, v ?: n, p, "expected a list of one or more of "
                                 "buildConfigurations' names");
        if (expect_type(m, v, p, GSH_LIST) < 0)
                return -EINVAL;
        list = calloc(v->n_children + 1, sizeof(*list));
        if (!list)
                return m->oom = true, -ENOMEM;
        for (size_t i = 0; i < v->n_children; i++) {
                _cleanup_free_ char *pi = path_join(m, p, NULL, i), *name = NULL;
                const GshBuildConfig *g;

                if (!pi || get_string(m, v->children[i], pi, false, &name) < 0) {
                        r = -EINVAL;
                        continue;
                }
                g = find_build_config(m, name);
                if (!g) {
                        r = gsh_error(m, v->children[i], pi, "no build configuration '%s' in "
                                      "buildConfigurations", name);
                        continue;
                }
                for (size_t j = 0; j < k; j++)
                        if (list[j] == g)
                                r = gsh_error(m, v->children[i], pi, "'%s' is listed twice",
                                              name);
                list[k++] = g;
        }
        if (r < 0)
                return r;

        /* One usage and one readiness for the fleet's servers: the default's. */
        for (size_t i = 1; i < k; i++) {
                static const char *const usage[] = { "cores", "speedMhz", "memoryMiB" };
                unsigned a[] = { list[0]->cores, list[0]->speed_mhz, list[0]->memory_mib };
                unsigned b[] = { list[i]->cores, list[i]->speed_mhz, list[i]->memory_mib };
                _cleanup_free_ char *bp = path_join(m, "buildConfigurations",
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
        _cleanup_free_ char *p = path_join(m, path, n->key, 0);
        const GshNode *v;
        int r = 0;

        region->online = true;
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
        if (expect_type(m, n, p, GSH_MAP) < 0)
                return -EINVAL;
        if (check_keys(m, n, p, keys, "a region has minAvailable, maxServers and online") < 0)
                r = -EINVAL;
        if ((v = gsh_map_get(n, "minAvailable"))) {
                _cleanup_free_ char *pk = path_join(m, p, "minAvailable", 0);
                if (!pk || get_unsigned(m, v, pk, 0, 1000000, &region->min_available) < 0)
                        r = -EINVAL;
        }
        if ((v = gsh_map_get(n, "maxServers"))) {
                _cleanup_free_ char *pk = path_join(m, p, "maxServers", 0);
                if (!pk || get_unsigned(m, v, pk, 0, 1000000, &region->max_servers) < 0)
                        r = -EINVAL;
                else if (region->min_available > region->max_servers)
                        r = gsh_error(m, v, pk, "%u is below minAvailable %u",
                                      region->max_servers, region->min_available);
        }
        if ((v = gsh_map_get(n, "online"))) {
                _cleanup_free_ char *pk = path_join(m, p, "online", 0);
                if (!pk || get_bool(m, v, pk, &region->online) < 0)
                        r = -EINVAL;
        }
        return r;
}

static int map_regions(GshMap *m, const GshNode *n, const char *path, FleetConfig *f) {
        _cleanup_free_ char *p = path_join(m, path, "regions", 0);
        const GshNode *v = gsh_map_get(n, "regions");
        int r = 0;

        if (!p)
                return -ENOMEM;
        if (!v || gsh_is_null(v))
                return 0;
        if (expect_type(m, v, p, GSH_MAP) < 0)
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

/* fleets.NAME.usageSettings[I]: bare metal only, and one setting (Multiplay's METAL setting
 * applies to every machine of the fleet). */
static int map_usage_setting(GshMap *m, const GshNode *n, const char *path, FleetConfig *f,
                             unsigned *metal) {
        static const char *const keys[] = { "fleetUsageID", "hardwareType", "machineType",
                                            "speed", "memory", "maxServersPerMachine",
                                            "maxServersPerCore", NULL };
        const GshNode *v;
        unsigned x;
        int r = 0;

        if (expect_type(m, n, path, GSH_MAP) < 0)
                return -EINVAL;
        r = check_keys(m, n, path, keys, "a usage setting has fleetUsageID, hardwareType, "
                       "machineType, speed, memory, maxServersPerMachine and maxServersPerCore");

#define SUBPATH(k) _cleanup_free_ char *p_##k = path_join(m, path, #k, 0); if (!p_##k) return -ENOMEM
        SUBPATH(hardwareType);
        SUBPATH(machineType);
        SUBPATH(speed);
        SUBPATH(memory);
        SUBPATH(maxServersPerMachine);
        SUBPATH(maxServersPerCore);
        SUBPATH(fleetUsageID);
#undef SUBPATH

        v = gsh_map_get(n, "hardwareType");
        if (!v)
                return gsh_error(m, n, path, "hardwareType is missing: slotd takes METAL");
        if (v->type != GSH_SCALAR || !streq(v->value, "METAL"))
                return gsh_error(m, v, p_hardwareType, "%s is not supported: slotd runs on the "
                                 "machines it is given (expected METAL)",
                                 v->type == GSH_SCALAR && !isempty(v->value) ? v->value :
                                 "this");
        if ((*metal)++ > 0)
                return gsh_error(m, v, p_hardwareType, "a second METAL setting: Multiplay's "
                                 "METAL setting applies to every machine of the fleet");
        if ((v = gsh_map_get(n, "machineType")))
                r = gsh_key_error(m, v, p_machineType, "is for CLOUD settings; a METAL setting "
                                  "applies to every machine (Unity: omit it)");
        if ((v = gsh_map_get(n, "fleetUsageID")) && get_unsigned(m, v, p_fleetUsageID, 0,
                                                                  UINT_MAX, &x) < 0)
                r = -EINVAL;
        if (!(v = gsh_map_get(n, "speed")))
                r = gsh_error(m, n, path, "speed is missing: the MHz of CPU a server takes");
        else if (get_unsigned(m, v, p_speed, 100, 10000000, &f->usage_speed_mhz) < 0)
                r = -EINVAL;
        if (!(v = gsh_map_get(n, "memory")))
                r = gsh_error(m, n, path, "memory is missing: the MiB a server takes");
        else if (get_unsigned(m, v, p_memory, 100, 1048576 * 16, &x) < 0)
                r = -EINVAL;
        else
                f->usage_memory = (uint64_t) x << 20;
        if ((v = gsh_map_get(n, "maxServersPerMachine")) &&
            get_unsigned(m, v, p_maxServersPerMachine, 1, 65535, &f->usage_max_per_machine) < 0)
                r = -EINVAL;
        if ((v = gsh_map_get(n, "maxServersPerCore")) &&
            get_unsigned(m, v, p_maxServersPerCore, 1, 65535, &f->usage_max_per_core) < 0)
                r = -EINVAL;
        return r;
}

static int map_usage_settings(GshMap *m, const GshNode *n, const char *path, FleetConfig *f) {
        _cleanup_free_ char *p = path_join(m, path, "usageSettings", 0);
        const GshNode *v = gsh_map_get(n, "usageSettings");
        unsigned metal = 0;
        int r = 0;

        if (!p)
                return -ENOMEM;
        if (!v || gsh_is_null(v))
                return 0;
        if (expect_type(m, v, p, GSH_LIST) < 0)
                return -EINVAL;
        for (size_t i = 0; i < v->n_children; i++) {
                _cleanup_free_ char *pi = path_join(m, p, NULL, i);

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

        if (f->n_regions == 0)
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
            strv_extend(&m->elsewhere, msg) < 0)
                return m->oom = true, -ENOMEM;
        return 0;
}

static int fleet_fill(GshMap *m, const GshNode *n, FleetConfig *f, const GshBuildConfig *def) {
        f->file = strdup(m->file);
        f->line = n->key_line;
        f->name = strdup(n->key);
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

/* fleets.NAME: 1 with *f filled when it runs here, 0 when elsewhere. */
static int map_fleet(GshMap *m, const GshNode *n, FleetConfig *f) {
        static const char *const keys[] = { "buildConfigurations", "regions", "usageSettings",
                                            NULL };
        _cleanup_free_ char *path = path_join(m, "fleets", n->key, 0);
        _cleanup_free_ const GshBuildConfig **list = NULL;
        const FleetConfig *other;
        char q[QUOTE_BUF];
        int r;

        fleet_config_init(f);
        if (!path)
                return -ENOMEM;
        if (expect_type(m, n, path, GSH_MAP) < 0)
                return -EINVAL;
        r = check_keys(m, n, path, keys, "a fleet has buildConfigurations, regions and "
                       "usageSettings");
        if (!fleet_name_is_valid(n->key))
                r = gsh_key_error(m, n, path, "the name is the fleet's name ('%s'): expected %s",
                                  config_quote(n->key, q), FLEET_NAME_RULE);
        else if ((other = config_find_fleet(m->c, n->key)))
                r = gsh_key_error(m, n, path, "fleet %s is already defined by %s", n->key,
                                  other->file);
        if (map_fleet_configs(m, n, path, f, &list) < 0)
                r = -EINVAL;
        if (map_regions(m, n, path, f) < 0)
                r = -EINVAL;
        if (map_usage_settings(m, n, path, f) < 0)
                r = -EINVAL;
        if (r < 0 || m->oom)
                return -EINVAL;
        if (fleet_fill(m, n, f, list[0]) < 0)
                return -ENOMEM;
        return fleet_pick_region(m, n, f);
}

static int map_section(GshMap *m, const GshNode *root, const char *key) {
        const GshNode *v = gsh_map_get(root, key);
        bool builds = streq(key, "builds"), configs = streq(key, "buildConfigurations");
        size_t size = builds ? sizeof(GshBuild) : configs ? sizeof(GshBuildConfig) :
                      sizeof(FleetConfig);
        void *array;
        int r = 0;

        if (!v || gsh_is_null(v))
                return 0;
        if (expect_type(m, v, key, GSH_MAP) < 0)
                return -EINVAL;
        array = calloc(MAX(v->n_children, 1u), size);
        if (!array)
                return m->oom = true, -ENOMEM;
        if (builds)
                m->builds = array;
        else if (configs)
                m->configs = array;
        else
                m->fleets = array;

        for (size_t i = 0; i < v->n_children && !m->oom; i++) {
                int k;

                if (builds) {
                        k = map_build(m, v->children[i], &m->builds[m->n_builds++]);
                } else if (configs) {
                        k = map_build_config(m, v->children[i], &m->configs[m->n_configs++]);
                } else {
                        k = map_fleet(m, v->children[i], &m->fleets[m->n_fleets]);
                        if (k > 0)
                                m->n_fleets++;
                        else
                                config_fleet_done(&m->fleets[m->n_fleets]);
                }
                if (k < 0)
                        r = k;
        }
        return r;
}

static void gsh_map_done(GshMap *m) {
        for (size_t i = 0; i < m->n_builds; i++) {
                free(m->builds[i].root);
                free(m->builds[i].executable);
        }
        free(m->builds);
        for (size_t i = 0; i < m->n_configs; i++)
                build_config_done(&m->configs[i].bc);
        free(m->configs);
        for (size_t i = 0; i < m->n_fleets; i++)
                config_fleet_done(&m->fleets[i]);
        free(m->fleets);
        strv_free(m->errors);
        strv_free(m->elsewhere);
}

static int map_root(GshMap *m, const GshNode *root) {
        static const char *const keys[] = { "version", "builds", "buildConfigurations", "fleets",
                                            NULL };
        const GshNode *v;

        if (!root)
                return gsh_error_at(m, 1, 1, "(file)", "empty: expected version, builds, "
                                    "buildConfigurations and fleets");
        if (expect_type(m, root, "(file)", GSH_MAP) < 0)
                return -EINVAL;
        (void) check_keys(m, root, NULL, keys, "a .gsh file has version, builds, "
                          "buildConfigurations and fleets");
        v = gsh_map_get(root, "version");
        if (v && (v->type != GSH_SCALAR || !streq(v->value, "1.0")))
                (void) gsh_error(m, v, "version", "expected 1.0, the version of Multiplay's "
                                 "config-as-code files slotd reads");
        /* In this order: a build configuration names builds, a fleet build configurations. */
        (void) map_section(m, root, "builds");
        (void) map_section(m, root, "buildConfigurations");
        (void) map_section(m, root, "fleets");
        return m->oom ? -ENOMEM : m->n_errors > 0 ? -EINVAL : 0;
}

/* "FILE:LINE:COLUMN: ..." by line and column: the file's errors in the order they stand. */
static int cmp_errors(const void *a, const void *b, void *userdata) {
        size_t skip = strlen(userdata) + 1;
        const char *x = *(char *const *) a, *y = *(char *const *) b;
        unsigned lx = 0, cx = 0, ly = 0, cy = 0;

        if (strlen(x) > skip)
                (void) sscanf(x + skip, "%u:%u", &lx, &cx);
        if (strlen(y) > skip)
                (void) sscanf(y + skip, "%u:%u", &ly, &cy);
        return lx != ly ? (lx < ly ? -1 : 1) : cx != cy ? (cx < cy ? -1 : 1) : 0;
}

static int gsh_join_errors(GshMap *m, char **ret_error) {
        size_t n = 0;
        char *s, *p;

        if (!ret_error)
                return 0;
        /* Not the "(more errors not shown)" line: it stays last. */
        qsort_r(m->errors, MIN(strv_length(m->errors), (size_t) GSH_ERRORS_MAX), sizeof(char *),
                cmp_errors, (void *) m->file);
        STRV_FOREACH(e, m->errors)
                n += strlen(*e) + 1;
        s = p = malloc(n + 1);
        if (!s)
                return -ENOMEM;
        STRV_FOREACH(e, m->errors)
                p = stpcpy(stpcpy(p, e == m->errors ? "" : "\n"), *e);
        *p = '\0';
        *ret_error = s;
        return 0;
}

int config_parse_gsh(Config *c, const char *name, const char *text, size_t size,
                     char **ret_error) {
        _cleanup_(gsh_node_freep) GshNode *root = NULL;
        _cleanup_free_ char *message = NULL;
        GshMap m = { .c = c, .file = name };
        unsigned line = 0, column = 0;
        FleetConfig *fleets;
        int r;

        if (size > CONFIG_FILE_SIZE_MAX)
                return config_set_error(ret_error, -EFBIG, name, 0,
                                        "file too large (%zu bytes, at most %zu)", size,
                                        CONFIG_FILE_SIZE_MAX);
        r = gsh_parse(text, size, &root, &line, &column, &message);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                if (ret_error && asprintf(ret_error, "%s:%u:%u: %s", name, line, column,
                                          message ?: "not YAML") < 0)
                        *ret_error = NULL;
                return r;
        }

        r = map_root(&m, root);
        if (r == -EINVAL)
                r = gsh_join_errors(&m, ret_error) ?: -EINVAL;
        if (r < 0)
                goto finish;

        if (m.n_fleets > 0) {
                fleets = reallocarray(c->fleets, c->n_fleets + m.n_fleets, sizeof(FleetConfig));
                if (!fleets) {
                        r = -ENOMEM;
                        goto finish;
                }
                c->fleets = fleets;
        }
        STRV_FOREACH(e, m.elsewhere)
                if (strv_extend(&c->fleets_elsewhere, *e) < 0) {
                        r = -ENOMEM;
                        goto finish;
                }
        for (size_t i = 0; i < m.n_fleets; i++)
                c->fleets[c->n_fleets++] = m.fleets[i];
        m.n_fleets = 0;
finish:
        gsh_map_done(&m);
        return r;
}
