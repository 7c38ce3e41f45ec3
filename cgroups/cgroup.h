/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"
#include "time-util.h"

/* The cgroup v2 leaf: finding the tree, creating groups, writing limits, reading stats,
 * killing. Every path here is absolute (mount point included). No logging above debug is
 * done here: callers decide what a failure means. */

typedef enum CgroupController {
        CGROUP_CPU,
        CGROUP_MEMORY,
        CGROUP_PIDS,
        _CGROUP_CONTROLLER_MAX,
} CgroupController;

#define CGROUP_MASK(c) (1u << (c))
#define CGROUP_MASK_ALL ((1u << _CGROUP_CONTROLLER_MAX) - 1)

const char *cgroup_controller_to_string(CgroupController c);

/* Parses the text of a mountinfo file for the first cgroup2 mount. Pure, for tests. */
int cg_parse_mountinfo(const char *text, char **ret_mount);
/* Parses /proc/PID/cgroup text for the "0::/path" line. Pure. */
int cg_parse_proc_cgroup(const char *text, char **ret_path);
/* Parses a controller list ("cpu io memory pids") into a mask of the controllers we use. */
unsigned cg_parse_controllers(const char *text);
/* Under systemd, where the slot tree of the service unit 'unit' (as sd_pid_get_unit() names
 * it, e.g. "slotd.service") lives: a scope of its own beside the unit in the same slice
 * ("slotd-slots.scope"), whose cgroup is the unit's sibling. self_path: slotd's cgroup below
 * the mount, which has the unit's as a component ("/system.slice/slotd.service"). Pure.
 * -EINVAL: unit is no service, or is not in self_path. */
int cg_unit_slots_scope(const char *self_path, const char *unit, char **ret_scope,
                        char **ret_scope_path);

int cg_find_mount(char **ret_mount);                 /* /proc/self/mountinfo */
int cg_pid_path(pid_t pid, char **ret_path);          /* 0 = self; path relative to mount */

/* Creates path (and missing parents, mode 0755); ok if it exists. */
/* The path below the mount of the cgroup with this id (its directory's inode), as
 * /proc/PID/cgroup shows it. mount_fd: the cgroup2 mount, open. Needs CAP_DAC_READ_SEARCH. */
int cg_path_from_id(int mount_fd, const char *mount, uint64_t id, char **ret_path);
int cg_create(const char *path);
int cg_open(const char *path, int *ret_fd);          /* O_DIRECTORY|O_PATH-less, O_CLOEXEC */

int cg_write_at(int dirfd, const char *file, const char *value);
int cg_read_at(int dirfd, const char *file, char *buf, size_t size);

/* Enables the controllers in mask in path/cgroup.subtree_control: one bulk write, then one
 * controller at a time; returns the mask that really took (re-read). */
unsigned cg_enable_controllers(const char *path, unsigned mask);
unsigned cg_available_controllers(const char *path);   /* path/cgroup.controllers */

/* "max" for UINT64_MAX, the number otherwise. */
void cg_format_limit(uint64_t v, char buf[static 24]);

typedef struct CgroupLimits {
        uint64_t memory_high;   /* bytes */
        uint64_t memory_max;    /* bytes */
        uint64_t cpu_weight;    /* 1..10000 */
        uint64_t cpu_max_quota; /* µs per cpu_max_period; UINT64_MAX = no quota */
        uint64_t cpu_max_period;
        uint64_t pids_max;      /* UINT64_MAX = max */
} CgroupLimits;

/* Writes every limit whose controller is in mask. Returns the first error, having tried all,
 * and names its file in *ret_failed (may be NULL). */
int cg_apply_limits(int dirfd, unsigned mask, const CgroupLimits *l, const char **ret_failed);

/* cgroup.events "populated": 1 populated, 0 empty, negative errno. */
int cg_is_populated_at(int dirfd);
/* cgroup.kill, falling back to SIGKILL for every pid in cgroup.procs. */
int cg_kill_at(int dirfd);
/* Moves the calling process (or pid) into the group. */
int cg_attach_at(int dirfd, pid_t pid);
/* 1 while the group dirfd names still exists, 0 once it was removed (its directory is
 * gone, though the descriptor stays valid), negative errno. */
int cg_exists_at(int dirfd);
/* rmdir; -EBUSY while populated. */
int cg_remove(const char *path);

/* cpu.stat usage_usec (available in v2 without the cpu controller). */
int cg_cpu_usage_at(int dirfd, usec_t *ret);
/* The same from an open cpu.stat (re-read from its start). */
int cg_cpu_usage_fd(int fd, usec_t *ret);
/* memory.current; where the memory controller is missing, the sum of the resident set sizes
 * of the group's processes (from /proc/PID/statm), which over-counts shared pages. */
int cg_memory_current_at(int dirfd, bool have_memory_controller, uint64_t *ret);
/* One process's /proc/PID/statm, kept open between reads (fd -EBADF: none yet). */
typedef struct CgStatm {
        pid_t pid;
        int fd;
} CgStatm;
#define CG_STATM_INIT ((CgStatm){ .pid = 0, .fd = -EBADF })
void cg_statm_close(CgStatm *c);
/* The same from a descriptor kept open (re-read from its start): memory.current, or without
 * the memory controller cgroup.procs, whose process 'skip' is left out (the slot's keeper);
 * there 'keep' (may be NULL) holds the first other process's statm open for the next call.
 * cg_memory_file() names the file to open. */
int cg_memory_current_fd(int fd, bool have_memory_controller, pid_t skip, CgStatm *keep,
                         uint64_t *ret);
const char *cg_memory_file(bool have_memory_controller);

/* memory.events "high" from an open memory.events (re-read from its start): how many times
 * the group went over memory.high and was throttled. */
int cg_memory_high_events_fd(int fd, uint64_t *ret);
/* memory.max of the group path, UINT64_MAX for "max"; -ENOENT without the controller. */
int cg_memory_max(const char *path, uint64_t *ret);

/* memory.events oom_kill: processes of the group the OOM killer took. */
int cg_oom_kills_at(int dirfd, uint64_t *ret);
