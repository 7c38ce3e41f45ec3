/* SPDX-License-Identifier: MIT */
/* stampexec STAMPFILE PROGRAM [ARG...]: appends "slotd exec USEC" (CLOCK_MONOTONIC) to
 * STAMPFILE, then execs PROGRAM (first-exec.py: the start of slotd, as tiny stamps its server). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
        struct timespec ts; char line[64]; int fd, n;
        if (argc < 3) return 2;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        n = snprintf(line, sizeof line, "slotd exec %llu\n",
                     (unsigned long long) ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000);
        fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
        if (fd >= 0) { (void) !write(fd, line, n); close(fd); }
        execv(argv[2], argv + 2);
        return 127;
}
