/* SPDX-License-Identifier: MIT */
/* Build configurations, as Multiplay has them: [build_configuration ID] sections of a fleet
 * file, each a build with its arguments, environment, query protocol and server.json
 * variables. What a section leaves out comes from [fleet] and [checks]. The fleet's default
 * configuration (fleet.build_configuration) always comes first, made from [fleet] when no
 * section names it. */
#include <strings.h>

#include "config-internal.h"
#include "expand.h"
#include "strv.h"

enum {
        BUILD_KEY_BUILD,
        BUILD_KEY_ARGS,
        BUILD_KEY_ENVIRONMENT,
        BUILD_KEY_QUERY,
};

/* The section is filled in when a key is parsed: it names the section with its ID. */
#define BUILD_KEY(n, parser, field) { NULL, n, parser, offsetof(BuildConfig, field), false }

static const ConfigKey build_keys[] = {
        [BUILD_KEY_BUILD] = BUILD_KEY("build", parse_path_key, build),
        [BUILD_KEY_ARGS] = BUILD_KEY("args", parse_args_key, args),
        [BUILD_KEY_ENVIRONMENT] = BUILD_KEY("environment", parse_environment_key, environment),
        [BUILD_KEY_QUERY] = BUILD_KEY("query", parse_query_key, query),
};

_Static_assert(ELEMENTSOF(build_keys) == BUILD_KEYS_MAX, "BUILD_KEYS_MAX");

#define VARIABLE_PREFIX "variables."
#define VARIABLE_NAME_RULE "1 to 64 characters from A-Z a-z 0-9 _ . -"

/* The keys slotd writes into server.json itself (SPEC §4 and §10). A variable may not replace
 * one; case does not count, since SDKs that read the file with Json.NET match names without
 * regard to case. */
static const char *const server_json_keys[] = {
        "serverID", "allocatedUUID", "machineID", "fleetID", "ip", "ipv6", "port", "queryPort",
        "queryType", "serverLogDir", "serverFilesDir", "localProxyUrl", "regionID", "regionName",
};

bool build_config_id_is_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > BUILD_CONFIG_ID_MAX)
                return false;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") == n;
}

int parse_build_id_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        if (!build_config_id_is_valid(value))
                return key_error(ctx, k, value, -EINVAL, "expected %s", BUILD_CONFIG_ID_RULE);
        return store_string(ctx, data, value);
}

static ssize_t build_config_index(const FleetConfig *f, const char *id) {
        for (size_t i = 0; i < f->n_build_configs; i++)
                if (streq(f->build_configs[i].id, id))
                        return (ssize_t) i;
        return -1;
}

/* A new, empty build configuration at the end; line 0 for the one made from [fleet]. */
static int build_sections_append(ParseContext *ctx, BuildSections *b, const char *id,
                                 unsigned line) {
        FleetConfig *f = b->fleet;
        size_t n = f->n_build_configs;
        unsigned (*lines)[BUILD_KEYS_MAX];
        BuildConfig *configs;

        configs = reallocarray(f->build_configs, n + 1, sizeof(BuildConfig));
        if (!configs)
                return ctx_oom(ctx);
        f->build_configs = configs;
        lines = reallocarray(b->key_lines, n + 1, sizeof(*lines));
        if (!lines)
                return ctx_oom(ctx);
        b->key_lines = lines;

        configs[n] = (BuildConfig) { .line = line };
        memset(lines[n], 0, sizeof(lines[n]));
        f->n_build_configs++;
        return store_string(ctx, &configs[n].id, id);
}

int build_section_open(ParseContext *ctx, const char *id) {
        BuildSections *b = ctx->userdata;
        ssize_t i;

        if (!build_config_id_is_valid(id))
                return ctx_error(ctx, -EINVAL, ctx->line, id,
                                 "build_configuration: expected [build_configuration ID], the "
                                 "ID %s", BUILD_CONFIG_ID_RULE);
        i = build_config_index(b->fleet, id);
        if (i >= 0)
                return ctx_error(ctx, -EEXIST, ctx->line, NULL,
                                 "build_configuration %s: defined twice, first on line %u", id,
                                 b->fleet->build_configs[i].line);
        return build_sections_append(ctx, b, id, ctx->line);
}

