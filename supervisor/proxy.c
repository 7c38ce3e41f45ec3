/* SPDX-License-Identifier: MIT */
/* slotd's side of the local proxy: its sockets, its process, its channel (proxy.h). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "confine.h"
#include "ipc.h"
#include "log.h"
#include "manager.h"
#include "proxy-internal.h"
#include "slotd-config.h"
#include "sockdiag.h"
#include "spawn.h"

#define RESTART_MIN_USEC (100 * USEC_PER_MSEC)
#define RESTART_MAX_USEC (10 * USEC_PER_SEC)
/* A proxy that ran this long before it died is restarted without delay. */
#define RESTART_RESET_USEC (60 * USEC_PER_SEC)
#define IPC_BUFFER_BYTES (4 * 1024 * 1024)
#define CONNS_MAX 65536

Manager *proxy_manager(Proxy *p) {
        return p->manager;
}

uint64_t proxy_generation(Proxy *p) {
        return p->generation;
}

int proxy_send(Proxy *p, json_t *message) {
        int r;

        if (p->ipc_fd < 0)
                return -ENOTCONN;
        r = ipc_send(p->ipc_fd, message);
        if (r < 0)
                log_warning_errno(r, "Failed to send a message to the local proxy, dropped: %m");
        return r;
}

static void conn_free(void *c) {
        free(c);
}

ProxyConn *proxy_conn(Proxy *p, uint64_t conn) {
        char key[24];

        (void) snprintf(key, sizeof(key), "%" PRIu64, conn);
        return hashmap_get(&p->conns, key);
}

/* An address of the proxy's "conn" message. */
static int parse_endpoint(json_t *msg, const char *addr_key, const char *port_key,
                          struct sockaddr_storage *ret) {
        const char *text = json_string_value(json_object_get(msg, addr_key));
        json_int_t port = json_integer_value(json_object_get(msg, port_key));
        struct sockaddr_in *in = (struct sockaddr_in *) ret;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) ret;

        if (!text || port <= 0 || port > 65535)
                return -EBADMSG;
        memset(ret, 0, sizeof(*ret));
        if (inet_pton(AF_INET, text, &in->sin_addr) == 1) {
                in->sin_family = AF_INET;
                in->sin_port = htons((uint16_t) port);
                return 0;
        }
        if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t) port);
                return 0;
        }
        return -EBADMSG;
}

/* Root, or a member of supervisor.admin_group, from the uid that made the socket. */
static bool uid_is_admin(Manager *m, uid_t uid) {
        struct passwd pw, *found = NULL;
        gid_t groups[256];
        int n = (int) ELEMENTSOF(groups);
        char buf[4096];

        if (uid == 0)
                return true;
        if (!m->config_has_admin_gid)
                return false;
        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) != 0 || !found)
                return false;
        if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
                return false;
        for (int i = 0; i < n; i++)
                if (groups[i] == m->config_admin_gid)
                        return true;
        return false;
}

/* Who is at the other end: the cgroup its socket was made in names its slot. */
static void conn_identify(Proxy *p, json_t *msg, ProxyConn *c) {
        struct sockaddr_storage local, peer;
        _cleanup_free_ char *path = NULL;
        SockDiagPeer d;
        Slot *s;
        int r;

        c->slot_id = OPS_NO_SLOT;
        if (parse_endpoint(msg, "local", "local_port", &local) < 0 ||
            parse_endpoint(msg, "peer", "peer_port", &peer) < 0 || local.ss_family != peer.ss_family)
                return;
        r = sockdiag_lookup_tcp(p->diag_fd, (struct sockaddr *) &peer, (struct sockaddr *) &local, &d);
        if (r < 0) {
                /* ENOENT: the client is already gone. Anything else means no caller can be
                 * known (no tcp_diag in this kernel, say): say so once, loudly. */
                if (r != -ENOENT && !p->diag_warned) {
                        log_error_errno(r, "Local proxy: cannot tell which slot a caller is in "
                                        "(NETLINK_SOCK_DIAG for TCP: %m); its requests are "
                                        "refused until this works");
                        p->diag_warned = true;
                } else
                        log_debug_errno(r, "Local proxy: no socket found for connection %" PRIu64
                                        ": %m", c->id);
                return;
        }
        r = cg_path_from_id(p->mount_fd, p->manager->cgroup_mount, d.cgroup_id, &path);
        s = r >= 0 ? manager_slot_by_cgroup_path(p->manager, path) : NULL;
        if (s)
                c->slot_id = s->id;
        else
                c->admin = uid_is_admin(p->manager, d.uid);
}

