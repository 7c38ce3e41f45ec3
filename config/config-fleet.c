/* SPDX-License-Identifier: MIT */
/* A fleet file (fleets.d/NAME.ini): its keys, their defaults, and the checks across keys of
 * one fleet. */
#include <inttypes.h>
#include <signal.h>

#include "config-internal.h"
#include "strv.h"

/* The kernel's PID_MAX_LIMIT on 64-bit: a larger pids.max means nothing. */
#define PIDS_MAX_LIMIT UINT64_C(4194304)

static int parse_servers_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        unsigned v;
        int r;

        if (streq(value, "auto")) {
                *(unsigned *) data = 0;
                return 0;
        }

        r = parse_unsigned(value, &v);
        if (r < 0 || v == 0)
                return key_error(ctx, k, value, r < 0 ? r : -ERANGE,
                                 "expected a positive integer or 'auto'");

        *(unsigned *) data = v;
        return 0;
}

/* limits.cores_kept: 1 to 100 cores per slot. */
static int parse_cores_kept_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                void *data) {
        unsigned v;
        int r;

        r = parse_unsigned(value, &v);
        if (r < 0 || v < 1 || v > 100)
                return key_error(ctx, k, value, r < 0 ? r : -ERANGE,
                                 "expected an integer between 1 and 100");
        *(unsigned *) data = v;
        return 0;
}

/* logs.keep: 1 to 99 older files of server.log. */
static int parse_log_keep_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                              void *data) {
        unsigned v;
        int r;

        r = parse_unsigned(value, &v);
        if (r < 0 || v < 1 || v > 99)
                return key_error(ctx, k, value, r < 0 ? r : -ERANGE,
                                 "expected an integer between 1 and 99");
        *(unsigned *) data = v;
        return 0;
}

static int parse_pids_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        uint64_t v;
        int r;

        r = parse_uint64(value, &v);
        if (r < 0 || v < 1 || v > PIDS_MAX_LIMIT)
                return key_error(ctx, k, value, r < 0 ? r : -ERANGE,
                                 "expected an integer between 1 and %" PRIu64, PIDS_MAX_LIMIT);

        *(uint64_t *) data = v;
        return 0;
}

static int parse_nofile_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        uint64_t v;
        int r;

        r = parse_uint64(value, &v);
        if (r < 0 || v < 64 || v > (UINT64_C(1) << 30))
                return key_error(ctx, k, value, r < 0 ? r : -ERANGE,
                                 "expected an integer between 64 and 1073741824");
        *(uint64_t *) data = v;
        return 0;
}

/* security.seccomp: "default", "off", or the absolute path of an allow-list; the path goes
 * to FleetConfig.seccomp_list, next to the flag. */
static int parse_seccomp_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        FleetConfig *f = container_of((bool *) data, FleetConfig, seccomp);

        if (streq(value, "default") || streq(value, "off")) {
                f->seccomp = streq(value, "default");
                f->seccomp_list = mfree_str(f->seccomp_list);
                return 0;
        }
        if (value[0] != '/')
                return key_error(ctx, k, value, -EINVAL,
                                 "expected default, off, or the absolute path of an allow-list");
        f->seccomp = true;
        return store_string(ctx, &f->seccomp_list, value);
}

static int parse_seccomp_action_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                    void *data) {
        if (!streq(value, "eperm") && !streq(value, "kill"))
                return key_error(ctx, k, value, -EINVAL, "expected eperm or kill");
        *(bool *) data = streq(value, "kill");
        return 0;
}

bool fleet_name_is_valid(const char *s) {
        size_t n = strlen(s);

        if (n < 1 || n > FLEET_NAME_MAX || s[0] == '.')
                return false;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static int parse_fleet_name_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                void *data) {
        if (!fleet_name_is_valid(value))
                return key_error(ctx, k, value, -EINVAL, "expected %s", FLEET_NAME_RULE);
        return store_string(ctx, data, value);
}

static const char *const readiness_source_table[_READINESS_SOURCE_MAX] = {
        [READINESS_NOTIFY] = "notify",
        [READINESS_QUERY] = "query",
        [READINESS_EXEC] = "exec",
};

