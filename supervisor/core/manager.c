/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <grp.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include "cgroup.h"
#include "confine.h"
#include "slotd-config.h"
#include "log.h"
#include "machine-number.h"
#include "manager.h"
#include "manager-metrics.h"
#include "notify.h"
#include "spawn.h"
#include "strv.h"

/* What slots tell the manager (slot-host.h): each hook is one of the manager's own. */
static void on_slot_changed(Slot *s, bool durable, void *userdata) {
        manager_slot_changed(userdata, s, durable);
}

static int on_slot_uuid_link(Slot *s, const char *uuid, void *userdata) {
        return manager_uuid_link(userdata, uuid, s);
}

static void on_slot_uuid_unlink(Slot *s, const char *uuid, void *userdata) {
        manager_uuid_unlink(userdata, uuid, s);
}

static void on_slot_retire(Slot *s, void *userdata) {
        manager_retire_slot(userdata, s);
}

static void on_slot_crashed(Slot *s, const char *reason, void *userdata) {
        manager_metrics_crashed(userdata, s, reason);
        manager_hook((Manager *) userdata, slot_crashed, s, reason);
}

static void on_slot_details_changed(Slot *s, unsigned changes, void *userdata) {
        manager_announce_slot(userdata, s, changes);
}

static void on_slot_misbehaved(Slot *s, CheckKind check, unsigned strikes, void *userdata) {
        manager_metrics_strike(userdata, s, check);
        manager_hook((Manager *) userdata, slot_misbehaved, s, check, strikes);
}

static void on_slot_check_error(Slot *s, CheckKind check, int error, const char *message,
                                void *userdata) {
        manager_check_error(userdata, s, check, error, message);
}

static void on_fleet_check_verdict(Fleet *f, CheckKind check, unsigned failing, unsigned checked,
                                   bool machine_fault, void *userdata) {
        manager_check_verdict(userdata, f, check, failing, checked, machine_fault);
}

static void on_fleet_sweep_done(Fleet *f, usec_t duration, void *userdata) {
        manager_metrics_sweep(userdata, f, duration);
}

static void on_slot_hold_started(Slot *s, usec_t until, void *userdata) {
        manager_hold_started(userdata, until);
}

static void on_slot_hold_ended(Slot *s, usec_t until, void *userdata) {
        manager_hold_ended(userdata, until);
}

static bool on_slot_receive_notify(Slot *s, int fd, void *userdata) {
        return manager_receive_notify(userdata, fd, s);
}

/* Probed on the first start into a killed cgroup, not at start-up: the probe clones a child
 * (a fraction of a millisecond), and no slot's cgroup has been killed before its first start. */
static bool on_slot_killed_cgroup_bug(Slot *s, void *userdata) {
        Manager *m = userdata;
        int r;

        if (m->killed_cgroup_bug >= 0)
                return m->killed_cgroup_bug;
        r = spawn_probe_killed_cgroup_bug(m->cgroup_root);
        if (r < 0)
                log_debug_errno(r, "Could not probe clone3 into a killed cgroup, assuming it works: %m");
        m->killed_cgroup_bug = r > 0;
        if (m->killed_cgroup_bug)
                log_debug("This kernel kills children cloned into a cgroup emptied by cgroup.kill; "
                          "such slots start with fork and cgroup.procs instead");
        return m->killed_cgroup_bug;
}

/* A fault of the host is the machine's while any slot has it; its message is the latest
 * slot's. */
static void on_slot_fault_changed(Slot *s, int old, void *userdata) {
        Manager *m = userdata;

        if (old != SLOT_FAULT_NONE && m->slot_faults[old] > 0 && --m->slot_faults[old] == 0)
                (void) manager_fault_clear(m, slot_fault_to_string(old));
        if (s->fault != SLOT_FAULT_NONE) {
                m->slot_faults[s->fault]++;
                (void) manager_fault_raise(m, slot_fault_to_string(s->fault), "slot %u (%s): %s",
                                           s->id, s->fleet->config->name, s->fault_why);
        }
        /* A slot held back is busy: no allocation picks it (slot_facts()). */
        manager_slot_changed(m, s, false);
}

static const SlotHooks slot_hooks = {
        .changed = on_slot_changed,
        .uuid_link = on_slot_uuid_link,
        .uuid_unlink = on_slot_uuid_unlink,
        .retire = on_slot_retire,
        .crashed = on_slot_crashed,
        .details_changed = on_slot_details_changed,
        .misbehaved = on_slot_misbehaved,
        .check_error = on_slot_check_error,
        .check_verdict = on_fleet_check_verdict,
        .sweep_done = on_fleet_sweep_done,
        .hold_started = on_slot_hold_started,
        .hold_ended = on_slot_hold_ended,
        .receive_notify = on_slot_receive_notify,
        .killed_cgroup_bug = on_slot_killed_cgroup_bug,
        .fault_changed = on_slot_fault_changed,
};

