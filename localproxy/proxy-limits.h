/* SPDX-License-Identifier: MIT */
#pragma once

#include "time-util.h"

/* Every bound slotd-proxy puts on what its clients may do, in one place. A client is a game
 * server (or anything else on the host) that connects to 127.0.0.1:8086 or [::1]:8086; the
 * proxy learns its slot from slotd's answer to the "conn" message. */

/* Open connections, HTTP and WebSocket alike. Over its limit, the newest connection of a slot
 * is refused (429 to what it asked, then closed). Callers outside any slot share one limit.
 * The total bounds the proxy's file descriptors. */
#define PROXY_CONNECTIONS_PER_SLOT 16
#define PROXY_CONNECTIONS_OUTSIDE 64
#define PROXY_CONNECTIONS_MAX 4096
/* A connection found over its limit before it asked anything is given this long to ask (and
 * be answered 429, which says why) before it is closed: its request may be on its way. */
#define PROXY_OVER_LIMIT_GRACE_USEC (1 * USEC_PER_SEC)

/* Requests per slot (every HTTP request, and every Centrifuge subscribe): a token bucket of
 * PROXY_RATE_PER_SEC a second, PROXY_RATE_BURST deep; over it, 429 (Centrifuge: error 106).
 * Callers outside any slot share one bucket. */
#define PROXY_RATE_PER_SEC 50
#define PROXY_RATE_BURST 100

/* A request body beyond this is answered 413. */
#define PROXY_BODY_MAX (8 * 1024)
/* microhttpd's memory per connection: the request line and headers must fit in about half of
 * it, or microhttpd answers 414 or 431 itself. */
#define PROXY_CONNECTION_MEMORY (32 * 1024)

/* An HTTP connection with nothing to do is closed after this; a WebSocket after this long
 * without a frame from the client (Centrifuge's pings keep a live one well inside it). */
#define PROXY_IDLE_TIMEOUT_SEC 60

/* How long a request waits for slotd (to identify its caller, then to answer it): 503 after. */
#define PROXY_REPLY_TIMEOUT_USEC (5 * USEC_PER_SEC)

/* A proxy whose slotd is gone keeps its connections for the next slotd (control.c); with no
 * connection left either, it exits after this. */
#define PROXY_ORPHAN_GRACE_USEC (10 * USEC_PER_SEC)

/* A WebSocket client that sent nothing for this long is sent a WebSocket ping (RFC 6455
 * §5.5.2), which every WebSocket library answers with a pong by itself: a live client is then
 * never idle, whatever its Centrifuge pings do. centrifuge-go 0.8 (Unity's Go SDK) pings only
 * after 25 s without a message from the server, so one that hears an event every 10 s sends
 * nothing at all, and was closed as idle (and then deaf, having reconnected). */
#define PROXY_WS_KEEPALIVE_USEC (20 * USEC_PER_SEC)

/* Centrifuge: the ping interval announced in the connect reply; protocol v2 clients are then
 * pinged by the proxy and closed when no pong follows within PROXY_WS_PONG_TIMEOUT_USEC. */
#define PROXY_WS_PING_INTERVAL_SEC 25
#define PROXY_WS_PONG_TIMEOUT_USEC (10 * USEC_PER_SEC)
/* The largest WebSocket message the proxy reads (a frame of Centrifuge commands). */
#define PROXY_WS_MESSAGE_MAX (64 * 1024)
/* Bytes queued for one WebSocket past which it is closed: a client that does not read falls
 * behind for good; it reconnects and recovers from its last offset. */
#define PROXY_WS_QUEUE_MAX (256 * 1024)
/* Channels one connection may be subscribed to (a game server needs its own). */
#define PROXY_WS_SUBSCRIPTIONS_MAX 8
/* Events held for a subscription while slotd's answer to it is awaited; more closes it. */
#define PROXY_WS_HELD_EVENTS_MAX 64

/* metrics.listen (SPEC §14), which may face the network: open connections (and per client
 * address), scrapes a second for all clients together (PROXY_METRICS_BURST deep; 429 over
 * it), the largest text kept from slotd. Scrapes that arrive while slotd is asked share its
 * answer: slotd makes at most one text at a time. */
#define PROXY_METRICS_CONNECTIONS 32
#define PROXY_METRICS_CONNECTIONS_PER_IP 8
#define PROXY_METRICS_RATE_PER_SEC 10
#define PROXY_METRICS_BURST 20
#define PROXY_METRICS_TEXT_MAX (16 * 1024 * 1024)

/* "conn" and "close" messages waiting for room on the IPC socket; past this they are dropped
 * (and logged): slotd is then not reading at all. */
#define PROXY_CONTROL_QUEUE_MAX 4096
