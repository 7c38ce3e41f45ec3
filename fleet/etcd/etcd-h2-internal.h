/* SPDX-License-Identifier: MIT */
#pragma once

/* The insides of an etcd endpoint's HTTP/2 connection (etcd-h2.h), shared by etcd-h2.c (the
 * calls, the connection, the loop's side) and etcd-h2-session.c (nghttp2's session and its
 * callbacks). */
#include <gnutls/gnutls.h>
#include <nghttp2/nghttp2.h>
#include <sys/socket.h>

#include "etcd-h2.h"
#include "etcd-resolve.h"
#include "list.h"
#include "macro.h"

/* What etcd may send before we read it: the streams' and the connection's flow-control
 * windows, which nghttp2 opens again as the data is read. */
#define H2_WINDOW (16 * 1024 * 1024)

/* etcd's deadline for a call (grpc-timeout) is this much after ours. */
#define H2_DEADLINE_MARGIN (500 * USEC_PER_MSEC)

/* A connection with calls open that read nothing for H2_PING_INTERVAL sends a PING; one that
 * then reads nothing for H2_PING_TIMEOUT more is dead (as gRPC's clients do): TCP's keepalive
 * cannot tell, since a member hung or stopped still has its kernel acknowledge every segment,
 * and a partitioned one sends no probe while data is unacknowledged. The interval stays above
 * etcd's keepalive enforcement (MinTime 5 s: pings more often get a GOAWAY "too_many_pings"),
 * and an idle connection is never pinged (PermitWithoutStream=false: the same GOAWAY). */
#define H2_PING_INTERVAL (10 * USEC_PER_SEC)
#define H2_PING_TIMEOUT (5 * USEC_PER_SEC)
/* A connect unanswered this long (a blackholed address) ends, rather than the SYN's retries
 * (about 2 min), so that its calls go to the next endpoint. */
#define H2_CONNECT_TIMEOUT (5 * USEC_PER_SEC)
/* The kernel's own end for a connection whose data goes unacknowledged (TCP_USER_TIMEOUT). */
#define H2_TCP_USER_TIMEOUT_MS 15000

typedef enum H2State {
        H2_DOWN,
        H2_RESOLVING, /* a name's addresses */
        H2_CONNECTING,
        H2_HANDSHAKE, /* TLS's */
        H2_UP,
} H2State;

struct EtcdH2Call {
        EtcdH2 *h;
        LIST_FIELDS(EtcdH2Call, calls); /* in h->calls until done, then in h->done */
        char *path;
        const uint8_t *body;
        size_t size, offset;
        usec_t timeout; /* the deadline, CLOCK_MONOTONIC */
        uint64_t timeout_ms;
        char grpc_timeout[32];
        sd_event_source *timer;
        int32_t stream; /* 0: not submitted yet */
        /* Its HEADERS went out in the bytes from queued_at on (h->queued then): it counts
         * as sent once the socket took any byte from there (h->written > queued_at). */
        bool queued, refused, retried;
        uint64_t queued_at;
        bool done;
        EtcdH2Answer answer;
        char *detail;
        char *grpc_status, *grpc_message;
        uint8_t *data;
        size_t data_size, data_allocated;
        etcd_h2_callback_t cb;
        void *userdata;
        /* A streaming call's: its bytes go to on_stream as they come, from data_start on;
         * it is in h->pending while some were not offered yet. */
        etcd_h2_stream_t on_stream;
        size_t data_start;
        LIST_FIELDS(EtcdH2Call, pending);
        bool in_pending;
        /* on_stream is running: a cancel then leaves the free to the dispatch */
        bool delivering, cancelled;
        /* An open stream's (etcd_h2_stream_open): never half-closed; body is owned, its
         * messages appended by etcd_h2_stream_write, body + offset what did not leave yet. */
        bool open;
        uint8_t *owned;
        size_t owned_allocated;
};

struct EtcdH2 {
        unsigned n_ref;
        bool freed;
        sd_event *event;
        /* the endpoint's addresses: its own, or its name's (resolver) at each connect, tried
         * in order until one takes the connection */
        struct sockaddr_storage addrs[ETCD_RESOLVE_MAX];
        socklen_t lens[ETCD_RESOLVE_MAX];
        size_t n_addrs, addr_index;
        EtcdResolver *resolver;
        uint16_t port;
        char authority[256 + 8]; /* a name of 253 bytes at most, ":" and the port */
        /* https://: the host to verify etcd's certificate against, the files of the
         * credentials (read at each connect), the connection's credentials and session */
        bool tls;
        char host[254];
        char *ca_file, *cert_file, *key_file;
        gnutls_certificate_credentials_t creds;
        gnutls_session_t tls_session;
        H2State state;
        int fd;
        sd_event_source *io;
        nghttp2_session *session;
        uint8_t *out; /* bytes nghttp2 made that the socket did not take yet */
        size_t out_size, out_offset;
        uint64_t queued, written; /* bytes nghttp2 made, and the socket took, on this connection */
        EtcdH2Call *calls;
        EtcdH2Call *done, *done_tail;
        EtcdH2Call *pending; /* streaming calls with bytes to offer */
        sd_event_source *dispatch;
        /* One timer for the connection (on_h2_timer), not one per call: connecting's deadline,
         * then the PINGs. quiet_since: the last read, or when the connection got its first
         * call after being idle; ping_out: a PING sent at ping_sent, nothing read since.
         * CLOCK_MONOTONIC. */
        sd_event_source *timer;
        usec_t connecting_since, quiet_since, ping_sent;
        bool ping_out;
};

/* A call's end (its answer recorded), or its failure with error and what went wrong; both
 * queue it in h->done for the dispatch. */
void h2_call_end(EtcdH2Call *c);
void h2_call_fail(EtcdH2Call *c, int error, const char *fmt, ...) _printf_(3, 4);

/* nghttp2's client session for h, with our settings and callbacks (etcd-h2-session.c). */
int h2_session_new(EtcdH2 *h);