void manager_update_slot_host(Manager *m) {
        m->slot_host = (SlotHost){
                .event = m->event,
                .probe_hub = m->probe_hub,
                .slots_dir = m->slots_dir,
                .notify_dir = m->notify_path,
                .exit_dir_fd = m->exit_dir_fd,
                .keeper_fd = m->keeper_fd,
                .enforced = m->enforced,
                .machine_number = m->machine_number_text,
                .ip = m->ip,
                .ipv6 = m->ipv6,
                .local_proxy_url = m->local_proxy_url,
                .hooks = &slot_hooks,
                .userdata = m,
        };
}

int manager_new(Config *config, Manager **ret) {
        Manager *m = calloc(1, sizeof(Manager));
        int r;

        if (!m)
                return -ENOMEM;
        m->state_dir_fd = m->exit_dir_fd = m->keeper_fd = -EBADF;
        m->killed_cgroup_bug = -1;
        m->payloads.dir_fd = -EBADF;
        m->state_snapshot_needed = true; /* the first commit starts the file afresh */
        r = sd_event_new(&m->event);
        if (r < 0) {
                free(m);
                return r;
        }
        r = probe_hub_new(m->event, &m->probe_hub);
        if (r < 0) {
                sd_event_unref(m->event);
                free(m);
                return r;
        }
        m->config = config;
        metrics_init(&m->metrics);
        manager_update_slot_host(m);
        *ret = m;
        return 0;
}

static void manager_free_fleets(Manager *m) {
        for (size_t i = 0; i < m->n_fleets; i++) {
                Fleet *f = m->fleets[i];
                for (size_t j = 0; j < f->n_slots; j++)
                        if (!f->slots[j]->retired_gone)
                                slot_free(f->slots[j]);
                free(f->slots);
                free(f->cgroup_path);
                confine_seccomp_program_free(f->seccomp);
                sd_event_source_disable_unref(f->sweep_timer);
                sd_event_source_disable_unref(f->sweep_defer);
                fleet_checks_done(f);
                if (f->owned_config) {
                        config_fleet_done(f->owned_config);
                        free(f->owned_config);
                }
                free(f);
        }
        free(m->fleets);
        free(m->slots);
        m->fleets = NULL;
        m->slots = NULL;
        m->n_fleets = m->n_slots = 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        if (m->state_dirty && m->state_dir_fd >= 0)
                (void) manager_commit(m);
        manager_drop_waiters(m);
        if (m->hooks && m->hooks->close_doors)
                m->hooks->close_doors(m, m->hooks_userdata);
        manager_sock_diag_done(m);
        free(m->events);
        payload_store_done(&m->payloads);
        for (size_t i = 0; i < m->n_graveyard; i++)
                slot_free(m->graveyard[i]);
        free(m->graveyard);
        manager_free_fleets(m);
        probe_hub_free(m->probe_hub); /* after the slots: their probes are in it */
        hashmap_done(&m->uuids);
        manager_faults_done(m);
        manager_checks_done(m);
        metrics_done(&m->metrics);
        state_cache_done(&m->state_cache);
        free(m->state_changed);
        manager_scope_free(m); /* before the event loop, to which it is attached */
        sd_event_source_disable_unref(m->graveyard_source);
        sd_event_source_disable_unref(m->commit_source);
        sd_event_source_disable_unref(m->commit_retry);
        sd_event_source_disable_unref(m->ttl_timer);
        safe_close(m->state_dir_fd);
        sd_event_source_disable_unref(m->exit_watch);
        safe_close(m->exit_dir_fd);
        safe_close(m->keeper_fd);

        sd_event_unref(m->event);
        config_free(m->config);
        free(m->machine_id);
        free(m->ip);
        free(m->ipv6);
        free(m->local_proxy_url);
        free(m->cgroup_mount);
        free(m->cgroup_root);
        free(m->cgroup_root_relative);
        free(m->scope);
        free(m->notify_path);
        free(m->slots_dir);
        free(m);
        return NULL;
}

void manager_set_hooks(Manager *m, const ManagerHooks *hooks, void *userdata) {
        m->hooks = hooks;
        m->hooks_userdata = userdata;
}

Slot *manager_get_slot(Manager *m, unsigned id) {
        return id < m->n_slots ? m->slots[id] : NULL;
}

