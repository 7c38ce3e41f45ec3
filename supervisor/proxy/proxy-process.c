/* SPDX-License-Identifier: MIT */
/* The local proxy's process: started unprivileged and confined, attached to again when slotd
 * restarts (it outlives slotd, localproxy/control.c), restarted with back-off when it dies. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

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
/* At start-up, a proxy attached to must say what it serves within this, and one replaced
 * must be gone within this (then SIGKILL, and as long again). */
#define HELLO_TIMEOUT_MSEC 2000
#define RETIRE_TIMEOUT_MSEC 5000
/* The fds a proxy gets: the channel, the control socket, 16 listeners, metrics, itself. */
#define PROXY_FDS_MAX 20

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

/* The default [::1]:8086 on a host without IPv6 (disabled, or not built in): the other
 * default serves. An address the key names is never skipped. */
static bool may_skip(const LocalProxyConfig *lp, const ProxyListen *l, int error) {
        return lp->listen_default && l->family == AF_INET6 &&
               (error == -EADDRNOTAVAIL || error == -EAFNOSUPPORT);
}

/* The listening sockets, bound once and kept: a restarted proxy gets the same ones, so the
 * port never closes. A proxy attached to holds its own; they are bound when it is replaced. */
static int proxy_bind(Proxy *p) {
        const LocalProxyConfig *lp = &p->manager->config->localproxy;

        if (p->bound)
                return 0;
        for (size_t i = 0; i < lp->n_listen && p->serves_sdk; i++) {
                int fd = bind_one(&lp->listen[i]);

                if (fd < 0 && may_skip(lp, &lp->listen[i], fd)) {
                        log_warning_errno(fd, "Not listening on %s (localproxy.listen's default): "
                                          "%m; IPv6 is off on this host", lp->listen[i].text);
                        continue;
                }
                if (fd < 0)
                        return log_error_errno(fd, "Failed to listen on %s (localproxy.listen): %m",
                                               lp->listen[i].text);
                p->listen_fds[p->n_listen++] = fd;
        }
        if (p->serves_sdk && p->n_listen == 0)
                return log_error_errno(-EADDRNOTAVAIL, "No address of localproxy.listen to listen on");
        if (p->metrics_listen.family != AF_UNSPEC && p->metrics_fd < 0) {
                int fd = proxy_bind_metrics(&p->metrics_listen);

                if (fd < 0 && p->metrics_default && (fd == -EADDRINUSE || fd == -EADDRNOTAVAIL)) {
                        log_warning_errno(fd, "Not serving metrics: %s (metrics.listen's default) "
                                          "cannot be bound: %m; set metrics.listen to another "
                                          "address, or off", p->metrics_listen.text);
                        (void) proxy_set_metrics(p, &(ProxyListen){}, false, -EBADF);
                } else if (fd < 0)
                        return log_error_errno(fd, "Failed to listen on %s (metrics.listen): %m",
                                               p->metrics_listen.text);
                else
                        p->metrics_fd = fd;
        }
        p->bound = true;
        return 0;
}

int proxy_bind_metrics(const ProxyListen *l) {
        return bind_one(l);
}

int proxy_set_metrics(Proxy *p, const ProxyListen *l, bool is_default, int fd) {
        char *text = NULL;

        if (l->text && !(text = strdup(l->text))) {
                safe_close(fd);
                return -ENOMEM;
        }
        free(p->metrics_listen.text);
        p->metrics_listen = *l;
        p->metrics_listen.text = text;
        p->metrics_default = is_default;
        safe_close(p->metrics_fd);
        p->metrics_fd = fd;
        return 0;
}

static void proxy_unbind(Proxy *p) {
        for (size_t i = 0; i < p->n_listen; i++)
                p->listen_fds[i] = safe_close(p->listen_fds[i]);
        p->n_listen = 0;
        p->metrics_fd = safe_close(p->metrics_fd);
        p->bound = false;
}

