/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgroup.h"
#include "macro.h"
#include "sockdiag.h"

/* ---- hand-made netlink answers ---- */

static size_t put_attr(uint8_t *p, uint16_t type, const void *data, uint16_t len) {
        struct nlattr a = { .nla_len = (uint16_t) (NLA_HDRLEN + len), .nla_type = type };

        memcpy(p, &a, sizeof(a));
        memcpy(p + NLA_HDRLEN, data, len);
        memset(p + NLA_HDRLEN + len, 0, NLA_ALIGN(a.nla_len) - a.nla_len);
        return NLA_ALIGN(a.nla_len);
}

/* An answer as tcp_diag_dump_one() sends it: inet_diag_msg, INET_DIAG_SHUTDOWN, then
 * INET_DIAG_CGROUP_ID unless 'cgroup' is false. */
static size_t make_answer(uint8_t *buf, uint32_t seq, bool cgroup, uint64_t cgroup_id,
                          uint32_t uid, uint32_t inode) {
        struct nlmsghdr h = { .nlmsg_type = SOCK_DIAG_BY_FAMILY, .nlmsg_seq = seq };
        struct inet_diag_msg m = {
                .idiag_family = AF_INET,
                .idiag_state = 1, /* TCP_ESTABLISHED */
                .idiag_uid = uid,
                .idiag_inode = inode,
        };
        uint8_t shutdown = 0;
        size_t n = NLMSG_HDRLEN;

        memcpy(buf + n, &m, sizeof(m));
        n += sizeof(m);
        n += put_attr(buf + n, INET_DIAG_SHUTDOWN, &shutdown, 1);
        if (cgroup)
                n += put_attr(buf + n, INET_DIAG_CGROUP_ID, &cgroup_id, 8);
        h.nlmsg_len = (uint32_t) n;
        memcpy(buf, &h, sizeof(h));
        return n;
}

/* NLMSG_ERROR as netlink_ack() sends it: the error, then the request's header and body. */
static size_t make_error(uint8_t *buf, uint32_t seq, int error) {
        struct nlmsghdr h = { .nlmsg_type = NLMSG_ERROR, .nlmsg_seq = seq };
        struct nlmsgerr e = { .error = error, .msg = { .nlmsg_len = SOCKDIAG_REQUEST_SIZE } };
        size_t n = NLMSG_HDRLEN;

        memcpy(buf + n, &e, sizeof(e));
        n += sizeof(e);
        memset(buf + n, 0, SOCKDIAG_REQUEST_SIZE - NLMSG_HDRLEN);
        n += SOCKDIAG_REQUEST_SIZE - NLMSG_HDRLEN;
        h.nlmsg_len = (uint32_t) n;
        memcpy(buf, &h, sizeof(h));
        return n;
}

static const SockDiagPeer untouched = { .cgroup_id = 77, .uid = 77, .inode = 77 };

static void assert_untouched(const SockDiagPeer *p) {
        assert_int_equal(p->cgroup_id, untouched.cgroup_id);
        assert_int_equal(p->uid, untouched.uid);
        assert_int_equal(p->inode, untouched.inode);
}

