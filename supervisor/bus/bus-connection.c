/* SPDX-License-Identifier: MIT */
/* slotd's connection to the bus: made at start-up, and made again whenever the bus daemon
 * goes away (dbus-daemon killed, restarted, upgraded). Nothing else waits for it: slots, game
 * servers, the local proxy, timers and commits go on while the bus is away; only what travels
 * over the bus (calls, signals) waits for the next connection. */
#include <inttypes.h>
#include <stdlib.h>

#include "log.h"
#include "bus-door.h"

/* From the loss of the bus to the first try, doubling up to the last. A restarted daemon is
 * listening within a fraction of a second; one that stays away costs a try every 5 s. */
#define BUS_RETRY_FIRST_USEC (100 * USEC_PER_MSEC)
#define BUS_RETRY_MAX_USEC (5 * USEC_PER_SEC)

/* org.freedesktop.DBus.RequestName's answers. */
#define NAME_PRIMARY_OWNER 1
#define NAME_IN_QUEUE 2
#define NAME_EXISTS 3
#define NAME_ALREADY_OWNER 4

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

static void bus_door_schedule_retry(BusDoor *d);

/* The connection is gone (or the name could not be had on it): every name the old daemon
 * gave out means nothing on the next one, so what was learnt of callers goes too. Replies
 * still waiting for a commit keep their own reference to the old connection, and sending
 * them there fails quietly: their callers were disconnected with it. */
static void bus_door_lost(BusDoor *d, const char *why) {
        d->bus = sd_bus_flush_close_unref(d->bus);
        bus_door_callers_done(d);
        if (manager_fault_raise(d->manager, "bus", "%s on bus '%s'; reconnecting", why, d->address))
                d->name_taken_logged = false;
        bus_door_schedule_retry(d);
}

static int on_bus_disconnected(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        BusDoor *d = userdata;

        if (sd_bus_message_get_bus(msg) == d->bus)
                bus_door_lost(d, "lost the connection");
        return 0;
}

/* Objects, the callers' watch and our own disconnection, on the fresh connection d->bus. */
static int bus_door_register(BusDoor *d) {
        int r;

        r = sd_bus_add_object_vtable(d->bus, NULL, BUS_PATH, BUS_MANAGER_INTERFACE, manager_vtable, d);
        if (r >= 0)
                r = sd_bus_add_fallback_vtable(d->bus, NULL, BUS_SLOT_PREFIX, BUS_SLOT_INTERFACE,
                                               slot_vtable, slot_bus_find, d);
        if (r >= 0)
                r = sd_bus_add_node_enumerator(d->bus, NULL, BUS_SLOT_PREFIX, slot_bus_enumerate, d);
        if (r < 0)
                return log_error_errno(r, "Failed to register the D-Bus objects: %m");
        /* sd-bus tells of the end of a connection with this local signal. */
        r = sd_bus_match_signal_async(d->bus, NULL, "org.freedesktop.DBus.Local",
                                      "/org/freedesktop/DBus/Local", "org.freedesktop.DBus.Local",
                                      "Disconnected", on_bus_disconnected, NULL, d);
        if (r < 0)
                return log_error_errno(r, "Failed to watch for the end of the bus connection: %m");
        r = sd_bus_attach_event(d->bus, d->manager->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Failed to attach the bus to the event loop: %m");
        r = bus_door_watch_callers(d);
        if (r < 0)
                return log_error_errno(r, "Failed to watch NameOwnerChanged on bus '%s': %m",
                                       d->address);
        return 0;
}

/* Once per reconnection, O(slots): whoever watches slotd learns everything that changed
 * while the bus was away. Signals sent meanwhile were lost with the connection. */
static void bus_door_announce(BusDoor *d) {
        Manager *m = d->manager;
        int r;

        r = sd_bus_emit_properties_changed_strv(d->bus, BUS_PATH, BUS_MANAGER_INTERFACE, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to announce the Manager's properties: %m");
        for (size_t i = 0; i < m->n_slots; i++)
                if (m->slots[i])
                        bus_door_slot_changed(m, m->slots[i], 0, d);
}

static int on_name_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        BusDoor *d = userdata;
        const sd_bus_error *e;
        uint32_t answer = 0;
        usec_t lasted;

        if (sd_bus_message_get_bus(reply) != d->bus)
                return 0;
        e = sd_bus_message_get_error(reply);
        if (e) {
                log_debug("RequestName(%s) failed on bus '%s': %s", BUS_NAME, d->address,
                          e->message ?: e->name);
                bus_door_lost(d, "could not acquire " BUS_NAME);
                return 0;
        }
        if (sd_bus_message_read(reply, "u", &answer) < 0 ||
            (answer != NAME_PRIMARY_OWNER && answer != NAME_ALREADY_OWNER)) {
                if (!d->name_taken_logged)
                        log_error("The name %s is taken on bus '%s' by another connection: is "
                                  "another slotd running? Trying again until it is free",
                                  BUS_NAME, d->address);
                d->name_taken_logged = true;
                bus_door_lost(d, BUS_NAME " is owned by another connection");
                return 0;
        }
        lasted = now_usec(CLOCK_MONOTONIC) - d->lost_at;
        log_info("Reconnected to bus '%s' after %" PRIu64 ".%03" PRIu64 " s and %u attempts; "
                 "%s is ours again", d->address, lasted / USEC_PER_SEC,
                 lasted % USEC_PER_SEC / USEC_PER_MSEC, d->attempts, BUS_NAME);
        d->retry_delay = 0;
        d->attempts = 0;
        (void) manager_fault_clear(d->manager, "bus");
        bus_door_announce(d);
        return 0;
}

/* A new connection to the same address, from the event loop: every step is asynchronous
 * (the connect of a local socket does not wait; the authentication, Hello and RequestName
 * are answered through the loop). */
static int bus_door_reconnect(BusDoor *d) {
        int r;

        r = bus_open(d->address, &d->bus);
        if (r < 0)
                return r;
        r = bus_door_register(d);
        if (r >= 0)
                r = sd_bus_request_name_async(d->bus, NULL, BUS_NAME, 0, on_name_reply, d);
        if (r < 0)
                d->bus = sd_bus_flush_close_unref(d->bus);
        return r;
}

static int on_bus_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        BusDoor *d = userdata;
        int r;

        d->attempts++;
        r = bus_door_reconnect(d);
        if (r < 0) {
                log_debug_errno(r, "Reconnecting to bus '%s' (attempt %u) failed: %m",
                                d->address, d->attempts);
                (void) manager_fault_raise(d->manager, "bus", "lost the connection on bus '%s'; "
                                           "reconnecting (last attempt: %s)", d->address,
                                           strerror(-r));
                bus_door_schedule_retry(d);
        }
        return 0;
}