static bool variable_name_is_valid(const char *s) {
        size_t n = strlen(s);

        return n >= 1 && n <= VARIABLE_NAME_MAX &&
               strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* "build_configuration ID.variables.NAME: …" with the value. */
_printf_(4, 5)
static int variable_error(ParseContext *ctx, const char *name, const char *value, const char *fmt,
                          ...) {
        _cleanup_free_ char *what = NULL;
        char q[QUOTE_BUF];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&what, fmt, ap);
        va_end(ap);
        if (n < 0)
                return ctx_oom(ctx);
        return ctx_error(ctx, -EINVAL, ctx->line, value, "%s." VARIABLE_PREFIX "%s: %s",
                         ctx->section, config_quote(name, q), what);
}

int build_section_variable(ParseContext *ctx, BuildConfig *bc, const char *name,
                           const char *value) {
        if (!variable_name_is_valid(name))
                return variable_error(ctx, name, value, "expected variables.NAME, NAME %s",
                                      VARIABLE_NAME_RULE);
        for (size_t i = 0; i < ELEMENTSOF(server_json_keys); i++)
                if (strcasecmp(name, server_json_keys[i]) == 0)
                        return variable_error(ctx, name, value,
                                              "slotd writes %s into server.json itself",
                                              server_json_keys[i]);
        STRV_FOREACH(other, bc->variable_names)
                if (strcasecmp(name, *other) == 0)
                        return variable_error(ctx, name, value,
                                              "variables.%s is already set (case does not count)",
                                              *other);
        if (strlen(value) > VARIABLE_VALUE_MAX || !text_is_printable(value))
                return variable_error(ctx, name, value,
                                      "expected at most %d bytes without control characters",
                                      VARIABLE_VALUE_MAX);

        if (strv_extend(&bc->variable_values, value) < 0)
                return ctx_oom(ctx);
        if (strv_extend(&bc->variable_names, name) < 0) {
                /* Keep the two lists the same length. */
                size_t n = strv_length(bc->variable_values);
                bc->variable_values[n - 1] = mfree_str(bc->variable_values[n - 1]);
                return ctx_oom(ctx);
        }
        bc->n_variables++;
        return 0;
}

int build_section_key(ParseContext *ctx, const char *name, const char *value) {
        BuildSections *b = ctx->userdata;
        size_t n = b->fleet->n_build_configs - 1; /* the section being read */
        BuildConfig *bc = &b->fleet->build_configs[n];
        char q[QUOTE_BUF];
        int r;

        if (strncmp(name, VARIABLE_PREFIX, strlen(VARIABLE_PREFIX)) == 0)
                return build_section_variable(ctx, bc, name + strlen(VARIABLE_PREFIX), value);

        for (size_t i = 0; i < ELEMENTSOF(build_keys); i++) {
                ConfigKey k = build_keys[i];

                if (!streq(k.name, name))
                        continue;
                k.section = ctx->section;
                if (b->key_lines[n][i] > 0)
                        return ctx_error(ctx, -EINVAL, ctx->line, NULL,
                                         "%s.%s: duplicate key, already set on line %u",
                                         k.section, k.name, b->key_lines[n][i]);
                r = k.parse(ctx, &k, value, (uint8_t *) bc + k.offset);
                if (r < 0)
                        return r;
                b->key_lines[n][i] = ctx->line;
                if (i == BUILD_KEY_BUILD)
                        bc->build_line = ctx->line;
                return 0;
        }
        return ctx_error(ctx, -EINVAL, ctx->line, NULL, "%s.%s: unknown key", ctx->section,
                         config_quote(name, q));
}

int build_sections_default_build(ParseContext *ctx, FleetConfig *f) {
        ssize_t i = build_config_index(f, f->build_configuration);

        if (i < 0 || !f->build_configs[i].build)
                return 0;
        if (free_and_strdup(&f->build, f->build_configs[i].build) < 0)
                return ctx_oom(ctx);
        return 1;
}