const char *readiness_source_to_string(ReadinessSource r) {
        if ((unsigned) r >= _READINESS_SOURCE_MAX)
                return NULL;
        return readiness_source_table[r];
}

ReadinessSource readiness_source_from_string(const char *s) {
        if (s)
                for (size_t i = 0; i < _READINESS_SOURCE_MAX; i++)
                        if (streq(s, readiness_source_table[i]))
                                return (ReadinessSource) i;
        return (ReadinessSource) -1;
}

static int parse_readiness_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                               void *data) {
        ReadinessSource r = readiness_source_from_string(value);

        if ((int) r < 0)
                return key_error(ctx, k, value, -EINVAL, "expected notify, query or exec");
        *(ReadinessSource *) data = r;
        return 0;
}

/* regionID and regionName go into server.json as they are. */
static int parse_region_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        if (strlen(value) > REGION_MAX || !text_is_printable(value))
                return key_error(ctx, k, value, -EINVAL,
                                 "expected at most %d bytes without control characters",
                                 REGION_MAX);
        return store_string(ctx, data, value);
}

/* checks.machine_fault_share: a share of a fleet's checked slots, "off" or 0 to judge every
 * slot alone whatever the others do. */
static int parse_machine_fault_share_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                         void *data) {
        double v;

        if (streq(value, "off") || streq(value, "0")) {
                *(double *) data = 0;
                return 0;
        }
        if (parse_percent(value, &v) < 0 || v < 0 || v > 1.0)
                return key_error(ctx, k, value, -ERANGE,
                                 "expected a percentage between 0%% and 100%% like 50%%, or off");
        *(double *) data = v;
        return 0;
}

#define FLEET_KEY(s, n, parser, field, nz) { s, n, parser, offsetof(FleetConfig, field), nz }

static const ConfigKey fleet_keys[] = {
        FLEET_KEY("fleet", "name", parse_fleet_name_key, name, false),
        FLEET_KEY("fleet", "build", parse_path_key, build, false),
        FLEET_KEY("fleet", "args", parse_args_key, args, false),
        FLEET_KEY("fleet", "environment", parse_environment_key, environment, false),
        FLEET_KEY("fleet", "build_configuration", parse_build_id_key, build_configuration, false),
        FLEET_KEY("fleet", "user", parse_string_key, user, false),
        FLEET_KEY("fleet", "group", parse_string_key, group, false),
        FLEET_KEY("fleet", "start_on_provision", parse_boolean_key, start_on_provision, false),
        FLEET_KEY("fleet", "stop_timeout", parse_duration_key, stop_timeout, true),
        FLEET_KEY("fleet", "region_id", parse_region_key, region_id, false),
        FLEET_KEY("fleet", "region_name", parse_region_key, region_name, false),
        FLEET_KEY("usage", "cpu", parse_cores_key, usage_cpu, true),
        FLEET_KEY("usage", "memory", parse_size_key, usage_memory, true),
        FLEET_KEY("usage", "servers", parse_servers_key, usage_servers, false),
        FLEET_KEY("usage", "speed", parse_positive_key, usage_speed_mhz, false),
        FLEET_KEY("usage", "max_per_core", parse_positive_key, usage_max_per_core, false),
        FLEET_KEY("usage", "max_per_machine", parse_positive_key, usage_max_per_machine, false),
        FLEET_KEY("ports", "game_base", parse_port_key, game_port_base, false),
        FLEET_KEY("ports", "query_base", parse_port_key, query_port_base, false),
        FLEET_KEY("checks", "interval", parse_duration_key, check_interval, false),
        FLEET_KEY("checks", "cpu_tolerance", parse_percent_key, cpu_tolerance, false),
        FLEET_KEY("checks", "memory_tolerance", parse_size_key, memory_tolerance, false),
        FLEET_KEY("checks", "strikes", parse_window_count_key, strikes, true),
        FLEET_KEY("checks", "window", parse_duration_key, strike_window, true),
        FLEET_KEY("checks", "machine_fault_share", parse_machine_fault_share_key,
                  machine_fault_share, false),
        FLEET_KEY("checks", "signal", parse_signal_key, check_signal, false),
        FLEET_KEY("checks", "query", parse_query_key, query, false),
        FLEET_KEY("checks", "query_timeout", parse_duration_key, query_timeout, true),
        FLEET_KEY("checks", "heartbeat", parse_duration_key, heartbeat, false),
        FLEET_KEY("checks", "start_timeout", parse_duration_key, start_timeout, false),
        FLEET_KEY("checks", "readiness", parse_readiness_key, readiness, false),
        FLEET_KEY("crash", "restarts", parse_window_count_key, crash_restarts, false),
        FLEET_KEY("crash", "window", parse_duration_key, crash_window, true),
        FLEET_KEY("crash", "pre_recovery", parse_boolean_key, pre_recovery, false),
        FLEET_KEY("limits", "memory_max", parse_size_key, memory_max, true),
        FLEET_KEY("limits", "memory_high", parse_memory_high_key, memory_high, true),
        FLEET_KEY("limits", "cpu_max", parse_cpu_max_key, cpu_max, false),
        FLEET_KEY("limits", "pids", parse_pids_key, pids_max, false),
        FLEET_KEY("limits", "nofile", parse_nofile_key, nofile, false),
        FLEET_KEY("limits", "core", parse_size_key, core_size, false),
        FLEET_KEY("limits", "cores_kept", parse_cores_kept_key, cores_kept, false),
        FLEET_KEY("logs", "max_size", parse_size_key, log_max_size, false),
        FLEET_KEY("logs", "keep", parse_log_keep_key, log_keep, false),
        FLEET_KEY("security", "seccomp", parse_seccomp_key, seccomp, false),
        FLEET_KEY("security", "seccomp_action", parse_seccomp_action_key, seccomp_kill, false),
};