static int read_machine_id(char **ret) {
        _cleanup_fclose_ FILE *f = fopen("/etc/machine-id", "re");
        char buf[64];

        if (!f)
                return negative_errno();
        if (!fgets(buf, sizeof(buf), f))
                return -EIO;
        buf[strcspn(buf, "\n")] = '\0';
        if (strlen(buf) != 32)
                return -EBADMSG;
        *ret = strdup(buf);
        return *ret ? 0 : -ENOMEM;
}

/* The first global IPv4 address: what a player can reach, as Multiplay writes it. */
static char *detect_ip(void) {
        struct ifaddrs *list = NULL;
        char buf[INET_ADDRSTRLEN] = "";

        if (getifaddrs(&list) < 0)
                return strdup("");
        for (struct ifaddrs *i = list; i; i = i->ifa_next) {
                struct in_addr a;
                uint32_t h;

                if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK))
                        continue;
                a = ((struct sockaddr_in *) i->ifa_addr)->sin_addr;
                h = ntohl(a.s_addr);
                if ((h >> 24) == 127 || (h >> 16) == 0xa9fe) /* loopback, link-local */
                        continue;
                inet_ntop(AF_INET, &a, buf, sizeof(buf));
                break;
        }
        freeifaddrs(list);
        return strdup(buf);
}

int resolve_identity(const FleetConfig *f, uid_t *ret_uid, gid_t *ret_gid, char **ret_error) {
        struct passwd *pw;
        struct group *gr;

        errno = 0;
        pw = getpwnam(f->user);
        if (!pw) {
                if (asprintf(ret_error, "%s: fleet.user: no such user '%s'", f->file, f->user) < 0)
                        *ret_error = NULL;
                return -ESRCH;
        }
        gr = getgrnam(f->group);
        if (!gr) {
                if (asprintf(ret_error, "%s: fleet.group: no such group '%s'", f->file, f->group) < 0)
                        *ret_error = NULL;
                return -ESRCH;
        }
        *ret_uid = pw->pw_uid;
        *ret_gid = gr->gr_gid;
        return 0;
}

/* No internal processes: slotd moves into a leaf of its own, and the slot tree grows beside
 * it. */
static int self_slots_root(const char *mount, bool create, char **ret_root) {
        _cleanup_free_ char *self = NULL, *leaf = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *base;
        int r;

        r = cg_pid_path(0, &self);
        if (r < 0)
                return r;
        base = strrchr(self, '/');
        if (streq(self, "/"))
                r = asprintf(ret_root, "%s/slots", mount);
        else if (base && streq(base, "/supervisor"))
                r = asprintf(ret_root, "%s%.*s/slots", mount, (int) (base - self), self);
        else {
                if (asprintf(&leaf, "%s%s/supervisor", mount, self) < 0)
                        return -ENOMEM;
                if (create) {
                        r = cg_create(leaf);
                        if (r >= 0)
                                r = cg_open(leaf, &fd);
                        if (r >= 0)
                                r = cg_attach_at(fd, getpid());
                        if (r < 0)
                                return r;
                }
                r = asprintf(ret_root, "%s%s/slots", mount, self);
        }
        return r < 0 ? -ENOMEM : 0;
}

int manager_resolve_cgroup_root(const Config *c, bool create, char **ret_mount, char **ret_root,
                                char **ret_scope) {
        _cleanup_free_ char *mount = NULL, *root = NULL, *scope = NULL, *scope_path = NULL;
        int r;

        r = cg_find_mount(&mount);
        if (r < 0)
                return r;
        if (c->cgroup) {
                size_t n = strlen(mount);
                /* Either a path below the mount point or a cgroup path as /proc/self/cgroup
                 * shows it. */
                if (strncmp(c->cgroup, mount, n) == 0 && (c->cgroup[n] == '/' || !c->cgroup[n]))
                        root = strdup(c->cgroup);
                else if (asprintf(&root, "%s%s", mount, c->cgroup) < 0)
                        root = NULL;
        } else if ((r = manager_systemd_slots_scope(&scope, &scope_path)) != -ENXIO) {
                if (r < 0)
                        return r;
                if (asprintf(&root, "%s%s/slots", mount, scope_path) < 0)
                        root = NULL;
        } else {
                r = self_slots_root(mount, create, &root);
                if (r < 0)
                        return r;
        }
        if (!root)
                return -ENOMEM;
        *ret_mount = TAKE_PTR(mount);
        *ret_root = TAKE_PTR(root);
        if (ret_scope)
                *ret_scope = TAKE_PTR(scope);
        return 0;
}

/* Below this much, slotd's own memory.max leaves little for its tables, sd-bus and a burst
 * of calls at a thousand slots (with a few slots it has about 5 MiB resident). */