/* The control socket a proxy we start listens on for the next slotd (root only: 0600, and
 * the proxy checks the caller is root). Bound here, listened on by the proxy: a slotd that
 * connects then reads the proxy's own PID and uid from it (SO_PEERCRED). -EBADF where there
 * can be none: the proxy then exits with its slotd. */
static int control_listen(Proxy *p) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;

        if (!p->control_path || strlen(p->control_path) >= sizeof(sa.sun_path)) {
                log_warning("Local proxy: no control socket (%s is too long); it will not "
                            "outlive slotd", p->control_path ?: "(none)");
                return -EBADF;
        }
        strcpy(sa.sun_path, p->control_path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
                (void) unlink(p->control_path);
                if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
                    chmod(p->control_path, 0600) < 0)
                        fd = safe_close(fd);
        }
        if (fd < 0)
                log_warning_errno(errno, "Local proxy: no control socket at %s (%m); it will not "
                                  "outlive slotd", p->control_path);
        return TAKE_FD(fd);
}

/* In the child: every fd the proxy gets is first copied above the numbers they are then
 * placed at (3, 4, ...), so that no placement overwrites one still to come. */
static int place_fds(int *fds, size_t n) {
        int high[PROXY_FDS_MAX];

        for (size_t i = 0; i < n; i++)
                if ((high[i] = fcntl(fds[i], F_DUPFD, 64)) < 0)
                        return -1;
        for (size_t i = 0; i < n; i++)
                if (dup2(high[i], 3 + (int) i) < 0)
                        return -1;
        return 0;
}

/* The proxy's command line and the fds it names, its own binary last (fd 3 + n - 1). */
typedef struct ProxyArgs {
        int fds[PROXY_FDS_MAX];
        char numbers[PROXY_FDS_MAX][12];
        char *argv[2 * PROXY_FDS_MAX + 2];
        size_t n_fds, argc;
} ProxyArgs;

static void args_add(ProxyArgs *a, const char *option, int fd) {
        a->fds[a->n_fds] = fd;
        if (option) {
                (void) snprintf(a->numbers[a->n_fds], sizeof(a->numbers[0]), "%zu", 3 + a->n_fds);
                a->argv[a->argc++] = (char *) option;
                a->argv[a->argc++] = a->numbers[a->n_fds];
        }
        a->n_fds++;
}

static void args_build(Proxy *p, int child_fd, int control_fd, ProxyArgs *a) {
        a->argv[a->argc++] = (char *) "slotd-proxy";
        args_add(a, "--ipc-fd", child_fd);
        if (control_fd >= 0)
                args_add(a, "--control-fd", control_fd);
        for (size_t i = 0; i < p->n_listen && i < 16; i++)
                args_add(a, "--listen-fd", p->listen_fds[i]);
        if (p->metrics_fd >= 0)
                args_add(a, "--metrics-fd", p->metrics_fd);
        args_add(a, NULL, p->exe_fd);
        a->argv[a->argc] = NULL;
}

/* In the child, between fork and exec: the fds ProxyArgs names, nothing else; then the
 * identity and the filter of a game server. No parent-death signal: the proxy outlives
 * slotd, for the next one to attach to. */
