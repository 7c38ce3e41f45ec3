/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "fileio.h"
#include "strv.h"

static const char *const controller_names[_CGROUP_CONTROLLER_MAX] = {
        [CGROUP_CPU] = "cpu",
        [CGROUP_MEMORY] = "memory",
        [CGROUP_PIDS] = "pids",
};

const char *cgroup_controller_to_string(CgroupController c) {
        return c >= 0 && c < _CGROUP_CONTROLLER_MAX ? controller_names[c] : NULL;
}

int cg_parse_mountinfo(const char *text, char **ret_mount) {
        const char *line = text;

        /* "36 35 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw": the mount point is
         * field 5, the file system type follows the " - " separator. */
        while (line && *line) {
                const char *end = strchrnul(line, '\n');
                _cleanup_free_ char *l = strndup(line, (size_t) (end - line));
                char *sep, *fields[5] = {}, *save = NULL, *p;
                int i = 0;

                if (!l)
                        return -ENOMEM;
                sep = strstr(l, " - ");
                if (sep && strncmp(sep + 3, "cgroup2 ", 8) == 0) {
                        *sep = '\0';
                        for (p = strtok_r(l, " ", &save); p && i < 5; p = strtok_r(NULL, " ", &save))
                                fields[i++] = p;
                        if (i == 5 && fields[4][0] == '/') {
                                char *m = strdup(fields[4]);
                                if (!m)
                                        return -ENOMEM;
                                *ret_mount = m;
                                return 0;
                        }
                }
                line = *end ? end + 1 : NULL;
        }
        return -ENOENT;
}

int cg_parse_proc_cgroup(const char *text, char **ret_path) {
        const char *p = text;

        while (p && *p) {
                const char *end = strchrnul(p, '\n');
                if (strncmp(p, "0::", 3) == 0) {
                        char *path = strndup(p + 3, (size_t) (end - p - 3));
                        if (!path)
                                return -ENOMEM;
                        *ret_path = path;
                        return 0;
                }
                p = *end ? end + 1 : NULL;
        }
        return -ENOENT;
}

unsigned cg_parse_controllers(const char *text) {
        unsigned mask = 0;
        const char *p = text;

        while (*p) {
                size_t n;
                p += strspn(p, " \t\n");
                n = strcspn(p, " \t\n");
                for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                        if (n == strlen(controller_names[c]) && strncmp(p, controller_names[c], n) == 0)
                                mask |= CGROUP_MASK(c);
                p += n;
        }
        return mask;
}

int cg_unit_slots_scope(const char *self_path, const char *unit, char **ret_scope,
                        char **ret_scope_path) {
        _cleanup_free_ char *scope = NULL, *path = NULL;
        size_t n = strlen(unit), k = strlen(".service");
        const char *p;

        if (n <= k || !streq(unit + n - k, ".service") || strchr(unit, '/'))
                return -EINVAL;
        /* The unit's own component: the first one equal to it (its slice's come before). */
        for (p = self_path; (p = strstr(p, unit)); p++)
                if (p > self_path && p[-1] == '/' && (p[n] == '/' || !p[n]))
                        break;
        if (!p)
                return -EINVAL;
        if (asprintf(&scope, "%.*s-slots.scope", (int) (n - k), unit) < 0 ||
            asprintf(&path, "%.*s%s", (int) (p - self_path), self_path, scope) < 0)
                return -ENOMEM;
        *ret_scope = TAKE_PTR(scope);
        *ret_scope_path = TAKE_PTR(path);
        return 0;
}

static int read_file(const char *path, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return negative_errno();
        return read_full_fd(fd, 4u << 20, ret, NULL);
}

int cg_find_mount(char **ret_mount) {
        _cleanup_free_ char *text = NULL;
        int r = read_file("/proc/self/mountinfo", &text);
        if (r < 0)
                return r;
        return cg_parse_mountinfo(text, ret_mount);
}

int cg_pid_path(pid_t pid, char **ret_path) {
        _cleanup_free_ char *text = NULL;
        char p[64];
        int r;

        if (pid == 0)
                snprintf(p, sizeof(p), "/proc/self/cgroup");
        else
                snprintf(p, sizeof(p), "/proc/%d/cgroup", (int) pid);
        r = read_file(p, &text);
        if (r < 0)
                return r;
        return cg_parse_proc_cgroup(text, ret_path);
}