#define SLOTD_MEMORY_MIN (32ULL << 20)

/* slotd's own memory.max: the tightest on the way from its group up to the mount. Game
 * servers are charged to their slots' groups, so only a limit above the slot tree counts
 * them too. Said once at start-up; a limit too tight is warned of. */
static void manager_log_own_memory(Manager *m) {
        _cleanup_free_ char *self = NULL, *path = NULL, *tightest = NULL;
        size_t n = strlen(m->cgroup_mount);
        uint64_t limit = UINT64_MAX, v;
        char b[FORMAT_BYTES_MAX];

        if (!(m->enforced & CGROUP_MASK(CGROUP_MEMORY)) || cg_pid_path(0, &self) < 0 ||
            asprintf(&path, "%s%s", m->cgroup_mount, streq(self, "/") ? "" : self) < 0)
                return;
        while (strlen(path) > n) {
                if (cg_memory_max(path, &v) >= 0 && v < limit) {
                        limit = v;
                        free(tightest);
                        tightest = strdup(path);
                }
                *strrchr(path, '/') = '\0';
        }
        if (limit == UINT64_MAX || !tightest) {
                log_info("slotd's own memory: no memory.max above it");
                return;
        }
        if (limit < SLOTD_MEMORY_MIN)
                log_warning("slotd's own memory.max is %s (in %s), below the %llu MiB slotd may "
                            "need at a thousand slots: it may be OOM-killed (game servers keep "
                            "running, and the next slotd adopts them)", format_bytes(limit, b),
                            tightest, SLOTD_MEMORY_MIN >> 20);
        else
                log_info("slotd's own memory.max is %s (in %s)%s", format_bytes(limit, b), tightest,
                         strncmp(m->cgroup_root, tightest, strlen(tightest)) == 0 &&
                                         m->cgroup_root[strlen(tightest)] == '/'
                                 ? ", which the game servers share"
                                 : "");
}

static int manager_find_cgroups(Manager *m) {
        int r;

        r = manager_resolve_cgroup_root(m->config, true, &m->cgroup_mount, &m->cgroup_root,
                                        &m->scope);
        if (r == -ENOENT)
                return log_error_errno(r, "No cgroup v2 file system is mounted (looked in "
                                          "/proc/self/mountinfo)");
        if (r < 0)
                return log_error_errno(r, "Failed to find the cgroup for the slot tree: %m");
        return 0;
}

static int manager_setup_cgroups(Manager *m) {
        unsigned enforced = CGROUP_MASK_ALL;
        size_t n;
        int r;

        n = strlen(m->cgroup_mount);
        m->cgroup_root_relative = strdup(m->cgroup_root[n] ? m->cgroup_root + n : "/");
        if (!m->cgroup_root_relative)
                return log_oom();

        r = cg_create(m->cgroup_root);
        if (r < 0)
                return log_error_errno(r, "Failed to create cgroup %s: %m", m->cgroup_root);

        /* Controllers must be enabled at every level from the mount down to a slot's parent;
         * each level keeps only what the kernel really accepted above it. */
        enforced &= cg_enable_controllers(m->cgroup_mount, enforced);
        for (const char *p = m->cgroup_root + n; *p;) {
                const char *next = strchr(p + 1, '/');
                _cleanup_free_ char *level = strndup(m->cgroup_root,
                                                     next ? (size_t) (next - m->cgroup_root)
                                                          : strlen(m->cgroup_root));
                if (!level)
                        return log_oom();
                enforced &= cg_enable_controllers(level, enforced);
                if (!next)
                        break;
                p = next;
        }

        /* What the slot tree's root passes down is what every fleet group can enable. */
        m->enforced = enforced & cg_enable_controllers(m->cgroup_root, enforced);

        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                if (!(m->enforced & CGROUP_MASK(c)))
                        log_warning("The %s controller is not available below %s: %s limits are "
                                    "not enforced%s",
                                    cgroup_controller_to_string(c), m->cgroup_root,
                                    cgroup_controller_to_string(c),
                                    c == CGROUP_MEMORY ? ", memory is measured from the processes' "
                                                         "resident sets" : "");
        log_info("Slot tree in %s", m->cgroup_root);
        manager_log_own_memory(m);
        return 0;
}

/* A datagram on a slot's notify socket that is not heard: told once every FLOOD_LOG_INTERVAL
 * per slot, so that a flood fills neither the log nor the loop. */
