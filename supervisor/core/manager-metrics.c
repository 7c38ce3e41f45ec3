/* SPDX-License-Identifier: MIT */
/* The machine's metrics (manager-metrics.h): metrics.c's counters fed from the manager's
 * hooks, and the text with what only the manager knows (faults, draining). */
#include "manager-metrics.h"
#include "manager.h"
#include "slotd-config.h"

/* Faults of the host (SPEC §12) shown at 0 while they are not raised, so that a query finds
 * them either way; the others (per check, per fleet) appear while raised. */
static const char *const fixed_faults[] = { "state_dir", "bus", "slots_dir", "cgroup", "fork" };

static FleetMetrics *slot_fleet_metrics(Manager *m, Slot *s) {
        return s->metrics.fleet ?: metrics_fleet(&m->metrics, s->fleet->config->name);
}

void manager_metrics_slot_changed(Manager *m, Slot *s) {
        if (s->retired_gone)
                return;
        metrics_slot_update(slot_fleet_metrics(m, s), &s->metrics,
                            &(SlotMetricsView){
                                    .state = slot_state(s),
                                    .process_state = s->process_state,
                                    .allocated = s->allocation_uuid != NULL,
                                    .restarts = s->restarts,
                                    .log_bytes_lost = s->log_bytes_lost,
                            });
}

void manager_metrics_slot_removed(Manager *m, Slot *s) {
        metrics_slot_remove(&s->metrics);
}

void manager_metrics_crashed(Manager *m, Slot *s, const char *reason) {
        for (FailureReason r = 0; r < _FAILURE_REASON_MAX; r++)
                if (streq(reason, failure_reason_to_string(r))) {
                        metrics_crash(slot_fleet_metrics(m, s), r, s->exit_signal, s->exit_core);
                        return;
                }
}

void manager_metrics_strike(Manager *m, Slot *s, CheckKind check) {
        metrics_strike(slot_fleet_metrics(m, s), check);
}

void manager_metrics_sweep(Manager *m, Fleet *f, usec_t duration) {
        metrics_sweep(metrics_fleet(&m->metrics, f->config->name), duration);
}

void manager_metrics_request(Manager *m, const char *fleet, MetricsRequest request,
                             OpsErrorCode result) {
        /* Only a fleet slotd runs gets a label of its own: a caller's made-up names must
         * not make series. */
        FleetMetrics *f = metrics_fleet_find(&m->metrics, fleet);

        if (!f && fleet && manager_find_fleet(m, fleet))
                f = metrics_fleet(&m->metrics, fleet);
        metrics_request(&m->metrics, f, request, result);
}

void manager_metrics_replied(Manager *m, MetricsDoor door, MetricsRequest request,
                             usec_t started) {
        usec_t now = now_usec(CLOCK_MONOTONIC);

        metrics_latency(&m->metrics, door, request, now > started ? now - started : 0);
}

static void format_faults(Manager *m, PromText *t) {
        prom_family(t, "slotd_faults_active", PROM_GAUGE,
                    "Faults of the host raised now (the Manager's Faults, SPEC 12).");
        prom_sample_u64(t, "slotd_faults_active", NULL, m->n_faults);
        prom_family(t, "slotd_fault_active", PROM_GAUGE,
                    "1 while the fault of the host under this key is raised.");
        for (size_t i = 0; i < ELEMENTSOF(fixed_faults); i++)
                prom_sample_u64(t, "slotd_fault_active",
                                (const char *[]){ "fault", fixed_faults[i], NULL },
                                manager_fault_active(m, fixed_faults[i]));
        for (size_t i = 0; i < m->n_faults; i++) {
                bool fixed = false;

                for (size_t j = 0; j < ELEMENTSOF(fixed_faults) && !fixed; j++)
                        fixed = streq(m->faults[i].key, fixed_faults[j]);
                if (!fixed)
                        prom_sample_u64(t, "slotd_fault_active",
                                        (const char *[]){ "fault", m->faults[i].key, NULL }, 1);
        }
}

static void format_machine(Manager *m, PromText *t) {
        prom_family(t, "slotd_info", PROM_GAUGE, "slotd's version and the machine's ID.");
        prom_sample_u64(t, "slotd_info",
                        (const char *[]){ "version", SLOTD_VERSION, "machine_id",
                                          strempty(m->machine_id), NULL },
                        1);
        prom_family(t, "slotd_draining", PROM_GAUGE, "1 while the machine is draining.");
        prom_sample_u64(t, "slotd_draining", NULL, m->draining);
        prom_family(t, "slotd_deprovisionable", PROM_GAUGE,
                    "1 while the machine is deprovisionable (SPEC 7).");
        prom_sample_u64(t, "slotd_deprovisionable", NULL, m->deprovisionable);
}

/* The live figures of each slot, as the Slot's CPUUsage, MemoryCurrent and QueryPlayers
 * show them (SPEC 14): the one part of a scrape that is O(slots), a pread per slot. */
static void format_slot_sample(PromText *t, const char *name, Slot *s, double v) {
        char id[16];

        snprintf(id, sizeof(id), "%u", s->id);
        prom_sample(t, name, (const char *[]){ "fleet", s->fleet->config->name, "slot", id, NULL },
                    v);
}

static void format_slot_gauges(Manager *m, PromText *t) {
        static const char *const names[] = { "slotd_slot_cpu_cores", "slotd_slot_memory_bytes",
                                             "slotd_slot_players", "slotd_slot_max_players" };
        static const char *const helps[] = {
                "Cores the slot's server used over the last interval (CPUUsage).",
                "Memory of the slot's cgroup, or of its server without the memory controller "
                "(MemoryCurrent).",
                "Players the server's last query answer named (QueryPlayers); only slots "
                "whose fleet queries.",
                "Most players the server's last query answer allowed (QueryMaxPlayers).",
        };
        char id[16];

        prom_family(t, "slotd_slot_info", PROM_GAUGE,
                    "1 for each slot, with its State and ProcessState (SPEC 5).");
        for (size_t i = 0; i < m->n_slots; i++) {
                Slot *s = m->slots[i];

                if (!s || s->retired_gone)
                        continue;
                snprintf(id, sizeof(id), "%u", s->id);
                prom_sample_u64(t, "slotd_slot_info",
                                (const char *[]){ "fleet", s->fleet->config->name, "slot", id,
                                                  "state", slot_state_to_string(slot_state(s)),
                                                  "process_state",
                                                  process_state_to_string(s->process_state),
                                                  NULL },
                                1);
        }
        for (size_t k = 0; k < ELEMENTSOF(names); k++) {
                prom_family(t, names[k], PROM_GAUGE, helps[k]);
                for (size_t i = 0; i < m->n_slots; i++) {
                        Slot *s = m->slots[i];

                        if (!s || s->retired_gone || (k >= 2 && !s->query))
                                continue;
                        format_slot_sample(t, names[k], s,
                                           k == 0 ? slot_cpu_usage(s) :
                                           k == 1 ? (double) slot_memory_current(s) :
                                           k == 2 ? (double) s->query->players :
                                                    (double) s->query->max_players);
                }
        }
}

int manager_metrics_format(Manager *m, char **ret, size_t *ret_size) {
        PromText t = {};

        format_machine(m, &t);
        metrics_format(&m->metrics, &t);
        format_slot_gauges(m, &t);
        format_faults(m, &t);
        return prom_text_take(&t, ret, ret_size);
}
