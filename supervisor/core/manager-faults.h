/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

#include "time-util.h"

/* Faults of the host (SPEC §10): what slotd knows is wrong with the machine rather than with a
 * game server, such as a state directory that takes no more writes, or most of a fleet failing
 * one check in one sweep. Each fault has a key ("state_dir", "check:query:game", ...) and a
 * message that says why; the Manager's Faults property lists them as "key: message". Raising and
 * clearing are each logged once. There are few at a time (bounded by fleets × checks plus a
 * handful of machine-wide ones), so a list is searched. */
typedef struct HostFault {
        char *key;
        char *message;
        usec_t since;                /* CLOCK_MONOTONIC */
} HostFault;

struct Manager;

/* Raises or updates the fault KEY. Returns true when it is new (then it was logged as a warning
 * and PropertiesChanged(Faults) was emitted); an update of the message is emitted, not logged. */
_printf_(3, 4) bool manager_fault_raise(struct Manager *m, const char *key, const char *format, ...);
/* Clears KEY; true when it was raised (then "cleared after N s" is logged and emitted). */
bool manager_fault_clear(struct Manager *m, const char *key);
bool manager_fault_active(const struct Manager *m, const char *key);
void manager_faults_done(struct Manager *m);
