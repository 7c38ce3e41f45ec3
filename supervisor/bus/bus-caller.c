/* SPDX-License-Identifier: MIT */
/* Who calls over D-Bus: the D-Bus door's half of ops.h's OpsCaller. */
#include <limits.h>

#include "log.h"
#include "bus-door.h"
#include "ops.h"

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

void bus_door_callers_done(BusDoor *d) {
        hashmap_done_free(&d->callers, caller_free);
}

static int on_name_owner_changed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusDoor *d = userdata;
        const char *name, *old_owner, *new_owner;
        Caller *c;

        if (sd_bus_message_read(msg, "sss", &name, &old_owner, &new_owner) < 0 || new_owner[0])
                return 0;
        c = hashmap_get(&d->callers, name);
        if (c) {
                hashmap_remove(&d->callers, name, c);
                caller_free(c);
        }
        return 0;
}

int bus_door_watch_callers(BusDoor *d) {
        return sd_bus_match_signal_async(d->bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "NameOwnerChanged",
                                         on_name_owner_changed, NULL, d);
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

/* What the bus daemon said of a caller, as the operations take it. A caller that is no
 * manager may still be some slot's own game server: its PID, mapped to a cgroup. */
static void caller_identity(Manager *m, const Caller *c, OpsCaller *ret) {
        *ret = (OpsCaller){ .slot_id = OPS_NO_SLOT, .door = "D-Bus",
                            .admin = ops_is_admin(c->uid, c->gids, c->n_gids,
                                                  m->config_has_admin_gid, m->config_admin_gid) };
        if (!ret->admin && c->pid > 0) {
                Slot *s = manager_slot_by_pid(m, c->pid);
                ret->slot_known = true;
                ret->slot_id = s ? s->id : OPS_NO_SLOT;
        }
}

static int deny(sd_bus_error *error) {
        return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                "The bus daemon could not say who the caller is");
}

typedef struct AuthQuery {
        BusDoor *door;
        sd_bus_message *msg;
        sd_bus_message_handler_t handler;
        unsigned slot_id;            /* for slot methods, else UINT_MAX */
} AuthQuery;

static int on_auth_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        AuthQuery *q = userdata;
        BusDoor *d = q->door;
        const char *sender = sd_bus_message_get_sender(q->msg);
        Caller *c = NULL, *old;
        void *target = d;
        int r;

        /* Names are the daemon's: an answer that comes on a connection since lost (the bus
         * daemon restarted) is not kept for the next one's callers. */
        if (!sd_bus_message_is_method_error(reply, NULL) && sd_bus_message_get_bus(reply) == d->bus)
                c = caller_parse(reply, sender);
        if (c) {
                if (d->callers.size >= CALLERS_MAX)
                        bus_door_callers_done(d);
                old = hashmap_get(&d->callers, c->name);
                if (old) {
                        hashmap_remove(&d->callers, old->name, old);
                        caller_free(old);
                }
                if (hashmap_put(&d->callers, c->name, c) < 0) {
                        caller_free(c);
                        c = NULL;
                }
        }
        /* A slot method runs on the door's record of the slot, as slot_bus_find() gives it. */
        if (q->slot_id != UINT_MAX && !manager_get_slot(d->manager, q->slot_id)) {
                (void) sd_bus_reply_method_errorf(q->msg, BUS_ERROR_PREFIX "NoSuchSlot",
                                                  "No slot %u", q->slot_id);
                goto finish;
        }
        if (q->slot_id != UINT_MAX && !(target = bus_door_slot(d, q->slot_id))) {
                (void) sd_bus_reply_method_errno(q->msg, ENOMEM, NULL);
                goto finish;
        }
        if (!c) {
                (void) deny(&error);
                (void) sd_bus_reply_method_error(q->msg, &error);
                goto finish;
        }
        (void) sd_bus_message_rewind(q->msg, true);
        d->authorized_msg = q->msg;
        r = q->handler(q->msg, target, &error);
        d->authorized_msg = NULL;
        if (r < 0)
                (void) sd_bus_reply_method_error(q->msg, sd_bus_error_is_set(&error) ? &error
                                                 : &SD_BUS_ERROR_MAKE_CONST(SD_BUS_ERROR_FAILED,
                                                                            strerror(-r)));
