/* SPDX-License-Identifier: MIT */
/* The scaler's plan (scaler-plan.h): pure. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "scaler-plan.h"

/* ---- targets ---- */

void scaler_targets_free(ScalerTarget *t, size_t n) {
        for (size_t i = 0; t && i < n; i++) {
                free(t[i].fleet);
                free(t[i].region);
        }
        free(t);
}

static bool same_region(const char *a, const char *b) {
        return (!a && !b) || (a && b && streq(a, b));
}

const ScalerTarget *scaler_target_find(const ScalerTarget *t, size_t n, const char *fleet,
                                       const char *region) {
        const ScalerTarget *any = NULL;

        for (size_t i = 0; i < n; i++) {
                if (!streq(t[i].fleet, fleet))
                        continue;
                if (!t[i].region)
                        any = &t[i];
                else if (region && streq(t[i].region, region))
                        return &t[i];
        }
        return any;
}

static int fail(char **ret_error, const char *entry, const char *what) {
        if (ret_error && asprintf(ret_error, "'%s': %s", entry, what) < 0)
                *ret_error = NULL;
        return -EINVAL;
}

static int parse_count(const char *s, uint32_t *ret) {
        char *end;
        unsigned long long v;

        if (s[0] < '0' || s[0] > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0' || v >= SCALER_CEILING_NONE)
                return -EINVAL;
        *ret = (uint32_t) v;
        return 0;
}

/* One "FLEET[/REGION] key=N …" (entry: writable, NUL-terminated, no leading blank);
 * "FLEET/REGION" in double quotes may hold blanks (a .gsh region: "North America"). */
static int parse_entry(char *entry, const char *shown, ScalerTarget *t, char **ret_error) {
        char *save = NULL, *word = entry, *rest, *slash;

        *t = (ScalerTarget) { .ceiling = SCALER_CEILING_NONE };
        if (entry[0] == '"') {
                rest = strchr(++word, '"');
                if (!rest || (rest[1] != '\0' && !strchr(" \t", rest[1])))
                        return fail(ret_error, shown, "no closing quote after FLEET/REGION");
        } else
                rest = word + strcspn(word, " \t");
        if (rest[0] != '\0')
                *rest++ = '\0';
        for (const char *c = word; *c; c++)
                if ((unsigned char) *c < 0x20 || *c == 0x7f)
                        return fail(ret_error, shown, "a control character in FLEET/REGION");
        slash = strchr(word, '/');
        if (slash)
                *slash = '\0';
        if (word[0] == '\0')
                return fail(ret_error, shown, "no fleet");
        t->fleet = strdup(word);
        t->region = slash ? strdup(slash + 1) : NULL;
        if (!t->fleet || (slash && !t->region))
                return -ENOMEM;
        for (word = strtok_r(rest, " \t", &save); word; word = strtok_r(NULL, " \t", &save)) {
                char *eq = strchr(word, '=');
                uint32_t *field = NULL;

                if (eq)
                        *eq = '\0';
                if (streq(word, "buffer"))
                        field = &t->buffer;
                else if (streq(word, "floor"))
                        field = &t->floor;
                else if (streq(word, "ceiling"))
                        field = &t->ceiling;
                if (!field || !eq)
                        return fail(ret_error, shown, "expected buffer=N, floor=N or ceiling=N");
                if (parse_count(eq + 1, field) < 0)
                        return fail(ret_error, shown, "expected a count (0 to 4294967294)");
        }
        if (t->floor > t->ceiling)
                return fail(ret_error, shown, "floor above ceiling");
        return 0;
}

int scaler_targets_parse(const char *text, ScalerTarget **ret, size_t *ret_n, char **ret_error) {
        _cleanup_free_ char *copy = strdup(text ? text : "");
        ScalerTarget *t = NULL;
        size_t n = 0;
        char *save = NULL;
        int r = 0;

        if (ret_error)
                *ret_error = NULL;
        if (!copy)
                return -ENOMEM;
        for (char *e = strtok_r(copy, ";", &save); e; e = strtok_r(NULL, ";", &save)) {
                _cleanup_free_ char *shown = NULL;
                ScalerTarget *grown;

                e += strspn(e, " \t\n");
                if (e[0] == '\0')
                        continue;
                shown = strdup(e);
                grown = reallocarray(t, n + 1, sizeof(*t));
                if (!shown || !grown) {
                        r = -ENOMEM;
                        break;
                }
                t = grown;
                r = parse_entry(e, shown, &t[n], ret_error);
                n++;
                if (r < 0)
                        break;
                for (size_t i = 0; i + 1 < n; i++)
                        if (streq(t[i].fleet, t[n - 1].fleet) &&
                            same_region(t[i].region, t[n - 1].region)) {
                                r = fail(ret_error, shown, "a fleet and region given twice");
                                break;
                        }
                if (r < 0)
                        break;
        }
        if (r < 0) {
                scaler_targets_free(t, n);
                return r;
        }
        *ret = t;
        *ret_n = n;
        return 0;
}

/* ---- slots ---- */

ScalerSlotKind scaler_slot_kind_of(const char *state, const char *process_state,
                                   const char *allocation_id, bool claimed) {
        if (!state || !process_state)
                return SCALER_OTHER;
        if (claimed || (allocation_id && allocation_id[0]) || streq(state, "allocated") ||
            streq(state, "reserved") || streq(state, "held"))
                return streq(process_state, "failed") || streq(process_state, "stopped")
                               ? SCALER_OTHER
                               : SCALER_BUSY;
        if (streq(state, "available") && streq(process_state, "stopped"))
                return SCALER_STOPPED;
        if (streq(state, "online") &&
            (streq(process_state, "starting") || streq(process_state, "running")))
                return SCALER_FREE;
        return SCALER_OTHER;
}

static const char *const action_names[_SCALER_ACTION_MAX] = {
        [SCALER_NONE] = "none",
        [SCALER_START] = "start",
        [SCALER_STOP] = "stop",
};

const char *scaler_action_to_string(ScalerAction a) {
        return a >= 0 && a < _SCALER_ACTION_MAX ? action_names[a] : NULL;
}

ScalerAction scaler_action_from_string(const char *s) {
        for (ScalerAction a = SCALER_START; s && a < _SCALER_ACTION_MAX; a++)
                if (streq(s, action_names[a]))
                        return a;
        return _SCALER_ACTION_INVALID;
}

/* ---- the plan ---- */

typedef struct PlanMachine {
        const char *id;
        bool draining;
        uint32_t load, running, free;
        /* the slots to start (lowest id first) and to stop (not ready, then highest id
         * first): indexes into the plan's order[] */
        size_t *starts, n_starts, next_start;
        size_t *stops, n_stops, next_stop;
} PlanMachine;

static int slot_compare(const void *a, const void *b) {
        const ScalerSlot *x = *(const ScalerSlot *const *) a, *y = *(const ScalerSlot *const *) b;
        int c = strcmp(x->machine_id, y->machine_id);

        if (c != 0)
                return c;
        return x->slot_id < y->slot_id ? -1 : x->slot_id > y->slot_id;
}

/* What the slot counts as, its command in flight done. */
static ScalerSlotKind slot_counted(const ScalerSlot *s) {
        if (s->pending == SCALER_START && s->kind == SCALER_STOPPED)
                return SCALER_FREE;
        if (s->pending == SCALER_STOP && s->kind == SCALER_FREE)
                return SCALER_STOPPED;
        return s->kind;
}

static void count_slot(const ScalerSlot *s, ScalerCount *c, PlanMachine *m) {
        switch (slot_counted(s)) {
        case SCALER_BUSY:
                c->busy++;
                m->running++;
                break;
        case SCALER_FREE:
                c->free++;
                m->free++;
                m->running++;
                break;
        case SCALER_STOPPED:
                c->stopped++;
                break;
        default:
                break;
        }
}

/* Whether a should get the next start before b. */
static bool start_before(PlacementStrategy strategy, const PlanMachine *a, const PlanMachine *b) {
        if (strategy == PLACEMENT_PACKED && a->load != b->load)
                return a->load > b->load;
        if (strategy != PLACEMENT_PACKED && a->running != b->running)
                return a->running < b->running;
        if (strategy == PLACEMENT_PACKED && a->running != b->running)
                return a->running > b->running;
        return strcmp(a->id, b->id) < 0;
}

/* Whether a should give the next stop before b. */
static bool stop_before(PlacementStrategy strategy, const PlanMachine *a, const PlanMachine *b) {
        if (a->draining != b->draining)
                return a->draining;
        if (strategy == PLACEMENT_PACKED) {
                if (a->load != b->load)
                        return a->load < b->load;
                if (a->free != b->free)
                        return a->free < b->free;
        } else if (a->running != b->running)
                return a->running > b->running;
        return strcmp(a->id, b->id) < 0;
}

static size_t plan_starts(PlacementStrategy strategy, PlanMachine *m, size_t n_m,
                          const ScalerSlot **order, const ScalerSlot *slots, size_t want,
                          size_t *actions, ScalerAction *kinds, size_t max) {
        size_t k = 0;

        while (k < want && k < max) {
                PlanMachine *best = NULL;

                for (size_t i = 0; i < n_m; i++)
                        if (!m[i].draining && m[i].next_start < m[i].n_starts &&
                            (!best || start_before(strategy, &m[i], best)))
                                best = &m[i];
                if (!best)
                        break;
                actions[k] = (size_t) (order[best->starts[best->next_start++]] - slots);
                kinds[k++] = SCALER_START;
                best->running++;
                best->free++;
        }
        return k;
}

static size_t plan_stops(PlacementStrategy strategy, PlanMachine *m, size_t n_m,
                         const ScalerSlot **order, const ScalerSlot *slots, size_t want,
                         size_t *actions, ScalerAction *kinds, size_t max) {
        size_t k = 0;

        while (k < want && k < max) {
                PlanMachine *best = NULL;

                for (size_t i = 0; i < n_m; i++)
                        if (m[i].next_stop < m[i].n_stops &&
                            (!best || stop_before(strategy, &m[i], best)))
                                best = &m[i];
                if (!best)
                        break;
                actions[k] = (size_t) (order[best->stops[best->next_stop++]] - slots);
                kinds[k++] = SCALER_STOP;
                best->running--;
                best->free--;
        }
        return k;
}

/* A machine's stops: those not ready first, then the highest slot id first. */
static void machine_order_stops(PlanMachine *m, const ScalerSlot **order) {
        size_t w = 0, *tmp = m->stops;

        /* stops[] holds ascending slot ids: reversed, then the not-ready ones moved ahead,
         * keeping the order within each group */
        for (size_t i = 0; i < m->n_stops / 2; i++) {
                size_t t = tmp[i];
                tmp[i] = tmp[m->n_stops - 1 - i];
                tmp[m->n_stops - 1 - i] = t;
        }
        for (size_t i = 0; i < m->n_stops; i++)
                if (!order[tmp[i]]->ready) {
                        size_t t = tmp[i];
                        memmove(tmp + w + 1, tmp + w, (i - w) * sizeof(*tmp));
                        tmp[w++] = t;
                }
}

/* The machines of the sorted slots, with their counts and candidates (idx: 2n spare). */
static size_t plan_machines(const ScalerSlot **order, size_t n, PlanMachine *m, size_t *idx,
                            ScalerCount *c) {
        size_t n_m = 0, used = 0;

        for (size_t i = 0; i < n; i++) {
                const ScalerSlot *s = order[i];
                PlanMachine *cur;

                if (n_m == 0 || !streq(m[n_m - 1].id, s->machine_id)) {
                        size_t j = i;
                        size_t k = 0;

                        while (j < n && streq(order[j]->machine_id, s->machine_id))
                                j++, k++;
                        m[n_m] = (PlanMachine) { .id = s->machine_id, .draining = s->draining,
                                                 .load = s->machine_load,
                                                 .starts = idx + used,
                                                 .stops = idx + used + k };
                        used += 2 * k;
                        n_m++;
                }
                cur = &m[n_m - 1];
                count_slot(s, c, cur);
                if (s->pending != SCALER_NONE)
                        continue;
                if (s->kind == SCALER_STOPPED)
                        cur->starts[cur->n_starts++] = i;
                else if (s->kind == SCALER_FREE)
                        cur->stops[cur->n_stops++] = i;
        }
        for (size_t i = 0; i < n_m; i++)
                machine_order_stops(&m[i], order);
        return n_m;
}

uint32_t scaler_wanted(const ScalerTarget *t, uint32_t busy) {
        uint64_t w = (uint64_t) busy + t->buffer;

        if (w < t->floor)
                w = t->floor;
        if (w > t->ceiling)
                w = t->ceiling;
        return (uint32_t) w;
}

size_t scaler_plan(const ScalerTarget *target, PlacementStrategy strategy,
                   const ScalerSlot *slots, size_t n, size_t *actions, ScalerAction *kinds,
                   size_t max, ScalerCount *ret_count) {
        _cleanup_free_ const ScalerSlot **order = n > 0 ? calloc(n, sizeof(*order)) : NULL;
        _cleanup_free_ PlanMachine *m = n > 0 ? calloc(n, sizeof(*m)) : NULL;
        _cleanup_free_ size_t *idx = n > 0 ? calloc(2 * n, sizeof(*idx)) : NULL;
        ScalerCount c = {};
        size_t n_m, k = 0;

        if (n > 0 && (!order || !m || !idx))
                max = 0, n = 0; /* no memory: no action, counted as empty */
        for (size_t i = 0; i < n; i++)
                order[i] = &slots[i];
        if (n > 0)
                qsort(order, n, sizeof(*order), slot_compare);
        n_m = plan_machines(order, n, m, idx, &c);
        c.running = c.busy + c.free;
        c.wanted = target ? scaler_wanted(target, c.busy) : c.running;
        if (target && c.running < c.wanted)
                k = plan_starts(strategy, m, n_m, order, slots, c.wanted - c.running, actions,
                                kinds, max);
        else if (target && c.running > c.wanted)
                k = plan_stops(strategy, m, n_m, order, slots,
                               MIN(c.running - c.wanted, c.free), actions, kinds, max);
        if (ret_count)
                *ret_count = c;
        return k;
}
