/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((__cleanup__(f)))
#define _unused_ __attribute__((__unused__))
#define _printf_(a, b) __attribute__((__format__(printf, a, b)))
#define _sentinel_ __attribute__((__sentinel__))
#define _noreturn_ __attribute__((__noreturn__))
#define _warn_unused_result_ __attribute__((__warn_unused_result__))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))

#define container_of(ptr, type, member) ((type *) ((char *) (ptr) - offsetof(type, member)))
#define new0(t, n) ((t *) calloc((n), sizeof(t)))
#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hand ownership of a pointer (or fd) out of a _cleanup_ variable. */
#define TAKE_PTR(p)                              \
        ({                                       \
                __typeof__(p) _take_tmp_ = (p);  \
                (p) = NULL;                      \
                _take_tmp_;                      \
        })
#define TAKE_FD(fd)                              \
        ({                                       \
                int _take_fd_ = (fd);            \
                (fd) = -EBADF;                   \
                _take_fd_;                       \
        })

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)         \
        static inline void func##p(type *p) {           \
                if (*p)                                 \
                        *p = func(*p);                  \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}
static inline void closep(int *fd) {
        *fd = safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                (void) fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
#define streq(a, b) (strcmp((a), (b)) == 0)

static inline const char *strempty(const char *s) {
        return s ?: "";
}

/* Returns 'errno' as a negative value, never 0, for the paths where a libc call failed. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

/* Replace *p with a copy of s (or NULL). */
static inline int free_and_strdup(char **p, const char *s) {
        char *t = NULL;
        if (s) {
                t = strdup(s);
                if (!t)
                        return -ENOMEM;
        }
        free(*p);
        *p = t;
        return 0;
}

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

static inline char *mfree_str(char *p) {
        free(p);
        return NULL;
}
