/* SPDX-License-Identifier: MIT */
/*
 * floor CGROUP N ROUNDS: the kernel's price of one check, without slotd.
 *
 * SPEC §6 makes a check of a running slot read the slot's CPU use and memory and probe the
 * server. This program does the least a supervisor can do for that, N times a round, and
 * measures its own CPU time (CLOCK_PROCESS_CPUTIME_ID): its N receivers run in their own
 * cgroups below CGROUP (which must be a cgroup v2 directory), each a process asleep in
 * recvfrom() on a loopback UDP port that answers every datagram, as a game server does.
 * Per slot and round, as slotd does it:
 *   - cpu.stat: one pread() of a kept-open file, parsed for usage_usec;
 *   - memory: one pread() of memory.current, or, where the v2 tree has no memory
 *     controller, one of cgroup.procs and one of the receiver's kept-open /proc/PID/statm;
 *   - probe: a datagram out (sendmmsg, 64 at a time, from one socket) and its answer in
 *     (recvmmsg, as many as are waiting, after poll()).
 * Each part is timed alone over every slot, then all three together, slot by slot in chunks
 * of 64, as slotd's sweep does. A first pass, not counted, reads each file once (the first
 * read of a file allocates its buffer), as slotd's first check does. Rounds are 1 s apart, so caches cool and receivers sleep as
 * between real checks; the pass of all three is then repeated at once (the warm figure).
 * Last, the price of a bare system call (getppid) on this machine. Prints "KEY VALUE" lines: microseconds per slot, medians of rounds.
 * The receivers die with this process (PR_SET_PDEATHSIG) and are killed and reaped at the
 * end; their cgroups are removed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 64
#define ANSWER 120 /* bytes: about an SQP server-info answer */

typedef struct {
        pid_t pid;
        uint16_t port;
        int cpu_fd, mem_fd, procs_fd, statm_fd;
        char *dir;
} Recv;

static Recv *rv;
static int n_rv;
static const char *cg_made; /* CGROUP, when this program made it */

static double cpu_us(void) {
        struct timespec t;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void die(const char *what) {
        fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
        exit(1);
}

static void receiver(const char *dir, int report) {
        char path[4200];
        /* The parent's handlers clean up after the parent: not after a receiver. */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
                _exit(2);
        close(fd);
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t al = sizeof(a);
        if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
            getsockname(s, (struct sockaddr *)&a, &al) < 0)
                _exit(3);
        uint16_t port = ntohs(a.sin_port);
        if (write(report, &port, sizeof(port)) != sizeof(port))
                _exit(4);
        close(report);
        char buf[1500], answer[ANSWER];
        memset(answer, 'a', sizeof(answer));
        for (;;) {
                struct sockaddr_in from;
                socklen_t fl = sizeof(from);
                ssize_t k = recvfrom(s, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
                if (k >= 0)
                        sendto(s, answer, sizeof(answer), 0, (struct sockaddr *)&from, fl);
        }
}

static void cleanup(void) {
        for (int i = 0; i < n_rv; i++)
                if (rv[i].pid > 0)
                        kill(rv[i].pid, SIGKILL);
        for (int i = 0; i < n_rv; i++) {
                if (rv[i].pid > 0)
                        waitpid(rv[i].pid, NULL, 0);
                if (!rv[i].dir)
                        continue;
                /* A reaped process may leave its cgroup a moment later. */
                for (int t = 0; t < 500 && rmdir(rv[i].dir) < 0 && errno == EBUSY; t++)
                        usleep(2000);
        }
        if (cg_made)
                rmdir(cg_made);
}

/* cleanup() calls only kill, waitpid, rmdir and usleep: safe in a handler. */
static void on_signal(int sig) {
        cleanup();
        _exit(128 + sig);
}

static int open_in(const char *dir, const char *name) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        return open(path, O_RDONLY | O_CLOEXEC);
}

