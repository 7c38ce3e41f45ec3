/* SPDX-License-Identifier: MIT */
/* slotd-allocator: the fleet's allocation API (SPEC §13). Reads its configuration, the token
 * and TLS files, binds its port while it may still be root, then becomes allocator.user and
 * serves from one sd-event loop. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/socket.h>

#include <systemd/sd-daemon.h>

#include "allocator-api.h"
#include "allocator-cache.h"
#include "allocator-http.h"
#include "allocator-fence.h"
#include "allocator-replace.h"
#include "allocator-scaler.h"
#include "allocator-scan.h"
#include "allocator-stop.h"
#include "allocator.h"
#include "fileio.h"
#include "log.h"
#include "privileges.h"
#include "strv.h"

#define SECRET_FILE_MAX (1024 * 1024)
#define TOKEN_MIN 16
#define LISTEN_BACKLOG 1024

static const char *arg_config = ALLOCATOR_CONFIG_FILE;
static bool arg_check;

static void help(void) {
        printf("slotd-allocator - the allocation API of a fleet of slotd machines (etcd)\n\n"
               "Usage: slotd-allocator [--config FILE] [--check]\n\n"
               "  --config FILE   the configuration (default %s)\n"
               "  --check         check the configuration and exit\n"
               "  --version       show the version\n"
               "  -h --help       show this help\n",
               ALLOCATOR_CONFIG_FILE);
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_CONFIG = 0x100, ARG_CHECK, ARG_VERSION };
        static const struct option options[] = {
                { "config", required_argument, NULL, ARG_CONFIG },
                { "check", no_argument, NULL, ARG_CHECK },
                { "version", no_argument, NULL, ARG_VERSION },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case ARG_CONFIG:
                        arg_config = optarg;
                        break;
                case ARG_CHECK:
                        arg_check = true;
                        break;
                case ARG_VERSION:
                        printf("slotd-allocator %s\n", SLOTD_VERSION);
                        return 0;
                case 'h':
                        help();
                        return 0;
                default:
                        return -EINVAL;
                }
        if (optind < argc)
                return log_error_errno(EINVAL, "Unexpected argument '%s'; see --help",
                                       argv[optind]);
        return 1;
}

/* A file of the configuration, read whole while still root (a key is often root's alone). */
static int read_secret(const char *path, const char *key, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        size_t size;
        int r;

        if (fd < 0)
                return log_error_errno(errno, "%s: cannot open %s: %m", key, path);
        r = read_full_fd(fd, SECRET_FILE_MAX, ret, &size);
        if (r < 0)
                return log_error_errno(r, "%s: cannot read %s: %m", key, path);
        if (strlen(*ret) != size)
                return log_error_errno(EINVAL, "%s: %s has a NUL byte", key, path);
        return 0;
}

static int load_token(Allocator *a) {
        const char *path = a->config->token_file;
        char *t, *end;
        int r;

        if (!path)
                return 0;
        r = read_secret(path, "allocator.token_file", &a->token);
        if (r < 0)
                return r;
        /* The token is the file's first line, without surrounding blanks. */
        t = a->token + strspn(a->token, " \t");
        end = t + strcspn(t, "\r\n");
        while (end > t && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
        memmove(a->token, t, (size_t) (end - t));
        a->token[end - t] = '\0';
        if (strlen(a->token) < TOKEN_MIN || strpbrk(a->token, " \t"))
                return log_error_errno(EINVAL, "allocator.token_file: %s must hold one token of "
                                       "at least %d characters without blanks", path, TOKEN_MIN);
        return 0;
}

static int load_tls(Allocator *a) {
        const AllocatorConfig *c = a->config;
        int r = 0;

        if (c->tls_cert)
                r = read_secret(c->tls_cert, "allocator.tls_cert", &a->tls_cert_pem);
        if (r >= 0 && c->tls_key)
                r = read_secret(c->tls_key, "allocator.tls_key", &a->tls_key_pem);
        if (r >= 0 && c->tls_client_ca)
                r = read_secret(c->tls_client_ca, "allocator.tls_client_ca", &a->tls_ca_pem);
        return r;
}

static int listen_socket(const ProxyListen *l) {
        union {
                struct sockaddr sa;
                struct sockaddr_in in;
                struct sockaddr_in6 in6;
        } sa = {};
        socklen_t len;
        int fd, one = 1;

        if (l->family == AF_INET) {
                sa.in = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(l->port),
                                              .sin_addr = l->address.in };
                len = sizeof(sa.in);
        } else {
                sa.in6 = (struct sockaddr_in6){ .sin6_family = AF_INET6,
                                                .sin6_port = htons(l->port),
                                                .sin6_addr = l->address.in6 };
                len = sizeof(sa.in6);
        }
        fd = socket(l->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(errno, "Cannot make a socket for %s: %m", l->text);
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (l->family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, &sa.sa, len) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
                int r = log_error_errno(errno, "allocator.listen: cannot listen on %s: %m",
                                        l->text);
                safe_close(fd);
                return r;
        }
        return fd;
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Allocator *a = userdata;

        allocator_stop(a, (int) si->ssi_signo);
        return 0;
}

/* Batches of the API's transactions in flight at a time: while they are, those that come
 * queue for the next. */
#define BATCHES_IN_FLIGHT 1