/* A cgroup v2 id is the inode of its directory in kernfs, and kernfs takes the id as a file
 * handle of type FILEID_KERNFS (the way systemd's cg_path_from_cgroupid() finds a path). */
#define FILEID_KERNFS 0xfe

int cg_path_from_id(int mount_fd, const char *mount, uint64_t id, char **ret_path) {
        union {
                struct file_handle fh;
                uint8_t space[sizeof(struct file_handle) + sizeof(uint64_t)];
        } h = { .fh = { .handle_bytes = sizeof(uint64_t), .handle_type = FILEID_KERNFS } };
        _cleanup_close_ int fd = -EBADF;
        char proc[64], target[PATH_MAX];
        size_t n = strlen(mount);
        ssize_t k;

        memcpy(h.fh.f_handle, &id, sizeof(id));
        fd = open_by_handle_at(mount_fd, &h.fh, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        (void) snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        k = readlink(proc, target, sizeof(target) - 1);
        if (k < 0)
                return negative_errno();
        target[k] = '\0';
        if (strncmp(target, mount, n) != 0 || (target[n] != '/' && target[n] != '\0'))
                return -EXDEV; /* another cgroup2 mount's */
        *ret_path = strdup(target[n] ? target + n : "/");
        return *ret_path ? 0 : -ENOMEM;
}

/* mkdir -p. The whole path first: its parents usually exist (a slot's group, a restart's
 * state directory), and one mkdir beats one per component from / (issue 24: about 22 a slot
 * at a cold start, now 9). Only on ENOENT the parent, the same way, and the path again. */
int cg_create(const char *path) {
        _cleanup_free_ char *parent = NULL;
        char *slash;
        int r;

        if (mkdir(path, 0755) >= 0 || errno == EEXIST)
                return 0;
        if (errno != ENOENT)
                return negative_errno();
        parent = strdup(path);
        if (!parent)
                return -ENOMEM;
        slash = strrchr(parent, '/');
        if (!slash || slash == parent)
                return -ENOENT; /* no parent to make: / or a relative name */
        *slash = '\0';
        r = cg_create(parent);
        if (r < 0)
                return r;
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

int cg_open(const char *path, int *ret_fd) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        *ret_fd = fd;
        return 0;
}

int cg_write_at(int dirfd, const char *file, const char *value) {
        _cleanup_close_ int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        size_t n = strlen(value);
        ssize_t w;

        if (fd < 0)
                return negative_errno();
        w = write(fd, value, n);
        if (w < 0)
                return negative_errno();
        return (size_t) w == n ? 0 : -EIO;
}

int cg_read_at(int dirfd, const char *file, char *buf, size_t size) {
        _cleanup_close_ int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        ssize_t n;

        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, size - 1);
        if (n < 0)
                return negative_errno();
        buf[n] = '\0';
        return (int) n;
}

unsigned cg_available_controllers(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        char buf[512];

        if (cg_open(path, &fd) < 0 || cg_read_at(fd, "cgroup.controllers", buf, sizeof(buf)) < 0)
                return 0;
        return cg_parse_controllers(buf);
}

unsigned cg_enable_controllers(const char *path, unsigned mask) {
        _cleanup_close_ int fd = -EBADF;
        char buf[512], line[128] = "";

        if (cg_open(path, &fd) < 0)
                return 0;
        mask &= cg_available_controllers(path);
        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                if (mask & CGROUP_MASK(c)) {
                        strcat(line, line[0] ? " +" : "+");
                        strcat(line, controller_names[c]);
                }
        /* One write enables all or none; on failure retry one by one so that one controller
         * the kernel refuses (say, because of a process in an inner group) costs only itself. */
        if (line[0] && cg_write_at(fd, "cgroup.subtree_control", line) < 0)
                for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                        if (mask & CGROUP_MASK(c)) {
                                snprintf(line, sizeof(line), "+%s", controller_names[c]);
                                (void) cg_write_at(fd, "cgroup.subtree_control", line);
                        }
        if (cg_read_at(fd, "cgroup.subtree_control", buf, sizeof(buf)) < 0)
                return 0;
        return cg_parse_controllers(buf);
}

