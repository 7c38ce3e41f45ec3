/* SPDX-License-Identifier: MIT */
/* The registry's side of D-Bus: the connection (made again with back-off when the bus daemon
 * goes away), slotd's signals (PropertiesChanged of the Manager and of each slot, SlotChanged),
 * the full read of slotd whenever its name gets an owner, and the calls the claims need. */
#include <inttypes.h>

#include "log.h"
#include "registry-state.h"
#include "registry.h"
#include "strv.h"

/* A call of a full read: its reply is dropped when a newer read began meanwhile. */
typedef struct SyncCall {
        Registry *registry;
        uint64_t generation;
        uint32_t slot_id;
} SyncCall;

static void registry_bus_schedule_retry(Registry *r);
static int sync_start(Registry *r, bool full);

static int bus_open(const char *bus, sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *b = NULL;
        int r;

        if (streq(bus, "system"))
                return sd_bus_open_system_with_description(ret, "slotd-registry");
        if (streq(bus, "session"))
                return sd_bus_open_user_with_description(ret, "slotd-registry");
        r = sd_bus_new(&b);
        if (r >= 0)
                r = sd_bus_set_address(b, bus);
        if (r >= 0)
                r = sd_bus_set_bus_client(b, true);
        if (r >= 0)
                r = sd_bus_start(b);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(b);
        return 0;
}

/* The call's reply goes to cb with a SyncCall of the current read; the bus owns the call. */
static int sync_call(Registry *r, sd_bus_message *m, sd_bus_message_handler_t cb,
                     uint32_t slot_id) {
        _cleanup_free_ SyncCall *c = new0(SyncCall, 1);
        sd_bus_slot *slot;
        int k;

        if (!c)
                return -ENOMEM;
        *c = (SyncCall){ .registry = r, .generation = r->generation, .slot_id = slot_id };
        k = sd_bus_call_async(r->bus, &slot, m, cb, c, 0);
        if (k < 0)
                return k;
        (void) sd_bus_slot_set_destroy_callback(slot, free);
        (void) sd_bus_slot_set_floating(slot, 1);
        sd_bus_slot_unref(slot);
        TAKE_PTR(c);
        r->sync_pending++;
        return 0;
}

/* One variant of a{sv}: 1 and *v when it is of a type the model knows, 0 when skipped. The
 * strings point into the message; an "as" is copied into *strv. */
static int read_variant(sd_bus_message *m, RegValue *v, char ***strv) {
        const char *contents;
        int k, b;

        k = sd_bus_message_peek_type(m, NULL, &contents);
        if (k <= 0)
                return k < 0 ? k : -EBADMSG;
        v->type = contents[0] == 'a' ? 'a' : contents[0];
        if (streq(contents, "s"))
                return sd_bus_message_read(m, "v", "s", &v->s) < 0 ? -EBADMSG : 1;
        if (streq(contents, "b")) {
                k = sd_bus_message_read(m, "v", "b", &b);
                v->b = b;
                return k < 0 ? -EBADMSG : 1;
        }
        if (streq(contents, "q"))
                return sd_bus_message_read(m, "v", "q", &v->q) < 0 ? -EBADMSG : 1;
        if (streq(contents, "u"))
                return sd_bus_message_read(m, "v", "u", &v->u) < 0 ? -EBADMSG : 1;
        if (streq(contents, "t"))
                return sd_bus_message_read(m, "v", "t", &v->t) < 0 ? -EBADMSG : 1;
        if (streq(contents, "as")) {
                k = sd_bus_message_enter_container(m, 'v', "as");
                if (k >= 0)
                        k = sd_bus_message_read_strv(m, strv);
                if (k >= 0)
                        k = sd_bus_message_exit_container(m);
                v->strv = *strv;
                return k < 0 ? -EBADMSG : 1;
        }
        return sd_bus_message_skip(m, "v") < 0 ? -EBADMSG : 0;
}

typedef struct Applied {
        bool changed;   /* a field of the documents changed */
        bool in_slots;  /* a Manager property every slot document carries */
        bool relist;    /* the slots may have changed (Reload) */
} Applied;

