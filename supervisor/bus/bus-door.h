/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-bus.h>

#include "manager.h"
#include "manager-hooks.h"
#include "manager-metrics.h"

/* The D-Bus door (SPEC §4): org.slotd.Supervisor1 on the system bus, or the one of
 * supervisor.bus. It parses a call, finds out who calls, calls an operation (ops.h), and
 * formats its answer; it tells the bus what the core says changed (its ManagerHooks). */

#define BUS_NAME "org.slotd.Supervisor1"
#define BUS_PATH "/org/slotd/Supervisor1"
#define BUS_MANAGER_INTERFACE "org.slotd.Supervisor1.Manager"
#define BUS_SLOT_INTERFACE "org.slotd.Supervisor1.Slot"
#define BUS_SLOT_PREFIX "/org/slotd/Supervisor1/slot"
#define BUS_ERROR_PREFIX "org.slotd.Supervisor1.Error."

/* A slot's object path, /org/slotd/Supervisor1/slot/<id>, in 'buf'. */
#define BUS_SLOT_PATH_MAX (sizeof(BUS_SLOT_PREFIX "/") + 10) /* 10: digits of UINT_MAX */
const char *bus_slot_path(char buf[static BUS_SLOT_PATH_MAX], unsigned id);
#define BUS_SLOT_PATH(id) bus_slot_path((char[BUS_SLOT_PATH_MAX]){}, (id))

/* The connection (bus-connection.c). bus_connect() opens one to 'bus' and asks for the name
 * without waiting (authentication, Hello and RequestName go out at once), so that main.c
 * opens it first thing and the bus daemon answers while slotd sets up. manager_bus_setup()
 * waits for the answer, takes the connection and registers the objects (nothing is
 * dispatched before the event loop runs), then keeps it, reconnecting with back-off while
 * the bus is away. */
typedef struct BusEarly {
        sd_bus *bus;
        bool answered;
        int answer; /* as sd_bus_request_name() returns: 1 ours, 0 queued, -EEXIST taken… */
} BusEarly;
int bus_connect(const char *bus, BusEarly *ret);
void bus_early_done(BusEarly *e);
int manager_bus_setup(Manager *m, const char *bus, BusEarly *early);
void manager_bus_done(Manager *m);

/* Its ManagerHooks (manager-hooks.h): PropertiesChanged and the Manager's signals. */
void manager_bus_machine_changed(Manager *m, unsigned changes, void *userdata);
void manager_bus_slot_changed(Manager *m, Slot *s, unsigned changes, void *userdata);
void manager_bus_slot_crashed(Manager *m, Slot *s, const char *reason, void *userdata);
void manager_bus_misbehaved(Manager *m, Slot *s, CheckKind check, unsigned strikes,
                            void *userdata);
void manager_bus_machine_fault(Manager *m, Fleet *f, CheckKind check, unsigned failing,
                               unsigned checked, void *userdata);

/* Who calls (bus-caller.c). */
int manager_bus_watch_callers(Manager *m);
void manager_bus_callers_done(Manager *m);
/* 1: authorized now; 0: being checked, the method runs again with the answer; < 0: denied
 * (error set). slot_id is the slot of a slot method, UINT_MAX for the Manager's. */
int bus_check_admin(sd_bus_message *msg, Manager *m, sd_bus_message_handler_t handler,
                    unsigned slot_id, sd_bus_error *error);
/* 1 and *ret; 0: being asked, the method runs again with the answer; < 0: error set. */
int bus_caller(sd_bus_message *msg, Manager *m, sd_bus_message_handler_t handler,
               unsigned slot_id, OpsCaller *ret, sd_bus_error *error);
int bus_error_from_ops(sd_bus_error *error, int r, const OpsStatus *st);
int bus_read_allocate_options(sd_bus_message *msg, OpsAllocation *a, sd_bus_error *error);

/* Sends 'reply' to 'call' once the state is durable (manager_when_durable(), a group
 * commit); takes both refs. On a failed commit the caller gets an error instead. */
int bus_reply_durable(Manager *m, sd_bus_message *call, sd_bus_message *reply);
/* The same for a request the metrics time (SPEC §14): once replied, the time since 'started'
 * (CLOCK_MONOTONIC) goes into the latency histogram of 'request'. */
int bus_reply_durable_timed(Manager *m, sd_bus_message *call, sd_bus_message *reply,
                            MetricsRequest request, usec_t started);
int bus_reply_slot_durable(sd_bus_message *msg, Manager *m, Slot *s);
int bus_reply_empty_durable(sd_bus_message *msg, Manager *m);

extern const sd_bus_vtable manager_vtable[];
extern const sd_bus_vtable slot_vtable[];
int slot_bus_find(sd_bus *bus, const char *path, const char *interface, void *userdata,
                  void **ret_found, sd_bus_error *error);
int slot_bus_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***ret_nodes,
                       sd_bus_error *error);
