/* SPDX-License-Identifier: MIT */
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "macro.h"
#include "sockdiag.h"

#define ERRNO_MAX 4095

typedef struct SockDiagRequest {
        struct nlmsghdr header;
        struct inet_diag_req_v2 req;
} SockDiagRequest;

_Static_assert(sizeof(SockDiagRequest) == SOCKDIAG_REQUEST_SIZE, "request layout");
_Static_assert(sizeof(struct inet_diag_msg) % NLMSG_ALIGNTO == 0, "attributes follow directly");

typedef struct Endpoint {
        uint8_t family;
        uint16_t port;          /* network order, as in the sockaddr and in inet_diag_sockid */
        uint8_t addr[16];       /* 4 bytes for AF_INET */
} Endpoint;

/* A v4-mapped IPv6 address becomes the AF_INET address it stands for: the client's socket is
 * hashed by its v4 4-tuple (see sockdiag.h). */
static int endpoint_from_sockaddr(const struct sockaddr *sa, Endpoint *ret) {
        Endpoint e = { .family = (uint8_t) sa->sa_family };

        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
                e.port = in->sin_port;
                memcpy(e.addr, &in->sin_addr, 4);
        } else if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
                e.port = in6->sin6_port;
                if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
                        e.family = AF_INET;
                        memcpy(e.addr, in6->sin6_addr.s6_addr + 12, 4);
                } else
                        memcpy(e.addr, &in6->sin6_addr, 16);
        } else
                return -EAFNOSUPPORT;
        *ret = e;
        return 0;
}

size_t sockdiag_build_request(void *buf, size_t size, uint32_t seq, const struct sockaddr *client,
                              const struct sockaddr *server) {
        SockDiagRequest m = {
                .header = {
                        .nlmsg_len = sizeof(SockDiagRequest),
                        .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                        .nlmsg_flags = NLM_F_REQUEST, /* exact lookup: no NLM_F_DUMP */
                        .nlmsg_seq = seq,
                },
                .req = {
                        .sdiag_protocol = IPPROTO_TCP,
                        .idiag_states = UINT32_MAX, /* ignored by the exact lookup */
                        .id.idiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE },
                },
        };
        Endpoint c, s;

        if (!buf || size < sizeof(m) || !client || !server)
                return 0;
        if (endpoint_from_sockaddr(client, &c) < 0 || endpoint_from_sockaddr(server, &s) < 0 ||
            c.family != s.family)
                return 0;

        /* idiag_src/sport name the socket looked up: the client's own. */
        m.req.sdiag_family = c.family;
        m.req.id.idiag_sport = c.port;
        m.req.id.idiag_dport = s.port;
        memcpy(m.req.id.idiag_src, c.addr, c.family == AF_INET ? 4 : 16);
        memcpy(m.req.id.idiag_dst, s.addr, s.family == AF_INET ? 4 : 16);
        memcpy(buf, &m, sizeof(m));
        return sizeof(m);
}

static int parse_error(const uint8_t *payload, size_t len) {
        struct nlmsgerr e;

        if (len < sizeof(e))
                return -EBADMSG;
        memcpy(&e, payload, sizeof(e));
        /* 0 would be an ACK, which we never ask for: an answer without data is no answer. */
        if (e.error >= 0 || e.error < -ERRNO_MAX)
                return -EBADMSG;
        return e.error;
}

/* The attributes after the inet_diag_msg: only INET_DIAG_CGROUP_ID matters. */
static int parse_cgroup_attribute(const uint8_t *p, size_t len, bool *ret_found, uint64_t *ret) {
        bool found = false;
        uint64_t id = 0;

        for (size_t off = 0; off < len;) {
                struct nlattr a;

                if (len - off < sizeof(a))
                        return -EBADMSG;
                memcpy(&a, p + off, sizeof(a));
                if (a.nla_len < sizeof(a) || a.nla_len > len - off)
                        return -EBADMSG;
                if ((a.nla_type & NLA_TYPE_MASK) == INET_DIAG_CGROUP_ID) {
                        if (found || a.nla_len != NLA_HDRLEN + sizeof(uint64_t))
                                return -EBADMSG;
                        memcpy(&id, p + off + NLA_HDRLEN, sizeof(id));
                        found = true;
                }
                off += MIN((size_t) NLA_ALIGN(a.nla_len), len - off);
        }
        *ret_found = found;
        *ret = id;
        return 0;
}

static int parse_diag_msg(const uint8_t *payload, size_t len, SockDiagPeer *ret) {
        struct inet_diag_msg m;
        uint64_t cgroup_id;
        bool found;
        int r;

        if (len < sizeof(m))
                return -EBADMSG;
        memcpy(&m, payload, sizeof(m));
        if (m.idiag_family != AF_INET && m.idiag_family != AF_INET6)
                return -EBADMSG;
        r = parse_cgroup_attribute(payload + sizeof(m), len - sizeof(m), &found, &cgroup_id);
        if (r < 0)
                return r;
        if (!found)
                /* TIME_WAIT and request sockets come without attributes and with inode 0: the
                 * socket is no one's any more. A socket with an owner but no cgroup id means a
                 * kernel before 5.7 (or without CONFIG_SOCK_CGROUP_DATA). */
                return m.idiag_inode == 0 ? -ENOENT : -EOPNOTSUPP;

        *ret = (SockDiagPeer) {
                .cgroup_id = cgroup_id,
                .uid = (uid_t) m.idiag_uid,
                .inode = m.idiag_inode,
        };
        return 0;
}