_Static_assert(ELEMENTSOF(fleet_keys) <= KEYS_MAX, "raise KEYS_MAX");

static const ConfigSchema fleet_schema = {
        .keys = fleet_keys,
        .n_keys = ELEMENTSOF(fleet_keys),
        .sections = "a fleet file has [fleet], [usage], [ports], [checks], [crash], [limits], "
                    "[logs], [security] and [build_configuration ID]",
        .dynamic_section = "build_configuration",
        .dynamic_open = build_section_open,
        .dynamic_key = build_section_key,
};

void config_fleet_done(FleetConfig *f) {
        free(f->file);
        free(f->name);
        free(f->gsh_name);
        free(f->build);
        strv_free(f->args);
        strv_free(f->environment);
        free(f->build_configuration);
        free(f->user);
        free(f->group);
        free(f->seccomp_list);
        free(f->region_id);
        free(f->region_name);
        for (size_t i = 0; i < f->n_build_configs; i++)
                build_config_done(&f->build_configs[i]);
        free(f->build_configs);
        for (size_t i = 0; i < f->n_regions; i++)
                free(f->regions[i].name);
        free(f->regions);
        *f = (FleetConfig) {};
}

const char *config_fleet_defined_by(const Config *c, const char *name) {
        const FleetConfig *f = config_find_fleet(c, name);

        if (f)
                return f->file;
        for (size_t i = 0; c->fleets_elsewhere_names && c->fleets_elsewhere_names[i]; i++)
                if (streq(c->fleets_elsewhere_names[i], name))
                        return c->fleets_elsewhere_files[i];
        return NULL;
}

FleetConfig *config_find_fleet(const Config *c, const char *name) {
        for (size_t i = 0; i < c->n_fleets; i++)
                if (streq_ptr(c->fleets[i].name, name))
                        return &c->fleets[i];
        return NULL;
}

void fleet_config_init(FleetConfig *f) {
        *f = (FleetConfig) {
                .start_on_provision = true,
                .stop_timeout = 10 * USEC_PER_SEC,
                .game_port_base = 9000,
                .query_port_base = 9600,
                .check_interval = USEC_PER_MINUTE,
                .cpu_tolerance = 0.10,
                .memory_tolerance = UINT64_C(200) << 20,
                .strikes = 3,
                .strike_window = 30 * USEC_PER_MINUTE,
                .machine_fault_share = 0.5,
                .check_signal = SIGSEGV,
                .query = QUERY_NONE,
                .query_timeout = 2 * USEC_PER_SEC,
                .crash_restarts = 1,
                .crash_window = 30 * USEC_PER_MINUTE,
                .pre_recovery = true,
                .memory_high = UINT64_MAX,
                .pids_max = 4096,
                .nofile = 65536,
                .cores_kept = 1,
                .log_max_size = UINT64_C(64) << 20,
                .log_keep = 4,
                .seccomp = true,
        };
}