static void test_build_v4(_unused_ void **state) {
        struct sockaddr_in c = { .sin_family = AF_INET, .sin_port = htons(40000),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(8086),
                                 .sin_addr.s_addr = htonl(0x7f000002) };
        uint8_t buf[SOCKDIAG_REQUEST_SIZE + 8];
        struct inet_diag_req_v2 req;
        struct nlmsghdr h;

        assert_int_equal(sockdiag_build_request(buf, sizeof(buf), 9, (struct sockaddr *) &c,
                                                (struct sockaddr *) &s),
                         SOCKDIAG_REQUEST_SIZE);
        memcpy(&h, buf, sizeof(h));
        memcpy(&req, buf + NLMSG_HDRLEN, sizeof(req));
        assert_int_equal(h.nlmsg_len, SOCKDIAG_REQUEST_SIZE);
        assert_int_equal(h.nlmsg_type, SOCK_DIAG_BY_FAMILY);
        assert_int_equal(h.nlmsg_flags, NLM_F_REQUEST); /* no NLM_F_DUMP, no NLM_F_ACK */
        assert_int_equal(h.nlmsg_seq, 9);
        assert_int_equal(req.sdiag_family, AF_INET);
        assert_int_equal(req.sdiag_protocol, IPPROTO_TCP);
        assert_int_equal(req.idiag_ext, 0);
        /* The client's own socket: src = client, dst = server, in network order. */
        assert_int_equal(req.id.idiag_sport, htons(40000));
        assert_int_equal(req.id.idiag_dport, htons(8086));
        assert_int_equal(req.id.idiag_src[0], htonl(INADDR_LOOPBACK));
        assert_int_equal(req.id.idiag_dst[0], htonl(0x7f000002));
        assert_int_equal(req.id.idiag_src[1] | req.id.idiag_src[2] | req.id.idiag_src[3], 0);
        assert_int_equal(req.id.idiag_if, 0);
        assert_int_equal(req.id.idiag_cookie[0], INET_DIAG_NOCOOKIE);
        assert_int_equal(req.id.idiag_cookie[1], INET_DIAG_NOCOOKIE);

        /* Too small a buffer, a missing address. */
        assert_int_equal(sockdiag_build_request(buf, SOCKDIAG_REQUEST_SIZE - 1, 9,
                                                (struct sockaddr *) &c, (struct sockaddr *) &s),
                         0);
        assert_int_equal(sockdiag_build_request(buf, sizeof(buf), 9, NULL, (struct sockaddr *) &s),
                         0);
}

static void test_build_v6_and_mapped(_unused_ void **state) {
        struct sockaddr_in6 c = { .sin6_family = AF_INET6, .sin6_port = htons(40000),
                                  .sin6_addr = IN6ADDR_LOOPBACK_INIT };
        struct sockaddr_in6 s = c;
        struct sockaddr_in v4 = { .sin_family = AF_INET, .sin_port = htons(1) };
        struct { sa_family_t f; char p[10]; } un = { .f = AF_UNIX };
        uint8_t buf[SOCKDIAG_REQUEST_SIZE];
        struct inet_diag_req_v2 req;

        s.sin6_port = htons(8086);
        assert_int_equal(sockdiag_build_request(buf, sizeof(buf), 1, (struct sockaddr *) &c,
                                                (struct sockaddr *) &s),
                         SOCKDIAG_REQUEST_SIZE);
        memcpy(&req, buf + NLMSG_HDRLEN, sizeof(req));
        assert_int_equal(req.sdiag_family, AF_INET6);
        assert_memory_equal(req.id.idiag_src, &in6addr_loopback, 16);
        assert_memory_equal(req.id.idiag_dst, &in6addr_loopback, 16);

        /* ::ffff:127.0.0.1 on both sides is sent as the AF_INET pair it stands for. */
        assert_int_equal(inet_pton(AF_INET6, "::ffff:127.0.0.1", &c.sin6_addr), 1);
        assert_int_equal(inet_pton(AF_INET6, "::ffff:127.0.0.3", &s.sin6_addr), 1);
        assert_int_equal(sockdiag_build_request(buf, sizeof(buf), 1, (struct sockaddr *) &c,
                                                (struct sockaddr *) &s),
                         SOCKDIAG_REQUEST_SIZE);
        memcpy(&req, buf + NLMSG_HDRLEN, sizeof(req));
        assert_int_equal(req.sdiag_family, AF_INET);
        assert_int_equal(req.id.idiag_src[0], htonl(0x7f000001));
        assert_int_equal(req.id.idiag_dst[0], htonl(0x7f000003));
        assert_int_equal(req.id.idiag_src[3], 0);

        /* One mapped and one plain IPv6 address, mixed families, AF_UNIX: no TCP lookup. */
        s.sin6_addr = in6addr_loopback;
        assert_int_equal(sockdiag_build_request(buf, sizeof(buf), 1, (struct sockaddr *) &c,
                                                (struct sockaddr *) &s),
                         0);
        assert_int_equal(sockdiag_build_request(buf, sizeof(buf), 1, (struct sockaddr *) &v4,
                                                (struct sockaddr *) &s),
                         0);
        assert_int_equal(sockdiag_build_request(buf, sizeof(buf), 1, (struct sockaddr *) &un,
                                                (struct sockaddr *) &un),
                         0);
}

