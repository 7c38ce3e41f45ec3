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

typedef struct BusDoor BusDoor;

/* What the door keeps of one slot (by its id, bus_door_slot()): the object its D-Bus calls
 * find, and what the bus last heard of its state (SlotChanged). */
typedef struct BusSlot {
        BusDoor *door;
        unsigned id;
        SlotState announced_state;
        ProcessState announced_process_state;
} BusSlot;

/* The door: made by main.c, given to the core's hooks as their userdata, it outlives the
 * Manager it serves. */
struct BusDoor {
        Manager *manager;
        sd_bus *bus;                 /* NULL while the bus is away (bus-connection.c) */
        char *address;               /* --bus or supervisor.bus, to reconnect to */
        sd_event_source *retry;      /* the next reconnection, with back-off */
        usec_t retry_delay;
        usec_t lost_at;              /* CLOCK_MONOTONIC */
        unsigned attempts;
        bool name_taken_logged;
        Hashmap callers;             /* what the bus said of each caller (bus-caller.c) */
        sd_bus_message *authorized_msg; /* the call being re-run after an admin check */
        BusSlot **slots;             /* by slot id, made when first needed */
        size_t n_slots;
};

/* The record of slot 'id' (made on first use: announced as slot_new() leaves a slot), NULL
 * when out of memory; and the slot it names, NULL if there is none now. */
BusSlot *bus_door_slot(BusDoor *d, unsigned id);
Slot *bus_slot_get(const BusSlot *bs);

/* A slot's object path, /org/slotd/Supervisor1/slot/<id>, in 'buf'. */
#define BUS_SLOT_PATH_MAX (sizeof(BUS_SLOT_PREFIX "/") + 10) /* 10: digits of UINT_MAX */
const char *bus_slot_path(char buf[static BUS_SLOT_PATH_MAX], unsigned id);
#define BUS_SLOT_PATH(id) bus_slot_path((char[BUS_SLOT_PATH_MAX]){}, (id))

/* The connection (bus-connection.c). bus_connect() opens one to 'bus' and asks for the name
 * without waiting (authentication, Hello and RequestName go out at once), so that main.c
 * opens it first thing and the bus daemon answers while slotd sets up. bus_door_setup()
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
int bus_door_setup(BusDoor *d, const char *bus, BusEarly *early);
/* The connection, the callers and the slots' records: d may be set up again. */
void bus_door_done(BusDoor *d);

/* Its ManagerHooks (manager-hooks.h), userdata the BusDoor: PropertiesChanged and the
 * Manager's signals. */
void bus_door_machine_changed(Manager *m, unsigned changes, void *userdata);
void bus_door_slot_changed(Manager *m, Slot *s, unsigned changes, void *userdata);
void bus_door_slot_crashed(Manager *m, Slot *s, const char *reason, void *userdata);
void bus_door_misbehaved(Manager *m, Slot *s, CheckKind check, unsigned strikes,
                         void *userdata);
void bus_door_machine_fault(Manager *m, Fleet *f, CheckKind check, unsigned failing,
                            unsigned checked, void *userdata);

/* Who calls (bus-caller.c). */
int bus_door_watch_callers(BusDoor *d);
void bus_door_callers_done(BusDoor *d);
/* 1: authorized now; 0: being checked, the method runs again with the answer; < 0: denied
 * (error set). slot_id is the slot of a slot method, UINT_MAX for the Manager's. */
int bus_check_admin(sd_bus_message *msg, BusDoor *d, sd_bus_message_handler_t handler,
                    unsigned slot_id, sd_bus_error *error);
/* 1 and *ret; 0: being asked, the method runs again with the answer; < 0: error set. */
int bus_caller(sd_bus_message *msg, BusDoor *d, sd_bus_message_handler_t handler,
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
