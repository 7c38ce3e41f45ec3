/* SPDX-License-Identifier: MIT */
/* slotd's durable state: one file, a snapshot rewritten atomically and a journal appended to
 * in the space kept for it (manager-state-space.c), shared by every change that arrives
 * together (group commit), and the callers that wait for it (manager_when_durable()). */
#include <fcntl.h>
#include <limits.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "cgroup.h"
#include "log.h"
#include "manager.h"
#include "manager-metrics.h"
#include "slot-log-fields.h"
#include "state-file.h"

/* A snapshot that failed (for space: the new file needs its own) is tried again after this;
 * the journal takes the commits meanwhile. */
#define SNAPSHOT_RETRY_USEC (10 * USEC_PER_SEC)

static int manager_on_commit(sd_event_source *source, void *userdata) {
        (void) manager_commit(userdata);
        return 0;
}

/* Under a steady stream of requests the idle-priority commit could wait long; a change is
 * never left unwritten for longer than this. */
#define COMMIT_MAX_DELAY_USEC (20 * USEC_PER_MSEC)

void manager_state_dirty(Manager *m) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        int r;

        if (!m->state_dirty)
                m->dirty_since = now;
        m->state_dirty = true;
        if (m->state_space.commit_failed)
                return; /* the retry timer commits (manager-state-space.c) */
        if (now - m->dirty_since > COMMIT_MAX_DELAY_USEC) {
                (void) manager_commit(m);
                return;
        }
        if (!m->commit_source) {
                r = sd_event_add_defer(m->event, &m->commit_source, manager_on_commit, m);
                if (r < 0) {
                        log_error_errno(r, "Failed to schedule a state commit, writing now: %m");
                        (void) manager_commit(m);
                        return;
                }
                /* Idle priority: the loop first takes every request already waiting, then
                 * one write and one fsync make them all durable. */
                (void) sd_event_source_set_priority(m->commit_source, SD_EVENT_PRIORITY_IDLE);
        }
        (void) sd_event_source_set_enabled(m->commit_source, SD_EVENT_ONESHOT);
}

typedef struct DurableWaiter {
        durable_callback_t callback;
        void *userdata;
} DurableWaiter;

int manager_when_durable(Manager *m, durable_callback_t callback, void *userdata) {
        /* Nothing unwritten (a retry of a change made before, a change that changed
         * nothing): durable now, with no commit, which state_dir might not take. */
        if (!m->state_dirty) {
                callback(m, 0, userdata);
                return 1;
        }
        if (m->n_pending == m->n_pending_allocated) {
                size_t n = MAX(m->n_pending_allocated * 2, (size_t) 16);
                DurableWaiter *p = reallocarray(m->pending, n, sizeof(DurableWaiter));
                if (!p)
                        return -ENOMEM;
                m->pending = p;
                m->n_pending_allocated = n;
        }
        m->pending[m->n_pending++] = (DurableWaiter){ callback, userdata };
        manager_state_dirty(m);
        return 1;
}

/* Every waiter hears once; a waiter added by a callback waits for the next commit. */
static void manager_flush_replies(Manager *m, int error) {
        size_t n = m->n_pending;

        for (size_t i = 0; i < n; i++)
                m->pending[i].callback(m, error, m->pending[i].userdata);
        if (m->n_pending > n)
                memmove(m->pending, m->pending + n, (m->n_pending - n) * sizeof(DurableWaiter));
        m->n_pending -= n;
}

/* slotd is going away with callers still waiting: each hears a positive error (1), which
 * means "no answer": its door drops the call. */
void manager_drop_waiters(Manager *m) {
        manager_flush_replies(m, 1);
        free(m->pending);
        m->pending = NULL;
        m->n_pending = m->n_pending_allocated = 0;
}

