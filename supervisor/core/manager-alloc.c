/* SPDX-License-Identifier: MIT */
/* The allocation side of the manager (SPEC §7): which slot an allocation or reservation
 * takes, the UUID index, holds, the machine's TTL and draining. */
#include <systemd/sd-id128.h>

#include "log.h"
#include "manager.h"
#include "manager-metrics.h"
#include "wallclock.h"

Fleet *manager_find_fleet(Manager *m, const char *name) {
        for (size_t i = 0; i < m->n_fleets; i++)
                if (!m->fleets[i]->retired && streq(m->fleets[i]->config->name, name))
                        return m->fleets[i];
        return NULL;
}

int manager_uuid_link(Manager *m, const char *uuid, Slot *s) {
        return hashmap_put(&m->uuids, uuid, s);
}

void manager_uuid_unlink(Manager *m, const char *uuid, Slot *s) {
        (void) hashmap_remove(&m->uuids, uuid, s);
}

Slot *manager_slot_by_uuid(Manager *m, const char *uuid) {
        return hashmap_get(&m->uuids, uuid);
}

static int manager_on_ttl_timer(sd_event_source *source, uint64_t usec, void *userdata);

/* Recomputes Deprovisionable and arms the timer for its next possible change. */
void manager_update_ttl(Manager *m) {
        usec_t now = now_usec(CLOCK_BOOTTIME), next;
        bool d = ttl_deprovisionable(m->idle_since, m->config->idle_ttl, m->hold_until, now, &next);
        int r;

        if (d != m->deprovisionable) {
                m->deprovisionable = d;
                if (d)
                        log_info("Machine is deprovisionable: idle for %s, no hold",
                                 "machine.idle_ttl");
                /* The doors announce the change, and the Deprovisionable signal with it. */
                manager_hook(m, machine_changed, MACHINE_CHANGE_DEPROVISIONABLE);
        }
        /* Allocations flip the machine between busy and idle all the time; re-arming the
         * timer each time would reprogram the kernel's timer on every call. A timer that is
         * armed for earlier than needed stays: it fires once, finds nothing due, and is
         * armed again (or not) from here. */
        if (next == USEC_INFINITY)
                return;
        usec_t when = next, armed;
        int enabled = SD_EVENT_OFF;

        if (m->ttl_timer) {
                if (sd_event_source_get_enabled(m->ttl_timer, &enabled) >= 0 && enabled != SD_EVENT_OFF &&
                    sd_event_source_get_time(m->ttl_timer, &armed) >= 0 && armed <= when)
                        return;
                r = sd_event_source_set_time(m->ttl_timer, when);
                if (r >= 0)
                        r = sd_event_source_set_enabled(m->ttl_timer, SD_EVENT_ONESHOT);
        } else
                r = sd_event_add_time(m->event, &m->ttl_timer, CLOCK_BOOTTIME, when, USEC_PER_MSEC,
                                      manager_on_ttl_timer, m);
        if (r < 0)
                log_error_errno(r, "Failed to arm the TTL timer: %m");
}

static int manager_on_ttl_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        manager_update_ttl(userdata);
        return 0;
}

void manager_set_busy(Manager *m, Slot *s, bool busy) {
        if (busy == s->counted_busy)
                return;
        s->counted_busy = busy;
        if (busy)
                m->n_busy++;
        else
                m->n_busy--;
        if (m->n_busy == 0 && m->idle_since == 0) {
                m->idle_since = now_usec(CLOCK_BOOTTIME);
                manager_hook(m, machine_changed, MACHINE_CHANGE_IDLE_SINCE);
        } else if (m->n_busy > 0 && m->idle_since != 0) {
                m->idle_since = 0;
                manager_hook(m, machine_changed, MACHINE_CHANGE_IDLE_SINCE);
        }
        manager_update_ttl(m);
}

void manager_slot_changed(Manager *m, Slot *s, bool durable) {
        SlotFacts f;

        slot_update_arming(s);
        f = slot_facts(s);
        if (s->retired)
                alloc_index_remove(&s->fleet->index, &s->alloc_entry);
        else
                alloc_index_set(&s->fleet->index, &s->alloc_entry, alloc_class_from_facts(&f));
        manager_set_busy(m, s, f.allocated || f.reserved);
        manager_metrics_slot_changed(m, s);
        manager_track_allocation(m, s);
        if (durable)
                manager_state_slot_changed(m, s);
        manager_announce_slot(m, s, 0);
}

/* The doors hear of a slot's change (0: of its state as a whole; else a SlotChange mask), but
 * not during a fresh start's provisioning: no one can have seen the slots before (the loop,
 * which answers calls, has not run), and each start would otherwise build every property of
 * its slot into a PropertiesChanged that no one needs (about half of provisioning). As with
 * any new owner of the name, a client reads the slots when slotd appears. */
void manager_announce_slot(Manager *m, Slot *s, unsigned changes) {
        if (!m->unseen)
                manager_hook(m, slot_changed, s, changes);
}

void manager_hold_started(Manager *m, usec_t until) {
        if (until <= m->hold_until)
                return;
        m->hold_until = until;
        manager_hook(m, machine_changed, MACHINE_CHANGE_HOLD_UNTIL);
        manager_update_ttl(m);
}