static void build_sections_move_first(BuildSections *b, size_t i) {
        BuildConfig *configs = b->fleet->build_configs, bc = configs[i];
        unsigned lines[BUILD_KEYS_MAX];

        memcpy(lines, b->key_lines[i], sizeof(lines));
        memmove(configs + 1, configs, i * sizeof(BuildConfig));
        memmove(b->key_lines + 1, b->key_lines, i * sizeof(*b->key_lines));
        configs[0] = bc;
        memcpy(b->key_lines[0], lines, sizeof(lines));
}

static int build_config_inherit(ParseContext *ctx, BuildConfig *bc,
                                const unsigned lines[static BUILD_KEYS_MAX],
                                const FleetConfig *f) {
        if ((!bc->build && !(bc->build = strdup(f->build))) ||
            (!bc->args && !(bc->args = strv_copy(f->args))) ||
            (!bc->environment && !(bc->environment = strv_copy(f->environment))) ||
            (!bc->variable_names && !(bc->variable_names = calloc(1, sizeof(char *)))) ||
            (!bc->variable_values && !(bc->variable_values = calloc(1, sizeof(char *)))))
                return ctx_oom(ctx);
        if (lines[BUILD_KEY_QUERY] == 0)
                bc->query = f->query;
        return 0;
}

/* checks.readiness = query needs a query protocol in every build configuration. */
static int build_sections_readiness(ParseContext *ctx, FleetConfig *f) {
        BuildSections *b = ctx->userdata;
        unsigned line = key_line(ctx, "checks", "readiness");

        if (line == 0)
                f->readiness = f->query != QUERY_NONE ? READINESS_QUERY : READINESS_EXEC;
        if (f->readiness != READINESS_QUERY)
                return 0;
        if (f->query == QUERY_NONE)
                return ctx_error(ctx, -EINVAL, line, "query",
                                 "checks.readiness: query needs checks.query sqp or a2s, not none");

        for (size_t i = 0; i < f->n_build_configs; i++) {
                const BuildConfig *bc = &f->build_configs[i];

                /* One that inherits has the fleet's query: only a section's own "none" is left. */
                if (bc->query == QUERY_NONE)
                        return ctx_error(ctx, -EINVAL, b->key_lines[i][BUILD_KEY_QUERY], "none",
                                         "build_configuration %s.query: must be sqp or a2s, since "
                                         "checks.readiness is query%s",
                                         bc->id,
                                         line > 0 ? "" : " (the default when checks.query is set)");
        }
        return 0;
}

