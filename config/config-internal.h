/* SPDX-License-Identifier: MIT */
#pragma once

/* What the files of config/ share and nobody else needs: the INI reader's context, the key
 * tables, the error helpers and the value parsers of single keys. */

#include <stdarg.h>
#include <sys/types.h>

#include "config.h"

#define CONFIG_FILE_SIZE_MAX ((size_t) 1024 * 1024)
/* Longest line accepted, without its line break. */
#define CONFIG_LINE_MAX 4096
#define FLEET_NAME_MAX 64
/* How much of a bad value a message quotes; each character may take 4 bytes escaped. */
#define QUOTE_MAX 100
#define QUOTE_BUF (QUOTE_MAX * 4 + 4)
#define KEYS_MAX 48
/* fleet.region_id, fleet.region_name */
#define REGION_MAX 128
/* variables.NAME of a build configuration */
#define VARIABLE_NAME_MAX 64
#define VARIABLE_VALUE_MAX 1024
/* Addresses in localproxy.listen */
#define LISTEN_MAX 16
#define BUILD_CONFIG_ID_RULE "1 to 128 characters from A-Z a-z 0-9 . _ : -"

typedef struct ConfigKey ConfigKey;
typedef struct ParseContext ParseContext;

/* Parses value into data (the key's field); on failure records the error in ctx. */
typedef int (*ConfigParser)(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);

struct ConfigKey {
        const char *section;
        const char *name;
        ConfigParser parse;
        size_t offset;  /* of the field in Config or FleetConfig */
        bool nonzero;   /* 0 would mean nothing sensible for this key */
};

typedef struct ConfigSchema {
        const ConfigKey *keys;
        size_t n_keys;
        const char *sections; /* for the "unknown section" message */

        /* Sections named "[<dynamic_section> ID]", which no table can list: dynamic_open is
         * called at the header (with "" for a header without an ID), dynamic_key for each of
         * their keys. NULL when the file has none. */
        const char *dynamic_section;
        int (*dynamic_open)(ParseContext *ctx, const char *id);
        int (*dynamic_key)(ParseContext *ctx, const char *name, const char *value);
} ConfigSchema;

struct ParseContext {
        const char *file;
        const ConfigSchema *schema;
        void *base; /* the Config or FleetConfig the keys' offsets point into */

        const char *data;
        size_t size;
        size_t pos;
        /* The line the reader handed to inih last: inih parses one line per read, so this is
         * the line of the key the handler is called for. Debian's inih 55 has no line
         * numbers in the handler. */
        unsigned line;
        unsigned fleet_line;
        unsigned key_lines[KEYS_MAX]; /* per key: line it was set on, 0 = unset */
        /* The section as written: inih hands the handler section names cut at 49 bytes, too
         * short for "build_configuration" and a 128-character ID. */
        char *section;
        bool dynamic;   /* section is a dynamic one */
        void *userdata; /* of the dynamic sections' handlers */

        bool section_unknown; /* its keys are not errors of their own */
        bool stop;            /* a line that cannot be read: the rest of the file is not */

        int r;          /* the first error */
        char *error;    /* every error, one a line (at most CONFIG_ERRORS_MAX) */
        unsigned n_errors;
};

/* Errors told of one file; the rest are counted in a last line. */
#define CONFIG_ERRORS_MAX 20

static inline bool isempty(const char *s) {
        return !s || *s == '\0';
}

/* Two addresses of localproxy.listen or metrics.listen that one machine cannot listen on both:
 * the same port of the same address, or of a wildcard address of the family. */
bool proxy_listen_overlaps(const ProxyListen *a, const ProxyListen *b);

/* config.c: messages, the INI reader and the dispatch of keys to their parsers. */
const char *config_quote(const char *s, char buf[static QUOTE_BUF]);
void config_errors_add(char **all, char **error);
int config_load_keep(const char *config_file, const char *fleets_dir, bool keep, Config **ret,
                     char **ret_error);
_printf_(5, 6)
int config_set_error(char **ret_error, int r, const char *file, unsigned line, const char *fmt,
                     ...);
_printf_(5, 6)
int ctx_error(ParseContext *ctx, int r, unsigned line, const char *value, const char *fmt, ...);
_printf_(5, 6)
int key_error(ParseContext *ctx, const ConfigKey *k, const char *value, int r, const char *fmt,
              ...);
