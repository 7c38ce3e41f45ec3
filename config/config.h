/* SPDX-License-Identifier: MIT */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "time-util.h"

/* The parsed and validated configuration: slotd.ini plus every fleets.d/\*.ini and \*.gsh
 * (SPEC §2).
 * Pure data; the parser does no I/O beyond reading the files it is given and never logs. */

typedef enum QueryType {
        QUERY_NONE,
        QUERY_SQP,
        QUERY_A2S,
        _QUERY_TYPE_MAX,
} QueryType;

const char *query_type_to_string(QueryType t);
QueryType query_type_from_string(const char *s); /* -1 (as int) when unknown */

/* checks.readiness: what makes a starting server running. */
typedef enum ReadinessSource {
        READINESS_NOTIFY,          /* READY=1 on NOTIFY_SOCKET */
        READINESS_QUERY,           /* the first valid answer to a query-protocol probe */
        READINESS_EXEC,            /* the build executable was started */
        _READINESS_SOURCE_MAX,
} ReadinessSource;

const char *readiness_source_to_string(ReadinessSource r);
ReadinessSource readiness_source_from_string(const char *s); /* -1 (as int) when unknown */

/* Build configuration IDs (and allocation UUIDs): 1 to 128 characters of A-Z a-z 0-9 . _ : - */
#define BUILD_CONFIG_ID_MAX 128
bool build_config_id_is_valid(const char *s);

/* One build configuration of a fleet: a [build_configuration ID] section, or the fleet's
 * default one made from its [fleet] keys. After parsing every field is set: a key the
 * section does not set has the fleet's value (fleet.build, fleet.args, fleet.environment,
 * checks.query). */
typedef struct BuildConfig {
        char *id;
        char *gsh_name;            /* a .gsh build configuration's name when the ID differs */
        char *build;               /* absolute path */
        char **args;               /* ${…} not yet expanded */
        char **environment;        /* "KEY=value" words, ${…} not yet expanded */
        QueryType query;
        /* variables.NAME = value: extra strings for server.json, in file order; both arrays
         * are NULL-terminated and never NULL after parsing. */
        char **variable_names;
        char **variable_values;
        size_t n_variables;
        unsigned line;             /* of its [build_configuration ID]; 0 = made from [fleet] */
        unsigned build_line;       /* of the section's own build key; 0 = fleet.build */
} BuildConfig;

/* One region of a Multiplay .gsh fleet (fleets.NAME.regions.REGION): Multiplay's scaling
 * settings for the fleet in that region. The fleet layer's scaler (SPEC §13) reads them as
 * the region's buffer and ceiling (slotd-allocator's [scaler] gsh); nothing reads them on the
 * machine. */
typedef struct FleetRegion {
        char *name;                /* the key: "North America", "Europe", ... */
        unsigned line, column;     /* of the key, for messages */
        unsigned min_available;    /* minAvailable: servers kept free, default 0 */
        unsigned max_servers;      /* maxServers: servers in the region at most, default 0 */
        bool max_servers_set;      /* maxServers is in the file (else: no ceiling) */
        bool online;               /* online, default true */
} FleetRegion;

