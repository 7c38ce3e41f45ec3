/* SPDX-License-Identifier: MIT */
#include <grp.h>
#include <stdarg.h>
#include <limits.h>

#include "cgroup.h"
#include "log.h"
#include "bus-door.h"
#include "ops.h"
#include "slotd-config.h"
#include "strv.h"
#include "wallclock.h"

static int method_list_slots(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        BusDoor *d = userdata;
        Manager *m = d->manager;
        int r;

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ussssso)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_slots; i++) {
                Slot *s = m->slots[i];
                if (!s)
                        continue;
                r = sd_bus_message_append(reply, "(ussssso)", s->id, s->fleet->config->name,
                                          slot_state_to_string(slot_state(s)),
                                          process_state_to_string(s->process_state),
                                          strempty(s->allocation_uuid), s->build_configuration,
                                          BUS_SLOT_PATH(s->id));
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_slot(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        OpsStatus st;
        uint32_t id;
        Slot *s;
        int r;

        r = sd_bus_message_read(msg, "u", &id);
        if (r < 0)
                return r;
        r = ops_find_slot(m, id, &s, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        return sd_bus_reply_method_return(msg, "o", BUS_SLOT_PATH(s->id));
}

static int method_reexecute(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        int r = bus_check_admin(msg, d, method_reexecute, UINT_MAX, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        /* The reply goes out first: the connection closes with the exec. */
        r = sd_bus_reply_method_return(msg, NULL);
        if (r < 0)
                return r;
        (void) sd_bus_flush(d->bus);
        r = manager_request_reexecute(m);
        if (r < 0)
                log_error_errno(r, "Cannot re-execute, state not durable: %m");
        return 1;
}

static int method_stop_all(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        OpsCaller c;
        OpsStatus st;
        int r = bus_caller(msg, d, method_stop_all, UINT_MAX, &c, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = ops_stop_all(m, &c, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        return sd_bus_reply_method_return(msg, NULL);
}

static int property_get_machine_id(sd_bus *bus, const char *path, const char *interface,
                                   const char *property, sd_bus_message *reply, void *userdata,
                                   sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        return sd_bus_message_append(reply, "s", m->machine_id);
}

static int property_get_machine_number(sd_bus *bus, const char *path, const char *interface,
                                       const char *property, sd_bus_message *reply,
                                       void *userdata, sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        return sd_bus_message_append(reply, "t", m->machine_number);
}

static int property_get_cpus(sd_bus *bus, const char *path, const char *interface,
                             const char *property, sd_bus_message *reply, void *userdata,
                             sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        return sd_bus_message_append(reply, "d", m->resources.cpus);
}

static int property_get_memory(sd_bus *bus, const char *path, const char *interface,
                               const char *property, sd_bus_message *reply, void *userdata,
                               sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        return sd_bus_message_append(reply, "t", m->resources.memory);
}

static int property_get_fleets(sd_bus *bus, const char *path, const char *interface,
                               const char *property, sd_bus_message *reply, void *userdata,
                               sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        int r = sd_bus_message_open_container(reply, 'a', "s");

        for (size_t i = 0; r >= 0 && i < m->n_fleets; i++)
                if (!m->fleets[i]->retired)
                        r = sd_bus_message_append(reply, "s", m->fleets[i]->config->name);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int property_get_faults(sd_bus *bus, const char *path, const char *interface,
                               const char *property, sd_bus_message *reply, void *userdata,
                               sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        int r = sd_bus_message_open_container(reply, 'a', "s");

        for (size_t i = 0; r >= 0 && i < m->n_faults; i++) {
                _cleanup_free_ char *line = NULL;
                if (asprintf(&line, "%s: %s", m->faults[i].key, m->faults[i].message) < 0)
                        return -ENOMEM;
                r = sd_bus_message_append(reply, "s", line);
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int property_get_slot_count(sd_bus *bus, const char *path, const char *interface,
                                   const char *property, sd_bus_message *reply, void *userdata,
                                   sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        return sd_bus_message_append(reply, "u", (uint32_t) m->n_live_slots);
}

static int property_get_enforcement(sd_bus *bus, const char *path, const char *interface,
                                    const char *property, sd_bus_message *reply, void *userdata,
                                    sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        int r = sd_bus_message_open_container(reply, 'a', "s");

        for (int c = 0; r >= 0 && c < _CGROUP_CONTROLLER_MAX; c++)
                if (m->enforced & CGROUP_MASK(c))
                        r = sd_bus_message_append(reply, "s", cgroup_controller_to_string(c));
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int property_get_ipv4(sd_bus *bus, const char *path, const char *interface,
                             const char *property, sd_bus_message *reply, void *userdata,
                             sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        return sd_bus_message_append(reply, "s", m->ip);
}

static int property_get_ipv6(sd_bus *bus, const char *path, const char *interface,
                             const char *property, sd_bus_message *reply, void *userdata,
                             sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        return sd_bus_message_append(reply, "s", m->ipv6);
}

static int property_get_version(sd_bus *bus, const char *path, const char *interface,
                                const char *property, sd_bus_message *reply, void *userdata,
                                sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", SLOTD_VERSION);
}

typedef struct BusReply {
        sd_bus_message *call;
        sd_bus_message *reply;
        MetricsRequest request;
        usec_t started;              /* 0: not timed */
} BusReply;

static void bus_reply_done(Manager *m, int error, void *userdata) {
        BusReply *b = userdata;

        if (error < 0)
                (void) sd_bus_reply_method_errnof(b->call, error,
                                                  "Failed to make the change durable: %m");
        else if (error == 0) {
                (void) sd_bus_send(NULL, b->reply, NULL);
                if (b->started > 0)
                        manager_metrics_replied(m, METRICS_DOOR_DBUS, b->request, b->started);
        }
        sd_bus_message_unref(b->call);
        sd_bus_message_unref(b->reply);
        free(b);
}

int bus_reply_durable(Manager *m, sd_bus_message *call, sd_bus_message *reply) {
        return bus_reply_durable_timed(m, call, reply, 0, 0);
}

int bus_reply_durable_timed(Manager *m, sd_bus_message *call, sd_bus_message *reply,
                            MetricsRequest request, usec_t started) {
        BusReply *b = new0(BusReply, 1);
        int r;

        if (!b)
                return -ENOMEM;
        *b = (BusReply){ sd_bus_message_ref(call), sd_bus_message_ref(reply), request, started };
        r = manager_when_durable(m, bus_reply_done, b);
        if (r < 0) {
                sd_bus_message_unref(b->call);
                sd_bus_message_unref(b->reply);
                free(b);
        }
        return r;
}

/* Replies (u id, o path) once the change is durable. */
int bus_reply_slot_durable(sd_bus_message *msg, Manager *m, Slot *s) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = sd_bus_message_new_method_return(msg, &reply);

        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "uo", s->id, BUS_SLOT_PATH(s->id));
        if (r < 0)
                return r;
        return bus_reply_durable(m, msg, reply);
}

/* bus_reply_slot_durable() for a request the metrics time from its arrival at 'started'. */
static int reply_slot_timed(sd_bus_message *msg, Manager *m, Slot *s, MetricsRequest request,
                            usec_t started) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = sd_bus_message_new_method_return(msg, &reply);

        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "uo", s->id, BUS_SLOT_PATH(s->id));
        if (r < 0)
                return r;
        return bus_reply_durable_timed(m, msg, reply, request, started);
}

int bus_reply_empty_durable(sd_bus_message *msg, Manager *m) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = sd_bus_message_new_method_return(msg, &reply);

        if (r < 0)
                return r;
        return bus_reply_durable(m, msg, reply);
}

static int read_option_payload(sd_bus_message *msg, OpsAllocation *a, sd_bus_error *error) {
        int r = sd_bus_message_enter_container(msg, 'v', "ay");

        if (r < 0)
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "InvalidArgument",
                                         "The option 'payload' is an array of bytes (ay)");
        r = sd_bus_message_read_array(msg, 'y', &a->payload, &a->payload_size);
        if (r < 0)
                return r;
        if (!a->payload)
                a->payload = ""; /* an empty payload is a payload */
        return sd_bus_message_exit_container(msg);
}

static int read_option_bool(sd_bus_message *msg, const char *key, bool *ret,
                            sd_bus_error *error) {
        int b, r = sd_bus_message_enter_container(msg, 'v', "b");

        if (r < 0)
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "InvalidArgument",
                                         "The option '%s' is a boolean (b)", key);
        r = sd_bus_message_read(msg, "b", &b);
        if (r < 0)
                return r;
        *ret = b;
        return sd_bus_message_exit_container(msg);
}

/* The options of AllocateWithOptions: "payload" (ay), "draining" (b: let through while the
 * machine is draining, a fleet allocator's last resort) and "restart" (b: the server restarts
 * into the allocation's build configuration, even the one it runs). Unknown options are refused,
 * so that a caller learns at once that this slotd does not know one. */
int bus_read_allocate_options(sd_bus_message *msg, OpsAllocation *a, sd_bus_error *error) {
        const char *key;
        int r;

        r = sd_bus_message_enter_container(msg, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(msg, 'e', "sv")) > 0) {
                r = sd_bus_message_read(msg, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "payload"))
                        r = read_option_payload(msg, a, error);
                else if (streq(key, "draining"))
                        r = read_option_bool(msg, key, &a->draining_ok, error);
                else if (streq(key, "restart"))
                        r = read_option_bool(msg, key, &a->restart, error);
                else
                        return sd_bus_error_setf(error, BUS_ERROR_PREFIX "InvalidArgument",
                                                 "Unknown allocation option '%s'", key);
                if (r < 0 || (r = sd_bus_message_exit_container(msg)) < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(msg);
}

static int allocate(sd_bus_message *msg, BusDoor *d, sd_bus_message_handler_t handler,
                    bool with_options, sd_bus_error *error) {
        Manager *m = d->manager;
        usec_t started = now_usec(CLOCK_MONOTONIC);
        OpsAllocation a = {};
        const char *fleet;
        OpsCaller c;
        OpsStatus st;
        Slot *s;
        int r = bus_caller(msg, d, handler, UINT_MAX, &c, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = sd_bus_message_read(msg, "sss", &fleet, &a.uuid, &a.build_configuration);
        if (r < 0)
                return r;
        if (with_options && (r = bus_read_allocate_options(msg, &a, error)) < 0)
                return r;
        r = ops_allocate(m, &c, fleet, &a, &s, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        return reply_slot_timed(msg, m, s, METRICS_REQUEST_ALLOCATE, started);
}

static int method_allocate(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return allocate(msg, userdata, method_allocate, false, error);
}

static int method_allocate_with_options(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return allocate(msg, userdata, method_allocate_with_options, true, error);
}

static int method_deallocate(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        const char *uuid;
        OpsCaller c;
        OpsStatus st;
        int r = bus_caller(msg, d, method_deallocate, UINT_MAX, &c, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = sd_bus_message_read(msg, "s", &uuid);
        if (r < 0)
                return r;
        r = ops_deallocate(m, &c, uuid, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        return bus_reply_empty_durable(msg, m);
}

static int method_reserve(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        usec_t started = now_usec(CLOCK_MONOTONIC);
        BusDoor *d = userdata;
        Manager *m = d->manager;
        const char *fleet, *uuid;
        uint64_t timeout;
        OpsCaller c;
        OpsStatus st;
        Slot *s;
        int r = bus_caller(msg, d, method_reserve, UINT_MAX, &c, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = sd_bus_message_read(msg, "sst", &fleet, &uuid, &timeout);
        if (r < 0)
                return r;
        r = ops_reserve(m, &c, fleet, uuid, timeout, &s, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        return reply_slot_timed(msg, m, s, METRICS_REQUEST_RESERVE, started);
}

static int method_set_draining(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        OpsCaller c;
        OpsStatus st;
        int b, r;

        r = bus_caller(msg, d, method_set_draining, UINT_MAX, &c, error);
        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = sd_bus_message_read(msg, "b", &b);
        if (r < 0)
                return r;
        r = ops_set_draining(m, &c, b, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        return bus_reply_empty_durable(msg, m);
}

static int method_reload(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusDoor *d = userdata;
        Manager *m = d->manager;
        OpsCaller c;
        OpsStatus st;
        int r;

        r = bus_caller(msg, d, method_reload, UINT_MAX, &c, error);
        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = ops_reload(m, &c, &st);
        if (r < 0)
                return bus_error_from_ops(error, r, &st);
        return bus_reply_empty_durable(msg, m);
}

#define DEFINE_MANAGER_GETTER(name, sig, expr)                                                 \
        static int property_get_##name(sd_bus *bus, const char *path, const char *interface,   \
                                       const char *property, sd_bus_message *reply,            \
                                       void *userdata, sd_bus_error *error) {                  \
                Manager *m = ((BusDoor *) userdata)->manager;                                  \
                return sd_bus_message_append(reply, sig, expr);                                \
        }

DEFINE_MANAGER_GETTER(draining, "b", (int) m->draining)
/* Moments are kept on CLOCK_BOOTTIME and shown as the wall clock reads them (wallclock.h). */
DEFINE_MANAGER_GETTER(idle_since, "t", (uint64_t) boottime_to_wall(m->idle_since))
DEFINE_MANAGER_GETTER(hold_until, "t", (uint64_t) boottime_to_wall(m->hold_until))
DEFINE_MANAGER_GETTER(deprovisionable, "b", (int) m->deprovisionable)

const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("MachineID", "s", property_get_machine_id, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("MachineNumber", "t", property_get_machine_number, 0,
                        SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("IPv4", "s", property_get_ipv4, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("IPv6", "s", property_get_ipv6, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("CPUs", "d", property_get_cpus, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MemoryBytes", "t", property_get_memory, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Fleets", "as", property_get_fleets, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("SlotCount", "u", property_get_slot_count, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Enforcement", "as", property_get_enforcement, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Draining", "b", property_get_draining, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("IdleSinceUSec", "t", property_get_idle_since, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("HoldUntilUSec", "t", property_get_hold_until, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Deprovisionable", "b", property_get_deprovisionable, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Faults", "as", property_get_faults, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_ARGS("Allocate", SD_BUS_ARGS("s", fleet, "s", uuid, "s", build_configuration),
                                SD_BUS_RESULT("u", id, "o", path), method_allocate,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("AllocateWithOptions",
                                SD_BUS_ARGS("s", fleet, "s", uuid, "s", build_configuration,
                                            "a{sv}", options),
                                SD_BUS_RESULT("u", id, "o", path), method_allocate_with_options,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Deallocate", SD_BUS_ARGS("s", uuid), SD_BUS_NO_RESULT,
                                method_deallocate, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Reserve", SD_BUS_ARGS("s", fleet, "s", uuid, "t", timeout_usec),
                                SD_BUS_RESULT("u", id, "o", path), method_reserve,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetDraining", SD_BUS_ARGS("b", draining), SD_BUS_NO_RESULT,
                                method_set_draining, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Reload", NULL, NULL, method_reload, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListSlots", SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(ussssso)", slots), method_list_slots,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetSlot", SD_BUS_ARGS("u", id), SD_BUS_RESULT("o", path),
                                method_get_slot, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("StopAll", NULL, NULL, method_stop_all, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Reexecute", NULL, NULL, method_reexecute, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("SlotChanged",
                                SD_BUS_ARGS("u", id, "s", state, "s", process_state), 0),
        SD_BUS_SIGNAL_WITH_ARGS("Crashed",
                                SD_BUS_ARGS("u", id, "i", code, "i", signal, "s", reason), 0),
        SD_BUS_SIGNAL_WITH_ARGS("CoreDumped", SD_BUS_ARGS("u", id, "i", signal, "s", where), 0),
        SD_BUS_SIGNAL("Deprovisionable", NULL, 0),
        SD_BUS_SIGNAL_WITH_ARGS("Misbehaved", SD_BUS_ARGS("u", id, "s", check, "u", strikes), 0),
        SD_BUS_SIGNAL_WITH_ARGS("MachineFault",
                                SD_BUS_ARGS("s", fleet, "s", check, "u", failing, "u", checked), 0),
        SD_BUS_VTABLE_END,
};

const char *bus_slot_path(char buf[static BUS_SLOT_PATH_MAX], unsigned id) {
        (void) snprintf(buf, BUS_SLOT_PATH_MAX, BUS_SLOT_PREFIX "/%u", id);
        return buf;
}

/* The Manager's properties of each MachineChange, in the order they are announced: each its
 * own PropertiesChanged. */
static const struct {
        MachineChange change;
        const char *property;
} machine_properties[] = {
        { MACHINE_CHANGE_DRAINING, "Draining" },
        { MACHINE_CHANGE_IDLE_SINCE, "IdleSinceUSec" },
        { MACHINE_CHANGE_HOLD_UNTIL, "HoldUntilUSec" },
        { MACHINE_CHANGE_DEPROVISIONABLE, "Deprovisionable" },
        { MACHINE_CHANGE_FAULTS, "Faults" },
        { MACHINE_CHANGE_FLEETS, "Fleets" },
        { MACHINE_CHANGE_SLOT_COUNT, "SlotCount" },
        { MACHINE_CHANGE_CPUS, "CPUs" },
        { MACHINE_CHANGE_MEMORY, "MemoryBytes" },
};

void bus_door_machine_changed(Manager *m, unsigned changes, void *userdata) {
        BusDoor *d = userdata;

        if (!d->bus)
                return;
        for (size_t i = 0; i < ELEMENTSOF(machine_properties); i++)
                if (changes & machine_properties[i].change)
                        (void) sd_bus_emit_properties_changed(d->bus, BUS_PATH,
                                                              BUS_MANAGER_INTERFACE,
                                                              machine_properties[i].property,
                                                              NULL);
        /* The signal follows its property, once the machine became deprovisionable. */
        if ((changes & MACHINE_CHANGE_DEPROVISIONABLE) && m->deprovisionable)
                (void) sd_bus_emit_signal(d->bus, BUS_PATH, BUS_MANAGER_INTERFACE,
                                          "Deprovisionable", NULL);
}

/* The Slot's properties of each SlotChange, announced together. */
static const struct {
        SlotChange change;
        const char *properties[5];
} slot_properties[] = {
        { SLOT_CHANGE_READY_FOR_PLAYERS, { "ReadyForPlayers" } },
        { SLOT_CHANGE_STATUS, { "Status" } },
        { SLOT_CHANGE_STRIKES, { "Strikes" } },
        { SLOT_CHANGE_CHECK_ERROR, { "LastCheckError" } },
        { SLOT_CHANGE_QUERY, { "QueryPlayers", "QueryMaxPlayers", "QueryMap", "QueryName" } },
};

static void emit_slot_properties(BusDoor *d, Slot *s, unsigned changes) {
        const char *names[16];
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(slot_properties); i++)
                for (size_t j = 0; (changes & slot_properties[i].change) &&
                                   slot_properties[i].properties[j] && n < ELEMENTSOF(names) - 1; j++)
                        names[n++] = slot_properties[i].properties[j];
        names[n] = NULL;
        if (n > 0)
                (void) sd_bus_emit_properties_changed_strv(d->bus, BUS_SLOT_PATH(s->id),
                                                           BUS_SLOT_INTERFACE, (char **) names);
}

/* Its state as a whole: every property may have changed; SlotChanged when the state or the
 * process state differs from what the bus last heard. */
static void emit_slot_state(BusDoor *d, Slot *s) {
        SlotState state = slot_state(s);
        BusSlot *bs;
        int r;

        r = sd_bus_emit_properties_changed_strv(d->bus, BUS_SLOT_PATH(s->id), BUS_SLOT_INTERFACE,
                                                NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to emit PropertiesChanged for slot %u: %m", s->id);
        /* Out of memory, the door cannot tell what the bus heard: it tells it again. */
        bs = bus_door_slot(d, s->id);
        if (bs) {
                if (state == bs->announced_state && s->process_state == bs->announced_process_state)
                        return;
                bs->announced_state = state;
                bs->announced_process_state = s->process_state;
        }
        r = sd_bus_emit_signal(d->bus, BUS_PATH, BUS_MANAGER_INTERFACE, "SlotChanged", "uss", s->id,
                               slot_state_to_string(state),
                               process_state_to_string(s->process_state));
        if (r < 0)
                log_debug_errno(r, "Failed to emit SlotChanged for slot %u: %m", s->id);
}

void bus_door_slot_changed(Manager *m, Slot *s, unsigned changes, void *userdata) {
        BusDoor *d = userdata;

        if (!d->bus)
                return;
        if (changes == 0)
                emit_slot_state(d, s);
        else
                emit_slot_properties(d, s, changes);
}

void bus_door_misbehaved(Manager *m, Slot *s, CheckKind check, unsigned strikes,
                         void *userdata) {
        BusDoor *d = userdata;

        if (d->bus)
                (void) sd_bus_emit_signal(d->bus, BUS_PATH, BUS_MANAGER_INTERFACE, "Misbehaved", "usu",
                                          s->id, check_kind_to_string(check), strikes);
}

void bus_door_machine_fault(Manager *m, Fleet *f, CheckKind check, unsigned failing,
                            unsigned checked, void *userdata) {
        BusDoor *d = userdata;

        if (d->bus)
                (void) sd_bus_emit_signal(d->bus, BUS_PATH, BUS_MANAGER_INTERFACE, "MachineFault",
                                          "ssuu", f->config->name, check_kind_to_string(check),
                                          failing, checked);
}

void bus_door_slot_crashed(Manager *m, Slot *s, const char *reason, void *userdata) {
        BusDoor *d = userdata;

        if (!d->bus)
                return;
        (void) sd_bus_emit_signal(d->bus, BUS_PATH, BUS_MANAGER_INTERFACE, "Crashed", "uiis", s->id,
                                  s->exit_code, s->exit_signal, reason);
        /* Right after its Crashed: where the core of that crash is (slot-core.c). */
        if (s->exit_core)
                (void) sd_bus_emit_signal(d->bus, BUS_PATH, BUS_MANAGER_INTERFACE, "CoreDumped",
                                          "uis", s->id, s->exit_signal, strempty(s->last_core));
}
