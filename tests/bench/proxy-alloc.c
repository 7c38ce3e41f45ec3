/* SPDX-License-Identifier: MIT */
/*
 * proxy-alloc: the D-Bus side of the local proxy's benchmark (tests/bench/README.md, "The local
 * proxy"): the allocations whose events ws-sub hears, and the peer path, slotd's own D-Bus
 * signals, heard by a second bus client.
 *
 *   proxy-alloc ADDRESS FLEET K BATCH GAP_USEC [keep]
 *
 * First a watcher process is forked with its own bus connection, matching slotd's
 * Manager.SlotChanged and every slot's PropertiesChanged; it stamps each (CLOCK_MONOTONIC) in
 * its match callback. Once its matches are in place, this process makes K allocations in
 * batches of BATCH: BATCH × Manager.Allocate(FLEET, uuid, "") with new UUIDs (each lands on
 * another slot while free ones remain), then their BATCH × Manager.Deallocate(uuid), waiting
 * GAP_USEC after each reply so that one event has gone through before the next change (a
 * latency, not a throughput). The times of each call are taken just before it is sent and
 * just after its reply is read. With "keep" the K allocations are made and left in place (no
 * Deallocate): the slots are then allocated for a subscriber that comes later.
 *
 * Output (stdout), after a last 300 ms for late signals, times in µs:
 *   S USEC SLOT STATE              a SlotChanged (watcher)
 *   P USEC SLOT ALLOCATION_UUID    a PropertiesChanged of a slot carrying AllocationUUID
 *                                  ("-" for none)
 *   A UUID SLOT T_CALL T_REPLY     an Allocate
 *   D UUID SLOT T_CALL T_REPLY     a Deallocate
 * A failed call goes to stderr and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "bench-bus.h"

/* ---- the watcher ---- */

static char *wbuf;
static size_t wlen, wcap;

static void wprintf(const char *fmt, ...) {
        char line[256];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t) n >= sizeof(line))
                n = sizeof(line) - 1;
        if (wlen + (size_t) n > wcap) {
                wcap = wcap ? wcap * 2 : 1 << 20;
                wbuf = realloc(wbuf, wcap);
                if (!wbuf)
                        _exit(1);
        }
        memcpy(wbuf + wlen, line, (size_t) n);
        wlen += (size_t) n;
}

static int on_slot_changed(sd_bus_message *m, void *userdata, sd_bus_error *e) {
        (void) userdata;
        (void) e;
        uint64_t t = now_usec();
        uint32_t id;
        const char *state, *ps;

        if (sd_bus_message_read(m, "uss", &id, &state, &ps) >= 0)
                wprintf("S %llu %u %s\n", (unsigned long long) t, id, state);
        return 0;
}

static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *e) {
        (void) userdata;
        (void) e;
        uint64_t t = now_usec();
        const char *path = sd_bus_message_get_path(m), *iface, *name;
        int r;

        if (!path || strncmp(path, SLOT_PREFIX, strlen(SLOT_PREFIX)) != 0)
                return 0;
        if (sd_bus_message_read(m, "s", &iface) < 0 || strcmp(iface, SLOT_IFACE) != 0)
                return 0;
        if (sd_bus_message_enter_container(m, 'a', "{sv}") < 0)
                return 0;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                if (sd_bus_message_read(m, "s", &name) < 0)
                        return 0;
                if (strcmp(name, "AllocationUUID") == 0) {
                        const char *uuid;
                        if (sd_bus_message_read(m, "v", "s", &uuid) >= 0)
                                wprintf("P %llu %s %s\n", (unsigned long long) t, path + strlen(SLOT_PREFIX),
                                        uuid[0] ? uuid : "-");
                        return 0;
                }
                if (sd_bus_message_skip(m, "v") < 0 || sd_bus_message_exit_container(m) < 0)
                        return 0;
        }
        return 0;
}

/* Runs until 'ctl' reaches its end, then prints what it heard. */
static void watcher(const char *address, int ready_fd, int ctl) {
        sd_bus *bus = connect_bus("proxy-alloc", address);
        int r;

        r = sd_bus_add_match(bus, NULL,
                             "type='signal',sender='" DEST "',path='" PATH "',interface='" IFACE
                             "',member='SlotChanged'",
                             on_slot_changed, NULL);
        if (r >= 0)
                r = sd_bus_add_match(bus, NULL,
                                     "type='signal',sender='" DEST "',interface='org.freedesktop.DBus.Properties',"
                                     "member='PropertiesChanged',arg0='" SLOT_IFACE "'",
                                     on_properties_changed, NULL);
        if (r < 0) {
                fprintf(stderr, "proxy-alloc: AddMatch: %s\n", strerror(-r));
                _exit(1);
        }
        (void) !write(ready_fd, "r", 1);
        close(ready_fd);
        for (;;) {
                struct pollfd p[2];

                while ((r = sd_bus_process(bus, NULL)) > 0)
                        ;
                if (r < 0) {
                        fprintf(stderr, "proxy-alloc: watcher: %s\n", strerror(-r));
                        _exit(1);
                }
                /* What to wait for is known only once everything read is processed. */
                p[0] = (struct pollfd){ .fd = sd_bus_get_fd(bus), .events = (short) sd_bus_get_events(bus) };
                p[1] = (struct pollfd){ .fd = ctl, .events = POLLIN };
                if (poll(p, 2, 1000) < 0 && errno != EINTR)
                        _exit(1);
                if (p[1].revents)
                        break;
        }
        while (sd_bus_process(bus, NULL) > 0)
                ;
        (void) !fwrite(wbuf, 1, wlen, stdout);
        fflush(stdout);
        _exit(0);
}