static void notify_stray(Slot *s, pid_t pid, const char *why) {
        unsigned untold;

        if (ratelimit_tell(&s->notify_stray_log, now_usec(CLOCK_MONOTONIC), FLOOD_LOG_INTERVAL,
                           &untold))
                log_slot_notice(s, "Its notify socket: dropping a datagram %s (process %d; %u "
                                "more dropped untold since the last such line, at most one "
                                "every %u s)", why, (int) pid, untold,
                                (unsigned) (FLOOD_LOG_INTERVAL / USEC_PER_SEC));
}

/* Handles the datagram at the head of a slot's notify socket, left there (MSG_PEEK); false
 * when there was none. Only a process of that very slot is heard. */
static bool notify_handle_head(Manager *m, int fd, Slot *expected) {
        char buf[NOTIFY_MESSAGE_MAX + 1];
        union {
                struct cmsghdr header;
                uint8_t space[CMSG_SPACE(sizeof(struct ucred))];
        } control = {};
        struct iovec iov = { buf, sizeof(buf) };
        struct msghdr msg = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = &control,
                .msg_controllen = sizeof(control),
        };
        struct ucred *cred = NULL;
        usec_t now;
        ssize_t n;
        Slot *s;

        n = recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
        if (n < 0)
                return false;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
                    c->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
                        cred = (struct ucred *) CMSG_DATA(c);
                else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        int *fds = (int *) CMSG_DATA(c);
                        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                                safe_close(fds[i]);
                }
        if (!cred || cred->pid <= 0) {
                notify_stray(expected, 0, "without credentials");
                return true;
        }
        if ((size_t) n > NOTIFY_MESSAGE_MAX || (msg.msg_flags & MSG_TRUNC)) {
                notify_stray(expected, cred->pid, "too long for a notify message");
                return true;
        }
        /* A flood from one stranger costs a look at its cgroup once a second, not once a
         * datagram (a PID is not reused within a second unless pid_max wraps that fast). */
        now = now_usec(CLOCK_MONOTONIC);
        if (cred->pid == expected->notify_stranger && now < expected->notify_stranger_until) {
                notify_stray(expected, cred->pid, "from a process outside the slot");
                return true;
        }
        s = manager_slot_by_pid(m, cred->pid);
        if (!s || s != expected) {
                expected->notify_stranger = cred->pid;
                expected->notify_stranger_until = now + USEC_PER_SEC;
                notify_stray(expected, cred->pid, "from a process outside the slot");
                return true;
        }
        slot_handle_notify(s, buf, (size_t) n);
        return true;
}

/* Reads one datagram from a slot's notify socket; false when there was none. It leaves the
 * socket only once it was handled (its effect recorded: READY=1 marks the status file, which
 * the next slotd reads): slotd killed in between, the next one, which takes the socket back
 * from the keeper, reads it again, rather than the server's READY=1 being lost with a
 * slotd that took it and died before marking it (test-soak). Every message is idempotent
 * (READY=1 once ready, a STATUS unchanged, a heartbeat). */
bool manager_receive_notify(Manager *m, int fd, Slot *expected) {
        if (!notify_handle_head(m, fd, expected))
                return false;
        (void) recv(fd, NULL, 0, MSG_DONTWAIT); /* a datagram socket: drops the whole datagram */
        return true;
}

bool manager_allocation_exists(const char *uuid, void *userdata) {
        Slot *s = manager_slot_by_uuid(userdata, uuid);
        return s && streq_ptr(s->allocation_uuid, uuid);
}

Slot *manager_slot_by_pid(Manager *m, pid_t pid) {
        _cleanup_free_ char *path = NULL;

        if (cg_pid_path(pid, &path) < 0)
                return NULL;
        return manager_slot_by_cgroup_path(m, path);
}

Slot *manager_slot_by_cgroup_path(Manager *m, const char *path) {
        size_t n = strlen(m->cgroup_root_relative);
        const char *p, *fleet_end;
        unsigned long id;
        char *end;
        Slot *s;

        /* <root>/<fleet>/slot-<id>[/…]: the id finds the slot, the fleet must agree. */
        if (strncmp(path, m->cgroup_root_relative, n) != 0)
                return NULL;
        p = path + n;
        if (streq(m->cgroup_root_relative, "/"))
                p--;
        if (*p != '/')
                return NULL;
        p++;
        fleet_end = strchr(p, '/');
        if (!fleet_end || strncmp(fleet_end, "/slot-", 6) != 0)
                return NULL;
        errno = 0;
        id = strtoul(fleet_end + 6, &end, 10);
        if (errno != 0 || end == fleet_end + 6 || (*end != '\0' && *end != '/') || id > UINT32_MAX)
                return NULL;
        s = manager_get_slot(m, (unsigned) id);
        if (!s || strlen(s->fleet->config->name) != (size_t) (fleet_end - p) ||
            strncmp(s->fleet->config->name, p, (size_t) (fleet_end - p)) != 0)
                return NULL;
        return s;
}