static void bus_door_schedule_retry(BusDoor *d) {
        usec_t delay = d->retry_delay == 0 ? BUS_RETRY_FIRST_USEC
                                               : MIN(d->retry_delay * 2, BUS_RETRY_MAX_USEC);
        int r;

        if (d->attempts == 0)
                d->lost_at = now_usec(CLOCK_MONOTONIC);
        d->retry_delay = delay;
        if (d->retry) {
                r = sd_event_source_set_time_relative(d->retry, delay);
                if (r >= 0)
                        r = sd_event_source_set_enabled(d->retry, SD_EVENT_ONESHOT);
        } else
                r = sd_event_add_time_relative(d->manager->event, &d->retry, CLOCK_MONOTONIC, delay,
                                               USEC_PER_MSEC, on_bus_retry, d);
        if (r < 0)
                log_error_errno(r, "Failed to schedule a reconnection to bus '%s', slotd stays "
                                "off the bus: %m", d->address);
}

/* The start-up RequestName's answer, read as sd_bus_request_name() reads it. */
static int on_early_name_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        BusEarly *e = userdata;
        uint32_t answer = 0;

        e->answered = true;
        if (sd_bus_message_is_method_error(reply, NULL))
                e->answer = -(sd_bus_message_get_errno(reply) ?: EIO);
        else if (sd_bus_message_read(reply, "u", &answer) < 0)
                e->answer = -EBADMSG;
        else
                e->answer = answer == NAME_PRIMARY_OWNER ? 1
                            : answer == NAME_IN_QUEUE    ? 0
                            : answer == NAME_EXISTS      ? -EEXIST
                            : answer == NAME_ALREADY_OWNER ? -EALREADY
                                                           : -EIO;
        return 0;
}

int bus_connect(const char *bus, BusEarly *ret) {
        int r;

        *ret = (BusEarly){};
        r = bus_open(bus, &ret->bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the D-Bus bus '%s': %m", bus);
        r = sd_bus_request_name_async(ret->bus, NULL, BUS_NAME,
                                      getenv("SLOTD_REEXECUTED") ? SD_BUS_NAME_QUEUE : 0,
                                      on_early_name_reply, ret);
        (void) unsetenv("SLOTD_REEXECUTED");
        if (r < 0)
                return log_error_errno(r, "Failed to acquire %s on bus '%s': %m", BUS_NAME, bus);
        return 0;
}

void bus_early_done(BusEarly *e) {
        e->bus = sd_bus_close_unref(e->bus);
}

/* Until RequestName is answered, one message at a time: what comes after the answer (calls
 * to the name) stays queued for the event loop. sd-bus times the call out (25 s). */
static int bus_early_wait(BusEarly *e) {
        int r;

        while (!e->answered) {
                r = sd_bus_process(e->bus, NULL);
                if (r < 0)
                        return r;
                if (r == 0 && (r = sd_bus_wait(e->bus, UINT64_MAX)) < 0 && r != -EINTR)
                        return r;
        }
        return e->answer;
}

/* At start-up: a bus that cannot be reached, or a name that is taken, ends slotd (nothing
 * runs yet, and READY=1 promises the name). */
int bus_door_setup(BusDoor *d, const char *bus, BusEarly *early) {
        int r;

        d->address = strdup(bus);
        if (!d->address)
                return log_oom();
        r = bus_early_wait(early);
        d->bus = TAKE_PTR(early->bus);
        if (r == -EEXIST)
                return log_error_errno(r, "The name %s is taken on bus '%s': is another slotd "
                                          "running?", BUS_NAME, bus);
        if (r < 0)
                return log_error_errno(r, "Failed to acquire %s on bus '%s': %m", BUS_NAME, bus);
        return bus_door_register(d);
}

void bus_door_done(BusDoor *d) {
        bus_door_callers_done(d);
        d->retry = sd_event_source_disable_unref(d->retry);
        d->bus = sd_bus_flush_close_unref(d->bus);
        d->address = mfree(d->address);
        for (size_t i = 0; i < d->n_slots; i++)
                free(d->slots[i]);
        d->slots = mfree(d->slots);
        d->n_slots = 0;
}