static void test_parse_good(_unused_ void **state) {
        uint8_t buf[1024], shifted[1025];
        SockDiagPeer p = untouched;
        size_t n, m;

        n = make_answer(buf, 5, true, UINT64_C(0x1122334455667788), 1000, 4242);
        assert_int_equal(sockdiag_parse_reply(buf, n, 5, &p), 0);
        assert_true(p.cgroup_id == UINT64_C(0x1122334455667788));
        assert_int_equal(p.uid, 1000);
        assert_int_equal(p.inode, 4242);

        /* Unaligned in memory: the parser copies, never casts. */
        memcpy(shifted + 1, buf, n);
        p = untouched;
        assert_int_equal(sockdiag_parse_reply(shifted + 1, n, 5, &p), 0);
        assert_int_equal(p.inode, 4242);

        /* A stale answer (seq 4) ahead of ours in the same datagram is passed over. */
        m = make_answer(buf, 4, true, 1, 1, 1);
        m += make_answer(buf + m, 5, true, 99, 0, 7);
        p = untouched;
        assert_int_equal(sockdiag_parse_reply(buf, m, 5, &p), 0);
        assert_int_equal(p.cgroup_id, 99);
        assert_int_equal(p.inode, 7);
}

static void test_parse_truncated(_unused_ void **state) {
        uint8_t buf[1024];
        SockDiagPeer p = untouched;
        size_t n = make_answer(buf, 5, true, 1, 2, 3);
        struct nlattr a;

        for (size_t k = 0; k < n; k++)
                assert_int_equal(sockdiag_parse_reply(buf, k, 5, &p), -EBADMSG);
        assert_int_equal(sockdiag_parse_reply(NULL, 0, 5, &p), -EBADMSG);

        /* The header claims less than an inet_diag_msg. */
        buf[0] = NLMSG_HDRLEN + 10;
        assert_int_equal(sockdiag_parse_reply(buf, n, 5, &p), -EBADMSG);

        /* An attribute running past its message, one shorter than its header, a cgroup id of
         * the wrong size, the cgroup id twice. */
        n = make_answer(buf, 5, true, 1, 2, 3);
        memcpy(&a, buf + n - 12, sizeof(a));
        a.nla_len = 13;
        memcpy(buf + n - 12, &a, sizeof(a));
        assert_int_equal(sockdiag_parse_reply(buf, n, 5, &p), -EBADMSG);
        a.nla_len = 3;
        memcpy(buf + n - 12, &a, sizeof(a));
        assert_int_equal(sockdiag_parse_reply(buf, n, 5, &p), -EBADMSG);
        n = make_answer(buf, 5, true, 1, 2, 3);
        n += put_attr(buf + n, INET_DIAG_CGROUP_ID, &(uint64_t) { 2 }, 8);
        buf[0] = (uint8_t) n;
        assert_int_equal(sockdiag_parse_reply(buf, n, 5, &p), -EBADMSG);

        /* A family inet_diag never answers with; trailing bytes shorter than a header. */
        n = make_answer(buf, 5, true, 1, 2, 3);
        buf[NLMSG_HDRLEN] = AF_UNIX;
        assert_int_equal(sockdiag_parse_reply(buf, n, 5, &p), -EBADMSG);
        n = make_answer(buf, 4, true, 1, 2, 3);
        assert_int_equal(sockdiag_parse_reply(buf, n + 8, 5, &p), -EBADMSG);
        assert_untouched(&p);
}

