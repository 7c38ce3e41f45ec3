/* SPDX-License-Identifier: MIT */
/* One Centrifuge connection of the local proxy, as far as localproxy/centrifuge.c decides its
 * frames: node/check-wire.mjs runs a WebSocket server and hands each client message here,
 * and sends back what this prints, so that the real clients judge our encoders.
 *
 *   centrifuge-echo [--epoch E] [--ping SEC] [--refuse CHANNEL] [--data JSON]...
 *
 * stdin: one line per WebSocket text message the client sent, as a JSON string.
 * stdout, one line each:
 *   "…"      a JSON string: the text of a message to send to the client
 *   # {…}    a note: one command parsed ({"method":…,"id":…,…}) or {"error":"EBADMSG"}
 *
 * What it answers, as the proxy will: connect → the connect reply; subscribe → the subscribe
 * reply, and then, in a message of its own, the publication of offset 1 (data: the first
 * --data), then a server ping (v2); subscribe with recover and our epoch from offset N → a
 * recovered reply carrying the publication of offset N + 1 (the next --data); unsubscribe
 * and ping → the empty reply; a subscribe to the --refuse channel → "permission denied";
 * anything else with an id → "method not found". The replies to
 * one message go out together, one per line, in one message, as the centrifuge server did. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "centrifuge.h"

#define DATA_MAX 8

static const char *epoch = "e-1";
static const char *refused_channel = "";
static unsigned ping_interval = 25;
static const char *datas[DATA_MAX];
static size_t n_datas;

/* The message (or note) text as one line. */
static void print_string(const char *text) {
        json_t *s = json_string(text);
        char *line = s ? json_dumps(s, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;

        if (!line) {
                fprintf(stderr, "centrifuge-echo: cannot encode a message\n");
                exit(EXIT_FAILURE);
        }
        printf("%s\n", line);
        free(line);
        json_decref(s);
}

static void print_note(const CentrifugeCommand *c, CentrifugeVersion v) {
        static const char *const methods[] = {
                [CENTRIFUGE_CONNECT] = "connect",         [CENTRIFUGE_SUBSCRIBE] = "subscribe",
                [CENTRIFUGE_UNSUBSCRIBE] = "unsubscribe", [CENTRIFUGE_PING] = "ping",
                [CENTRIFUGE_PONG] = "pong",               [CENTRIFUGE_UNSUPPORTED] = "unsupported",
        };
        json_t *note = json_pack("{s:s,s:i,s:I,s:b,s:s,s:b,s:s,s:I}", "method", methods[c->method],
                                 "version", v == CENTRIFUGE_V1 ? 1 : 2, "id", (json_int_t) c->id,
                                 "has_token", c->has_token, "channel", c->channel,
                                 "recover", c->recover, "epoch", c->epoch,
                                 "offset", (json_int_t) c->offset);
        char *text = note ? json_dumps(note, JSON_COMPACT) : NULL;

        printf("# %s\n", text ? text : "{}");
        free(text);
        json_decref(note);
}

/* Appends a reply to the message being built; a NULL reply is a bug of the encoders. */
static void append(char **message, char *reply) {
        char *joined;

        if (!reply) {
                fprintf(stderr, "centrifuge-echo: an encoder returned NULL\n");
                exit(EXIT_FAILURE);
        }
        if (!*message) {
                *message = reply;
                return;
        }
        if (asprintf(&joined, "%s\n%s", *message, reply) < 0)
                exit(EXIT_FAILURE);
        free(*message);
        free(reply);
        *message = joined;
}

static const char *data_for(uint64_t offset) {
        return datas[(offset - 1) % n_datas];
}

/* The subscribe reply; *ret_push is set when a live publication is to follow it. */
static char *subscribe_reply(CentrifugeVersion v, const CentrifugeCommand *c, bool *ret_push) {
        CentrifugePublication missed = { data_for(c->offset + 1), c->offset + 1 };
        CentrifugeSubscribeResult r = {
                .recoverable = true, .epoch = epoch, .was_recovering = c->recover,
        };

        if (c->recover && strcmp(c->epoch, epoch) == 0) {
                r.offset = missed.offset;
                r.recovered = true;
                r.publications = &missed;
                r.n_publications = 1;
                *ret_push = false;
        } else
                *ret_push = true;
        return centrifuge_subscribe_reply(v, c->id, &r);
}

/* Every command with an id is answered, but a pong; those without one never are. */
static char *answer(CentrifugeVersion v, const CentrifugeCommand *c, bool *push) {
        switch (c->method) {
        case CENTRIFUGE_CONNECT:
                return centrifuge_connect_reply(v, c->id, "echo-client-1", ping_interval);
        case CENTRIFUGE_SUBSCRIBE:
                if (strcmp(c->channel, refused_channel) == 0)
                        return centrifuge_error_reply(v, c->id,
                                                      CENTRIFUGE_ERROR_PERMISSION_DENIED,
                                                      "permission denied");
                return subscribe_reply(v, c, push);
        case CENTRIFUGE_UNSUBSCRIBE:
        case CENTRIFUGE_PING:
                return centrifuge_empty_reply(v, c->id, c->method);
        default:
                return centrifuge_error_reply(v, c->id, CENTRIFUGE_ERROR_METHOD_NOT_FOUND,
                                              "method not found");
        }
}

/* A message of one encoder's text and a suffix. */
static void print_alone(char *text, const char *suffix) {
        char *message = NULL;

        append(&message, text);
        if (asprintf(&text, "%s%s", message, suffix) < 0)
                exit(EXIT_FAILURE);
        print_string(text);
        free(text);
        free(message);
}

static void handle_message(const char *text, size_t len, CentrifugeVersion *v) {
        CentrifugeCommand cmds[CENTRIFUGE_COMMANDS_MAX];
        const char *channel = NULL;
        char *message = NULL;
        size_t n = 0;

        if (centrifuge_parse(text, len, v, cmds, CENTRIFUGE_COMMANDS_MAX, &n) < 0) {
                printf("# {\"error\":\"EBADMSG\"}\n");
                fflush(stdout);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                bool push = false;

                print_note(&cmds[i], *v);
                if (cmds[i].method == CENTRIFUGE_PONG || cmds[i].id == 0)
                        continue;
                append(&message, answer(*v, &cmds[i], &push));
                if (push)
                        channel = cmds[i].channel;
        }
        if (message)
                print_string(message);
        free(message);

        if (channel) {
                CentrifugePublication p = { data_for(1), 1 };

                /* Alone in its message and ended by "\n", as the Go server's encoder ended
                 * every reply: the clients are shown both forms. */
                print_alone(centrifuge_publication_push(*v, channel, &p), "\n");
                if (*v == CENTRIFUGE_V2)
                        print_alone(centrifuge_server_ping(*v), "");
        }
        fflush(stdout);
}

static int parse_argv(int argc, char *argv[]) {
        static const struct option options[] = {
                { "epoch", required_argument, NULL, 'e' },
                { "ping", required_argument, NULL, 'p' },
                { "refuse", required_argument, NULL, 'r' },
                { "data", required_argument, NULL, 'd' },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'e':
                        epoch = optarg;
                        break;
                case 'p':
                        ping_interval = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'r':
                        refused_channel = optarg;
                        break;
                case 'd':
                        if (n_datas == DATA_MAX)
                                return -E2BIG;
                        datas[n_datas++] = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        if (n_datas == 0)
                datas[n_datas++] = "{\"EventType\":\"AllocateEventType\"}";
        return 0;
}

int main(int argc, char *argv[]) {
        CentrifugeVersion version = CENTRIFUGE_UNKNOWN;
        char *line = NULL;
        size_t size = 0;

        if (parse_argv(argc, argv) < 0) {
                fprintf(stderr, "usage: %s [--epoch E] [--ping SEC] [--refuse CHANNEL] "
                        "[--data JSON]...\n", argv[0]);
                return EXIT_FAILURE;
        }
        while (getline(&line, &size, stdin) > 0) {
                json_t *s = json_loads(line, JSON_DECODE_ANY, NULL);

                if (!json_is_string(s)) {
                        fprintf(stderr, "centrifuge-echo: not a JSON string: %s", line);
                        return EXIT_FAILURE;
                }
                handle_message(json_string_value(s), json_string_length(s), &version);
                json_decref(s);
        }
        free(line);
        return EXIT_SUCCESS;
}
