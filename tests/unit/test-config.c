/* SPDX-License-Identifier: MIT */
/* slotd.ini, the INI syntax every file shares, and loading files and directories. */
#include <arpa/inet.h>

#include "test-config-util.h"

#define LISTEN_RULE "addresses like 127.0.0.1:8086 or [::1]:8086, or off"
#define ETCD_ENDPOINT_RULE "http://127.0.0.1:2379 or https://[::1]:2379"
#define NUMBER_RULE                                                                             \
        "expected a decimal number from 1 to 9223372036854775807, without sign or leading zero, " \
        "which Unity's SDKs read as an integer"
#define PREFIX_RULE                                                                             \
        "expected a key prefix like /slotd/v1: a leading '/', at most 128 characters of A-Z "  \
        "a-z 0-9 / . _ -, no empty segment and no trailing '/'"

static void check_machine_error(const char *text, const char *expect) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL;

        assert_true(config_parse_machine(c, "m.ini", text, &err) < 0);
        assert_non_null(err);
        assert_string_equal(err, expect);
}


static void test_machine_defaults(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_parse_machine(c, "m.ini", "; nothing but a comment\n", &err), 0);
        assert_null(err);

        assert_null(c->machine_id);
        assert_int_equal(c->machine_number, 0);
        assert_null(c->ip);
        assert_null(c->ipv6);
        assert_true(c->cpus == 0);
        assert_int_equal(c->memory, 0);
        assert_true(c->reserved_cpus == 0);
        assert_int_equal(c->reserved_memory, 0);
        assert_int_equal(c->idle_ttl, 30 * USEC_PER_MINUTE);
        assert_null(c->cgroup);
        assert_string_equal(c->state_dir, "/var/lib/slotd");
        assert_string_equal(c->slots_dir, "/var/lib/slotd/slots");
        assert_string_equal(c->bus, "system");
        assert_null(c->admin_group);
        assert_int_equal(c->n_fleets, 0);
        assert_null(c->fleets);
        assert_int_equal(c->reserved_cpus_line, 0);
        assert_int_equal(c->reserved_memory_line, 0);

        assert_true(c->localproxy.enabled);
        assert_int_equal(c->localproxy.n_listen, 2);
        assert_int_equal(c->localproxy.listen[0].family, AF_INET);
        assert_int_equal(c->localproxy.listen[0].address.in.s_addr, htonl(INADDR_LOOPBACK));
        assert_int_equal(c->localproxy.listen[0].port, 8086);
        assert_string_equal(c->localproxy.listen[0].text, "127.0.0.1:8086");
        assert_int_equal(c->localproxy.listen[1].family, AF_INET6);
        assert_true(IN6_IS_ADDR_LOOPBACK(&c->localproxy.listen[1].address.in6));
        assert_int_equal(c->localproxy.listen[1].port, 8086);
        assert_string_equal(c->localproxy.listen[1].text, "[::1]:8086");
        assert_int_equal(c->localproxy.payload_ttl, USEC_PER_HOUR);
        assert_string_equal(c->localproxy.user, "nobody");
        assert_string_equal(c->localproxy.group, "nogroup");
        assert_int_equal(c->localproxy_listen_line, 0);
}

static void test_machine_all_keys(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *err = NULL;
        const char *text =
                "; slotd.ini\n"
                "[machine]\n"
                "id = 0123456789abcdef0123456789abcdef\n"
                "ip = 192.0.2.10\n"
                "ipv6 = 2001:db8::10\n"
                "cpus = 12.5\n"
                "memory = 64G\n"
                "reserved_cpus = 50%\n"
                "reserved_memory = 2G\n"
                "idle_ttl = 2h\n"
                "number = 9223372036854775807\n"
                "[supervisor]\n"
                "cgroup = /sys/fs/cgroup/slotd.slice//slots/\n"
                "state_dir = /srv//slotd/\n"
                "bus = unix:path=/run/slotd/bus\n"
                "admin_group = gameops\n"
                "[localproxy]\n"
                "listen = 192.0.2.1:80 [2001:DB8:0::0001]:8086   [::ffff:127.0.0.1]:1\n"
                "payload_ttl = 90s\n"
                "user = proxy\n"
                "group = proxies\n";

        assert_int_equal(config_parse_machine(c, "m.ini", text, &err), 0);
        assert_null(err);

        assert_string_equal(c->machine_id, "0123456789abcdef0123456789abcdef");
        assert_true(c->machine_number == UINT64_C(9223372036854775807));
        assert_string_equal(c->ip, "192.0.2.10");
        assert_string_equal(c->ipv6, "2001:db8::10");
        assert_true(double_eq(c->cpus, 12.5));
        assert_int_equal(c->memory, UINT64_C(64) << 30);
        assert_true(double_eq(c->reserved_cpus, 0.5));
        assert_int_equal(c->reserved_memory, UINT64_C(2) << 30);
        assert_int_equal(c->idle_ttl, 2 * USEC_PER_HOUR);
        assert_string_equal(c->cgroup, "/sys/fs/cgroup/slotd.slice/slots");
        assert_string_equal(c->state_dir, "/srv/slotd");
        /* follows state_dir when not set itself */
        assert_string_equal(c->slots_dir, "/srv/slotd/slots");
        assert_string_equal(c->bus, "unix:path=/run/slotd/bus");
        assert_string_equal(c->admin_group, "gameops");
        assert_int_equal(c->reserved_cpus_line, 8);
        assert_int_equal(c->reserved_memory_line, 9);

        assert_true(c->localproxy.enabled);
        assert_int_equal(c->localproxy.n_listen, 3);
        assert_string_equal(c->localproxy.listen[0].text, "192.0.2.1:80");
        assert_int_equal(c->localproxy.listen[0].port, 80);
        assert_int_equal(c->localproxy.listen[0].address.in.s_addr, htonl(0xc0000201));
        /* as inet_ntop() writes it */
        assert_string_equal(c->localproxy.listen[1].text, "[2001:db8::1]:8086");
        assert_int_equal(c->localproxy.listen[1].address.in6.s6_addr[0], 0x20);
        assert_int_equal(c->localproxy.listen[1].address.in6.s6_addr[15], 0x01);
        assert_string_equal(c->localproxy.listen[2].text, "[::ffff:127.0.0.1]:1");
        assert_int_equal(c->localproxy.listen[2].family, AF_INET6);
        assert_int_equal(c->localproxy.payload_ttl, 90 * USEC_PER_SEC);
        assert_string_equal(c->localproxy.user, "proxy");
        assert_string_equal(c->localproxy.group, "proxies");
        assert_int_equal(c->localproxy_listen_line, 18);
}

