/* SPDX-License-Identifier: MIT */
/* slotd's properties into the registry's model, and the model into documents (pure). */
#include <stddef.h>

#include "macro.h"
#include "registry-state.h"
#include "strv.h"

/* The properties the documents carry, each with its D-Bus type and its field. */
typedef struct RegProperty {
        const char *name;
        char type;
        size_t offset;
} RegProperty;

#define SLOT_PROPERTY(n, t, f) { n, t, offsetof(RegSlot, f) }
#define MACHINE_PROPERTY(n, t, f) { n, t, offsetof(RegMachine, f) }

static const RegProperty slot_properties[] = {
        SLOT_PROPERTY("Fleet", 's', fleet),
        SLOT_PROPERTY("RegionID", 's', region_id),
        SLOT_PROPERTY("State", 's', state),
        SLOT_PROPERTY("ProcessState", 's', process_state),
        SLOT_PROPERTY("AllocationUUID", 's', allocation_uuid),
        SLOT_PROPERTY("BuildConfiguration", 's', build_configuration),
        SLOT_PROPERTY("BuildConfigurations", 'a', build_configurations),
        SLOT_PROPERTY("Ready", 'b', ready),
        SLOT_PROPERTY("ReadyForPlayers", 'b', ready_for_players),
        SLOT_PROPERTY("Port", 'q', port),
        SLOT_PROPERTY("QueryPort", 'q', query_port),
        SLOT_PROPERTY("HoldUntilUSec", 't', hold_until),
        SLOT_PROPERTY("ReservedUntilUSec", 't', reserved_until),
};

static const RegProperty machine_properties[] = {
        MACHINE_PROPERTY("MachineID", 's', machine_id),
        MACHINE_PROPERTY("MachineNumber", 't', machine_number),
        MACHINE_PROPERTY("Version", 's', version),
        MACHINE_PROPERTY("IPv4", 's', ipv4),
        MACHINE_PROPERTY("IPv6", 's', ipv6),
        MACHINE_PROPERTY("Fleets", 'a', fleets),
        MACHINE_PROPERTY("Faults", 'a', faults),
        MACHINE_PROPERTY("Draining", 'b', draining),
        MACHINE_PROPERTY("Deprovisionable", 'b', deprovisionable),
        MACHINE_PROPERTY("IdleSinceUSec", 't', idle_since),
        MACHINE_PROPERTY("HoldUntilUSec", 't', hold_until),
        MACHINE_PROPERTY("SlotCount", 'u', slot_count),
};

static int set_field(const RegProperty *table, size_t n, void *base, const char *name,
                     const RegValue *v) {
        for (size_t i = 0; i < n; i++) {
                void *p = (char *) base + table[i].offset;
                int r;

                if (!streq(table[i].name, name))
                        continue;
                if (table[i].type != v->type)
                        return 0;
                switch (v->type) {
                case 's':
                        if (streq_ptr(*(char **) p, v->s))
                                return 0;
                        r = free_and_strdup((char **) p, v->s);
                        return r < 0 ? r : 1;
                case 'a': {
                        char **copy;

                        if (*(char ***) p && strv_equal(*(char ***) p, v->strv))
                                return 0;
                        copy = strv_copy(v->strv);
                        if (!copy)
                                return -ENOMEM;
                        strv_free(*(char ***) p);
                        *(char ***) p = copy;
                        return 1;
                }
#define SET_SCALAR(member, ctype)                                                               \
                        if (*(ctype *) p == v->member)                                          \
                                return 0;                                                       \
                        *(ctype *) p = v->member;                                               \
                        return 1;
                case 'b':
                        SET_SCALAR(b, bool);
                case 'q':
                        SET_SCALAR(q, uint16_t);
                case 'u':
                        SET_SCALAR(u, uint32_t);
                case 't':
                        SET_SCALAR(t, uint64_t);
#undef SET_SCALAR
                default:
                        return 0;
                }
        }
        return 0;
}

int reg_slot_set(RegSlot *s, const char *name, const RegValue *v) {
        return set_field(slot_properties, ELEMENTSOF(slot_properties), s, name, v);
}

