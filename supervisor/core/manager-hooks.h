/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

#include "alloc-event.h"
#include "checks.h"
#include "config.h"
#include "slot-host.h"

/* What the core tells the doors above it (the D-Bus door, bus/; the local proxy's slotd
 * side, proxy/): the core calls these, never a door's functions, so that arrows point down,
 * as slots call SlotHooks (slot-host.h). main.c fills them in; a hook left NULL is not
 * called. Each says what changed in the core's terms; the doors translate (property names and
 * signals, events to the proxy). 'userdata' is the one given to manager_set_hooks(). */

typedef struct Manager Manager;

/* What changed of the machine (a mask for machine_changed()). */
typedef enum MachineChange {
        MACHINE_CHANGE_DRAINING        = 1u << 0,
        MACHINE_CHANGE_IDLE_SINCE      = 1u << 1, /* m->idle_since */
        MACHINE_CHANGE_HOLD_UNTIL      = 1u << 2, /* the furthest hold, m->hold_until */
        MACHINE_CHANGE_DEPROVISIONABLE = 1u << 3, /* m->deprovisionable, either way */
        MACHINE_CHANGE_FAULTS          = 1u << 4, /* m->faults, a fault raised, changed, cleared */
        MACHINE_CHANGE_FLEETS          = 1u << 5, /* the fleets (Reload) */
        MACHINE_CHANGE_SLOT_COUNT      = 1u << 6, /* m->n_live_slots */
        MACHINE_CHANGE_CPUS            = 1u << 7, /* m->resources (Reload) */
        MACHINE_CHANGE_MEMORY          = 1u << 8,
        _MACHINE_CHANGE_ALL            = (1u << 9) - 1,
} MachineChange;

typedef struct ManagerHooks {
        /* The doors open once the slots and their restored state are in place, before the
         * slots are provisioned and the first commit (manager_startup()); each hook logs its
         * own error. Closed when the manager goes, after its last commit and its waiters. */
        int (*open_doors)(Manager *m, void *userdata);
        void (*close_doors)(Manager *m, void *userdata);
        /* The machine's facts of 'changes' (a MachineChange mask) changed, in that order. */
        void (*machine_changed)(Manager *m, unsigned changes, void *userdata);
        /* A slot changed: its state as a whole (changes 0: any of its facts may have), or
         * only the facts of the SlotChange mask 'changes'. */
        void (*slot_changed)(Manager *m, Slot *s, unsigned changes, void *userdata);
        /* The slot's server crashed (s->exit_code, s->exit_signal); 'reason' the cause, or "". */
        void (*slot_crashed)(Manager *m, Slot *s, const char *reason, void *userdata);
        /* A check of the slot failed: its strikes within checks.window, this one included. */
        void (*slot_misbehaved)(Manager *m, Slot *s, CheckKind check, unsigned strikes,
                                void *userdata);
        /* A round of a fleet's check found the machine at fault (raised, not repeated). */
        void (*machine_fault)(Manager *m, Fleet *f, CheckKind check, unsigned failing,
                              unsigned checked, void *userdata);
        /* An allocation event is durable: the slot's game server may hear of it. */
        void (*event)(Manager *m, const AllocEvent *e, void *userdata);
        /* Reload: metrics.listen is 'l' (family AF_UNSPEC: off; is_default: the key is not
         * set), asked on every Reload (the doors know whether it changes what they serve),
         * before the new configuration replaces the old: 0 it serves there now (or,
         * for a default that cannot be bound, nowhere), else nothing changed and *ret_error
         * says why, naming the address; the Reload is refused. */
        int (*metrics_listen)(Manager *m, const ProxyListen *l, bool is_default,
                              char **ret_error, void *userdata);
} ManagerHooks;

/* Before manager_startup(); 'hooks' must outlive the manager. */
void manager_set_hooks(Manager *m, const ManagerHooks *hooks, void *userdata);