int build_config_check_launch(const BuildConfig *bc, char *const *words, const char **ret_bad) {
        _cleanup_free_ ExpandVariable *vars = NULL;
        unsigned n = 0;

        vars = new0(ExpandVariable, expand_n_known_names + expand_n_launch_names +
                                    bc->n_variables + 1);
        if (!vars)
                return -ENOMEM;
        for (unsigned j = 0; j < expand_n_known_names; j++)
                vars[n++] = (ExpandVariable){ expand_known_names[j], "", false };
        for (unsigned j = 0; j < expand_n_launch_names; j++)
                vars[n++] = (ExpandVariable){ expand_launch_names[j], "", true };
        for (size_t j = 0; j < bc->n_variables; j++)
                vars[n++] = (ExpandVariable){ bc->variable_names[j], "", true };

        STRV_FOREACH(w, words) {
                char *expanded = NULL;
                int r = expand_variables(*w, vars, n, &expanded, ret_bad);

                free(expanded);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Every $$name$$ of a build configuration's args and environment is one of Multiplay's server
 * variables or one of its own variables.NAME: checked once the whole file is read, since its
 * variables may follow its args. The words' syntax was checked when they were parsed. */
static int build_config_check_words(ParseContext *ctx, const BuildConfig *bc, char **words,
                                    unsigned own_line, const char *key) {
        const char *bad = NULL;
        char what[256];
        int r;

        r = build_config_check_launch(bc, words, &bad);
        if (r == -ENOMEM)
                return ctx_oom(ctx);
        if (r >= 0)
                return 0;
        expand_describe_error(bad, what, sizeof(what));
        if (own_line > 0)
                return ctx_error(ctx, -EINVAL, own_line, NULL, "build_configuration %s.%s: %s; %s",
                                 bc->id, key, what, expand_known_text());
        return ctx_error(ctx, -EINVAL, key_line(ctx, "fleet", key), NULL,
                         "fleet.%s: %s (build configuration %s has no such variable); %s", key,
                         what, bc->id, expand_known_text());
}

int build_sections_finalize(ParseContext *ctx, FleetConfig *f) {
        BuildSections *b = ctx->userdata;
        ssize_t d = build_config_index(f, f->build_configuration);
        int r;

        if (d < 0) {
                r = build_sections_append(ctx, b, f->build_configuration, 0);
                if (r < 0)
                        return r;
                d = (ssize_t) f->n_build_configs - 1;
        }
        build_sections_move_first(b, (size_t) d);

        for (size_t i = 0; i < f->n_build_configs; i++) {
                r = build_config_inherit(ctx, &f->build_configs[i], b->key_lines[i], f);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < f->n_build_configs; i++) {
                const BuildConfig *bc = &f->build_configs[i];

                r = build_config_check_words(ctx, bc, bc->args, b->key_lines[i][BUILD_KEY_ARGS],
                                             "args");
                if (r < 0)
                        return r;
                r = build_config_check_words(ctx, bc, bc->environment,
                                             b->key_lines[i][BUILD_KEY_ENVIRONMENT],
                                             "environment");
                if (r < 0)
                        return r;
        }
        return build_sections_readiness(ctx, f);
}

bool fleet_has_query(const FleetConfig *f) {
        if (f->query != QUERY_NONE)
                return true;
        for (size_t i = 0; i < f->n_build_configs; i++)
                if (f->build_configs[i].query != QUERY_NONE)
                        return true;
        return false;
}

void build_sections_done(BuildSections *b) {
        b->key_lines = mfree(b->key_lines);
}

void build_config_done(BuildConfig *b) {
        free(b->id);
        free(b->gsh_name);
        free(b->build);
        strv_free(b->args);
        strv_free(b->environment);
        strv_free(b->variable_names);
        strv_free(b->variable_values);
        *b = (BuildConfig) {};
}

const BuildConfig *fleet_config_find_build(const FleetConfig *f, const char *id) {
        ssize_t i;

        if (f->n_build_configs == 0)
                return NULL;
        if (isempty(id))
                return &f->build_configs[0];
        i = build_config_index(f, id);
        if (i >= 0)
                return &f->build_configs[i];
        /* No section at all: any ID runs the fleet's build, as before sections existed. */
        if (fleet_config_runs_any_build(f))
                return &f->build_configs[0];
        return NULL;
}

bool fleet_config_runs_any_build(const FleetConfig *f) {
        return f->n_build_configs == 1 && f->build_configs[0].line == 0;
}

bool build_config_equal(const BuildConfig *a, const BuildConfig *b) {
        return streq_ptr(a->id, b->id) && streq_ptr(a->build, b->build) &&
               strv_equal(a->args, b->args) && strv_equal(a->environment, b->environment) &&
               a->query == b->query && strv_equal(a->variable_names, b->variable_names) &&
               strv_equal(a->variable_values, b->variable_values);
}

bool fleet_config_build_equal(const FleetConfig *a, const FleetConfig *b) {
        if (!streq_ptr(a->build, b->build) || !strv_equal(a->args, b->args) ||
            !strv_equal(a->environment, b->environment) ||
            !streq_ptr(a->build_configuration, b->build_configuration) ||
            !streq_ptr(a->user, b->user) || !streq_ptr(a->group, b->group) ||
            a->game_port_base != b->game_port_base || a->query_port_base != b->query_port_base ||
            !streq_ptr(a->region_id, b->region_id) || !streq_ptr(a->region_name, b->region_name) ||
            a->n_build_configs != b->n_build_configs)
                return false;

        for (size_t i = 0; i < a->n_build_configs; i++) {
                const BuildConfig *ac = &a->build_configs[i];
                ssize_t j = build_config_index(b, ac->id);

                if (j < 0 || !build_config_equal(ac, &b->build_configs[j]))
                        return false;
        }
        return true;
}
