/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <fcntl.h>
#include <glob.h>
#include <netinet/in.h>

#include <inttypes.h>

#include "allocator-config.h"
#include "allocator-request.h"
#include "config-internal.h"
#include "docs.h"
#include "fileio.h"
#include "strv.h"

#define CLAIM_TIMEOUT_MIN (100 * USEC_PER_MSEC)
#define CLAIM_TIMEOUT_MAX (10 * USEC_PER_MINUTE)
#define ETCD_TIMEOUT_MAX (60 * USEC_PER_SEC)
#define FAILED_TTL_MIN (2 * USEC_PER_SEC) /* etcd's shortest lease */
#define FAILED_TTL_MAX (7 * 24 * USEC_PER_HOUR)

static int parse_allocator_listen_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                      void *data) {
        ProxyListen *l = data, parsed = {};
        int r;

        r = proxy_listen_from_string(value, &parsed);
        if (r == -ENOMEM)
                return ctx_oom(ctx);
        if (r < 0)
                return key_error(ctx, k, value, -EINVAL,
                                 "expected one address like 127.0.0.1:8088 or [::1]:8088");
        free(l->text);
        *l = parsed;
        return 0;
}

static int parse_strategy_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                              void *data) {
        PlacementStrategy s = placement_strategy_from_string(value);

        if (s < 0)
                return key_error(ctx, k, value, -EINVAL, "expected packed or distributed");
        *(PlacementStrategy *) data = s;
        return 0;
}

static int parse_timeout_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                             void *data, usec_t min, usec_t max) {
        usec_t v;
        int r;

        r = parse_duration(value, &v);
        if (r < 0)
                return key_error(ctx, k, value, r, "expected a duration like 500ms or 5s");
        if (v < min || v > max)
                return key_error(ctx, k, value, -ERANGE, "must be between %" PRIu64 "ms and %" PRIu64
                                 "s", min / USEC_PER_MSEC, max / USEC_PER_SEC);
        *(usec_t *) data = v;
        return 0;
}

static int parse_claim_timeout_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                   void *data) {
        return parse_timeout_key(ctx, k, value, data, CLAIM_TIMEOUT_MIN, CLAIM_TIMEOUT_MAX);
}

static int parse_etcd_timeout_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                  void *data) {
        return parse_timeout_key(ctx, k, value, data, 10 * USEC_PER_MSEC, ETCD_TIMEOUT_MAX);
}

/* "<projectId>/<environmentId>", separated by spaces or commas: the project environments the
 * allocator serves. */
static int parse_environments_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                  void *data) {
        _cleanup_strv_free_ char **list = NULL;
        char ***p = data;
        const char *w = value;

        for (;;) {
                _cleanup_free_ char *word = NULL, *project = NULL;
                const char *slash;
                size_t n;

                w += strspn(w, " \t,");
                if (*w == '\0')
                        break;
                n = strcspn(w, " \t,");
                word = strndup(w, n);
                if (!word)
                        return ctx_oom(ctx);
                w += n;
                slash = strchr(word, '/');
                project = slash ? strndup(word, slash - word) : NULL;
                if (slash && !project)
                        return ctx_oom(ctx);
                if (!slash || !fleet_key_component_valid(project) ||
                    !fleet_key_component_valid(slash + 1) || strlen(project) > API_ID_MAX ||
                    strlen(slash + 1) > API_ID_MAX)
                        return key_error(ctx, k, value, -EINVAL,
                                         "expected <projectId>/<environmentId> entries, "
                                         "separated by spaces; '%s' is not one", word);
                if (strv_contains(list, word))
                        return key_error(ctx, k, value, -EINVAL, "%s is listed twice", word);
                if (strv_extend(&list, word) < 0)
                        return ctx_oom(ctx);
        }
        if (!list)
                return key_error(ctx, k, value, -EINVAL,
                                 "expected at least one <projectId>/<environmentId>");
        strv_free(*p);
        *p = TAKE_PTR(list);
        return 0;
}

static int parse_failed_ttl_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                void *data) {
        return parse_timeout_key(ctx, k, value, data, FAILED_TTL_MIN, FAILED_TTL_MAX);
}

