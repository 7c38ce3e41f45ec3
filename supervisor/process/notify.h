/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The sd_notify datagram protocol (SPEC §9): newline-separated KEY=VALUE assignments. */

#define NOTIFY_MESSAGE_MAX 4096
#define NOTIFY_STATUS_MAX 256

typedef struct NotifyMessage {
        bool ready;
        bool watchdog;
        bool stopping;
        bool has_status;
        char status[NOTIFY_STATUS_MAX];  /* truncated, control characters replaced by '?' */
} NotifyMessage;

/* Parses a datagram. Unknown keys are ignored (as systemd does); a NUL byte or a datagram
 * without a single valid assignment is -EBADMSG. Pure; treats every byte as hostile. */
int notify_parse(const char *buf, size_t size, NotifyMessage *ret);

/* Creates and binds the notify socket at path (removing a stale one): a non-blocking
 * SOCK_DGRAM with SO_PASSCRED, mode 0666 since game servers run as other users; senders are
 * checked by their credentials, not by the file mode. */
int notify_socket_open(const char *path, int *ret_fd);