void manager_hold_ended(Manager *m, usec_t until) {
        usec_t furthest = 0;

        /* Only the end of the furthest hold moves the machine's; then the next furthest is
         * looked for. Holds end rarely next to allocations, so the walk is affordable. */
        if (until < m->hold_until)
                return;
        for (size_t i = 0; i < m->n_slots; i++)
                if (m->slots[i])
                        furthest = MAX(furthest, m->slots[i]->hold_until);
        if (furthest != m->hold_until) {
                m->hold_until = furthest;
                manager_hook(m, machine_changed, MACHINE_CHANGE_HOLD_UNTIL);
        }
        manager_update_ttl(m);
}

static bool entry_runs_configuration(const AllocEntry *e, void *userdata) {
        const Slot *s = container_of(e, Slot, alloc_entry);
        return streq(s->build_configuration, (const char *) userdata);
}

static int pick(Fleet *f, const char *build_configuration, Slot **ret) {
        AllocEntry *e = alloc_index_pick(&f->index, entry_runs_configuration,
                                         (void *) build_configuration);
        if (!e)
                return -ENOSPC;
        *ret = container_of(e, Slot, alloc_entry);
        return 0;
}

int manager_allocate(Manager *m, const char *fleet, const char *uuid, const char *build_configuration,
                     bool restart, Slot **ret) {
        const char *bc;
        Fleet *f;
        Slot *s = manager_slot_by_uuid(m, uuid);
        int r;

        if (s && streq_ptr(s->allocation_uuid, uuid)) {
                /* The same UUID twice is the same allocation (an allocator's retry). */
                *ret = s;
                return 0;
        }
        if (s) {
                /* A reservation for this UUID: the allocation takes its slot. */
                r = slot_allocate(s, uuid,
                                  build_configuration && *build_configuration ? build_configuration : NULL,
                                  restart);
                if (r < 0)
                        return r;
                *ret = s;
                return 0;
        }
        f = manager_find_fleet(m, fleet);
        if (!f)
                return -EINVAL;
        bc = build_configuration && *build_configuration ? build_configuration
                                                        : f->config->build_configuration;
        if (!fleet_config_find_build(f->config, bc))
                return -ENOENT;
        /* A slot whose keeper has just restarted its server (slot_disarm()) is not the ready
         * one it looked like: it goes busy, and the next is picked. */
        for (;;) {
                r = pick(f, bc, &s);
                if (r < 0)
                        return r;
                if (slot_disarm(s) != -ECHILD)
                        break;
                manager_slot_changed(m, s, false);
        }
        r = slot_allocate(s, uuid, bc, restart);
        *ret = s; /* on failure too: the slot that refused (its server.json, slot-alloc.c) */
        return r;
}

int manager_reserve(Manager *m, const char *fleet, const char *uuid, usec_t timeout, Slot **ret) {
        Slot *s = manager_slot_by_uuid(m, uuid);
        Fleet *f;
        int r;

        if (s) {
                /* Reserved or allocated already: the caller's retry gets the same slot. */
                *ret = s;
                return 0;
        }
        f = manager_find_fleet(m, fleet);
        if (!f)
                return -EINVAL;
        r = pick(f, f->config->build_configuration, &s);
        if (r < 0)
                return r;
        r = slot_reserve(s, uuid, timeout);
        if (r < 0)
                return r;
        *ret = s;
        return 0;
}

int manager_set_draining(Manager *m, bool draining) {
        if (m->draining == draining)
                return 0;
        m->draining = draining;
        log_info("Draining %s", draining ? "on: no new allocations or reservations" : "off");
        manager_hook(m, machine_changed, MACHINE_CHANGE_DRAINING);
        manager_state_dirty(m);
        return 0;
}

bool manager_payload_keep(const char *uuid, usec_t *given_at, void *userdata) {
        Slot *s = manager_slot_by_uuid(userdata, uuid);

        if (!s || !streq_ptr(s->allocation_uuid, uuid))
                return false;
        if (s->restored_payload_at)
                *given_at = s->restored_payload_at;
        return true;
}

void manager_state_clock(StateRecord *rec) {
        sd_id128_t id = SD_ID128_NULL;

        /* Without a boot ID (no /proc), every boot looks the same: times are taken as they
         * are, which is right unless the machine rebooted. */
        if (sd_id128_get_boot(&id) < 0)
                id = SD_ID128_NULL;
        (void) sd_id128_to_string(id, rec->boot_id);
        rec->wall_offset = wall_offset();
}

void manager_state_rebase(StateRecord *rec) {
        StateRecord now = {};

        manager_state_clock(&now);
        switch (state_record_rebase(rec, now.boot_id, now.wall_offset)) {
        case STATE_CLOCK_SAME_BOOT:
                /* The offset the last slotd showed times with, unless the wall clock was
                 * stepped since: the same deadlines show the same. */
                wall_offset_seed(rec->wall_offset);
                break;
        case STATE_CLOCK_OTHER_BOOT:
                log_notice("The state file is from an earlier boot: its holds, reservations and "
                           "idle clock are carried over through the wall clock");
                break;
        case STATE_CLOCK_REALTIME:
                log_info("The state file keeps times in real time (an older slotd): converted "
                         "to CLOCK_BOOTTIME");
                break;
        }
}
