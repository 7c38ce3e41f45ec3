/* SPDX-License-Identifier: MIT */
#pragma once

/* The pure half of the registry: slotd's properties into its model of the Manager and the
 * slots, the model into SPEC §13's documents, and the changes the registry makes to an
 * allocation record. No I/O, no logging. */

#include <stdbool.h>
#include <stdint.h>

#include "docs.h"
#include "registry.h"

/* One D-Bus property value, as read from a variant. */
typedef struct RegValue {
        char type; /* 's', 'b', 'q', 'u', 't', 'a' (as) */
        union {
                const char *s;
                bool b;
                uint16_t q;
                uint32_t u;
                uint64_t t;
                char *const *strv;
        };
} RegValue;

/* Sets the field behind a property of a slot (or of the Manager). 1 when the value changed,
 * 0 when it did not or the property is not one the documents carry (or has another type),
 * -ENOMEM. */
int reg_slot_set(RegSlot *s, const char *name, const RegValue *v);
int reg_machine_set(RegMachine *m, const char *name, const RegValue *v);
/* Whether a change of this Manager property changes every slot's document (draining and the
 * addresses are in each). */
bool reg_machine_property_in_slots(const char *name);

RegSlot *reg_slot_free(RegSlot *s);
void reg_machine_done(RegMachine *m);

/* The documents, pointing into the model (nothing to free). regions: the fleets' region IDs,
 * NULL-terminated (may be NULL). */
void reg_slot_doc(const RegMachine *m, const RegSlot *s, SlotDoc *ret);
void reg_machine_doc(const RegMachine *m, char *const *regions, uint64_t idle_ttl_sec,
                     usec_t registered_at, MachineDoc *ret);

/* The record once its host has allocated it through slotd: fulfilled at 'now', on this
 * machine and slot, with the slot's address and port. */
int reg_record_fulfil(AllocationRecord *rec, const RegMachine *m, const RegSlot *s, usec_t now);
/* The record after this machine refused its claim: machine_id added to excluded (once). */
int reg_record_exclude(AllocationRecord *rec, const char *machine_id);
/* Whether the record is fulfilled on this slot already. */
bool reg_record_fulfilled_here(const AllocationRecord *rec, const char *machine_id,
                               uint32_t slot_id);
