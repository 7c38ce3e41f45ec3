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

#include "macro.h"
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

typedef struct Fleet {
        unsigned hosts, slots, busy;
        char (*ids)[24];
        ScalerTarget target;
} Fleet;

/* The index's fill, plan and events: printed. */
static int bench_index(const Fleet *f, PlacementStrategy st, ScalerPick *picks, size_t max) {
        size_t n = (size_t) f->hosts * f->slots, heap0 = mallinfo2().uordblks, heap1;
        ScalerIndex *x = NULL;
        double t0 = cpu_ms(), t1, t2, t3;
        int k = 0;

        if (scaler_index_new(st, &x) < 0)
                return -1;
        for (unsigned m = 0; m < f->hosts; m++)
                (void) scaler_index_machine_set(x, f->ids[m], true, false);
        for (unsigned j = 0; j < f->slots; j++)
                for (unsigned m = 0; m < f->hosts; m++) {
                        ScalerIndexSlot s = { .fleet = "game", .region = "r1",
                                              .kind = kind_of(m, j, f->busy), .ready = true };

                        (void) scaler_index_slot_set(x, f->ids[m], j, &s);
                }
        t1 = cpu_ms();
        heap1 = mallinfo2().uordblks;
        for (int r = 0; r < 100; r++)
                k = scaler_group_plan(x, scaler_index_first(x), &f->target, picks, max, NULL);
        t2 = cpu_ms();
        for (unsigned e = 0; e < 10000; e++) { /* a free server allocated, then freed */
                ScalerIndexSlot s = { .fleet = "game", .region = "r1",
                                      .kind = e % 2 ? SCALER_FREE : SCALER_BUSY, .ready = true };

                (void) scaler_index_slot_set(x, f->ids[(e / 2 * 7919) % f->hosts], 1, &s);
        }
        t3 = cpu_ms();
        printf("%s, %u x %u: index fill %.1f ms (%.2f us a slot, %.0f B a slot of heap), an "
               "event %.2f us, a plan of %d commands %.3f ms; ",
               placement_strategy_to_string(st), f->hosts, f->slots, t1 - t0,
               (t1 - t0) * 1e3 / (double) n, (double) (heap1 - heap0) / (double) n,
               (t3 - t2) * 1e3 / 10000, k, (t2 - t1) / 100);
        scaler_index_free(x);
        return 0;
}

/* The walk of every slot (scaler_plan()): printed. */
static int bench_reference(const Fleet *f, PlacementStrategy st, size_t max) {
        size_t n = (size_t) f->hosts * f->slots, i = 0, k = 0;
        _cleanup_free_ ScalerSlot *ref = calloc(n, sizeof(ScalerSlot));
        _cleanup_free_ size_t *actions = calloc(max, sizeof(size_t));
        _cleanup_free_ ScalerAction *kinds = calloc(max, sizeof(ScalerAction));
        double t0, t1;

        if (!ref || !actions || !kinds)
                return -1;
        for (unsigned m = 0; m < f->hosts; m++) {
                uint32_t load = f->slots > 0 && kind_of(m, 0, f->busy) == SCALER_BUSY;

                for (unsigned j = 0; j < f->slots; j++)
                        ref[i++] = (ScalerSlot){ .machine_id = f->ids[m], .slot_id = j,
                                                 .kind = kind_of(m, j, f->busy), .ready = true,
                                                 .machine_load = load };
        }
        t0 = cpu_ms();
        for (int r = 0; r < 10; r++)
                k = scaler_plan(&f->target, st, ref, n, actions, kinds, max, NULL);
        t1 = cpu_ms();
        printf("a walk of every slot (scaler_plan, %zu commands) %.1f ms\n", k, (t1 - t0) / 10);
        return 0;
}

int main(int argc, char **argv) {
        Fleet f = { .hosts = argc > 1 ? (unsigned) atoi(argv[1]) : 1000,
                    .slots = argc > 2 ? (unsigned) atoi(argv[2]) : 50,
                    .busy = argc > 3 ? (unsigned) atoi(argv[3]) : 500 };
        size_t max = 4096;
        _cleanup_free_ ScalerPick *picks = calloc(max, sizeof(ScalerPick));

        f.target = (ScalerTarget){ .buffer = 2 * f.hosts, .ceiling = SCALER_CEILING_NONE };
        f.ids = calloc(f.hosts, sizeof(*f.ids));
        if (!picks || !f.ids || f.hosts == 0 || f.slots < 2 || f.busy > f.hosts)
                return 1;
        for (unsigned m = 0; m < f.hosts; m++)
                snprintf(f.ids[m], sizeof(f.ids[m]), "%08x-%u", m * 2654435761U, m);
        for (PlacementStrategy st = 0; st < _PLACEMENT_STRATEGY_MAX; st++)
                if (bench_index(&f, st, picks, max) < 0 || bench_reference(&f, st, max) < 0)
                        return 1;
        free(f.ids);
        return 0;
}