void cg_format_limit(uint64_t v, char buf[static 24]) {
        if (v == UINT64_MAX)
                strcpy(buf, "max");
        else
                snprintf(buf, 24, "%llu", (unsigned long long) v);
}

/* One limit: remembers the first failure and the file it was of. */
static void write_limit(int dirfd, const char *file, const char *value, int *r,
                        const char **failed) {
        int k = cg_write_at(dirfd, file, value);

        if (k < 0 && *r == 0) {
                *r = k;
                *failed = file;
        }
}

int cg_apply_limits(int dirfd, unsigned mask, const CgroupLimits *l, const char **ret_failed) {
        char v[24], cpu_max[64];
        const char *failed = NULL;
        int r = 0;

        if (mask & CGROUP_MASK(CGROUP_MEMORY)) {
                cg_format_limit(l->memory_high, v);
                write_limit(dirfd, "memory.high", v, &r, &failed);
                cg_format_limit(l->memory_max, v);
                write_limit(dirfd, "memory.max", v, &r, &failed);
                write_limit(dirfd, "memory.oom.group", "1", &r, &failed);
        }
        if (mask & CGROUP_MASK(CGROUP_CPU)) {
                cg_format_limit(l->cpu_weight, v);
                write_limit(dirfd, "cpu.weight", v, &r, &failed);
                cg_format_limit(l->cpu_max_quota, v);
                snprintf(cpu_max, sizeof(cpu_max), "%s %llu", v,
                         (unsigned long long) l->cpu_max_period);
                write_limit(dirfd, "cpu.max", cpu_max, &r, &failed);
        }
        if (mask & CGROUP_MASK(CGROUP_PIDS)) {
                cg_format_limit(l->pids_max, v);
                write_limit(dirfd, "pids.max", v, &r, &failed);
        }
        if (ret_failed)
                *ret_failed = failed;
        return r;
}

int cg_is_populated_at(int dirfd) {
        char buf[256];
        const char *p;
        int r = cg_read_at(dirfd, "cgroup.events", buf, sizeof(buf));

        if (r < 0)
                return r;
        p = strstr(buf, "populated ");
        if (!p)
                return -EIO;
        return p[10] == '1';
}

