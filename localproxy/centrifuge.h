/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The Centrifuge client protocol in JSON, both versions, as far as a Multiplay SDK client
 * needs it: connect, subscribe, unsubscribe, ping, and publications pushed into a channel.
 * Pure: no I/O, no logging; every byte of input is hostile (bounded, fuzzed). One caveat is
 * jansson's: the first JSON object it makes seeds its hash function, from /dev/urandom, unless
 * json_object_seed() was called before; a process that confines itself calls that first.
 *
 * Version 1 (centrifuge-go 0.8, centrifuge-js 2.x): commands {"id":N,"method":M,"params":{…}}
 * with methods numbered (connect 0, may be omitted), replies {"id":N,"result":{…}} or
 * {"id":N,"error":{"code":C,"message":"…"}}, pushes {"result":{"type":T,"channel":…,"data":…}}.
 * Version 2 (centrifuge-js 5.x): commands {"id":N,"connect":{…}} / {"id":N,"subscribe":{…}},
 * replies {"id":N,"connect":{…}}, pushes {"push":{"channel":…,"pub":{…}}}, and the empty
 * object {} as ping (server) and pong (client).
 * A frame may carry several commands separated by newlines. The version is decided by the
 * shape of the first command of a connection and kept for its life.
 *
 * Shapes: an object with "method" or "params" is v1; one with a v2 request key ("connect",
 * "subscribe", …, "sub_refresh") is v2; both at once is an error. {} is the v2 pong. An object
 * with neither (e.g. {"id":1}: a v1 connect omits its method 0 and may omit its params) is a
 * v1 connect while the version is unknown or v1, and an unsupported v2 request under v2.
 * Unknown keys are ignored, as protobuf's JSON decoders do, so that newer clients' fields
 * (5.x sends "flag", "headers", "positioned", …) do not break them. */

typedef enum CentrifugeVersion {
        CENTRIFUGE_UNKNOWN,
        CENTRIFUGE_V1,
        CENTRIFUGE_V2,
} CentrifugeVersion;

typedef enum CentrifugeMethod {
        CENTRIFUGE_CONNECT,
        CENTRIFUGE_SUBSCRIBE,
        CENTRIFUGE_UNSUBSCRIBE,
        CENTRIFUGE_PING,          /* v1 ping command (method 7), or a v2 {"ping":{}}:
                                   * answered with an empty reply */
        CENTRIFUGE_PONG,          /* v2: the client's {} answer to the server's ping */
        CENTRIFUGE_UNSUPPORTED,   /* a well-formed command the proxy does not serve
                                   * (publish, presence, history, rpc, refresh, …): answered
                                   * with an error reply, the connection stays; one
                                   * with id 0 (a v1/v2 "send") expects no reply */
} CentrifugeMethod;

#define CENTRIFUGE_CHANNEL_MAX 128
#define CENTRIFUGE_EPOCH_MAX 64
#define CENTRIFUGE_TOKEN_MAX 4096
#define CENTRIFUGE_COMMANDS_MAX 16   /* per frame */
#define CENTRIFUGE_FRAME_MAX (64 * 1024)  /* a longer frame is refused unparsed */
#define CENTRIFUGE_DEPTH_MAX 16      /* nesting of objects and arrays within one command */

typedef struct CentrifugeCommand {
        uint32_t id;                  /* 0 where the command has none: only a pong or an
                                       * unsupported one; connect, subscribe, unsubscribe
                                       * and ping without an id are refused */
        CentrifugeMethod method;
        char channel[CENTRIFUGE_CHANNEL_MAX + 1];  /* subscribe, unsubscribe */
        bool recover;                 /* subscribe: the client asks for what it missed */
        char epoch[CENTRIFUGE_EPOCH_MAX + 1];      /* with recover, else "" */
        uint64_t offset;              /* with recover, else 0: the last offset the client
                                       * saw (v1 legacy seq/gen are packed into it as the
                                       * centrifuge server did: gen * 0xffffffff + seq) */
        bool has_token;               /* connect carried a token (it is not checked: the
                                       * proxy knows the caller from its socket) */
} CentrifugeCommand;

/* Parses one WebSocket text message. *version is decided from the first command when it is
 * CENTRIFUGE_UNKNOWN, and a command of the other version's shape is then an error.
 * Returns 0 and the commands in cmds[0..*ret_n), or -EBADMSG (not JSON, not a command,
 * wrong types, a string too long, more than max commands). Never reads past len.
 * Commands are separated by "\n"; blank lines are skipped, but a frame without a command is
 * refused. Strings must be UTF-8 without NUL; channel and epoch also without control
 * characters. On failure nothing is written: not *version, cmds nor *ret_n. */