static void handle_conn(Proxy *p, json_t *msg) {
        json_int_t id = json_integer_value(json_object_get(msg, "conn"));
        _cleanup_(json_decrefp) json_t *reply = NULL;
        ProxyConn *c;

        if (id <= 0 || proxy_conn(p, (uint64_t) id) || p->conns.size >= CONNS_MAX)
                return;
        c = new0(ProxyConn, 1);
        if (!c)
                return (void) log_oom();
        c->id = (uint64_t) id;
        (void) snprintf(c->key, sizeof(c->key), "%" PRIu64, c->id);
        conn_identify(p, msg, c);
        if (hashmap_put(&p->conns, c->key, c) < 0) {
                free(c);
                return;
        }
        reply = json_pack("{s:s, s:I, s:o, s:b}", "type", "conn", "conn", (json_int_t) c->id,
                          "slot", c->slot_id == OPS_NO_SLOT ? json_null() : json_integer(c->slot_id),
                          "admin", c->admin);
        if (reply)
                (void) proxy_send(p, reply);
}

static void handle_close(Proxy *p, json_t *msg) {
        json_int_t id = json_integer_value(json_object_get(msg, "conn"));
        ProxyConn *c = id > 0 ? proxy_conn(p, (uint64_t) id) : NULL;

        if (c)
                free(hashmap_remove(&p->conns, c->key, c));
}

static void proxy_dispatch(Proxy *p, json_t *msg) {
        const char *type = json_string_value(json_object_get(msg, "type"));

        if (streq(type, "conn"))
                handle_conn(p, msg);
        else if (streq(type, "close"))
                handle_close(p, msg);
        else if (streq(type, "request"))
                proxy_handle_request(p, msg);
        else if (streq(type, "metrics"))
                proxy_handle_metrics(p, msg);
        else
                log_debug("Local proxy: unknown message type '%s', ignoring", type);
}

/* At most this many messages per wake-up: the rest of the loop gets its turn. */
#define IPC_BATCH 64

static void proxy_stop_process(Proxy *p);

static int proxy_on_ipc(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Proxy *p = userdata;

        for (unsigned i = 0; i < IPC_BATCH; i++) {
                _cleanup_(json_decrefp) json_t *msg = NULL;
                int r = ipc_receive(fd, &msg);

                if (r == -EAGAIN)
                        return 0;
                if (r == -EBADMSG) {
                        log_warning("Local proxy sent a malformed message, ignoring");
                        continue;
                }
                if (r < 0) {
                        /* Gone: its exit (child source) restarts it. */
                        p->ipc_source = sd_event_source_disable_unref(p->ipc_source);
                        return 0;
                }
                proxy_dispatch(p, msg);
        }
        return 0;
}

void proxy_send_event(Proxy *p, const AllocEvent *e) {
        _cleanup_(json_decrefp) json_t *msg = NULL;
        char event_id[37], epoch[24];

        if (p->ipc_fd < 0 || p->n_listen == 0) /* running for metrics.listen alone */
                return;
        alloc_event_id(p->manager->epoch, e->slot_id, e->offset, event_id);
        (void) snprintf(epoch, sizeof(epoch), "%" PRIx64, p->manager->epoch);
        msg = json_pack("{s:s, s:I, s:s, s:I, s:s, s:s, s:s}", "type", "event", "server",
                        (json_int_t) e->slot_id, "epoch", epoch, "offset", (json_int_t) e->offset,
                        "event_type", e->allocate ? "AllocateEventType" : "DeallocateEventType",
                        "event_id", event_id, "allocation", e->uuid);
        if (!msg || proxy_send(p, msg) >= 0 || p->pid <= 0)
                return;
        /* The proxy is that far behind (its 4 MiB buffer full) or its socket broke: the
         * event would be lost for the connections it holds. Restart it instead: its clients
         * reconnect and recover from the offsets slotd keeps, so each connection still sees
         * every allocation at least once (SPEC §11). Its exit handler restarts it. */
        log_warning("Local proxy: event %s of slot %u not delivered; restarting the proxy so "
                    "that its clients recover it", event_id, e->slot_id);
        (void) kill(p->pid, SIGKILL);
}

/* slotd-proxy next to slotd's own binary (a build tree, or an install that keeps both in one
 * place), else in libexecdir, as for slotd-keeper. */
