/* SPDX-License-Identifier: MIT */
/* slotd-proxy: the local proxy of Unity Multiplay game servers (http://localhost:8086), run by
 * slotd as an unprivileged, confined child. slotd binds the listening sockets and passes them
 * with the IPC socket; the proxy never binds, so a restarted proxy keeps the port. */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/socket.h>

#include "log.h"
#include "macro.h"
#include "proxy.h"

#define LISTEN_FDS_MAX 16

static int arg_ipc_fd = -1;
static int arg_control_fd = -1;
static int arg_listen_fds[LISTEN_FDS_MAX];
static size_t arg_n_listen;
static int arg_metrics_fd = -1;

static void help(void) {
        printf("slotd-proxy - the local proxy of Multiplay game servers, run by slotd\n\n"
               "Usage: slotd-proxy --ipc-fd N [--listen-fd N ...] [--metrics-fd N]\n\n"
               "  --ipc-fd N      the SOCK_SEQPACKET socket to slotd\n"
               "  --control-fd N  a bound SOCK_SEQPACKET socket to listen on for a restarted slotd\n"
               "                  attaches; without it the proxy exits when slotd goes\n"
               "  --listen-fd N   a listening TCP socket to serve (up to %d)\n"
               "  --metrics-fd N  a listening TCP socket to serve GET /metrics on\n"
               "  -h --help       show this help\n", LISTEN_FDS_MAX);
}

static int parse_fd(const char *s, int *ret) {
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || v < 0 || v > INT32_MAX)
                return log_error_errno(EINVAL, "Not a file descriptor: '%s'", s);
        *ret = (int) v;
        return 0;
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_IPC_FD = 0x100, ARG_CONTROL_FD, ARG_LISTEN_FD, ARG_METRICS_FD };
        static const struct option options[] = {
                { "ipc-fd", required_argument, NULL, ARG_IPC_FD },
                { "control-fd", required_argument, NULL, ARG_CONTROL_FD },
                { "listen-fd", required_argument, NULL, ARG_LISTEN_FD },
                { "metrics-fd", required_argument, NULL, ARG_METRICS_FD },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case ARG_IPC_FD:
                        r = parse_fd(optarg, &arg_ipc_fd);
                        if (r < 0)
                                return r;
                        break;
                case ARG_CONTROL_FD:
                        r = parse_fd(optarg, &arg_control_fd);
                        if (r < 0)
                                return r;
                        break;
                case ARG_LISTEN_FD:
                        if (arg_n_listen == LISTEN_FDS_MAX)
                                return log_error_errno(E2BIG, "At most %d --listen-fd",
                                                       LISTEN_FDS_MAX);
                        r = parse_fd(optarg, &arg_listen_fds[arg_n_listen]);
                        if (r < 0)
                                return r;
                        arg_n_listen++;
                        break;
                case ARG_METRICS_FD:
                        r = parse_fd(optarg, &arg_metrics_fd);
                        if (r < 0)
                                return r;
                        break;
                case 'h':
                        help();
                        return 0;
                default:
                        return -EINVAL;
                }
        if (optind < argc)
                return log_error_errno(EINVAL, "Unexpected argument '%s'; see --help",
                                       argv[optind]);
        if (arg_ipc_fd < 0 || (arg_n_listen == 0 && arg_metrics_fd < 0))
                return log_error_errno(EINVAL, "--ipc-fd and at least one --listen-fd or "
                                       "--metrics-fd are needed");
        return 1;
}

/* The fds come from slotd: check they are what they claim before the loop trusts them. */
static int check_fd(int fd, int type, bool listening) {
        int v = 0, flags;
        socklen_t l = sizeof(v);

        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0)
                return log_error_errno(errno, "fd %d is not a socket: %m", fd);
        if (v != type)
                return log_error_errno(EINVAL, "fd %d is not a %s socket", fd,
                                       type == SOCK_STREAM ? "stream" : "seqpacket");
        l = sizeof(v);
        if (listening && (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || !v))
                return log_error_errno(EINVAL, "fd %d is not listening", fd);
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
            fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return log_error_errno(errno, "Failed to set up fd %d: %m", fd);
        return 0;
}

static int run(void) {
        sd_event *event = NULL;
        Proxy *p = NULL;
        sigset_t mask;
        int r;

        r = check_fd(arg_ipc_fd, SOCK_SEQPACKET, false);
        if (r >= 0 && arg_control_fd >= 0)
                r = check_fd(arg_control_fd, SOCK_SEQPACKET, false);
        for (size_t i = 0; r >= 0 && i < arg_n_listen; i++)
                r = check_fd(arg_listen_fds[i], SOCK_STREAM, true);
        if (r >= 0 && arg_metrics_fd >= 0)
                r = check_fd(arg_metrics_fd, SOCK_STREAM, true);
        if (r < 0)
                return r;
        /* Every send says MSG_NOSIGNAL; this is for what a library might not. */
        (void) signal(SIGPIPE, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Failed to block signals: %m");
        r = sd_event_new(&event);
        if (r < 0)
                return log_error_errno(r, "Failed to create the event loop: %m");
        r = sd_event_add_signal(event, NULL, SIGTERM, NULL, NULL);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGINT, NULL, NULL);
        if (r < 0) {
                sd_event_unref(event);
                return log_error_errno(r, "Failed to watch signals: %m");
        }
        r = proxy_new(event, arg_ipc_fd, arg_control_fd, arg_listen_fds, arg_n_listen,
                      arg_metrics_fd, &p);
        if (r >= 0) {
                log_debug("Serving %zu listening sockets", arg_n_listen);
                r = sd_event_loop(event);
                if (r < 0)
                        log_error_errno(r, "Event loop failed: %m");
        }
        proxy_free(p);
        sd_event_unref(event);
        return r;
}

int main(int argc, char *argv[]) {
        int r;

        log_set_program("slotd-proxy");
        log_open();
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? 2 : 0;
        r = run();
        return r < 0 ? 1 : 0;
}