static void test_localproxy_off(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_(config_freep) Config *d = new_config();

        assert_int_equal(config_parse_machine(c, "m.ini", "[localproxy]\nlisten = off\n", NULL), 0);
        assert_false(c->localproxy.enabled);
        assert_int_equal(c->localproxy.n_listen, 0);
        assert_null(c->localproxy.listen);
        assert_int_equal(c->localproxy_listen_line, 2);
        /* the rest keeps its defaults */
        assert_int_equal(c->localproxy.payload_ttl, USEC_PER_HOUR);

        assert_int_equal(config_parse_machine(d, "m.ini", "[localproxy]\nlisten = 0.0.0.0:1 "
                                                          "[::]:1\n", NULL), 0);
        assert_true(d->localproxy.enabled);
        assert_int_equal(d->localproxy.n_listen, 2);
}

/* metrics.listen (SPEC §14): 127.0.0.1:8087 by default, one address, or off. */
static void test_metrics_listen(_unused_ void **state) {
        static const char *const bad[] = { "localhost:9187", "127.0.0.1", "127.0.0.1:0",
                                           "127.0.0.1:9187 [::1]:9187", "[::1]9187", "on" };
        _cleanup_(config_freep) Config *c = new_config();

        assert_int_equal(c->metrics_listen.family, AF_INET);
        assert_int_equal(c->metrics_listen.port, 8087);
        assert_int_equal(ntohl(c->metrics_listen.address.in.s_addr), INADDR_LOOPBACK);
        assert_string_equal(c->metrics_listen.text, "127.0.0.1:8087");
        assert_true(c->metrics_listen_default);
        assert_int_equal(config_parse_machine(c, "m.ini", "[machine]\n[metrics]\n"
                                                          "listen = 0.0.0.0:9187\n", NULL), 0);
        assert_int_equal(c->metrics_listen.family, AF_INET);
        assert_int_equal(c->metrics_listen.port, 9187);
        assert_string_equal(c->metrics_listen.text, "0.0.0.0:9187");
        assert_int_equal(c->metrics_listen_line, 3);
        assert_false(c->metrics_listen_default);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_(config_freep) Config *d = new_config();
                _cleanup_free_ char *text = NULL, *err = NULL;

                assert_true(asprintf(&text, "[metrics]\nlisten = %s\n", bad[i]) > 0);
                assert_int_equal(config_parse_machine(d, "m.ini", text, &err), -EINVAL);
                assert_contains(err, "m.ini:2: metrics.listen: expected one address like "
                                     "127.0.0.1:9187 or [::1]:9187, or off");
        }
        {
                _cleanup_(config_freep) Config *d = new_config();

                assert_int_equal(config_parse_machine(d, "m.ini", "[metrics]\nlisten = [::1]:9100\n",
                                                      NULL), 0);
                assert_int_equal(d->metrics_listen.family, AF_INET6);
                assert_string_equal(d->metrics_listen.text, "[::1]:9100");
        }
        {
                _cleanup_(config_freep) Config *d = new_config();

                assert_int_equal(config_parse_machine(d, "m.ini", "[metrics]\nlisten = off\n",
                                                      NULL), 0);
                assert_int_equal(d->metrics_listen.family, AF_UNSPEC);
                assert_null(d->metrics_listen.text);
                assert_false(d->metrics_listen_default);
        }
        {
                /* Set to the default's address, it is no longer the default: not skipped. */
                _cleanup_(config_freep) Config *d = new_config();

                assert_int_equal(config_parse_machine(d, "m.ini", "[metrics]\nlisten = "
                                                      "127.0.0.1:8087\n", NULL), 0);
                assert_string_equal(d->metrics_listen.text, "127.0.0.1:8087");
                assert_false(d->metrics_listen_default);
        }
}

