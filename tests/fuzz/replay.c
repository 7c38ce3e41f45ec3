/* SPDX-License-Identifier: MIT */
/* Runs LLVMFuzzerTestOneInput over every regular file of the directories (or the files) given
 * as arguments, so that plain `meson test` replays the corpora with any compiler and no
 * libFuzzer. A property the harness checks aborts, which fails the test. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

static int replay_file(int dir_fd, const char *name, const char *shown) {
        struct stat st;
        uint8_t *buf;
        size_t done = 0;
        int fd;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                fprintf(stderr, "%s: %s\n", shown, strerror(errno));
                return -errno;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return 0;  /* not a corpus file: skipped */
        }
        /* malloc(size) rather than a bigger buffer, so that a harness reading past the input
         * shows up under -Db_sanitize=address as it would under libFuzzer. */
        buf = malloc(st.st_size > 0 ? (size_t) st.st_size : 1);
        if (!buf) {
                close(fd);
                return -ENOMEM;
        }
        while (done < (size_t) st.st_size) {
                ssize_t n = read(fd, buf + done, (size_t) st.st_size - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                done += (size_t) n;
        }
        close(fd);

        (void) LLVMFuzzerTestOneInput(buf, done);
        free(buf);
        return 1;
}

static int name_compare(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Files in name order, so that a failing replay is reproducible step by step. */
static int replay_dir(const char *path, unsigned *count) {
        struct dirent *de;
        char **names = NULL, shown[4096];
        size_t n = 0, allocated = 0;
        int r = 0;
        DIR *d;

        d = opendir(path);
        if (!d) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -errno;
        }
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                if (n == allocated) {
                        char **t = reallocarray(names, allocated * 2 + 64, sizeof(char *));
                        if (!t) {
                                r = -ENOMEM;
                                goto finish;
                        }
                        names = t;
                        allocated = allocated * 2 + 64;
                }
                names[n] = strdup(de->d_name);
                if (!names[n]) {
                        r = -ENOMEM;
                        goto finish;
                }
                n++;
        }
        qsort(names, n, sizeof(char *), name_compare);

        for (size_t i = 0; i < n && r >= 0; i++) {
                snprintf(shown, sizeof(shown), "%s/%s", path, names[i]);
                r = replay_file(dirfd(d), names[i], shown);
                if (r > 0)
                        (*count)++;
        }
finish:
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        closedir(d);
        return r < 0 ? r : 0;
}

int main(int argc, char *argv[]) {
        unsigned count = 0;
        struct stat st;
        int r;

        if (argc < 2) {
                fprintf(stderr, "usage: %s CORPUS-DIR|FILE...\n", argv[0]);
                return EXIT_FAILURE;
        }
        for (int i = 1; i < argc; i++) {
                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
                        return EXIT_FAILURE;
                }
                if (S_ISDIR(st.st_mode))
                        r = replay_dir(argv[i], &count);
                else {
                        r = replay_file(AT_FDCWD, argv[i], argv[i]);
                        if (r > 0)
                                count++;
                }
                if (r < 0)
                        return EXIT_FAILURE;
        }
        if (count == 0) {
                fprintf(stderr, "no input files found\n");
                return EXIT_FAILURE;
        }
        printf("%u inputs replayed\n", count);
        return EXIT_SUCCESS;
}
