/* SPDX-License-Identifier: MIT */
#pragma once

/* slotd-allocator's configuration (SPEC §13): /etc/slotd/allocator.ini, read with slotd's own
 * INI reader (config/), so that its messages read alike: "FILE:LINE: section.key: what is
 * wrong (got 'VALUE')". */

#include "config.h"
#include "placement.h"
#include "scaler-gsh.h"
#include "slotd-config.h"
#include "time-util.h"

#define ALLOCATOR_CONFIG_FILE SLOTD_SYSCONFDIR "/allocator.ini"
#define ALLOCATOR_LISTEN_DEFAULT "127.0.0.1:8088"

typedef struct AllocatorConfig {
        char *config_file;

        /* [allocator] */
        ProxyListen listen;        /* default 127.0.0.1:8088 */
        char *user;                /* dropped to when started as root; default slotd-allocator */
        char *token_file;          /* the bearer token; NULL = none */
        char *tls_cert;            /* HTTPS: certificate and key (both or neither) */
        char *tls_key;
        char *tls_client_ca;       /* mutual TLS: clients must present a certificate of it */
        usec_t claim_timeout;      /* default 5 s */
        PlacementStrategy strategy; /* default packed */
        char **environments;       /* "<projectId>/<environmentId>" served; NULL = every one */
        usec_t failed_ttl;         /* a failed allocation's record kept so long; default 10 min */

        /* [etcd] */
        char **etcd_endpoints;     /* required */
        char *prefix;              /* default /slotd/v1 */
        usec_t etcd_timeout;       /* per request; default 2 s */
        char *etcd_ca;             /* TLS to etcd; NULL = none */
        char *etcd_cert;
        char *etcd_key;

        /* [scaler] (SPEC §13, "The scaler") */
        ScalerTargets scaler_targets; /* targets, then the .gsh regions' (scaler-gsh.h); none:
                                       * the replica does not stand for election */
        char **scaler_gsh;            /* gsh: absolute paths and glob(7) patterns of .gsh
                                       * files; NULL = none */
        char **scaler_notes;          /* what the .gsh files gave no target for, and the
                                       * targets allocator.ini replaced: for the log */
        usec_t scaler_interval;       /* the least time between two plans; default 1 s */
} AllocatorConfig;

AllocatorConfig *allocator_config_free(AllocatorConfig *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(AllocatorConfig *, allocator_config_free);

/* Parses text (named name in messages) into a new config with defaults for what it does not
 * set, and checks the whole: -EINVAL etc. with *ret_error "FILE:LINE: ..." on failure. */
int allocator_config_parse(const char *name, const char *text, size_t size,
                           AllocatorConfig **ret, char **ret_error);
/* The same, from a file, then the .gsh files of [scaler] gsh (allocator_config_add_gsh()):
 * their errors are "FILE:LINE:COLUMN: path.to.key: what is wrong", one a line. */
int allocator_config_load(const char *path, AllocatorConfig **ret, char **ret_error);

/* The scaler's targets of the .gsh fleets of gsh (read by config_parse_gsh() with
 * gsh->gsh_every_region), under allocator.ini's own (scaler-gsh.h's rule); notes in
 * c->scaler_notes. 0 or -ENOMEM. */
int allocator_config_add_gsh(AllocatorConfig *c, const Config *gsh);

/* Whether the allocator serves the project's environment (IDs compared without case: a UUID
 * is lowercased on the way in); environment NULL: whether it serves any of the project's. */
bool allocator_serves(const AllocatorConfig *c, const char *project, const char *environment);

/* Whether the listen address is loopback (127.0.0.0/8, ::1). */
bool allocator_listen_is_loopback(const ProxyListen *l);