/* a{sv} onto a slot (s) or the Manager (s NULL). */
static int apply_properties(Registry *r, sd_bus_message *m, RegSlot *s, Applied *ret) {
        const char *name;
        int k;

        *ret = (Applied){};
        k = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (k < 0)
                return k;
        while ((k = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                _cleanup_strv_free_ char **strv = NULL;
                RegValue v = {};

                k = sd_bus_message_read(m, "s", &name);
                if (k >= 0)
                        k = read_variant(m, &v, &strv);
                if (k > 0)
                        k = s ? reg_slot_set(s, name, &v) : reg_machine_set(&r->machine, name, &v);
                if (k < 0)
                        return k;
                if (k > 0 && s && streq(name, "ReadyForPlayers"))
                        /* slotd keeps no time of it: the registry's, as it sees the change
                         * (a registry started later sees it later) */
                        s->ready_for_players_at = s->ready_for_players
                                                          ? now_usec(CLOCK_REALTIME)
                                                          : 0;
                if (k > 0) {
                        ret->changed = true;
                        ret->in_slots |= !s && reg_machine_property_in_slots(name);
                        ret->relist |= !s && (streq(name, "SlotCount") || streq(name, "Fleets"));
                }
                k = sd_bus_message_exit_container(m);
                if (k < 0)
                        return k;
        }
        if (k < 0)
                return k;
        return sd_bus_message_exit_container(m);
}

static void machine_applied(Registry *r, const Applied *a) {
        if (a->in_slots)
                registry_all_dirty(r); /* draining changed: rare, O(slots) */
        else if (a->changed)
                registry_machine_dirty(r);
        if (a->relist && r->synced)
                (void) sync_start(r, false);
}

/* "/org/slotd/Supervisor1/slot/<id>" → id. */
static int slot_id_from_path(const char *path, uint32_t *ret) {
        const char *p;
        char *end;
        unsigned long v;

        if (!path || strncmp(path, SLOTD_SLOT_PREFIX, strlen(SLOTD_SLOT_PREFIX)) != 0)
                return -EINVAL;
        p = path + strlen(SLOTD_SLOT_PREFIX);
        if (*p < '0' || *p > '9')
                return -EINVAL;
        errno = 0;
        v = strtoul(p, &end, 10);
        if (errno != 0 || *end || v > UINT32_MAX)
                return -EINVAL;
        *ret = (uint32_t) v;
        return 0;
}

static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Registry *r = userdata;
        const char *interface, *path = sd_bus_message_get_path(m);
        Applied a;
        RegSlot *s = NULL;
        uint32_t id;
        int k;

        if (sd_bus_message_read(m, "s", &interface) < 0)
                return 0;
        if (streq(interface, SLOTD_SLOT_INTERFACE)) {
                if (slot_id_from_path(path, &id) < 0 || !(s = registry_slot(r, id)) || !s->known)
                        return 0; /* a new slot: the read that SlotCount starts will have it */
        } else if (!streq(interface, SLOTD_MANAGER_INTERFACE) || !streq_ptr(path, SLOTD_PATH))
                return 0;
        k = apply_properties(r, m, s, &a);
        if (k < 0) {
                log_warning_errno(k, "Failed to read PropertiesChanged of %s: %m", path);
                return 0;
        }
        if (s && a.changed)
                registry_slot_dirty(r, s);
        else if (!s)
                machine_applied(r, &a);
        return 0;
}

static int on_slot_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Registry *r = userdata;
        const char *state, *process_state;
        uint32_t id;
        RegSlot *s;
        int a, b;

        if (sd_bus_message_read(m, "uss", &id, &state, &process_state) < 0)
                return 0;
        s = registry_slot(r, id);
        if (!s || !s->known)
                return 0;
        a = reg_slot_set(s, "State", &(RegValue){ .type = 's', .s = state });
        b = reg_slot_set(s, "ProcessState", &(RegValue){ .type = 's', .s = process_state });
        if (a > 0 || b > 0)
                registry_slot_dirty(r, s);
        return 0;
}

static void sync_failed(Registry *r, sd_bus_message *reply, const char *what) {
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        log_warning("Reading slotd (%s) failed: %s; trying again", what,
                    e ? (e->message ?: e->name) : "bad reply");
        r->generation++; /* the rest of this read is dropped */
        r->sync_pending = 0;
        registry_bus_schedule_retry(r);
}

static void sync_step_done(Registry *r) {
        bool full = r->sync_full;
        size_t n = 0;

        if (--r->sync_pending > 0)
                return;
        r->sync_full = false;
        r->synced = true;
        for (size_t i = 0; i < r->n_slots; i++)
                n += r->slots[i] != NULL;
        log_info("Read slotd %s on machine %s: %zu slots%s", strempty(r->machine.version),
                 strempty(r->machine.machine_id), n, full ? "" : " (slots listed again)");
        if (full)
                registry_resync(r);
}

