/* SPDX-License-Identifier: MIT */
#pragma once

/* What gsh-map.c (the file, builds and build configurations) and gsh-fleet.c (fleets) share
 * while one .gsh file is mapped. */

#include "config-internal.h"
#include "gsh.h"

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
        bool ok;                   /* mapped without error: fleets may copy it */
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
        char **elsewhere;          /* fleets that run nowhere here: why, and their names */
        char **elsewhere_names;
} GshMap;

/* Records "FILE:LINE:COLUMN: PATH: BODY" at (line, column); always -EINVAL (-ENOMEM with
 * m->oom set). */
_printf_(5, 6)
int gsh_error_at(GshMap *m, unsigned line, unsigned column, const char *path, const char *fmt,
                 ...);
/* An error about a value: where it is. */
#define gsh_error(m, node, path, ...) \
        gsh_error_at(m, (node)->line, (node)->column, path, __VA_ARGS__)
/* An error about a key itself (unknown, not allowed here): at the key. */
#define gsh_key_error(m, node, path, ...) \
        gsh_error_at(m, (node)->key_line, (node)->key_column, path, __VA_ARGS__)

int gsh_expect(GshMap *m, const GshNode *n, const char *path, GshNodeType t);
/* "PATH.KEY" (or "PATH[I]" with key NULL) for messages; NULL on OOM, with m->oom set. */
char *gsh_path(GshMap *m, const char *path, const char *key, size_t index);
/* The keys of map must be among allowed (NULL-terminated); each other one is an error. */
int gsh_check_keys(GshMap *m, const GshNode *map, const char *path, const char *const *allowed,
               const char *which);
int gsh_get_string(GshMap *m, const GshNode *n, const char *path, bool empty_ok, char **ret);
int gsh_get_unsigned(GshMap *m, const GshNode *n, const char *path, unsigned min, unsigned max,
                 unsigned *ret);
int gsh_get_bool(GshMap *m, const GshNode *n, const char *path, bool *ret);
const GshBuildConfig *gsh_find_build_config(const GshMap *m, const char *name);

/* A Multiplay name (free text: "EU Fleet", "my build configuration") as a slotd name (SPEC
 * §2, "Multiplay config-as-code"): each run of characters other than A-Z a-z 0-9 _ . (and :
 * with colon) becomes one '-', leading '.' and '-' and trailing '-' are dropped, and at most
 * max bytes are kept. NULL when nothing is left or on OOM. Pure. */
char *gsh_name_to_id(const char *name, size_t max, bool colon);

/* This machine's CPU as Unity's FleetDefinition.architecture names it (multiplayer 1.2: Amd64,
 * Arm64); NULL for any other. slotd runs on the machine it is built for. */
#if defined(__x86_64__)
#  define GSH_MACHINE_ARCHITECTURE "AMD64"
#elif defined(__aarch64__)
#  define GSH_MACHINE_ARCHITECTURE "ARM64"
#else
#  define GSH_MACHINE_ARCHITECTURE NULL
#endif

/* gsh-fleet.c: fleets.NAME; 1 with *f filled when the fleet runs on this machine, 0 when
 * elsewhere (why is in m->elsewhere), < 0 on errors. */
int gsh_map_fleet(GshMap *m, const GshNode *n, FleetConfig *f);
