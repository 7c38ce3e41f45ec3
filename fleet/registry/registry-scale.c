/* SPDX-License-Identifier: MIT */
/* One command of the scaler (SPEC §13, The scaler): <prefix>/hosts/<machineID>/scale/<slotID>
 * = {"action":"start"|"stop","fleetId"}, carried out with slotd's own Start() or StopIfFree()
 * on the slot's object, then deleted (if unchanged) whatever came of it: the leader plans again
 * from the slot's document, and writes no command on a slot whose command key still exists. A
 * stop of a slot that is allocated, reserved or held, or that a claim is being carried out on,
 * is refused (logged): the leader's compares saw it free, but it may have been given away since.
 * The registry's copy of slotd's state may be behind it, so a stop is slotd's StopIfFree(), which
 * slotd itself refuses (InvalidState) if the slot was allocated, reserved or held meanwhile. */
#include <inttypes.h>

#include "log.h"
#include "registry-hostkey.h"

static bool slot_busy(const Registry *r, const RegSlot *s) {
        if (streq_ptr(s->state, "allocated") || streq_ptr(s->state, "reserved") ||
            streq_ptr(s->state, "held") || strempty(s->allocation_uuid)[0] != '\0')
                return true;
        for (const RegHostKey *h = r->host_list; h; h = h->next)
                if (h->kind == REG_CLAIM && h->slot_id == s->id && h->mod_revision != 0)
                        return true;
        return false;
}

static int on_scaled(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        RegHostKey *k = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        k->call = sd_bus_slot_unref(k->call);
        if (e && !slotd_error_is_refusal(e)) {
                log_warning("The scaler's command %s got no answer from slotd: %s", k->key,
                            e->message ?: e->name);
                host_key_work_done(k, host_key_unreached(k));
                return 0;
        }
        if (e)
                log_notice("slotd refused the scaler's command %s: %s", k->key,
                           e->message ?: e->name);
        else
                log_info("The scaler's command %s carried out", k->key);
        /* With the slot's document as slotd's signals (sent before its answer) left it: the
         * leader must not see the command gone and the slot still stopped (or still running),
         * or it plans the same change again. */
        host_key_delete_with_doc(k);
        return 0;
}

static void scale_refuse(RegHostKey *k, const char *why) {
        log_notice("Refusing the scaler's command %s: %s", k->key, why);
        host_key_delete(k);
}

void scale_start(RegHostKey *k) {
        _cleanup_(scale_doc_done) ScaleDoc d = {};
        Registry *r = k->registry;
        RegSlot *s;

        if (scale_doc_parse(k->value, strlen(k->value), &d) < 0) {
                scale_refuse(k, "not a command document");
                return;
        }
        if (!r->synced) {
                host_key_work_done(k, WORK_WAIT);
                return;
        }
        s = registry_slot(r, k->slot_id);
        if (!s || !s->known || !streq_ptr(s->fleet, d.fleet_id)) {
                scale_refuse(k, s && s->known ? "the slot is of another fleet"
                                              : "no such slot on this machine");
                return;
        }
        if (d.action == SCALE_STOP && slot_busy(r, s)) {
                scale_refuse(k, "the slot is allocated, reserved, held or being claimed");
                return;
        }
        if (registry_bus_slot_call(r, k->slot_id, d.action == SCALE_STOP ? "StopIfFree" : "Start",
                                   on_scaled, k, &k->call) < 0)
                host_key_work_done(k, host_key_unreached(k));
}
