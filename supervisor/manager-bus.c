/* SPDX-License-Identifier: MIT */
#include <grp.h>
#include <stdarg.h>
#include <limits.h>

#include "cgroup.h"
#include "log.h"
#include "manager.h"
#include "slotd-config.h"
#include "strv.h"

/* Managing methods: root, or a member of supervisor.admin_group; Hold and ReleaseHold also
 * the slot's own game server. All of it comes from what the bus daemon says of the caller
 * (its SO_PEERCRED and the groups it read at connection time), never from /proc, where a
 * PID can be reused. sd-bus would ask the daemon with a blocking call on every method call;
 * we ask once per connection, asynchronously (GetConnectionCredentials), run the method
 * again once the answer is in (as systemd does for polkit), and keep the answer until the
 * bus says the connection is gone (NameOwnerChanged). The daemon's own answer cannot
 * change over a connection's life, nor can a unique name be reused. */

typedef struct Caller {
        uid_t uid;
        pid_t pid;                   /* 0: the daemon did not say */
        size_t n_gids;
        gid_t *gids;
        char name[];                 /* the unique name, the cache's key */
} Caller;

/* A bound on the cache should NameOwnerChanged never come: beyond it, it starts afresh. */
#define CALLERS_MAX 4096

static void caller_free(void *p) {
        Caller *c = p;

        if (c)
                free(c->gids);
        free(c);
}

static void caller_freep(Caller **c) {
        caller_free(*c);
}

void manager_bus_callers_done(Manager *m) {
        hashmap_done_free(&m->callers, caller_free);
}

static int on_name_owner_changed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *name, *old_owner, *new_owner;
        Caller *c;

        if (sd_bus_message_read(msg, "sss", &name, &old_owner, &new_owner) < 0 || new_owner[0])
                return 0;
        c = hashmap_get(&m->callers, name);
        if (c) {
                hashmap_remove(&m->callers, name, c);
                caller_free(c);
        }
        return 0;
}

int manager_bus_watch_callers(Manager *m) {
        return sd_bus_match_signal_async(m->bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "NameOwnerChanged",
                                         on_name_owner_changed, NULL, m);
}

static Caller *caller_parse(sd_bus_message *reply, const char *name) {
        _cleanup_(caller_freep) Caller *c = calloc(1, sizeof(Caller) + strlen(name) + 1);
        bool have_uid = false;
        const char *key;
        int r;

        if (!c)
                return NULL;
        strcpy(c->name, name);
        if (sd_bus_message_enter_container(reply, 'a', "{sv}") < 0)
                return NULL;
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                if (sd_bus_message_read(reply, "s", &key) < 0)
                        return NULL;
                if (streq(key, "UnixUserID")) {
                        uint32_t uid;
                        if (sd_bus_message_read(reply, "v", "u", &uid) < 0)
                                return NULL;
                        c->uid = uid;
                        have_uid = true;
                } else if (streq(key, "ProcessID")) {
                        uint32_t pid;
                        if (sd_bus_message_read(reply, "v", "u", &pid) < 0)
                                return NULL;
                        c->pid = (pid_t) pid;
                } else if (streq(key, "UnixGroupIDs")) {
                        const uint32_t *gids;
                        size_t size;
                        if (sd_bus_message_enter_container(reply, 'v', "au") < 0 ||
                            sd_bus_message_read_array(reply, 'u', (const void **) &gids, &size) < 0 ||
                            sd_bus_message_exit_container(reply) < 0)
                                return NULL;
                        free(c->gids);
                        c->n_gids = size / sizeof(uint32_t);
                        c->gids = malloc(MAX(c->n_gids, (size_t) 1) * sizeof(gid_t));
                        if (!c->gids)
                                return NULL;
                        for (size_t i = 0; i < c->n_gids; i++)
                                c->gids[i] = gids[i];
                } else if (sd_bus_message_skip(reply, "v") < 0)
                        return NULL;
                if (sd_bus_message_exit_container(reply) < 0)
                        return NULL;
        }
        if (r < 0 || !have_uid)
                return NULL; /* no uid: nobody we can vouch for */
        return TAKE_PTR(c);
}

