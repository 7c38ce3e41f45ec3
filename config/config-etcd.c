/* SPDX-License-Identifier: MIT */
/* slotd.ini's [fleet] section: where the fleet layer's etcd is and how the registry uses it
 * (SPEC §2, §13). */
#include "config-internal.h"
#include "endpoint-url.h"
#include "strv.h"

#define ENDPOINTS_MAX 16
#define ENDPOINT_EXAMPLE "http://127.0.0.1:2379 or https://[::1]:2379"
#define PREFIX_MAX 128
#define LEASE_TTL_MAX (3600 * USEC_PER_SEC)

/* SPEC §13's form of an etcd client URL (endpoint-url.h). */
bool etcd_endpoint_is_valid(const char *s) {
        EndpointURL u;

        return endpoint_url_parse(s, &u) >= 0;
}

/* fleet.etcd_endpoints: a comma-separated list; empty turns the fleet layer off. */
int parse_etcd_endpoints_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                             void *data) {
        _cleanup_strv_free_ char **list = NULL;
        char ***p = data;
        char q[QUOTE_BUF];
        const char *w = value;

        while (*w) {
                size_t n = strcspn(w, ",");
                _cleanup_free_ char *word = strndup(w, n);
                char *start, *end;

                if (!word)
                        return ctx_oom(ctx);
                for (start = word; *start == ' ' || *start == '\t'; start++)
                        ;
                for (end = start + strlen(start); end > start && (end[-1] == ' ' || end[-1] == '\t');)
                        *--end = '\0';
                if (!etcd_endpoint_is_valid(start))
                        return key_error(ctx, k, value, -EINVAL,
                                         "expected comma-separated URLs like %s; '%s' is not",
                                         ENDPOINT_EXAMPLE, config_quote(start, q));
                if (strv_contains(list, start))
                        return key_error(ctx, k, value, -EINVAL, "%s is listed twice", start);
                if (strv_length(list) >= ENDPOINTS_MAX)
                        return key_error(ctx, k, value, -E2BIG, "at most %d endpoints",
                                         ENDPOINTS_MAX);
                if (strv_extend(&list, start) < 0)
                        return ctx_oom(ctx);
                w += n;
                if (*w == ',')
                        w++;
        }

        strv_free(*p);
        *p = TAKE_PTR(list); /* NULL for an empty value: off */
        return 0;
}

/* fleet.prefix: an absolute key prefix without a trailing slash, so that
 * "<prefix>/machines/<id>" has no empty segment. */
int parse_etcd_prefix_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        static const char chars[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._-";
        size_t n = strlen(value);

        if (value[0] != '/' || n < 2 || n > PREFIX_MAX || value[n - 1] == '/' ||
            strstr(value, "//") || strspn(value, chars) != n)
                return key_error(ctx, k, value, -EINVAL,
                                 "expected a key prefix like /slotd/v1: a leading '/', at most "
                                 "%d characters of A-Z a-z 0-9 / . _ -, no empty segment and no "
                                 "trailing '/'", PREFIX_MAX);
        return store_string(ctx, data, value);
}

/* fleet.lease_ttl: etcd counts a lease's TTL in whole seconds. */
int parse_lease_ttl_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        usec_t v;
        int r;

        r = parse_duration(value, &v);
        if (r < 0)
                return key_error(ctx, k, value, r, "expected a duration like 5s");
        if (v < USEC_PER_SEC || v > LEASE_TTL_MAX || v % USEC_PER_SEC != 0)
                return key_error(ctx, k, value, -ERANGE,
                                 "must be a whole number of seconds between 1s and 1h");
        *(usec_t *) data = v;
        return 0;
}

/* fleet.etcd_ca, etcd_cert, etcd_key: libcurl opens them on every new connection to etcd, as
 * the registry's user, so a path relative to some working directory would mean nothing. Empty
 * is the same as unset. */
int parse_etcd_file_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        char **p = data;

        if (isempty(value)) {
                *p = mfree(*p);
                return 0;
        }
        return parse_path_key(ctx, k, value, data);
}

int fleet_layer_check(ParseContext *ctx, const FleetLayerConfig *f) {
        const char *tls = f->etcd_ca ? "etcd_ca" : f->etcd_cert ? "etcd_cert" : "etcd_key";

        if (!!f->etcd_cert != !!f->etcd_key) {
                const char *set = f->etcd_cert ? "etcd_cert" : "etcd_key";

                return ctx_error(ctx, -EINVAL, key_line(ctx, "fleet", set), NULL,
                                 "fleet.%s: set without fleet.%s: a client certificate and its "
                                 "key go together (set both, or neither)",
                                 set, f->etcd_cert ? "etcd_key" : "etcd_cert");
        }
        if (!f->etcd_ca && !f->etcd_cert)
                return 0;
        /* TLS files beside a plain http:// endpoint are a typo that would send the fleet's
         * traffic in clear text: refused rather than ignored. */
        STRV_FOREACH(e, f->etcd_endpoints)
                if (strncmp(*e, "http://", 7) == 0)
                        return ctx_error(ctx, -EINVAL, key_line(ctx, "fleet", tls), NULL,
                                         "fleet.%s: TLS to etcd needs https:// endpoints, but "
                                         "fleet.etcd_endpoints has %s", tls, *e);
        return 0;
}

int fleet_layer_init(FleetLayerConfig *f) {
        *f = (FleetLayerConfig){
                .prefix = strdup("/slotd/v1"),
                .registry_user = strdup("slotd-registry"),
                .lease_ttl = 5 * USEC_PER_SEC,
                .etcd_timeout = 2 * USEC_PER_SEC,
        };
        return f->prefix && f->registry_user ? 0 : -ENOMEM;
}

void fleet_layer_done(FleetLayerConfig *f) {
        f->etcd_endpoints = strv_free(f->etcd_endpoints);
        f->prefix = mfree(f->prefix);
        f->registry_user = mfree(f->registry_user);
        f->etcd_ca = mfree(f->etcd_ca);
        f->etcd_cert = mfree(f->etcd_cert);
        f->etcd_key = mfree(f->etcd_key);
}
