/* SPDX-License-Identifier: MIT */
/* slotd.ini: the machine, the supervisor and the local proxy. */
#include <arpa/inet.h>

#include "config-internal.h"
#include "machine-number.h"
#include "strv.h"

#define LISTEN_EXAMPLE "addresses like 127.0.0.1:8086 or [::1]:8086, or off"

int proxy_listen_from_string(const char *s, ProxyListen *ret) {
        char address[INET6_ADDRSTRLEN];
        const char *start = s, *end;
        ProxyListen l = {};
        size_t n;

        /* An IPv6 address is full of colons: the brackets say where it ends. */
        if (s[0] == '[') {
                start = s + 1;
                end = strchr(start, ']');
                if (!end || end[1] != ':')
                        return -EINVAL;
                l.family = AF_INET6;
        } else {
                end = strchr(s, ':');
                if (!end)
                        return -EINVAL;
                l.family = AF_INET;
        }
        n = (size_t) (end - start);
        if (n == 0 || n >= sizeof(address))
                return -EINVAL;
        memcpy(address, start, n);
        address[n] = '\0';
        if (inet_pton(l.family, address, &l.address) != 1)
                return -EINVAL;
        if (parse_port(end + (l.family == AF_INET6 ? 2 : 1), &l.port) < 0)
                return -EINVAL;

        if (!inet_ntop(l.family, &l.address, address, sizeof(address)))
                return -EINVAL;
        if (asprintf(&l.text, l.family == AF_INET6 ? "[%s]:%u" : "%s:%u", address,
                     (unsigned) l.port) < 0)
                return -ENOMEM;
        *ret = l;
        return 0;
}

static void localproxy_listen_done(LocalProxyConfig *p) {
        for (size_t i = 0; i < p->n_listen; i++)
                free(p->listen[i].text);
        p->listen = mfree(p->listen);
        p->n_listen = 0;
}

/* Two sockets cannot listen on the same port of the same address, and a wildcard address
 * (0.0.0.0, ::) takes the port on every address of its family. */
bool proxy_listen_overlaps(const ProxyListen *a, const ProxyListen *b) {
        static const uint8_t any[sizeof(struct in6_addr)];
        size_t n = a->family == AF_INET ? sizeof(struct in_addr) : sizeof(struct in6_addr);

        if (a->family != b->family || a->port != b->port)
                return false;
        return memcmp(&a->address, &b->address, n) == 0 || memcmp(&a->address, any, n) == 0 ||
               memcmp(&b->address, any, n) == 0;
}

static int listen_add(ParseContext *ctx, const ConfigKey *k, const char *value,
                      LocalProxyConfig *p, const char *word) {
        ProxyListen *l = &p->listen[p->n_listen];
        char q[QUOTE_BUF];
        int r;

        r = proxy_listen_from_string(word, l);
        if (r == -ENOMEM)
                return ctx_oom(ctx);
        if (r < 0 || streq(word, "off"))
                return key_error(ctx, k, value, -EINVAL, "expected %s; '%s' is not",
                                 LISTEN_EXAMPLE, config_quote(word, q));
        p->n_listen++;

        for (size_t i = 0; i + 1 < p->n_listen; i++) {
                const ProxyListen *other = &p->listen[i];

                if (streq(other->text, l->text))
                        return key_error(ctx, k, value, -EINVAL, "%s is listed twice", l->text);
                if (proxy_listen_overlaps(other, l))
                        return key_error(ctx, k, value, -EADDRINUSE,
                                         "%s and %s overlap: a wildcard address takes its port "
                                         "on every address", other->text, l->text);
        }
        return 0;
}

/* localproxy.listen: "off", or addresses separated by spaces. */
static int parse_listen_key(ParseContext *ctx, const ConfigKey *k, const char *value, void *data) {
        LocalProxyConfig *p = container_of((ProxyListen **) data, LocalProxyConfig, listen);
        _cleanup_(localproxy_listen_done) LocalProxyConfig parsed = {};
        _cleanup_strv_free_ char **words = NULL;
        size_t n;
        int r;

        if (!streq(value, "off")) {
                r = strv_split_quoted(value, &words);
                if (r == -ENOMEM)
                        return ctx_oom(ctx);
                n = r < 0 ? 0 : strv_length(words);
                if (n == 0 || n > LISTEN_MAX)
                        return key_error(ctx, k, value, -EINVAL, "expected 1 to %d %s",
                                         LISTEN_MAX, LISTEN_EXAMPLE);
                parsed.listen = calloc(n, sizeof(ProxyListen));
                if (!parsed.listen)
                        return ctx_oom(ctx);
                for (size_t i = 0; i < n; i++) {
                        r = listen_add(ctx, k, value, &parsed, words[i]);
                        if (r < 0)
                                return r;
                }
        }

        localproxy_listen_done(p);
        p->listen = TAKE_PTR(parsed.listen);
        p->n_listen = parsed.n_listen;
        parsed.n_listen = 0;
        p->enabled = p->n_listen > 0;
        p->listen_default = false;
        return 0;
}

