/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Which cgroup created the client end of a local TCP connection: one exact NETLINK_SOCK_DIAG
 * lookup (inet_diag_req_v2, no dump) of the client's own socket by its 4-tuple.
 *
 * What the kernel does (net/ipv4/inet_diag.c, net/ipv4/tcp_diag.c, net/core/sock_diag.c):
 *  - INET_DIAG_CGROUP_ID needs no idiag_ext bit: inet_diag_msg_attrs_fill() puts it for every
 *    full socket (CONFIG_SOCK_CGROUP_DATA, Linux >= 5.7). It is the cgroup v2 id the socket
 *    was created in, which is the inode number of that cgroup's directory. TIME_WAIT and
 *    request (SYN_RECV) mini sockets are answered without it, with uid and inode 0.
 *  - The answer is queued before sendmsg() returns: netlink_unicast() to the kernel socket
 *    runs sock_diag_rcv() in the sender's context, and tcp_diag_dump_one() nlmsg_unicast()s
 *    the reply (or netlink_rcv_skb() an NLMSG_ERROR) to our port before returning. A
 *    MSG_DONTWAIT recv right after the send therefore gets it.
 *  - The exact lookup ignores idiag_states; idiag_cookie must be INET_DIAG_NOCOOKIE in both
 *    words, or it must match the socket's cookie (else ENOENT). It searches the network
 *    namespace of the netlink socket, with idiag_if 0: a client bound to a device
 *    (SO_BINDTODEVICE) is not found.
 *
 * IPv4-mapped IPv6: a v4 client accepted on a dual-stack [::] socket shows up as
 * ::ffff:a.b.c.d. The client's socket is an IPv4 one (or a v6 socket connected to a mapped
 * address, hashed by its v4 4-tuple either way); the kernel finds it by AF_INET6 with both
 * addresses mapped (it then does a v4 lookup), or by AF_INET. sockdiag_build_request() sends
 * such a pair as AF_INET, which every kernel understands. One mapped and one plain v6 address
 * is no TCP connection and is refused. */

typedef struct SockDiagPeer {
        uint64_t cgroup_id;     /* == st_ino of the cgroup v2 directory */
        uid_t uid;              /* the socket's owner, in the netlink socket's user namespace */
        uint64_t inode;         /* the socket's inode; 0 once its owner closed it */
} SockDiagPeer;

/* NETLINK_SOCK_DIAG, SOCK_CLOEXEC|SOCK_NONBLOCK, connected to the kernel so that no other
 * process can feed it answers. The fd or -errno. */
int sockdiag_open(void);

/* Looks up the TCP socket at 'client' connected to 'server' (both sockaddr_in or both
 * sockaddr_in6). 0 and *ret; -ENOENT no such socket (or only a TIME_WAIT/SYN_RECV one, which
 * has no owner any more); -EOPNOTSUPP no cgroup id in the answer (kernel < 5.7); -EINVAL bad
 * addresses; -EAGAIN no answer queued (the kernel answers synchronously, so this is not
 * expected); other -errno. Never blocks. Not thread-safe (one sequence counter). */
int sockdiag_lookup_tcp(int fd, const struct sockaddr *client, const struct sockaddr *server,
                        SockDiagPeer *ret);

/* Proves that callers can be named by their TCP sockets: a client of our own, connected to a
 * listener of our own on 127.0.0.1 (both ports the kernel's pick), looked up by its 4-tuple on
 * a NETLINK_SOCK_DIAG socket of its own, must be found as that very socket (its inode), owned
 * by this process's effective uid, in the cgroup whose id is cgroup_id (0: not compared).
 * 0, or why not: the netlink socket's error (-EPROTONOSUPPORT: no NETLINK_SOCK_DIAG), the
 * lookup's (-ENOENT for a socket that is alive: the kernel lacks inet_diag or tcp_diag, which
 * it cannot load; -EOPNOTSUPP: no cgroup id, kernel < 5.7), or -EPROTO (the answer names
 * another socket, owner or cgroup). *ret_untested is set on every return: true when no
 * loopback connection could be made, sock_diag not tried, and the error that of the
 * connection (the loopback down, no file descriptors left). Blocks for at most about a
 * second (the connect's SO_SNDTIMEO; on loopback the handshake is done within connect()). */
int sockdiag_self_test(uint64_t cgroup_id, bool *ret_untested);

/* Pure halves, for tests and the fuzzer. */

/* Writes one request (nlmsghdr + inet_diag_req_v2) to buf; its size, or 0 if the addresses
 * are unusable or buf is too small. */
size_t sockdiag_build_request(void *buf, size_t size, uint32_t seq, const struct sockaddr *client,
                              const struct sockaddr *server);
#define SOCKDIAG_REQUEST_SIZE 72 /* NLMSG_LENGTH(sizeof(struct inet_diag_req_v2)) */

/* Parses one received datagram. The first message carrying seq decides: 0 and *ret;
 * -ENOENT (NLMSG_ERROR ENOENT, or a mini socket without owner); the errno of any other
 * NLMSG_ERROR; -EOPNOTSUPP (a full socket without INET_DIAG_CGROUP_ID); -EBADMSG malformed.
 * -ESTALE when no message carries seq (answers to an earlier request: read on). */
int sockdiag_parse_reply(const void *buf, size_t size, uint32_t seq, SockDiagPeer *ret);
