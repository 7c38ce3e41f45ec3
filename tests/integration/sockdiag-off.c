/* SPDX-License-Identifier: MIT */
/* sockdiag-off MODE SWITCH PROGRAM [ARGS...]: runs PROGRAM (exec'd, keeping this PID) where
 * sock_diag fails while the file SWITCH exists, as on a kernel without it, and works again
 * once SWITCH is removed (test-sockdiag-missing.sh). MODE:
 *   socket   socket(AF_NETLINK, *, NETLINK_SOCK_DIAG) fails with EPROTONOSUPPORT, what a
 *            kernel without the netlink family answers;
 *   request  a request sent on such a socket (sendto of SOCKDIAG_REQUEST_SIZE bytes) fails
 *            with ENOENT, what a kernel without inet_diag or tcp_diag answers (in its netlink
 *            answer, which the lookup reports alike).
 * A seccomp filter of PROGRAM and its children hands those calls to a listener, a child of
 * ours forked before the filter: it answers the error while SWITCH exists and lets the call
 * go on otherwise (SECCOMP_USER_NOTIF_FLAG_CONTINUE). It ends with PROGRAM. Exits 77 where
 * such a filter cannot be had (run it with PROGRAM true to find out). Needs root. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sockdiag.h"

#define EXIT_SKIP 77

static const char *arg_switch;
static bool arg_request;

/* Is fd of process pid a NETLINK_SOCK_DIAG socket? Its inode, from /proc/PID/fd, among the
 * netlink sockets of the process's network namespace. */
static bool is_sock_diag(pid_t pid, uint64_t fd) {
        char path[64], link[64], line[512];
        unsigned long inode, want;
        bool found = false;
        ssize_t n;
        FILE *f;
        int eth;

        snprintf(path, sizeof(path), "/proc/%d/fd/%" PRIu64, (int) pid, fd);
        n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0)
                return false;
        link[n] = '\0';
        if (sscanf(link, "socket:[%lu]", &want) != 1)
                return false;
        snprintf(path, sizeof(path), "/proc/%d/net/netlink", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        while (!found && fgets(line, sizeof(line), f))
                found = sscanf(line, "%*s %d %*s %*s %*s %*s %*s %*s %*s %lu", &eth, &inode) == 2 &&
                        inode == want && eth == NETLINK_SOCK_DIAG;
        fclose(f);
        return found;
}

static void answer(int fd, struct seccomp_notif *req, struct seccomp_notif_resp *resp) {
        bool off = access(arg_switch, F_OK) == 0;

        if (off && arg_request)
                off = is_sock_diag(req->pid, req->data.args[0]);
        *resp = (struct seccomp_notif_resp){ .id = req->id };
        if (off)
                resp->error = arg_request ? -ENOENT : -EPROTONOSUPPORT;
        else
                resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        /* The caller may be gone meanwhile (its PID reused): then nothing is answered. */
        if (seccomp_notify_id_valid(fd, req->id) == 0)
                (void) seccomp_notify_respond(fd, resp);
}

static int receive_fd(int sock) {
        char data, control[CMSG_SPACE(sizeof(int))];
        struct iovec iov = { .iov_base = &data, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof(control) };
        struct cmsghdr *c;
        int fd;

        if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != 1)
                return -1;
        c = CMSG_FIRSTHDR(&mh);
        if (!c || c->cmsg_type != SCM_RIGHTS)
                return -1;
        memcpy(&fd, CMSG_DATA(c), sizeof(fd));
        return fd;
}

static int send_fd(int sock, int fd) {
        char data = 'x', control[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov = { .iov_base = &data, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof(control) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(fd));
        return sendmsg(sock, &mh, 0) == 1 ? 0 : -1;
}

/* The listener: until every process under the filter is gone (POLLHUP) or PROGRAM is. */
static _Noreturn void listen_loop(int sock, pid_t parent) {
        struct seccomp_notif *req;
        struct seccomp_notif_resp *resp;
        int fd;

        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
                _exit(0);
        fd = receive_fd(sock);
        if (fd < 0 || seccomp_notify_alloc(&req, &resp) < 0)
                _exit(1);
        close(sock);
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };

                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                        _exit(1);
                if (p.revents & (POLLHUP | POLLERR))
                        _exit(0);
                if (!(p.revents & POLLIN))
                        continue;
                memset(req, 0, sizeof(*req));
                if (seccomp_notify_receive(fd, req) < 0)
                        continue; /* the caller was interrupted meanwhile */
                answer(fd, req, resp);
        }
}

static int install_filter(int *ret_fd) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        int r;

        if (!ctx)
                return -ENOMEM;
        /* Root needs no NO_NEW_PRIVS, and PROGRAM's children (setuid helpers) keep working. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r >= 0 && arg_request)
                r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendto), 1,
                                     SCMP_A2(SCMP_CMP_EQ, SOCKDIAG_REQUEST_SIZE));
        else if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(socket), 2,
                                     SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
                                     SCMP_A2(SCMP_CMP_EQ, NETLINK_SOCK_DIAG));
        if (r >= 0)
                r = seccomp_load(ctx);
        if (r >= 0)
                r = *ret_fd = seccomp_notify_fd(ctx);
        seccomp_release(ctx);
        return r;
}

int main(int argc, char *argv[]) {
        int pair[2], fd, r;
        pid_t pid, self = getpid();

        if (argc < 4 || (strcmp(argv[1], "socket") != 0 && strcmp(argv[1], "request") != 0)) {
                fprintf(stderr, "usage: sockdiag-off socket|request SWITCH PROGRAM [ARGS...]\n");
                return 2;
        }
        arg_request = strcmp(argv[1], "request") == 0;
        arg_switch = argv[2];
        if (seccomp_api_get() < 6) {
                fprintf(stderr, "sockdiag-off: libseccomp or the kernel lacks user notification\n");
                return EXIT_SKIP;
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return 1;
        pid = fork();
        if (pid < 0)
                return 1;
        if (pid == 0) {
                close(pair[0]);
                listen_loop(pair[1], self);
        }
        close(pair[1]);
        r = install_filter(&fd);
        if (r < 0) {
                fprintf(stderr, "sockdiag-off: cannot install the filter: %s\n", strerror(-r));
                kill(pid, SIGKILL);
                return EXIT_SKIP;
        }
        if (send_fd(pair[0], fd) < 0)
                return 1;
        close(fd);
        close(pair[0]);
        execvp(argv[3], argv + 3);
        fprintf(stderr, "sockdiag-off: cannot run %s: %s\n", argv[3], strerror(errno));
        return 127;
}
