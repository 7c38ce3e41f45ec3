/* SPDX-License-Identifier: MIT */
/* The slot tree's scope under systemd.
 *
 * Where systemd runs slotd as a service (its PID 1, slotd in a service unit of its own, no
 * supervisor.cgroup), the slot tree is not in the unit's cgroup: a cgroup whose
 * cgroup.subtree_control has controllers and which has children cannot take a process (cgroup
 * v2's "no internal processes" rule), and systemd 252 (Debian 12) always puts a service's new
 * main process into the unit's own cgroup, so a `systemctl restart slotd` (or `start` after
 * `stop`) with servers running failed with 219/CGROUP. systemd 254's DelegateSubgroup= would
 * lift that; here we take the other way systemd's "Control Group APIs and Delegation"
 * (CGROUP_DELEGATION.md) gives a manager: a transient scope unit with Delegate=yes, made over
 * org.freedesktop.systemd1.Manager.StartTransientUnit, in the unit's slice:
 *
 *   <slice>/slotd.service              slotd and slotd-proxy; a leaf, no group below
 *   <slice>/slotd-slots.scope          Delegate=yes; ours below
 *   <slice>/slotd-slots.scope/anchor   the anchor (below)
 *   <slice>/slotd-slots.scope/slots    the slot tree: <fleet>/slot-<id>
 *
 * A scope is made with at least one process and systemd removes it (its whole cgroup subtree)
 * once that subtree is empty. So slotd makes it around a process of its own, the anchor: a
 * fork that only waits (named slotd-anchor, a child of PID 1 through CLONE_PARENT, so that
 * slotd has nothing to reap), moved out of the scope's root into anchor/ as soon as the scope
 * is there (the root must hold no process once controllers are enabled in it). The anchor
 * keeps the scope while no server runs: when the last server ends and a new one starts, the
 * slot tree is still there. Neither `systemctl stop slotd` nor its restart touches the scope
 * (it is no part of slotd.service); a new slotd finds it populated and adopts it, and live
 * restore reads the slot tree in it as ever. Stopping the scope itself (`systemctl stop
 * slotd-slots.scope`) ends every server in it. If the anchor is gone while servers run, the
 * next start puts a new one in anchor/.
 *
 * Making the scope is the only call to systemd, and it is made from the event loop: the call
 * and the wait for its job's JobRemoved are asynchronous, under a timeout; start-up goes on
 * (manager_startup_finish()) once the job is done, and a failure ends slotd (Restart=). */
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "manager.h"

#define SCOPE_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define ANCHOR_LEAF "anchor"

struct ManagerScope {
        Manager *m;
        sd_bus *bus;
        sd_bus_slot *match;
        sd_bus_slot *call;
        sd_event_source *timeout;
        sd_event_source *done;  /* deferred: goes on out of the bus's callbacks */
        int result;
        int anchor_pidfd;       /* while the anchor is not handed over to the scope */
        pid_t anchor;
        char *path;             /* the scope's cgroup, absolute */
};

static void scope_free(ManagerScope *s) {
        if (!s)
                return;
        /* Start-up ended (an error, a signal) before the anchor was settled in anchor/: it
         * must not stay behind in slotd's unit. The scope was new, so no server is in it. */
        if (s->anchor_pidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, s->anchor_pidfd, SIGKILL, NULL, 0);
        sd_bus_slot_unref(s->match);
        sd_bus_slot_unref(s->call);
        sd_bus_close_unref(s->bus);
        sd_event_source_disable_unref(s->timeout);
        sd_event_source_disable_unref(s->done);
        safe_close(s->anchor_pidfd);
        free(s->path);
        free(s);
}

void manager_scope_free(Manager *m) {
        scope_free(m->scope_setup);
        m->scope_setup = NULL;
}

_noreturn_ static void anchor_main(void) {
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        sigset_t none;

        for (int sig = 1; sig < _NSIG; sig++)
                (void) sigaction(sig, &dfl, NULL);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        (void) syscall(SYS_close_range, 0U, ~0U, 0U);
        (void) setsid();
        (void) prctl(PR_SET_NAME, "slotd-anchor");
        for (;;)
                pause();
}

