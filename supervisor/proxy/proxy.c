/* SPDX-License-Identifier: MIT */
/* slotd's side of the local proxy: its sockets, its process, its channel (proxy-door.h). */
#include <arpa/inet.h>
#include <inttypes.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cgroup.h"
#include "ipc.h"
#include "log.h"
#include "manager.h"
#include "proxy-internal.h"
#include "sockdiag.h"

#define CONNS_MAX 65536

Manager *proxy_manager(Proxy *p) {
        return p->manager;
}

ProxyDoor *proxy_door(Proxy *p) {
        return p->door;
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

        /* The groups are looked up only when they can matter. */
        if (ops_is_admin(uid, NULL, 0, m->config_has_admin_gid, m->config_admin_gid))
                return true;
        if (uid == 0 || !m->config_has_admin_gid)
                return false;
        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) != 0 || !found)
                return false;
        if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
                return false;
        return ops_is_admin(uid, groups, (size_t) n, m->config_has_admin_gid, m->config_admin_gid);
}

void proxy_conn_unavailable_message(const ProxyConn *c, char *buf, size_t size) {
        (void) snprintf(buf, size, "slotd cannot tell which slot the caller is in: sock_diag is "
                        "unavailable (%s); %s", strerror(c->unavailable),
                        manager_sock_diag_remedy(c->unavailable));
}

/* The caller cannot be known: the lookup failed, or answered ENOENT while sock_diag's self-test
 * fails (the kernel then says ENOENT of every socket). It is unknown, which is no proof that it
 * is a stranger. A failure the self-test has not seen runs it: it raises the fault (logged
 * once) if sock_diag is gone; if not, this lookup failed alone, and the socket is opened anew. */