static unsigned long long read_num(int fd, const char *key) {
        char buf[1024];
        ssize_t k = pread(fd, buf, sizeof(buf) - 1, 0);
        if (k <= 0)
                return 0;
        buf[k] = 0;
        const char *p = key ? strstr(buf, key) : buf;
        return p ? strtoull(p + (key ? strlen(key) : 0), NULL, 10) : 0;
}

static unsigned long long part_cpu(Recv *r) {
        return read_num(r->cpu_fd, "usage_usec ");
}

static unsigned long long part_memory(Recv *r) {
        if (r->mem_fd >= 0)
                return read_num(r->mem_fd, NULL);
        char buf[4096];
        ssize_t k = pread(r->procs_fd, buf, sizeof(buf) - 1, 0);
        if (k < 0)
                return 0;
        buf[k] = 0;
        /* The cgroup holds the receiver alone; its kept-open statm gives the pages. */
        unsigned long long size = 0, resident = 0;
        k = pread(r->statm_fd, buf, sizeof(buf) - 1, 0);
        if (k > 0) {
                buf[k] = 0;
                sscanf(buf, "%llu %llu", &size, &resident);
        }
        return resident;
}

/* Sends the probes of slots [from, to), CHUNK per sendmmsg. */
static void send_probes(int s, int from, int to) {
        static const char probe[] = "\0\0\0\0\0"; /* 5 bytes, as an SQP query request's head */
        struct sockaddr_in dst[CHUNK];
        struct iovec iov[CHUNK];
        struct mmsghdr m[CHUNK];
        for (int i = from; i < to; i += CHUNK) {
                int c = to - i < CHUNK ? to - i : CHUNK;
                for (int j = 0; j < c; j++) {
                        dst[j] = (struct sockaddr_in){ .sin_family = AF_INET,
                                                       .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                                       .sin_port = htons(rv[i + j].port) };
                        iov[j] = (struct iovec){ (void *)probe, 5 };
                        m[j] = (struct mmsghdr){ .msg_hdr = { .msg_name = &dst[j],
                                                              .msg_namelen = sizeof(dst[j]),
                                                              .msg_iov = &iov[j],
                                                              .msg_iovlen = 1 } };
                }
                for (int sent = 0; sent < c;) {
                        int k = sendmmsg(s, m + sent, c - sent, 0);
                        if (k < 0)
                                die("sendmmsg");
                        sent += k;
                }
        }
}

/* Takes in answers until WANT have come; returns how many came within 2 s. */
static int take_answers(int s, int want) {
        static char bufs[CHUNK][256];
        struct iovec iov[CHUNK];
        struct mmsghdr m[CHUNK];
        int got = 0;
        while (got < want) {
                struct pollfd p = { .fd = s, .events = POLLIN };
                if (poll(&p, 1, 2000) <= 0)
                        break;
                for (int j = 0; j < CHUNK; j++) {
                        iov[j] = (struct iovec){ bufs[j], sizeof(bufs[j]) };
                        m[j] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[j], .msg_iovlen = 1 } };
                }
                int k = recvmmsg(s, m, CHUNK, MSG_DONTWAIT, NULL);
                if (k > 0)
                        got += k;
        }
        return got;
}