static void test_localproxy_many(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_(config_freep) Config *d = new_config();
        _cleanup_free_ char *text = NULL, *err = NULL;

        text = strdup("[localproxy]\nlisten =");
        assert_non_null(text);
        for (unsigned port = 1; port <= 16; port++) {
                char *t = NULL;

                assert_true(asprintf(&t, "%s 127.0.0.1:%u", text, port) > 0);
                free(text);
                text = t;
        }
        assert_int_equal(config_parse_machine(c, "m.ini", text, NULL), 0);
        assert_int_equal(c->localproxy.n_listen, 16);
        assert_string_equal(c->localproxy.listen[15].text, "127.0.0.1:16");

        text = realloc(text, strlen(text) + 16);
        assert_non_null(text);
        strcat(text, " 127.0.0.1:17\n");
        assert_int_equal(config_parse_machine(d, "m.ini", text, &err), -EINVAL);
        assert_contains(err, "m.ini:2: localproxy.listen: expected 1 to 16 " LISTEN_RULE
                             " (got '127.0.0.1:1 127.0.0.1:2 ");
}

static void test_proxy_listen_from_string(_unused_ void **state) {
        static const char *const bad[] = {
                "", "8086", ":8086", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
                "127.0.0.1:80x", "127.0.0.1:-1", "localhost:8086", "::1:8086", "[::1]", "[::1]8086",
                "[::1]:", "[127.0.0.1]:80", "[]:80", "[fe80::1%eth0]:80", "1.2.3:80",
                "[::1]:80:80",
        };
        ProxyListen l = {};

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (proxy_listen_from_string(bad[i], &l) != -EINVAL)
                        print_error("'%s' was taken\n", bad[i]);
                assert_null(l.text);
        }

        assert_int_equal(proxy_listen_from_string("10.0.0.1:65535", &l), 0);
        assert_int_equal(l.family, AF_INET);
        assert_int_equal(l.port, 65535);
        assert_string_equal(l.text, "10.0.0.1:65535");
        free(l.text);
}

static void test_fleet_layer(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config(), *d = new_config();
        _cleanup_free_ char *err = NULL;

        /* off by default */
        assert_int_equal(config_parse_machine(d, "m.ini", "", &err), 0);
        assert_null(d->fleet.etcd_endpoints);
        assert_string_equal(d->fleet.prefix, "/slotd/v1");
        assert_int_equal(d->fleet.lease_ttl, 5 * USEC_PER_SEC);
        assert_int_equal(d->fleet.etcd_timeout, 2 * USEC_PER_SEC);
        assert_string_equal(d->fleet.registry_user, "slotd-registry");

        assert_int_equal(config_parse_machine(c, "m.ini",
                                              "[fleet]\n"
                                              "etcd_endpoints = http://127.0.0.1:23790 , "
                                              "https://etcd-1.example.net:2379,http://[::1]:1\n"
                                              "prefix = /games/slotd_v1\n"
                                              "lease_ttl = 3s\n"
                                              "etcd_timeout = 750ms\n"
                                              "registry_user = fleetreg\n",
                                              &err),
                         0);
        assert_null(err);
        assert_int_equal(strv_length(c->fleet.etcd_endpoints), 3);
        assert_string_equal(c->fleet.etcd_endpoints[0], "http://127.0.0.1:23790");
        assert_string_equal(c->fleet.etcd_endpoints[1], "https://etcd-1.example.net:2379");
        assert_string_equal(c->fleet.etcd_endpoints[2], "http://[::1]:1");
        assert_string_equal(c->fleet.prefix, "/games/slotd_v1");
        assert_int_equal(c->fleet.lease_ttl, 3 * USEC_PER_SEC);
        assert_int_equal(c->fleet.etcd_timeout, 750 * USEC_PER_MSEC);
        assert_string_equal(c->fleet.registry_user, "fleetreg");

        /* an empty list turns it off again */
        assert_int_equal(config_parse_machine(d, "m.ini", "[fleet]\netcd_endpoints =\n", &err), 0);
        assert_null(d->fleet.etcd_endpoints);
}

static void test_fleet_tls(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config(), *d = new_config(), *e = new_config(),
                                       *f = new_config();
        _cleanup_free_ char *err = NULL;

        /* none by default */
        assert_int_equal(config_parse_machine(c, "m.ini", "", &err), 0);
        assert_null(c->fleet.etcd_ca);
        assert_null(c->fleet.etcd_cert);
        assert_null(c->fleet.etcd_key);

        assert_int_equal(config_parse_machine(c, "m.ini",
                                              "[fleet]\n"
                                              "etcd_endpoints = https://10.0.0.5:2379,"
                                              "https://[2001:db8::6]:2379\n"
                                              "etcd_ca = /etc/etcd//ca.crt\n"
                                              "etcd_cert = /etc/slotd/etcd-client.crt\n"
                                              "etcd_key = /etc/slotd/etcd-client.key\n",
                                              &err),
                         0);
        assert_null(err);
        assert_string_equal(c->fleet.etcd_ca, "/etc/etcd/ca.crt");
        assert_string_equal(c->fleet.etcd_cert, "/etc/slotd/etcd-client.crt");
        assert_string_equal(c->fleet.etcd_key, "/etc/slotd/etcd-client.key");

        /* a CA alone (etcd without client-certificate auth); empty is unset */
        assert_int_equal(config_parse_machine(d, "m.ini",
                                              "[fleet]\netcd_endpoints = https://etcd:2379\n"
                                              "etcd_ca = /ca.pem\netcd_cert =\netcd_key =\n",
                                              &err),
                         0);
        assert_string_equal(d->fleet.etcd_ca, "/ca.pem");
        assert_null(d->fleet.etcd_cert);
        assert_null(d->fleet.etcd_key);

        /* https:// without a CA: the system's trust store */
        assert_int_equal(config_parse_machine(e, "m.ini",
                                              "[fleet]\netcd_endpoints = https://etcd:2379\n"
                                              "etcd_cert = /c.pem\netcd_key = /k.pem\n",
                                              &err),
                         0);
        assert_null(e->fleet.etcd_ca);
        assert_string_equal(e->fleet.etcd_cert, "/c.pem");

        /* the fleet layer off: the files wait for it */
        assert_int_equal(config_parse_machine(f, "m.ini", "[fleet]\netcd_ca = /ca.pem\n", &err),
                         0);
        assert_null(f->fleet.etcd_endpoints);

        check_machine_error("[fleet]\netcd_endpoints = https://a:1\n\netcd_cert = /c.pem\n",
                            "m.ini:4: fleet.etcd_cert: set without fleet.etcd_key: a client "
                            "certificate and its key go together (set both, or neither)");
        check_machine_error("[fleet]\netcd_key = /k.pem\netcd_endpoints = https://a:1\n",
                            "m.ini:2: fleet.etcd_key: set without fleet.etcd_cert: a client "
                            "certificate and its key go together (set both, or neither)");
        check_machine_error("[fleet]\netcd_endpoints = https://a:1,http://b:2\n"
                            "etcd_ca = /ca.pem\n",
                            "m.ini:3: fleet.etcd_ca: TLS to etcd needs https:// endpoints, but "
                            "fleet.etcd_endpoints has http://b:2");
        check_machine_error("[fleet]\netcd_endpoints = http://a:1\n"
                            "etcd_key = /k.pem\netcd_cert = /c.pem\n",
                            "m.ini:4: fleet.etcd_cert: TLS to etcd needs https:// endpoints, but "
                            "fleet.etcd_endpoints has http://a:1");
}