/* ---- the allocations ---- */

typedef struct Rec {
        char kind;
        unsigned slot;
        uint64_t t_call, t_reply;
} Rec;

static void pause_usec(uint64_t us) {
        struct timespec ts = { .tv_sec = (time_t) (us / 1000000), .tv_nsec = (long) (us % 1000000) * 1000 };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

int main(int argc, char **argv) {
        const char *address, *fleet;
        size_t k, batch;
        uint64_t gap;
        int ready[2], ctl[2];
        pid_t pid;
        char b;
        sd_bus *bus;
        Rec *recs;
        unsigned *slot_of;
        size_t n_recs = 0;
        int status;

        if (argc != 6 && !(argc == 7 && strcmp(argv[6], "keep") == 0)) {
                fprintf(stderr, "usage: proxy-alloc ADDRESS FLEET K BATCH GAP_USEC [keep]\n");
                return 2;
        }
        address = argv[1];
        fleet = argv[2];
        k = strtoul(argv[3], NULL, 10);
        batch = strtoul(argv[4], NULL, 10);
        gap = strtoull(argv[5], NULL, 10);
        if (k == 0 || batch == 0)
                return 2;
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        recs = calloc(2 * k, sizeof(Rec));
        slot_of = calloc(k, sizeof(unsigned));
        if (!recs || !slot_of || pipe(ready) < 0 || pipe(ctl) < 0)
                return 1;
        fflush(stdout);
        pid = fork();
        if (pid < 0)
                return 1;
        if (pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() == 1)
                        _exit(1);
                close(ready[0]);
                close(ctl[1]);
                watcher(address, ready[1], ctl[0]);
        }
        close(ready[1]);
        close(ctl[0]);
        if (read(ready[0], &b, 1) != 1) {
                fprintf(stderr, "proxy-alloc: the watcher did not start\n");
                return 1;
        }
        bus = connect_bus("proxy-alloc", address);
        for (size_t done = 0; done < k;) {
                size_t n = k - done < batch ? k - done : batch;
                for (int phase = 0; phase < (argc == 7 ? 1 : 2); phase++)
                        for (size_t j = done; j < done + n; j++) {
                                sd_bus_error e = SD_BUS_ERROR_NULL;
                                sd_bus_message *m = NULL;
                                char uuid[64];
                                Rec *rec = &recs[n_recs++];
                                int r;

                                snprintf(uuid, sizeof(uuid), "pb-%d-%zu", (int) getpid(), j);
                                rec->kind = phase == 0 ? 'A' : 'D';
                                rec->t_call = now_usec();
                                if (phase == 0)
                                        r = sd_bus_call_method(bus, DEST, PATH, IFACE, "Allocate", &e, &m, "sss",
                                                               fleet, uuid, "");
                                else
                                        r = sd_bus_call_method(bus, DEST, PATH, IFACE, "Deallocate", &e, &m, "s",
                                                               uuid);
                                rec->t_reply = now_usec();
                                if (r >= 0 && phase == 0) {
                                        const char *path;
                                        r = sd_bus_message_read(m, "uo", &slot_of[j], &path);
                                }
                                if (r < 0) {
                                        fprintf(stderr, "proxy-alloc: %s(%s): %s\n", phase ? "Deallocate" : "Allocate",
                                                uuid, e.message ? e.message : strerror(-r));
                                        return 1;
                                }
                                rec->slot = slot_of[j];
                                sd_bus_error_free(&e);
                                sd_bus_message_unref(m);
                                pause_usec(gap);
                        }
                done += n;
        }
        pause_usec(300000);
        close(ctl[1]);
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "proxy-alloc: the watcher failed\n");
                return 1;
        }
        {
                size_t ia = 0, id = 0;
                for (size_t i = 0; i < n_recs; i++) {
                        /* The records go A… then D… per batch, in UUID order within each. */
                        size_t j = recs[i].kind == 'A' ? ia++ : id++;
                        printf("%c pb-%d-%zu %u %llu %llu\n", recs[i].kind, (int) getpid(), j, recs[i].slot,
                               (unsigned long long) recs[i].t_call, (unsigned long long) recs[i].t_reply);
                }
        }
        sd_bus_flush_close_unref(bus);
        return 0;
}
