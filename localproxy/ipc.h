/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stddef.h>

/* The channel between slotd and its local proxy (slotd-proxy): one SOCK_SEQPACKET socketpair,
 * one JSON object per datagram, at most IPC_MESSAGE_MAX bytes. The proxy parses everything
 * that comes from the network; slotd decides everything. Every object has "type".
 *
 * The proxy outlives slotd: slotd binds <state_dir>/proxy.sock (SOCK_SEQPACKET, 0600) and
 * passes it (--control-fd), the proxy listens on it, and a slotd that starts later connects
 * there (SO_PEERCRED: the proxy's PID and uid). That connection is the channel from then on,
 * and the proxy's first message on it is
 *   {"type":"hello","pid":P,"listen":[{"address":"127.0.0.1","port":8086},…],
 *    "metrics":{"address":…,"port":…} or null}
 * followed by a "conn" for every open connection and a "subscribe" request for every
 * subscribed server (its answer's "last" goes to the subscribers that have not had it).
 *
 * proxy → slotd
 *   {"type":"conn","conn":C,"local":"127.0.0.1","local_port":8086,
 *    "peer":"127.0.0.1","peer_port":54321}
 *        a TCP connection was accepted (IPv6 addresses in their usual text form). Sent
 *        before any request of C. slotd finds the peer's slot (sock_diag) and answers
 *   {"type":"conn","conn":C,"slot":N or null,"admin":true|false}
 *        or, when it could not ask (sock_diag unavailable: the sock_diag fault, SPEC §12),
 *   {"type":"conn","conn":C,"slot":null,"admin":false,"unavailable":"…"}
 *        C is unknown, which is not a stranger: its requests are answered 503 with the
 *        message (slotd answers them "unavailable" too) and the connection closed, its
 *        Centrifuge connect refused with a temporary error, so that the client retries on a
 *        new connection, which slotd identifies anew.
 *   {"type":"close","conn":C}                       the connection is gone (no answer)
 *   {"type":"request","id":R,"conn":C,"op":OP,…}    answered by exactly one "reply":
 *     op "ready"         "server":N,"allocation":"UUID","ready":bool    → {}
 *     op "hold"          "server":N,"timeout_usec":T                    → {"held":true,"expires_at":S}
 *     op "hold_status"   "server":N                                     → {"held":B,"expires_at":S}
 *     op "release_hold"  "server":N                                     → {}
 *     op "reserve"       "server":N                                     → {"reservation_id":"UUID",
 *                        "build_configuration_id":"ID","game_port":P,"ipv4":"…","ipv6":"…",
 *                        "requested":"RFC3339","created":"RFC3339","fulfilled":"RFC3339"}
 *     op "unreserve"     "server":N                                     → {}
 *     op "payload"       "allocation":"UUID"                            → {"payload":"BASE64"}
 *     op "token"         (nothing)                                      → {"token":"JWT"}
 *     op "subscribe"     "server":N  → {"epoch":"E","offset":O,"last":EVENT or null}
 *                        (EVENT as in "event" below, without "type"; "last" is the slot's
 *                        latest allocation event: the one at "offset")
 *   S: unix seconds (CLOCK_REALTIME).
 *   {"type":"metrics","id":M}     a scrape of metrics.listen (SPEC §14), answered by
 *                                 "metrics" parts below. M counts apart from requests' ids.
 *
 * slotd → proxy
 *   {"type":"reply","id":R,"result":{…}}
 *   {"type":"reply","id":R,"error":{"code":CODE,"message":"…"}}
 *        CODE: "access-denied" (HTTP 403), "no-such-slot" (404), "no-such-allocation" (404),
 *        "invalid-state" (409), "invalid-argument" (400), "no-capacity" (409),
 *        "draining" (409), "unavailable" (503), "failed" (500), "state-unwritable" (503:
 *        state_dir takes no writes, the change was refused and nothing changed). The message
 *        names the rule.
 *   {"type":"event","server":N,"epoch":"E","offset":O,"event_type":"AllocateEventType" or
 *    "DeallocateEventType","event_id":"UUID","allocation":"UUID"}
 *        every allocation and deallocation of every slot, once it is durable, in order per
 *        slot; offsets grow by one per event of a slot and survive slotd's restarts.
 *   {"type":"metrics","id":M,"text":"…","more":true|false}
 *        the exposition text of one scrape in parts, in order, each at most IPC_METRICS_PART
 *        bytes of text and ending at a line's end; "more" is false on the last. Or
 *   {"type":"metrics","id":M,"error":"…"}   no text could be made.
 *   {"type":"metrics_listen","address":"127.0.0.1","port":9187} with one fd (SCM_RIGHTS)
 *        Reload moved metrics.listen (SPEC §14): the fd is the new listening socket, bound
 *        by slotd. The proxy stops its metrics daemon (the old listener and its scrapes go;
 *        the SDK's connections stay) and serves GET /metrics on the fd; its hello names it
 *        from then on. Or
 *   {"type":"metrics_listen","address":null}   with no fd: metrics.listen is off.
 *        One with an address but no fd (or an fd but no address) is ignored, its fd closed;
 *        an fd that comes with any other message is closed.
 *        Receiving it needs only recvmsg, which the proxy's seccomp filter (the game servers'
 *        default) allows. */

/* A part of the metrics' text: even with every byte escaped by JSON (\u00XX at worst) it fits
 * in a message. */
#define IPC_METRICS_PART (16 * 1024)

#define IPC_MESSAGE_MAX (128 * 1024)

/* Sends one object as one datagram (MSG_NOSIGNAL|MSG_DONTWAIT). -EAGAIN when the socket is
 * full; the caller decides. */
int ipc_send(int fd, json_t *message);
/* The same with pass_fd (>= 0) attached (SCM_RIGHTS): "metrics_listen" has one. */
int ipc_send_fd(int fd, json_t *message, int pass_fd);
/* Receives one datagram and parses it: 0 and *ret (an object with a string "type"),
 * -EAGAIN nothing waits, -ECONNRESET the other side is gone, -EBADMSG not a message. A file
 * descriptor that came with it is closed. */
int ipc_receive(int fd, json_t **ret);
/* The same, and *ret_fd the descriptor that came with the message (O_CLOEXEC), -EBADF: none;
 * more than one: the first, the others closed. */
int ipc_receive_fd(int fd, json_t **ret, int *ret_fd);