static int parse_scaler_targets_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                    void *data) {
        ScalerTargets *t = data, parsed = {};
        _cleanup_free_ char *error = NULL;
        int r;

        r = scaler_targets_parse(value, &parsed.targets, &parsed.n, &error);
        if (r == -ENOMEM)
                return ctx_oom(ctx);
        if (r < 0)
                return key_error(ctx, k, value, r, "%s; expected FLEET[/REGION] buffer=N "
                                 "floor=N ceiling=N; …", error ? error : "malformed");
        scaler_targets_done(t);
        *t = parsed;
        return 0;
}

/* Absolute paths and glob(7) patterns of .gsh files, separated by blanks. */
static int parse_scaler_gsh_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                void *data) {
        _cleanup_strv_free_ char **list = NULL;
        char ***p = data;

        for (const char *w = value + strspn(value, " \t");; w += strspn(w, " \t")) {
                _cleanup_free_ char *word = NULL;
                size_t n = strcspn(w, " \t");

                if (n == 0)
                        break;
                word = strndup(w, n);
                if (!word)
                        return ctx_oom(ctx);
                w += n;
                if (word[0] != '/')
                        return key_error(ctx, k, value, -EINVAL, "expected absolute paths or "
                                         "patterns of .gsh files; '%s' is not one", word);
                if (strv_contains(list, word))
                        continue;
                if (strv_push(&list, word) < 0)
                        return ctx_oom(ctx);
                word = NULL; /* the list holds it */
        }
        if (!list)
                return key_error(ctx, k, value, -EINVAL, "expected a .gsh file's path");
        strv_free(*p);
        *p = TAKE_PTR(list);
        return 0;
}

static int parse_scaler_interval_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                     void *data) {
        return parse_timeout_key(ctx, k, value, data, 10 * USEC_PER_MSEC, USEC_PER_MINUTE);
}

#define KEY(s, n, parser, field) { s, n, parser, offsetof(AllocatorConfig, field), false }

static const ConfigKey allocator_keys[] = {
        KEY("allocator", "listen", parse_allocator_listen_key, listen),
        KEY("allocator", "user", parse_string_key, user),
        KEY("allocator", "token_file", parse_path_key, token_file),
        KEY("allocator", "tls_cert", parse_path_key, tls_cert),
        KEY("allocator", "tls_key", parse_path_key, tls_key),
        KEY("allocator", "tls_client_ca", parse_path_key, tls_client_ca),
        KEY("allocator", "claim_timeout", parse_claim_timeout_key, claim_timeout),
        KEY("allocator", "strategy", parse_strategy_key, strategy),
        KEY("allocator", "environments", parse_environments_key, environments),
        KEY("allocator", "failed_ttl", parse_failed_ttl_key, failed_ttl),
        KEY("etcd", "endpoints", parse_etcd_endpoints_key, etcd_endpoints),
        KEY("etcd", "prefix", parse_etcd_prefix_key, prefix),
        KEY("etcd", "timeout", parse_etcd_timeout_key, etcd_timeout),
        KEY("etcd", "ca_file", parse_path_key, etcd_ca),
        KEY("etcd", "cert_file", parse_path_key, etcd_cert),
        KEY("etcd", "key_file", parse_path_key, etcd_key),
        KEY("scaler", "targets", parse_scaler_targets_key, scaler_targets),
        KEY("scaler", "gsh", parse_scaler_gsh_key, scaler_gsh),
        KEY("scaler", "interval", parse_scaler_interval_key, scaler_interval),
};

_Static_assert(ELEMENTSOF(allocator_keys) <= KEYS_MAX, "raise KEYS_MAX");

static const ConfigSchema allocator_schema = {
        .keys = allocator_keys,
        .n_keys = ELEMENTSOF(allocator_keys),
        .sections = "allocator.ini has [allocator], [etcd] and [scaler]",
};

AllocatorConfig *allocator_config_free(AllocatorConfig *c) {
        if (!c)
                return NULL;
        free(c->config_file);
        free(c->listen.text);
        free(c->user);
        free(c->token_file);
        free(c->tls_cert);
        free(c->tls_key);
        free(c->tls_client_ca);
        strv_free(c->environments);
        strv_free(c->etcd_endpoints);
        free(c->prefix);
        free(c->etcd_ca);
        free(c->etcd_cert);
        free(c->etcd_key);
        scaler_targets_done(&c->scaler_targets);
        strv_free(c->scaler_gsh);
        strv_free(c->scaler_notes);
        return mfree(c);
}