int reg_machine_set(RegMachine *m, const char *name, const RegValue *v) {
        return set_field(machine_properties, ELEMENTSOF(machine_properties), m, name, v);
}

bool reg_machine_property_in_slots(const char *name) {
        return streq(name, "Draining") || streq(name, "IPv4") || streq(name, "IPv6") ||
               streq(name, "MachineID") || streq(name, "MachineNumber");
}

RegSlot *reg_slot_free(RegSlot *s) {
        if (!s)
                return NULL;
        free(s->fleet);
        free(s->region_id);
        free(s->state);
        free(s->process_state);
        free(s->allocation_uuid);
        free(s->build_configuration);
        strv_free(s->build_configurations);
        free(s->key);
        free(s->sent_doc);
        free(s);
        return NULL;
}

void reg_machine_done(RegMachine *m) {
        free(m->machine_id);
        free(m->version);
        free(m->ipv4);
        free(m->ipv6);
        strv_free(m->fleets);
        strv_free(m->faults);
        *m = (RegMachine){};
}

void reg_slot_doc(const RegMachine *m, const RegSlot *s, SlotDoc *ret) {
        *ret = (SlotDoc){
                .machine_id = m->machine_id,
                .machine_number = m->machine_number,
                .slot_id = s->id,
                .fleet_id = s->fleet,
                .region_id = s->region_id,
                .state = s->state,
                .process_state = s->process_state,
                .ready = s->ready,
                .ready_for_players = s->ready_for_players,
                .ready_for_players_at = s->ready_for_players ? s->ready_for_players_at : 0,
                .build_configuration_id = s->build_configuration,
                .build_configurations = slot_doc_builds_bounded(s->build_configurations),
                .ipv4 = m->ipv4,
                .ipv6 = m->ipv6,
                .game_port = s->port,
                .query_port = s->query_port,
                .allocation_id = s->allocation_uuid,
                .draining = m->draining,
                .hold_until = s->hold_until,
                .reserved_until = s->reserved_until,
        };
}

void reg_machine_doc(const RegMachine *m, char *const *regions, uint64_t idle_ttl_sec,
                     usec_t registered_at, MachineDoc *ret) {
        *ret = (MachineDoc){
                .machine_id = m->machine_id,
                .machine_number = m->machine_number,
                .ipv4 = m->ipv4,
                .ipv6 = m->ipv6,
                .fleets = m->fleets,
                .regions = (char **) regions,
                .draining = m->draining,
                .idle_since = m->idle_since,
                .hold_until = m->hold_until,
                .deprovisionable = m->deprovisionable,
                .idle_ttl_sec = idle_ttl_sec,
                .slots = m->slot_count,
                .faults = m->faults,
                .slotd = m->version,
                .registered_at = registered_at,
        };
}

int reg_record_fulfil(AllocationRecord *rec, const RegMachine *m, const RegSlot *s, usec_t now) {
        int r;

        r = free_and_strdup(&rec->machine_id, m->machine_id);
        if (r >= 0)
                r = free_and_strdup(&rec->ipv4, strempty(m->ipv4));
        if (r >= 0)
                r = free_and_strdup(&rec->ipv6, strempty(m->ipv6));
        if (r < 0)
                return r;
        rec->status = ALLOCATION_FULFILLED;
        rec->machine_number = m->machine_number;
        rec->slot_id = s->id;
        rec->game_port = s->port;
        rec->fulfilled = now;
        return 0;
}

int reg_record_exclude(AllocationRecord *rec, const char *machine_id) {
        if (strv_contains(rec->excluded, machine_id))
                return 0;
        return strv_extend(&rec->excluded, machine_id);
}

bool reg_record_fulfilled_here(const AllocationRecord *rec, const char *machine_id,
                               uint32_t slot_id) {
        return rec->status == ALLOCATION_FULFILLED && streq_ptr(rec->machine_id, machine_id) &&
               rec->slot_id == slot_id;
}

usec_t backoff_next(Backoff *b) {
        b->current = b->current == 0 ? b->first : MIN(b->current * 2, b->max);
        return b->current;
}

void backoff_reset(Backoff *b) {
        b->current = 0;
}
