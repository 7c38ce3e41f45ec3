/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "hashmap.h"
#include "list.h"
#include "mhd-event.h"
#include "request.h"
#include "time-util.h"

/* slotd-proxy's core: one sd-event loop drives the IPC socket to slotd, one microhttpd daemon
 * per listening socket (external epoll mode) and the upgraded WebSockets. proxy.c owns the
 * loop, the connections and the IPC; http.c answers REST requests; ws.c runs Centrifuge. */

typedef struct Proxy Proxy;
typedef struct Conn Conn;
typedef struct Pending Pending;
typedef struct Request Request;   /* http.c */
typedef struct Session Session;   /* ws.c */
typedef struct Scrape Scrape;     /* metrics.c */

/* Connections and the rate of requests are limited per slot. */
typedef struct SlotLimits {
        char key[16];
        unsigned n_conns;
        TokenBucket bucket;
} SlotLimits;

struct Conn {
        Proxy *proxy;
        LIST_FIELDS(Conn, conns);
        uint64_t id;
        char key[24];
        int fd;
        bool announced;        /* "conn" went to slotd (or waits in the control queue) */
        bool identified;       /* slotd answered it */
        bool over_limit;       /* the slot has too many connections: this one goes */
        bool admin;
        bool in_slot;
        unsigned slot;
        char *unavailable;     /* slotd could not name the caller (ipc.h): why, for it */
        SlotLimits *limits;    /* set once identified, where the connection is counted */
        Request *waiters;      /* requests suspended until the caller is identified */
        Session *session;      /* after a WebSocket upgrade */
        sd_event_source *grace; /* over its limit with nothing asked yet: closed when it fires */
};

typedef struct ProxyDaemon {
        Proxy *proxy;
        struct MHD_Daemon *mhd;
} ProxyDaemon;

/* metrics.listen (metrics.c): the text asked of slotd for the scrapes waiting for it. */
typedef struct MetricsFetch {
        uint64_t id;           /* the "metrics" message in flight, 0: none */
        uint64_t next_id;
        char *text;            /* its parts so far */
        size_t size, allocated;
        sd_event_source *timer;
        Scrape *waiting;       /* suspended scrapes that get the text */
        TokenBucket bucket;
} MetricsFetch;

struct Proxy {
        sd_event *event;
        int ipc_fd;            /* to slotd; -EBADF while no slotd is attached (control.c) */
        sd_event_source *ipc_source;
        int control_fd;        /* where the next slotd attaches (control.c), -EBADF: none */
        sd_event_source *control_source;
        sd_event_source *orphan_timer; /* no slotd and no connection: exit when it fires */
        const int *listen_fds; /* localproxy.listen's sockets, for the hello (control.c) */
        size_t n_listen;
        int metrics_fd;        /* metrics.listen's socket, -1: off (slotd may move it) */
        ProxyDaemon *daemons;  /* localproxy.listen's */
        ProxyDaemon metrics_daemon; /* metrics.listen's, .mhd NULL: off */
        size_t n_daemons;
        MhdEvent *mhd_event;   /* runs the daemons from the loop (common/mhd-event.c) */
        uint64_t next_conn_id;
        uint64_t next_request_id;
        unsigned n_conns;
        Conn *conns_list;
        Hashmap conns;         /* conn id → Conn, for slotd's answers */
        Pending *pending_list;
        Hashmap pending;       /* request id → Pending */
        Session *sessions;     /* ws.c */
        Hashmap slots;         /* slot id → SlotLimits (kept: slot ids come from slotd) */
        SlotLimits outside;    /* callers outside any slot */
        Hashmap channels;      /* server id → ws.c's Channel */
        json_t *control_queue; /* "conn" and "close" messages waiting for room */
        MetricsFetch metrics;
};

/* An IPC request in flight: exactly one of a reply or the timeout ends it. The handler gets
 * the reply message, or NULL on timeout or cancellation; the Pending is freed after. */
typedef void (*pending_handler_t)(Proxy *p, void *userdata, json_t *reply);

/* metrics_fd: metrics.listen's socket, or -1; control_fd: where a later slotd attaches
 * (control.c), or -1: the proxy then exits when its slotd goes. listen_fds must outlive it. */