/* The anchor: a child of slotd's parent (PID 1 under systemd), which reaps it. */
static int anchor_spawn(pid_t *ret_pid, int *ret_pidfd) {
        int pidfd = -EBADF;
        struct clone_args args = {
                .flags = CLONE_PARENT | CLONE_PIDFD,
                .pidfd = (uint64_t) (uintptr_t) &pidfd,
        };
        long pid = syscall(SYS_clone3, &args, sizeof(args));

        if (pid < 0)
                return -errno;
        if (pid == 0)
                anchor_main();
        *ret_pid = (pid_t) pid;
        *ret_pidfd = pidfd;
        return 0;
}

/* Every process in the scope's root (an anchor slotd put there and could not move before it
 * ended) goes to anchor/, and a new anchor there if there is none. */
static int scope_settle(const char *path, int anchor_pidfd) {
        _cleanup_free_ char *leaf = NULL;
        _cleanup_close_ int root_fd = -EBADF, leaf_fd = -EBADF;
        char buf[4096];
        int r;

        if (asprintf(&leaf, "%s/" ANCHOR_LEAF, path) < 0)
                return -ENOMEM;
        r = cg_create(leaf);
        if (r >= 0)
                r = cg_open(leaf, &leaf_fd);
        if (r >= 0)
                r = cg_open(path, &root_fd);
        if (r >= 0)
                r = cg_read_at(root_fd, "cgroup.procs", buf, sizeof(buf));
        if (r < 0)
                return r;
        for (char *p = buf, *end; *p; p = end) {
                long pid = strtol(p, &end, 10);
                if (end == p)
                        break;
                r = cg_attach_at(leaf_fd, (pid_t) pid);
                if (r < 0 && r != -ESRCH)
                        return r;
        }
        r = cg_is_populated_at(leaf_fd);
        if (r != 0)
                return r < 0 ? r : 0;
        if (anchor_pidfd >= 0) /* ours, not in the scope after all */
                return -ESRCH;

        pid_t pid;
        _cleanup_close_ int pidfd = -EBADF;
        r = anchor_spawn(&pid, &pidfd);
        if (r < 0)
                return r;
        r = cg_attach_at(leaf_fd, pid);
        if (r < 0)
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        else
                log_info("A new anchor (PID %d) keeps the slot tree's scope", (int) pid);
        return r;
}

static int scope_on_done(sd_event_source *source, void *userdata) {
        ManagerScope *s = userdata;
        Manager *m = s->m;
        int r = s->result;

        if (r >= 0) {
                r = scope_settle(s->path, s->anchor_pidfd);
                if (r < 0)
                        log_error_errno(r, "Failed to move the anchor into %s/" ANCHOR_LEAF ": %m",
                                        s->path);
                else /* the scope's now */
                        s->anchor_pidfd = safe_close(s->anchor_pidfd);
        }
        manager_scope_free(m); /* s is gone; the anchor killed unless handed over */
        if (r >= 0) {
                log_info("Slot tree in the scope %s", m->scope);
                r = manager_startup_finish(m);
        }
        if (r < 0)
                (void) sd_event_exit(m->event, r);
        return 0;
}

static void scope_finish(ManagerScope *s, int r) {
        if (s->done)
                return;
        s->result = r;
        if (sd_event_add_defer(s->m->event, &s->done, scope_on_done, s) < 0) {
                log_oom();
                (void) sd_event_exit(s->m->event, -ENOMEM);
        }
}

static int scope_on_job_removed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ManagerScope *s = userdata;
        const char *job, *unit, *result;
        uint32_t id;

        if (sd_bus_message_read(msg, "uoss", &id, &job, &unit, &result) < 0 ||
            !streq(unit, s->m->scope))
                return 0;
        if (streq(result, "done"))
                scope_finish(s, 0);
        else {
                log_error("systemd's job to start %s ended '%s'", unit, result);
                scope_finish(s, -EIO);
        }
        return 0;
}

static int scope_on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ManagerScope *s = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        const char *job;

        s->call = sd_bus_slot_unref(s->call);
        if (e) {
                log_error("systemd refused to start %s: %s (%s)%s", s->m->scope, e->message,
                          e->name,
                          sd_bus_error_has_name(e, "org.freedesktop.systemd1.UnitExists")
                                  ? ": it exists with no process in it, and may be stopping"
                                  : "");
                scope_finish(s, -sd_bus_error_get_errno(e) ?: -EIO);
        } else if (sd_bus_message_read(reply, "o", &job) >= 0)
                log_debug("Starting %s: job %s", s->m->scope, job);
        return 0;
}

static int scope_on_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        ManagerScope *s = userdata;

        log_error("systemd did not start %s within %u s", s->m->scope,
                  (unsigned) (SCOPE_TIMEOUT_USEC / USEC_PER_SEC));
        scope_finish(s, -ETIMEDOUT);
        return 0;
}

