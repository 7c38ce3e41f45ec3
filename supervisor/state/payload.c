/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-id.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "payload.h"
#include "state-file.h"
#include "wallclock.h"

#define PAYLOAD_DIR "payload"
#define PAYLOAD_FILE_MAX (64 * 1024)

typedef struct Payload {
        char *uuid;                  /* the key */
        void *data;
        size_t size;
        usec_t given_at;             /* CLOCK_BOOTTIME */
} Payload;

static void payload_free(void *p) {
        Payload *x = p;

        if (!x)
                return;
        free(x->uuid);
        free(x->data);
        free(x);
}

static int payload_insert(PayloadStore *p, const char *uuid, void *data, size_t size,
                          usec_t given_at) {
        Payload *x = new0(Payload, 1), *old;

        if (!x || !(x->uuid = strdup(uuid))) {
                free(x);
                return -ENOMEM;
        }
        x->data = data;
        x->size = size;
        x->given_at = given_at;
        old = hashmap_remove(&p->map, uuid, NULL);
        payload_free(old);
        if (hashmap_put(&p->map, x->uuid, x) < 0) {
                x->data = NULL; /* the caller still owns it */
                payload_free(x);
                return -ENOMEM;
        }
        return 0;
}

/* One file of an earlier slotd: its name is the UUID; given at given_at, or else at its
 * mtime (real time, taken back to CLOCK_BOOTTIME). */
static int payload_load_one(PayloadStore *p, const char *name, usec_t given_at) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ void *data = NULL;
        struct stat st;
        ssize_t n;

        if (!alloc_id_is_valid(name))
                return 0; /* a temp file or something else: not ours */
        fd = openat(p->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_size > PAYLOAD_FILE_MAX)
                return -EBADMSG;
        data = malloc(MAX((size_t) st.st_size, (size_t) 1));
        if (!data)
                return -ENOMEM;
        n = pread(fd, data, (size_t) st.st_size, 0);
        if (n != st.st_size)
                return n < 0 ? negative_errno() : -EIO;
        if (given_at == 0)
                given_at = boottime_rebase((usec_t) st.st_mtim.tv_sec * USEC_PER_SEC +
                                                   (usec_t) st.st_mtim.tv_nsec / NSEC_PER_USEC,
                                           0, wall_offset());
        if (payload_insert(p, name, data, (size_t) n, given_at) < 0)
                return -ENOMEM;
        TAKE_PTR(data);
        return 0;
}

int payload_store_open(PayloadStore *p, int state_dir_fd, usec_t ttl,
                       bool (*keep)(const char *uuid, usec_t *given_at, void *userdata),
                       void *userdata) {
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        int r;

        *p = (PayloadStore){ .dir_fd = -EBADF, .ttl = ttl };
        if (mkdirat(state_dir_fd, PAYLOAD_DIR, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        fd = openat(state_dir_fd, PAYLOAD_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        p->dir_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (p->dir_fd < 0)
                return negative_errno();
        d = fdopendir(TAKE_FD(fd));
        if (!d)
                return negative_errno();
        for (struct dirent *de; (de = readdir(d));) {
                usec_t given_at = 0;

                if (de->d_name[0] == '.')
                        continue;
                if (!keep(de->d_name, &given_at, userdata)) {
                        /* Its allocation ended while slotd was away, or before a crash
                         * let the removal reach the disk. */
                        (void) unlinkat(p->dir_fd, de->d_name, 0);
                        continue;
                }
                r = payload_load_one(p, de->d_name, given_at);
                if (r < 0)
                        log_warning_errno(r, "Failed to load payload %s, ignoring: %m", de->d_name);
        }
        closedir(d);
        return 0;
}

void payload_store_done(PayloadStore *p) {
        hashmap_done_free(&p->map, payload_free);
        p->dir_fd = safe_close(p->dir_fd);
}

int payload_store_put(PayloadStore *p, const char *uuid, const void *data, size_t size,
                      usec_t now_boottime) {
        _cleanup_free_ void *copy = malloc(MAX(size, (size_t) 1));
        int r;

        if (!copy)
                return -ENOMEM;
        if (p->dir_fd < 0)
                return -EBADF;
        memcpy(copy, data, size);
        r = state_write_atomic(p->dir_fd, uuid, data, size);
        if (r < 0)
                return r;
        r = payload_insert(p, uuid, copy, size, now_boottime);
        if (r < 0)
                return r;
        TAKE_PTR(copy);
        return 0;
}

int payload_store_get(PayloadStore *p, const char *uuid, usec_t now_boottime, const void **ret,
                      size_t *ret_size) {
        Payload *x = hashmap_get(&p->map, uuid);

        if (!x)
                return -ENOENT;
        if (now_boottime >= x->given_at + p->ttl) {
                payload_store_drop(p, uuid);
                return -ENOENT;
        }
        *ret = x->data;
        *ret_size = x->size;
        return 0;
}

void payload_store_drop(PayloadStore *p, const char *uuid) {
        Payload *x = hashmap_remove(&p->map, uuid, NULL);

        if (!x)
                return;
        /* Not fsync'd: a payload that comes back after a crash has no allocation, and the
         * next start prunes it. */
        if (unlinkat(p->dir_fd, x->uuid, 0) < 0 && errno != ENOENT)
                log_warning_errno(errno, "Failed to remove payload %s, ignoring: %m", x->uuid);
        payload_free(x);
}

usec_t payload_store_given_at(PayloadStore *p, const char *uuid) {
        Payload *x = hashmap_get(&p->map, uuid);

        return x ? x->given_at : 0;
}