static int on_manager_properties(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        SyncCall *c = userdata;
        Registry *r = c->registry;
        Applied a;
        int k;

        if (c->generation != r->generation)
                return 0;
        if (sd_bus_message_is_method_error(reply, NULL)) {
                sync_failed(r, reply, "the Manager's properties");
                return 0;
        }
        k = apply_properties(r, reply, NULL, &a);
        if (k < 0 || !r->machine.machine_id || !r->machine.machine_id[0]) {
                sync_failed(r, reply, "the Manager's properties");
                return 0;
        }
        registry_machine_dirty(r);
        sync_step_done(r);
        return 0;
}

static int on_slot_properties(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        SyncCall *c = userdata;
        Registry *r = c->registry;
        RegSlot *s;
        Applied a;

        if (c->generation != r->generation)
                return 0;
        s = registry_slot(r, c->slot_id);
        if (s && !sd_bus_message_is_method_error(reply, NULL) &&
            apply_properties(r, reply, s, &a) >= 0 && s->fleet) {
                s->known = true;
                registry_slot_dirty(r, s);
        } else if (s && !s->known)
                /* gone between ListSlots and GetAll: the next SlotCount change lists again */
                registry_slot_remove(r, c->slot_id);
        sync_step_done(r);
        return 0;
}

static int get_all(Registry *r, const char *path, const char *interface,
                   sd_bus_message_handler_t cb, uint32_t slot_id) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int k;

        k = sd_bus_message_new_method_call(r->bus, &m, SLOTD_BUS_NAME, path,
                                           "org.freedesktop.DBus.Properties", "GetAll");
        if (k >= 0)
                k = sd_bus_message_append(m, "s", interface);
        if (k >= 0)
                k = sync_call(r, m, cb, slot_id);
        return k;
}

/* ListSlots' answer: a slot not seen before (or every slot, on a full read) is read whole;
 * a slot that is no longer listed is dropped. */
static int read_slot_list(Registry *r, sd_bus_message *reply, bool full) {
        const char *fleet, *state, *ps, *uuid, *bc, *path;
        uint32_t id;
        RegSlot *s;
        int k;

        k = sd_bus_message_enter_container(reply, 'a', "(ussssso)");
        if (k < 0)
                return k;
        while ((k = sd_bus_message_read(reply, "(ussssso)", &id, &fleet, &state, &ps, &uuid,
                                        &bc, &path)) > 0) {
                k = registry_slot_add(r, id, &s);
                if (k < 0)
                        return k;
                s->seen = r->generation;
                if (full || !s->known) {
                        k = get_all(r, path, SLOTD_SLOT_INTERFACE, on_slot_properties, id);
                        if (k < 0)
                                return k;
                }
        }
        if (k < 0)
                return k;
        for (size_t i = 0; i < r->n_slots; i++)
                if (r->slots[i] && r->slots[i]->seen != r->generation)
                        registry_slot_remove(r, (uint32_t) i);
        return 0;
}

static int on_list_slots(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        SyncCall *c = userdata;
        Registry *r = c->registry;

        if (c->generation != r->generation)
                return 0;
        if (sd_bus_message_is_method_error(reply, NULL) ||
            read_slot_list(r, reply, r->sync_full) < 0) {
                sync_failed(r, reply, "ListSlots");
                return 0;
        }
        sync_step_done(r);
        return 0;
}

/* Reads the Manager and the slots: every slot on a full read (slotd appeared), the new ones
 * otherwise (Reload changed the fleets). Signals that come meanwhile apply as they come:
 * slotd sends them in order with its replies. */
static int sync_start(Registry *r, bool full) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int k;

        r->generation++;
        r->sync_pending = 0;
        r->sync_full = r->sync_full || full;
        k = get_all(r, SLOTD_PATH, SLOTD_MANAGER_INTERFACE, on_manager_properties, 0);
        if (k >= 0)
                k = sd_bus_message_new_method_call(r->bus, &m, SLOTD_BUS_NAME, SLOTD_PATH,
                                                   SLOTD_MANAGER_INTERFACE, "ListSlots");
        if (k >= 0)
                k = sync_call(r, m, on_list_slots, 0);
        if (k < 0) {
                log_warning_errno(k, "Failed to read slotd: %m; trying again");
                r->generation++;
                r->sync_pending = 0;
                registry_bus_schedule_retry(r);
        }
        return k;
}