static int open_proxy_exe(char **ret_path) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

        self[MAX(n, (ssize_t) 0)] = '\0';
        return spawn_open_helper(n > 0 ? self : NULL, "slotd-proxy", SLOTD_PROXY_PATH, ret_path);
}

static int bind_one(const ProxyListen *l) {
        union {
                struct sockaddr sa;
                struct sockaddr_in in;
                struct sockaddr_in6 in6;
        } a = {};
        _cleanup_close_ int fd = -EBADF;
        socklen_t len;
        int one = 1;

        if (l->family == AF_INET) {
                a.in = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(l->port),
                                             .sin_addr = l->address.in };
                len = sizeof(a.in);
        } else {
                a.in6 = (struct sockaddr_in6){ .sin6_family = AF_INET6,
                                               .sin6_port = htons(l->port),
                                               .sin6_addr = l->address.in6 };
                len = sizeof(a.in6);
        }
        fd = socket(l->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (l->family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, &a.sa, len) < 0 || listen(fd, SOMAXCONN) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

static int proxy_bind(Proxy *p) {
        const LocalProxyConfig *lp = &p->manager->config->localproxy;

        p->listen_fds = new0(int, MAX(lp->n_listen, (size_t) 1));
        if (!p->listen_fds)
                return log_oom();
        for (size_t i = 0; i < lp->n_listen; i++) {
                int fd = bind_one(&lp->listen[i]);

                /* The default [::1]:8086 on a host without IPv6 (disabled, or not built in):
                 * the other default serves. An address the key names is never skipped. */
                if (fd < 0 && lp->listen_default && lp->listen[i].family == AF_INET6 &&
                    (fd == -EADDRNOTAVAIL || fd == -EAFNOSUPPORT)) {
                        log_warning_errno(fd, "Not listening on %s (localproxy.listen's default): "
                                          "%m; IPv6 is off on this host", lp->listen[i].text);
                        continue;
                }
                if (fd < 0)
                        return log_error_errno(fd, "Failed to listen on %s (localproxy.listen): %m",
                                               lp->listen[i].text);
                p->listen_fds[p->n_listen++] = fd;
        }
        if (lp->n_listen > 0 && p->n_listen == 0)
                return log_error_errno(-EADDRNOTAVAIL, "No address of localproxy.listen to listen on");
        if (p->manager->config->metrics_listen.family != AF_UNSPEC) {
                p->metrics_fd = bind_one(&p->manager->config->metrics_listen);
                if (p->metrics_fd < 0)
                        return log_error_errno(p->metrics_fd,
                                               "Failed to listen on %s (metrics.listen): %m",
                                               p->manager->config->metrics_listen.text);
        }
        return 0;
}

/* In the child: every fd the proxy gets is first copied above all the numbers they are then
 * placed at (3, 4, ...), so that no placement overwrites one still to come. */
static int place_fds(Proxy *p, int child_fd, int ret_placed[static 19], size_t *ret_n) {
        int high[19];
        size_t n = 0;

        high[n++] = fcntl(child_fd, F_DUPFD, 64);
        for (size_t i = 0; i < p->n_listen && i < 16; i++)
                high[n++] = fcntl(p->listen_fds[i], F_DUPFD, 64);
        if (p->metrics_fd >= 0)
                high[n++] = fcntl(p->metrics_fd, F_DUPFD, 64);
        high[n++] = fcntl(p->exe_fd, F_DUPFD, 64);
        for (size_t i = 0; i < n; i++) {
                if (high[i] < 0 || dup2(high[i], 3 + (int) i) < 0)
                        return -1;
                ret_placed[i] = 3 + (int) i;
        }
        *ret_n = n;
        return 0;
}

/* In the child, between fork and exec: the channel as fd 3, the listening sockets from fd 4,
 * then metrics.listen's, nothing else; then the identity and the filter of a game server. */
_noreturn_ static void proxy_exec_child(Proxy *p, int child_fd) {
        const char *step = "dup";
        char fds[17][16];
        char *argv[3 + 2 * 17 + 1] = { (char *) "slotd-proxy", (char *) "--ipc-fd", (char *) "3" };
        char *envp[] = { (char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL, NULL };
        const char *level = getenv("SLOTD_LOG_LEVEL");
        char level_env[64];
        int placed[19], exe;
        size_t argc = 3, n;
        sigset_t all;

        (void) prctl(PR_SET_PDEATHSIG, SIGTERM);
        (void) sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        for (int sig = 1; sig < _NSIG; sig++)
                (void) signal(sig, SIG_DFL);
        if (place_fds(p, child_fd, placed, &n) < 0)
                goto fail;
        for (size_t i = 1; i + 1 < n; i++) {
                bool metrics = p->metrics_fd >= 0 && i + 2 == n;

                (void) snprintf(fds[i - 1], sizeof(fds[i - 1]), "%d", placed[i]);
                argv[argc++] = (char *) (metrics ? "--metrics-fd" : "--listen-fd");
                argv[argc++] = fds[i - 1];
        }
        argv[argc] = NULL;
        /* The program itself, to exec by descriptor: no path lookup as another user. */
        exe = placed[n - 1];
        if (fcntl(exe, F_SETFD, FD_CLOEXEC) < 0)
                goto fail;
        (void) close_range((unsigned) exe + 1, ~0U, 0);
        if (level && snprintf(level_env, sizeof(level_env), "SLOTD_LOG_LEVEL=%s", level) <
                             (int) sizeof(level_env))
                envp[1] = level_env;
        if (confine_apply(&(ConfineParams){ .uid = p->uid, .gid = p->gid, .nofile = 4096,
                                            .seccomp = p->seccomp },
                          &step) < 0)
                goto fail;
        step = "execve";
        (void) execveat(exe, "", argv, envp, AT_EMPTY_PATH);
fail:
        dprintf(STDERR_FILENO, "slotd: local proxy: %s failed: %s\n", step, strerror(errno));
        _exit(EXIT_FAILURE);
}

static int proxy_on_exit(sd_event_source *source, const siginfo_t *si, void *userdata);

/* Beyond net.core.wmem_max (208 KiB by default) where slotd may: a burst of events, or a
 * scrape's text in its parts (proxy-metrics.c), waits in it rather than being dropped. */
static void set_send_buffer(int fd, int size) {
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
                (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
}

static int proxy_spawn(Proxy *p) {
        int pair[2];
        pid_t pid;
        int r, size = IPC_BUFFER_BYTES;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return negative_errno();
        set_send_buffer(pair[0], size);
        set_send_buffer(pair[1], size);
        pid = fork();
        if (pid < 0) {
                r = negative_errno();
                (void) close(pair[0]);
                (void) close(pair[1]);
                return r;
        }
        if (pid == 0)
                proxy_exec_child(p, pair[1]);
        (void) close(pair[1]);
        (void) fcntl(pair[0], F_SETFL, O_NONBLOCK);
        p->ipc_fd = pair[0];
        p->pid = pid;
        p->generation++;
        p->started_at = now_usec(CLOCK_MONOTONIC);
        r = sd_event_add_io(p->manager->event, &p->ipc_source, p->ipc_fd, EPOLLIN, proxy_on_ipc, p);
        if (r >= 0)
                r = sd_event_add_child(p->manager->event, &p->child_source, pid, WEXITED,
                                       proxy_on_exit, p);
        if (r < 0) {
                proxy_stop_process(p);
                return r;
        }
        log_info("Local proxy started as process %d on %zu addresses%s%s", (int) pid, p->n_listen,
                 p->metrics_fd >= 0 ? ", metrics on " : "",
                 p->metrics_fd >= 0 ? p->manager->config->metrics_listen.text : "");
        return 0;
}

static int proxy_on_restart(sd_event_source *source, uint64_t usec, void *userdata) {
        Proxy *p = userdata;
        int r;

        p->restart_timer = sd_event_source_disable_unref(p->restart_timer);
        r = proxy_spawn(p);
        if (r < 0) {
                log_error_errno(r, "Failed to restart the local proxy, trying again: %m");
                p->restart_delay = MIN(MAX(p->restart_delay * 2, RESTART_MIN_USEC), RESTART_MAX_USEC);
                (void) sd_event_add_time_relative(p->manager->event, &p->restart_timer,
                                                  CLOCK_MONOTONIC, p->restart_delay, 0,
                                                  proxy_on_restart, p);
        }
        return 0;
}

/* Its connections die with it (they were its sockets); the SDKs reconnect to the next one,
 * which the listening sockets, kept here, already queue for. */
static void proxy_stop_process(Proxy *p) {
        p->ipc_source = sd_event_source_disable_unref(p->ipc_source);
        p->child_source = sd_event_source_disable_unref(p->child_source);
        p->ipc_fd = safe_close(p->ipc_fd);
        hashmap_done_free(&p->conns, conn_free);
        p->conns = (Hashmap){};
        p->pid = 0;
}

static int proxy_on_exit(sd_event_source *source, const siginfo_t *si, void *userdata) {
        Proxy *p = userdata;
        usec_t ran = now_usec(CLOCK_MONOTONIC) - p->started_at;

        if (si->si_code == CLD_EXITED)
                log_warning("Local proxy exited with code %d, restarting it", si->si_status);
        else
                log_warning("Local proxy killed by signal SIG%s, restarting it",
                            sigabbrev_np(si->si_status) ?: "?");
        proxy_stop_process(p);
        p->restart_delay = ran >= RESTART_RESET_USEC
                                   ? 0
                                   : MIN(MAX(p->restart_delay * 2, RESTART_MIN_USEC),
                                         RESTART_MAX_USEC);
        (void) sd_event_add_time_relative(p->manager->event, &p->restart_timer, CLOCK_MONOTONIC,
                                          p->restart_delay, 0, proxy_on_restart, p);
        return 0;
}

static int proxy_identity(Proxy *p) {
        const LocalProxyConfig *lp = &p->manager->config->localproxy;
        struct passwd *pw = getpwnam(lp->user);
        struct group *gr = getgrnam(lp->group);

        if (!pw)
                return log_error_errno(-ESRCH, "localproxy.user: no user '%s'", lp->user);
        if (!gr)
                return log_error_errno(-ESRCH, "localproxy.group: no group '%s'", lp->group);
        p->uid = pw->pw_uid;
        p->gid = gr->gr_gid;
        return 0;
}

static int proxy_setup(Proxy *p) {
        _cleanup_free_ char *path = NULL;
        scmp_filter_ctx ctx = NULL;
        bool keeper;
        int r;

        p->exe_fd = open_proxy_exe(&path);
        if (p->exe_fd < 0)
                return log_error_errno(p->exe_fd, "Cannot run the local proxy %s: %m (it serves "
                                       "localproxy.listen and metrics.listen)",
                                       path ?: "slotd-proxy");
        if ((r = proxy_identity(p)) < 0)
                return r;
        p->diag_fd = sockdiag_open();
        if (p->diag_fd < 0)
                return log_error_errno(p->diag_fd, "Failed to open NETLINK_SOCK_DIAG: %m");
        p->mount_fd = open(p->manager->cgroup_mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (p->mount_fd < 0)
                return log_error_errno(errno, "Failed to open %s: %m", p->manager->cgroup_mount);
        r = confine_seccomp_new(NULL, false, &ctx, &keeper, NULL);
        if (r >= 0) {
                r = confine_seccomp_program(ctx, &p->seccomp);
                seccomp_release(ctx);
        }
        if (r < 0)
                return log_error_errno(r, "Failed to build the local proxy's seccomp filter: %m");
        return proxy_bind(p);
}

int proxy_new(Manager *m, Proxy **ret) {
        Proxy *p;
        int r;

        *ret = NULL;
        if ((!m->config->localproxy.enabled || m->config->localproxy.n_listen == 0) &&
            m->config->metrics_listen.family == AF_UNSPEC)
                return 0;
        p = new0(Proxy, 1);
        if (!p)
                return log_oom();
        *p = (Proxy){ .manager = m, .ipc_fd = -EBADF, .diag_fd = -EBADF, .mount_fd = -EBADF,
                      .exe_fd = -EBADF, .metrics_fd = -EBADF };
        r = proxy_setup(p);
        if (r >= 0) {
                r = proxy_spawn(p);
                if (r < 0)
                        log_error_errno(r, "Failed to start the local proxy: %m");
        }
        if (r < 0) {
                proxy_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

Proxy *proxy_free(Proxy *p) {
        if (!p)
                return NULL;
        if (p->pid > 0)
                (void) kill(p->pid, SIGTERM);
        proxy_stop_process(p);
        p->restart_timer = sd_event_source_disable_unref(p->restart_timer);
        for (size_t i = 0; i < p->n_listen; i++)
                safe_close(p->listen_fds[i]);
        free(p->listen_fds);
        safe_close(p->metrics_fd);
        safe_close(p->diag_fd);
        safe_close(p->mount_fd);
        safe_close(p->exe_fd);
        confine_seccomp_program_free(p->seccomp);
        free(p);
        return NULL;
}