/* May this caller run the method? For Hold and ReleaseHold 'hold_slot' is the slot, whose
 * own game server may. */
static bool caller_allowed(Manager *m, const Caller *c, Slot *hold_slot) {
        if (c->uid == 0)
                return true;
        if (m->config_has_admin_gid)
                for (size_t i = 0; i < c->n_gids; i++)
                        if (c->gids[i] == m->config_admin_gid)
                                return true;
        return hold_slot && c->pid > 0 && manager_slot_by_pid(m, c->pid) == hold_slot;
}

static int deny(sd_bus_error *error, bool hold) {
        return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                hold ? "Holding a slot needs root, membership of supervisor.admin_group "
                                       "or being the slot's own game server"
                                     : "Managing slots needs root or membership of "
                                       "supervisor.admin_group");
}

typedef struct AuthQuery {
        Manager *manager;
        sd_bus_message *msg;
        sd_bus_message_handler_t handler;
        unsigned slot_id;            /* for slot methods, else UINT_MAX */
        bool hold;                   /* the slot's own server may, too */
} AuthQuery;

static int on_auth_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        AuthQuery *q = userdata;
        Manager *m = q->manager;
        const char *sender = sd_bus_message_get_sender(q->msg);
        Caller *c = NULL, *old;
        void *target = m;
        int r;

        if (!sd_bus_message_is_method_error(reply, NULL))
                c = caller_parse(reply, sender);
        if (c) {
                if (m->callers.size >= CALLERS_MAX)
                        manager_bus_callers_done(m);
                old = hashmap_get(&m->callers, c->name);
                if (old) {
                        hashmap_remove(&m->callers, old->name, old);
                        caller_free(old);
                }
                if (hashmap_put(&m->callers, c->name, c) < 0) {
                        caller_free(c);
                        c = NULL;
                }
        }
        if (q->slot_id != UINT_MAX && !(target = manager_get_slot(m, q->slot_id))) {
                (void) sd_bus_reply_method_errorf(q->msg, BUS_ERROR_PREFIX "NoSuchSlot",
                                                  "No slot %u", q->slot_id);
                goto finish;
        }
        if (!c || !caller_allowed(m, c, q->hold ? target : NULL)) {
                (void) deny(&error, q->hold);
                (void) sd_bus_reply_method_error(q->msg, &error);
                goto finish;
        }
        (void) sd_bus_message_rewind(q->msg, true);
        m->authorized_msg = q->msg;
        r = q->handler(q->msg, target, &error);
        m->authorized_msg = NULL;
        if (r < 0)
                (void) sd_bus_reply_method_error(q->msg, sd_bus_error_is_set(&error) ? &error
                                                 : &SD_BUS_ERROR_MAKE_CONST(SD_BUS_ERROR_FAILED,
                                                                            strerror(-r)));
finish:
        sd_bus_message_unref(q->msg);
        free(q);
        return 0;
}

int bus_check_caller(sd_bus_message *msg, Manager *m, sd_bus_message_handler_t handler,
                     unsigned slot_id, bool hold, sd_bus_error *error) {
        const char *sender = sd_bus_message_get_sender(msg);
        Caller *c;
        AuthQuery *q;
        int r;

        if (msg == m->authorized_msg)
                return 1;
        if (!sender) {
                /* A direct connection, no bus daemon: its SO_PEERCRED, no call needed. */
                _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
                uid_t euid;

                if (sd_bus_query_sender_creds(msg, SD_BUS_CREDS_EUID, &creds) >= 0 &&
                    !(sd_bus_creds_get_augmented_mask(creds) & SD_BUS_CREDS_EUID) &&
                    sd_bus_creds_get_euid(creds, &euid) >= 0 && euid == 0)
                        return 1;
                return deny(error, hold);
        }
        c = hashmap_get(&m->callers, sender);
        if (c) {
                Slot *s = hold && slot_id != UINT_MAX ? manager_get_slot(m, slot_id) : NULL;
                return caller_allowed(m, c, s) ? 1 : deny(error, hold);
        }
        q = new0(AuthQuery, 1);
        if (!q)
                return -ENOMEM;
        *q = (AuthQuery){ .manager = m, .msg = sd_bus_message_ref(msg), .handler = handler,
                          .slot_id = slot_id, .hold = hold };
        r = sd_bus_call_method_async(m->bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                     "org.freedesktop.DBus", "GetConnectionCredentials",
                                     on_auth_reply, q, "s", sender);
        if (r < 0) {
                sd_bus_message_unref(q->msg);
                free(q);
                return r;
        }
        return 0; /* answered later */
}

