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

static void manager_bus_schedule_retry(Manager *m);

/* The connection is gone (or the name could not be had on it): every name the old daemon
 * gave out means nothing on the next one, so what was learnt of callers goes too. Replies
 * still waiting for a commit keep their own reference to the old connection, and sending
 * them there fails quietly: their callers were disconnected with it. */
static void manager_bus_lost(Manager *m, const char *why) {
        m->bus = sd_bus_flush_close_unref(m->bus);
        manager_bus_callers_done(m);
        if (manager_fault_raise(m, "bus", "%s on bus '%s'; reconnecting", why, m->bus_address))
                m->bus_name_taken_logged = false;
        manager_bus_schedule_retry(m);
}

static int on_bus_disconnected(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;

        if (sd_bus_message_get_bus(msg) == m->bus)
                manager_bus_lost(m, "lost the connection");
        return 0;
}

/* Objects, the callers' watch and our own disconnection, on the fresh connection m->bus. */
static int manager_bus_register(Manager *m) {
        int r;

        r = sd_bus_add_object_vtable(m->bus, NULL, BUS_PATH, BUS_MANAGER_INTERFACE, manager_vtable, m);
        if (r >= 0)
                r = sd_bus_add_fallback_vtable(m->bus, NULL, BUS_SLOT_PREFIX, BUS_SLOT_INTERFACE,
                                               slot_vtable, slot_bus_find, m);
        if (r >= 0)
                r = sd_bus_add_node_enumerator(m->bus, NULL, BUS_SLOT_PREFIX, slot_bus_enumerate, m);
        if (r < 0)
                return log_error_errno(r, "Failed to register the D-Bus objects: %m");
        /* sd-bus tells of the end of a connection with this local signal. */
        r = sd_bus_match_signal_async(m->bus, NULL, "org.freedesktop.DBus.Local",
                                      "/org/freedesktop/DBus/Local", "org.freedesktop.DBus.Local",
                                      "Disconnected", on_bus_disconnected, NULL, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch for the end of the bus connection: %m");
        r = sd_bus_attach_event(m->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Failed to attach the bus to the event loop: %m");
        r = manager_bus_watch_callers(m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch NameOwnerChanged on bus '%s': %m",
                                       m->bus_address);
        return 0;
}

/* Once per reconnection, O(slots): whoever watches slotd learns everything that changed
 * while the bus was away. Signals sent meanwhile were lost with the connection. */
static void manager_bus_announce(Manager *m) {
        int r;

        r = sd_bus_emit_properties_changed_strv(m->bus, BUS_PATH, BUS_MANAGER_INTERFACE, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to announce the Manager's properties: %m");
        for (size_t i = 0; i < m->n_slots; i++)
                if (m->slots[i])
                        manager_bus_slot_changed(m, m->slots[i], 0, NULL);
}

static int on_name_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        const sd_bus_error *e;
        uint32_t answer = 0;
        usec_t lasted;

        if (sd_bus_message_get_bus(reply) != m->bus)
                return 0;
        e = sd_bus_message_get_error(reply);
        if (e) {
                log_debug("RequestName(%s) failed on bus '%s': %s", BUS_NAME, m->bus_address,
                          e->message ?: e->name);
                manager_bus_lost(m, "could not acquire " BUS_NAME);
                return 0;
        }
        if (sd_bus_message_read(reply, "u", &answer) < 0 ||
            (answer != NAME_PRIMARY_OWNER && answer != NAME_ALREADY_OWNER)) {
                if (!m->bus_name_taken_logged)
                        log_error("The name %s is taken on bus '%s' by another connection: is "
                                  "another slotd running? Trying again until it is free",
                                  BUS_NAME, m->bus_address);
                m->bus_name_taken_logged = true;
                manager_bus_lost(m, BUS_NAME " is owned by another connection");
                return 0;
        }
        lasted = now_usec(CLOCK_MONOTONIC) - m->bus_lost_at;
        log_info("Reconnected to bus '%s' after %" PRIu64 ".%03" PRIu64 " s and %u attempts; "
                 "%s is ours again", m->bus_address, lasted / USEC_PER_SEC,
                 lasted % USEC_PER_SEC / USEC_PER_MSEC, m->bus_attempts, BUS_NAME);
        m->bus_retry_delay = 0;
        m->bus_attempts = 0;
        (void) manager_fault_clear(m, "bus");
        manager_bus_announce(m);
        return 0;
}

/* A new connection to the same address, from the event loop: every step is asynchronous
 * (the connect of a local socket does not wait; the authentication, Hello and RequestName
 * are answered through the loop). */
static int manager_bus_reconnect(Manager *m) {
        int r;

        r = bus_open(m->bus_address, &m->bus);
        if (r < 0)
                return r;
        r = manager_bus_register(m);
        if (r >= 0)
                r = sd_bus_request_name_async(m->bus, NULL, BUS_NAME, 0, on_name_reply, m);
        if (r < 0)
                m->bus = sd_bus_flush_close_unref(m->bus);
        return r;
}

static int on_bus_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        int r;

        m->bus_attempts++;
        r = manager_bus_reconnect(m);
        if (r < 0) {
                log_debug_errno(r, "Reconnecting to bus '%s' (attempt %u) failed: %m",
                                m->bus_address, m->bus_attempts);
                (void) manager_fault_raise(m, "bus", "lost the connection on bus '%s'; "
                                           "reconnecting (last attempt: %s)", m->bus_address,
                                           strerror(-r));
                manager_bus_schedule_retry(m);
        }
        return 0;
}

static void manager_bus_schedule_retry(Manager *m) {
        usec_t delay = m->bus_retry_delay == 0 ? BUS_RETRY_FIRST_USEC
                                               : MIN(m->bus_retry_delay * 2, BUS_RETRY_MAX_USEC);
        int r;

        if (m->bus_attempts == 0)
                m->bus_lost_at = now_usec(CLOCK_MONOTONIC);
        m->bus_retry_delay = delay;
        if (m->bus_retry) {
                r = sd_event_source_set_time_relative(m->bus_retry, delay);
                if (r >= 0)
                        r = sd_event_source_set_enabled(m->bus_retry, SD_EVENT_ONESHOT);
        } else
                r = sd_event_add_time_relative(m->event, &m->bus_retry, CLOCK_MONOTONIC, delay,
                                               USEC_PER_MSEC, on_bus_retry, m);
        if (r < 0)
                log_error_errno(r, "Failed to schedule a reconnection to bus '%s', slotd stays "
                                "off the bus: %m", m->bus_address);
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
int manager_bus_setup(Manager *m, const char *bus, BusEarly *early) {
        int r;

        m->bus_address = strdup(bus);
        if (!m->bus_address)
                return log_oom();
        r = bus_early_wait(early);
        m->bus = TAKE_PTR(early->bus);
        if (r == -EEXIST)
                return log_error_errno(r, "The name %s is taken on bus '%s': is another slotd "
                                          "running?", BUS_NAME, bus);
        if (r < 0)
                return log_error_errno(r, "Failed to acquire %s on bus '%s': %m", BUS_NAME, bus);
        return manager_bus_register(m);
}

void manager_bus_done(Manager *m) {
        m->bus_retry = sd_event_source_disable_unref(m->bus_retry);
        m->bus = sd_bus_flush_close_unref(m->bus);
        m->bus_address = mfree(m->bus_address);
}