typedef struct FleetConfig {
        char *file;                /* path of the fleet's INI or .gsh file */
        unsigned line;             /* line of the [fleet] section header, for errors */

        /* [fleet] */
        char *name;                /* fleet.name, default: file name without ".ini" */
        char *gsh_name;            /* a .gsh fleet's name when slotd's differs ("my fleet") */
        char *build;               /* fleet.build, absolute path, required unless the default
                                    * build configuration's section sets build (then that) */
        char **args;               /* fleet.args split into words, ${…} not yet expanded */
        char **environment;        /* fleet.environment: "KEY=value" words, not yet expanded */
        char *build_configuration; /* default "default" */
        char *user;                /* default "nobody" */
        char *group;               /* default "nogroup" */
        bool start_on_provision;   /* default true */
        usec_t stop_timeout;       /* default 10s */
        char *region_id;           /* regionID in server.json; default "", never NULL */
        char *region_name;         /* regionName in server.json; default "", never NULL */
        /* A .gsh fleet's regions (fleets.NAME.regions), in file order; none for an INI fleet.
         * The fleet runs on this machine only in the one named machine.region: its name is
         * then region_id and region_name. */
        FleetRegion *regions;
        size_t n_regions;

        /* [usage] */
        double usage_cpu;          /* cores per server, > 0 (required) */
        uint64_t usage_memory;     /* bytes per server, > 0 (required) */
        unsigned usage_servers;    /* fixed count; 0 = auto (density decides) */
        /* Multiplay's usage settings (issue 26): 0 = unset. */
        unsigned usage_speed_mhz;       /* usage.speed: MHz of CPU per server */
        unsigned usage_max_per_core;    /* usage.max_per_core: servers per core at most */
        unsigned usage_max_per_machine; /* usage.max_per_machine: servers per machine at most */

        /* [ports] */
        uint16_t game_port_base;   /* default 9000 */
        uint16_t query_port_base;  /* default 9600 */
        bool ports_auto;           /* a .gsh fleet's (the format has no ports): its bases are
                                    * the lowest free after the density (config_load_full) */

        /* [checks] */
        usec_t check_interval;     /* default 1m; 0 = checks off */
        double cpu_tolerance;      /* fraction: "10%" → 0.10; default 0.10 */
        uint64_t memory_tolerance; /* bytes; default 200M */
        unsigned strikes;          /* default 3 */
        usec_t strike_window;      /* default 30m */
        double machine_fault_share; /* checks.machine_fault_share: fraction, 0 = off; default 0.5 */
        int check_signal;          /* default SIGSEGV */
        QueryType query;           /* default QUERY_NONE */
        usec_t query_timeout;      /* default 2s */
        usec_t heartbeat;          /* default 0 = off */
        usec_t start_timeout;      /* default 0 = off */
        ReadinessSource readiness; /* default QUERY when query is not NONE, else EXEC */

        /* [crash] */
        unsigned crash_restarts;   /* default 1 */
        usec_t crash_window;       /* default 30m */
        bool pre_recovery;         /* default true */

        /* [limits] */
        uint64_t memory_max;       /* bytes; 0 in the file is an error; default (when unset)
                                    * usage_memory + 2 × memory_tolerance, filled in by
                                    * config_load() */
        uint64_t memory_high;      /* limits.memory_high: bytes, UINT64_MAX = off ("max", the
                                    * default) */
        double cpu_max;            /* cores; 0 = off (the default) */
        uint64_t pids_max;         /* default 4096 */
        uint64_t nofile;           /* limits.nofile: RLIMIT_NOFILE of the server, default 65536 */
        uint64_t core_size;        /* limits.core: RLIMIT_CORE, default limits.memory_max */
        unsigned cores_kept;       /* limits.cores_kept: cores kept per slot, default 1 */

        /* [logs] */
        uint64_t log_max_size;     /* logs.max_size: bytes at which the keeper rotates
                                    * server.log, 0 = never; default 64M */
        unsigned log_keep;         /* logs.keep: older files kept, 1 to 99; default 4 */

        /* [security] */
        bool seccomp;              /* security.seccomp: default (true) or off */
        char *seccomp_list;        /* security.seccomp = PATH: allow-list file; NULL = built-in */
        bool seccomp_kill;         /* security.seccomp_action = kill (default eperm) */

        /* The build configurations; [0] is always the default one (fleet.build_configuration),
         * the [build_configuration ID] sections follow in file order. Use
         * fleet_config_find_build() to look one up. */
        BuildConfig *build_configs;
        size_t n_build_configs;

        /* Lines of the keys that later checks (density, config_validate) name in their
         * messages; 0 when the key was not set. */
        unsigned build_line;
        unsigned usage_servers_line;
        unsigned game_port_base_line;
        unsigned query_port_base_line;

        /* Filled in by the density calculation. */
        unsigned slots;
} FleetConfig;

/* metrics.listen when slotd.ini does not set it. */
#define METRICS_LISTEN_DEFAULT "127.0.0.1:8087"