int bus_check_admin(sd_bus_message *msg, Manager *m, sd_bus_message_handler_t handler,
                    unsigned slot_id, sd_bus_error *error) {
        return bus_check_caller(msg, m, handler, slot_id, false, error);
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
                if (!s)
                        continue;
                r = sd_bus_message_append(reply, "(ussssso)", s->id, s->fleet->config->name,
                                          slot_state_to_string(slot_state(s)),
                                          process_state_to_string(s->process_state),
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

static int method_reexecute(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int r = bus_check_admin(msg, m, method_reexecute, UINT_MAX, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        /* The reply goes out first: the connection closes with the exec. */
        r = sd_bus_reply_method_return(msg, NULL);
        if (r < 0)
                return r;
        (void) sd_bus_flush(m->bus);
        r = manager_request_reexecute(m);
        if (r < 0)
                log_error_errno(r, "Cannot re-execute, state not durable: %m");
        return 1;
}

static int method_stop_all(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int r = bus_check_admin(msg, m, method_stop_all, UINT_MAX, error);

        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
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
                if (!m->fleets[i]->retired)
                        r = sd_bus_message_append(reply, "s", m->fleets[i]->config->name);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int property_get_slot_count(sd_bus *bus, const char *path, const char *interface,
                                   const char *property, sd_bus_message *reply, void *userdata,
                                   sd_bus_error *error) {
        Manager *m = userdata;
        return sd_bus_message_append(reply, "u", (uint32_t) m->n_live_slots);
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

/* Maps the manager's negative errno to the contract's D-Bus errors. */
int bus_error_from_errno(sd_bus_error *error, int r, const char *what) {
        switch (r) {
        case -ENOSPC:
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "NoCapacity", "%s: no slot free", what);
        case -EAGAIN:
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "Draining",
                                         "%s: the machine is draining", what);
        case -EBUSY:
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "InvalidState",
                                         "%s: not possible in the slot's state", what);
        case -EINVAL:
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "InvalidArgument", "%s", what);
        default:
                return sd_bus_error_set_errnof(error, r, "%s: %m", what);
        }
}

/* Allocation UUIDs and build configuration IDs end up in files, logs and cgroups' neighbours:
 * only the characters of the contract, and a bounded length. */
int bus_check_id(sd_bus_error *error, const char *what, const char *s, bool empty_ok) {
        if ((empty_ok && s[0] == '\0') || alloc_id_is_valid(s))
                return 0;
        return sd_bus_error_setf(error, BUS_ERROR_PREFIX "InvalidArgument",
                                 "Invalid %s: 1 to %d characters of A-Z a-z 0-9 . _ : -", what,
                                 ALLOC_ID_MAX);
}

/* Replies (u id, o path) once the change is durable. */
int bus_reply_slot_durable(sd_bus_message *msg, Manager *m, Slot *s) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = sd_bus_message_new_method_return(msg, &reply);

        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "uo", s->id, s->object_path);
        if (r < 0)
                return r;
        return manager_reply_durable(m, msg, reply);
}

int bus_reply_empty_durable(sd_bus_message *msg, Manager *m) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = sd_bus_message_new_method_return(msg, &reply);

        if (r < 0)
                return r;
        return manager_reply_durable(m, msg, reply);
}

