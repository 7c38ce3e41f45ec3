/* SPDX-License-Identifier: MIT */
/*
 * The SDK mode's own declarations, shared by test-server-sdk*.c only.
 *
 * One thread, the SDK thread, does all of the SDK's talking: HTTP with
 * libcurl (blocking: the proxy is local, and nothing else waits on this
 * thread) and the WebSocket with libwebsockets, whose service loop it runs.
 * It never touches struct server: it reports through struct sdk_status and a
 * pipe that the main loop polls, and the main thread asks it for things
 * through lws_cancel_service().
 */
#pragma once

#include <curl/curl.h>
#include <jansson.h>
#include <libwebsockets.h>

#include "test-server.h"
#include "test-server-sdk-config.h"

#define SDK_TOKEN_MAX        4096
#define SDK_ID_MAX           128    /* AllocationID, EventID: UUIDs in practice */
#define SDK_HANDLED_MAX      64     /* AllocationIDs remembered, so none is acted on twice */
#define SDK_OUT_MAX          16     /* frames waiting for the socket to be writable */
#define SDK_MESSAGE_MAX      (1024 * 1024)
#define SDK_HTTP_BODY_MAX    (1024 * 1024)

/* centrifuge-go 0.8's defaults: a ping every 25 s, an answer within its 5 s read timeout. */
#define SDK_PING_USEC        (25 * USEC_PER_SEC)
#define SDK_PONG_USEC        (5 * USEC_PER_SEC)
#define SDK_BACKOFF_MIN_USEC (100 * USEC_PER_MSEC)
#define SDK_BACKOFF_MAX_USEC (5 * USEC_PER_SEC)
/* The Go SDK's retry after a refused subscription (OnSubscribeError). */
#define SDK_RESUBSCRIBE_USEC (1 * USEC_PER_SEC)

/* What localProxyUrl comes to: the HTTP base and the WebSocket's parts. */
struct sdk_proxy {
        char base[2 * VALUE_MAX];       /* "http://host:port[/prefix]", no trailing '/' */
        char host[VALUE_MAX];           /* for connecting: no brackets around IPv6 */
        char host_header[VALUE_MAX];    /* "host:port" as the Host header says it */
        int port;
        char ws_path[VALUE_MAX];        /* "[/prefix]/v1/connection/websocket" */
};

/* A Multiplay event, the data of a publication into server#<serverID>. */
struct multiplay_event {
        char type[64];                  /* AllocateEventType, DeallocateEventType, ... */
        char event_id[SDK_ID_MAX];
        char server_id[32];             /* "" when the event has none */
        char allocation_id[SDK_ID_MAX];
};

/* Where the subscription stands in the channel's stream, for recovery after a reconnect. */
struct sdk_position {
        bool recoverable;
        char epoch[64];
        uint64_t offset;
};

struct sdk {
        /* Set by sdk_init() on the main thread, read-only afterwards. */
        struct sdk_proxy proxy;
        char server_id[VALUE_MAX];
        char channel[VALUE_MAX + 8];    /* "server#<serverID>" */
        char payload_path[PATH_MAX + 32];
        usec_t hold_usec;
        usec_t session_usec;
        bool recovering_client;         /* --sdk-recovering-client */

        /* Shared: the lock guards these and nothing else. */
        pthread_mutex_t lock;
        struct sdk_status published;    /* what the main thread copies */
        int ready_request;              /* -1 none, else the control file's ready 0|1 */
        int wake_fd;                    /* the pipe's write end, main loop polls the other */

        /* The SDK thread's alone. */
        pthread_t thread;
        struct lws_context *context;
        struct lws *wsi;
        bool ws_open;                   /* a connection attempt or connection exists */
        bool closing;                   /* close at the next writable callback */
        CURL *curl;
        char token[SDK_TOKEN_MAX];
        bool hold_done;
        uint32_t next_id;
        uint32_t connect_id, subscribe_id, ping_id;
        bool subscribed_once;           /* a later subscribe asks to recover */
        struct sdk_position position;
        usec_t backoff;
        char *out[SDK_OUT_MAX];
        size_t n_out;
        char *in;
        size_t in_len;
        char handled[SDK_HANDLED_MAX][SDK_ID_MAX];
        size_t n_handled;
        struct sdk_status st;           /* published by sdk_report() */
        lws_sorted_usec_list_t sul_connect, sul_ping, sul_pong, sul_subscribe, sul_session;
};

/* test-server-sdk.c */
void sdk_report(struct sdk *sdk);
void sdk_event(struct sdk *sdk, const struct multiplay_event *ev);
void sdk_requests_run(struct sdk *sdk);

/* test-server-sdk-ws.c: the Centrifuge connection. */
int sdk_ws_context(struct sdk *sdk);
void sdk_ws_begin(struct sdk *sdk);

/* test-server-sdk-http.c: the local proxy's HTTP API. */
int sdk_proxy_parse(const char *url, struct sdk_proxy *ret);
int sdk_http_init(struct sdk *sdk);
int sdk_http_token(struct sdk *sdk);
int sdk_http_hold(struct sdk *sdk);
int sdk_http_ready(struct sdk *sdk, const char *allocation_id, bool ready);
int sdk_http_payload(struct sdk *sdk, const char *allocation_id);

/* test-server-sdk-proto.c: Centrifuge protocol v1 in JSON, and Multiplay's events. Pure. */
char *centrifuge_connect_command(uint32_t id, const char *token);
char *centrifuge_subscribe_command(uint32_t id, const char *channel,
                                   const struct sdk_position *recover);
char *centrifuge_ping_command(uint32_t id);
typedef void (*centrifuge_message_fn)(void *userdata, json_t *message);
int centrifuge_frame_split(const char *buf, size_t len, centrifuge_message_fn fn, void *userdata);
bool centrifuge_reply(json_t *message, uint32_t *ret_id, json_t **ret_result, json_t **ret_error);
bool centrifuge_publication(json_t *message, const char **ret_channel, json_t **ret_pub);
bool centrifuge_unsubscribed(json_t *message, const char **ret_channel, bool *ret_resubscribe);
void centrifuge_subscribe_result(json_t *result, struct sdk_position *position,
                                 bool *ret_recovered, json_t **ret_publications);
json_t *centrifuge_publication_data(json_t *pub, uint64_t *ret_offset);
int multiplay_event_parse(json_t *data, struct multiplay_event *ret);