static int scope_call(ManagerScope *s) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;
        _cleanup_free_ char *slice = NULL, *unit = NULL;
        int r;

        r = sd_pid_get_slice(0, &slice);
        if (r >= 0)
                r = sd_pid_get_unit(0, &unit);
        if (r < 0)
                return log_error_errno(r, "Failed to find slotd's unit and slice: %m");
        r = sd_bus_message_new_method_call(s->bus, &msg, "org.freedesktop.systemd1",
                                           "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager",
                                           "StartTransientUnit");
        if (r >= 0)
                r = sd_bus_message_append(msg, "ss", s->m->scope, "fail");
        /* Before= slotd's unit: at shutdown slotd stops first, and then the scope's servers
         * are stopped, with no slotd left to act on their ends. */
        if (r >= 0)
                r = sd_bus_message_append(msg, "a(sv)", 5,
                                          "Description", "s", "slotd's game server slots",
                                          "Slice", "s", slice,
                                          "Delegate", "b", 1,
                                          "Before", "as", 1, unit,
                                          "PIDs", "au", 1, (uint32_t) s->anchor);
        if (r >= 0)
                r = sd_bus_message_append(msg, "a(sa(sv))", 0);
        if (r >= 0)
                r = sd_bus_call_async(s->bus, &s->call, msg, scope_on_reply, s, 0);
        if (r < 0)
                return log_error_errno(r, "Failed to ask systemd for %s: %m", s->m->scope);
        return 0;
}

/* The scope is not there: make it around a new anchor. */
static int scope_make(Manager *m, ManagerScope *s) {
        int r;

        r = anchor_spawn(&s->anchor, &s->anchor_pidfd);
        if (r < 0)
                return log_error_errno(r, "Failed to start the anchor of %s: %m", m->scope);
        r = sd_bus_open_system(&s->bus);
        if (r >= 0)
                r = sd_bus_attach_event(s->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the system bus for systemd: %m");
        /* Matched by unit name, so that a JobRemoved ahead of the reply is not missed. */
        r = sd_bus_match_signal_async(s->bus, &s->match, "org.freedesktop.systemd1",
                                      "/org/freedesktop/systemd1",
                                      "org.freedesktop.systemd1.Manager", "JobRemoved",
                                      scope_on_job_removed, NULL, s);
        if (r >= 0)
                r = sd_bus_call_method_async(s->bus, NULL, "org.freedesktop.systemd1",
                                             "/org/freedesktop/systemd1",
                                             "org.freedesktop.systemd1.Manager", "Subscribe",
                                             NULL, NULL, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to subscribe to systemd's jobs: %m");
        r = scope_call(s);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(m->event, &s->timeout, CLOCK_MONOTONIC, SCOPE_TIMEOUT_USEC,
                                       0, scope_on_timeout, s);
        if (r < 0)
                return log_error_errno(r, "Failed to arm the timeout of %s: %m", m->scope);
        log_info("Starting the slot tree's scope %s (anchor PID %d)", m->scope, (int) s->anchor);
        return 0;
}

int manager_systemd_slots_scope(char **ret_scope, char **ret_path) {
        _cleanup_free_ char *unit = NULL, *self = NULL;
        int r;

        if (sd_booted() <= 0 || sd_pid_get_unit(0, &unit) < 0)
                return -ENXIO;
        r = cg_pid_path(0, &self);
        if (r < 0)
                return r;
        r = cg_unit_slots_scope(self, unit, ret_scope, ret_path);
        return r == -EINVAL ? -ENXIO : r;
}

int manager_scope_start(Manager *m) {
        _cleanup_close_ int fd = -EBADF;
        ManagerScope *s;
        size_t n = strlen(m->cgroup_root) - strlen("/slots");

        s = calloc(1, sizeof(*s));
        if (!s)
                return log_oom();
        s->m = m;
        s->anchor_pidfd = -EBADF;
        m->scope_setup = s;
        s->path = strndup(m->cgroup_root, n);
        if (!s->path)
                return log_oom();

        if (cg_open(s->path, &fd) >= 0 && cg_is_populated_at(fd) > 0) {
                /* Restarted or re-executed: adopted, with the servers in it. */
                log_info("Slot tree's scope %s found", m->scope);
                scope_finish(s, 0);
                return 0;
        }
        return scope_make(m, s); /* on failure, manager_free() kills the anchor */
}