void manager_state_slot_changed(Manager *m, Slot *s) {
        if (!s->state_changed) {
                if (m->n_state_changed == m->n_state_changed_allocated) {
                        size_t n = MAX(m->n_state_changed_allocated * 2, (size_t) 64);
                        unsigned *t = reallocarray(m->state_changed, n, sizeof(unsigned));
                        if (!t) {
                                log_oom();
                                manager_state_snapshot(m); /* covers it */
                                return;
                        }
                        m->state_changed = t;
                        m->n_state_changed_allocated = n;
                }
                m->state_changed[m->n_state_changed++] = s->id;
                s->state_changed = true;
        }
        manager_state_dirty(m);
}

void manager_state_snapshot(Manager *m) {
        m->state_snapshot_needed = true;
        manager_state_dirty(m);
}

/* A journal smaller than this is never worth a snapshot of its own. */
#define JOURNAL_MIN_BYTES (64 * 1024)

/* The records of the slots with these ids, or of every slot when ids is NULL, and the
 * machine's. The records borrow the slots' strings: free only rec->slots. */
static int manager_state_records(Manager *m, const unsigned *ids, size_t n_ids, StateRecord *rec) {
        size_t n = ids ? n_ids : m->n_slots;

        *rec = (StateRecord){ .draining = m->draining, .idle_since = m->idle_since,
                              .epoch = m->epoch };
        manager_state_clock(rec);
        rec->slots = calloc(n ?: 1, sizeof(SlotRecord));
        if (!rec->slots)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                Slot *s = ids ? manager_get_slot(m, ids[i]) : m->slots[i];

                if (s && !s->retired_gone) {
                        SlotRecord *sr = &rec->slots[rec->n_slots++];
                        slot_record(s, sr);
                        sr->events = s->events;
                        sr->ready_for_players = s->ready_for_players;
                        if (s->allocation_uuid)
                                sr->payload_at = payload_store_given_at(&m->payloads,
                                                                        s->allocation_uuid);
                }
        }
        return 0;
}

/* The whole file, written atomically with the journal's reserve after it: a file that
 * cannot have its reserve does not replace the old. O(slots): once per journal as large as
 * the snapshot, so O(1) per change over time, and at Reloads. */
static int manager_commit_snapshot(Manager *m) {
        _cleanup_free_ char *text = NULL;
        StateSpace *sp = &m->state_space;
        uint64_t reserve = 0;
        StateRecord rec;
        int n, r;

        r = manager_state_records(m, NULL, 0, &rec);
        if (r < 0)
                return r;
        n = state_format_cached(&m->state_cache, &rec, &text);
        free(rec.slots);
        if (n < 0)
                return n;
        if (!sp->no_prealloc)
                reserve = state_reserve_target(state_reserve_need(m->n_live_slots));
        r = state_write_atomic_reserve(m->state_dir_fd, STATE_FILE, text, (size_t) n, reserve);
        if (r < 0)
                return r;
        if (r == 0 && reserve > 0) {
                log_warning("%s cannot preallocate space (fallocate): a full disk may fail the "
                            "commit of a change already made", m->config->state_dir);
                sp->no_prealloc = true;
        }
        m->state_size = m->state_snapshot_size = (uint64_t) n;
        sp->prealloc_end = m->state_size + (r > 0 ? reserve : 0);
        sp->journal_broken = false;
        m->state_snapshot_needed = false;
        return 0;
}

/* The lines of the slots that changed (all of them when 'all'), appended in the space kept
 * for them: O(changes). The file is opened for each commit: one held open for writing would
 * keep its filesystem from being remounted read-only. */