static void test_machine_slots_dir(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_(config_freep) Config *d = new_config();
        _cleanup_(config_freep) Config *e = new_config();

        assert_int_equal(config_parse_machine(c, "m.ini",
                                              "[supervisor]\nslots_dir = /data/slots\n"
                                              "state_dir = /srv/slotd\n",
                                              NULL),
                         0);
        assert_string_equal(c->state_dir, "/srv/slotd");
        assert_string_equal(c->slots_dir, "/data/slots");

        assert_int_equal(config_parse_machine(d, "m.ini", "[supervisor]\nstate_dir = /\n", NULL), 0);
        assert_string_equal(d->state_dir, "/");
        assert_string_equal(d->slots_dir, "/slots");

        assert_int_equal(config_parse_machine(e, "m.ini", "[supervisor]\nslots_dir = /s\n", NULL), 0);
        assert_string_equal(e->state_dir, "/var/lib/slotd");
        assert_string_equal(e->slots_dir, "/s");
}

static void test_machine_bad_values(_unused_ void **state) {
        static const struct {
                const char *section, *key, *value, *what;
        } cases[] = {
                { "machine", "id", "", "must not be empty" },
                { "machine", "ip", "10.0.0.300", "expected an IPv4 address like 192.0.2.10" },
                { "machine", "ip", "::1", "expected an IPv4 address like 192.0.2.10" },
                { "machine", "ip", "gameserver.local", "expected an IPv4 address like 192.0.2.10" },
                { "machine", "ipv6", "10.0.0.1", "expected an IPv6 address like 2001:db8::10" },
                { "machine", "ipv6", "2001:db8::g", "expected an IPv6 address like 2001:db8::10" },
                { "machine", "cpus", "0", "must be more than 0 and at most 1000000 cores" },
                { "machine", "cpu_mhz", "0", "expected a positive integer" },
                { "machine", "cpu_mhz", "2.4G", "expected a positive integer" },
                { "machine", "cpus", "many", "expected cores like 0.5 or 50%" },
                { "machine", "cpus", "10 %", "expected cores like 0.5 or 50%" },
                { "machine", "memory", "0", "must be greater than 0" },
                { "machine", "memory", "lots", "expected a size like 512K, 200M or 2G" },
                { "machine", "memory", "99999999999999999999G", "size too large" },
                { "machine", "reserved_cpus", "-1", "expected cores like 0.5 or 50%" },
                { "machine", "reserved_cpus", "1000001", "must be at most 1000000 cores" },
                { "machine", "reserved_memory", "1x", "expected a size like 512K, 200M or 2G" },
                { "machine", "reserved_memory", "-1G", "expected a size like 512K, 200M or 2G" },
                { "machine", "idle_ttl", "0", "must be greater than 0" },
                { "machine", "idle_ttl", "forever", "expected a duration like 250ms, 10s, 5m or 1h" },
                { "machine", "idle_ttl", "99999999999999999999h", "duration too large" },
                { "machine", "number", "0", "must be from 1 to 9223372036854775807 (Unity's SDKs "
                  "read it as a 64-bit signed integer)" },
                { "machine", "number", "9223372036854775808", "must be from 1 to "
                  "9223372036854775807 (Unity's SDKs read it as a 64-bit signed integer)" },
                { "machine", "number", "0123", NUMBER_RULE },
                { "machine", "number", "-1", NUMBER_RULE },
                { "machine", "number", "3d1219c7c4c5404aaa1f6d2a48adfda4", NUMBER_RULE },
                { "supervisor", "cgroup", "slots", "expected an absolute path" },
                { "supervisor", "state_dir", "var/lib/slotd", "expected an absolute path" },
                { "supervisor", "slots_dir", "", "expected an absolute path" },
                { "supervisor", "bus", "", "must not be empty" },
                { "supervisor", "admin_group", "", "must not be empty" },
                { "localproxy", "listen", "", "expected 1 to 16 " LISTEN_RULE },
                { "localproxy", "listen", "localhost:8086",
                  "expected " LISTEN_RULE "; 'localhost:8086' is not" },
                { "localproxy", "listen", "127.0.0.1:8086 ::1:8086",
                  "expected " LISTEN_RULE "; '::1:8086' is not" },
                { "localproxy", "listen", "127.0.0.1:0", "expected " LISTEN_RULE "; '127.0.0.1:0' is not" },
                { "localproxy", "listen", "off 127.0.0.1:80", "expected " LISTEN_RULE "; 'off' is not" },
                { "localproxy", "listen", "127.0.0.1:80 off", "expected " LISTEN_RULE "; 'off' is not" },
                { "localproxy", "listen", "OFF", "expected " LISTEN_RULE "; 'OFF' is not" },
                { "localproxy", "listen", "[::1]:80 [0:0::1]:80", "[::1]:80 is listed twice" },
                { "localproxy", "listen", "127.0.0.1:80 0.0.0.0:80",
                  "127.0.0.1:80 and 0.0.0.0:80 overlap: a wildcard address takes its port on every "
                  "address" },
                { "localproxy", "listen", "[::]:80 [::1]:80",
                  "[::]:80 and [::1]:80 overlap: a wildcard address takes its port on every address" },
                { "localproxy", "payload_ttl", "0", "must be greater than 0" },
                { "localproxy", "payload_ttl", "soon", "expected a duration like 250ms, 10s, 5m or 1h" },
                { "localproxy", "user", "", "must not be empty" },
                { "fleet", "etcd_endpoints", "127.0.0.1:2379", "expected comma-separated URLs "
                  "like " ETCD_ENDPOINT_RULE "; '127.0.0.1:2379' is not" },
                { "fleet", "etcd_endpoints", "http://127.0.0.1", "expected comma-separated URLs "
                  "like " ETCD_ENDPOINT_RULE "; 'http://127.0.0.1' is not" },
                { "fleet", "etcd_endpoints", "http://a:1,,http://b:2", "expected comma-separated "
                  "URLs like " ETCD_ENDPOINT_RULE "; '' is not" },
                { "fleet", "etcd_endpoints", "http://[::1:2379", "expected comma-separated URLs "
                  "like " ETCD_ENDPOINT_RULE "; 'http://[::1:2379' is not" },
                { "fleet", "etcd_endpoints", "http://a:1, http://a:1", "http://a:1 is listed twice" },
                { "fleet", "prefix", "slotd", PREFIX_RULE },
                { "fleet", "prefix", "/slotd/", PREFIX_RULE },
                { "fleet", "prefix", "/a//b", PREFIX_RULE },
                { "fleet", "prefix", "/a b", PREFIX_RULE },
                { "fleet", "lease_ttl", "500ms", "must be a whole number of seconds between 1s and 1h" },
                { "fleet", "lease_ttl", "1500ms", "must be a whole number of seconds between 1s and 1h" },
                { "fleet", "lease_ttl", "2h", "must be a whole number of seconds between 1s and 1h" },
                { "fleet", "lease_ttl", "soon", "expected a duration like 5s" },
                { "fleet", "etcd_timeout", "0", "must be greater than 0" },
                { "fleet", "registry_user", "", "must not be empty" },
                { "fleet", "etcd_ca", "ca.pem", "expected an absolute path" },
                { "fleet", "etcd_cert", "./etcd-client.crt", "expected an absolute path" },
                { "fleet", "etcd_key", "~/etcd-client.key", "expected an absolute path" },
                { "localproxy", "group", "", "must not be empty" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *text = NULL, *expect = NULL;

                assert_true(asprintf(&text, "; line 1\n\n[%s]\n%s = %s\n", cases[i].section,
                                     cases[i].key, cases[i].value) > 0);
                assert_true(asprintf(&expect, "m.ini:4: %s.%s: %s (got '%s')", cases[i].section,
                                     cases[i].key, cases[i].what, cases[i].value) > 0);
                check_machine_error(text, expect);
        }
}

static void test_structure_errors(_unused_ void **state) {
        _cleanup_free_ char *long_line = NULL, *expect = NULL;

        check_machine_error("[machine]\nfoo = 1\n", "m.ini:2: machine.foo: unknown key");
        check_machine_error("[machine]\nCPUS = 1\n", "m.ini:2: machine.CPUS: unknown key");
        /* [fleet] of slotd.ini is the fleet layer's, not a fleet file's */
        check_machine_error("[fleet]\nbuild = /bin/true\n", "m.ini:2: fleet.build: unknown key");
        /* found even without keys in it */
        check_machine_error("[machine]\ncpus = 2\n[nosuch]\n",
                            "m.ini:3: unknown section [nosuch]; slotd.ini has [machine], "
                            "[supervisor], [localproxy], [fleet] and [metrics]");
        check_machine_error("[ machine ]\ncpus = 2\n",
                            "m.ini:1: unknown section [ machine ]; slotd.ini has [machine], "
                            "[supervisor], [localproxy], [fleet] and [metrics]");
        check_machine_error("cpus = 4\n",
                            "m.ini:1: cpus: key outside of any section; slotd.ini has [machine], "
                            "[supervisor], [localproxy], [fleet] and [metrics]");
        check_machine_error("[machine]\ncpus = 4\n\n[machine]\ncpus = 8\n",
                            "m.ini:5: machine.cpus: duplicate key, already set on line 2");
        check_machine_error("[machine]\ncpus = 4\ncpus = 4\n",
                            "m.ini:3: machine.cpus: duplicate key, already set on line 2");
        check_machine_error("[machine]\ncpus 4\n",
                            "m.ini:2: syntax error: expected [section], key = value, or a comment");
        check_machine_error("[machine\ncpus = 4\n",
                            "m.ini:1: syntax error: expected [section], key = value, or a comment");
        /* an indented line is not a continuation of the key before it */
        check_machine_error("[machine]\nid = a\n  b\n",
                            "m.ini:3: syntax error: expected [section], key = value, or a comment");
        /* '#' only starts a comment at the start of a line */
        check_machine_error("[machine]\ncpus = 4 # four\n",
                            "m.ini:2: machine.cpus: expected cores like 0.5 or 50% (got '4 # four')");
        /* control characters and stray bytes are escaped in messages */
        check_machine_error("[machine]\ncpus = a\x01z\n",
                            "m.ini:2: machine.cpus: expected cores like 0.5 or 50% (got 'a\\x01z')");
        check_machine_error("[machine]\nid = ab\xff" "cd\n",
                            "m.ini:2: machine.id: not valid UTF-8 (got 'ab\\xffcd')");
        check_machine_error("[machine]\nid = \xc0\xaf\n",
                            "m.ini:2: machine.id: not valid UTF-8 (got '\\xc0\\xaf')");
        check_machine_error("[machine]\nid = \xed\xa0\x80\n",
                            "m.ini:2: machine.id: not valid UTF-8 (got '\\xed\\xa0\\x80')");

        long_line = malloc(5000);
        assert_non_null(long_line);
        memcpy(long_line, "[machine]\nid = ", 15);
        memset(long_line + 15, 'x', 4500);
        strcpy(long_line + 4515, "\n");
        check_machine_error(long_line, "m.ini:2: line too long (at most 4096 characters)");

        /* a long bad value is quoted only in part */
        memcpy(long_line, "[machine]\ncpus=", 15);
        memset(long_line + 15, '9', 150);
        strcpy(long_line + 165, "x\n");
        assert_true(asprintf(&expect,
                             "m.ini:2: machine.cpus: expected cores like 0.5 or 50%% (got '%.100s...')",
                             long_line + 15) > 0);
        check_machine_error(long_line, expect);
}

static void test_syntax_accepted(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_(config_freep) Config *d = new_config();
        _cleanup_(config_freep) Config *e = new_config();

        assert_int_equal(config_parse_machine(c, "m.ini",
                                              "# comment\n"
                                              "; comment\n"
                                              "[machine]\n"
                                              "  cpus = 4 ; four cores\n"
                                              "memory: 8G\n"
                                              "id=x;y\n",
                                              NULL),
                         0);
        assert_true(double_eq(c->cpus, 4));
        assert_int_equal(c->memory, UINT64_C(8) << 30);
        assert_string_equal(c->machine_id, "x;y");

        assert_int_equal(config_parse_machine(d, "m.ini", "[machine]\r\ncpus = 3\r\n", NULL), 0);
        assert_true(double_eq(d->cpus, 3));

        assert_int_equal(config_parse_machine(e, "m.ini", "\xef\xbb\xbf[machine]\ncpus = 5", NULL),
                         0);
        assert_true(double_eq(e->cpus, 5));
}

static void test_too_large(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_free_ char *text = NULL, *err = NULL;
        size_t n = 1024 * 1024 + 1;

        text = malloc(n + 1);
        assert_non_null(text);
        memset(text, '\n', n);
        text[n] = '\0';
        assert_int_equal(config_parse_machine(c, "m.ini", text, &err), -EFBIG);
        assert_string_equal(err, "m.ini: file too large (1048577 bytes, at most 1048576)");

        /* exactly 1 MiB is fine */
        text[n - 1] = '\0';
        assert_int_equal(config_parse_machine(c, "m.ini", text, NULL), 0);
}


static void test_load(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *ini = path_join(dir, "slotd.ini"), *fleets = path_join(dir, "fleets.d");
        _cleanup_free_ char *sub = NULL, *fa = NULL, *fb = NULL, *fz = NULL, *slash = NULL;
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *err = NULL;

        write_file(dir, "slotd.ini", "[machine]\ncpus = 8\n[supervisor]\nbus = session\n");
        assert_int_equal(mkdir(fleets, 0755), 0);
        write_file(fleets, "b.ini", FLEET_MIN);
        write_file(fleets, "a.ini", FLEET_MIN "[ports]\ngame_base = 7000\nquery_base = 7500\n");
        write_file(fleets, "10-z.ini", FLEET_MIN "[fleet]\nname = zed\n");
        /* not fleets: dotfiles, other suffixes, a bare ".ini" */
        write_file(fleets, ".hidden.ini", "garbage");
        write_file(fleets, "README", "garbage");
        write_file(fleets, "c.ini.bak", "garbage");
        write_file(fleets, "d.ini~", "garbage");
        write_file(fleets, ".ini", "garbage");
        sub = path_join(fleets, "sub");
        assert_int_equal(mkdir(sub, 0755), 0);

        assert_int_equal(config_load(ini, fleets, &c, &err), 0);
        assert_null(err);
        assert_string_equal(c->config_file, ini);
        assert_string_equal(c->fleets_dir, fleets);
        assert_true(double_eq(c->cpus, 8));
        assert_string_equal(c->bus, "session");

        assert_int_equal(c->n_fleets, 3);
        fz = path_join(fleets, "10-z.ini");
        fa = path_join(fleets, "a.ini");
        fb = path_join(fleets, "b.ini");
        assert_string_equal(c->fleets[0].name, "zed");
        assert_string_equal(c->fleets[0].file, fz);
        assert_string_equal(c->fleets[1].name, "a");
        assert_string_equal(c->fleets[1].file, fa);
        assert_int_equal(c->fleets[1].game_port_base, 7000);
        assert_int_equal(c->fleets[1].game_port_base_line, 7);
        assert_int_equal(c->fleets[1].query_port_base_line, 8);
        assert_string_equal(c->fleets[2].name, "b");
        assert_string_equal(c->fleets[2].file, fb);
        config_free(TAKE_PTR(c));

        /* a trailing slash on the directory does not double up in file names */
        slash = path_join(fleets, "");
        assert_int_equal(config_load(ini, slash, &c, NULL), 0);
        assert_string_equal(c->fleets_dir, fleets);
        assert_string_equal(c->fleets[1].file, fa);
}

static void test_load_missing(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *ini = path_join(dir, "slotd.ini"), *fleets = path_join(dir, "fleets.d");
        _cleanup_(config_freep) Config *c = NULL, *d = NULL;

        assert_int_equal(config_load(ini, fleets, &c, NULL), 0);
        assert_string_equal(c->config_file, ini);
        assert_string_equal(c->state_dir, "/var/lib/slotd");
        assert_string_equal(c->slots_dir, "/var/lib/slotd/slots");
        assert_string_equal(c->bus, "system");
        assert_int_equal(c->idle_ttl, 30 * USEC_PER_MINUTE);
        assert_int_equal(c->n_fleets, 0);

        assert_int_equal(config_load(NULL, NULL, &d, NULL), 0);
        assert_null(d->config_file);
        assert_null(d->fleets_dir);
        assert_int_equal(d->n_fleets, 0);
}

static void check_load_error(const char *ini, const char *fleets, int expect_r, const char *expect) {
        Config *c = (Config *) 0x1;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_load(ini, fleets, &c, &err), expect_r);
        /* ret untouched on failure */
        assert_ptr_equal(c, (Config *) 0x1);
        assert_non_null(err);
        assert_string_equal(err, expect);
}