/* "/etc/slotd/fleets.d/shooter.ini" → "shooter". */
static char *fleet_name_from_file(const char *file) {
        const char *base = strrchr(file, '/');
        size_t n;

        base = base ? base + 1 : file;
        n = strlen(base);
        if (n > 4 && streq(base + n - 4, ".ini"))
                n -= 4;
        return strndup(base, n);
}

static int fleet_finalize_name(ParseContext *ctx, const Config *c, FleetConfig *f) {
        char q[QUOTE_BUF];
        const char *other;
        unsigned line = key_line(ctx, "fleet", "name");

        if (!f->name) {
                f->name = fleet_name_from_file(ctx->file);
                if (!f->name)
                        return ctx_oom(ctx);
                if (!fleet_name_is_valid(f->name))
                        return ctx_error(ctx, -EINVAL, 0, NULL,
                                         "the file name does not make a valid fleet name "
                                         "('%s'; expected %s): rename the file or set "
                                         "fleet.name",
                                         config_quote(f->name, q), FLEET_NAME_RULE);
        }

        other = config_fleet_defined_by(c, f->name);
        if (other)
                return ctx_error(ctx, -EEXIST, line, NULL,
                                 "fleet.name: fleet %s is already defined by %s", f->name,
                                 other);
        return 0;
}

static int fleet_set_default(ParseContext *ctx, char **p, const char *value) {
        if (*p)
                return 0;
        return store_string(ctx, p, value);
}

static int fleet_finalize_defaults(ParseContext *ctx, FleetConfig *f) {
        if (fleet_set_default(ctx, &f->build_configuration, "default") < 0 ||
            fleet_set_default(ctx, &f->user, "nobody") < 0 ||
            fleet_set_default(ctx, &f->group, "nogroup") < 0 ||
            fleet_set_default(ctx, &f->region_id, "") < 0 ||
            fleet_set_default(ctx, &f->region_name, "") < 0)
                return ctx->r;
        if ((!f->args && !(f->args = calloc(1, sizeof(char *)))) ||
            (!f->environment && !(f->environment = calloc(1, sizeof(char *)))))
                return ctx_oom(ctx);
        return 0;
}

static int fleet_finalize_required(ParseContext *ctx, FleetConfig *f) {
        static const struct {
                const char *section, *name;
        } required[] = {
                { "fleet", "build" },
                { "usage", "cpu" },
                { "usage", "memory" },
        };
        int r;

        for (size_t i = 0; i < ELEMENTSOF(required); i++) {
                if (key_line(ctx, required[i].section, required[i].name) > 0)
                        continue;
                /* The default build configuration's own build will do for the fleet's. */
                if (i == 0) {
                        r = build_sections_default_build(ctx, f);
                        if (r < 0)
                                return r;
                        if (r > 0)
                                continue;
                }
                return ctx_error(ctx, -EINVAL, 0, NULL, "%s.%s: required key is missing",
                                 required[i].section, required[i].name);
        }
        return 0;
}

