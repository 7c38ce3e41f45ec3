/* SPDX-License-Identifier: MIT */
/* tests/bench/capacity-cost [HOSTS [SLOTS]]: what the capacity answer (SPEC §13, GET
 * /v1/fleets/{fleetId}/capacity) costs from the capacity index (capacity-index.h) at a fleet's
 * size: one fleet of HOSTS x SLOTS (1,000 x 50) in 4 regions, every host deprovisionable, one
 * slot in 50 held; its fill (a cold start's range), an answer, a slot's event (its state
 * changed and back, a hold moved) and the heap per slot (mallinfo2(), with the records the
 * view keeps in its slots). CPU time (CLOCK_PROCESS_CPUTIME_ID), so the machine's load
 * matters less. The answer's time through HTTP, before and after the index, is
 * fleet-scaler-react's capacity_ms_*; tests/bench/README.md "The scaler's reaction time" has
 * the figures. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "capacity-index.h"
#include "macro.h"

static double cpu_ms(void) {
        struct timespec t;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return (double) t.tv_sec * 1e3 + (double) t.tv_nsec / 1e6;
}

static const char *const regions[] = { "r1", "r2", "r3", "r4" };

static CapacitySlot slot_of(const char *machine, unsigned m, unsigned j, bool alt) {
        return (CapacitySlot){
                .fleet = "game",
                .machine_id = machine,
                .region = regions[m % ELEMENTSOF(regions)],
                .state = alt ? "allocated" : j < 2 ? "online" : "available",
                .process_state = j < 2 || alt ? "running" : "stopped",
                .claimed = alt,
                .hold_until = (j + m) % 50 == 0 ? 1000000 + (uint64_t) m * 7 + j + alt : 0,
        };
}

int main(int argc, char *argv[]) {
        unsigned hosts = argc > 1 ? (unsigned) atoi(argv[1]) : 1000;
        unsigned slots = argc > 2 ? (unsigned) atoi(argv[2]) : 50;
        size_t n = (size_t) hosts * slots, heap0, heap1;
        char (*ids)[24] = calloc(hosts, sizeof(*ids));
        CapacityEntry *entries = calloc(n, sizeof(CapacityEntry));
        CapacityIndex *x = NULL;
        FleetCapacity c;
        double t0, t1, t2, t3;
        int rounds = 1000;

        if (!ids || !entries || hosts == 0 || slots == 0)
                return 1;
        heap0 = mallinfo2().uordblks;
        if (capacity_index_new(&x) < 0)
                return 1;
        t0 = cpu_ms();
        for (unsigned m = 0; m < hosts; m++) {
                snprintf(ids[m], sizeof(ids[m]), "machine-%06u", m);
                (void) capacity_index_machine_set(x, ids[m], true, true);
        }
        for (unsigned j = 0; j < slots; j++)
                for (unsigned m = 0; m < hosts; m++) {
                        CapacitySlot s = slot_of(ids[m], m, j, false);

                        if (capacity_index_slot_set(x, &entries[(size_t) m * slots + j], &s) < 0)
                                return 1;
                }
        t1 = cpu_ms();
        heap1 = mallinfo2().uordblks;
        for (int r = 0; r < rounds; r++) {
                if (capacity_index_tally(x, "game", NULL, 0, &c) < 0)
                        return 1;
                if (r < rounds - 1)
                        fleet_capacity_done(&c);
        }
        t2 = cpu_ms();
        printf("capacity-cost: %u x %u: fill %.1f ms (%.2f us a slot); an answer %.1f us "
               "(%zu regions, %zu deprovisionable, %llu slots, holdUntil %llu); ",
               hosts, slots, t1 - t0, (t1 - t0) * 1e3 / (double) n, (t2 - t1) * 1e3 / rounds,
               c.n_regions, c.n_deprovisionable, (unsigned long long) c.total.slots,
               (unsigned long long) c.hold_until);
        fleet_capacity_done(&c);
        t2 = cpu_ms();
        for (int alt = 1; alt >= 0; alt--)
                for (unsigned j = 0; j < slots; j++)
                        for (unsigned m = 0; m < hosts; m++) {
                                CapacitySlot s = slot_of(ids[m], m, j, alt);

                                (void) capacity_index_slot_set(
                                        x, &entries[(size_t) m * slots + j], &s);
                        }
        t3 = cpu_ms();
        printf("an event %.3f us; %.1f B a slot (the index's heap %zu B, the records in the "
               "view's slots %zu B)\n",
               (t3 - t2) * 1e3 / (2.0 * (double) n),
               (double) (heap1 - heap0 + n * sizeof(CapacityEntry)) / (double) n,
               heap1 - heap0, n * sizeof(CapacityEntry));
        capacity_index_free(x);
        free(entries);
        free(ids);
        return 0;
}