int ctx_oom(ParseContext *ctx);
int store_string(ParseContext *ctx, char **p, const char *value);
unsigned key_line(const ParseContext *ctx, const char *section, const char *name);
int parse_context_run(ParseContext *ctx);
int parse_context_finish(ParseContext *ctx, int r, char **ret_error);

/* config-keys.c: one key's value, for any section. */
int parse_string_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_path_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_ipv4_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_ipv6_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_cores_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_cpu_max_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
/* A size, or "off" or its synonym "max" (UINT64_MAX). */
int parse_memory_high_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_size_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_duration_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_percent_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_window_count_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_port_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_signal_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_boolean_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
/* A whole number above 0 (unsigned). */
int parse_positive_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_query_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_args_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
/* Whether every ${NAME} and $$name$$ of words is known, the build configuration's own
 * variables.NAME included: 0, or -EINVAL with *ret_bad at the first that is not (for
 * expand_describe_error()), or -ENOMEM. For loaders of build configurations (config-build.c,
 * and any other that fills in a BuildConfig) once its variables are known. */
int build_config_check_launch(const BuildConfig *bc, char *const *words, const char **ret_bad);
/* The variables args and environment may name, for messages (config-keys.c). */
const char *expand_known_text(void);
#define EXPAND_CHECK_MAX 32
int parse_environment_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_build_id_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
/* Valid UTF-8 (checked before any parser runs) without C0 or C1 control characters or DEL:
 * what may go into server.json and messages as it is. */
bool text_is_printable(const char *s);

/* config-etcd.c: slotd.ini's [fleet] section (the fleet layer, SPEC §13). */
bool etcd_endpoint_is_valid(const char *s);
int parse_etcd_endpoints_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_etcd_prefix_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
int parse_lease_ttl_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
/* fleet.etcd_ca, etcd_cert, etcd_key: an absolute path, or empty for none. */
int parse_etcd_file_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data);
/* What no single key of [fleet] can tell: the client certificate and key go together, and
 * the TLS files are for https:// endpoints. */
int fleet_layer_check(ParseContext *ctx, const FleetLayerConfig *f);
int fleet_layer_init(FleetLayerConfig *f);
void fleet_layer_done(FleetLayerConfig *f);

/* config-machine.c and config-fleet.c: one file each, appended to c. */
int parse_machine_data(Config *c, const char *name, const char *data, size_t size,
                       char **ret_error);
int parse_fleet_data(Config *c, const char *name, const char *data, size_t size,
                     char **ret_error);

/* config-build.c: the [build_configuration ID] sections of one fleet file, while it is read.
 * The BuildConfigs go to fleet->build_configs at once (config_fleet_done() frees them);
 * key_lines is the parser's own. */
#define BUILD_KEYS_MAX 4
typedef struct BuildSections {
        FleetConfig *fleet;
        unsigned (*key_lines)[BUILD_KEYS_MAX]; /* per build configuration and key, 0 = unset */
} BuildSections;

int build_section_open(ParseContext *ctx, const char *id);
/* variables.NAME = value of bc: the name's rule, the keys slotd writes itself, the value's. */
int build_section_variable(ParseContext *ctx, BuildConfig *bc, const char *name,
                           const char *value);
int build_section_key(ParseContext *ctx, const char *name, const char *value);
/* Gives fleet.build the default section's build when [fleet] has none; 1 when it did. */
int build_sections_default_build(ParseContext *ctx, FleetConfig *f);
/* Fills what sections do not set from the fleet, puts the default configuration first (made
 * from [fleet] when no section names it), and applies checks.readiness. After the [fleet]
 * defaults are set. */
int build_sections_finalize(ParseContext *ctx, FleetConfig *f);
void build_sections_done(BuildSections *b);
void build_config_done(BuildConfig *b);
bool fleet_has_query(const FleetConfig *f);

/* Fleet names become cgroup directory names and D-Bus strings: no slash, no leading dot
 * (".", ".." and hidden directories), nothing that needs quoting. */
bool fleet_name_is_valid(const char *s);
/* The file that defines fleet name, whether it runs here or (a .gsh fleet) elsewhere; NULL
 * when none does. */
const char *config_fleet_defined_by(const Config *c, const char *name);
/* A FleetConfig with every default of a fleet file. */
void fleet_config_init(FleetConfig *f);
#define FLEET_NAME_RULE "1 to 64 characters from A-Z a-z 0-9 _ . -, not starting with '.'"