/* metrics.listen: "off", or one address; served by the local proxy's process (SPEC §14). */
static int parse_metrics_listen_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                   void *data) {
        ProxyListen *l = data, parsed = {};
        char q[QUOTE_BUF];
        int r;

        if (!streq(value, "off")) {
                r = proxy_listen_from_string(value, &parsed);
                if (r == -ENOMEM)
                        return ctx_oom(ctx);
                if (r < 0)
                        return key_error(ctx, k, value, -EINVAL,
                                         "expected one address like 127.0.0.1:9187 or "
                                         "[::1]:9187, or off; '%s' is not",
                                         config_quote(value, q));
        }
        free(l->text);
        *l = parsed;
        container_of(l, Config, metrics_listen)->metrics_listen_default = false;
        return 0;
}

static int localproxy_init(LocalProxyConfig *p) {
        static const char *const defaults[] = { "127.0.0.1:8086", "[::1]:8086" };
        int r;

        p->listen = calloc(ELEMENTSOF(defaults), sizeof(ProxyListen));
        p->user = strdup("nobody");
        p->group = strdup("nogroup");
        if (!p->listen || !p->user || !p->group)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(defaults); i++) {
                r = proxy_listen_from_string(defaults[i], &p->listen[i]);
                if (r < 0)
                        return r;
                p->n_listen++;
        }
        p->enabled = true;
        p->listen_default = true;
        p->payload_ttl = USEC_PER_HOUR;
        return 0;
}

/* machine.number: what Unity's SDKs can read as server.json's machineID (machine-number.h). */
static int parse_machine_number_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                    void *data) {
        int r = machine_number_parse(value, data);

        if (r == -ERANGE)
                return key_error(ctx, k, value, r,
                                 "must be from 1 to 9223372036854775807 (Unity's SDKs read "
                                 "it as a 64-bit signed integer)");
        if (r < 0)
                return key_error(ctx, k, value, r,
                                 "expected %s, which Unity's SDKs read as an integer",
                                 MACHINE_NUMBER_RULE);
        return 0;
}

/* machine.region: matched against the region names of .gsh fleets, which Multiplay names in
 * words ("North America"). */
static int parse_machine_region_key(ParseContext *ctx, const ConfigKey *k, const char *value,
                                    void *data) {
        if (isempty(value) || strlen(value) > REGION_MAX || !text_is_printable(value))
                return key_error(ctx, k, value, -EINVAL,
                                 "expected 1 to %d bytes without control characters",
                                 REGION_MAX);
        return store_string(ctx, data, value);
}

#define MACHINE_KEY(s, n, parser, field, nz) { s, n, parser, offsetof(Config, field), nz }

static const ConfigKey machine_keys[] = {
        MACHINE_KEY("machine", "id", parse_string_key, machine_id, false),
        MACHINE_KEY("machine", "number", parse_machine_number_key, machine_number, false),
        MACHINE_KEY("machine", "ip", parse_ipv4_key, ip, false),
        MACHINE_KEY("machine", "ipv6", parse_ipv6_key, ipv6, false),
        MACHINE_KEY("machine", "cpus", parse_cores_key, cpus, true),
        MACHINE_KEY("machine", "cpu_mhz", parse_positive_key, cpu_mhz, false),
        MACHINE_KEY("machine", "memory", parse_size_key, memory, true),
        MACHINE_KEY("machine", "reserved_cpus", parse_cores_key, reserved_cpus, false),
        MACHINE_KEY("machine", "reserved_memory", parse_size_key, reserved_memory, false),
        MACHINE_KEY("machine", "idle_ttl", parse_duration_key, idle_ttl, true),
        MACHINE_KEY("machine", "region", parse_machine_region_key, region, false),
        MACHINE_KEY("machine", "game_port_base", parse_port_key, game_port_base, false),
        MACHINE_KEY("machine", "query_port_base", parse_port_key, query_port_base, false),
        MACHINE_KEY("supervisor", "cgroup", parse_path_key, cgroup, false),
        MACHINE_KEY("supervisor", "state_dir", parse_path_key, state_dir, false),
        MACHINE_KEY("supervisor", "slots_dir", parse_path_key, slots_dir, false),
        MACHINE_KEY("supervisor", "bus", parse_string_key, bus, false),
        MACHINE_KEY("supervisor", "admin_group", parse_string_key, admin_group, false),
        MACHINE_KEY("supervisor", "builds_dir", parse_path_key, builds_dir, false),
        MACHINE_KEY("localproxy", "listen", parse_listen_key, localproxy.listen, false),
        MACHINE_KEY("localproxy", "payload_ttl", parse_duration_key, localproxy.payload_ttl, true),
        MACHINE_KEY("localproxy", "user", parse_string_key, localproxy.user, false),
        MACHINE_KEY("localproxy", "group", parse_string_key, localproxy.group, false),
        MACHINE_KEY("metrics", "listen", parse_metrics_listen_key, metrics_listen, false),
        MACHINE_KEY("fleet", "etcd_endpoints", parse_etcd_endpoints_key, fleet.etcd_endpoints, false),
        MACHINE_KEY("fleet", "prefix", parse_etcd_prefix_key, fleet.prefix, false),
        MACHINE_KEY("fleet", "lease_ttl", parse_lease_ttl_key, fleet.lease_ttl, true),
        MACHINE_KEY("fleet", "etcd_timeout", parse_duration_key, fleet.etcd_timeout, true),
        MACHINE_KEY("fleet", "registry_user", parse_string_key, fleet.registry_user, false),
        MACHINE_KEY("fleet", "etcd_ca", parse_etcd_file_key, fleet.etcd_ca, false),
        MACHINE_KEY("fleet", "etcd_cert", parse_etcd_file_key, fleet.etcd_cert, false),
        MACHINE_KEY("fleet", "etcd_key", parse_etcd_file_key, fleet.etcd_key, false),
};

