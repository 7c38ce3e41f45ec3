/* SPDX-License-Identifier: MIT */
/* tests/bench/scaler-plan-cost [HOSTS [SLOTS [BUSY]]]: what one scaler plan costs at a fleet's
 * size, the index's (scaler-index.h, the allocator's since the index) against a walk of every
 * slot (scaler_plan(), the reference, which is what each plan did before, less the view's
 * walk and lookups that built its input: a lower bound of the old cost). One fleet and region
 * of HOSTS x SLOTS (1,000 x 50), 2 servers running a host, BUSY (500, at most HOSTS) of them
 * allocated,
 * buffer = 2 a host: a plan of BUSY starts. Also the index's fill (a cold start's range) and
 * its cost per event and its heap per slot. CPU time (CLOCK_PROCESS_CPUTIME_ID), so the machine's load matters
 * less. tests/bench/README.md "The scaler's reaction time" has the figures. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "scaler-index.h"

static double cpu_ms(void) {
        struct timespec t;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return (double) t.tv_sec * 1e3 + (double) t.tv_nsec / 1e6;
}

/* Slot 0 of the first busy machines allocated; slots 0 and 1 running; the rest stopped. */
static ScalerSlotKind kind_of(unsigned m, unsigned j, unsigned busy) {
        if (j == 0 && m < busy)
                return SCALER_BUSY;
        return j < 2 ? SCALER_FREE : SCALER_STOPPED;
}

int main(int argc, char **argv) {
        unsigned hosts = argc > 1 ? (unsigned) atoi(argv[1]) : 1000;
        unsigned slots = argc > 2 ? (unsigned) atoi(argv[2]) : 50;
        unsigned busy = argc > 3 ? (unsigned) atoi(argv[3]) : 500;
        ScalerTarget t = { .buffer = 2 * hosts, .ceiling = SCALER_CEILING_NONE };
        size_t n = (size_t) hosts * slots, max = 4096, *actions = calloc(max, sizeof(size_t));
        ScalerAction *kinds = calloc(max, sizeof(ScalerAction));
        ScalerPick *picks = calloc(max, sizeof(ScalerPick));
        ScalerSlot *ref = calloc(n, sizeof(ScalerSlot));
        char (*ids)[24] = calloc(hosts, sizeof(*ids));

        if (!actions || !kinds || !picks || !ref || !ids || hosts == 0 || slots < 2 ||
            busy > hosts)
                return 1;
        for (unsigned m = 0; m < hosts; m++)
                snprintf(ids[m], sizeof(ids[m]), "%08x-%u", m * 2654435761U, m);
        for (PlacementStrategy st = 0; st < _PLACEMENT_STRATEGY_MAX; st++) {
                ScalerIndex *x = NULL;
                ScalerCount c;
                size_t k_ref = 0, i = 0;
                int k = 0;
                double t0, t1, t2, t3, t4, t5;
                size_t heap0 = mallinfo2().uordblks, heap1;

                if (scaler_index_new(st, &x) < 0)
                        return 1;
                t0 = cpu_ms();
                for (unsigned m = 0; m < hosts; m++)
                        (void) scaler_index_machine_set(x, ids[m], true, false);
                for (unsigned j = 0; j < slots; j++)
                        for (unsigned m = 0; m < hosts; m++) {
                                ScalerIndexSlot s = { .fleet = "game", .region = "r1",
                                                      .kind = kind_of(m, j, busy),
                                                      .ready = true };

                                (void) scaler_index_slot_set(x, ids[m], j, &s);
                        }
                t1 = cpu_ms();
                heap1 = mallinfo2().uordblks;
                for (int r = 0; r < 100; r++)
                        k = scaler_group_plan(x, scaler_index_first(x), &t, picks, max, &c);
                t2 = cpu_ms();
                for (unsigned e = 0; e < 10000; e++) { /* a free server allocated, freed */
                        ScalerIndexSlot s = { .fleet = "game", .region = "r1",
                                              .kind = e % 2 ? SCALER_FREE : SCALER_BUSY,
                                              .ready = true };

                        (void) scaler_index_slot_set(x, ids[(e / 2 * 7919) % hosts], 1, &s);
                }
                t3 = cpu_ms();
                for (unsigned m = 0; m < hosts; m++)
                        for (unsigned j = 0; j < slots; j++)
                                ref[i++] = (ScalerSlot){ .machine_id = ids[m], .slot_id = j,
                                                         .kind = kind_of(m, j, busy),
                                                         .ready = true };
                for (size_t a = 0; a < n; a++) {
                        uint32_t load = 0;

                        for (unsigned j = 0; j < slots; j++)
                                load += ref[a - a % slots + j].kind == SCALER_BUSY;
                        ref[a].machine_load = load;
                }
                t4 = cpu_ms();
                for (int r = 0; r < 10; r++)
                        k_ref = scaler_plan(&t, st, ref, n, actions, kinds, max, NULL);
                t5 = cpu_ms();
                printf("%s, %u x %u: index fill %.1f ms (%.2f us a slot, %.0f B a slot of heap), "
                       "an event %.2f us, "
                       "a plan of %d commands %.3f ms; a walk of every slot (scaler_plan, "
                       "%zu commands) %.1f ms\n",
                       placement_strategy_to_string(st), hosts, slots, t1 - t0,
                       (t1 - t0) * 1e3 / (double) n, (double) (heap1 - heap0) / (double) n,
                       (t3 - t2) * 1e3 / 10000, k,
                       (t2 - t1) / 100, k_ref, (t5 - t4) / 10);
                scaler_index_free(x);
        }
        free(actions);
        free(kinds);
        free(picks);
        free(ref);
        free(ids);
        return 0;
}