int proxy_new(sd_event *event, int ipc_fd, int control_fd, const int *listen_fds,
              size_t n_listen, int metrics_fd, Proxy **ret);
Proxy *proxy_free(Proxy *p);

/* The channel to slotd (proxy.c). attach: fd becomes the channel (a previous one is
 * detached), the hello goes out and every connection is announced again. detach: the channel
 * is closed, what waited for slotd gets its failure, and no connection counts as announced. */
int proxy_ipc_attach(Proxy *p, int fd);
void proxy_ipc_detach(Proxy *p);

/* control.c: a slotd that restarts (SIGKILL, a crash, an upgrade, Reexecute) finds this
 * proxy on its control socket and attaches to it, so that no game server loses its
 * connection: Unity's Go SDK never hears an event again after a reconnect. */
int control_start(Proxy *p);
/* The channel to slotd is gone: wait for the next one (or exit without a control socket). */
int control_ipc_lost(Proxy *p);
/* The hello, first on every channel: who we are and what we serve, so that slotd can tell
 * whether this proxy serves its configuration. */
int control_send_hello(Proxy *p);
/* The number of connections or the channel changed: an orphaned proxy with no connection left
 * exits after PROXY_ORPHAN_GRACE_USEC. */
void control_orphan_update(Proxy *p);
void control_done(Proxy *p);

/* Adds "type", "id" and "conn" to 'message' and sends it. -EAGAIN: the IPC socket is full. */
int proxy_request(Proxy *p, Conn *c, json_t *message, pending_handler_t handler,
                  void *userdata, Pending **ret);
/* Ends a Pending without calling its handler. */
void pending_cancel(Proxy *p, Pending *pend);

/* Runs d's microhttpd from the loop (common/mhd-event.c). */
int proxy_daemon_watch(Proxy *p, ProxyDaemon *d);

/* Runs microhttpd soon, outside any of its callbacks (after a resume, an upgraded socket's
 * close, a shutdown). */
void proxy_kick(Proxy *p);

/* Takes one request token of the connection's slot. */
bool conn_take_token(Conn *c);
/* The Conn of an MHD connection. */
Conn *conn_of(struct MHD_Connection *connection);

/* http.c */
enum MHD_Result http_handler(void *cls, struct MHD_Connection *connection, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **con_cls);
void http_request_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                            enum MHD_RequestTerminationCode toe);
/* slotd identified the caller (or the connection is going): resume what waited for it. */
void http_conn_identified(Conn *c);
/* The connection is going: its requests no longer wait on it. */
void http_conn_forget(Conn *c);

/* ws.c */
/* Answers a WebSocket upgrade request: 101 and a Centrifuge session, or an error. */
enum MHD_Result ws_upgrade(Proxy *p, struct MHD_Connection *connection);
void ws_session_close(Session *s);
/* An "event" from slotd: to every session subscribed to its server. */
void ws_event(Proxy *p, json_t *event);
/* A slotd attached: asks it for the last event of every subscribed server, so that an event
 * the previous slotd made but never sent still reaches its subscribers (once). */
void ws_resync(Proxy *p);
void ws_done(Proxy *p);

/* metrics.c: GET /metrics on metrics.listen, with the text asked of slotd; anything else 404. */
int metrics_daemon_start(Proxy *p, ProxyDaemon *d, int listen_fd);
/* A "metrics" message from slotd: a part of the text, or why there is none. */
void metrics_on_message(Proxy *p, json_t *message);
/* A "metrics_listen" message from slotd: serve on fd (taken) from now on, -EBADF: stop
 * serving metrics. The old daemon and its connections go; the SDK's are not touched. */
void metrics_on_listen(Proxy *p, json_t *message, int fd);
/* Stops the metrics daemon, if any: the scrapes waiting get 503. */
void metrics_daemon_stop(Proxy *p);
/* The proxy is going: every waiting scrape gets 503. */
void metrics_done(Proxy *p);

/* One {"error":"…"} response. */
enum MHD_Result http_respond_error(struct MHD_Connection *connection, unsigned status,
                                   const char *message, bool close);
