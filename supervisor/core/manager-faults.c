/* SPDX-License-Identifier: MIT */
/* Faults of the host (manager-faults.h): the list behind the Manager's Faults property. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "manager.h"

static HostFault *fault_find(const Manager *m, const char *key) {
        for (size_t i = 0; i < m->n_faults; i++)
                if (streq(m->faults[i].key, key))
                        return &m->faults[i];
        return NULL;
}

bool manager_fault_active(const Manager *m, const char *key) {
        return fault_find(m, key) != NULL;
}

static bool fault_update(Manager *m, HostFault *f, char *message) {
        if (streq(f->message, message)) {
                free(message);
                return false;
        }
        free(f->message);
        f->message = message;
        manager_hook(m, machine_changed, MACHINE_CHANGE_FAULTS);
        return false;
}

bool manager_fault_raise(Manager *m, const char *key, const char *format, ...) {
        HostFault *f, *n;
        char *message = NULL, *k;
        va_list ap;
        int r;

        va_start(ap, format);
        r = vasprintf(&message, format, ap);
        va_end(ap);
        if (r < 0) {
                log_oom();
                return false;
        }
        f = fault_find(m, key);
        if (f)
                return fault_update(m, f, message);
        k = strdup(key);
        n = reallocarray(m->faults, m->n_faults + 1, sizeof(HostFault));
        if (!k || !n) {
                free(k);
                free(message);
                log_oom();
                return false;
        }
        m->faults = n;
        m->faults[m->n_faults++] = (HostFault) {
                .key = k, .message = message, .since = now_usec(CLOCK_MONOTONIC),
        };
        log_warning("Host fault %s: %s", key, message);
        manager_hook(m, machine_changed, MACHINE_CHANGE_FAULTS);
        return true;
}

bool manager_fault_clear(Manager *m, const char *key) {
        HostFault *f = fault_find(m, key);
        usec_t lasted;

        if (!f)
                return false;
        lasted = now_usec(CLOCK_MONOTONIC) - f->since;
        log_info("Host fault %s cleared after %" PRIu64 ".%03" PRIu64 " s", key,
                 lasted / USEC_PER_SEC, lasted % USEC_PER_SEC / USEC_PER_MSEC);
        free(f->key);
        free(f->message);
        *f = m->faults[--m->n_faults];
        manager_hook(m, machine_changed, MACHINE_CHANGE_FAULTS);
        return true;
}

void manager_faults_done(Manager *m) {
        for (size_t i = 0; i < m->n_faults; i++) {
                free(m->faults[i].key);
                free(m->faults[i].message);
        }
        m->faults = mfree(m->faults);
        m->n_faults = 0;
}