_Static_assert(ELEMENTSOF(machine_keys) <= KEYS_MAX, "raise KEYS_MAX");

static const ConfigSchema machine_schema = {
        .keys = machine_keys,
        .n_keys = ELEMENTSOF(machine_keys),
        .sections = "slotd.ini has [machine], [supervisor], [localproxy], [fleet] and [metrics]",
};

Config *config_new(void) {
        _cleanup_(config_freep) Config *c = NULL;

        c = calloc(1, sizeof(Config));
        if (!c)
                return NULL;

        c->idle_ttl = 30 * USEC_PER_MINUTE;
        c->game_port_base = 9000;
        c->query_port_base = 9600;
        c->state_dir = strdup("/var/lib/slotd");
        c->slots_dir = strdup("/var/lib/slotd/slots");
        c->bus = strdup("system");
        c->builds_dir = strdup("/srv/slotd/builds");
        if (!c->state_dir || !c->slots_dir || !c->bus || !c->builds_dir ||
            localproxy_init(&c->localproxy) < 0 || fleet_layer_init(&c->fleet) < 0)
                return NULL;
        /* Loopback, beside the local proxy's 8086: an address that cannot be bound (two slotd
         * on one box) is then a warning, not an error (proxy-process.c). */
        if (proxy_listen_from_string(METRICS_LISTEN_DEFAULT, &c->metrics_listen) < 0)
                return NULL;
        c->metrics_listen_default = true;

        return TAKE_PTR(c);
}

Config *config_free(Config *c) {
        if (!c)
                return NULL;

        free(c->config_file);
        free(c->fleets_dir);
        free(c->machine_id);
        free(c->ip);
        free(c->ipv6);
        free(c->cgroup);
        free(c->state_dir);
        free(c->slots_dir);
        free(c->bus);
        free(c->admin_group);
        free(c->region);
        free(c->builds_dir);
        strv_free(c->fleets_elsewhere);
        strv_free(c->fleets_elsewhere_names);
        strv_free(c->fleets_elsewhere_files);
        localproxy_listen_done(&c->localproxy);
        free(c->localproxy.user);
        free(c->localproxy.group);
        free(c->metrics_listen.text);
        fleet_layer_done(&c->fleet);
        for (size_t i = 0; i < c->n_fleets; i++)
                config_fleet_done(&c->fleets[i]);
        free(c->fleets);
        free(c);
        return NULL;
}

static int machine_finalize(ParseContext *ctx, Config *c) {
        /* slots_dir follows a configured state_dir unless it is set itself. */
        if (key_line(ctx, "supervisor", "slots_dir") == 0 &&
            key_line(ctx, "supervisor", "state_dir") > 0) {
                char *s;

                if (asprintf(&s, "%s/slots", streq(c->state_dir, "/") ? "" : c->state_dir) < 0)
                        return ctx_oom(ctx);
                free(c->slots_dir);
                c->slots_dir = s;
        }

        c->reserved_cpus_line = key_line(ctx, "machine", "reserved_cpus");
        c->cpu_mhz_line = key_line(ctx, "machine", "cpu_mhz");
        c->reserved_memory_line = key_line(ctx, "machine", "reserved_memory");
        c->localproxy_listen_line = key_line(ctx, "localproxy", "listen");
        c->metrics_listen_line = key_line(ctx, "metrics", "listen");
        return fleet_layer_check(ctx, &c->fleet);
}

int parse_machine_data(Config *c, const char *name, const char *data, size_t size,
                       char **ret_error) {
        ParseContext ctx = {
                .file = name,
                .schema = &machine_schema,
                .base = c,
                .data = data,
                .size = size,
        };
        int r;

        r = parse_context_run(&ctx);
        if (r >= 0)
                r = machine_finalize(&ctx, c);
        return parse_context_finish(&ctx, r, ret_error);
}

int config_parse_machine(Config *c, const char *name, const char *text, char **ret_error) {
        return parse_machine_data(c, name, text, strlen(text), ret_error);
}