/* <state_dir>/notify.d holds one sd_notify socket per slot (see slot_open_notify()). */
static int manager_setup_notify(Manager *m) {
        int r;

        r = cg_create(m->config->state_dir);
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", m->config->state_dir);
        (void) chmod(m->config->state_dir, 0755);
        if (asprintf(&m->notify_path, "%s/notify.d", m->config->state_dir) < 0)
                return log_oom();
        if (mkdir(m->notify_path, 0755) < 0 && errno != EEXIST)
                return log_error_errno(negative_errno(), "Failed to create %s: %m", m->notify_path);
        return 0;
}

int fleet_build_seccomp(const FleetConfig *fc, struct sock_fprog **ret, bool *ret_keeper_restarts,
                        char **ret_error) {
        _cleanup_free_ char *why = NULL;
        scmp_filter_ctx ctx = NULL;
        int r;

        *ret = NULL;
        *ret_keeper_restarts = true;
        if (!fc->seccomp)
                return 0;
        if (!fc->seccomp_list) {
                r = confine_seccomp_default(fc->seccomp_kill, ret, ret_keeper_restarts);
                if (r < 0 && asprintf(ret_error, "%s: security.seccomp: %s", fc->file,
                                      strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        r = confine_seccomp_new(fc->seccomp_list, fc->seccomp_kill, &ctx, ret_keeper_restarts, &why);
        if (r >= 0) {
                r = confine_seccomp_program(ctx, ret);
                seccomp_release(ctx);
        }
        if (r < 0 && asprintf(ret_error, "%s: security.seccomp: %s", fc->file,
                              why ?: strerror(-r)) < 0)
                *ret_error = NULL;
        return r;
}

/* The user and group of an earlier fleet with the same names are not looked up again: with
 * files in nsswitch.conf each lookup reads /etc/passwd or /etc/group anew. */
static int manager_fleet_identity(Manager *m, const FleetConfig *fc, uid_t *ret_uid,
                                  gid_t *ret_gid, char **ret_error) {
        for (size_t i = 0; i < m->n_fleets; i++) {
                const FleetConfig *other = m->fleets[i]->config;

                if (streq(other->user, fc->user) && streq(other->group, fc->group)) {
                        *ret_uid = m->fleets[i]->uid;
                        *ret_gid = m->fleets[i]->gid;
                        return 0;
                }
        }
        return resolve_identity(fc, ret_uid, ret_gid, ret_error);
}

int manager_add_fleet(Manager *m, const FleetConfig *fc, Fleet **ret, char **ret_error) {
        _cleanup_free_ Fleet *f = calloc(1, sizeof(Fleet));
        Fleet **fleets;
        unsigned took;
        int r;

        if (!f)
                return -ENOMEM;
        f->host = &m->slot_host;
        f->config = fc;
        r = manager_fleet_identity(m, fc, &f->uid, &f->gid, ret_error);
        if (r < 0)
                return r;
        r = fleet_build_seccomp(fc, &f->seccomp, &f->keeper_restarts, ret_error);
        if (r < 0)
                return r;
        if (asprintf(&f->cgroup_path, "%s/%s", m->cgroup_root, fc->name) < 0)
                return -ENOMEM;
        r = cg_create(f->cgroup_path);
        if (r < 0) {
                if (asprintf(ret_error, "Failed to create cgroup %s: %s", f->cgroup_path,
                             strerror(-r)) < 0)
                        *ret_error = NULL;
                free(f->cgroup_path);
                return r;
        }
        took = cg_enable_controllers(f->cgroup_path, m->enforced);
        if (took != m->enforced) {
                log_warning("Cgroup %s took fewer controllers than its parent offers; limits of "
                            "the rest are not enforced", f->cgroup_path);
                m->enforced &= took;
                manager_update_slot_host(m);
        }
        fleets = realloc(m->fleets, (m->n_fleets + 1) * sizeof(Fleet *));
        if (!fleets) {
                free(f->cgroup_path);
                return -ENOMEM;
        }
        m->fleets = fleets;
        m->fleets[m->n_fleets++] = f;
        *ret = TAKE_PTR(f);
        return 0;
}

/* New slots take new ids: an id once handed out always names the same slot. Each takes the
 * lowest index no live slot of the fleet uses, so that ports stay within the range the
 * config validated; the lowest free index is at most the number of live slots, so a map of
 * that many finds them all in one pass (not a scan of the fleet per index tried: cubic, some
 * milliseconds at start-up for 200 slots). */
int manager_add_slots(Manager *m, Fleet *f, unsigned count) {
        _cleanup_free_ bool *used = NULL;
        size_t n_used = f->n_slots + count + 1;
        unsigned index = 0;
        Slot **fs, **ms;
        int r;

        fs = realloc(f->slots, (f->n_slots + count + 1) * sizeof(Slot *));
        if (!fs)
                return -ENOMEM;
        f->slots = fs;
        ms = realloc(m->slots, (m->n_slots + count + 1) * sizeof(Slot *));
        if (!ms)
                return -ENOMEM;
        m->slots = ms;
        used = calloc(n_used, sizeof(bool));
        if (!used)
                return -ENOMEM;
        for (size_t k = 0; k < f->n_slots; k++)
                if (!f->slots[k]->retired && f->slots[k]->index < n_used)
                        used[f->slots[k]->index] = true;
        for (unsigned j = 0; j < count; j++) {
                Slot *s;

                while (used[index])
                        index++;
                r = slot_new(&m->slot_host, f, (unsigned) m->n_slots, index, &s);
                if (r < 0)
                        return r;
                used[index] = true;
                f->slots[f->n_slots++] = s;
                m->slots[m->n_slots++] = s;
                m->n_live_slots++;
        }
        return 0;
}

static int manager_setup_slots(Manager *m) {
        int r;

        for (size_t i = 0; i < m->config->n_fleets; i++) {
                _cleanup_free_ char *error = NULL;
                Fleet *f;

                r = manager_add_fleet(m, &m->config->fleets[i], &f, &error);
                if (r == -ENOMEM)
                        return log_oom();
                if (r < 0)
                        return log_error_errno(r, "%s", error ?: "Failed to set up a fleet");
                r = manager_add_slots(m, f, f->config->slots);
                if (r < 0)
                        return log_oom();
        }
        return 0;
}

static int manager_on_signal(sd_event_source *source, const struct signalfd_siginfo *si,
                             void *userdata) {
        Manager *m = userdata;

        log_info("Received %s, exiting; game servers keep running", strsignal((int) si->ssi_signo));
        (void) sd_notify(false, "STOPPING=1");
        return sd_event_exit(m->event, 0);
}

/* Every slot holds a pidfd, an inotify watch and, while probed, a socket: a thousand slots
 * need more than the customary 1024 descriptors. */
static void manager_raise_nofile(Manager *m) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        m->nofile_default = (unsigned long) rl.rlim_cur;
        if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        log_debug_errno(negative_errno(), "Failed to raise RLIMIT_NOFILE: %m");
        }
}

/* supervisor.admin_group, looked up once here rather than on every call. */
int manager_resolve_admin_group(const Config *c, gid_t *ret_gid, bool *ret_has, char **ret_error) {
        struct group *gr;

        *ret_has = false;
        if (!c->admin_group)
                return 0;
        gr = getgrnam(c->admin_group);
        if (!gr) {
                if (asprintf(ret_error, "%s: supervisor.admin_group: no such group '%s'",
                             strempty(c->config_file), c->admin_group) < 0)
                        *ret_error = NULL;
                return -ESRCH;
        }
        *ret_gid = gr->gr_gid;
        *ret_has = true;
        return 0;
}

int manager_resolve_identity(const Config *c, char **ret_id, uint64_t *ret_number,
                             const char **ret_from) {
        _cleanup_free_ char *id = NULL;
        uint64_t number;

        if (c->machine_id)
                id = strdup(c->machine_id);
        else if (read_machine_id(&id) < 0)
                id = strdup("");
        if (!id)
                return -ENOMEM;
        if (c->machine_number > 0)
                *ret_from = "machine.number";
        else if (machine_number_parse(id, &number) == 0)
                *ret_from = "machine.id itself";
        else if (c->machine_id)
                *ret_from = "derived from machine.id";
        else if (id[0])
                *ret_from = "derived from /etc/machine-id";
        else
                *ret_from = "derived from an empty machine ID: set machine.number";
        *ret_number = c->machine_number ?: machine_number_from_id(id);
        *ret_id = TAKE_PTR(id);
        return 0;
}

/* What slotd tells servers, SDKs and the bus about this machine. */
static int manager_setup_identity(Manager *m) {
        const char *from;

        if (manager_resolve_identity(m->config, &m->machine_id, &m->machine_number, &from) < 0)
                return log_oom();
        if (m->machine_id[0] == '\0' && m->config->machine_number == 0)
                log_warning("No machine.id and no /etc/machine-id: machine number %" PRIu64
                            " is that of every such host; set machine.number",
                            m->machine_number);
        (void) snprintf(m->machine_number_text, sizeof(m->machine_number_text), "%" PRIu64,
                        m->machine_number);
        m->ip = m->config->ip ? strdup(m->config->ip) : detect_ip();
        m->ipv6 = strdup(strempty(m->config->ipv6));
        m->slots_dir = strdup(m->config->slots_dir);
        if (!m->ip || !m->ipv6 || !m->slots_dir)
                return log_oom();
        /* The SDKs find the proxy by this URL; without it they would try localhost:8086. */
        if (m->config->localproxy.enabled && m->config->localproxy.n_listen > 0 &&
            asprintf(&m->local_proxy_url, "http://%s", m->config->localproxy.listen[0].text) < 0)
                return log_oom();
        return 0;
}

static int manager_setup_signals(Manager *m) {
        int r;

        r = sd_event_add_signal(m->event, NULL, SIGTERM, manager_on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGINT, manager_on_signal, m);
        if (r < 0)
                return log_error_errno(r, "Failed to handle SIGTERM/SIGINT: %m");
        return 0;
}

/* The payload store, the local proxy's token key and the doors (ManagerHooks.open_doors: the
 * bus and the proxy): once the slots and their restored state are in place. */
static int manager_open_services(Manager *m) {
        int r;

        r = payload_store_open(&m->payloads, m->state_dir_fd, m->config->localproxy.payload_ttl,
                               manager_payload_keep, m);
        if (r < 0)
                return log_error_errno(r, "Failed to open %s/payload: %m", m->config->state_dir);
        r = token_key_new(&m->token_key);
        if (r < 0)
                return log_error_errno(r, "Failed to make the local proxy's token key: %m");
        if (m->hooks && m->hooks->open_doors)
                return m->hooks->open_doors(m, m->hooks_userdata);
        return 0;
}

/* Every slot's cgroup, home and server.json, its server adopted or its start scheduled. The
 * first start is made at once: the first server does not wait for the other slots'
 * provisioning (a few hundred microseconds each), the rest start from the event loop. */
static void manager_provision_slots(Manager *m) {
        bool started = false;

        for (size_t i = 0; i < m->n_slots; i++) {
                int r = slot_provision(m->slots[i]);
                if (r < 0)
                        log_slot_error_errno(m->slots[i], r,
                                             "Failed to provision the slot, it stays stopped: %m");
                else if (!started)
                        started = slot_start_scheduled_now(m->slots[i]);
        }
}

int manager_startup(Manager *m) {
        _cleanup_free_ char *error = NULL;
        int r;

        manager_raise_nofile(m);
        r = manager_resolve_admin_group(m->config, &m->config_admin_gid, &m->config_has_admin_gid, &error);
        if (r < 0)
                return log_error_errno(r, "%s", error ?: "Failed to resolve supervisor.admin_group");
        r = manager_setup_identity(m);
        if (r < 0)
                return r;
        r = manager_setup_signals(m);
        if (r < 0)
                return r;

        r = manager_find_cgroups(m);
        if (r < 0)
                return r;
        if (m->scope)
                return manager_scope_start(m);
        return manager_startup_finish(m);
}

int manager_startup_finish(Manager *m) {
        int r;

        r = manager_setup_cgroups(m);
        if (r < 0)
                return r;
        r = manager_open_state(m);
        if (r < 0)
                return r;
        r = manager_setup_notify(m);
        if (r < 0)
                return r;
        manager_update_slot_host(m);
        r = manager_setup_slots(m);
        if (r < 0)
                return r;
        r = manager_restore_state(m);
        if (r < 0)
                return r;
        r = manager_open_services(m);
        if (r < 0)
                return r;

        manager_provision_slots(m);
        r = manager_commit(m);
        if (r < 0)
                return r;
        /* An idle machine counts towards its TTL from start-up, not from its first event. */
        manager_update_ttl(m);
        m->unseen = false;
        log_info("slotd " SLOTD_VERSION " running %zu slots in %zu fleets", m->n_live_slots, m->n_fleets);
        (void) sd_notify(false, "READY=1\nSTATUS=Supervising slots");
        return 0;
}

int manager_run(Manager *m) {
        return sd_event_loop(m->event);
}

int manager_request_reexecute(Manager *m) {
        int r = manager_commit(m);

        if (r < 0)
                return r;
        log_info("Re-executing: game servers keep running and stay our children");
        m->reexecute = true;
        return sd_event_exit(m->event, 0);
}

void manager_stop_all(Manager *m) {
        for (size_t i = 0; i < m->n_slots; i++)
                if (m->slots[i])
                        (void) slot_stop(m->slots[i]);
}