static int fleet_finalize_limits(ParseContext *ctx, FleetConfig *f) {
        char b1[FORMAT_BYTES_MAX], b2[FORMAT_BYTES_MAX];
        unsigned line;

        line = key_line(ctx, "limits", "memory_max");
        if (line == 0) {
                if (f->memory_tolerance > (UINT64_MAX - f->usage_memory) / 2)
                        return ctx_error(ctx, -ERANGE, key_line(ctx, "checks", "memory_tolerance"),
                                         NULL, "checks.memory_tolerance: usage.memory + 2 × "
                                         "memory_tolerance (the default limits.memory_max) "
                                         "is too large");
                f->memory_max = f->usage_memory + 2 * f->memory_tolerance;
        } else if (f->memory_max < f->usage_memory)
                return ctx_error(ctx, -ERANGE, line, NULL,
                                 "limits.memory_max: %s is below usage.memory %s",
                                 format_bytes(f->memory_max, b1),
                                 format_bytes(f->usage_memory, b2));

        /* Under the budget it would throttle a server that keeps to it; at or over memory.max
         * it would never act. */
        line = key_line(ctx, "limits", "memory_high");
        if (f->memory_high != UINT64_MAX && f->memory_high < f->usage_memory)
                return ctx_error(ctx, -ERANGE, line, NULL,
                                 "limits.memory_high: %s is below usage.memory %s",
                                 format_bytes(f->memory_high, b1),
                                 format_bytes(f->usage_memory, b2));
        if (f->memory_high != UINT64_MAX && f->memory_high >= f->memory_max)
                return ctx_error(ctx, -ERANGE, line, NULL,
                                 "limits.memory_high: %s is not below limits.memory_max %s",
                                 format_bytes(f->memory_high, b1),
                                 format_bytes(f->memory_max, b2));

        line = key_line(ctx, "limits", "cpu_max");
        if (f->cpu_max > 0 && f->cpu_max < f->usage_cpu)
                return ctx_error(ctx, -ERANGE, line, NULL,
                                 "limits.cpu_max: %g cores is below usage.cpu %g", f->cpu_max,
                                 f->usage_cpu);

        /* A core is at most what the server may hold in memory: limits.core defaults to it. */
        if (key_line(ctx, "limits", "core") == 0)
                f->core_size = f->memory_max;

        /* A probe still waiting when the next one is due would overlap it. */
        if (fleet_has_query(f) && f->check_interval > 0 && f->query_timeout >= f->check_interval) {
                line = key_line(ctx, "checks", "query_timeout") ?:
                       key_line(ctx, "checks", "interval");
                return ctx_error(ctx, -EINVAL, line, NULL,
                                 "checks.query_timeout: must be shorter than checks.interval");
        }
        return 0;
}

static int fleet_finalize(ParseContext *ctx, const Config *c, FleetConfig *f) {
        int r;

        f->file = strdup(ctx->file);
        if (!f->file)
                return ctx_oom(ctx);
        f->line = ctx->fleet_line;

        r = fleet_finalize_name(ctx, c, f);
        if (r >= 0)
                r = fleet_finalize_defaults(ctx, f);
        if (r >= 0)
                r = fleet_finalize_required(ctx, f);
        if (r >= 0)
                r = build_sections_finalize(ctx, f);
        if (r >= 0)
                r = fleet_finalize_limits(ctx, f);
        if (r < 0)
                return r;

        f->build_line = key_line(ctx, "fleet", "build");
        f->usage_servers_line = key_line(ctx, "usage", "servers");
        f->game_port_base_line = key_line(ctx, "ports", "game_base");
        f->query_port_base_line = key_line(ctx, "ports", "query_base");
        return 0;
}

int parse_fleet_data(Config *c, const char *name, const char *data, size_t size,
                     char **ret_error) {
        _cleanup_(config_fleet_done) FleetConfig f;
        _cleanup_(build_sections_done) BuildSections sections = { .fleet = &f };
        ParseContext ctx = {
                .file = name,
                .schema = &fleet_schema,
                .base = &f,
                .data = data,
                .size = size,
                .userdata = &sections,
        };
        FleetConfig *fleets;
        int r;

        fleet_config_init(&f);

        r = parse_context_run(&ctx);
        if (r >= 0)
                r = fleet_finalize(&ctx, c, &f);
        if (r >= 0) {
                fleets = reallocarray(c->fleets, c->n_fleets + 1, sizeof(FleetConfig));
                if (!fleets)
                        r = ctx_oom(&ctx);
                else {
                        c->fleets = fleets;
                        c->fleets[c->n_fleets++] = f;
                        f = (FleetConfig) {};
                }
        }
        return parse_context_finish(&ctx, r, ret_error);
}

int config_parse_fleet(Config *c, const char *name, const char *text, char **ret_error) {
        return parse_fleet_data(c, name, text, strlen(text), ret_error);
}

