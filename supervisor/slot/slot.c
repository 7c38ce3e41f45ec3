/* SPDX-License-Identifier: MIT */
/* One slot's life: creation and provisioning (cgroup, home, what an earlier slotd left), its
 * place in the allocation view, a new configuration, and what is read of it. The process is
 * slot-process.c's, the keeper's restarts and adoption slot-keeper.c's, sessions
 * slot-alloc.c's, checks slot-checks.c's. */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include "cgroup.h"
#include "log.h"
#include "server-json.h"
#include "slot-internal.h"
#include "spawn.h"

bool slot_is_allocated(const Slot *s) {
        return s->allocation_uuid != NULL;
}

bool slot_is_running(const Slot *s) {
        return s->process_state == PROCESS_STARTING || s->process_state == PROCESS_RUNNING;
}

SlotFacts slot_facts(const Slot *s) {
        return (SlotFacts){
                .allocated = s->allocation_uuid != NULL,
                .reserved = s->reservation_uuid != NULL,
                .held = s->hold_until != 0,
                .running = slot_is_running(s),
                .ready = s->ready,
                .failed = s->process_state == PROCESS_FAILED,
                /* Mid-restart, or due for one: not a slot to hand out as it is. */
                .busy = s->process_state == PROCESS_STOPPING || s->start_defer || s->stale ||
                        s->retired || s->restart_pending || s->fault != SLOT_FAULT_NONE,
        };
}

SlotState slot_state(const Slot *s) {
        SlotFacts f = slot_facts(s);
        return slot_state_from_facts(&f);
}

void slot_set_process_state(Slot *s, ProcessState state) {
        if (s->process_state == state)
                return;
        log_slot_debug(s, "%s → %s", process_state_to_string(s->process_state),
                       process_state_to_string(state));
        s->process_state = state;
}

