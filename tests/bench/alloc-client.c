/* SPDX-License-Identifier: MIT */
/*
 * alloc-client: the D-Bus side of slotd's benchmark (tests/bench/README.md, scenario 5).
 *
 *   alloc-client ADDRESS rtt FLEET K            K × (Allocate(FLEET, uuid, "") + Deallocate(uuid))
 *   alloc-client ADDRESS load FLEET SECONDS P   P processes, each on its own bus connection,
 *                                               Allocate + Deallocate in a loop for SECONDS
 *   alloc-client ADDRESS list K                 K × ListSlots()
 *   alloc-client ADDRESS ping TIMEOUT_S         one Get(Manager.SlotCount), waiting at most TIMEOUT_S
 *
 * Each mode prints one line of "key=value" fields (times in microseconds):
 *   rtt:  n= pair_p50= pair_p99= alloc_p50= alloc_p99= dealloc_p50= dealloc_p99=
 *   load: clients= seconds= pairs= per_sec= errors=
 *   list: n= slots= p50= p99=
 *   ping: usec= (or timeout=1 when no answer came in time)
 * A failed call is printed to stderr; rtt and list then exit 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "bench-bus.h"

/* Nearest-rank percentile of n sorted values. */
static uint64_t pct(const uint64_t *v, size_t n, double p) {
        size_t k;
        if (n == 0)
                return 0;
        k = (size_t) (p / 100.0 * (double) n + 0.999999);
        if (k < 1)
                k = 1;
        if (k > n)
                k = n;
        return v[k - 1];
}

static int allocate(sd_bus *bus, const char *fleet, const char *uuid) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL;
        int r = sd_bus_call_method(bus, DEST, PATH, IFACE, "Allocate", &e, &m, "sss", fleet, uuid, "");
        if (r < 0)
                fprintf(stderr, "alloc-client: Allocate(%s, %s): %s\n", fleet, uuid,
                        e.message ? e.message : strerror(-r));
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        return r;
}

static int deallocate(sd_bus *bus, const char *uuid) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL;
        int r = sd_bus_call_method(bus, DEST, PATH, IFACE, "Deallocate", &e, &m, "s", uuid);
        if (r < 0)
                fprintf(stderr, "alloc-client: Deallocate(%s): %s\n", uuid, e.message ? e.message : strerror(-r));
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        return r;
}

static int mode_rtt(const char *address, const char *fleet, size_t k) {
        sd_bus *bus = connect_bus("alloc-client", address);
        uint64_t *pair = calloc(k, sizeof(uint64_t)), *al = calloc(k, sizeof(uint64_t)),
                 *de = calloc(k, sizeof(uint64_t));
        char uuid[64];

        if (!pair || !al || !de)
                return 1;
        for (size_t i = 0; i < k; i++) {
                uint64_t t0, t1, t2;
                snprintf(uuid, sizeof(uuid), "bench-rtt-%d-%zu", (int) getpid(), i);
                t0 = now_usec();
                if (allocate(bus, fleet, uuid) < 0)
                        return 1;
                t1 = now_usec();
                if (deallocate(bus, uuid) < 0)
                        return 1;
                t2 = now_usec();
                al[i] = t1 - t0;
                de[i] = t2 - t1;
                pair[i] = t2 - t0;
        }
        qsort(pair, k, sizeof(uint64_t), cmp_u64);
        qsort(al, k, sizeof(uint64_t), cmp_u64);
        qsort(de, k, sizeof(uint64_t), cmp_u64);
        printf("n=%zu pair_p50=%llu pair_p99=%llu alloc_p50=%llu alloc_p99=%llu dealloc_p50=%llu "
               "dealloc_p99=%llu\n",
               k, (unsigned long long) pct(pair, k, 50), (unsigned long long) pct(pair, k, 99),
               (unsigned long long) pct(al, k, 50), (unsigned long long) pct(al, k, 99),
               (unsigned long long) pct(de, k, 50), (unsigned long long) pct(de, k, 99));
        sd_bus_flush_close_unref(bus);
        return 0;
}