static int cmp_d(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

static double median(double *v, int n) {
        qsort(v, n, sizeof(*v), cmp_d);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
        if (argc != 4) {
                fprintf(stderr, "usage: floor CGROUP N ROUNDS\n");
                return 2;
        }
        const char *cg = argv[1];
        int n = atoi(argv[2]), rounds = atoi(argv[3]);
        if (n < 1 || n > 100000 || rounds < 1 || rounds > 1000) {
                fprintf(stderr, "floor: N must be 1..100000 and ROUNDS 1..1000\n");
                return 2;
        }
        if (mkdir(cg, 0755) == 0)
                cg_made = cg;
        else if (errno != EEXIST)
                die(cg);
        rv = calloc(n, sizeof(*rv));
        if (!rv)
                die("calloc");
        atexit(cleanup);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        signal(SIGHUP, on_signal);
        for (int i = 0; i < n; i++) {
                Recv *r = &rv[i];
                if (asprintf(&r->dir, "%s/f-%d", cg, i) < 0)
                        die("asprintf");
                if (mkdir(r->dir, 0755) < 0)
                        die(r->dir);
                int pfd[2];
                if (pipe2(pfd, O_CLOEXEC) < 0)
                        die("pipe");
                r->pid = fork();
                if (r->pid < 0)
                        die("fork");
                if (r->pid == 0) {
                        close(pfd[0]);
                        receiver(r->dir, pfd[1]);
                }
                n_rv = i + 1;
                close(pfd[1]);
                if (read(pfd[0], &r->port, sizeof(r->port)) != sizeof(r->port)) {
                        fprintf(stderr, "floor: receiver %d did not start\n", i);
                        return 1;
                }
                close(pfd[0]);
                char statm[64];
                snprintf(statm, sizeof(statm), "/proc/%d/statm", (int)r->pid);
                r->cpu_fd = open_in(r->dir, "cpu.stat");
                r->mem_fd = open_in(r->dir, "memory.current");
                r->procs_fd = r->mem_fd < 0 ? open_in(r->dir, "cgroup.procs") : -1;
                r->statm_fd = r->mem_fd < 0 ? open(statm, O_RDONLY | O_CLOEXEC) : -1;
                if (r->cpu_fd < 0 || (r->mem_fd < 0 && (r->procs_fd < 0 || r->statm_fd < 0)))
                        die("opening the cgroup's files or statm");
        }
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int big = 4 << 20;
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
        if (s < 0)
                die("socket");

        double *cpu = calloc(rounds, sizeof(double)), *mem = calloc(rounds, sizeof(double)),
               *probe = calloc(rounds, sizeof(double)), *all = calloc(rounds, sizeof(double)),
               *warm = calloc(rounds, sizeof(double));
        unsigned long long sink = 0;
        int lost = 0;
        /* One pass first, not counted: each file's first read allocates its buffer. */
        for (int i = 0; i < n; i++)
                sink += part_cpu(&rv[i]) + part_memory(&rv[i]);
        send_probes(s, 0, n);
        lost += n - take_answers(s, n);
        for (int r = 0; r < rounds; r++) {
                double t;
                sleep(1);
                t = cpu_us();
                for (int i = 0; i < n; i++)
                        sink += part_cpu(&rv[i]);
                cpu[r] = (cpu_us() - t) / n;
                sleep(1);
                t = cpu_us();
                for (int i = 0; i < n; i++)
                        sink += part_memory(&rv[i]);
                mem[r] = (cpu_us() - t) / n;
                sleep(1);
                t = cpu_us();
                send_probes(s, 0, n);
                lost += n - take_answers(s, n);
                probe[r] = (cpu_us() - t) / n;
                sleep(1);
                for (int pass = 0; pass < 2; pass++) {
                        t = cpu_us();
                        for (int i = 0; i < n; i += CHUNK) {
                                int to = i + CHUNK < n ? i + CHUNK : n;
                                for (int j = i; j < to; j++)
                                        sink += part_cpu(&rv[j]) + part_memory(&rv[j]);
                                send_probes(s, i, to);
                        }
                        lost += n - take_answers(s, n);
                        /* The second pass follows at once: the warm figure. */
                        (pass ? warm : all)[r] = (cpu_us() - t) / n;
                }
        }
        /* The price of entering the kernel at all, on this machine. */
        double t = cpu_us();
        for (int i = 0; i < 100000; i++)
                syscall(SYS_getppid);
        printf("syscall_us %.3f\n", (cpu_us() - t) / 100000);
        printf("memory_source %s\n", rv[0].mem_fd >= 0 ? "memory.current" : "cgroup.procs+statm");
        printf("floor_cpu_stat_us %.2f\n", median(cpu, rounds));
        printf("floor_memory_us %.2f\n", median(mem, rounds));
        printf("floor_probe_us %.2f\n", median(probe, rounds));
        printf("floor_check_us %.2f\n", median(all, rounds));
        printf("floor_check_warm_us %.2f\n", median(warm, rounds));
        printf("lost_answers %d\n", lost);
        printf("sink %llu\n", sink % 10);
        return 0;
}