static int method_allocate(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *fleet, *uuid, *bc;
        Slot *s;
        int r;

        r = bus_check_admin(msg, m, method_allocate, UINT_MAX, error);
        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = sd_bus_message_read(msg, "sss", &fleet, &uuid, &bc);
        if (r < 0)
                return r;
        if ((r = bus_check_id(error, "allocation UUID", uuid, false)) < 0 ||
            (r = bus_check_id(error, "build configuration", bc, true)) < 0)
                return r;
        r = manager_allocate(m, fleet, uuid, bc, &s);
        if (r == -EINVAL)
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "InvalidArgument", "No fleet '%s'",
                                         fleet);
        if (r < 0)
                return bus_error_from_errno(error, r, "Allocate");
        return bus_reply_slot_durable(msg, m, s);
}

static int method_deallocate(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *uuid;
        Slot *s;
        int r;

        r = bus_check_admin(msg, m, method_deallocate, UINT_MAX, error);
        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = sd_bus_message_read(msg, "s", &uuid);
        if (r < 0)
                return r;
        s = manager_slot_by_uuid(m, uuid);
        if (!s || !streq_ptr(s->allocation_uuid, uuid))
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "NoSuchAllocation",
                                         "No allocation '%s'", uuid);
        r = slot_deallocate(s);
        if (r < 0)
                return bus_error_from_errno(error, r, "Deallocate");
        return bus_reply_empty_durable(msg, m);
}

#define RESERVE_DEFAULT_USEC (60 * USEC_PER_SEC)
#define TIMEOUT_MAX_USEC (7 * 24 * USEC_PER_HOUR)

static int method_reserve(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *fleet, *uuid;
        uint64_t timeout;
        Slot *s;
        int r;

        r = bus_check_admin(msg, m, method_reserve, UINT_MAX, error);
        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = sd_bus_message_read(msg, "sst", &fleet, &uuid, &timeout);
        if (r < 0)
                return r;
        if ((r = bus_check_id(error, "reservation UUID", uuid, false)) < 0)
                return r;
        if (timeout > TIMEOUT_MAX_USEC)
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "InvalidArgument",
                                         "Reservation timeout longer than 7 days");
        r = manager_reserve(m, fleet, uuid, timeout ?: RESERVE_DEFAULT_USEC, &s);
        if (r == -EINVAL)
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "InvalidArgument", "No fleet '%s'",
                                         fleet);
        if (r < 0)
                return bus_error_from_errno(error, r, "Reserve");
        return bus_reply_slot_durable(msg, m, s);
}

static int method_set_draining(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int b, r;

        r = bus_check_admin(msg, m, method_set_draining, UINT_MAX, error);
        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = sd_bus_message_read(msg, "b", &b);
        if (r < 0)
                return r;
        (void) manager_set_draining(m, b);
        return bus_reply_empty_durable(msg, m);
}

static int method_reload(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_free_ char *why = NULL;
        Manager *m = userdata;
        int r;

        r = bus_check_admin(msg, m, method_reload, UINT_MAX, error);
        if (r <= 0) /* denied, or run again once the check has answered */
                return r < 0 ? r : 1;
        r = manager_reload(m, &why);
        if (r < 0)
                return sd_bus_error_setf(error, BUS_ERROR_PREFIX "InvalidArgument",
                                         "Configuration refused, the running one stays: %s",
                                         why ?: strerror(-r));
        return bus_reply_empty_durable(msg, m);
}

#define DEFINE_MANAGER_GETTER(name, sig, expr)                                                 \
        static int property_get_##name(sd_bus *bus, const char *path, const char *interface,   \
                                       const char *property, sd_bus_message *reply,            \
                                       void *userdata, sd_bus_error *error) {                  \
                Manager *m = userdata;                                                         \
                return sd_bus_message_append(reply, sig, expr);                                \
        }