int slot_new(SlotHost *host, Fleet *f, unsigned id, unsigned index, Slot **ret) {
        Slot *s = calloc(1, sizeof(Slot));

        if (!s)
                return -ENOMEM;
        s->host = host;
        s->fleet = f;
        s->id = id;
        s->index = index;
        s->cgroup_fd = s->home_fd = s->status_fd = s->keeper_pidfd = s->notify_fd = -EBADF;
        s->token_fd = s->output_fd = -EBADF;
        s->cpu_stat_fd = s->memory_fd = s->memory_events_fd = -EBADF;
        s->statm = CG_STATM_INIT;
        s->port = (uint16_t) (f->config->game_port_base + index);
        s->query_port = (uint16_t) (f->config->query_port_base + index);
        snprintf(s->id_string, sizeof(s->id_string), "%u", id);
        snprintf(s->log_prefix, sizeof(s->log_prefix), "slot %u (%s): ", id, f->config->name);
        if (asprintf(&s->cgroup_path, "%s/slot-%u", f->cgroup_path, id) < 0 ||
            asprintf(&s->home, "%s/%s/slot-%u", host->slots_dir, f->config->name, id) < 0 ||
            asprintf(&s->log_dir, "%s/logs", s->home) < 0 ||
            asprintf(&s->notify_path, "%s/%u", host->notify_dir, id) < 0 ||
            slot_log_fields_init(&s->log_fields, id, f->config->name) < 0 ||
            !(s->build_configuration = strdup(f->config->build_configuration))) {
                slot_free(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

Slot *slot_free(Slot *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->events_source);
        sd_event_source_disable_unref(s->child_source);
        sd_event_source_disable_unref(s->keeper_io);
        safe_close(s->keeper_pidfd);
        safe_close(s->token_fd);
        safe_close(s->output_fd);
        sd_event_source_disable_unref(s->account_timer);
        sd_event_source_disable_unref(s->stop_timer);
        sd_event_source_disable_unref(s->start_defer);
        sd_event_source_disable_unref(s->reserve_timer);
        sd_event_source_disable_unref(s->hold_timer);
        slot_checks_stop(s);
        slot_fault_done(s);
        for (int k = 0; k < _CHECK_KIND_MAX; k++)
                free(s->strikes[k]);
        free(s->query);
        free(s->last_check_error);
        safe_close(s->cgroup_fd);
        safe_close(s->cpu_stat_fd);
        safe_close(s->memory_fd);
        safe_close(s->home_fd);
        safe_close(s->status_fd);
        sd_event_source_disable_unref(s->notify_source);
        safe_close(s->notify_fd);
        free(s->notify_path);
        free(s->cgroup_path);
        free(s->home);
        free(s->log_dir);
        slot_log_fields_done(&s->log_fields);
        free(s->allocation_uuid);
        free(s->reservation_uuid);
        free(s->build_configuration);
        free(s->announced_allocation);
        free(s->last_deallocation);
        free(s->status);
        free(s->last_core);
        free(s);
        return NULL;
}

static int make_owned_dir_at(int dirfd, const char *name, uid_t uid, gid_t gid, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (mkdirat(dirfd, name, 0750) < 0 && errno != EEXIST)
                return negative_errno();
        /* O_NOFOLLOW: the directory belongs to the game server, which may have replaced it
         * with a symlink to somewhere root writes. */
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int slot_setup_home(Slot *s) {
        _cleanup_free_ char *fleet_dir = NULL;
        _cleanup_close_ int parent = -EBADF, logs = -EBADF;
        int r;

        if (asprintf(&fleet_dir, "%s/%s", s->host->slots_dir, s->fleet->config->name) < 0)
                return -ENOMEM;
        r = cg_create(fleet_dir); /* plain mkdir -p, root-owned 0755 */
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to create %s: %m", fleet_dir);
        parent = open(fleet_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (parent < 0)
                return log_slot_error_errno(s, negative_errno(), "Failed to open %s: %m",
                                            fleet_dir);
        s->home_fd = safe_close(s->home_fd);
        r = make_owned_dir_at(parent, strrchr(s->home, '/') + 1, s->fleet->uid, s->fleet->gid,
                              &s->home_fd);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to set up home %s: %m", s->home);
        r = make_owned_dir_at(s->home_fd, "logs", s->fleet->uid, s->fleet->gid, &logs);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to set up %s: %m", s->log_dir);
        return 0;
}

static CgroupLimits slot_limits(const Slot *s) {
        const FleetConfig *f = s->fleet->config;
        uint64_t weight = (uint64_t) (f->usage_cpu * 100.0 + 0.5);

        return (CgroupLimits){
                .memory_high = f->memory_high, /* "max" unless limits.memory_high */
                .memory_max = f->memory_max,
                .cpu_weight = MIN(MAX(weight, 1u), 10000u),
                .cpu_max_period = 100000,
                .cpu_max_quota = f->cpu_max > 0 ? (uint64_t) (f->cpu_max * 100000.0 + 0.5)
                                                : UINT64_MAX,
                .pids_max = f->pids_max,
        };
}

static int slot_on_cgroup_events(sd_event_source *source, const struct inotify_event *ev,
                                 void *userdata) {
        Slot *s = userdata;

        /* The main process is reaped through its pidfd; until then its exit decides. */
        if (s->main_pid == 0 && s->process_state == PROCESS_STOPPING &&
            cg_is_populated_at(s->cgroup_fd) == 0)
                slot_dispatch(s, SLOT_EVENT_EMPTY);
        return 0;
}

/* Creates and opens the cgroup and watches its cgroup.events; the limits are written at each
 * start (slot_prepare_cgroup()). */
static int slot_setup_cgroup(Slot *s) {
        _cleanup_free_ char *events = NULL;
        int r;

        r = cg_create(s->cgroup_path);
        if (r < 0)
                return r;
        s->cgroup_fd = safe_close(s->cgroup_fd);
        s->cpu_stat_fd = safe_close(s->cpu_stat_fd);
        s->memory_fd = safe_close(s->memory_fd);
        s->memory_events_fd = safe_close(s->memory_events_fd);
        r = cg_open(s->cgroup_path, &s->cgroup_fd);
        if (r < 0)
                return r;
        if (asprintf(&events, "%s/cgroup.events", s->cgroup_path) < 0)
                return -ENOMEM;
        s->events_source = sd_event_source_disable_unref(s->events_source);
        return sd_event_add_inotify(s->host->event, &s->events_source, events, IN_MODIFY,
                                    slot_on_cgroup_events, s);
}

/* A server never runs unbounded: no start without every limit written. Each start checks
 * the group is still there (one faccessat): an operator or a tool may have removed it behind
 * slotd's back (rmdir takes empty groups only, so its server had ended, an exit handled as
 * any other; kernfs tells no watch of cgroup.events of the removal). Then the limits are
 * written again (a handful of writes, against the clone and exec of a start). */
int slot_prepare_cgroup(Slot *s) {
        CgroupLimits limits = slot_limits(s);
        const char *file = NULL;
        int r = s->cgroup_fd >= 0 ? cg_exists_at(s->cgroup_fd) : 0;

        if (r == 0) {
                if (s->cgroup_fd >= 0)
                        log_slot_warning(s, "Cgroup %s was removed behind slotd's back, making "
                                         "it anew", s->cgroup_path);
                r = slot_setup_cgroup(s);
                if (r < 0)
                        return slot_start_fault(s, SLOT_FAULT_CGROUP, r,
                                                "cannot make cgroup %s: %m", s->cgroup_path);
        }
        r = cg_apply_limits(s->cgroup_fd, s->host->enforced, &limits, &file);
        if (r < 0)
                return slot_start_fault(s, SLOT_FAULT_CGROUP, r, "cannot write %s/%s: %m",
                                        s->cgroup_path, file);
        return 0;
}

/* At provisioning: run if the fleet starts on provision or a session lives here, unless the
 * slot was left failed or stopped by pre-recovery. */
static bool slot_wants_to_run(const Slot *s) {
        if (s->process_state == PROCESS_FAILED || s->failure == FAILURE_PRE_RECOVERY)
                return false;
        return s->fleet->config->start_on_provision || slot_is_allocated(s);
}

/* Processes an earlier slotd left in the cgroup: their keeper is adopted; without one they
 * cannot be watched for their exit status, and are ended rather than left to run twice. */
static int slot_provision_populated(Slot *s) {
        pid_t keeper = slot_find_keeper(s);
        CgroupLimits limits = slot_limits(s);
        const char *file = NULL;
        int r;

        /* The configuration may have changed while slotd was away. */
        r = cg_apply_limits(s->cgroup_fd, s->host->enforced, &limits, &file);
        if (r < 0)
                log_slot_warning_errno(s, r, "Failed to write the limits to %s/%s: %m",
                                       s->cgroup_path, file);

        if (keeper > 0) {
                r = slot_adopt(s, keeper);
                if (r >= 0)
                        return 0;
                log_slot_warning_errno(s, r, "Failed to adopt keeper %d: %m", (int) keeper);
        }
        log_slot_warning(s, "Cgroup %s holds processes slotd cannot adopt, killing "
                         "them before starting anew", s->cgroup_path);
        slot_set_process_state(s, PROCESS_STOPPING);
        s->stop_requested = true;
        s->restart_requested = slot_wants_to_run(s);
        s->cgroup_killed = true;
        r = cg_kill_at(s->cgroup_fd);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to kill %s: %m", s->cgroup_path);
        if (cg_is_populated_at(s->cgroup_fd) == 0)
                slot_dispatch(s, SLOT_EVENT_EMPTY);
        return 0;
}

/* It ran when slotd went away and ended since: its keeper left the status. */
static void slot_provision_ended(Slot *s) {
        int code, sig;

        (void) slot_open_status(s, false);
        s->main_pid = s->restored_keeper;
        slot_set_process_state(s, s->restored_ready ? PROCESS_RUNNING : PROCESS_STARTING);
        log_slot_info(s, "Its server ended while slotd was not running");
        /* A keeper ends after it wrote how its server ended and moved its last output; one
         * killed outright wrote nothing, and the pipe it alone read (slotd's read end ended
         * with slotd) took what it held along. Not counted, as its size is unknown: told. */
        if (s->status_fd < 0 || spawn_read_status(s->status_fd, &code, &sig, NULL) <= 0)
                log_slot_warning(s, "Its keeper was killed while slotd was not running: what "
                                 "its server had written and the keeper had not yet moved "
                                 "to logs/server.log is lost (at most a pipe's capacity, "
                                 "not counted in LogBytesLost)");
        s->keeper_restarts = s->restored_keeper_restarts;
        slot_keeper_exited(s, 0, SIGKILL);
}

/* The state file is the truth: an earlier slotd may have rewritten server.json for a change
 * it was killed before making durable (a Deallocate whose reply never left). The server it
 * started or kept, adopted now, reads what the state says. */
static ServerJson slot_server_json(Slot *s, const char *uuid, const char *build_configuration,
                                   char port[static 8], char query_port[static 8]);

static void slot_reconcile_server_json(Slot *s) {
        char port[8], query_port[8];
        ServerJson j = slot_server_json(s, s->allocation_uuid, s->build_configuration, port,
                                        query_port);
        int r = server_json_same_at(s->home_fd, &j);

        if (r != 0)
                return; /* the same; or unreadable, and the start's write says why */
        if (faccessat(s->home_fd, "server.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                log_slot_notice(s, "%s/server.json did not say what the state says "
                                "(allocation %s): rewritten", s->home,
                                s->allocation_uuid ?: "none");
        (void) slot_write_server_json(s);
}

int slot_provision(Slot *s) {
        int r;

        /* Neither failure stops the slot for good: its start retries both, a fault of the
         * host until they succeed. */
        r = slot_setup_cgroup(s);
        if (r < 0)
                log_slot_error_errno(s, r, "Failed to set up cgroup %s: %m", s->cgroup_path);
        else if (slot_setup_home(s) < 0)
                s->home_fd = safe_close(s->home_fd);
        else
                slot_reconcile_server_json(s);

        if (r >= 0 && cg_is_populated_at(s->cgroup_fd) > 0)
                return slot_provision_populated(s);
        if (s->restored_keeper > 0) {
                slot_provision_ended(s);
                return 0;
        }
        /* Started from the event loop, one slot an event: the slots started first are
         * served (their exits, their keepers' restarts) while the rest start. */
        if (slot_wants_to_run(s) && slot_schedule_start(s) < 0)
                slot_dispatch(s, SLOT_EVENT_START);
        else
                slot_hook_changed(s, false);
        return 0;
}

const BuildConfig *slot_build_config(const Slot *s) {
        const FleetConfig *f = s->fleet->config;
        return fleet_config_find_build(f, s->build_configuration) ?: &f->build_configs[0];
}

/* The content of the slot's server.json; port and query_port are the caller's buffers. */
static ServerJson slot_server_json(Slot *s, const char *uuid, const char *build_configuration,
                                   char port[static 8], char query_port[static 8]) {
        const FleetConfig *f = s->fleet->config;
        const BuildConfig *bc = fleet_config_find_build(f, build_configuration) ?:
                                &f->build_configs[0];

        snprintf(port, 8, "%u", s->port);
        snprintf(query_port, 8, "%u", s->query_port);
        return (ServerJson){
                .server_id = s->id_string,
                .allocated_uuid = uuid,
                .machine_id = s->host->machine_number,
                .fleet_id = f->name,
                .ip = s->host->ip,
                .ipv6 = s->host->ipv6,
                .port = port,
                .query_port = query_port,
                .query_type = bc->query == QUERY_NONE ? "" : query_type_to_string(bc->query),
                .server_log_dir = s->log_dir,
                .server_files_dir = s->home,
                .local_proxy_url = s->host->local_proxy_url,
                .region_id = f->region_id,
                .region_name = f->region_name,
                .variable_names = bc->variable_names,
                .variable_values = bc->variable_values,
                .n_variables = bc->n_variables,
                .reserve = s->json_reserve,
        };
}

int slot_write_server_json_as(Slot *s, const char *uuid, const char *build_configuration) {
        char port[8], query_port[8];
        ServerJson j = slot_server_json(s, uuid, build_configuration, port, query_port);
        size_t need = 0;
        int r;

        r = server_json_write_at(s->home_fd, &j, 0, 0, &need);
        if (r >= 0) {
                if (s->fault == SLOT_FAULT_SLOTS_DIR && !s->start_blocked)
                        slot_fault_clear(s);
                return r;
        }
        if (!slot_storage_fault(r))
                return r;
        /* The room it lacked, kept for the retry to reserve. */
        s->json_reserve = MAX(s->json_reserve, need);
        s->json_dirty = true;
        return slot_fault(s, SLOT_FAULT_SLOTS_DIR, r, "cannot write %s/server.json: %m", s->home);
}

int slot_write_server_json(Slot *s) {
        return slot_write_server_json_as(s, s->allocation_uuid, s->build_configuration);
}

void slot_reconfigure(Slot *s, bool build_changed) {
        CgroupLimits limits = slot_limits(s);
        const char *file = NULL;
        int r;

        /* The keeper holds the command line and confinement it was started with. */
        s->keeper_outdated = true;
        (void) slot_disarm(s);
        /* A server that runs keeps running: the new limits that could not be written are
         * written at its next start, which refuses to go on without them. */
        if (s->cgroup_fd >= 0 &&
            (r = cg_apply_limits(s->cgroup_fd, s->host->enforced, &limits, &file)) < 0)
                log_slot_warning_errno(s, r, "Failed to write the new limits to %s/%s: %m",
                                       s->cgroup_path, file);
        if (!build_changed)
                return;
        if (slot_is_allocated(s)) {
                s->stale = slot_is_running(s);
                slot_hook_changed(s, false); /* its fleet's build configurations, announced */
                return;
        }
        (void) free_and_strdup(&s->build_configuration, s->fleet->config->build_configuration);
        slot_end_hold(s, HOLD_EVENT_BUILD_CHANGE);
        if (slot_is_running(s) || s->process_state == PROCESS_STOPPING) {
                log_slot_info(s, "Configuration changed, restarting into it");
                s->restart_requested = true;
                slot_dispatch(s, SLOT_EVENT_STOP);
        }
        slot_hook_changed(s, true);
}

uint64_t slot_memory_current(Slot *s) {
        bool controller = s->host->enforced & CGROUP_MASK(CGROUP_MEMORY);
        uint64_t v = 0;

        /* Kept open, as cpu.stat is: a check is a pread, not an open, a read and a close.
         * Without the controller the keeper's few pages are left out, and while the
         * checks run the server's statm stays open too (closed by slot_checks_stop()). */
        if (s->memory_fd < 0 && s->cgroup_fd >= 0)
                s->memory_fd = openat(s->cgroup_fd, cg_memory_file(controller),
                                      O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (s->memory_fd < 0 ||
            cg_memory_current_fd(s->memory_fd, controller, s->main_pid,
                                 s->checks_on ? &s->statm : NULL, &v) < 0)
                return 0;
        return v;
}

double slot_cpu_usage(Slot *s) {
        usec_t usage, now = now_usec(CLOCK_MONOTONIC);

        /* With checks on, the figure is the last interval's, as the check judged it. */
        if (s->fleet->config->check_interval > 0)
                return s->cpu_usage;
        if (s->cgroup_fd < 0 || cg_cpu_usage_at(s->cgroup_fd, &usage) < 0)
                return s->cpu_usage;
        /* Cores over the time since the previous sample, at most every 100 ms, so that
         * property reads in a burst do not turn noise into a figure. */
        if (s->cpu_sample_at == 0 || now - s->cpu_sample_at >= 100 * USEC_PER_MSEC) {
                if (s->cpu_sample_at != 0 && usage >= s->cpu_sample_usage)
                        s->cpu_usage = (double) (usage - s->cpu_sample_usage) /
                                       (double) (now - s->cpu_sample_at);
                s->cpu_sample_usage = usage;
                s->cpu_sample_at = now;
        }
        return s->cpu_usage;
}

pid_t slot_server_pid(Slot *s) {
        if (s->main_pid > 0 && s->server_pid == 0)
                s->server_pid = spawn_server_pid(s->cgroup_fd, s->main_pid);
        return s->server_pid;
}

void slot_details_changed(Slot *s, unsigned changes) {
        s->host->hooks->details_changed(s, changes, s->host->userdata);
}