finish:
        sd_bus_message_unref(q->msg);
        free(q);
        return 0;
}

int bus_caller(sd_bus_message *msg, BusDoor *d, sd_bus_message_handler_t handler,
               unsigned slot_id, OpsCaller *ret, sd_bus_error *error) {
        const char *sender = sd_bus_message_get_sender(msg);
        Caller *c;
        AuthQuery *q;
        int r;

        if (!sender) {
                /* A direct connection, no bus daemon: its SO_PEERCRED, no call needed. */
                _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
                uid_t euid;

                *ret = (OpsCaller){ .slot_id = OPS_NO_SLOT, .door = "D-Bus" };
                if (sd_bus_query_sender_creds(msg, SD_BUS_CREDS_EUID, &creds) >= 0 &&
                    !(sd_bus_creds_get_augmented_mask(creds) & SD_BUS_CREDS_EUID) &&
                    sd_bus_creds_get_euid(creds, &euid) >= 0 && euid == 0)
                        ret->admin = true;
                return 1;
        }
        c = hashmap_get(&d->callers, sender);
        if (c) {
                caller_identity(d->manager, c, ret);
                return 1;
        }
        if (msg == d->authorized_msg) /* the daemon answered, but nothing was kept */
                return deny(error);
        q = new0(AuthQuery, 1);
        if (!q)
                return -ENOMEM;
        *q = (AuthQuery){ .door = d, .msg = sd_bus_message_ref(msg), .handler = handler,
                          .slot_id = slot_id };
        r = sd_bus_call_method_async(sd_bus_message_get_bus(msg), NULL, "org.freedesktop.DBus",
                                     "/org/freedesktop/DBus",
                                     "org.freedesktop.DBus", "GetConnectionCredentials",
                                     on_auth_reply, q, "s", sender);
        if (r < 0) {
                sd_bus_message_unref(q->msg);
                free(q);
                return r;
        }
        return 0; /* answered later */
}

int bus_check_admin(sd_bus_message *msg, BusDoor *d, sd_bus_message_handler_t handler,
                    unsigned slot_id, sd_bus_error *error) {
        OpsCaller c;
        OpsStatus st;
        int r = bus_caller(msg, d, handler, slot_id, &c, error);

        if (r <= 0)
                return r;
        r = ops_check_admin(&c, &st);
        return r < 0 ? bus_error_from_ops(error, r, &st) : 1;
}

/* The operations' errors as the contract names them on the bus (SPEC §8). */
int bus_error_from_ops(sd_bus_error *error, int r, const OpsStatus *st) {
        static const char *const names[_OPS_ERROR_MAX] = {
                [OPS_ERROR_ACCESS_DENIED] = SD_BUS_ERROR_ACCESS_DENIED,
                [OPS_ERROR_NO_SUCH_SLOT] = BUS_ERROR_PREFIX "NoSuchSlot",
                [OPS_ERROR_NO_SUCH_ALLOCATION] = BUS_ERROR_PREFIX "NoSuchAllocation",
                [OPS_ERROR_INVALID_STATE] = BUS_ERROR_PREFIX "InvalidState",
                [OPS_ERROR_INVALID_ARGUMENT] = BUS_ERROR_PREFIX "InvalidArgument",
                [OPS_ERROR_NO_CAPACITY] = BUS_ERROR_PREFIX "NoCapacity",
                [OPS_ERROR_DRAINING] = BUS_ERROR_PREFIX "Draining",
                [OPS_ERROR_UNAVAILABLE] = BUS_ERROR_PREFIX "Unavailable",
                [OPS_ERROR_STATE_UNWRITABLE] = BUS_ERROR_PREFIX "StateUnwritable",
        };
        const char *name = st->code > 0 && st->code < _OPS_ERROR_MAX ? names[st->code] : NULL;

        if (!name)
                return sd_bus_error_set_errnof(error, r, "%s", st->message);
        return sd_bus_error_set(error, name, st->message);
}