static int manager_commit_journal(Manager *m, bool all) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        StateSpace *sp = &m->state_space;
        char what[PATH_MAX];
        StateRecord rec;
        int n, r;

        r = manager_state_records(m, all ? NULL : m->state_changed, m->n_state_changed, &rec);
        if (r < 0)
                return r;
        n = state_format_journal(&rec, &text);
        free(rec.slots);
        if (n < 0)
                return n;
        fd = openat(m->state_dir_fd, STATE_FILE, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        /* Past the reserve (its top-up failed): the space first, so that a full disk fails
         * the commit before any byte of it is written, never inside a line. */
        if (!sp->no_prealloc && !state_reserve_covers(m->state_size, sp->prealloc_end, (uint64_t) n)) {
                r = state_preallocate(fd, m->state_size, (uint64_t) n);
                if (r < 0 && r != -EOPNOTSUPP)
                        return r;
                if (r >= 0)
                        sp->prealloc_end = m->state_size + (uint64_t) n;
        }
        r = state_append(fd, text, (size_t) n);
        if (r < 0) {
                sp->journal_broken = true;
                return r;
        }
        m->state_size += (uint64_t) n;
        if (all)
                m->state_snapshot_needed = false;
        r = manager_state_keep_reserve(m, fd);
        if (r < 0) {
                (void) snprintf(what, sizeof(what), "%s/" STATE_FILE, m->config->state_dir);
                manager_state_failed(m, r, what);
        }
        return 0;
}

/* A snapshot when one is due; when it fails and the journal is whole, the journal takes the
 * commit (all slots when the snapshot was needed for slots that came or went). */
static int manager_commit_write(Manager *m) {
        StateSpace *sp = &m->state_space;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        bool due = m->state_snapshot_needed ||
                   m->state_size - m->state_snapshot_size > MAX(m->state_snapshot_size, (uint64_t) JOURNAL_MIN_BYTES);
        int r;

        if (!sp->journal_broken && (!due || now < sp->snapshot_not_before))
                return manager_commit_journal(m, m->state_snapshot_needed);
        r = manager_commit_snapshot(m);
        if (r >= 0 || sp->journal_broken)
                return r;
        log_full_errno(sp->error > 0 ? LOG_DEBUG : LOG_WARNING, r,
                       "Failed to rewrite %s/" STATE_FILE ", appending to its journal instead: %m",
                       m->config->state_dir);
        sp->snapshot_not_before = now + SNAPSHOT_RETRY_USEC;
        return manager_commit_journal(m, m->state_snapshot_needed);
}

int manager_commit(Manager *m) {
        int r;

        if (!m->state_dirty) {
                manager_flush_replies(m, 0);
                manager_flush_events(m);
                return 0;
        }
        r = manager_commit_write(m);
        if (r < 0) {
                char what[PATH_MAX];

                /* The changes are made and stay made: "failed" would be untrue. Their callers
                 * wait, and hear once a retry has written them. (Changes are refused before
                 * they are made when state_dir cannot take them: this is the rare change
                 * that was under way when it broke.) */
                log_full_errno(m->state_space.commit_failed ? LOG_DEBUG : LOG_ERR, r,
                               "Failed to write %s/" STATE_FILE ", retrying: %m",
                               m->config->state_dir);
                m->state_space.commit_failed = true;
                (void) snprintf(what, sizeof(what), "%s/" STATE_FILE, m->config->state_dir);
                manager_state_failed(m, r, what);
                return r;
        }
        m->state_space.commit_failed = false;
        for (size_t i = 0; i < m->n_state_changed; i++) {
                Slot *s = manager_get_slot(m, m->state_changed[i]);
                if (s)
                        s->state_changed = false;
        }
        m->n_state_changed = 0;
        m->state_dirty = false;
        manager_flush_replies(m, 0);
        manager_flush_events(m);
        return 0;
}

static int manager_on_exit_dir(sd_event_source *source, const struct inotify_event *ev,
                               void *userdata) {
        Manager *m = userdata;
        unsigned long id;
        char *end;
        Slot *s;

        if (ev->mask & IN_Q_OVERFLOW) {
                /* Events were lost: look at every slot (rare, and O(slots) only then). */
                for (size_t i = 0; i < m->n_slots; i++)
                        if (m->slots[i])
                                slot_keeper_status_changed(m->slots[i]);
                return 0;
        }
        if (ev->len == 0 || ev->name[0] < '0' || ev->name[0] > '9')
                return 0;
        errno = 0;
        id = strtoul(ev->name, &end, 10);
        if (errno != 0 || *end != '\0' || id > UINT_MAX)
                return 0;
        s = manager_get_slot(m, (unsigned) id);
        if (s)
                slot_keeper_status_changed(s);
        return 0;
}

