/* SPDX-License-Identifier: MIT */
/* What the checks tell the machine (SPEC §6, §12): a check the host keeps from being made (a
 * probe the kernel refused to send) is one fault of the host per check and errno, however
 * many slots meet it, logged when the first slot meets it and when the last one no longer
 * does; a round of a fleet's check that most of its slots failed is a fault of its own, with
 * the MachineFault signal when it begins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "manager.h"

/* How many slots meet one cause now. Few at a time: checks × distinct errnos. */
typedef struct CheckErrorCause {
        CheckKind check;
        int error;
        unsigned slots;
} CheckErrorCause;

static void check_error_key(CheckKind check, int error, char buf[static 64]) {
        const char *name = strerrorname_np(abs(error));

        if (name)
                snprintf(buf, 64, "check-error:%s:%s", check_kind_to_string(check), name);
        else
                snprintf(buf, 64, "check-error:%s:%d", check_kind_to_string(check), abs(error));
}

static CheckErrorCause *check_error_find(Manager *m, CheckKind check, int error) {
        for (size_t i = 0; i < m->n_check_errors; i++)
                if (m->check_errors[i].check == check && m->check_errors[i].error == error)
                        return &m->check_errors[i];
        return NULL;
}

static CheckErrorCause *check_error_add(Manager *m, CheckKind check, int error) {
        CheckErrorCause *n = reallocarray(m->check_errors, m->n_check_errors + 1, sizeof(*n));

        if (!n)
                return NULL;
        m->check_errors = n;
        n[m->n_check_errors] = (CheckErrorCause) { .check = check, .error = error };
        return &n[m->n_check_errors++];
}

void manager_check_error(Manager *m, Slot *s, CheckKind check, int error, const char *message) {
        CheckErrorCause *c = check_error_find(m, check, error);
        char key[64];

        check_error_key(check, error, key);
        if (message) {
                if (!c && !(c = check_error_add(m, check, error))) {
                        log_oom();
                        return;
                }
                if (c->slots++ == 0)
                        (void) manager_fault_raise(m, key, "%s (slot %u first; a check that cannot "
                                                   "be made counts no strike)", message, s->id);
                return;
        }
        if (!c || c->slots == 0)
                return;
        if (--c->slots > 0)
                return;
        (void) manager_fault_clear(m, key);
        *c = m->check_errors[--m->n_check_errors];
}

void manager_check_verdict(Manager *m, Fleet *f, CheckKind check, unsigned failing,
                           unsigned checked, bool machine_fault) {
        char key[128];

        (void) snprintf(key, sizeof(key), "check:%s:%s", check_kind_to_string(check),
                        f->config->name);
        if (!machine_fault) {
                (void) manager_fault_clear(m, key);
                return;
        }
        if (manager_fault_raise(m, key, "%u of %u checked slots of fleet %s failed the %s check "
                                "in one round, more than checks.machine_fault_share: the machine "
                                "is the likely cause, no strikes are counted", failing, checked,
                                f->config->name, check_kind_to_string(check)))
                manager_hook(m, machine_fault, f, check, failing, checked);
}

void manager_checks_done(Manager *m) {
        m->check_errors = mfree(m->check_errors);
        m->n_check_errors = 0;
}
