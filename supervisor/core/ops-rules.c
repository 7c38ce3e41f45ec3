/* SPDX-License-Identifier: MIT */
/* The operations' rules that need no state but the facts they are given (ops.h): who may,
 * what an ID may hold, whether draining refuses. Pure: tests/unit/test-ops-rules.c. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc-id.h"
#include "ops.h"

static const char *const error_names[_OPS_ERROR_MAX] = {
        [OPS_OK] = "ok",
        [OPS_ERROR_ACCESS_DENIED] = "access-denied",
        [OPS_ERROR_NO_SUCH_SLOT] = "no-such-slot",
        [OPS_ERROR_NO_SUCH_ALLOCATION] = "no-such-allocation",
        [OPS_ERROR_INVALID_STATE] = "invalid-state",
        [OPS_ERROR_INVALID_ARGUMENT] = "invalid-argument",
        [OPS_ERROR_NO_CAPACITY] = "no-capacity",
        [OPS_ERROR_DRAINING] = "draining",
        [OPS_ERROR_UNAVAILABLE] = "unavailable",
        [OPS_ERROR_FAILED] = "failed",
        [OPS_ERROR_STATE_UNWRITABLE] = "state-unwritable",
};

const char *ops_error_code_to_string(OpsErrorCode c) {
        return c >= 0 && c < _OPS_ERROR_MAX ? error_names[c] : "failed";
}

int ops_fail(OpsStatus *st, OpsErrorCode code, int error, const char *format, ...) {
        va_list ap;

        st->code = code;
        va_start(ap, format);
        (void) vsnprintf(st->message, sizeof(st->message), format, ap);
        va_end(ap);
        return error < 0 ? error : -EPERM;
}

int ops_check_admin(const OpsCaller *c, OpsStatus *st) {
        if (c->admin)
                return 0;
        return ops_fail(st, OPS_ERROR_ACCESS_DENIED, -EPERM,
                        "Managing slots needs root or membership of supervisor.admin_group");
}

/* A slot's own game server, or a manager: Hold, ReleaseHold, readiness, its payload. A
 * caller inside some slot acts on that slot only, whoever it runs as. */
int ops_check_slot_caller(const OpsCaller *c, unsigned slot_id, OpsStatus *st) {
        if (c->slot_known && c->slot_id != OPS_NO_SLOT) {
                if (c->slot_id == slot_id)
                        return 0;
                return ops_fail(st, OPS_ERROR_ACCESS_DENIED, -EPERM,
                                "A game server may act on its own slot only: the caller is in "
                                "slot %u, not %u", c->slot_id, slot_id);
        }
        if (c->admin)
                return 0;
        return ops_fail(st, OPS_ERROR_ACCESS_DENIED, -EPERM,
                        "Acting on slot %u needs root, membership of supervisor.admin_group or "
                        "being the slot's own game server", slot_id);
}

/* Allocation UUIDs and build configuration IDs end up in files, logs and cgroups'
 * neighbours: only the characters of the contract, and a bounded length. */
int ops_check_id(const char *what, const char *s, bool empty_ok, OpsStatus *st) {
        if (!s)
                s = "";
        if ((empty_ok && s[0] == '\0') || alloc_id_is_valid(s))
                return 0;
        return ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, -EINVAL,
                        "Invalid %s: 1 to %d characters of A-Z a-z 0-9 . _ : -", what,
                        ALLOC_ID_MAX);
}

bool ops_is_admin(uid_t uid, const gid_t *gids, size_t n_gids, bool has_admin_gid,
                  gid_t admin_gid) {
        if (uid == 0)
                return true;
        if (!has_admin_gid)
                return false;
        for (size_t i = 0; i < n_gids; i++)
                if (gids[i] == admin_gid)
                        return true;
        return false;
}

int ops_check_draining(bool draining, bool draining_ok, const char *what, OpsStatus *st) {
        if (!draining || draining_ok)
                return 0;
        return ops_fail(st, OPS_ERROR_DRAINING, -EAGAIN, "%s: the machine is draining", what);
}

/* StopIfFree: only a slot that nobody has, one allocated, reserved or held is refused (the
 * fleet's scaler stops surplus servers with it, SPEC §8, §13). */
int ops_check_free(unsigned slot_id, SlotState state, OpsStatus *st) {
        if (state != SLOT_ALLOCATED && state != SLOT_RESERVED && state != SLOT_HELD)
                return 0;
        return ops_fail(st, OPS_ERROR_INVALID_STATE, -EBUSY,
                        "Slot %u is %s: StopIfFree stops a free slot only", slot_id,
                        slot_state_to_string(state));
}

int ops_token_subject(const OpsCaller *c, unsigned *ret_server, OpsStatus *st) {
        int r;

        if (c->slot_known && c->slot_id != OPS_NO_SLOT) {
                *ret_server = c->slot_id;
                return 0;
        }
        r = ops_check_admin(c, st);
        if (r < 0)
                return r;
        *ret_server = 0;
        return 0;
}