static void test_parse_error(_unused_ void **state) {
        uint8_t buf[256];
        SockDiagPeer p = untouched;
        size_t n;

        n = make_error(buf, 3, -ENOENT);
        assert_int_equal(sockdiag_parse_reply(buf, n, 3, &p), -ENOENT);
        n = make_error(buf, 3, -EPERM);
        assert_int_equal(sockdiag_parse_reply(buf, n, 3, &p), -EPERM);
        /* An ACK (error 0) carries no answer; positive or huge values are no errno. */
        n = make_error(buf, 3, 0);
        assert_int_equal(sockdiag_parse_reply(buf, n, 3, &p), -EBADMSG);
        n = make_error(buf, 3, EPERM);
        assert_int_equal(sockdiag_parse_reply(buf, n, 3, &p), -EBADMSG);
        n = make_error(buf, 3, -5000);
        assert_int_equal(sockdiag_parse_reply(buf, n, 3, &p), -EBADMSG);
        /* Too short for struct nlmsgerr. */
        n = make_error(buf, 3, -ENOENT);
        buf[0] = NLMSG_HDRLEN + 4;
        assert_int_equal(sockdiag_parse_reply(buf, NLMSG_HDRLEN + 4, 3, &p), -EBADMSG);
        /* NLMSG_DONE is an answer to a dump, which we never send. */
        n = make_error(buf, 3, -ENOENT);
        buf[4] = NLMSG_DONE;
        assert_int_equal(sockdiag_parse_reply(buf, n, 3, &p), -EBADMSG);
        assert_untouched(&p);
}

static void test_parse_wrong_seq(_unused_ void **state) {
        uint8_t buf[1024];
        SockDiagPeer p = untouched;
        size_t n;

        n = make_answer(buf, 41, true, 1, 2, 3);
        assert_int_equal(sockdiag_parse_reply(buf, n, 42, &p), -ESTALE);
        n = make_error(buf, 41, -ENOENT);
        assert_int_equal(sockdiag_parse_reply(buf, n, 42, &p), -ESTALE);
        assert_untouched(&p);
}

static void test_parse_missing_attribute(_unused_ void **state) {
        uint8_t buf[1024];
        SockDiagPeer p = untouched;
        size_t n;

        /* A socket with an owner but no cgroup id: a kernel before 5.7. */
        n = make_answer(buf, 5, false, 0, 1000, 4242);
        assert_int_equal(sockdiag_parse_reply(buf, n, 5, &p), -EOPNOTSUPP);
        /* TIME_WAIT (tcp_twsk_diag_fill): no attributes at all, uid and inode 0. */
        n = make_answer(buf, 5, false, 0, 0, 0);
        buf[NLMSG_HDRLEN + 1] = 6; /* TCP_TIME_WAIT */
        n = NLMSG_HDRLEN + sizeof(struct inet_diag_msg);
        buf[0] = (uint8_t) n;
        assert_int_equal(sockdiag_parse_reply(buf, n, 5, &p), -ENOENT);
        assert_untouched(&p);
}

/* ---- live lookups on loopback ---- */

typedef struct Conn {
        int listener, client, accepted;
        struct sockaddr_storage peer, local; /* as the proxy sees them after accept() */
} Conn;

static void conn_close(Conn *c) {
        c->listener = safe_close(c->listener);
        c->client = safe_close(c->client);
        c->accepted = safe_close(c->accepted);
}

