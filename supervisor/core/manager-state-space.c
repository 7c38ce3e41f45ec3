/* SPDX-License-Identifier: MIT */
/* The state directory's space and the state_dir fault (SPEC §12): the journal's reserve,
 * kept preallocated ahead of need (state-reserve.h); the check every change passes before it
 * is applied; and the timer that finds out, with back-off, when state_dir takes writes
 * again, commits what waited, and clears the fault. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/statvfs.h>

#include "log.h"
#include "manager.h"

#define PROBE_FILE ".probe"

static uint64_t reserve_need(Manager *m) {
        return state_reserve_need(m->n_live_slots);
}

int manager_state_keep_reserve(Manager *m, int fd) {
        StateSpace *sp = &m->state_space;
        uint64_t length;
        int r;

        if (sp->no_prealloc)
                return 0;
        length = state_reserve_top_up(m->state_size, sp->prealloc_end, reserve_need(m));
        if (length == 0)
                return 0;
        r = state_preallocate(fd, m->state_size, length);
        if (r == -EOPNOTSUPP) {
                log_warning("%s cannot preallocate space (fallocate): a full disk may fail the "
                            "commit of a change already made", m->config->state_dir);
                sp->no_prealloc = true;
                return 0;
        }
        if (r < 0)
                return r;
        sp->prealloc_end = m->state_size + length;
        return 0;
}

/* A read-only filesystem is seen before a change is made, not at its commit. */
static int state_dir_writable(Manager *m) {
        struct statvfs sv;

        if (fstatvfs(m->state_dir_fd, &sv) >= 0 && (sv.f_flag & ST_RDONLY))
                return -EROFS;
        return 0;
}

static int open_journal(Manager *m) {
        int fd = openat(m->state_dir_fd, STATE_FILE, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);

        return fd < 0 ? negative_errno() : fd;
}

int manager_state_admit(Manager *m) {
        StateSpace *sp = &m->state_space;
        _cleanup_close_ int fd = -EBADF;
        char what[PATH_MAX];
        int r;

        if (sp->error > 0)
                return -sp->error;
        r = state_dir_writable(m);
        if (r < 0) {
                manager_state_failed(m, r, m->config->state_dir);
                return r;
        }
        if (sp->no_prealloc || state_reserve_covers(m->state_size, sp->prealloc_end, reserve_need(m)))
                return 0;
        /* More slots than the reserve was made for (a Reload), or a top-up that failed. */
        fd = open_journal(m);
        r = fd < 0 ? fd : manager_state_keep_reserve(m, fd);
        if (r < 0) {
                (void) snprintf(what, sizeof(what), "%s/" STATE_FILE, m->config->state_dir);
                manager_state_failed(m, r, what);
                return r;
        }
        return 0;
}

void manager_state_failed(Manager *m, int error, const char *what) {
        StateSpace *sp = &m->state_space;

        /* Memory is not the directory's fault: only the retry. */
        if (error < 0 && error != -ENOMEM) {
                sp->error = -error;
                (void) manager_fault_raise(m, "state_dir", "%s takes no writes: %s (%s); changes "
                                           "are refused until it does", m->config->state_dir,
                                           strerror(-error), what);
        }
        manager_state_arm_retry(m);
}

/* Does state_dir take writes again: not read-only, the journal's reserve back, and room for
 * a payload (so that the next payload does not raise the fault again at once). */
static int manager_state_probe(Manager *m, char *what, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        (void) snprintf(what, size, "%s", m->config->state_dir);
        r = state_dir_writable(m);
        if (r < 0)
                return r;
        (void) snprintf(what, size, "%s/" STATE_FILE, m->config->state_dir);
        fd = open_journal(m);
        if (fd < 0 && fd != -ENOENT) /* none: the next commit writes it whole */
                return fd;
        if (fd >= 0 && (r = manager_state_keep_reserve(m, fd)) < 0)
                return r;
        (void) snprintf(what, size, "%s/" PROBE_FILE, m->config->state_dir);
        return state_probe_write(m->state_dir_fd, PROBE_FILE, STATE_PROBE_BYTES);
}

static int manager_on_state_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        StateSpace *sp = &m->state_space;
        char what[PATH_MAX];
        int r;

        m->commit_retry = sd_event_source_disable_unref(m->commit_retry);
        if (sp->error > 0) {
                r = manager_state_probe(m, what, sizeof(what));
                if (r < 0) {
                        log_debug_errno(r, "%s still takes no writes: %m", what);
                        manager_state_failed(m, r, what);
                        return 0;
                }
        }
        /* What was made meanwhile, or a commit that failed: its callers are still waiting. */
        if (m->state_dirty && manager_commit(m) < 0)
                return 0; /* failed again: re-armed */
        if (sp->error > 0) {
                sp->error = 0;
                (void) manager_fault_clear(m, "state_dir");
                log_info("%s takes writes again: changes are accepted", m->config->state_dir);
        }
        sp->retry_usec = 0;
        return 0;
}

void manager_state_arm_retry(Manager *m) {
        StateSpace *sp = &m->state_space;
        int r;

        if (m->commit_retry)
                return;
        sp->retry_usec = state_retry_next(sp->retry_usec);
        r = sd_event_add_time_relative(m->event, &m->commit_retry, CLOCK_MONOTONIC, sp->retry_usec,
                                       0, manager_on_state_retry, m);
        if (r < 0)
                log_error_errno(r, "Failed to arm the retry of %s: %m", m->config->state_dir);
}
