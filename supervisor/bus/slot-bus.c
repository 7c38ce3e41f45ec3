/* SPDX-License-Identifier: MIT */
#include "log.h"
#include "bus-door.h"
#include "ops.h"
#include "strv.h"
#include "wallclock.h"

#define DEFINE_SLOT_GETTER(name, sig, expr)                                                    \
        static int property_get_##name(sd_bus *bus, const char *path, const char *interface,   \
                                       const char *property, sd_bus_message *reply,            \
                                       void *userdata, sd_bus_error *error) {                  \
                Slot *s = bus_slot_get(userdata);                                              \
                return sd_bus_message_append(reply, sig, expr);                                \
        }

DEFINE_SLOT_GETTER(id, "u", s->id)
DEFINE_SLOT_GETTER(port, "q", s->port)
DEFINE_SLOT_GETTER(query_port, "q", s->query_port)
DEFINE_SLOT_GETTER(restarts, "u", s->restarts)
DEFINE_SLOT_GETTER(last_exit_code, "i", s->last_exit_code)
DEFINE_SLOT_GETTER(last_exit_signal, "i", s->last_exit_signal)
DEFINE_SLOT_GETTER(fleet, "s", s->fleet->config->name)
DEFINE_SLOT_GETTER(region_id, "s", s->fleet->config->region_id)
DEFINE_SLOT_GETTER(state, "s", slot_state_to_string(slot_state(s)))
DEFINE_SLOT_GETTER(process_state, "s", process_state_to_string(s->process_state))
DEFINE_SLOT_GETTER(failure_reason, "s", failure_reason_to_string(s->failure))
DEFINE_SLOT_GETTER(allocation_uuid, "s", strempty(s->allocation_uuid))
DEFINE_SLOT_GETTER(build_configuration, "s", s->build_configuration)
DEFINE_SLOT_GETTER(main_pid, "u", (uint32_t) slot_server_pid(s))
DEFINE_SLOT_GETTER(cgroup, "s", s->cgroup_path)
DEFINE_SLOT_GETTER(home, "s", s->home)
DEFINE_SLOT_GETTER(cpu_budget, "d", s->fleet->config->usage_cpu)
DEFINE_SLOT_GETTER(memory_budget, "t", s->fleet->config->usage_memory)
DEFINE_SLOT_GETTER(cpu_usage, "d", slot_cpu_usage(s))
DEFINE_SLOT_GETTER(memory_current, "t", slot_memory_current(s))
DEFINE_SLOT_GETTER(log_bytes_lost, "t", slot_log_bytes_lost(s))
DEFINE_SLOT_GETTER(ready, "b", (int) s->ready)
DEFINE_SLOT_GETTER(ready_for_players, "b", (int) s->ready_for_players)
DEFINE_SLOT_GETTER(status, "s", strempty(s->status))
DEFINE_SLOT_GETTER(last_check_error, "s", strempty(s->last_check_error))
DEFINE_SLOT_GETTER(last_core_dump, "s", strempty(s->last_core))
DEFINE_SLOT_GETTER(query_players, "u", s->query ? (uint32_t) s->query->players : 0)
DEFINE_SLOT_GETTER(query_max_players, "u", s->query ? (uint32_t) s->query->max_players : 0)
DEFINE_SLOT_GETTER(query_map, "s", s->query ? s->query->map : "")
DEFINE_SLOT_GETTER(query_name, "s", s->query ? s->query->name : "")
/* Kept on CLOCK_BOOTTIME, shown as the wall clock reads them (wallclock.h). */
DEFINE_SLOT_GETTER(started_at, "t", (uint64_t) boottime_to_wall(s->started_at))
DEFINE_SLOT_GETTER(hold_until, "t", (uint64_t) boottime_to_wall(s->hold_until))
DEFINE_SLOT_GETTER(reserved_until, "t", (uint64_t) boottime_to_wall(s->reserved_until))

