/* SPDX-License-Identifier: MIT */
/* A Multiplay config-as-code file (.gsh) as slotd fleets: the GshNode tree (gsh.c) mapped onto
 * FleetConfig and BuildConfig. Every error of the file is collected, one
 * "FILE:LINE:COLUMN: path.to.key: what is wrong" each; the fleets are added only when there
 * is none.
 *
 * The fields, as Unity documents them (the payloads of Multiplay's Admin API):
 *   https://docs.unity3d.com/Packages/com.unity.services.multiplayer@1.2/manual/Multiplay/Authoring/multiplay-assets.html
 *   https://docs.unity3d.com/Packages/com.unity.services.multiplayer@1.0/api/Unity.Services.Multiplay.Authoring.Core.Assets
 *   https://docs.unity3d.com/Packages/com.unity.services.multiplayer@1.2/api/Unity.Services.Multiplay.Authoring.Core.Assets.html
 *     (1.2 adds BuildDefinition.BuildOptions and .BuildProfile, FleetDefinition.Architecture)
 *     (MultiplayConfig, BuildDefinition, BuildConfigurationDefinition, FleetDefinition,
 *     ScalingDefinition, FleetUsageSetting; and the editor's template, MultiplayConfigTemplate)
 *   https://docs.unity.com/en-us/multiplay-hosting/concepts/build-configurations
 *   https://docs.unity.com/zh-cn/services-cli/1.9.0/manual/game-server-hosting/commands/build-configuration/build-configuration-create
 *
 *   version                        "1.0"
 *   builds.NAME                    executableName (default "Server"), buildPath, excludePaths,
 *                                  buildOptions, buildProfile {guid, id} (multiplayer 1.2)
 *   buildConfigurations.NAME       build, queryType (sqp, a2s, none), binaryPath, commandLine,
 *                                  variables {name: value}, readiness (bool, default true),
 *                                  cores (default 1), speedMhz (default 750),
 *                                  memoryMiB (default 800); the last three deprecated for
 *                                  the fleet's usageSettings
 *   fleets.NAME                    architecture (Amd64, Arm64: multiplayer 1.2),
 *                                  buildConfigurations [NAME], regions {NAME: {minAvailable,
 *                                  maxServers, online (default true)}}, usageSettings
 *                                  [{fleetUsageID, hardwareType (CLOUD, METAL), machineType,
 *                                  speed (MHz), memory (MiB), maxServersPerMachine,
 *                                  maxServersPerCore}]
 * What each becomes is SPEC's "Multiplay config-as-code" table. The format has no numeric
 * IDs: a build configuration's ID is its name. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <strings.h>

#include "expand.h"
#include "gsh-map.h"
#include "strv.h"

/* Records "FILE:LINE:COLUMN: PATH: BODY" at (line, column); always -EINVAL. */
_printf_(5, 6)
int gsh_error_at(GshMap *m, unsigned line, unsigned column, const char *path, const char *fmt,
                 ...) {
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


static const char *type_name(GshNodeType t) {
        return t == GSH_MAP ? "a map" : t == GSH_LIST ? "a list" : "a scalar";
}

int gsh_expect(GshMap *m, const GshNode *n, const char *path, GshNodeType t) {
        if (n->type != t)
                return gsh_error(m, n, path, "expected %s, got %s", type_name(t),
                                 type_name(n->type));
        return 0;
}

/* "PATH.KEY" (or "PATH[I]" with key NULL) for messages; NULL on OOM, with m->oom set. */
char *gsh_path(GshMap *m, const char *path, const char *key, size_t index) {
        char q[QUOTE_BUF];
        char *s;
        int k;

        /* A quoted key may hold a line break or a control character: a message has none. */
        if (key)
                k = path ? asprintf(&s, "%s.%s", path, config_quote(key, q))
                         : asprintf(&s, "%s", config_quote(key, q));
        else
                k = asprintf(&s, "%s[%zu]", path, index);
        if (k < 0) {
                m->oom = true;
                return NULL;
        }
        return s;
}

/* The keys of map must be among allowed (NULL-terminated); each other one is an error. */
int gsh_check_keys(GshMap *m, const GshNode *map, const char *path,
                      const char *const *allowed, const char *which) {
        int r = 0;

        for (size_t i = 0; i < map->n_children; i++) {
                const GshNode *n = map->children[i];
                _cleanup_free_ char *p = gsh_path(m, path, n->key, 0);
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

int gsh_get_string(GshMap *m, const GshNode *n, const char *path, bool empty_ok, char **ret) {
        char q[QUOTE_BUF];

        if (gsh_expect(m, n, path, GSH_SCALAR) < 0)
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

int gsh_get_unsigned(GshMap *m, const GshNode *n, const char *path, unsigned min,
                        unsigned max, unsigned *ret) {
        char q[QUOTE_BUF];
        unsigned v;

        if (gsh_expect(m, n, path, GSH_SCALAR) < 0)
                return -EINVAL;
        if (!n->plain || n->value[0] < '0' || n->value[0] > '9' ||
            parse_unsigned(n->value, &v) < 0 || v < min || v > max)
                return gsh_error(m, n, path, "expected an integer from %u to %u (got '%s')", min,
                                 max, config_quote(n->value, q));
        *ret = v;
        return 0;
}

int gsh_get_bool(GshMap *m, const GshNode *n, const char *path, bool *ret) {
        char q[QUOTE_BUF];

        if (gsh_expect(m, n, path, GSH_SCALAR) < 0)
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

/* builds.NAME.excludePaths: what Multiplay's upload leaves out; a list of strings, and
 * nothing to do on a machine. */
static int map_exclude_paths(GshMap *m, const GshNode *n, const char *path) {
        _cleanup_free_ char *p = gsh_path(m, path, "excludePaths", 0);
        const GshNode *v = gsh_map_get(n, "excludePaths");
        int r = 0;

        if (!v || gsh_is_null(v))
                return 0;
        if (!p || gsh_expect(m, v, p, GSH_LIST) < 0)
                return -EINVAL;
        for (size_t i = 0; i < v->n_children; i++) {
                _cleanup_free_ char *pi = gsh_path(m, p, NULL, i), *s = NULL;

                if (!pi || gsh_get_string(m, v->children[i], pi, false, &s) < 0)
                        r = -EINVAL;
        }
        return r;
}

/* A decimal integer within int64 (a Unity asset's fileId may be negative). */
static bool is_int64(const char *s) {
        char *end;

        if (!((s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && s[1] >= '0' && s[1] <= '9')))
                return false;
        errno = 0;
        (void) strtoll(s, &end, 10);
        return errno == 0 && *end == '\0';
}

/* builds.NAME.buildOptions and .buildProfile (Unity's multiplayer 1.2): how the editor builds
 * the server (UnityEditor.BuildOptions flags; a BuildProfile asset's guid and fileId), before
 * Multiplay's upload. Checked and unused: a machine runs the build that is there. */
static int map_build_profile(GshMap *m, const GshNode *v, const char *path) {
        static const char *const keys[] = { "guid", "id", NULL };
        _cleanup_free_ char *p = gsh_path(m, path, "buildProfile", 0), *pg = NULL, *pi = NULL,
                            *s = NULL;
        const GshNode *guid, *id;
        char q[QUOTE_BUF];
        int r = 0;

        if (!p || gsh_expect(m, v, p, GSH_MAP) < 0)
                return -EINVAL;
        if (gsh_check_keys(m, v, p, keys, "a build profile has guid and id") < 0)
                r = -EINVAL;
        guid = gsh_map_get(v, "guid");
        if (guid && (!(pg = gsh_path(m, p, "guid", 0)) ||
                     gsh_get_string(m, guid, pg, true, &s) < 0))
                r = -EINVAL;
        id = gsh_map_get(v, "id");
        if (id && (!(pi = gsh_path(m, p, "id", 0)) || gsh_expect(m, id, pi, GSH_SCALAR) < 0))
                r = -EINVAL;
        else if (id && (!id->plain || !is_int64(id->value)))
                r = gsh_error(m, id, pi, "expected an integer (got '%s')",
                              config_quote(id->value, q));
        return r;
}

static int map_editor_build(GshMap *m, const GshNode *n, const char *path) {
        const GshNode *v = gsh_map_get(n, "buildOptions");
        unsigned options;
        int r = 0;

        if (v && !gsh_is_null(v)) {
                _cleanup_free_ char *p = gsh_path(m, path, "buildOptions", 0);
                if (!p || gsh_get_unsigned(m, v, p, 0, INT_MAX, &options) < 0)
                        r = -EINVAL;
        }
        v = gsh_map_get(n, "buildProfile");
        if (v && !gsh_is_null(v) && map_build_profile(m, v, path) < 0)
                r = -EINVAL;
        return r;
}

/* builds.NAME.buildPath: as it is when absolute, else under supervisor.builds_dir ("." is
 * builds_dir itself, "./x" its x). */
static int map_build_path(GshMap *m, const GshNode *n, const char *path, GshBuild *b) {
        _cleanup_free_ char *p = gsh_path(m, path, "buildPath", 0), *dir = NULL, *full = NULL;
        const GshNode *v = gsh_map_get(n, "buildPath");
        ConfigKey k = { .section = path, .name = "buildPath" };
        const char *rel;
        IniShim s;

        if (!v)
                return gsh_error(m, n, path, "buildPath is missing: the build's directory "
                                 "(absolute, or under supervisor.builds_dir)");
        if (!p || gsh_get_string(m, v, p, false, &dir) < 0)
                return -EINVAL;
        for (rel = dir; rel[0] == '.' && (rel[1] == '/' || rel[1] == '\0');)
                rel += rel[1] ? 2 : 1;
        while (rel[0] == '/' && dir[0] != '/')
                rel++;
        if (dir[0] == '/')
                full = strdup(dir);
        else if (asprintf(&full, "%s%s%s", m->c->builds_dir, rel[0] ? "/" : "", rel) < 0)
                full = NULL;
        if (!full)
                return m->oom = true, -ENOMEM;
        if (shim_open(m, &s, v, path) < 0)
                return -ENOMEM;
        return shim_close(m, &s, parse_path_key(&s.ctx, &k, full, &b->root));
}

/* builds.NAME */
static int map_build(GshMap *m, const GshNode *n, GshBuild *b) {
        static const char *const keys[] = { "executableName", "buildPath", "excludePaths",
                                            "buildOptions", "buildProfile", NULL };
        _cleanup_free_ char *path = gsh_path(m, "builds", n->key, 0);
        const GshNode *v;
        int r;

        if (!path)
                return -ENOMEM;
        b->node = n;
        if (gsh_expect(m, n, path, GSH_MAP) < 0)
                return -EINVAL;
        r = gsh_check_keys(m, n, path, keys,
                           "a build has executableName, buildPath, excludePaths, buildOptions "
                           "and buildProfile");

        v = gsh_map_get(n, "executableName");
        if (v) {
                _cleanup_free_ char *p = gsh_path(m, path, "executableName", 0);
                if (!p || gsh_get_string(m, v, p, false, &b->executable) < 0)
                        r = -EINVAL;
        } else if (free_and_strdup(&b->executable, "Server") < 0)
                return m->oom = true, -ENOMEM;

        if (map_exclude_paths(m, n, path) < 0 || map_editor_build(m, n, path) < 0)
                r = -EINVAL;
        if (map_build_path(m, n, path, b) < 0)
                r = -EINVAL;
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
                _cleanup_free_ char *p = gsh_path(m, path, "binaryPath", 0);
                if (!p || gsh_get_string(m, v, p, false, &bin) < 0)
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
        _cleanup_free_ char *p = gsh_path(m, path, "queryType", 0), *s = NULL;
        const GshNode *v = gsh_map_get(n, "queryType");
        QueryType q;

        g->bc.query = QUERY_NONE;
        if (!v || gsh_is_null(v))
                return 0;
        if (!p || gsh_get_string(m, v, p, false, &s) < 0)
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
        _cleanup_free_ char *p = gsh_path(m, path, "commandLine", 0), *s = NULL;
        const GshNode *v = gsh_map_get(n, "commandLine");
        ConfigKey k = { .section = path, .name = "commandLine" };
        IniShim sh;

        if (!v || gsh_is_null(v))
                return (g->bc.args = calloc(1, sizeof(char *))) ? 0 : (m->oom = true, -ENOMEM);
        if (!p || gsh_get_string(m, v, p, true, &s) < 0)
                return -EINVAL;
        if (shim_open(m, &sh, v, path) < 0)
                return -ENOMEM;
        return shim_close(m, &sh, parse_args_key(&sh.ctx, &k, s, &g->bc.args));
}

static int map_variables(GshMap *m, const GshNode *n, const char *path, GshBuildConfig *g) {
        _cleanup_free_ char *p = gsh_path(m, path, "variables", 0);
        const GshNode *v = gsh_map_get(n, "variables");
        int r = 0;

        if (!(g->bc.variable_names = calloc(1, sizeof(char *))) ||
            !(g->bc.variable_values = calloc(1, sizeof(char *))) || !p)
                return m->oom = true, -ENOMEM;
        if (!v || gsh_is_null(v))
                return 0;
        if (gsh_expect(m, v, p, GSH_MAP) < 0)
                return -EINVAL;
        for (size_t i = 0; i < v->n_children; i++) {
                const GshNode *var = v->children[i];
                _cleanup_free_ char *pv = gsh_path(m, p, var->key, 0), *value = NULL;
                IniShim s;

                if (!pv || gsh_get_string(m, var, pv, true, &value) < 0) {
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

/* Every $$name$$ of the command line is one of Multiplay's or one of the configuration's own
 * variables (expand.h): refused here, not when a server starts. */
static int check_command_line(GshMap *m, const GshNode *n, const char *path, GshBuildConfig *g) {
        _cleanup_free_ char *p = gsh_path(m, path, "commandLine", 0);
        const GshNode *v = gsh_map_get(n, "commandLine");
        const char *bad = NULL;
        char what[256];
        int r;

        if (!v || !g->bc.args)
                return 0;
        r = build_config_check_launch(&g->bc, g->bc.args, &bad);
        if (r == -ENOMEM || !p)
                return m->oom = true, -ENOMEM;
        if (r >= 0)
                return 0;
        expand_describe_error(bad, what, sizeof(what));
        return gsh_error(m, v, p, "%s; %s", what, expand_known_text());
}

/* buildConfigurations.NAME.build: one of builds; NULL (with the error where it is) when not. */
static const GshBuild *map_build_ref(GshMap *m, const GshNode *n, const char *path) {
        _cleanup_free_ char *p = gsh_path(m, path, "build", 0), *name = NULL;
        const GshNode *v = gsh_map_get(n, "build");
        const GshBuild *b;

        if (!v) {
                (void) gsh_error(m, n, path, "build is missing: the name of one of builds");
                return NULL;
        }
        if (!p || gsh_get_string(m, v, p, false, &name) < 0)
                return NULL;
        b = find_build(m, name);
        if (b)
                return b;
        for (size_t i = 0; i < m->n_builds; i++)
                if (streq(m->builds[i].node->key, name))
                        return NULL; /* it is there, with errors of its own */
        (void) gsh_error(m, v, p, "no build '%s' in builds", name);
        return NULL;
}

/* buildConfigurations.NAME.readiness, cores, speedMhz and memoryMiB: what its servers are
 * judged ready by and take, which the fleet's usage comes from. */
static int map_sizes(GshMap *m, const GshNode *n, const char *path, GshBuildConfig *g) {
        static const char *const usage[] = { "cores", "speedMhz", "memoryMiB" };
        unsigned *field[] = { &g->cores, &g->speed_mhz, &g->memory_mib };
        const GshNode *v;
        int r = 0;

        v = g->readiness_node = gsh_map_get(n, "readiness");
        if (v) {
                _cleanup_free_ char *p = gsh_path(m, path, "readiness", 0);
                if (!p || gsh_get_bool(m, v, p, &g->readiness) < 0)
                        r = -EINVAL;
        }
        for (size_t i = 0; i < ELEMENTSOF(usage); i++) {
                _cleanup_free_ char *p = NULL;

                v = g->usage_node[i] = gsh_map_get(n, usage[i]);
                if (!v)
                        continue;
                p = gsh_path(m, path, usage[i], 0);
                if (!p || gsh_get_unsigned(m, v, p, 1, i == 0 ? 1024 : 1048576, field[i]) < 0)
                        r = -EINVAL;
        }
        return r;
}

/* buildConfigurations.NAME: Unity's defaults are readiness true, 1 core, 750 MHz, 800 MiB. */
/* Two names that make the same ID (e.g. "EU fleet" and "EU-fleet"): an error at the later. */
static int gsh_check_id_clash(GshMap *m, const GshNode *n, const char *path, const char *id,
                              const GshBuildConfig *self) {
        for (size_t i = 0; i < m->n_configs && &m->configs[i] != self; i++)
                if (m->configs[i].bc.id && streq(m->configs[i].bc.id, id))
                        return gsh_key_error(m, n, path, "its ID '%s' is also that of "
                                             "buildConfigurations.%s (line %u)", id,
                                             m->configs[i].node->key,
                                             m->configs[i].node->key_line);
        return 0;
}

static int map_build_config(GshMap *m, const GshNode *n, GshBuildConfig *g) {
        static const char *const keys[] = { "build", "queryType", "binaryPath", "commandLine",
                                            "variables", "readiness", "cores", "speedMhz",
                                            "memoryMiB", NULL };
        _cleanup_free_ char *path = gsh_path(m, "buildConfigurations", n->key, 0);
        const GshBuild *b;
        int r, k;

        *g = (GshBuildConfig) { .node = n, .readiness = true, .cores = 1, .speed_mhz = 750,
                                .memory_mib = 800, .bc.line = n->key_line };
        if (!path)
                return -ENOMEM;
        if (gsh_expect(m, n, path, GSH_MAP) < 0)
                return -EINVAL;
        r = gsh_check_keys(m, n, path, keys, "a build configuration has build, queryType, "
                           "binaryPath, commandLine, variables, readiness, cores, speedMhz and "
                           "memoryMiB");
        /* Multiplay's names are free text: the ID is the name as slotd spells IDs. */
        g->bc.id = gsh_name_to_id(n->key, 128, true);
        if (g->bc.id && !streq(g->bc.id, n->key) && !(g->bc.gsh_name = strdup(n->key)))
                return m->oom = true, -ENOMEM;
        if (!g->bc.id || !build_config_id_is_valid(g->bc.id))
                r = gsh_key_error(m, n, path, "the name makes no build configuration ID: "
                                  "expected a letter or digit among its characters");
        else if (gsh_check_id_clash(m, n, path, g->bc.id, g) < 0)
                r = -EINVAL;
        if (!(g->bc.environment = calloc(1, sizeof(char *))))
                return m->oom = true, -ENOMEM;

        /* Each, not the first that fails: every error of the file is reported. */
        b = map_build_ref(m, n, path);
        if (!b)
                r = -EINVAL;
        if (map_binary_path(m, n, path, b, g) < 0)
                r = -EINVAL;
        if (map_query_type(m, n, path, g) < 0)
                r = -EINVAL;
        k = map_command_line(m, n, path, g);
        if (map_variables(m, n, path, g) < 0 || k < 0 || check_command_line(m, n, path, g) < 0)
                r = -EINVAL;
        if (map_sizes(m, n, path, g) < 0)
                r = -EINVAL;
        g->ok = r >= 0 && g->bc.build;
        return r;
}

char *gsh_name_to_id(const char *name, size_t max, bool colon) {
        char *id = malloc(max + 1);
        size_t n = 0;

        if (!id)
                return NULL;
        for (const char *p = name; *p && n < max; p++) {
                bool keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                            (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' ||
                            (colon && *p == ':');

                if (keep && !(n == 0 && *p == '.'))
                        id[n++] = *p;
                else if (n > 0 && id[n - 1] != '-')
                        id[n++] = '-';
        }
        while (n > 0 && id[n - 1] == '-')
                n--;
        id[n] = '\0';
        if (n == 0)
                return mfree(id);
        return id;
}

const GshBuildConfig *gsh_find_build_config(const GshMap *m, const char *name) {
        for (size_t i = 0; i < m->n_configs; i++)
                if (streq(m->configs[i].node->key, name))
                        return &m->configs[i];
        return NULL;
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
        if (gsh_expect(m, v, key, GSH_MAP) < 0)
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
                        k = gsh_map_fleet(m, v->children[i], &m->fleets[m->n_fleets]);
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
        strv_free(m->elsewhere_names);
}

static int map_root(GshMap *m, const GshNode *root) {
        static const char *const keys[] = { "version", "builds", "buildConfigurations", "fleets",
                                            NULL };
        const GshNode *v;

        if (!root)
                return gsh_error_at(m, 1, 1, "(file)", "empty: expected version, builds, "
                                    "buildConfigurations and fleets");
        if (gsh_expect(m, root, "(file)", GSH_MAP) < 0)
                return -EINVAL;
        (void) gsh_check_keys(m, root, NULL, keys, "a .gsh file has version, builds, "
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
        for (size_t i = 0; m.elsewhere && m.elsewhere[i]; i++)
                if (strv_extend(&c->fleets_elsewhere, m.elsewhere[i]) < 0 ||
                    strv_extend(&c->fleets_elsewhere_names, m.elsewhere_names[i]) < 0 ||
                    strv_extend(&c->fleets_elsewhere_files, name) < 0) {
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
