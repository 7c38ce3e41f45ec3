/* SPDX-License-Identifier: MIT */
/* What the benchmark's D-Bus clients (alloc-client.c, proxy-alloc.c) share: slotd's names, a
 * monotonic clock, a connection to a private bus, and a comparison for sorting latencies. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>

#define DEST "org.slotd.Supervisor1"
#define PATH "/org/slotd/Supervisor1"
#define IFACE "org.slotd.Supervisor1.Manager"
#define SLOT_IFACE "org.slotd.Supervisor1.Slot"
#define SLOT_PREFIX "/org/slotd/Supervisor1/slot/"

static inline uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
}

/* A bus client on ADDRESS; exits with PROGRAM's message when it cannot connect. */
static inline sd_bus *connect_bus(const char *program, const char *address) {
        sd_bus *bus = NULL;
        int r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_address(bus, address);
        if (r >= 0)
                r = sd_bus_set_bus_client(bus, 1);
        if (r >= 0)
                r = sd_bus_start(bus);
        if (r < 0) {
                fprintf(stderr, "%s: cannot connect to %s: %s\n", program, address, strerror(-r));
                exit(1);
        }
        return bus;
}

static inline int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}