/* One address of localproxy.listen. */
typedef struct ProxyListen {
        int family;                /* AF_INET or AF_INET6 */
        union {
                struct in_addr in;
                struct in6_addr in6;
        } address;
        uint16_t port;             /* host byte order */
        char *text;                /* "127.0.0.1:8086", "[::1]:8086": as inet_ntop() writes it */
} ProxyListen;

/* Parses one "IPv4:port" or "[IPv6]:port"; -EINVAL when it is neither, -ENOMEM. */
int proxy_listen_from_string(const char *s, ProxyListen *ret);

typedef struct LocalProxyConfig {
        bool enabled;              /* false for listen = off */
        ProxyListen *listen;       /* NULL (and n_listen 0) when disabled */
        size_t n_listen;
        bool listen_default;       /* the default addresses, not the key: one the host lacks
                                    * (IPv6 off) is skipped at bind, not fatal */
        usec_t payload_ttl;        /* default 1h, > 0 */
        char *user;                /* default "nobody" */
        char *group;               /* default "nogroup" */
} LocalProxyConfig;

/* [fleet] of slotd.ini: the fleet layer (SPEC §13), read by slotd-registry. */
typedef struct FleetLayerConfig {
        char **etcd_endpoints;     /* "http://127.0.0.1:2379", ...; NULL = the fleet layer is
                                    * off (the default) */
        char *prefix;              /* every key's prefix; default "/slotd/v1" */
        usec_t lease_ttl;          /* whole seconds; default 5s */
        usec_t etcd_timeout;       /* per request to etcd; default 2s */
        char *registry_user;       /* the identity slotd-registry drops to when started as
                                    * root; default "slotd-registry" */
        char *etcd_ca;             /* TLS to etcd (https:// endpoints): the CA that signed
                                    * etcd's certificate; NULL = the system's trust store */
        char *etcd_cert;           /* a client certificate and its key, both or neither */
        char *etcd_key;
} FleetLayerConfig;

typedef struct Config {
        char *config_file;         /* path of slotd.ini (may not exist: then all defaults) */
        char *fleets_dir;          /* path of fleets.d */

        /* [machine] */
        char *machine_id;          /* NULL = read /etc/machine-id at start */
        uint64_t machine_number;   /* machine.number; 0 = from the machine ID
                                    * (machine_number_from_id()) */
        char *ip;                  /* NULL = detect */
        char *ipv6;                /* NULL = empty */
        double cpus;               /* 0 = detect (online CPUs) */
        unsigned cpu_mhz;          /* machine.cpu_mhz: MHz of one core, for usage.speed;
                                    * 0 = detect (cpufreq's cpuinfo_max_freq, /proc/cpuinfo) */
        uint64_t memory;           /* 0 = detect (MemTotal) */
        double reserved_cpus;      /* default 0 */
        uint64_t reserved_memory;  /* default 0 */
        usec_t idle_ttl;           /* default 30m */
        char *region;              /* machine.region: the region this machine is in, NULL =
                                    * none; a .gsh fleet runs here only in the region of
                                    * that name */
        uint16_t game_port_base;   /* machine.game_port_base, machine.query_port_base: where */
        uint16_t query_port_base;  /* the ports of .gsh fleets (which have none) start;
                                    * default 9000 and 9600 */

        /* [supervisor] */
        char *cgroup;              /* NULL = "slots" beside slotd's own leaf cgroup */
        char *state_dir;           /* default /var/lib/slotd */
        char *slots_dir;           /* default <state_dir>/slots, i.e. /var/lib/slotd/slots */
        char *bus;                 /* "system" (default), "session" or a D-Bus address */
        char *admin_group;         /* NULL = root only */
        char *builds_dir;          /* supervisor.builds_dir: where a .gsh file's relative
                                    * builds.NAME.buildPath are; default /srv/slotd/builds */

        /* [localproxy] */
        LocalProxyConfig localproxy; /* default: listen 127.0.0.1:8086 [::1]:8086 */

        /* [fleet] */
        FleetLayerConfig fleet;    /* default: off */

        /* [metrics] */
        ProxyListen metrics_listen; /* metrics.listen, served by the local proxy's process;
                                     * family 0 (AF_UNSPEC) = off; METRICS_LISTEN_DEFAULT */
        bool metrics_listen_default; /* not set: one that cannot be bound is skipped */

        /* Lines of machine.reserved_cpus/reserved_memory for density messages; 0 = not set. */
        unsigned reserved_cpus_line;
        unsigned reserved_memory_line;
        unsigned cpu_mhz_line;           /* 0 = not set */
        unsigned localproxy_listen_line; /* 0 = the default */
        unsigned metrics_listen_line;    /* 0 = not set */

        FleetConfig *fleets;       /* in file-name order */
        size_t n_fleets;

        /* .gsh fleets that run nowhere on this machine (none of their regions is
         * machine.region, or it is offline): one message each, for --check; NULL = none. Their
         * names and files, in the same order: a name is still taken by such a fleet. */
        char **fleets_elsewhere;
        char **fleets_elsewhere_names;
        char **fleets_elsewhere_files;

        /* The fleet layer's reading of .gsh files (slotd-allocator's [scaler] gsh): every
         * fleet is kept, whatever its regions and machine.region; none is "elsewhere". */
        bool gsh_every_region;
} Config;