static void slotd_appeared(Registry *r) {
        if (!r->slotd_up)
                log_info("slotd is on bus '%s'; reading it", r->bus_address);
        r->slotd_up = true;
        r->synced = false;
        (void) sync_start(r, true);
}

static void slotd_gone(Registry *r, const char *why) {
        if (r->slotd_up)
                log_warning("slotd %s; its documents stay until it is back or %" PRIu64
                            " s pass", why, r->lease_ttl / USEC_PER_SEC);
        r->slotd_up = false;
        r->synced = false;
        r->generation++;
        r->sync_pending = 0;
        registry_slotd_gone(r);
}

static int on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Registry *r = userdata;
        const char *name, *old_owner, *new_owner;

        if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 ||
            !streq(name, SLOTD_BUS_NAME))
                return 0;
        if (old_owner[0])
                slotd_gone(r, "left the bus");
        if (new_owner[0])
                slotd_appeared(r);
        return 0;
}

static int on_get_name_owner(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Registry *r = userdata;

        if (sd_bus_message_get_bus(reply) != r->bus)
                return 0;
        if (sd_bus_message_is_method_error(reply, NULL))
                log_info("slotd is not on bus '%s' yet; waiting for it", r->bus_address);
        else
                slotd_appeared(r);
        return 0;
}

static int on_bus_disconnected(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Registry *r = userdata;

        if (sd_bus_message_get_bus(m) != r->bus)
                return 0;
        log_warning("Lost the connection to bus '%s'; reconnecting", r->bus_address);
        r->bus = sd_bus_flush_close_unref(r->bus);
        slotd_gone(r, "is out of reach (the bus went away)");
        registry_bus_schedule_retry(r);
        return 0;
}

static const char *const matches[] = {
        "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
        "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='" SLOTD_BUS_NAME "'",
        "type='signal',sender='" SLOTD_BUS_NAME "',interface='org.freedesktop.DBus.Properties',"
        "member='PropertiesChanged',path_namespace='" SLOTD_PATH "'",
        "type='signal',sender='" SLOTD_BUS_NAME "',path='" SLOTD_PATH "',"
        "interface='" SLOTD_MANAGER_INTERFACE "',member='SlotChanged'",
};

/* The matches first, then the question who owns the name: the bus daemon answers in order,
 * so no signal between the two is missed. */
static int bus_setup(Registry *r) {
        const sd_bus_message_handler_t handlers[] = {
                on_name_owner_changed, on_properties_changed, on_slot_changed,
        };
        int k;

        k = sd_bus_attach_event(r->bus, r->event, SD_EVENT_PRIORITY_NORMAL);
        if (k >= 0)
                k = sd_bus_match_signal_async(r->bus, NULL, "org.freedesktop.DBus.Local",
                                              "/org/freedesktop/DBus/Local",
                                              "org.freedesktop.DBus.Local", "Disconnected",
                                              on_bus_disconnected, NULL, r);
        for (size_t i = 0; k >= 0 && i < ELEMENTSOF(matches); i++)
                k = sd_bus_add_match_async(r->bus, NULL, matches[i], handlers[i], NULL, r);
        if (k >= 0)
                k = sd_bus_call_method_async(r->bus, NULL, "org.freedesktop.DBus",
                                             "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                             "GetNameOwner", on_get_name_owner, r, "s",
                                             SLOTD_BUS_NAME);
        return k;
}

static int bus_try_connect(Registry *r) {
        int k;

        k = bus_open(r->bus_address, &r->bus);
        if (k >= 0)
                k = bus_setup(r);
        if (k < 0)
                r->bus = sd_bus_flush_close_unref(r->bus);
        return k;
}

static int on_bus_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        Registry *r = userdata;
        int k;

        if (r->bus) {
                /* connected: a read of slotd failed */
                if (r->slotd_up)
                        (void) sync_start(r, true);
                return 0;
        }
        k = bus_try_connect(r);
        if (k < 0) {
                log_debug_errno(k, "Connecting to bus '%s' failed: %m", r->bus_address);
                registry_bus_schedule_retry(r);
                return 0;
        }
        log_info("Connected to bus '%s'", r->bus_address);
        backoff_reset(&r->bus_backoff);
        return 0;
}