static void test_load_errors(_unused_ void **state) {
        _cleanup_(rm_rfp) char *dir = make_tmpdir();
        _cleanup_free_ char *ini = path_join(dir, "slotd.ini"), *fleets = path_join(dir, "fleets.d");
        _cleanup_free_ char *big = NULL, *expect = NULL, *isdir = NULL;
        size_t n = 1024 * 1024 + 1;

        /* a bad slotd.ini */
        write_file(dir, "slotd.ini", "[machine]\n\ncpus = lots\n");
        assert_true(asprintf(&expect, "%s:3: machine.cpus: expected cores like 0.5 or 50%% "
                                      "(got 'lots')", ini) > 0);
        check_load_error(ini, NULL, -EINVAL, expect);
        free(TAKE_PTR(expect));
        write_file(dir, "slotd.ini", "[machine]\ncpus = 8\n");

        /* a bad fleet after a good one */
        assert_int_equal(mkdir(fleets, 0755), 0);
        write_file(fleets, "a.ini", FLEET_MIN);
        write_file(fleets, "b.ini", "[fleet]\nbuild = /bin/true\n[usage]\ncpu = lots\n");
        assert_true(asprintf(&expect, "%s/b.ini:4: usage.cpu: expected cores like 0.5 or 50%% "
                                      "(got 'lots')", fleets) > 0);
        check_load_error(ini, fleets, -EINVAL, expect);
        free(TAKE_PTR(expect));

        /* Every error of a run (issue 27.7): two in one file, a bad section whose keys are
         * not errors of their own, and the files after a bad one read too. */
        write_file(dir, "slotd.ini", "[machine]\ncpus = lots\n[nosuch]\nx = 1\ny = 2\n"
                                     "[supervisor]\nbus = \n");
        write_file(fleets, "c.ini", "[fleet]\nbuild = /bin/true\n[usage]\ncpu = 1\nmemory = 1Q\n");
        assert_true(asprintf(&expect,
                             "%s:2: machine.cpus: expected cores like 0.5 or 50%% (got 'lots')\n"
                             "%s:3: unknown section [nosuch]; slotd.ini has [machine], [supervisor], "
                             "[localproxy], [fleet] and [metrics]\n"
                             "%s:7: supervisor.bus: must not be empty (got '')\n"
                             "%s/b.ini:4: usage.cpu: expected cores like 0.5 or 50%% (got 'lots')\n"
                             "%s/c.ini:5: usage.memory: expected a size like 512K, 200M or 2G (got '1Q')",
                             ini, ini, ini, fleets, fleets) > 0);
        check_load_error(ini, fleets, -EINVAL, expect);
        free(TAKE_PTR(expect));
        expect = path_join(fleets, "c.ini");
        assert_int_equal(unlink(expect), 0);
        free(TAKE_PTR(expect));
        write_file(dir, "slotd.ini", "[machine]\ncpus = 8\n");

        /* a NUL byte would end inih's line early */
        write_file_n(fleets, "b.ini", "[usage]\ncpu = 0\0.5\n", 19, 0644);
        assert_true(asprintf(&expect, "%s/b.ini:2: line contains a NUL byte", fleets) > 0);
        check_load_error(ini, fleets, -EINVAL, expect);
        free(TAKE_PTR(expect));

        /* not UTF-8 */
        write_file(fleets, "b.ini", FLEET_MIN "[fleet]\nuser = \xc3\x28\n");
        assert_true(asprintf(&expect, "%s/b.ini:7: fleet.user: not valid UTF-8 (got '\\xc3(')",
                             fleets) > 0);
        check_load_error(ini, fleets, -EILSEQ, expect);
        free(TAKE_PTR(expect));

        /* over 1 MiB */
        big = malloc(n);
        assert_non_null(big);
        memset(big, '\n', n);
        write_file_n(fleets, "b.ini", big, n, 0644);
        assert_true(asprintf(&expect, "%s/b.ini: file too large (1048577 bytes, at most 1048576)",
                             fleets) > 0);
        check_load_error(ini, fleets, -EFBIG, expect);
        free(TAKE_PTR(expect));
        write_file(fleets, "b.ini", FLEET_MIN "[fleet]\nname = bee\n");

        /* a directory named like a fleet */
        isdir = path_join(fleets, "c.ini");
        assert_int_equal(mkdir(isdir, 0755), 0);
        assert_true(asprintf(&expect, "%s: not a regular file", isdir) > 0);
        check_load_error(ini, fleets, -EINVAL, expect);
        free(TAKE_PTR(expect));
        assert_int_equal(rmdir(isdir), 0);

        /* fleets.d that is a file */
        assert_true(asprintf(&expect, "%s: cannot open directory: Not a directory", ini) > 0);
        check_load_error(ini, ini, -ENOTDIR, expect);
        free(TAKE_PTR(expect));

        /* two files, one fleet name */
        write_file(fleets, "c.ini", FLEET_MIN "\n[fleet]\nname = bee\n");
        assert_true(asprintf(&expect, "%s/c.ini:8: fleet.name: fleet bee is already defined by "
                                      "%s/b.ini", fleets, fleets) > 0);
        check_load_error(ini, fleets, -EEXIST, expect);
}