/* The fleet view's changes, for the claims placed again and the scan of records. */
static const CacheListener cache_listener = {
        .claim_seen = replace_claim_seen,
        .claim_gone = replace_claim_gone,
        .slot_showed = replace_slot_showed,
        .view_read = scan_view_read,
        .view_changed = scaler_view_changed,
};

static int allocator_setup(Allocator *a, int listen_fd) {
        EtcdConfig ec = {
                .endpoints = a->config->etcd_endpoints,
                .timeout_usec = a->config->etcd_timeout,
                .ca_file = a->config->etcd_ca,
                .cert_file = a->config->etcd_cert,
                .key_file = a->config->etcd_key,
        };
        int r;

        r = sd_event_default(&a->event);
        if (r < 0)
                return log_error_errno(r, "Failed to create the event loop: %m");
        r = sd_event_add_signal(a->event, NULL, SIGTERM, on_signal, a);
        if (r >= 0)
                r = sd_event_add_signal(a->event, NULL, SIGINT, on_signal, a);
        if (r < 0)
                return log_error_errno(r, "Failed to watch signals: %m");
        r = placement_new(a->config->strategy, &a->placement);
        if (r >= 0)
                r = capacity_index_new(&a->capacity_index);
        if (r < 0)
                return log_oom();
        r = etcd_new(&a->etcd, a->event, &ec);
        if (r >= 0)
                r = etcd_batch_new(&a->batch, a->etcd, a->event, BATCHES_IN_FLIGHT);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the etcd client: %m");
        r = http_start(a, listen_fd, api_dispatch);
        if (r < 0)
                return r;
        r = cache_start(a, &cache_listener);
        /* Only a replica with [scaler] targets stands for the scaler's election. */
        if (r >= 0 && a->config->scaler_targets.n > 0)
                r = scaler_start(a);
        return r;
}

static void allocator_done(Allocator *a) {
        allocator_stop_done(a);
        http_stop(a);
        scaler_done(a);
        scan_done(a);
        replace_done(a);
        fence_done(a);
        cache_done(a);
        a->batch = etcd_batch_free(a->batch);
        a->etcd = etcd_free(a->etcd);
        a->placement = placement_free(a->placement);
        a->capacity_index = capacity_index_free(a->capacity_index);
        a->event = sd_event_unref(a->event);
        free(a->token);
        free(a->tls_cert_pem);
        free(a->tls_key_pem);
        free(a->tls_ca_pem);
}

static int run(AllocatorConfig *config) {
        _cleanup_close_ int fd = -EBADF;
        Allocator a = { .config = config };
        sigset_t mask;
        int r;

        r = load_token(&a);
        if (r >= 0)
                r = load_tls(&a);
        if (r >= 0)
                r = fd = listen_socket(&config->listen);
        if (r >= 0)
                r = drop_privileges(config->user, "allocator.user", false);
        /* Unlike the files above, the etcd client opens etcd's TLS files on each new
         * connection, as this user. */
        if (r >= 0)
                r = check_file_readable(config->etcd_ca, "etcd.ca_file");
        if (r >= 0)
                r = check_file_readable(config->etcd_cert, "etcd.cert_file");
        if (r >= 0)
                r = check_file_readable(config->etcd_key, "etcd.key_file");
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (r >= 0 && sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                r = log_error_errno(errno, "Failed to block signals: %m");
        /* Every send says MSG_NOSIGNAL (the etcd client's TLS: GNUTLS_NO_SIGNAL). */
        (void) signal(SIGPIPE, SIG_IGN);
        if (r >= 0)
                r = allocator_setup(&a, fd);
        if (r >= 0) {
                log_info("Serving the allocation API on %s%s (etcd %s, prefix %s, %s placement)",
                         config->listen.text, a.tls_cert_pem ? " (HTTPS)" : "",
                         config->etcd_endpoints[0], config->prefix,
                         placement_strategy_to_string(config->strategy));
                (void) sd_notify(false, "READY=1");
                r = sd_event_loop(a.event);
                if (r < 0)
                        log_error_errno(r, "Event loop failed: %m");
        }
        allocator_done(&a);
        return r;
}

/* The scaler's targets and where each came from (allocator.ini, a .gsh file), then the notes
 * of the .gsh files: on stdout for --check, else in the log. */
static void show_targets(const AllocatorConfig *c, bool check) {
        const ScalerTargets *t = &c->scaler_targets;

        for (size_t i = 0; i < t->n; i++) {
                _cleanup_free_ char *s = scaler_target_format(&t->targets[i]);

                if (!s)
                        return (void) log_oom();
                if (check)
                        printf("scaler target %s (%s)\n", s, t->origins[i]);
                else
                        log_info("Scaler target %s (%s)", s, t->origins[i]);
        }
        STRV_FOREACH(n, c->scaler_notes)
                if (check)
                        printf("%s\n", *n);
                else
                        log_info("%s", *n);
}

int main(int argc, char *argv[]) {
        _cleanup_(allocator_config_freep) AllocatorConfig *config = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        log_set_program("slotd-allocator");
        log_open();
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? 2 : 0;
        r = allocator_config_load(arg_config, &config, &error);
        if (r < 0) {
                log_error_errno(r, "%s", error ?: "Failed to load the configuration: %m");
                return 2;
        }
        show_targets(config, arg_check);
        if (arg_check) {
                printf("%s: OK\n", arg_config);
                return 0;
        }
        r = run(config);
        return r < 0 ? 1 : 0;
}
