/* SPDX-License-Identifier: MIT */
#include <grp.h>

#include "cgroup.h"
#include "log.h"
#include "manager.h"
#include "slotd-config.h"
#include "strv.h"

/* Managing methods: root, or a member of supervisor.admin_group. The euid comes from the bus
 * (dbus-daemon reports the peer's credentials from SO_PEERCRED), never from /proc. */
int bus_check_admin(sd_bus_message *msg, Manager *m, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        const gid_t *gids = NULL;
        struct group *gr;
        gid_t egid;
        uid_t euid;
        int n, r;

        r = sd_bus_query_sender_creds(msg, SD_BUS_CREDS_EUID | SD_BUS_CREDS_EGID |
                                                   SD_BUS_CREDS_SUPPLEMENTARY_GIDS,
                                      &creds);
        if (r < 0)
                return r;
        r = sd_bus_creds_get_euid(creds, &euid);
        if (r >= 0 && euid == 0 && !(sd_bus_creds_get_augmented_mask(creds) & SD_BUS_CREDS_EUID))
                return 0;
        if (m->config->admin_group && (gr = getgrnam(m->config->admin_group))) {
                if (sd_bus_creds_get_egid(creds, &egid) >= 0 && egid == gr->gr_gid)
                        return 0;
                n = sd_bus_creds_get_supplementary_gids(creds, &gids);
                for (int i = 0; i < n; i++)
                        if (gids[i] == gr->gr_gid)
                                return 0;
        }
        return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                "Managing slots needs root or membership of supervisor.admin_group");
}

static int method_list_slots(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        int r;

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ussssso)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_slots; i++) {
                Slot *s = m->slots[i];
                r = sd_bus_message_append(reply, "(ussssso)", s->id, s->fleet->config->name,
                                          slot_state(s), process_state_to_string(s->process_state),
                                          strempty(s->allocation_uuid), s->build_configuration,
                                          s->object_path);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_slot(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        uint32_t id;
        Slot *s;
        int r;

        r = sd_bus_message_read(msg, "u", &id);
        if (r < 0)
                return r;
        s = manager_get_slot(m, id);
        if (!s)
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "NoSuchSlot", "No slot %u", id);
        return sd_bus_reply_method_return(msg, "o", s->object_path);
}

static int method_stop_all(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int r = bus_check_admin(msg, m, error);

        if (r < 0)
                return r;
        log_info("StopAll: stopping every slot");
        manager_stop_all(m);
        return sd_bus_reply_method_return(msg, NULL);
}

static int property_get_machine_id(sd_bus *bus, const char *path, const char *interface,
                                   const char *property, sd_bus_message *reply, void *userdata,
                                   sd_bus_error *error) {
        Manager *m = userdata;
        return sd_bus_message_append(reply, "s", m->machine_id);
}

static int property_get_cpus(sd_bus *bus, const char *path, const char *interface,
                             const char *property, sd_bus_message *reply, void *userdata,
                             sd_bus_error *error) {
        Manager *m = userdata;
        return sd_bus_message_append(reply, "d", m->resources.cpus);
}

static int property_get_memory(sd_bus *bus, const char *path, const char *interface,
                               const char *property, sd_bus_message *reply, void *userdata,
                               sd_bus_error *error) {
        Manager *m = userdata;
        return sd_bus_message_append(reply, "t", m->resources.memory);
}