static void conn_unavailable(Proxy *p, ProxyConn *c, int error) {
        Manager *m = p->manager;
        unsigned suppressed;

        c->unavailable = -error;
        if (m->sock_diag_error != 0 || manager_sock_diag_check(m) < 0) {
                log_debug_errno(error, "Local proxy: cannot tell who connection %" PRIu64
                                " is: %m", c->id);
                return;
        }
        p->diag_fd = safe_close(p->diag_fd);
        if (ratelimit_tell(&p->diag_log, now_usec(CLOCK_MONOTONIC), FLOOD_LOG_INTERVAL,
                           &suppressed))
                log_warning_errno(error, "Local proxy: a NETLINK_SOCK_DIAG lookup failed (%m), "
                                  "though sock_diag works; connection %" PRIu64 " is answered "
                                  "503 (%u more since the last such line)", c->id, suppressed);
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
        if (p->diag_fd < 0)
                p->diag_fd = sockdiag_open();
        r = p->diag_fd < 0 ? p->diag_fd
                           : sockdiag_lookup_tcp(p->diag_fd, (struct sockaddr *) &peer,
                                                 (struct sockaddr *) &local, &d);
        if (r == -ENOENT && p->manager->sock_diag_error == 0) {
                /* sock_diag works: the client is already gone. */
                log_debug_errno(r, "Local proxy: no socket found for connection %" PRIu64 ": %m",
                                c->id);
                return;
        }
        if (r < 0)
                return conn_unavailable(p, c, r);
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
        if (reply && c->unavailable) {
                char why[256];

                proxy_conn_unavailable_message(c, why, sizeof(why));
                if (json_object_set_new(reply, "unavailable", json_string(why)) < 0)
                        reply = (json_decref(reply), NULL);
        }
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

void proxy_forget_conns(Proxy *p) {
        hashmap_done_free(&p->conns, conn_free);
        p->conns = (Hashmap){};
}

int proxy_on_ipc(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
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
                        /* Gone: its exit (exit_source) restarts it. */
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

        if (p->ipc_fd < 0 || !p->serves_sdk) /* running for metrics.listen alone */
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

void proxy_door_event(Manager *m, const AllocEvent *e, void *userdata) {
        ProxyDoor *d = userdata;

        if (d->proxy)
                proxy_send_event(d->proxy, e);
}

static Proxy *proxy_free(Proxy *p);

/* metrics: metrics.listen; metrics_fd: it bound already (taken), or -EBADF. */
static int proxy_new(ProxyDoor *d, const ProxyListen *metrics, bool metrics_default,
                     int metrics_fd, Proxy **ret) {
        Manager *m = d->manager;
        const LocalProxyConfig *lp = &m->config->localproxy;
        Proxy *p;
        int r;

        *ret = NULL;
        if ((!lp->enabled || lp->n_listen == 0) && metrics->family == AF_UNSPEC) {
                proxy_retire_stale(m->config->state_dir);
                return 0;
        }
        p = new0(Proxy, 1);
        if (!p) {
                safe_close(metrics_fd);
                return log_oom();
        }
        *p = (Proxy){ .door = d, .manager = m, .serves_sdk = lp->enabled && lp->n_listen > 0,
                      .ipc_fd = -EBADF, .diag_fd = -EBADF, .mount_fd = -EBADF, .exe_fd = -EBADF,
                      .metrics_fd = -EBADF };
        r = proxy_set_metrics(p, metrics, metrics_default, metrics_fd);
        if (r >= 0)
                r = proxy_setup(p);
        if (r >= 0) {
                r = proxy_start(p);
                if (r < 0)
                        log_error_errno(r, "Failed to start the local proxy: %m");
        }
        if (r < 0) {
                proxy_free(p);
                return r;
        }
        /* For metrics alone, whose default could not be bound: nothing to serve. */
        if (!p->serves_sdk && p->metrics_listen.family == AF_UNSPEC) {
                proxy_terminate_process(p);
                proxy_free(p);
                return 0;
        }
        *ret = p;
        return 0;
}

/* The proxy stays: it keeps its connections for the next slotd (after SIGTERM, a crash, an
 * upgrade or Reexecute), which attaches to it. */
static Proxy *proxy_free(Proxy *p) {
        if (!p)
                return NULL;
        proxy_process_free(p);
        safe_close(p->diag_fd);
        safe_close(p->mount_fd);
        free(p);
        return NULL;
}

int proxy_door_open(ProxyDoor *d) {
        const Config *c = d->manager->config;

        return proxy_new(d, &c->metrics_listen, c->metrics_listen_default, -EBADF, &d->proxy);
}

/* Tells the running proxy: {"type":"metrics_listen",…} with the socket, or null without. */
static int send_metrics_listen(Proxy *p, const ProxyListen *l, int fd) {
        _cleanup_(json_decrefp) json_t *m = NULL;
        char text[INET6_ADDRSTRLEN];

        if (fd >= 0 && !inet_ntop(l->family, &l->address, text, sizeof(text)))
                return -EINVAL;
        m = fd >= 0 ? json_pack("{s:s, s:s, s:I}", "type", "metrics_listen", "address", text,
                                "port", (json_int_t) l->port)
                    : json_pack("{s:s, s:n}", "type", "metrics_listen", "address");
        if (!m)
                return -ENOMEM;
        return ipc_send_fd(p->ipc_fd, m, fd);
}

static int metrics_error(char **ret_error, int error, const char *fmt, const char *a,
                         const char *b) {
        char buf[512];

        (void) snprintf(buf, sizeof(buf), fmt, a, strerror(-error), b);
        *ret_error = strdup(buf);
        return error;
}

int proxy_door_metrics_listen(ProxyDoor *d, const ProxyListen *l, bool is_default,
                              char **ret_error) {
        const char *old = d->proxy && d->proxy->metrics_listen.text ? d->proxy->metrics_listen.text
                                                                    : "off";
        _cleanup_close_ int fd = -EBADF;
        ProxyListen off = {};
        Proxy *p = d->proxy;
        int r;

        /* What is served already (or off, as asked): nothing to do. */
        if (streq_ptr(p ? p->metrics_listen.text : NULL, l->text))
                return 0;
        /* The new address first: a failure changes nothing. */
        if (l->family != AF_UNSPEC) {
                fd = proxy_bind_metrics(l);
                if (fd < 0 && is_default && (fd == -EADDRINUSE || fd == -EADDRNOTAVAIL)) {
                        log_warning_errno(fd, "Not serving metrics: %s (metrics.listen's "
                                          "default) cannot be bound: %m", l->text);
                        l = &off;
                } else if (fd < 0)
                        return metrics_error(ret_error, fd, "metrics.listen: cannot listen on "
                                             "%s (%s); %s still serves", l->text, old);
        }
        if (l == &off && streq_ptr(p ? p->metrics_listen.text : NULL, NULL))
                return 0; /* the default skipped again */
        if (!p) {
                r = proxy_new(d, l, is_default, TAKE_FD(fd), &d->proxy);
                if (r < 0)
                        return metrics_error(ret_error, r, "metrics.listen: cannot start the "
                                             "local proxy to serve %s (%s); metrics stay %s",
                                             l->text, old);
                return 0;
        }
        if (!p->serves_sdk && l->family == AF_UNSPEC) {
                /* It ran for metrics alone. */
                log_info("metrics.listen is off: stopping the local proxy %d", (int) p->pid);
                proxy_terminate_process(p);
                d->proxy = proxy_free(p);
                return 0;
        }
        /* A proxy between restarts gets the new socket when it starts. */
        if (p->ipc_fd >= 0) {
                r = send_metrics_listen(p, l, fd);
                if (r < 0)
                        return metrics_error(ret_error, r, "metrics.listen: cannot hand %s to "
                                             "the local proxy (%s); %s still serves",
                                             l->text ?: "off", old);
        }
        log_info("metrics.listen: %s → %s", old, l->text ?: "off");
        r = proxy_set_metrics(p, l, is_default, TAKE_FD(fd));
        return r < 0 ? log_oom() : 0;
}

void proxy_door_close(ProxyDoor *d) {
        d->proxy = proxy_free(d->proxy);
}