static AllocatorConfig *allocator_config_new(void) {
        _cleanup_(allocator_config_freep) AllocatorConfig *c = new0(AllocatorConfig, 1);

        if (!c)
                return NULL;
        c->claim_timeout = 5 * USEC_PER_SEC;
        c->etcd_timeout = 2 * USEC_PER_SEC;
        c->strategy = PLACEMENT_PACKED;
        c->failed_ttl = 10 * USEC_PER_MINUTE;
        c->scaler_interval = USEC_PER_SEC;
        c->user = strdup("slotd-allocator");
        c->prefix = strdup(FLEET_PREFIX_DEFAULT);
        if (!c->user || !c->prefix || proxy_listen_from_string(ALLOCATOR_LISTEN_DEFAULT,
                                                              &c->listen) < 0)
                return NULL;
        return TAKE_PTR(c);
}

bool allocator_serves(const AllocatorConfig *c, const char *project, const char *environment) {
        size_t n = strlen(project);

        if (!c->environments)
                return true;
        STRV_FOREACH(e, c->environments)
                if (strncasecmp(*e, project, n) == 0 && (*e)[n] == '/' &&
                    (!environment || strcasecmp(*e + n + 1, environment) == 0))
                        return true;
        return false;
}

bool allocator_listen_is_loopback(const ProxyListen *l) {
        if (l->family == AF_INET)
                return (ntohl(l->address.in.s_addr) >> 24) == 127;
        return l->family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&l->address.in6);
}

/* TLS files beside a plain http:// endpoint are a typo that would send the fleet's traffic in
 * clear text: refused rather than ignored (as slotd.ini's fleet.etcd_ca... are). */
static int check_etcd_tls(ParseContext *ctx, const AllocatorConfig *c) {
        const char *key = c->etcd_ca ? "ca_file" : "cert_file";

        if (!c->etcd_ca && !c->etcd_cert)
                return 0;
        STRV_FOREACH(e, c->etcd_endpoints)
                if (strncmp(*e, "http://", 7) == 0)
                        return ctx_error(ctx, -EINVAL, key_line(ctx, "etcd", key), NULL,
                                         "etcd.%s: TLS to etcd needs https:// endpoints, but "
                                         "etcd.endpoints has %s", key, *e);
        return 0;
}

/* Where allocator.ini's targets are, for --check and the log beside the .gsh files'. */
static int scaler_targets_origins(ParseContext *ctx, AllocatorConfig *c) {
        _cleanup_free_ char *origin = NULL;

        if (c->scaler_targets.n == 0)
                return 0;
        if (asprintf(&origin, "%s:%u: scaler.targets", ctx->file,
                     key_line(ctx, "scaler", "targets")) < 0)
                return ctx_oom(ctx);
        for (size_t i = 0; i < c->scaler_targets.n; i++)
                if (strv_extend(&c->scaler_targets.origins, origin) < 0)
                        return ctx_oom(ctx);
        return 0;
}

/* What no single key can tell: keys that go together, and authentication off the loopback. */
static int allocator_config_check(ParseContext *ctx, AllocatorConfig *c) {
        unsigned line;
        int r;

        if (!c->etcd_endpoints)
                return ctx_error(ctx, -EINVAL, key_line(ctx, "etcd", "endpoints"), NULL,
                                 "etcd.endpoints: required: the etcd cluster's client URLs, "
                                 "like http://127.0.0.1:2379");
        if (!!c->tls_cert != !!c->tls_key) {
                line = key_line(ctx, "allocator", c->tls_cert ? "tls_cert" : "tls_key");
                return ctx_error(ctx, -EINVAL, line, NULL,
                                 "allocator.tls_cert and allocator.tls_key go together: set both "
                                 "for HTTPS, or neither");
        }
        if (c->tls_client_ca && !c->tls_cert)
                return ctx_error(ctx, -EINVAL, key_line(ctx, "allocator", "tls_client_ca"), NULL,
                                 "allocator.tls_client_ca (mutual TLS) needs HTTPS: set "
                                 "allocator.tls_cert and allocator.tls_key");
        if (!!c->etcd_cert != !!c->etcd_key)
                return ctx_error(ctx, -EINVAL,
                                 key_line(ctx, "etcd", c->etcd_cert ? "cert_file" : "key_file"),
                                 NULL, "etcd.cert_file and etcd.key_file go together");
        r = check_etcd_tls(ctx, c);
        if (r < 0)
                return r;
        r = scaler_targets_origins(ctx, c);
        if (r < 0)
                return r;
        if (!allocator_listen_is_loopback(&c->listen) && !c->token_file && !c->tls_client_ca)
                return ctx_error(ctx, -EPERM, key_line(ctx, "allocator", "listen"), c->listen.text,
                                 "allocator.listen: not a loopback address, and no "
                                 "authentication is configured: set allocator.token_file "
                                 "(a bearer token) or allocator.tls_client_ca (mutual TLS)");
        return 0;
}