static int property_get_fleets(sd_bus *bus, const char *path, const char *interface,
                               const char *property, sd_bus_message *reply, void *userdata,
                               sd_bus_error *error) {
        Manager *m = userdata;
        int r = sd_bus_message_open_container(reply, 'a', "s");

        for (size_t i = 0; r >= 0 && i < m->n_fleets; i++)
                r = sd_bus_message_append(reply, "s", m->fleets[i].config->name);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int property_get_slot_count(sd_bus *bus, const char *path, const char *interface,
                                   const char *property, sd_bus_message *reply, void *userdata,
                                   sd_bus_error *error) {
        Manager *m = userdata;
        return sd_bus_message_append(reply, "u", (uint32_t) m->n_slots);
}

static int property_get_enforcement(sd_bus *bus, const char *path, const char *interface,
                                    const char *property, sd_bus_message *reply, void *userdata,
                                    sd_bus_error *error) {
        Manager *m = userdata;
        int r = sd_bus_message_open_container(reply, 'a', "s");

        for (int c = 0; r >= 0 && c < _CGROUP_CONTROLLER_MAX; c++)
                if (m->enforced & CGROUP_MASK(c))
                        r = sd_bus_message_append(reply, "s", cgroup_controller_to_string(c));
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int property_get_version(sd_bus *bus, const char *path, const char *interface,
                                const char *property, sd_bus_message *reply, void *userdata,
                                sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", SLOTD_VERSION);
}

const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("MachineID", "s", property_get_machine_id, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("CPUs", "d", property_get_cpus, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MemoryBytes", "t", property_get_memory, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Fleets", "as", property_get_fleets, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("SlotCount", "u", property_get_slot_count, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Enforcement", "as", property_get_enforcement, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_ARGS("ListSlots", SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(ussssso)", slots), method_list_slots, 0),
        SD_BUS_METHOD_WITH_ARGS("GetSlot", SD_BUS_ARGS("u", id), SD_BUS_RESULT("o", path),
                                method_get_slot, 0),
        SD_BUS_METHOD("StopAll", NULL, NULL, method_stop_all, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("SlotChanged",
                                SD_BUS_ARGS("u", id, "s", state, "s", process_state), 0),
        SD_BUS_SIGNAL_WITH_ARGS("Crashed",
                                SD_BUS_ARGS("u", id, "i", code, "i", signal, "s", reason), 0),
        SD_BUS_VTABLE_END,
};

void manager_bus_slot_changed(Manager *m, Slot *s) {
        const char *state = slot_state(s);
        int r;

        if (!m->bus)
                return;
        r = sd_bus_emit_properties_changed_strv(m->bus, s->object_path, BUS_SLOT_INTERFACE, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to emit PropertiesChanged for slot %u: %m", s->id);
        if (streq(state, s->announced_state) && s->process_state == s->announced_process_state)
                return;
        s->announced_state = state;
        s->announced_process_state = s->process_state;
        r = sd_bus_emit_signal(m->bus, BUS_PATH, BUS_MANAGER_INTERFACE, "SlotChanged", "uss", s->id,
                               state, process_state_to_string(s->process_state));
        if (r < 0)
                log_debug_errno(r, "Failed to emit SlotChanged for slot %u: %m", s->id);
}

void manager_bus_slot_crashed(Manager *m, Slot *s, const char *reason) {
        int r;

        if (!m->bus)
                return;
        r = sd_bus_emit_signal(m->bus, BUS_PATH, BUS_MANAGER_INTERFACE, "Crashed", "uiis", s->id,
                               s->exit_code, s->exit_signal, reason);
        (void) r;
}

static int bus_open(const char *bus, sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *b = NULL;
        int r;

        if (streq(bus, "system"))
                return sd_bus_open_system_with_description(ret, "slotd");
        if (streq(bus, "session"))
                return sd_bus_open_user_with_description(ret, "slotd");
        r = sd_bus_new(&b);
        if (r < 0)
                return r;
        r = sd_bus_set_address(b, bus);
        if (r < 0)
                return r;
        r = sd_bus_set_bus_client(b, true);
        if (r < 0)
                return r;
        r = sd_bus_start(b);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(b);
        return 0;
}

int manager_bus_setup(Manager *m, const char *bus) {
        int r;

        r = bus_open(bus, &m->bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the D-Bus bus '%s': %m", bus);
        r = sd_bus_add_object_vtable(m->bus, NULL, BUS_PATH, BUS_MANAGER_INTERFACE, manager_vtable, m);
        if (r >= 0)
                r = sd_bus_add_fallback_vtable(m->bus, NULL, BUS_SLOT_PREFIX, BUS_SLOT_INTERFACE,
                                               slot_vtable, slot_bus_find, m);
        if (r >= 0)
                r = sd_bus_add_node_enumerator(m->bus, NULL, BUS_SLOT_PREFIX, slot_bus_enumerate, m);
        if (r < 0)
                return log_error_errno(r, "Failed to register the D-Bus objects: %m");
        r = sd_bus_attach_event(m->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Failed to attach the bus to the event loop: %m");
        r = sd_bus_request_name(m->bus, BUS_NAME, 0);
        if (r == -EEXIST)
                return log_error_errno(r, "The name %s is taken on bus '%s': is another slotd "
                                          "running?", BUS_NAME, bus);
        if (r < 0)
                return log_error_errno(r, "Failed to acquire %s on bus '%s': %m", BUS_NAME, bus);
        return 0;
}