_noreturn_ static void proxy_exec_child(Proxy *p, int child_fd, int control_fd) {
        const char *step = "dup";
        char *envp[] = { (char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL, NULL };
        const char *level = getenv("SLOTD_LOG_LEVEL");
        char level_env[64];
        ProxyArgs a = {};
        sigset_t all;
        int exe;

        (void) sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        for (int sig = 1; sig < _NSIG; sig++)
                (void) signal(sig, SIG_DFL);
        args_build(p, child_fd, control_fd, &a);
        if (place_fds(a.fds, a.n_fds) < 0)
                goto fail;
        /* The program itself, to exec by descriptor: no path lookup as another user. */
        exe = 3 + (int) a.n_fds - 1;
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
        (void) execveat(exe, "", a.argv, envp, AT_EMPTY_PATH);
fail:
        dprintf(STDERR_FILENO, "slotd: local proxy: %s failed: %s\n", step, strerror(errno));
        _exit(EXIT_FAILURE);
}

/* Beyond net.core.wmem_max (208 KiB by default) where slotd may: a burst of events, or a
 * scrape's text in its parts (proxy-metrics.c), waits in it rather than being dropped. */
static void set_send_buffer(int fd) {
        int size = IPC_BUFFER_BYTES;

        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
                (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
}

static int proxy_on_exit(sd_event_source *source, const siginfo_t *si, void *userdata);
static int proxy_on_adopted_exit(sd_event_source *source, int fd, uint32_t revents,
                                 void *userdata);

/* Its exit: a child's through its pidfd (its status); another's (a proxy an earlier slotd
 * started, reparented when that slotd died) only as the pidfd turning readable. */
static int proxy_watch(Proxy *p, pid_t pid, int pidfd) {
        int r;

        if (pid_is_our_child(pid)) {
                r = sd_event_add_child_pidfd(p->manager->event, &p->exit_source, pidfd, WEXITED,
                                             proxy_on_exit, p);
                if (r >= 0)
                        (void) sd_event_source_set_child_pidfd_own(p->exit_source, true);
        } else {
                r = sd_event_add_io(p->manager->event, &p->exit_source, pidfd, EPOLLIN,
                                    proxy_on_adopted_exit, p);
                if (r >= 0)
                        (void) sd_event_source_set_io_fd_own(p->exit_source, true);
        }
        if (r < 0)
                safe_close(pidfd);
        return r;
}

/* The channel to a proxy, ours or attached to. */
static int proxy_connected(Proxy *p, int fd, pid_t pid, int pidfd) {
        int r;

        (void) fcntl(fd, F_SETFL, O_NONBLOCK);
        set_send_buffer(fd);
        p->ipc_fd = fd;
        p->pid = pid;
        p->generation++;
        p->started_at = now_usec(CLOCK_MONOTONIC);
        r = sd_event_add_io(p->manager->event, &p->ipc_source, p->ipc_fd, EPOLLIN, proxy_on_ipc, p);
        if (r >= 0)
                r = proxy_watch(p, pid, pidfd);
        else
                safe_close(pidfd);
        return r;
}

/* The filter of a game server with the default settings; built at the first spawn, which
 * start-up leaves to the event loop (proxy_start()). */
static int proxy_seccomp(Proxy *p) {
        bool keeper;
        int r;

        if (p->seccomp)
                return 0;
        r = confine_seccomp_default(false, &p->seccomp, &keeper);
        if (r < 0)
                return log_error_errno(r, "Failed to build the local proxy's seccomp filter: %m");
        return 0;
}

static int proxy_spawn(Proxy *p) {
        _cleanup_close_ int control_fd = -EBADF;
        int pair[2], pidfd, r;
        pid_t pid;

        r = proxy_bind(p);
        if (r < 0)
                return r;
        r = proxy_seccomp(p);
        if (r < 0)
                return r;
        control_fd = control_listen(p);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return negative_errno();
        set_send_buffer(pair[1]);
        pid = fork();
        if (pid < 0) {
                r = negative_errno();
                (void) close(pair[0]);
                (void) close(pair[1]);
                return r;
        }
        if (pid == 0)
                proxy_exec_child(p, pair[1], control_fd);
        (void) close(pair[1]);
        pidfd = pidfd_open_wrapper(pid);
        r = pidfd < 0 ? pidfd : proxy_connected(p, pair[0], pid, pidfd);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                if (p->ipc_fd != pair[0])
                        (void) close(pair[0]);
                proxy_stop_process(p);
                return r;
        }
        log_info("Local proxy started as process %d on %zu addresses%s%s", (int) pid, p->n_listen,
                 p->metrics_fd >= 0 ? ", metrics on " : "",
                 p->metrics_fd >= 0 ? p->metrics_listen.text : "");
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
void proxy_stop_process(Proxy *p) {
        p->ipc_source = sd_event_source_disable_unref(p->ipc_source);
        p->exit_source = sd_event_source_disable_unref(p->exit_source);
        p->ipc_fd = safe_close(p->ipc_fd);
        proxy_forget_conns(p);
        p->pid = 0;
}

/* sd-event reaps the child after this returns, and disables the source: it stays, floating,
 * until the loop goes (one per Reload that stops the proxy). Unreferenced here, sd-event's
 * reaping would touch a freed source. */
static int on_terminated(sd_event_source *s, const siginfo_t *si, void *userdata) {
        log_info("Local proxy %d has exited", (int) si->si_pid);
        return 0;
}

void proxy_terminate_process(Proxy *p) {
        pid_t pid = p->pid;

        p->restart_timer = sd_event_source_disable_unref(p->restart_timer);
        proxy_stop_process(p);
        if (pid <= 0)
                return;
        (void) kill(pid, SIGTERM);
        /* Ours is reaped when it exits (sd-event does, for a child source); one an earlier
         * slotd started is not our child. */
        if (pid_is_our_child(pid) &&
            sd_event_add_child(p->manager->event, NULL, pid, WEXITED, on_terminated, NULL) < 0)
                log_warning("Local proxy %d will not be reaped before slotd exits", (int) pid);
}

static void proxy_exited(Proxy *p) {
        usec_t ran = now_usec(CLOCK_MONOTONIC) - p->started_at;

        proxy_stop_process(p);
        p->restart_delay = ran >= RESTART_RESET_USEC
                                   ? 0
                                   : MIN(MAX(p->restart_delay * 2, RESTART_MIN_USEC),
                                         RESTART_MAX_USEC);
        (void) sd_event_add_time_relative(p->manager->event, &p->restart_timer, CLOCK_MONOTONIC,
                                          p->restart_delay, 0, proxy_on_restart, p);
}

static int proxy_on_exit(sd_event_source *source, const siginfo_t *si, void *userdata) {
        Proxy *p = userdata;

        if (si->si_code == CLD_EXITED)
                log_warning("Local proxy exited with code %d, restarting it", si->si_status);
        else
                log_warning("Local proxy killed by signal SIG%s, restarting it",
                            sigabbrev_np(si->si_status) ?: "?");
        proxy_exited(p);
        return 0;
}

static int proxy_on_adopted_exit(sd_event_source *source, int fd, uint32_t revents,
                                 void *userdata) {
        Proxy *p = userdata;

        log_warning("Local proxy %d (started by an earlier slotd) has exited, restarting it",
                    (int) p->pid);
        proxy_exited(p);
        return 0;
}

static bool hello_matches(Proxy *p, json_t *msg);

/* Start-up only, before the loop runs: a bounded wait for what a proxy says at once. */
static int read_hello(int fd, json_t **ret) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        _cleanup_(json_decrefp) json_t *m = NULL;
        int r;

        r = poll(&pfd, 1, HELLO_TIMEOUT_MSEC);
        if (r <= 0)
                return r < 0 ? negative_errno() : -ETIMEDOUT;
        r = ipc_receive(fd, &m);
        if (r < 0)
                return r;
        if (!streq(json_string_value(json_object_get(m, "type")), "hello"))
                return -EBADMSG;
        *ret = TAKE_PTR(m);
        return 0;
}

/* Start-up only: the proxy an earlier slotd left running goes, and is waited for (bounded),
 * so that its addresses are free for ours. */
static void retire(int pidfd, int sig) {
        struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

        (void) pidfd_send_signal_wrapper(pidfd, sig);
        if (poll(&pfd, 1, RETIRE_TIMEOUT_MSEC) == 0) {
                (void) pidfd_send_signal_wrapper(pidfd, SIGKILL);
                (void) poll(&pfd, 1, RETIRE_TIMEOUT_MSEC);
        }
        /* After Reexecute it is our child: reap it. */
        (void) waitid(P_PIDFD, (id_t) pidfd, &(siginfo_t){}, WEXITED | WNOHANG);
}

/* Why the proxy at the control socket cannot serve this configuration, NULL: it can. */
static const char *attach_refusal(Proxy *p, int fd, uid_t uid) {
        _cleanup_(json_decrefp) json_t *hello = NULL;

        if (uid != p->uid)
                return "runs as another user than localproxy.user";
        if (read_hello(fd, &hello) < 0)
                return "did not say what it serves";
        if (!hello_matches(p, hello))
                return "serves other addresses than localproxy.listen and metrics.listen name";
        return NULL;
}

/* Attaches to the proxy an earlier slotd left running, if one waits on the control socket
 * and serves this configuration: 1 attached, 0 none (any other was stopped). */
static int proxy_attach(Proxy *p) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        struct ucred cred = {};
        socklen_t len = sizeof(cred);
        const char *refusal;
        int pidfd, r;

        if (!p->control_path || strlen(p->control_path) >= sizeof(sa.sun_path))
                return 0;
        strcpy(sa.sun_path, p->control_path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                if (errno == ECONNREFUSED)
                        (void) unlink(p->control_path); /* its proxy is gone */
                else if (errno != ENOENT)
                        log_warning_errno(errno, "Failed to reach the local proxy at %s, "
                                          "starting another: %m", p->control_path);
                return 0;
        }
        /* The listener is the proxy itself (control_listen()). */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0 ||
            (pidfd = pidfd_open_wrapper(cred.pid)) < 0)
                return 0;
        refusal = attach_refusal(p, fd, cred.uid);
        if (refusal) {
                log_notice("Replacing the local proxy %d an earlier slotd left running: it %s "
                           "(its clients reconnect)", (int) cred.pid, refusal);
                retire(pidfd, SIGTERM);
                safe_close(pidfd);
                return 0;
        }
        r = proxy_connected(p, TAKE_FD(fd), cred.pid, pidfd);
        if (r < 0) {
                proxy_stop_process(p);
                return r;
        }
        log_info("Attached to the local proxy %d an earlier slotd left running: its "
                 "connections are kept", (int) cred.pid);
        return 1;
}