static void registry_bus_schedule_retry(Registry *r) {
        usec_t delay = backoff_next(&r->bus_backoff);
        int k;

        if (r->bus_retry) {
                k = sd_event_source_set_time_relative(r->bus_retry, delay);
                if (k >= 0)
                        k = sd_event_source_set_enabled(r->bus_retry, SD_EVENT_ONESHOT);
        } else
                k = sd_event_add_time_relative(r->event, &r->bus_retry, CLOCK_MONOTONIC, delay,
                                               USEC_PER_MSEC, on_bus_retry, r);
        if (k < 0)
                log_error_errno(k, "Failed to schedule a retry on bus '%s': %m", r->bus_address);
}

int registry_bus_connect(Registry *r) {
        int k;

        k = bus_try_connect(r);
        if (k < 0)
                return log_error_errno(k, "Failed to connect to bus '%s': %m", r->bus_address);
        return 0;
}

void registry_bus_done(Registry *r) {
        r->bus_retry = sd_event_source_disable_unref(r->bus_retry);
        r->bus = sd_bus_flush_close_unref(r->bus);
}

/* One entry of AllocateWithOptions' a{sv}: key, then the variant of type (basic, or "ay"). */
static int append_option(sd_bus_message *m, const char *key, const char *type, const void *value,
                         size_t size) {
        int k = sd_bus_message_open_container(m, 'e', "sv");

        if (k >= 0)
                k = sd_bus_message_append(m, "s", key);
        if (k >= 0)
                k = sd_bus_message_open_container(m, 'v', type);
        if (k >= 0)
                k = streq(type, "ay") ? sd_bus_message_append_array(m, 'y', value, size)
                                      : sd_bus_message_append_basic(m, type[0], value);
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        return k;
}

int registry_bus_allocate(Registry *r, uint32_t slot_id, const ClaimDoc *claim,
                          sd_bus_message_handler_t callback, void *userdata, sd_bus_slot **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        const char *payload = strempty(claim->payload);
        char path[sizeof(SLOTD_SLOT_PREFIX) + 16];
        int k, yes = 1;

        if (!r->bus || !r->slotd_up)
                return -ENOTCONN;
        snprintf(path, sizeof(path), SLOTD_SLOT_PREFIX "%" PRIu32, slot_id);
        k = sd_bus_message_new_method_call(r->bus, &m, SLOTD_BUS_NAME, path, SLOTD_SLOT_INTERFACE,
                                           "AllocateWithOptions");
        if (k >= 0)
                k = sd_bus_message_append(m, "ss", claim->allocation_id,
                                          strempty(claim->build_configuration_id));
        if (k >= 0)
                k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k >= 0 && payload[0])
                k = append_option(m, "payload", "ay", payload, strlen(payload));
        /* The allocator's last resort: a draining slotd lets this one through (SPEC §8).
         * Sent only then, so that a slotd that does not know the option refuses only it. */
        if (k >= 0 && claim->draining)
                k = append_option(m, "draining", "b", &yes, 0);
        /* The POST's restart (SPEC §8), sent alike only when asked. */
        if (k >= 0 && claim->restart)
                k = append_option(m, "restart", "b", &yes, 0);
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        if (k >= 0)
                k = sd_bus_call_async(r->bus, ret, m, callback, userdata, 0);
        return k;
}

int registry_bus_deallocate(Registry *r, const char *allocation_id,
                            sd_bus_message_handler_t callback, void *userdata,
                            sd_bus_slot **ret) {
        if (!r->bus || !r->slotd_up)
                return -ENOTCONN;
        return sd_bus_call_method_async(r->bus, ret, SLOTD_BUS_NAME, SLOTD_PATH,
                                        SLOTD_MANAGER_INTERFACE, "Deallocate", callback, userdata,
                                        "s", allocation_id);
}

int registry_bus_slot_call(Registry *r, uint32_t slot_id, const char *method,
                           sd_bus_message_handler_t callback, void *userdata, sd_bus_slot **ret) {
        char path[sizeof(SLOTD_SLOT_PREFIX) + 16];

        if (!r->bus || !r->slotd_up)
                return -ENOTCONN;
        snprintf(path, sizeof(path), SLOTD_SLOT_PREFIX "%" PRIu32, slot_id);
        return sd_bus_call_method_async(r->bus, ret, SLOTD_BUS_NAME, path, SLOTD_SLOT_INTERFACE,
                                        method, callback, userdata, "");
}
