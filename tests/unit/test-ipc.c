/* SPDX-License-Identifier: MIT */
/* The channel's framing (localproxy/ipc.c) on a real SOCK_SEQPACKET socketpair: a message with
 * a file descriptor attached (SCM_RIGHTS, "metrics_listen"), one without, and a descriptor
 * that comes where none is taken, which is closed rather than leaked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc.h"
#include "macro.h"

static void pair(int sv[2]) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

static bool same_file(int a, int b) {
        struct stat sa, sb;

        assert_int_equal(fstat(a, &sa), 0);
        assert_int_equal(fstat(b, &sb), 0);
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The fds of this process that are open: a leaked one shows as one more. */
static unsigned open_fds(void) {
        unsigned n = 0;

        for (int fd = 0; fd < 1024; fd++)
                if (fcntl(fd, F_GETFD) >= 0)
                        n++;
        return n;
}

static void test_fd_passed(_unused_ void **state) {
        _cleanup_(json_decrefp) json_t *sent = NULL, *got = NULL;
        int sv[2], listener, fd = -1;

        pair(sv);
        listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(listener >= 0);
        sent = json_pack("{s:s, s:s, s:i}", "type", "metrics_listen", "address", "127.0.0.1",
                         "port", 9187);
        assert_int_equal(ipc_send_fd(sv[0], sent, listener), 0);
        assert_int_equal(ipc_receive_fd(sv[1], &got, &fd), 0);
        assert_string_equal(json_string_value(json_object_get(got, "type")), "metrics_listen");
        assert_int_equal(json_integer_value(json_object_get(got, "port")), 9187);
        assert_true(fd >= 0);
        assert_int_not_equal(fd, listener);
        assert_true(same_file(fd, listener));
        assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        close(fd);
        close(listener);
        close(sv[0]);
        close(sv[1]);
}

static void test_no_fd(_unused_ void **state) {
        _cleanup_(json_decrefp) json_t *sent = NULL, *got = NULL;
        int sv[2], fd = 42;

        pair(sv);
        sent = json_pack("{s:s, s:n}", "type", "metrics_listen", "address");
        assert_int_equal(ipc_send(sv[0], sent), 0);
        assert_int_equal(ipc_receive_fd(sv[1], &got, &fd), 0);
        assert_true(json_is_null(json_object_get(got, "address")));
        assert_true(fd < 0);
        /* Nothing more waits. */
        assert_int_equal(ipc_receive_fd(sv[1], &got, &fd), -EAGAIN);
        close(sv[0]);
        close(sv[1]);
}

/* ipc_receive() takes no descriptor: one that came is closed. */
static void test_fd_dropped(_unused_ void **state) {
        _cleanup_(json_decrefp) json_t *sent = NULL, *got = NULL;
        int sv[2], extra;
        unsigned before;

        pair(sv);
        extra = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(extra >= 0);
        sent = json_pack("{s:s}", "type", "close");
        assert_int_equal(ipc_send_fd(sv[0], sent, extra), 0);
        close(extra);
        before = open_fds();
        assert_int_equal(ipc_receive(sv[1], &got), 0);
        assert_string_equal(json_string_value(json_object_get(got, "type")), "close");
        assert_int_equal(open_fds(), before);
        close(sv[0]);
        close(sv[1]);
}

/* A malformed message with a descriptor: -EBADMSG, and the descriptor is not kept. */
static void test_fd_with_bad_message(_unused_ void **state) {
        _cleanup_(json_decrefp) json_t *got = NULL;
        int sv[2], extra, fd = 42;
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        char text[] = "not json";
        struct iovec iov = { .iov_base = text, .iov_len = sizeof(text) - 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof(control.buf) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        unsigned before;

        pair(sv);
        extra = open("/dev/null", O_RDONLY | O_CLOEXEC);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &extra, sizeof(int));
        assert_int_equal(sendmsg(sv[0], &mh, 0), (ssize_t) iov.iov_len);
        close(extra);
        before = open_fds();
        assert_int_equal(ipc_receive_fd(sv[1], &got, &fd), -EBADMSG);
        assert_int_equal(fd, 42); /* untouched */
        assert_int_equal(open_fds(), before);
        close(sv[0]);
        close(sv[1]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fd_passed),
                cmocka_unit_test(test_no_fd),
                cmocka_unit_test(test_fd_dropped),
                cmocka_unit_test(test_fd_with_bad_message),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
