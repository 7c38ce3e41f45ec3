/* SPDX-License-Identifier: MIT */
/* The proxy outlives its slotd. slotd gives it a listening socket (--control-fd) when it
 * starts it; when slotd goes (SIGKILL, a crash, SIGTERM before an upgrade, Reexecute) the
 * proxy keeps every connection and waits there for the next slotd, which attaches to it
 * instead of starting another proxy. Game servers never see the restart: Unity's Go SDK
 * v0.5.4 is deaf to events after a reconnect (its subscribe callback blocks on its second
 * call), so a proxy restart would cost each of them every allocation after it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc.h"
#include "log.h"
#include "macro.h"
#include "proxy-limits.h"
#include "proxy.h"

static json_t *socket_address(int fd) {
        struct sockaddr_storage sa = {};
        socklen_t len = sizeof(sa);
        char text[INET6_ADDRSTRLEN];
        const void *addr;
        unsigned port;

        if (fd < 0 || getsockname(fd, (struct sockaddr *) &sa, &len) < 0)
                return json_null();
        if (sa.ss_family == AF_INET) {
                addr = &((struct sockaddr_in *) &sa)->sin_addr;
                port = ntohs(((struct sockaddr_in *) &sa)->sin_port);
        } else if (sa.ss_family == AF_INET6) {
                addr = &((struct sockaddr_in6 *) &sa)->sin6_addr;
                port = ntohs(((struct sockaddr_in6 *) &sa)->sin6_port);
        } else
                return json_null();
        if (!inet_ntop(sa.ss_family, addr, text, sizeof(text)))
                return json_null();
        return json_pack("{s:s,s:I}", "address", text, "port", (json_int_t) port);
}

int control_send_hello(Proxy *p) {
        _cleanup_(json_decrefp) json_t *m = NULL;
        json_t *listen = json_array();
        int r;

        for (size_t i = 0; listen && i < p->n_listen; i++)
                (void) json_array_append_new(listen, socket_address(p->listen_fds[i]));
        m = listen ? json_pack("{s:s,s:I,s:o,s:o}", "type", "hello", "pid", (json_int_t) getpid(),
                               "listen", listen, "metrics", socket_address(p->metrics_fd))
                   : NULL;
        if (!m)
                return log_oom();
        r = ipc_send(p->ipc_fd, m);
        if (r < 0)
                return log_warning_errno(r, "Failed to greet slotd: %m");
        return 0;
}

static int on_orphan_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Proxy *p = userdata;

        log_info("slotd is gone and no connection is left: exiting");
        return sd_event_exit(p->event, 0);
}

void control_orphan_update(Proxy *p) {
        int state = sd_event_get_state(p->event), r;

        if (state == SD_EVENT_EXITING || state == SD_EVENT_FINISHED)
                return; /* going anyway */
        if (p->ipc_fd >= 0 || p->n_conns > 0) {
                p->orphan_timer = sd_event_source_disable_unref(p->orphan_timer);
                return;
        }
        if (p->orphan_timer)
                return;
        r = sd_event_add_time_relative(p->event, &p->orphan_timer, CLOCK_MONOTONIC,
                                       PROXY_ORPHAN_GRACE_USEC, 0, on_orphan_timer, p);
        if (r < 0) {
                log_warning_errno(r, "Failed to arm the orphan timer, exiting now: %m");
                (void) sd_event_exit(p->event, 0);
        }
}

int control_ipc_lost(Proxy *p) {
        if (p->control_fd < 0) {
                log_debug("slotd closed the IPC socket, exiting");
                return sd_event_exit(p->event, 0);
        }
        proxy_ipc_detach(p);
        log_info("slotd is gone; keeping %u connections for the next slotd", p->n_conns);
        control_orphan_update(p);
        return 0;
}

/* Only root attaches: slotd runs as root; any other process that can reach the socket (its
 * directory is slotd's state_dir) is refused. */
static bool peer_is_root(int fd) {
        struct ucred cred = {};
        socklen_t len = sizeof(cred);

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return false;
        if (cred.uid == 0)
                return true;
        log_warning("Refusing a control connection from uid %u (process %d): only slotd "
                    "attaches", (unsigned) cred.uid, (int) cred.pid);
        return false;
}

static int on_control(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Proxy *p = userdata;

        for (unsigned i = 0; i < 8; i++) {
                int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                int r;

                if (c < 0) {
                        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                                log_warning_errno(errno, "Failed to accept on the control socket: %m");
                        return 0;
                }
                if (!peer_is_root(c)) {
                        safe_close(c);
                        continue;
                }
                /* A newer slotd: the one attached (if any) is gone or going. */
                log_info("slotd attached; serving %u connections", p->n_conns);
                r = proxy_ipc_attach(p, c);
                if (r < 0) {
                        log_warning_errno(r, "Failed to attach slotd: %m");
                        proxy_ipc_detach(p);
                        control_orphan_update(p);
                }
        }
        return 0;
}

/* slotd bound the socket; it listens here, so that the credentials a connecting slotd reads
 * (SO_PEERCRED: the listener's, as of listen()) are this process's: its PID and its user. */
int control_start(Proxy *p) {
        if (p->control_fd < 0)
                return 0;
        if (listen(p->control_fd, 8) < 0)
                return log_error_errno(errno, "Failed to listen on the control socket: %m");
        return sd_event_add_io(p->event, &p->control_source, p->control_fd, EPOLLIN, on_control,
                               p);
}

void control_done(Proxy *p) {
        p->control_source = sd_event_source_disable_unref(p->control_source);
        p->orphan_timer = sd_event_source_disable_unref(p->orphan_timer);
        p->control_fd = safe_close(p->control_fd);
}