/* Attaches to the proxy an earlier slotd left running, or binds the addresses and leaves the
 * new proxy's fork to the event loop, beside the slots' first starts: a server's first
 * request waits in the listen queue until the proxy accepts it, and the first servers do not
 * wait for the proxy's fork, exec and filter (issue 24). A failed fork is retried as a
 * restart is. */
int proxy_start(Proxy *p) {
        int r = proxy_attach(p);

        if (r != 0)
                return r < 0 ? r : 0;
        r = proxy_bind(p);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(p->manager->event, &p->restart_timer, CLOCK_MONOTONIC, 0, 0,
                                       proxy_on_restart, p);
        if (r >= 0)
                r = sd_event_source_set_priority(p->restart_timer, SD_EVENT_PRIORITY_NORMAL + 1);
        return r < 0 ? log_error_errno(r, "Failed to schedule the local proxy's start: %m") : 0;
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

int proxy_setup(Proxy *p) {
        _cleanup_free_ char *path = NULL;
        int r;

        p->exe_fd = open_proxy_exe(&path);
        if (p->exe_fd < 0)
                return log_error_errno(p->exe_fd, "Cannot run the local proxy %s: %m (it serves "
                                       "localproxy.listen and metrics.listen)",
                                       path ?: "slotd-proxy");
        if ((r = proxy_identity(p)) < 0)
                return r;
        /* Without sock_diag no caller can be named: a fault of the host, not a failed start
         * (manager-sockdiag.c); conn_identify opens it again. */
        p->diag_fd = sockdiag_open();
        if (p->manager->config->localproxy.enabled && p->manager->config->localproxy.n_listen > 0)
                (void) manager_sock_diag_check(p->manager);
        p->mount_fd = open(p->manager->cgroup_mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (p->mount_fd < 0)
                return log_error_errno(errno, "Failed to open %s: %m", p->manager->cgroup_mount);
        p->listen_fds = new0(int, MAX(p->manager->config->localproxy.n_listen, (size_t) 1));
        if (!p->listen_fds)
                return log_oom();
        if (asprintf(&p->control_path, "%s/proxy.sock", p->manager->config->state_dir) < 0)
                return log_oom();
        return 0;
}

void proxy_process_free(Proxy *p) {
        proxy_stop_process(p);
        p->restart_timer = sd_event_source_disable_unref(p->restart_timer);
        proxy_unbind(p);
        free(p->metrics_listen.text);
        free(p->listen_fds);
        free(p->control_path);
        safe_close(p->exe_fd);
        confine_seccomp_program_free(p->seccomp);
}

static bool address_is(json_t *a, const ProxyListen *l) {
        const char *text = json_string_value(json_object_get(a, "address"));
        json_int_t port = json_integer_value(json_object_get(a, "port"));
        union {
                struct in_addr in;
                struct in6_addr in6;
        } addr;

        if (!text || port != l->port || inet_pton(l->family, text, &addr) != 1)
                return false;
        return l->family == AF_INET ? memcmp(&addr.in, &l->address.in, sizeof(addr.in)) == 0
                                    : memcmp(&addr.in6, &l->address.in6, sizeof(addr.in6)) == 0;
}

static bool listed(json_t *addresses, const ProxyListen *l) {
        json_t *a;
        size_t i;

        json_array_foreach(addresses, i, a)
                if (address_is(a, l))
                        return true;
        return false;
}

/* The proxy serves what this configuration names: each of its sockets is an address of
 * localproxy.listen, each of those is served (the default [::1] may be missing, as on a host
 * without IPv6), and metrics.listen likewise. */
static bool hello_matches(Proxy *p, json_t *msg) {
        const LocalProxyConfig *lp = &p->manager->config->localproxy;
        const ProxyListen *ml = &p->metrics_listen;
        json_t *listen = json_object_get(msg, "listen"), *metrics = json_object_get(msg, "metrics");
        size_t n = p->serves_sdk ? lp->n_listen : 0, i;
        json_t *a;

        if (!json_is_array(listen))
                return false;
        json_array_foreach(listen, i, a) {
                bool known = false;

                for (size_t j = 0; j < n && !known; j++)
                        known = address_is(a, &lp->listen[j]);
                if (!known)
                        return false;
        }
        for (size_t j = 0; j < n; j++)
                if (!listed(listen, &lp->listen[j]) &&
                    !(lp->listen_default && lp->listen[j].family == AF_INET6))
                        return false;
        if (ml->family == AF_UNSPEC)
                return json_is_null(metrics);
        return json_is_object(metrics) && address_is(metrics, ml);
}

/* With the proxy off (localproxy.listen and metrics.listen both off), one an earlier slotd
 * left running is told to go. */
void proxy_retire_stale(const char *state_dir) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        struct ucred cred = {};
        socklen_t len = sizeof(cred);

        if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/proxy.sock", state_dir) >=
            (int) sizeof(sa.sun_path))
                return;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                if (errno == ECONNREFUSED)
                        (void) unlink(sa.sun_path);
                return;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0)
                return;
        log_info("Stopping the local proxy %d an earlier slotd left running: the local proxy "
                 "and metrics.listen are off", (int) cred.pid);
        (void) kill(cred.pid, SIGTERM);
}