int sockdiag_parse_reply(const void *buf, size_t size, uint32_t seq, SockDiagPeer *ret) {
        const uint8_t *p = buf;
        size_t off = 0;

        if (!buf || size == 0)
                return -EBADMSG;
        while (size - off >= sizeof(struct nlmsghdr)) {
                struct nlmsghdr h;

                memcpy(&h, p + off, sizeof(h));
                if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > size - off)
                        return -EBADMSG;
                if (h.nlmsg_seq == seq && h.nlmsg_type != NLMSG_NOOP) {
                        const uint8_t *payload = p + off + NLMSG_HDRLEN;
                        size_t len = h.nlmsg_len - NLMSG_HDRLEN;

                        if (h.nlmsg_type == NLMSG_ERROR)
                                return parse_error(payload, len);
                        if (h.nlmsg_type != SOCK_DIAG_BY_FAMILY)
                                return -EBADMSG;
                        return parse_diag_msg(payload, len, ret);
                }
                off += MIN((size_t) NLMSG_ALIGN(h.nlmsg_len), size - off);
        }
        return off == size ? -ESTALE : -EBADMSG;
}

int sockdiag_open(void) {
        /* Connected to port 0, the kernel: netlink then refuses unicasts from any other
         * socket (netlink_getsockbyportid), so no local process can forge an answer. */
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        _cleanup_close_ int fd = -EBADF;

        fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_SOCK_DIAG);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (const struct sockaddr *) &kernel, sizeof(kernel)) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

/* Reads until the answer carrying seq; older answers (a lookup that gave up early) are
 * dropped on the way. */
static int receive_answer(int fd, uint32_t seq, SockDiagPeer *ret) {
        /* The answer is one inet_diag_msg with a few small attributes (no idiag_ext bits):
         * well under 1 KiB. */
        _Alignas(struct nlmsghdr) uint8_t buf[8192];

        for (;;) {
                struct sockaddr_nl from = {};
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
                struct msghdr mh = {
                        .msg_name = &from,
                        .msg_namelen = sizeof(from),
                        .msg_iov = &iov,
                        .msg_iovlen = 1,
                };
                ssize_t n;
                int r;

                n = recvmsg(fd, &mh, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (from.nl_pid != 0 || (mh.msg_flags & MSG_TRUNC))
                        continue;
                r = sockdiag_parse_reply(buf, (size_t) n, seq, ret);
                if (r != -ESTALE)
                        return r;
        }
}

int sockdiag_lookup_tcp(int fd, const struct sockaddr *client, const struct sockaddr *server,
                        SockDiagPeer *ret) {
        static uint32_t last_seq;
        uint8_t req[SOCKDIAG_REQUEST_SIZE];
        uint32_t seq = ++last_seq;
        size_t n;

        if (fd < 0 || !ret)
                return -EINVAL;
        n = sockdiag_build_request(req, sizeof(req), seq, client, server);
        if (n == 0)
                return -EINVAL;
        /* The kernel handles the request inside this send and queues its answer before it
         * returns (sockdiag.h), so the MSG_DONTWAIT receive that follows finds it. */
        if (send(fd, req, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                return negative_errno();
        return receive_answer(fd, seq, ret);
}

/* A client connected to a listener on 127.0.0.1, both on ports the kernel picks. On loopback
 * the handshake is done within connect(); SO_SNDTIMEO bounds it all the same (a filter that
 * drops SYNs on lo would otherwise hold the caller for the minutes of TCP's retries). */
static int loopback_connect(int *ret_listener, int *ret_client, struct sockaddr_in *ret_server,
                            struct sockaddr_in *ret_client_addr) {
        struct sockaddr_in server = { .sin_family = AF_INET,
                                      .sin_addr.s_addr = htonl(INADDR_LOOPBACK) }, client_addr;
        const struct timeval timeout = { .tv_sec = 1 };
        _cleanup_close_ int listener = -EBADF, client = -EBADF;
        socklen_t len = sizeof(server);

        listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listener < 0)
                return negative_errno();
        if (bind(listener, (const struct sockaddr *) &server, sizeof(server)) < 0 ||
            listen(listener, 1) < 0 || getsockname(listener, (struct sockaddr *) &server, &len) < 0)
                return negative_errno();
        client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (client < 0)
                return negative_errno();
        (void) setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
        if (connect(client, (const struct sockaddr *) &server, sizeof(server)) < 0)
                return negative_errno();
        len = sizeof(client_addr);
        if (getsockname(client, (struct sockaddr *) &client_addr, &len) < 0)
                return negative_errno();
        *ret_listener = TAKE_FD(listener);
        *ret_client = TAKE_FD(client);
        *ret_server = server;
        *ret_client_addr = client_addr;
        return 0;
}

int sockdiag_self_test(uint64_t cgroup_id, bool *ret_untested) {
        /* The listener stays open until the lookup is done: closed, it would reset the client's
         * connection, still in its accept queue. */
        _cleanup_close_ int listener = -EBADF, client = -EBADF, nl = -EBADF;
        struct sockaddr_in server, client_addr;
        SockDiagPeer d;
        struct stat st;
        int r;

        *ret_untested = true;
        r = loopback_connect(&listener, &client, &server, &client_addr);
        if (r < 0)
                return r;
        if (fstat(client, &st) < 0)
                return negative_errno();
        *ret_untested = false;
        nl = sockdiag_open();
        if (nl < 0)
                return nl;
        r = sockdiag_lookup_tcp(nl, (const struct sockaddr *) &client_addr,
                                (const struct sockaddr *) &server, &d);
        if (r < 0)
                return r;
        if (d.inode != (uint64_t) st.st_ino || d.uid != geteuid() ||
            (cgroup_id != 0 && d.cgroup_id != cgroup_id))
                return -EPROTO;
        return 0;
}