int centrifuge_parse(const char *buf, size_t len, CentrifugeVersion *version,
                     CentrifugeCommand *cmds, size_t max, size_t *ret_n);

/* Encoders: malloc'd JSON text without a trailing newline (nor any newline inside: one
 * reply per line when several go in one frame), NULL on OOM, on CENTRIFUGE_UNKNOWN and on
 * arguments that are not valid (a NULL or non-UTF-8 string, data_json not a JSON object).
 * Fields with their zero value are omitted, as the Go encoders' omitempty does; so is the id
 * when it is 0. */

/* v1: {"id":N,"result":{"client":C,"version":"slotd"}}: v1 clients ping by themselves (2.x
 * every 25 s), so ping_interval_sec is not sent. v2: {"id":N,"connect":{"client":C,
 * "version":"slotd","ping":P,"pong":true}}: 5.x then expects the server's {} within
 * P + 10 s (maxServerPingDelay) and answers each with {}; P 0 leaves out ping and pong. */
char *centrifuge_connect_reply(CentrifugeVersion v, uint32_t id, const char *client_id,
                               unsigned ping_interval_sec);

typedef struct CentrifugePublication {
        const char *data_json;        /* the publication's data, a JSON object's text */
        uint64_t offset;
} CentrifugePublication;

typedef struct CentrifugeSubscribeResult {
        bool recoverable;             /* true: the channel has offsets and an epoch */
        const char *epoch;
        uint64_t offset;              /* the channel's current top offset */
        bool recovered;               /* the client asked to recover and nothing is missing
                                       * beyond the publications below */
        const CentrifugePublication *publications;  /* in the reply, when recovering */
        size_t n_publications;
        bool was_recovering;          /* v2 only: the client asked to recover (5.x tells the
                                       * application); v1 has no such field */
} CentrifugeSubscribeResult;

/* v1: {"id":N,"result":{"recoverable":true,"epoch":E,"publications":[…],"recovered":true,
 * "offset":O}}, the field order of the Go encoder. v2: {"id":N,"subscribe":{…}} with the same
 * fields, then "positioned":true when recoverable (5.x takes a stream position from a reply
 * that is positioned or recoverable) and "was_recovering". */
char *centrifuge_subscribe_reply(CentrifugeVersion v, uint32_t id,
                                 const CentrifugeSubscribeResult *r);
/* A reply with an empty result, for CENTRIFUGE_UNSUBSCRIBE and CENTRIFUGE_PING (NULL for
 * any other method). v1: {"id":N,"result":{}} for unsubscribe and {"id":N} for ping, as the
 * centrifuge server sent them; v2: {"id":N,"unsubscribe":{}} and {"id":N,"ping":{}}. */
char *centrifuge_empty_reply(CentrifugeVersion v, uint32_t id, CentrifugeMethod method);
/* Both versions: {"id":N,"error":{"code":C,"message":M}}. */
char *centrifuge_error_reply(CentrifugeVersion v, uint32_t id, unsigned code,
                             const char *message);
/* The same with "temporary":true (protocol v2's Error field; v1 clients ignore it): an error
 * to retry. centrifuge-js 5.x retries a connect or subscribe refused with it, or with a code
 * below 100, and ends it otherwise; 2.x retries every refused connect, with back-off. The
 * centrifuge server itself marks CENTRIFUGE_ERROR_INTERNAL temporary. */
char *centrifuge_temporary_error_reply(CentrifugeVersion v, uint32_t id, unsigned code,
                                       const char *message);
/* A publication pushed into a channel the client subscribed to. v1: a reply without id
 * whose result is a push of type 0 (publication, omitted):
 * {"result":{"channel":C,"data":{"data":{…},"offset":N}}}; v2: {"push":{"channel":C,
 * "pub":{"data":{…},"offset":N}}}. */
char *centrifuge_publication_push(CentrifugeVersion v, const char *channel,
                                  const CentrifugePublication *p);
/* v2: the server's ping, "{}"; v1 has none (NULL). */
char *centrifuge_server_ping(CentrifugeVersion v);

/* Centrifuge's error codes that the proxy uses. */
#define CENTRIFUGE_ERROR_INTERNAL 100
#define CENTRIFUGE_ERROR_UNAUTHORIZED 101
#define CENTRIFUGE_ERROR_UNKNOWN_CHANNEL 102
#define CENTRIFUGE_ERROR_PERMISSION_DENIED 103
#define CENTRIFUGE_ERROR_METHOD_NOT_FOUND 104
#define CENTRIFUGE_ERROR_ALREADY_SUBSCRIBED 105
#define CENTRIFUGE_ERROR_LIMIT_EXCEEDED 106
#define CENTRIFUGE_ERROR_BAD_REQUEST 107
#define CENTRIFUGE_ERROR_NOT_AVAILABLE 108