/* The shipped examples must parse, and say what the parser does by default. */
static void test_examples(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_load(SOURCE_ROOT "/config/slotd.ini", SOURCE_ROOT "/config/fleets.d",
                                     &c, &err), 0);
        assert_null(err);
        assert_string_equal(c->state_dir, "/var/lib/slotd");
        assert_int_equal(c->n_fleets, 1);
        assert_string_equal(c->fleets[0].name, "example");
        assert_true(c->fleets[0].build[0] == '/');
        assert_true(c->fleets[0].seccomp);
        assert_null(c->fleets[0].seccomp_list);
        assert_int_equal(c->fleets[0].nofile, 65536);
        assert_true(c->localproxy.enabled);
        assert_int_equal(c->localproxy.n_listen, 2);
        assert_int_equal(c->fleets[0].readiness, READINESS_EXEC);
        assert_string_equal(c->fleets[0].region_id, "");
        assert_int_equal(c->fleets[0].n_build_configs, 1);
}

/* The commented [build_configuration ID] example, uncommented, is a valid section. */
static void test_example_build_configuration(_unused_ void **state) {
        _cleanup_(config_freep) Config *c = new_config();
        _cleanup_fclose_ FILE *in = NULL;
        _cleanup_free_ char *text = NULL, *line = NULL;
        size_t n = 0, size = 0;
        FILE *out;
        bool in_section = false;
        const BuildConfig *b;

        in = fopen(SOURCE_ROOT "/config/fleets.d/example.ini", "re");
        assert_non_null(in);
        out = open_memstream(&text, &size);
        assert_non_null(out);
        fputs(FLEET_MIN, out);
        while (getline(&line, &n, in) > 0) {
                if (strncmp(line, ";[build_configuration ", 22) == 0)
                        in_section = true;
                if (in_section && line[0] == ';')
                        fputs(line + 1, out);
        }
        assert_int_equal(fclose(out), 0);
        assert_true(in_section);

        b = parse_one_fleet(c, "example.ini", text)->build_configs;
        assert_string_equal(b[1].id, "1234");
        assert_int_equal(b[1].query, QUERY_SQP);
        assert_int_equal(b[1].n_variables, 2);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_machine_defaults),
                cmocka_unit_test(test_machine_all_keys),
                cmocka_unit_test(test_machine_slots_dir),
                cmocka_unit_test(test_fleet_layer),
                cmocka_unit_test(test_fleet_tls),
                cmocka_unit_test(test_machine_bad_values),
                cmocka_unit_test(test_localproxy_off),
                cmocka_unit_test(test_localproxy_many),
                cmocka_unit_test(test_metrics_listen),
                cmocka_unit_test(test_proxy_listen_from_string),
                cmocka_unit_test(test_structure_errors),
                cmocka_unit_test(test_syntax_accepted),
                cmocka_unit_test(test_too_large),
                cmocka_unit_test(test_load),
                cmocka_unit_test(test_load_missing),
                cmocka_unit_test(test_load_errors),
                cmocka_unit_test(test_examples),
                cmocka_unit_test(test_example_build_configuration),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
