/* SPDX-License-Identifier: MIT */
#pragma once

/* One etcd endpoint's HTTP/2 connection for gRPC calls (etcd-grpc.h), on nghttp2 and one
 * sd-event loop: nghttp2 does HTTP/2 (frames, HPACK, flow control, the connection's
 * settings and pings); this file the socket, the calls and their deadlines. It connects when
 * a call needs it, keeps the connection between calls, multiplexes every call on it, and
 * connects again after it broke.
 *
 * "http://HOST:PORT" or "https://HOST:PORT", HOST a numeric address (IPv4, or IPv6 in
 * brackets) or a name, looked up anew for each connection with c-ares (etcd-resolve.h: no
 * blocking, no thread), its addresses tried in order; for https://, TLS on gnutls
 * (etcd-tls.h) under HTTP/2: the handshake driven by the socket's events like the rest,
 * nghttp2's bytes through TLS's records.
 *
 * Why not libcurl (which etcd.c used for etcd's JSON gateway before): Debian 12's libcurl
 * 7.88.1 fails a transfer that reuses a connection it opened with HTTP/2 "prior knowledge" (curl#10634), and
 * on its multi_socket interface stops reading an answer once the connection's flow-control
 * window is spent (it does not send the WINDOW_UPDATE nghttp2 queued until another transfer
 * writes). Both were seen here with etcd 3.4. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <systemd/sd-event.h>

#include "etcd.h"
#include "time-util.h"

typedef struct EtcdH2 EtcdH2;
typedef struct EtcdH2Call EtcdH2Call;

/* How a call ended. error: 0 (an answer: http_status, grpc_status... say what it is),
 * -ECONNREFUSED (nothing was sent: no connection (a name without an address included), or the connection died before any byte of
 * the call left and a new one could not be made; or etcd refused the stream unprocessed:
 * REFUSED_STREAM, GOAWAY), -EIO (TLS failed before any of it was sent: etcd's certificate not
 * trusted, the credentials not readable, an alert of etcd, no "h2"), -ECONNRESET (the connection broke, or etcd reset the stream, after
 * the call was sent), -ETIMEDOUT (no answer by the deadline; the stream was reset), -EBADMSG
 * (an answer over ETCD_ANSWER_MAX bytes), -ENOMEM.
 * sent: a byte of the call reached the socket, so a write may have been applied. A call whose
 * connection turns out dead before any of its bytes left goes once more, on a new connection
 * to the same endpoint (as curl does with a cached connection it finds dead). */
typedef struct EtcdH2Answer {
        int error;
        bool sent;
        const char *detail; /* words for error, "" when 0 */
        long http_status;   /* 0 when no :status came */
        const char *grpc_status, *grpc_message; /* from the headers or trailers; NULL if none */
        const uint8_t *body;
        size_t size;
} EtcdH2Answer;

/* Runs from the event loop, never inside nghttp2; everything it points at is gone when it
 * returns, the call included. It may make new calls, cancel others, free the EtcdH2. */
typedef void (*etcd_h2_callback_t)(EtcdH2Call *c, const EtcdH2Answer *a, void *userdata);

/* A streaming call's bytes, as they come (from the loop, never inside nghttp2): returns how
 * many of them it took (whole messages; the rest is offered again with the next bytes, and is
 * the end's body if the stream ends first). It may cancel its call or any other, or free the
 * EtcdH2. */
typedef size_t (*etcd_h2_stream_t)(EtcdH2Call *c, const uint8_t *data, size_t size,
                                   void *userdata);

/* url: "http://HOST:PORT" or "https://HOST:PORT" (endpoint-url.h); -EINVAL for another.
 * tls: for https://, its ca_file, cert_file and key_file (copied; read at each connect). */
int etcd_h2_new(EtcdH2 **ret, sd_event *event, const char *url, const EtcdConfig *tls);
/* Every call cancelled (no callback), the connection closed. */
EtcdH2 *etcd_h2_free(EtcdH2 *h);

/* A POST of body (a gRPC message with its prefix; not copied: it must live until the callback
 * or the cancel) to path, with a deadline timeout_usec from now (and etcd's, grpc-timeout,
 * half a second later: the reset of the stream at ours ends etcd's work first). ret (may be
 * NULL) is for etcd_h2_call_cancel() only, and gone once the callback ran. */
int etcd_h2_call(EtcdH2 *h, const char *path, const uint8_t *body, size_t size,
                 usec_t timeout_usec, etcd_h2_callback_t cb, void *userdata, EtcdH2Call **ret);
/* A streaming call: body (as etcd_h2_call's) is sent and the stream half-closed, and what etcd
 * sends goes to on_stream as it comes, for as long as the stream lasts. It has no deadline of
 * its own; the connection has, as gRPC's clients do: while any call is open on it, 10 s
 * without a byte read sends an HTTP/2 PING, and 5 s more without one end the connection (cb:
 * -ECONNRESET, detail "etcd answered no PING within 5 s"), which a member hung, stopped or cut
 * off does not answer, though its kernel may still acknowledge TCP's keepalive. A connection
 * with no call open is never pinged (etcd would send GOAWAY "too_many_pings"), nor more often
 * than every 10 s (etcd's minimum is 5 s). A connect unanswered for 5 s fails too (its calls
 * sent nothing: -ECONNREFUSED). cb ends it as etcd_h2_call's, its body what on_stream did not
 * take. On a connection that died before any of it was sent it
 * goes once more, as a call does. For etcd's Watch (one create request per stream: etcd
 * keeps a watch whose client half-closed). */
int etcd_h2_stream(EtcdH2 *h, const char *path, const uint8_t *body, size_t size,
                   etcd_h2_stream_t on_stream, etcd_h2_callback_t cb, void *userdata,
                   EtcdH2Call **ret);
/* A streaming call that stays open both ways, for etcd's LeaseKeepAlive (one stream carries
 * every lease's keepalives): it starts without a message and is never half-closed; each
 * etcd_h2_stream_write() sends one more. Otherwise as etcd_h2_stream: on_stream takes etcd's
 * bytes as they come, cb ends it (no deadline of its own: the connection's PINGs). A stream
 * that sent nothing when its connection died goes once more on a new one, with every message
 * written to it so far. The receive window never runs dry: nghttp2 opens it again
 * (WINDOW_UPDATE) as it hands the bytes over, which this file buffers until on_stream takes
 * them. ret is required (it is the stream to write on). */
int etcd_h2_stream_open(EtcdH2 *h, const char *path, etcd_h2_stream_t on_stream,
                        etcd_h2_callback_t cb, void *userdata, EtcdH2Call **ret);
/* One message more (prefixed; copied) on a stream of etcd_h2_stream_open, sent as soon as the
 * stream and its flow-control window allow: 0, -ENOMEM, -EINVAL (not such a stream), -EPIPE
 * (it ended: its cb is queued). */
int etcd_h2_stream_write(EtcdH2Call *c, const uint8_t *data, size_t size);
/* No callback; a call sent is reset (etcd gives up its work when it reads that). */
void etcd_h2_call_cancel(EtcdH2Call *c);
