/* SPDX-License-Identifier: MIT */
/* What a slot's keeper leaves in the log pipe when it is killed outright (SPEC §3).
 *
 * The keeper empties the pipe into server.log before it writes the server's exit (keeper.c).
 * Killed outright (SIGKILL, the OOM killer's group kill, cgroup.kill at the end of a stop),
 * it cannot: the pipe then holds what the servers wrote and the keeper had not spliced yet,
 * up to the pipe's capacity (64 KiB; more if the server raised it, at most fs.pipe-max-size).
 * So that this is not lost with the pipe's last reader, slotd holds the read end too: from
 * the spawn on, or taken back from an adopted keeper with pidfd_getfd(). At the keeper's exit
 * (the namespace has ended with it: no writer is left) and before the exit is told, slotd
 * moves what the pipe holds into server.log as the keeper would have, rotating at
 * logs.max_size; what server.log cannot take is counted in LogBytesLost and logged. It is a
 * bounded read of a non-blocking pipe and one local file written, as server.json is. */
#include <fcntl.h>
#include <inttypes.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "log.h"
#include "slot-internal.h"

#define SLOT_OUTPUT_SPLICE_MAX (1U << 20)

void slot_output_hold(Slot *s, int fd) {
        s->output_fd = safe_close(s->output_fd);
        s->output_fd = fd;
}

int slot_open_server_log(Slot *s, int dir, int flags, uint64_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        off_t end;

        fd = openat(dir, "server.log",
                    O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC | flags, 0640);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
                return -EPERM;
        if ((st.st_uid != s->fleet->uid || st.st_gid != s->fleet->gid) &&
            fchown(fd, s->fleet->uid, s->fleet->gid) < 0)
                return negative_errno();
        end = lseek(fd, 0, SEEK_END);
        if (end < 0)
                return negative_errno();
        if (ret_size)
                *ret_size = (uint64_t) end;
        return TAKE_FD(fd);
}

/* server.log.(keep-1) → server.log.keep ... server.log → server.log.1: the keeper's rotation
 * (keeper.c), renames only. */
static void slot_output_rotate(int dir, unsigned keep) {
        for (unsigned i = keep; i >= 1; i--) {
                char from[24], to[24];

                if (i == 1)
                        snprintf(from, sizeof(from), "server.log");
                else
                        snprintf(from, sizeof(from), "server.log.%u", i - 1);
                snprintf(to, sizeof(to), "server.log.%u", i);
                (void) renameat(dir, from, dir, to);
        }
}

/* Splices the pipe into logs/ until it is empty; returns the bytes moved, *ret_error the
 * errno that stopped it (0: none). */
static uint64_t slot_output_move(Slot *s, int dir, int *ret_error) {
        const FleetConfig *f = s->fleet->config;
        _cleanup_close_ int fd = -EBADF;
        uint64_t moved = 0, size = 0;

        *ret_error = 0;
        for (int i = 0; i < 1024; i++) {
                size_t len = SLOT_OUTPUT_SPLICE_MAX;
                ssize_t n;

                if (fd < 0 && (fd = slot_open_server_log(s, dir, O_NONBLOCK, &size)) < 0) {
                        *ret_error = -fd;
                        break;
                }
                /* Up to max_size; past it only when the rotation could not rename. */
                if (f->log_max_size > size && f->log_max_size - size < len)
                        len = (size_t) (f->log_max_size - size);
                n = splice(s->output_fd, NULL, fd, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (n == 0 || (n < 0 && errno == EAGAIN))
                        break;
                if (n < 0) {
                        *ret_error = errno;
                        break;
                }
                moved += (uint64_t) n;
                size += (uint64_t) n;
                if (f->log_max_size > 0 && size >= f->log_max_size) {
                        slot_output_rotate(dir, f->log_keep);
                        fd = safe_close(fd);
                }
        }
        return moved;
}

/* What server.log could not take: read and dropped. */
static uint64_t slot_output_drop(Slot *s) {
        uint64_t dropped = 0;
        char buf[4096];

        for (int i = 0; i < 1024; i++) {
                ssize_t n = read(s->output_fd, buf, sizeof(buf));
                if (n <= 0)
                        break;
                dropped += (uint64_t) n;
        }
        return dropped;
}

void slot_output_drain(Slot *s) {
        _cleanup_close_ int dir = -EBADF;
        uint64_t moved = 0, dropped;
        int avail = 0, error;

        if (s->output_fd < 0)
                return;
        if (ioctl(s->output_fd, FIONREAD, &avail) < 0 || avail <= 0) {
                s->output_fd = safe_close(s->output_fd);
                return;
        }
        dir = s->home_fd >= 0 ? openat(s->home_fd, "logs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                                           O_CLOEXEC)
                              : -EBADF;
        if (dir < 0)
                error = s->home_fd >= 0 ? errno : ENOENT;
        else
                moved = slot_output_move(s, dir, &error);
        dropped = slot_output_drop(s);
        s->output_fd = safe_close(s->output_fd);
        if (moved > 0)
                log_slot_info(s, "Moved %" PRIu64 " bytes of the server's output that its keeper "
                              "left in the pipe into %s/server.log", moved, s->log_dir);
        if (dropped == 0)
                return;
        s->log_bytes_lost += dropped;
        log_slot_warning_errno(s, error ?: EIO, "Dropped %" PRIu64 " bytes of the server's output "
                               "that its keeper left in the pipe and %s/server.log could not "
                               "take: %m (%" PRIu64 " in all)", dropped, s->log_dir,
                               s->log_bytes_lost);
        slot_hook_changed(s, false);
}
