/* SPDX-License-Identifier: MIT */
/* slotd-registry: this machine's slotd in etcd (SPEC §13). Reads slotd.ini's [fleet] (and
 * supervisor.bus, machine.idle_ttl), drops root for fleet.registry_user, then runs the loop. */
#include <getopt.h>
#include <signal.h>

#include "config.h"
#include "fileio.h"
#include "log.h"
#include "privileges.h"
#include "registry.h"
#include "slotd-config.h"

static const char *arg_config = SLOTD_SYSCONFDIR "/slotd.ini";
static const char *arg_bus;

static void help(void) {
        printf("slotd-registry " SLOTD_VERSION " - this machine's slotd in the fleet's etcd\n\n"
               "Usage: slotd-registry [OPTIONS]\n\n"
               "  -c --config FILE   slotd.ini to read (default " SLOTD_SYSCONFDIR "/slotd.ini)\n"
               "  -b --bus BUS       'system', 'session' or a D-Bus address (overrides "
               "supervisor.bus)\n"
               "  -h --help          show this help\n"
               "     --version       show the version\n");
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100 };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "bus", required_argument, NULL, 'b' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:b:h", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        arg_config = optarg;
                        break;
                case 'b':
                        arg_bus = optarg;
                        break;
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("slotd-registry " SLOTD_VERSION "\n");
                        return 0;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                log_error("Unexpected argument '%s'; see --help", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

static void on_stopped(Registry *r) {
        (void) sd_event_exit(r->event, 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Registry *r = userdata;

        log_info("Stopping on %s: revoking the lease", strsignal((int) si->ssi_signo));
        if (registry_stop(r, on_stopped) < 0)
                (void) sd_event_exit(r->event, 0);
        return 0;
}

static int registry_setup(Registry *r, const Config *c) {
        EtcdConfig ec = {
                .endpoints = c->fleet.etcd_endpoints,
                .timeout_usec = c->fleet.etcd_timeout,
                .ca_file = c->fleet.etcd_ca,
                .cert_file = c->fleet.etcd_cert,
                .key_file = c->fleet.etcd_key,
        };
        int k;

        r->bus_address = strdup(arg_bus ?: c->bus);
        r->prefix = strdup(c->fleet.prefix);
        if (!r->bus_address || !r->prefix)
                return log_oom();
        r->lease_ttl = c->fleet.lease_ttl;
        r->idle_ttl_sec = c->idle_ttl / USEC_PER_SEC;
        k = registry_etcd_setup(r, &ec);
        if (k < 0)
                return log_error_errno(k, "Failed to set up the etcd client: %m");
        return registry_bus_connect(r);
}

static int run(int argc, char *argv[]) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *error = NULL;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        Registry *r = NULL;
        sigset_t mask;
        int k;

        k = parse_argv(argc, argv);
        if (k <= 0)
                return k;
        k = config_load(arg_config, NULL, &c, &error);
        if (k < 0) {
                log_error("%s", error ?: strerror(-k));
                return k;
        }
        if (!c->fleet.etcd_endpoints) {
                log_notice("fleet.etcd_endpoints is empty in %s: the fleet layer is off",
                           arg_config);
                return 0;
        }
        /* with the user's groups: supervisor.admin_group among them lets slotd take its calls */
        k = drop_privileges(c->fleet.registry_user, "fleet.registry_user", true);
        if (k < 0)
                return k;
        /* The etcd client opens the TLS files on each new connection to etcd, as this user: one it
         * cannot read fails the start, not every connection later. */
        k = check_file_readable(c->fleet.etcd_ca, "fleet.etcd_ca");
        if (k >= 0)
                k = check_file_readable(c->fleet.etcd_cert, "fleet.etcd_cert");
        if (k >= 0)
                k = check_file_readable(c->fleet.etcd_key, "fleet.etcd_key");
        if (k < 0)
                return k;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        (void) sigprocmask(SIG_BLOCK, &mask, NULL);
        k = sd_event_default(&event);
        if (k >= 0)
                k = registry_new(&r, event);
        if (k >= 0)
                k = sd_event_add_signal(event, NULL, SIGTERM, on_signal, r);
        if (k >= 0)
                k = sd_event_add_signal(event, NULL, SIGINT, on_signal, r);
        if (k < 0) {
                registry_free(r);
                return log_error_errno(k, "Failed to set up the event loop: %m");
        }
        k = registry_setup(r, c);
        if (k >= 0)
                k = sd_event_loop(event);
        registry_free(r);
        return k;
}

int main(int argc, char *argv[]) {
        log_open();
        log_set_program("slotd-registry");
        return run(argc, argv) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