int manager_open_state(Manager *m) {
        int r;

        r = cg_create(m->config->state_dir); /* mkdir -p, 0755 */
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", m->config->state_dir);
        m->state_dir_fd = open(m->config->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (m->state_dir_fd < 0)
                return log_error_errno(negative_errno(), "Failed to open %s: %m",
                                       m->config->state_dir);
        if (mkdirat(m->state_dir_fd, "exit", 0700) < 0 && errno != EEXIST)
                return log_error_errno(negative_errno(), "Failed to create %s/exit: %m",
                                       m->config->state_dir);
        m->exit_dir_fd = openat(m->state_dir_fd, "exit", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (m->exit_dir_fd < 0)
                return log_error_errno(negative_errno(), "Failed to open %s/exit: %m",
                                       m->config->state_dir);
        /* A keeper that restarts its server writes a record in its status file (keeper.c):
         * one watch on the directory hears all of them. Without it a restart is still
         * accounted, when the keeper ends or the next record comes. */
        m->exit_watch = sd_event_source_disable_unref(m->exit_watch);
        r = sd_event_add_inotify_fd(m->event, &m->exit_watch, m->exit_dir_fd, IN_MODIFY,
                                    manager_on_exit_dir, m);
        if (r < 0)
                log_warning_errno(r, "Failed to watch %s/exit, restarts made by keepers are "
                                  "accounted late: %m", m->config->state_dir);
        return 0;
}

/* The end of an allocation whose slot is gone: in the journal with the fields a slot's own
 * entries carry (slot-log-fields.h), so that the allocation's story ends there too. */
static void log_dropped_allocation(const SlotRecord *sr) {
        SlotLogFields f = {};

        if (slot_log_fields_init(&f, sr->id, sr->fleet) >= 0)
                (void) slot_log_fields_set(&f, sr->allocation_uuid, NULL);
        (void) log_internal(LOG_WARNING, 0, NULL, f.list[0] ? f.list : NULL, __FILE__, __LINE__,
                            __func__, "Slot %u of fleet %s held allocation %s but is no longer "
                            "configured; the allocation is dropped", sr->id, sr->fleet,
                            sr->allocation_uuid);
        slot_log_fields_done(&f);
}

/* Puts back what the previous slotd made durable. Runs before any slot starts. */
int manager_restore_state(Manager *m) {
        _cleanup_free_ char *text = NULL;
        StateRecord rec = {};
        unsigned skipped = 0;
        size_t size;
        int r;

        /* Start-up writes a snapshot; should it fail, an intact journal takes the lines. */
        m->state_snapshot_needed = true;
        r = state_read(m->state_dir_fd, STATE_FILE, &text, &size);
        if (r == -ENOENT) {
                m->unseen = true; /* a fresh start: no slot was ever seen (manager_announce_slot()) */
                m->state_space.journal_broken = true;
                m->idle_since = now_usec(CLOCK_BOOTTIME);
                return manager_ensure_epoch(m);
        }
        if (r < 0)
                return log_error_errno(r, "Failed to read %s/" STATE_FILE ": %m", m->config->state_dir);
        /* Its preallocated space is not known: a top-up of space it has costs nothing. */
        m->state_size = m->state_snapshot_size = m->state_space.prealloc_end = size;
        m->state_space.journal_broken = size == 0 || text[size - 1] != '\n';
        r = state_parse(text, size, &rec, &skipped);
        if (r < 0)
                return log_error_errno(r, "%s/" STATE_FILE " is not a slotd state file; move it "
                                          "away to start afresh", m->config->state_dir);
        if (skipped > 0)
                log_warning("Skipped %u unreadable lines of %s/" STATE_FILE, skipped,
                            m->config->state_dir);

        manager_state_rebase(&rec);
        m->draining = rec.draining;
        m->epoch = rec.epoch;
        for (size_t i = 0; i < rec.n_slots; i++) {
                const SlotRecord *sr = &rec.slots[i];
                Slot *s = manager_get_slot(m, sr->id);

                if (!s || !streq(s->fleet->config->name, sr->fleet)) {
                        if (sr->allocation_uuid)
                                log_dropped_allocation(sr);
                        continue;
                }
                /* What the game server last heard, before the restore sets the
                 * allocation again: the restore is no news to it. */
                s->events = sr->events;
                s->ready_for_players = sr->ready_for_players;
                if (sr->allocation_uuid && !(s->announced_allocation = strdup(sr->allocation_uuid)))
                        (void) log_oom();
                slot_restore(s, sr);
        }
        /* The idle clock runs on from where it was; a machine that was busy counts from
         * now if nothing is allocated after the restore. */
        m->idle_since = m->n_busy == 0 ? (rec.idle_since ?: now_usec(CLOCK_BOOTTIME)) : 0;
        log_info("Restored state of %zu slots from %s/" STATE_FILE, rec.n_slots, m->config->state_dir);
        state_record_done(&rec);
        m->state_dirty = true;
        return manager_ensure_epoch(m);
}

static int manager_on_graveyard(sd_event_source *source, void *userdata) {
        Manager *m = userdata;

        for (size_t i = 0; i < m->n_graveyard; i++)
                slot_free(m->graveyard[i]);
        m->n_graveyard = 0;
        return 0;
}

/* A slot whose fleet or place went away in a Reload, now free of its session: its object,
 * its cgroup and its entry go. Freed from the loop, never inside its own callbacks. */
void manager_retire_slot(Manager *m, Slot *s) {
        Fleet *f = s->fleet;
        Slot **g;

        if (s->retired_gone)
                return;
        s->retired_gone = true;
        log_slot_info(s, "Removed: its fleet or its place is gone from the configuration");
        alloc_index_remove(&f->index, &s->alloc_entry);
        manager_set_busy(m, s, false);
        manager_metrics_slot_removed(m, s);
        if (s->id < m->n_slots && m->slots[s->id] == s)
                m->slots[s->id] = NULL;
        for (size_t i = 0; i < f->n_slots; i++)
                if (f->slots[i] == s) {
                        memmove(f->slots + i, f->slots + i + 1, (f->n_slots - i - 1) * sizeof(Slot *));
                        f->n_slots--;
                        break;
                }
        s->events_source = sd_event_source_disable_unref(s->events_source);
        s->cgroup_fd = safe_close(s->cgroup_fd);
        s->cpu_stat_fd = safe_close(s->cpu_stat_fd);
        s->memory_fd = safe_close(s->memory_fd);
        if (cg_remove(s->cgroup_path) < 0)
                log_slot_warning(s, "Could not remove cgroup %s", s->cgroup_path);
        m->n_live_slots--;
        manager_hook(m, machine_changed, MACHINE_CHANGE_SLOT_COUNT);
        manager_state_snapshot(m);

        g = realloc(m->graveyard, (m->n_graveyard + 1) * sizeof(Slot *));
        if (!g) {
                log_oom(); /* leaked rather than freed under our feet */
                return;
        }
        m->graveyard = g;
        m->graveyard[m->n_graveyard++] = s;
        if (!m->graveyard_source && sd_event_add_defer(m->event, &m->graveyard_source,
                                                       manager_on_graveyard, m) < 0)
                return;
        (void) sd_event_source_set_enabled(m->graveyard_source, SD_EVENT_ONESHOT);
}