/* A Config holding every default of slotd.ini and no fleets; NULL on OOM. */
Config *config_new(void);
Config *config_free(Config *c);
/* Frees what a FleetConfig owns and zeroes it (for a FleetConfig moved out of its Config). */
void config_fleet_done(FleetConfig *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(Config *, config_free);

/* The fleet with that fleet.name, or NULL. */
FleetConfig *config_find_fleet(const Config *c, const char *name);

/* The build configuration an allocation asking for id runs: NULL or "" is the fleet's default
 * one. When the fleet has [build_configuration ID] sections, an id that is none of them (nor
 * fleet.build_configuration) is NULL; a fleet without such sections runs its default one for
 * any id (with BUILD_CONFIGURATION set to that id). NULL for a FleetConfig not made by the
 * parser (n_build_configs 0). */
const BuildConfig *fleet_config_find_build(const FleetConfig *f, const char *id);
/* Whether the fleet runs any build configuration ID asked (it has no [build_configuration ID]
 * section); else it runs those of f->build_configs only. */
bool fleet_config_runs_any_build(const FleetConfig *f);

/* Whether servers of a and b run the same: build, args, environment, build_configuration,
 * user, group, port bases, region, and every build configuration (compared by ID, in any
 * order). For Reload: a fleet for which this is false has new servers to start. */
bool fleet_config_build_equal(const FleetConfig *a, const FleetConfig *b);
bool build_config_equal(const BuildConfig *a, const BuildConfig *b);

/* Reads config_file (a missing file is not an error: all defaults) and every *.ini and *.gsh
 * in fleets_dir (a missing directory means no fleets) in name order, validates every key, and
 * fills in defaults. Does not run the density calculation. On error returns a negative errno
 * and, when ret_error is non-NULL, a malloc'd message of the form
 * "FILE:LINE: section.key: what is wrong" (or "FILE: what is wrong" where no line applies; a
 * .gsh file's: every error of it, "FILE:LINE:COLUMN: path.to.key: what is wrong" a line). */
int config_load(const char *config_file, const char *fleets_dir, Config **ret, char **ret_error);

/* The same for an in-memory slotd.ini and fleet files, for tests and fuzzers: 'name' is used
 * in messages and (for fleets) as the default fleet name. config_parse_fleet() appends the
 * fleet only when the whole file is good; config_parse_machine() may leave c half-updated on
 * failure, so discard c then. */
int config_parse_machine(Config *c, const char *name, const char *text, char **ret_error);
int config_parse_fleet(Config *c, const char *name, const char *text, char **ret_error);
/* A Multiplay config-as-code file (.gsh, YAML): appends one FleetConfig per fleets entry that
 * runs on this machine (every entry with c->gsh_every_region), all of them or none. On error every error of the file, one
 * "FILE:LINE:COLUMN: path.to.key: what is wrong" a line, in *ret_error. */
int config_parse_gsh(Config *c, const char *name, const char *text, size_t size,
                     char **ret_error);
/* Cross-fleet validation, done by config_load_full() after the density: unique fleet names,
 * port ranges that do not overlap and fit below 65536 (needs slot counts, so call after
 * density), a build that is an executable regular file. */
int config_validate(Config *c, char **ret_error);

/* Value parsers (SPEC §2): return 0 or -EINVAL/-ERANGE; never touch *ret on failure. */
int parse_duration(const char *s, usec_t *ret);     /* "250ms" "10s" "5m" "1h", bare = s */
int parse_size(const char *s, uint64_t *ret);       /* "512K" "200M" "2G", bare = bytes */
int parse_percent(const char *s, double *ret);      /* "10%" → 0.10 */
int parse_cpu(const char *s, double *ret);          /* "0.5" or "50%" → 0.5 cores, > 0 */
int parse_boolean(const char *s, bool *ret);        /* yes/no true/false on/off 1/0 */
int parse_signal(const char *s, int *ret);          /* "SIGSEGV", "SEGV", "11" */
int parse_port(const char *s, uint16_t *ret);       /* 1..65535 */
int parse_unsigned(const char *s, unsigned *ret);
int parse_uint64(const char *s, uint64_t *ret);
int parse_cores(const char *s, double *ret);        /* like parse_cpu, but 0 is allowed */

/* The machine as the density sees it. */
typedef struct MachineResources {
        double cpus;
        uint64_t memory;
        unsigned cpu_mhz;          /* MHz of one core; 0 = unknown */
} MachineResources;

/* SPEC §2 density. A fleet's servers are bounded by floor(cpus / usage.cpu),
 * floor(memory / usage.memory), floor(cpus × cpu_mhz / usage.speed), floor(usage.max_per_core
 * × cpus) and usage.max_per_machine (cpus and memory after the machine's reservation). Fleets
 * with usage.servers take that many first, in file order (an error when it does not fit). The
 * automatic fleets then share what is left: each gets all it can take alone when that fits
 * beside the others' all; otherwise equal shares of what is left, measured by each fleet's
 * dominant resource, what a fleet capped below its share leaves going to the others, and what
 * the shares' floors leave shared again the same way (density.c). Sets fleets[i].slots (none
 * of them on failure). A fleet that gets no slot is an error naming the fleet's file.
 * machine.cpus/memory/cpu_mhz, when configured, win over m; m may be NULL when they are. */
int density_compute(Config *c, const MachineResources *m, char **ret_error);

/* The arithmetic of density_compute() as --check prints it, one line per fleet after one for
 * the machine; the same error as density_compute() when it fails. */
int density_format(const Config *c, const MachineResources *m, char **ret, char **ret_error);

/* "200M" for a whole number of a unit, "1.5G" otherwise, "512 bytes" below 1K. */
#define FORMAT_BYTES_MAX 32
const char *format_bytes(uint64_t bytes, char buf[static FORMAT_BYTES_MAX]);

/* Online CPUs, MemTotal and the MHz of a core (cpu0's cpufreq cpuinfo_max_freq, else the
 * first "cpu MHz" of /proc/cpuinfo; 0 when neither is there) of this machine. */
int machine_resources_detect(MachineResources *ret);

/* Convenience for the daemon and --check: config_load + detect (or take the configured)
 * machine resources + density + config_validate. 'detected' NULL = machine_resources_detect(). */
int config_load_full(const char *config_file, const char *fleets_dir, const MachineResources *detected,
                     Config **ret, char **ret_error);
/* The same for --check: on an error (but ENOMEM) *ret is still what could be read (every file
 * without an error of its own, its fleets' names and builds checked too), so that the checks
 * of users, groups and builds can go on and a run tells every error; *ret_error has every
 * error found so far, one a line. *ret may be NULL then (a fleets directory unreadable). */
int config_load_for_check(const char *config_file, const char *fleets_dir,
                          const MachineResources *detected, Config **ret, char **ret_error);
