/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ipc.h"
#include "macro.h"

int ipc_send(int fd, json_t *message) {
        _cleanup_free_ char *text = NULL;
        size_t len;
        ssize_t n;

        text = json_dumps(message, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        len = strlen(text);
        if (len > IPC_MESSAGE_MAX)
                return -EMSGSIZE;
        do
                n = send(fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT);
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
        _cleanup_(json_decrefp) json_t *j = NULL;
        _cleanup_free_ char *buf = NULL;
        json_error_t error;
        ssize_t n;

        /* One byte more than a message may have, so that MSG_TRUNC's true length tells an
         * oversized datagram from one that fits exactly. */
        buf = malloc(IPC_MESSAGE_MAX + 1);
        if (!buf)
                return -ENOMEM;
        do
                n = recv(fd, buf, IPC_MESSAGE_MAX + 1, MSG_DONTWAIT | MSG_TRUNC);
        while (n < 0 && errno == EINTR);
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
        return 0;
}
