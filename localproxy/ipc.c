/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ipc.h"
#include "macro.h"

int ipc_send(int fd, json_t *message) {
        return ipc_send_fd(fd, message, -EBADF);
}

int ipc_send_fd(int fd, json_t *message, int pass_fd) {
        _cleanup_free_ char *text = NULL;
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct iovec iov;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        size_t len;
        ssize_t n;

        text = json_dumps(message, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        len = strlen(text);
        if (len > IPC_MESSAGE_MAX)
                return -EMSGSIZE;
        iov = (struct iovec){ .iov_base = text, .iov_len = len };
        if (pass_fd >= 0) {
                struct cmsghdr *cmsg;

                mh.msg_control = control.buf;
                mh.msg_controllen = sizeof(control.buf);
                cmsg = CMSG_FIRSTHDR(&mh);
                cmsg->cmsg_level = SOL_SOCKET;
                cmsg->cmsg_type = SCM_RIGHTS;
                cmsg->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
        }
        do
                n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                if (errno == EWOULDBLOCK || errno == ENOBUFS)
                        return -EAGAIN;
                if (errno == EPIPE)
                        return -ECONNRESET;
                return negative_errno();
        }
        return 0;
}

int ipc_receive(int fd, json_t **ret) {
        return ipc_receive_fd(fd, ret, NULL);
}

/* The fd that came with the datagram (SCM_RIGHTS), -EBADF: none. Any other is closed. */
static int take_fds(struct msghdr *mh) {
        int fd = -EBADF;

        for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
                size_t n;

                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < n; i++) {
                        int f;

                        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (fd < 0)
                                fd = f;
                        else
                                safe_close(f);
                }
        }
        return fd;
}

int ipc_receive_fd(int fd, json_t **ret, int *ret_fd) {
        _cleanup_(json_decrefp) json_t *j = NULL;
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int passed = -EBADF;
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control;
        struct iovec iov;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof(control.buf) };
        json_error_t error;
        ssize_t n;

        /* One byte more than a message may have, so that MSG_TRUNC's true length tells an
         * oversized datagram from one that fits exactly. */
        buf = malloc(IPC_MESSAGE_MAX + 1);
        if (!buf)
                return -ENOMEM;
        iov = (struct iovec){ .iov_base = buf, .iov_len = IPC_MESSAGE_MAX + 1 };
        do
                n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n >= 0)
                passed = take_fds(&mh);
        if (n < 0) {
                if (errno == EWOULDBLOCK)
                        return -EAGAIN;
                if (errno == ECONNRESET || errno == EPIPE)
                        return -ECONNRESET;
                return negative_errno();
        }
        /* On SOCK_SEQPACKET an empty datagram reads like EOF; neither side sends one. */
        if (n == 0)
                return -ECONNRESET;
        if ((size_t) n > IPC_MESSAGE_MAX)
                return -EBADMSG;
        j = json_loadb(buf, (size_t) n, JSON_REJECT_DUPLICATES, &error);
        if (!json_is_object(j) || !json_is_string(json_object_get(j, "type")))
                return -EBADMSG;
        *ret = TAKE_PTR(j);
        if (ret_fd)
                *ret_fd = TAKE_FD(passed);
        return 0;
}