/* The strikes of each check within checks.window, now. */
static int property_get_strikes(sd_bus *bus, const char *path, const char *interface,
                                const char *property, sd_bus_message *reply, void *userdata,
                                sd_bus_error *error) {
        Slot *s = bus_slot_get(userdata);
        int r = sd_bus_message_open_container(reply, 'a', "(su)");

        for (int k = 0; r >= 0 && k < _CHECK_KIND_MAX; k++) {
                unsigned n = slot_strike_count(s, k);
                if (n > 0)
                        r = sd_bus_message_append(reply, "(su)", check_kind_to_string(k), n);
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

/* The build configuration IDs its fleet runs: its [build_configuration ID] sections' (the
 * default's first); none when it has no section (it runs any ID asked, SPEC §2). */
static int property_get_build_configurations(sd_bus *bus, const char *path,
                                             const char *interface, const char *property,
                                             sd_bus_message *reply, void *userdata,
                                             sd_bus_error *error) {
        const FleetConfig *f = bus_slot_get(userdata)->fleet->config;
        int r = sd_bus_message_open_container(reply, 'a', "s");

        for (size_t i = 0; r >= 0 && !fleet_config_runs_any_build(f) && i < f->n_build_configs;
             i++)
                r = sd_bus_message_append(reply, "s", f->build_configs[i].id);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}



static int allocate(sd_bus_message *msg, BusSlot *bs, sd_bus_message_handler_t handler,
                    bool with_options, sd_bus_error *error) {
        Slot *s = bus_slot_get(bs);
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        usec_t started = now_usec(CLOCK_MONOTONIC);
        OpsAllocation a = {};
        OpsCaller c;
        OpsStatus st;
        int r = bus_caller(msg, bs->door, handler, s->id, &c, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = sd_bus_message_read(msg, "ss", &a.uuid, &a.build_configuration);
        if (r < 0)
                return r;
        if (with_options && (r = bus_read_allocate_options(msg, &a, error)) < 0)
                return r;
        r = ops_slot_allocate(bs->door->manager, &c, s->id, &a, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        return bus_reply_durable_timed(bs->door->manager, msg, reply, METRICS_REQUEST_ALLOCATE,
                                           started);
}

static int method_allocate(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return allocate(msg, userdata, method_allocate, false, error);
}

static int method_allocate_with_options(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return allocate(msg, userdata, method_allocate_with_options, true, error);
}

static int method_deallocate(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusSlot *bs = userdata;
        Slot *s = bus_slot_get(bs);
        OpsCaller c;
        OpsStatus st;
        int r = bus_caller(msg, bs->door, method_deallocate, s->id, &c, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = ops_slot_deallocate(bs->door->manager, &c, s->id, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        return bus_reply_empty_durable(msg, bs->door->manager);
}

static int method_hold(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        BusSlot *bs = userdata;
        Slot *s = bus_slot_get(bs);
        uint64_t timeout;
        usec_t until;
        OpsCaller c;
        OpsStatus st;
        int r = bus_caller(msg, bs->door, method_hold, s->id, &c, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = sd_bus_message_read(msg, "t", &timeout);
        if (r < 0)
                return r;
        r = ops_hold(bs->door->manager, &c, s->id, timeout, &until, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "t", (uint64_t) until);
        if (r < 0)
                return r;
        return bus_reply_durable(bs->door->manager, msg, reply);
}

static int method_release_hold(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusSlot *bs = userdata;
        Slot *s = bus_slot_get(bs);
        OpsCaller c;
        OpsStatus st;
        int r = bus_caller(msg, bs->door, method_release_hold, s->id, &c, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = ops_release_hold(bs->door->manager, &c, s->id, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        return bus_reply_empty_durable(msg, bs->door->manager);
}

/* Start, Stop, StopIfFree, Restart, ResetFailed: no arguments, no answer but done or the error. */
static int slot_manage(sd_bus_message *msg, BusSlot *bs, sd_bus_message_handler_t handler,
                       int (*op)(Manager *m, const OpsCaller *c, unsigned slot_id, OpsStatus *st),
                       sd_bus_error *error) {
        OpsCaller c;
        OpsStatus st;
        int r = bus_caller(msg, bs->door, handler, bs->id, &c, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = op(bs->door->manager, &c, bs->id, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_start(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return slot_manage(msg, userdata, method_start, ops_slot_start, error);
}

static int method_stop(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return slot_manage(msg, userdata, method_stop, ops_slot_stop, error);
}

static int method_stop_if_free(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return slot_manage(msg, userdata, method_stop_if_free, ops_slot_stop_if_free, error);
}

static int method_restart(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return slot_manage(msg, userdata, method_restart, ops_slot_restart, error);
}

static int method_reset_failed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return slot_manage(msg, userdata, method_reset_failed, ops_slot_reset_failed, error);
}

const sd_bus_vtable slot_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "u", property_get_id, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Fleet", "s", property_get_fleet, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        /* A new region restarts the fleet's servers (Reload), which announces it. */
        SD_BUS_PROPERTY("RegionID", "s", property_get_region_id, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("State", "s", property_get_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("ProcessState", "s", property_get_process_state, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("FailureReason", "s", property_get_failure_reason, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("AllocationUUID", "s", property_get_allocation_uuid, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("BuildConfiguration", "s", property_get_build_configuration, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        /* A change comes with a Reload, which announces the slot's state. */
        SD_BUS_PROPERTY("BuildConfigurations", "as", property_get_build_configurations, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MainPID", "u", property_get_main_pid, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Cgroup", "s", property_get_cgroup, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Home", "s", property_get_home, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Port", "q", property_get_port, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("QueryPort", "q", property_get_query_port, 0,
                        SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("CPUBudget", "d", property_get_cpu_budget, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MemoryBudget", "t", property_get_memory_budget, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        /* Live figures: read on demand, never announced. */
        SD_BUS_PROPERTY("CPUUsage", "d", property_get_cpu_usage, 0, 0),
        SD_BUS_PROPERTY("MemoryCurrent", "t", property_get_memory_current, 0, 0),
        SD_BUS_PROPERTY("LogBytesLost", "t", property_get_log_bytes_lost, 0, 0),
        SD_BUS_PROPERTY("Restarts", "u", property_get_restarts, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("LastExitCode", "i", property_get_last_exit_code, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("LastExitSignal", "i", property_get_last_exit_signal, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("LastCoreDump", "s", property_get_last_core_dump, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Ready", "b", property_get_ready, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("ReadyForPlayers", "b", property_get_ready_for_players, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Status", "s", property_get_status, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Strikes", "a(su)", property_get_strikes, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("LastCheckError", "s", property_get_last_check_error, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("QueryPlayers", "u", property_get_query_players, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("QueryMaxPlayers", "u", property_get_query_max_players, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("QueryMap", "s", property_get_query_map, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("QueryName", "s", property_get_query_name, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("StartedAtUSec", "t", property_get_started_at, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("HoldUntilUSec", "t", property_get_hold_until, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("ReservedUntilUSec", "t", property_get_reserved_until, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD("Start", NULL, NULL, method_start, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Stop", NULL, NULL, method_stop, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("StopIfFree", NULL, NULL, method_stop_if_free, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Restart", NULL, NULL, method_restart, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("ResetFailed", NULL, NULL, method_reset_failed, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Allocate", SD_BUS_ARGS("s", uuid, "s", build_configuration),
                                SD_BUS_NO_RESULT, method_allocate, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("AllocateWithOptions",
                                SD_BUS_ARGS("s", uuid, "s", build_configuration, "a{sv}", options),
                                SD_BUS_NO_RESULT, method_allocate_with_options,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Deallocate", NULL, NULL, method_deallocate, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Hold", SD_BUS_ARGS("t", timeout_usec), SD_BUS_RESULT("t", until_usec),
                                method_hold, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("ReleaseHold", NULL, NULL, method_release_hold, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

BusSlot *bus_door_slot(BusDoor *d, unsigned id) {
        if (id >= d->n_slots) {
                size_t n = MAX((size_t) id + 1, d->n_slots * 2);
                BusSlot **slots = reallocarray(d->slots, n, sizeof(BusSlot *));

                if (!slots)
                        return NULL;
                memset(slots + d->n_slots, 0, (n - d->n_slots) * sizeof(BusSlot *));
                d->slots = slots;
                d->n_slots = n;
        }
        if (!d->slots[id]) {
                d->slots[id] = new0(BusSlot, 1);
                if (!d->slots[id])
                        return NULL;
                /* What the bus last heard of the slot: as slot_new() makes it. */
                *d->slots[id] = (BusSlot){ .door = d, .id = id, .announced_state = SLOT_AVAILABLE,
                                           .announced_process_state = PROCESS_STOPPED };
        }
        return d->slots[id];
}

Slot *bus_slot_get(const BusSlot *bs) {
        return manager_get_slot(bs->door->manager, bs->id);
}

/* /org/slotd/Supervisor1/slot/<id>, <id> a plain decimal with no leading zeros: the door's
 * record of the slot (BusSlot), on which the slot's methods and properties run. */
int slot_bus_find(sd_bus *bus, const char *path, const char *interface, void *userdata,
                  void **ret_found, sd_bus_error *error) {
        BusDoor *d = userdata;
        const char *p;
        unsigned long id;
        BusSlot *bs;
        char *end;

        if (strncmp(path, BUS_SLOT_PREFIX "/", strlen(BUS_SLOT_PREFIX) + 1) != 0)
                return 0;
        p = path + strlen(BUS_SLOT_PREFIX) + 1;
        if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '\0'))
                return 0;
        errno = 0;
        id = strtoul(p, &end, 10);
        if (errno != 0 || *end != '\0' || id > UINT32_MAX)
                return 0;
        if (!manager_get_slot(d->manager, (unsigned) id))
                return 0;
        bs = bus_door_slot(d, (unsigned) id);
        if (!bs)
                return -ENOMEM;
        *ret_found = bs;
        return 1;
}

int slot_bus_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***ret_nodes,
                       sd_bus_error *error) {
        _cleanup_strv_free_ char **nodes = calloc(1, sizeof(char *));
        Manager *m = ((BusDoor *) userdata)->manager;
        int r;

        if (!nodes)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_slots; i++) {
                if (!m->slots[i])
                        continue;
                r = strv_extend(&nodes, BUS_SLOT_PATH(m->slots[i]->id));
                if (r < 0)
                        return r;
        }
        *ret_nodes = TAKE_PTR(nodes);
        return 0;
}