int allocator_config_parse(const char *name, const char *text, size_t size,
                           AllocatorConfig **ret, char **ret_error) {
        _cleanup_(allocator_config_freep) AllocatorConfig *c = allocator_config_new();
        ParseContext ctx = {
                .file = name,
                .schema = &allocator_schema,
                .data = text,
                .size = size,
        };
        int r;

        if (!c || !(c->config_file = strdup(name)))
                return -ENOMEM;
        ctx.base = c;
        r = parse_context_run(&ctx);
        if (r >= 0)
                r = allocator_config_check(&ctx, c);
        r = parse_context_finish(&ctx, r, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

int allocator_config_add_gsh(AllocatorConfig *c, const Config *gsh) {
        _cleanup_(scaler_targets_done) ScalerTargets t = {};
        int r;

        r = scaler_targets_from_gsh(gsh, &t, &c->scaler_notes);
        if (r >= 0)
                r = scaler_targets_merge(&c->scaler_targets, &t, &c->scaler_notes);
        return r;
}

/* One file into gsh (every error of it in *ret_error). */
static int read_gsh_file(Config *gsh, const char *path, char **ret_error) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        _cleanup_free_ char *text = NULL;
        size_t size;
        int r;

        if (fd < 0)
                return config_set_error(ret_error, negative_errno(), path, 0,
                                        "cannot open (scaler.gsh): %m");
        r = read_full_fd(fd, CONFIG_FILE_SIZE_MAX, &text, &size);
        if (r < 0)
                return config_set_error(ret_error, r, path, 0, "cannot read (scaler.gsh): %m");
        return config_parse_gsh(gsh, path, text, size, ret_error);
}

/* [scaler] gsh: each path, or each file a pattern matches (none: a note), in name order. */
static int load_gsh(AllocatorConfig *c, char **ret_error) {
        _cleanup_(config_freep) Config *gsh = config_new();
        _cleanup_strv_free_ char **files = NULL;
        int r;

        if (!gsh)
                return -ENOMEM;
        gsh->gsh_every_region = true;
        STRV_FOREACH(p, c->scaler_gsh) {
                glob_t g = {};

                if (!strpbrk(*p, "*?[")) {
                        r = strv_contains(files, *p) ? 0 : strv_extend(&files, *p);
                } else if ((r = glob(*p, GLOB_ERR, NULL, &g)) == GLOB_NOMATCH) {
                        char *note = NULL;
                        r = asprintf(&note, "%s: scaler.gsh: %s matches no file", c->config_file,
                                     *p) < 0 ? -ENOMEM : strv_push(&c->scaler_notes, note);
                        if (r < 0)
                                free(note);
                } else if (r != 0) {
                        r = config_set_error(ret_error, -EIO, c->config_file, 0,
                                             "scaler.gsh: cannot list %s", *p);
                } else
                        for (size_t i = 0; i < g.gl_pathc && r >= 0; i++)
                                r = strv_contains(files, g.gl_pathv[i]) ? 0 :
                                    strv_extend(&files, g.gl_pathv[i]);
                globfree(&g);
                if (r < 0)
                        return r;
        }
        STRV_FOREACH(f, files) {
                r = read_gsh_file(gsh, *f, ret_error);
                if (r < 0)
                        return r;
        }
        return allocator_config_add_gsh(c, gsh);
}

int allocator_config_load(const char *path, AllocatorConfig **ret, char **ret_error) {
        _cleanup_(allocator_config_freep) AllocatorConfig *c = NULL;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        _cleanup_free_ char *text = NULL;
        size_t size;
        int r;

        if (fd < 0)
                return config_set_error(ret_error, negative_errno(), path, 0, "cannot open: %m");
        r = read_full_fd(fd, CONFIG_FILE_SIZE_MAX, &text, &size);
        if (r < 0)
                return config_set_error(ret_error, r, path, 0, "cannot read: %m");
        r = allocator_config_parse(path, text, size, &c, ret_error);
        if (r >= 0 && c->scaler_gsh)
                r = load_gsh(c, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}