static int listen_on(const struct sockaddr *sa, socklen_t len, struct sockaddr_storage *ret) {
        socklen_t l = sizeof(*ret);
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        if (sa->sa_family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &(int) { 0 }, sizeof(int));
        if (bind(fd, sa, len) < 0 || listen(fd, 8) < 0 ||
            getsockname(fd, (struct sockaddr *) ret, &l) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

/* Listens on 'bind_addr' (port 0), connects a 'client_family' socket to 'connect_addr' with
 * the bound port, accepts. */
static int conn_open(const char *bind_addr, int client_family, const char *connect_addr,
                     Conn *ret) {
        struct sockaddr_storage ss = {}, bound;
        struct sockaddr_in *in = (struct sockaddr_in *) &ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
        socklen_t l = sizeof(ret->peer);
        int family = strchr(bind_addr, ':') ? AF_INET6 : AF_INET;

        *ret = (Conn) { .listener = -EBADF, .client = -EBADF, .accepted = -EBADF };
        ss.ss_family = (sa_family_t) family;
        if (inet_pton(family, bind_addr, family == AF_INET ? (void *) &in->sin_addr
                                                           : (void *) &in6->sin6_addr) != 1)
                return -EINVAL;
        ret->listener = listen_on((struct sockaddr *) &ss, sizeof(ss), &bound);
        if (ret->listener < 0)
                return ret->listener;

        memset(&ss, 0, sizeof(ss));
        ss.ss_family = (sa_family_t) client_family;
        if (client_family == AF_INET) {
                in->sin_port = family == AF_INET ? ((struct sockaddr_in *) &bound)->sin_port
                                                 : ((struct sockaddr_in6 *) &bound)->sin6_port;
                assert_int_equal(inet_pton(AF_INET, connect_addr, &in->sin_addr), 1);
        } else {
                in6->sin6_port = ((struct sockaddr_in6 *) &bound)->sin6_port;
                assert_int_equal(inet_pton(AF_INET6, connect_addr, &in6->sin6_addr), 1);
        }
        ret->client = socket(client_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (ret->client < 0 || connect(ret->client, (struct sockaddr *) &ss, sizeof(ss)) < 0)
                return -errno;
        ret->accepted = accept4(ret->listener, (struct sockaddr *) &ret->peer, &l, SOCK_CLOEXEC);
        if (ret->accepted < 0)
                return -errno;
        l = sizeof(ret->local);
        if (getsockname(ret->accepted, (struct sockaddr *) &ret->local, &l) < 0)
                return -errno;
        return 0;
}

/* The cgroup v2 directory of this process, or NULL (with the reason printed) to skip. */
static char *own_cgroup_dir(void) {
        _cleanup_free_ char *mount = NULL, *path = NULL;
        char *dir = NULL;

        if (cg_find_mount(&mount) < 0) {
                print_message("no cgroup2 mount in /proc/self/mountinfo: skipping\n");
                return NULL;
        }
        if (cg_pid_path(0, &path) < 0) {
                print_message("no 0:: line in /proc/self/cgroup: skipping\n");
                return NULL;
        }
        assert_true(asprintf(&dir, "%s%s", mount, streq(path, "/") ? "" : path) > 0);
        return dir;
}

static uint64_t inode_of(const char *path) {
        struct stat st;

        assert_int_equal(stat(path, &st), 0);
        return (uint64_t) st.st_ino;
}

static uint64_t inode_of_fd(int fd) {
        struct stat st;

        assert_int_equal(fstat(fd, &st), 0);
        return (uint64_t) st.st_ino;
}

static void live_case(const char *bind_addr, int client_family, const char *connect_addr) {
        _cleanup_free_ char *dir = own_cgroup_dir();
        _cleanup_close_ int nl = -EBADF;
        SockDiagPeer p = untouched;
        Conn c;
        int r;

        if (!dir)
                skip();
        nl = sockdiag_open();
        assert_true(nl >= 0);
        assert_int_equal(conn_open(bind_addr, client_family, connect_addr, &c), 0);

        /* Many lookups in a row, each a MSG_DONTWAIT send and receive: the kernel queues
         * every answer inside send(), or one would come back -EAGAIN. */
        for (int i = 0; i < 200; i++) {
                p = untouched;
                assert_int_equal(sockdiag_lookup_tcp(nl, (struct sockaddr *) &c.peer,
                                                     (struct sockaddr *) &c.local, &p),
                                 0);
        }
        assert_true(p.cgroup_id == inode_of(dir));
        assert_int_equal(p.uid, getuid());
        assert_true(p.inode == inode_of_fd(c.client));

        /* The other direction names the accepted socket. */
        assert_int_equal(sockdiag_lookup_tcp(nl, (struct sockaddr *) &c.local,
                                             (struct sockaddr *) &c.peer, &p),
                         0);
        assert_true(p.inode == inode_of_fd(c.accepted));

        /* Once both ends closed, the client's socket has no owner: TIME_WAIT (-ENOENT), or,
         * should the FIN's ACK still be on its way, an orphan with inode 0. */
        c.client = safe_close(c.client);
        c.accepted = safe_close(c.accepted);
        p = untouched;
        r = sockdiag_lookup_tcp(nl, (struct sockaddr *) &c.peer, (struct sockaddr *) &c.local, &p);
        if (r == -ENOENT)
                assert_untouched(&p);
        else {
                assert_int_equal(r, 0);
                assert_int_equal(p.inode, 0);
        }
        conn_close(&c);
}

static void test_live_v4(_unused_ void **state) {
        live_case("127.0.0.1", AF_INET, "127.0.0.1");
}

static void test_live_v6(_unused_ void **state) {
        live_case("::1", AF_INET6, "::1");
}

/* A v4 client accepted on a dual-stack socket: the proxy sees ::ffff:127.0.0.1. */
static void test_live_v4_on_dual_stack(_unused_ void **state) {
        live_case("::ffff:127.0.0.1", AF_INET, "127.0.0.1");
}

/* The kernel itself also accepts the mapped pair as AF_INET6 (tcp_diag_find_one_icsk() then
 * does a v4 lookup), which is what sockdiag.h says; the module sends AF_INET anyway. */
static void test_live_kernel_mapped_v6(_unused_ void **state) {
        _cleanup_close_ int nl = sockdiag_open();
        uint8_t req[SOCKDIAG_REQUEST_SIZE], buf[4096];
        struct inet_diag_req_v2 r;
        SockDiagPeer p = untouched;
        ssize_t n;
        Conn c;

        assert_true(nl >= 0);
        assert_int_equal(conn_open("::ffff:127.0.0.1", AF_INET, "127.0.0.1", &c), 0);
        assert_int_equal(sockdiag_build_request(req, sizeof(req), 4000, (struct sockaddr *) &c.peer,
                                                (struct sockaddr *) &c.local),
                         SOCKDIAG_REQUEST_SIZE);
        memcpy(&r, req + NLMSG_HDRLEN, sizeof(r));
        r.sdiag_family = AF_INET6;
        memcpy(r.id.idiag_src, &((struct sockaddr_in6 *) &c.peer)->sin6_addr, 16);
        memcpy(r.id.idiag_dst, &((struct sockaddr_in6 *) &c.local)->sin6_addr, 16);
        memcpy(req + NLMSG_HDRLEN, &r, sizeof(r));
        assert_int_equal(send(nl, req, sizeof(req), MSG_DONTWAIT), sizeof(req));
        n = recv(nl, buf, sizeof(buf), MSG_DONTWAIT);
        assert_true(n > 0);
        assert_int_equal(sockdiag_parse_reply(buf, (size_t) n, 4000, &p), 0);
        assert_true(p.inode == inode_of_fd(c.client));
        conn_close(&c);
}

static void test_live_missing(_unused_ void **state) {
        _cleanup_close_ int nl = sockdiag_open();
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(1),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        struct sockaddr_in6 b = { .sin6_family = AF_INET6 };
        SockDiagPeer p = untouched;

        assert_true(nl >= 0);
        assert_int_equal(sockdiag_lookup_tcp(nl, (struct sockaddr *) &a, (struct sockaddr *) &a, &p),
                         -ENOENT);
        assert_int_equal(sockdiag_lookup_tcp(nl, (struct sockaddr *) &a, (struct sockaddr *) &b, &p),
                         -EINVAL);
        assert_untouched(&p);
}

/* ---- the id follows the creator's cgroup ---- */

/* The forked child: joins 'procs' (a cgroup.procs path), becomes nobody, connects to 'to',
 * says so on 'ready', then waits for 'done' to close. */
static _Noreturn void child_connect(const char *procs, const struct sockaddr_storage *to,
                                    int ready, int done) {
        int fd = open(procs, O_WRONLY | O_CLOEXEC), s;
        char x;

        if (fd < 0 || write(fd, "0", 1) != 1)
                _exit(10);
        if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                _exit(11);
        s = socket(to->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0 || connect(s, (const struct sockaddr *) to, sizeof(*to)) < 0)
                _exit(12);
        if (write(ready, "x", 1) != 1)
                _exit(13);
        if (read(done, &x, 1) < 0)
                _exit(14);
        _exit(0);
}

static int make_sibling_cgroup(char **ret) {
        _cleanup_free_ char *mount = NULL, *path = NULL, *parent = NULL;
        char *dir, *slash;

        if (cg_find_mount(&mount) < 0 || cg_pid_path(0, &path) < 0)
                return -ENOENT;
        /* A sibling of our cgroup, so that no internal-process rule is in the way; the root
         * cgroup is its own parent. */
        parent = strdup(path);
        assert_non_null(parent);
        slash = strrchr(parent, '/');
        *slash = '\0';
        if (asprintf(&dir, "%s%s/sockdiag-test-%d", mount, parent, (int) getpid()) < 0)
                return -ENOMEM;
        if (mkdir(dir, 0755) < 0) {
                int r = -errno;
                free(dir);
                return r;
        }
        *ret = dir;
        return 0;
}

static void test_live_child_cgroup(_unused_ void **state) {
        _cleanup_free_ char *own = own_cgroup_dir(), *dir = NULL, *procs = NULL;
        _cleanup_close_ int nl = -EBADF;
        SockDiagPeer client = untouched, server = untouched;
        int ready[2], done[2], r1, r2, status, r;
        struct sockaddr_storage bound;
        struct sockaddr_in lo = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        Conn c = { .client = -EBADF, .accepted = -EBADF };
        socklen_t l = sizeof(c.peer);
        uint64_t want;
        pid_t pid;
        char x;

        if (!own)
                skip();
        if (getuid() != 0) {
                print_message("not root: cannot make a cgroup and move a child into it, skipping\n");
                skip();
        }
        r = make_sibling_cgroup(&dir);
        if (r < 0) {
                print_message("cannot create a test cgroup beside ours (%s), skipping\n",
                              strerror(-r));
                skip();
        }
        want = inode_of(dir);
        assert_true(asprintf(&procs, "%s/cgroup.procs", dir) > 0);
        nl = sockdiag_open();
        assert_true(nl >= 0);
        c.listener = listen_on((struct sockaddr *) &lo, sizeof(lo), &bound);
        assert_true(c.listener >= 0);
        assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
        assert_int_equal(pipe2(done, O_CLOEXEC), 0);

        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(ready[0]);
                close(done[1]); /* or its read would never see the parent's close */
                child_connect(procs, &bound, ready[1], done[0]);
        }
        close(ready[1]);
        close(done[0]);

        /* Collect what we need, then clean up, then assert: a failed check must not leave the
         * child or the cgroup behind. */
        r = read(ready[0], &x, 1) == 1 ? 0 : -EIO;
        if (r == 0)
                c.accepted = accept4(c.listener, (struct sockaddr *) &c.peer, &l, SOCK_CLOEXEC);
        l = sizeof(c.local);
        if (r == 0 && c.accepted >= 0 &&
            getsockname(c.accepted, (struct sockaddr *) &c.local, &l) == 0) {
                r1 = sockdiag_lookup_tcp(nl, (struct sockaddr *) &c.peer,
                                         (struct sockaddr *) &c.local, &client);
                r2 = sockdiag_lookup_tcp(nl, (struct sockaddr *) &c.local,
                                         (struct sockaddr *) &c.peer, &server);
        } else
                r1 = r2 = -EIO;

        close(done[1]);
        close(ready[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        conn_close(&c);
        for (int i = 0; i < 100 && rmdir(dir) < 0 && errno == EBUSY; i++)
                usleep(10000);

        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(r1, 0);
        assert_int_equal(r2, 0);
        /* The client's socket carries the cgroup and uid of the process that made it ... */
        assert_true(client.cgroup_id == want);
        assert_true(client.cgroup_id != inode_of(own));
        assert_int_equal(client.uid, 65534);
        /* ... while the accepted socket inherits the listener's: look up the client's. */
        assert_true(server.cgroup_id == inode_of(own));
        assert_int_equal(server.uid, 0);
        assert_int_equal(access(dir, F_OK), -1);
}

/* ---- the self-test ---- */

static void test_self_test(_unused_ void **state) {
        _cleanup_free_ char *own = own_cgroup_dir();
        bool untested = true;

        assert_int_equal(sockdiag_self_test(0, &untested), 0);
        assert_false(untested);
        if (!own)
                return;
        untested = true;
        assert_int_equal(sockdiag_self_test(inode_of(own), &untested), 0);
        assert_false(untested);
        /* An answer for another cgroup than ours is no proof. */
        assert_int_equal(sockdiag_self_test(inode_of(own) + 1, &untested), -EPROTO);
        assert_false(untested);
}

/* The self-test in a child whose socket() or sendto() (a's syscall) fails with 'error' when
 * its first argument (or third, for sendto: the length) is 'value'; its verdict comes back
 * through a pipe. A filter with NO_NEW_PRIVS needs no privilege. */
typedef struct Verdict {
        int r;
        bool untested;
} Verdict;

static Verdict self_test_filtered(int syscall, unsigned arg, uint64_t value, int error) {
        Verdict v = { .r = 1 };
        int fds[2], status;
        pid_t pid;

        assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
                Verdict got = {};

                if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO((uint32_t) error), syscall, 1,
                                             SCMP_CMP(arg, SCMP_CMP_EQ, value)) < 0 ||
                    seccomp_load(ctx) < 0)
                        _exit(2);
                got.r = sockdiag_self_test(0, &got.untested);
                _exit(write(fds[1], &got, sizeof(got)) == (ssize_t) sizeof(got) ? 0 : 3);
        }
        close(fds[1]);
        assert_int_equal(read(fds[0], &v, sizeof(v)), sizeof(v));
        close(fds[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        return v;
}

/* What a host without NETLINK_SOCK_DIAG, or without inet_diag and tcp_diag, answers (the
 * latter in the netlink answer; here sendto() says it, which the lookup reports alike); and a
 * host where no loopback connection can be made, which proves nothing either way. */
static void test_self_test_fails(_unused_ void **state) {
        Verdict v;

        v = self_test_filtered(SCMP_SYS(socket), 0, AF_NETLINK, EPROTONOSUPPORT);
        assert_int_equal(v.r, -EPROTONOSUPPORT);
        assert_false(v.untested);
        v = self_test_filtered(SCMP_SYS(sendto), 2, SOCKDIAG_REQUEST_SIZE, ENOENT);
        assert_int_equal(v.r, -ENOENT);
        assert_false(v.untested);
        v = self_test_filtered(SCMP_SYS(socket), 0, AF_INET, EMFILE);
        assert_int_equal(v.r, -EMFILE);
        assert_true(v.untested);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_build_v4),
                cmocka_unit_test(test_build_v6_and_mapped),
                cmocka_unit_test(test_parse_good),
                cmocka_unit_test(test_parse_truncated),
                cmocka_unit_test(test_parse_error),
                cmocka_unit_test(test_parse_wrong_seq),
                cmocka_unit_test(test_parse_missing_attribute),
                cmocka_unit_test(test_live_v4),
                cmocka_unit_test(test_live_v6),
                cmocka_unit_test(test_live_v4_on_dual_stack),
                cmocka_unit_test(test_live_kernel_mapped_v6),
                cmocka_unit_test(test_live_missing),
                cmocka_unit_test(test_live_child_cgroup),
                cmocka_unit_test(test_self_test),
                cmocka_unit_test(test_self_test_fails),
        };
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