DEFINE_MANAGER_GETTER(draining, "b", (int) m->draining)
DEFINE_MANAGER_GETTER(idle_since, "t", (uint64_t) m->idle_since)
DEFINE_MANAGER_GETTER(hold_until, "t", (uint64_t) m->hold_until)
DEFINE_MANAGER_GETTER(deprovisionable, "b", (int) m->deprovisionable)

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
        SD_BUS_PROPERTY("Draining", "b", property_get_draining, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("IdleSinceUSec", "t", property_get_idle_since, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("HoldUntilUSec", "t", property_get_hold_until, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Deprovisionable", "b", property_get_deprovisionable, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_ARGS("Allocate", SD_BUS_ARGS("s", fleet, "s", uuid, "s", build_configuration),
                                SD_BUS_RESULT("u", id, "o", path), method_allocate,
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
        SD_BUS_SIGNAL("Deprovisionable", NULL, 0),
        SD_BUS_SIGNAL_WITH_ARGS("Misbehaved", SD_BUS_ARGS("u", id, "s", check, "u", strikes), 0),
        SD_BUS_VTABLE_END,
};

void manager_bus_slot_changed(Manager *m, Slot *s) {
        SlotState state = slot_state(s);
        int r;

        if (!m->bus)
                return;
        r = sd_bus_emit_properties_changed_strv(m->bus, s->object_path, BUS_SLOT_INTERFACE, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to emit PropertiesChanged for slot %u: %m", s->id);
        if (state == s->announced_state && s->process_state == s->announced_process_state)
                return;
        s->announced_state = state;
        s->announced_process_state = s->process_state;
        r = sd_bus_emit_signal(m->bus, BUS_PATH, BUS_MANAGER_INTERFACE, "SlotChanged", "uss", s->id,
                               slot_state_to_string(state),
                               process_state_to_string(s->process_state));
        if (r < 0)
                log_debug_errno(r, "Failed to emit SlotChanged for slot %u: %m", s->id);
}

void manager_bus_slot_properties(Manager *m, Slot *s, const char *property, ...) {
        const char *names[8];
        size_t n = 0;
        va_list ap;

        if (!m->bus)
                return;
        va_start(ap, property);
        for (const char *p = property; p && n < ELEMENTSOF(names) - 1; p = va_arg(ap, const char *))
                names[n++] = p;
        va_end(ap);
        names[n] = NULL;
        (void) sd_bus_emit_properties_changed_strv(m->bus, s->object_path, BUS_SLOT_INTERFACE,
                                                   (char **) names);
}

void manager_bus_property_changed(Manager *m, const char *property) {
        if (m->bus)
                (void) sd_bus_emit_properties_changed(m->bus, BUS_PATH, BUS_MANAGER_INTERFACE,
                                                      property, NULL);
}

void manager_bus_deprovisionable(Manager *m) {
        if (m->bus)
                (void) sd_bus_emit_signal(m->bus, BUS_PATH, BUS_MANAGER_INTERFACE,
                                          "Deprovisionable", NULL);
}

void manager_bus_misbehaved(Manager *m, Slot *s, CheckKind check, unsigned strikes) {
        if (m->bus)
                (void) sd_bus_emit_signal(m->bus, BUS_PATH, BUS_MANAGER_INTERFACE, "Misbehaved", "usu",
                                          s->id, check_kind_to_string(check), strikes);
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
        r = manager_bus_watch_callers(m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch NameOwnerChanged on bus '%s': %m", bus);
        r = sd_bus_request_name(m->bus, BUS_NAME, getenv("SLOTD_REEXECUTED") ? SD_BUS_NAME_QUEUE : 0);
        (void) unsetenv("SLOTD_REEXECUTED");
        if (r == -EEXIST)
                return log_error_errno(r, "The name %s is taken on bus '%s': is another slotd "
                                          "running?", BUS_NAME, bus);
        if (r < 0)
                return log_error_errno(r, "Failed to acquire %s on bus '%s': %m", BUS_NAME, bus);
        return 0;
}