static int mode_load(const char *address, const char *fleet, double seconds, int clients) {
        int fds[2];
        unsigned long long pairs = 0, errors = 0;
        uint64_t t_start, t_end;

        if (pipe(fds) < 0)
                return 1;
        /* Every client connects first, then all start together at t_start. */
        t_start = now_usec() + 300000;
        t_end = t_start + (uint64_t) (seconds * 1e6);
        for (int c = 0; c < clients; c++) {
                pid_t pid = fork();
                if (pid < 0)
                        return 1;
                if (pid == 0) {
                        sd_bus *bus;

                        /* A client outlives no parent (the benchmark kills the parent by PID). */
                        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                        if (getppid() == 1)
                                _exit(1);
                        bus = connect_bus("alloc-client", address);
                        unsigned long long n = 0, err = 0;
                        char uuid[64], line[64];
                        uint64_t now;

                        close(fds[0]);
                        while ((now = now_usec()) < t_start)
                                usleep((useconds_t) (t_start - now));
                        while (now_usec() < t_end) {
                                snprintf(uuid, sizeof(uuid), "bench-load-%d-%llu", (int) getpid(), n);
                                if (allocate(bus, fleet, uuid) < 0 || deallocate(bus, uuid) < 0) {
                                        if (++err > 100)
                                                break;
                                        continue;
                                }
                                n++;
                        }
                        snprintf(line, sizeof(line), "%llu %llu\n", n, err);
                        (void) !write(fds[1], line, strlen(line));
                        sd_bus_flush_close_unref(bus);
                        _exit(0);
                }
        }
        close(fds[1]);
        {
                FILE *f = fdopen(fds[0], "r");
                unsigned long long n, e;
                while (f && fscanf(f, "%llu %llu", &n, &e) == 2) {
                        pairs += n;
                        errors += e;
                }
                if (f)
                        fclose(f);
        }
        while (wait(NULL) > 0)
                ;
        printf("clients=%d seconds=%.3f pairs=%llu per_sec=%.1f errors=%llu\n", clients, seconds, pairs,
               (double) pairs / seconds, errors);
        return errors > 0;
}

static int mode_list(const char *address, size_t k) {
        sd_bus *bus = connect_bus("alloc-client", address);
        uint64_t *t = calloc(k, sizeof(uint64_t));
        unsigned slots = 0;

        if (!t)
                return 1;
        for (size_t i = 0; i < k; i++) {
                sd_bus_error e = SD_BUS_ERROR_NULL;
                sd_bus_message *m = NULL;
                uint64_t t0 = now_usec();
                int r = sd_bus_call_method(bus, DEST, PATH, IFACE, "ListSlots", &e, &m, "");
                if (r >= 0) {
                        /* Read the reply whole, as a client would. */
                        r = sd_bus_message_enter_container(m, 'a', "(ussssso)");
                        slots = 0;
                        while (r >= 0) {
                                uint32_t id;
                                const char *f, *st, *ps, *u, *b, *p;
                                r = sd_bus_message_read(m, "(ussssso)", &id, &f, &st, &ps, &u, &b, &p);
                                if (r <= 0)
                                        break;
                                slots++;
                        }
                }
                t[i] = now_usec() - t0;
                if (r < 0) {
                        fprintf(stderr, "alloc-client: ListSlots: %s\n", e.message ? e.message : strerror(-r));
                        return 1;
                }
                sd_bus_error_free(&e);
                sd_bus_message_unref(m);
        }
        qsort(t, k, sizeof(uint64_t), cmp_u64);
        printf("n=%zu slots=%u p50=%llu p99=%llu\n", k, slots, (unsigned long long) pct(t, k, 50),
               (unsigned long long) pct(t, k, 99));
        sd_bus_flush_close_unref(bus);
        return 0;
}

static int mode_ping(const char *address, double timeout_s) {
        sd_bus *bus = connect_bus("alloc-client", address);
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL;
        uint64_t t0;
        int r;

        (void) sd_bus_set_method_call_timeout(bus, (uint64_t) (timeout_s * 1e6));
        t0 = now_usec();
        r = sd_bus_call_method(bus, DEST, PATH, "org.freedesktop.DBus.Properties", "Get", &e, &m, "ss",
                               IFACE, "SlotCount");
        if (r == -ETIMEDOUT) {
                printf("timeout=1 usec=%llu\n", (unsigned long long) (now_usec() - t0));
                return 0;
        }
        if (r < 0) {
                fprintf(stderr, "alloc-client: Get(SlotCount): %s\n", e.message ? e.message : strerror(-r));
                return 1;
        }
        printf("usec=%llu\n", (unsigned long long) (now_usec() - t0));
        sd_bus_message_unref(m);
        sd_bus_flush_close_unref(bus);
        return 0;
}

int main(int argc, char **argv) {
        if (argc == 5 && strcmp(argv[2], "rtt") == 0)
                return mode_rtt(argv[1], argv[3], (size_t) strtoul(argv[4], NULL, 10));
        if (argc == 6 && strcmp(argv[2], "load") == 0)
                return mode_load(argv[1], argv[3], strtod(argv[4], NULL), atoi(argv[5]));
        if (argc == 4 && strcmp(argv[2], "list") == 0)
                return mode_list(argv[1], (size_t) strtoul(argv[3], NULL, 10));
        if (argc == 4 && strcmp(argv[2], "ping") == 0)
                return mode_ping(argv[1], strtod(argv[3], NULL));
        fprintf(stderr, "usage: alloc-client ADDRESS rtt FLEET K | load FLEET SECONDS P | list K | ping TIMEOUT_S\n");
        return 2;
}