static int kill_procs_at(int dirfd) {
        char buf[8192];
        int r = cg_read_at(dirfd, "cgroup.procs", buf, sizeof(buf));
        char *save = NULL;

        if (r < 0)
                return r;
        for (char *p = strtok_r(buf, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
                long pid = strtol(p, NULL, 10);
                if (pid > 1)
                        (void) kill((pid_t) pid, SIGKILL);
        }
        return 0;
}

int cg_kill_at(int dirfd) {
        int r = cg_write_at(dirfd, "cgroup.kill", "1");
        /* cgroup.kill arrived in Linux 5.14; before it, SIGKILL per process. A process forked
         * during the walk survives it, which the populated watch then notices. */
        if (r == -ENOENT)
                return kill_procs_at(dirfd);
        return r;
}

int cg_attach_at(int dirfd, pid_t pid) {
        char v[24];
        snprintf(v, sizeof(v), "%d", (int) pid);
        return cg_write_at(dirfd, "cgroup.procs", v);
}

int cg_exists_at(int dirfd) {
        /* A removed group's directory has no entries left, its descriptor none to find. */
        if (faccessat(dirfd, "cgroup.procs", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return 1;
        return errno == ENOENT ? 0 : negative_errno();
}

int cg_remove(const char *path) {
        if (rmdir(path) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}

static int parse_cpu_usage(const char *buf, usec_t *ret) {
        const char *p = strstr(buf, "usage_usec ");

        if (!p)
                return -EIO;
        *ret = strtoull(p + 11, NULL, 10);
        return 0;
}

int cg_cpu_usage_at(int dirfd, usec_t *ret) {
        char buf[1024];
        int r = cg_read_at(dirfd, "cpu.stat", buf, sizeof(buf));

        if (r < 0)
                return r;
        return parse_cpu_usage(buf, ret);
}

int cg_cpu_usage_fd(int fd, usec_t *ret) {
        char buf[1024];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

        if (n < 0)
                return negative_errno();
        buf[n] = '\0';
        return parse_cpu_usage(buf, ret);
}

const char *cg_memory_file(bool have_memory_controller) {
        return have_memory_controller ? "memory.current" : "cgroup.procs";
}

void cg_statm_close(CgStatm *c) {
        c->fd = safe_close(c->fd);
        c->pid = 0;
}

/* The resident set from an open statm, in pages. */
static int statm_resident(int fd, uint64_t *ret) {
        char statm[128];
        unsigned long long size, resident;
        ssize_t n = pread(fd, statm, sizeof(statm) - 1, 0);

        if (n <= 0)
                return n < 0 ? negative_errno() : -ESRCH;
        statm[n] = '\0';
        if (sscanf(statm, "%llu %llu", &size, &resident) != 2)
                return -EIO;
        *ret = resident;
        return 0;
}

/* Without the memory controller: the resident sets of the processes listed in 'procs'.
 * The first one's statm stays open in 'keep' (when given): a check of a slot whose server
 * is one process is then one pread here, not an open, a read and a close. A descriptor
 * whose process has ended fails with ESRCH, even when its PID is in use again. */
static uint64_t sum_resident(char *procs, pid_t skip, CgStatm *keep) {
        uint64_t sum = 0, v; /* in pages */
        char *save = NULL;

        for (char *p = strtok_r(procs, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
                char path[64];
                long pid = strtol(p, NULL, 10);
                _cleanup_close_ int fd = -EBADF;

                if (pid <= 0 || pid == skip)
                        continue;
                if (keep && keep->fd >= 0 && keep->pid == (pid_t) pid) {
                        if (statm_resident(keep->fd, &v) >= 0) {
                                sum += v;
                                keep = NULL;
                                continue;
                        }
                        cg_statm_close(keep);
                }
                snprintf(path, sizeof(path), "/proc/%ld/statm", pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue; /* exited meanwhile */
                if (statm_resident(fd, &v) < 0)
                        continue;
                sum += v;
                if (keep) {
                        cg_statm_close(keep);
                        keep->fd = TAKE_FD(fd);
                        keep->pid = (pid_t) pid;
                        keep = NULL;
                }
        }
        return sum * (uint64_t) sysconf(_SC_PAGESIZE);
}

int cg_memory_current_at(int dirfd, bool have_memory_controller, uint64_t *ret) {
        char buf[8192];
        int r = cg_read_at(dirfd, cg_memory_file(have_memory_controller), buf, sizeof(buf));

        if (r < 0)
                return r;
        *ret = have_memory_controller ? strtoull(buf, NULL, 10) : sum_resident(buf, 0, NULL);
        return 0;
}

int cg_memory_current_fd(int fd, bool have_memory_controller, pid_t skip, CgStatm *keep,
                         uint64_t *ret) {
        char buf[8192];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

        if (n < 0)
                return negative_errno();
        buf[n] = '\0';
        *ret = have_memory_controller ? strtoull(buf, NULL, 10) : sum_resident(buf, skip, keep);
        return 0;
}

int cg_memory_high_events_fd(int fd, uint64_t *ret) {
        char buf[1024];
        const char *p;
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

        if (n < 0)
                return negative_errno();
        buf[n] = '\0';
        /* "low N\nhigh N\nmax N\noom N\noom_kill N": "high" at a line's start. */
        p = strncmp(buf, "high ", 5) == 0 ? buf : strstr(buf, "\nhigh ");
        if (!p)
                return -EIO;
        *ret = strtoull(p + (p == buf ? 5 : 6), NULL, 10);
        return 0;
}

int cg_memory_max(const char *path, uint64_t *ret) {
        _cleanup_close_ int fd = -EBADF;
        char buf[32];
        int r = cg_open(path, &fd);

        if (r < 0)
                return r;
        r = cg_read_at(fd, "memory.max", buf, sizeof(buf));
        if (r < 0)
                return r;
        *ret = strncmp(buf, "max", 3) == 0 ? UINT64_MAX : strtoull(buf, NULL, 10);
        return 0;
}

int cg_oom_kills_at(int dirfd, uint64_t *ret) {
        char buf[1024];
        const char *p;
        int r = cg_read_at(dirfd, "memory.events", buf, sizeof(buf));

        if (r < 0)
                return r;
        p = strstr(buf, "oom_kill ");
        if (!p)
                return -EIO;
        *ret = strtoull(p + 9, NULL, 10);
        return 0;
}
