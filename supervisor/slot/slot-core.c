/* SPDX-License-Identifier: MIT */
/* Core dumps of crashed servers (SPEC §3, "Core dumps"). The kernel writes a server's core
 * where core_pattern says, before its keeper hears of the death; the keeper's status says
 * whether it did ("dumped", spawn.h). slotd then files a core written in the slot's home
 * (its working directory) under <home>/cores/, named by time, PID and signal, and keeps the
 * newest limits.cores_kept of them; a core given to a program (systemd-coredump) or written
 * elsewhere is that place's, and is only named. Sizes are bounded by limits.core
 * (RLIMIT_CORE). Everything here is a few system calls on the slot's home, no reads of the
 * core itself. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core-pattern.h"
#include "fileio.h"
#include "log.h"
#include "slot-internal.h"
#include "strv.h"

#define CORES_DIR "cores"
#define CORE_FILE_PREFIX "core-"

static int read_proc_line(const char *path, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t size;
        int r;

        if (fd < 0)
                return negative_errno();
        r = read_full_fd(fd, 4096, ret, &size);
        if (r < 0)
                return r;
        (*ret)[strcspn(*ret, "\n")] = '\0';
        return 0;
}

/* <home>/cores, made by slotd and owned by it: the server may not plant a link there. */
static int open_cores_dir(Slot *s) {
        struct stat st;
        int fd;

        if (mkdirat(s->home_fd, CORES_DIR, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        fd = openat(s->home_fd, CORES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
                safe_close(fd);
                return -EPERM;
        }
        return fd;
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Keeps the newest 'keep' cores (their names sort by time). */
static void prune_cores(Slot *s, int dir_fd, unsigned keep) {
        _cleanup_strv_free_ char **names = NULL;
        DIR *d;
        struct dirent *de;
        int fd = dup(dir_fd);
        size_t n;

        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (strncmp(de->d_name, CORE_FILE_PREFIX, strlen(CORE_FILE_PREFIX)) == 0 &&
                    strv_extend(&names, de->d_name) < 0)
                        break;
        closedir(d);
        n = strv_length(names);
        if (n <= keep)
                return;
        qsort(names, n, sizeof(char *), cmp_names);
        for (size_t i = 0; i < n - keep; i++)
                if (unlinkat(dir_fd, names[i], 0) < 0 && errno != ENOENT)
                        log_slot_warning_errno(s, errno, "Failed to remove the old core %s/%s/%s: %m",
                                               s->home, CORES_DIR, names[i]);
}

/* Moves the core the kernel wrote in the home into cores/; the path it now has, or NULL. */
static char *file_core(Slot *s, const char *name, pid_t pid, int sig) {
        _cleanup_close_ int dir_fd = -EBADF;
        char stamp[32], kept[CORE_NAME_MAX + 64], *path;
        struct tm tm;
        struct stat st;
        time_t now = time(NULL);

        /* The kernel's file: regular, the server's, one link (nothing planted beside it). */
        if (fstatat(s->home_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            st.st_nlink != 1 || st.st_uid != s->fleet->uid) {
                log_slot_warning(s, "The server left no core file %s/%s (core_pattern)", s->home,
                                 name);
                return NULL;
        }
        dir_fd = open_cores_dir(s);
        if (dir_fd < 0) {
                log_slot_warning_errno(s, dir_fd, "Failed to keep the core %s/%s: %s/%s: %m",
                                       s->home, name, s->home, CORES_DIR);
                return NULL;
        }
        if (!gmtime_r(&now, &tm) || strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm) == 0)
                stamp[0] = '\0';
        snprintf(kept, sizeof(kept), CORE_FILE_PREFIX "%s-%d-SIG%s", stamp, (int) pid,
                 sigabbrev_np(sig) ?: "UNKNOWN");
        if (renameat(s->home_fd, name, dir_fd, kept) < 0) {
                log_slot_warning_errno(s, errno, "Failed to move the core %s/%s to %s/: %m",
                                       s->home, name, CORES_DIR);
                return NULL;
        }
        prune_cores(s, dir_fd, MAX(s->fleet->config->cores_kept, 1U));
        if (asprintf(&path, "%s/%s/%s", s->home, CORES_DIR, kept) < 0)
                return NULL;
        return path;
}

static char *core_where(Slot *s, pid_t pid, int sig) {
        _cleanup_free_ char *pattern = NULL, *uses_pid = NULL;
        char name[CORE_NAME_MAX], host[256] = "", *where = NULL;
        CoreWhere w;

        if (read_proc_line("/proc/sys/kernel/core_pattern", &pattern) < 0)
                return NULL;
        (void) read_proc_line("/proc/sys/kernel/core_uses_pid", &uses_pid);
        (void) gethostname(host, sizeof(host) - 1);
        w = core_pattern_resolve(pattern, uses_pid && streq(uses_pid, "1"),
                                 &(CoreProcess){ .pid = pid, .uid = s->fleet->uid,
                                                 .gid = s->fleet->gid, .signal = sig,
                                                 .exe = slot_build_config(s)->build,
                                                 .hostname = host },
                                 name);
        switch (w) {
        case CORE_IN_CWD:
                return file_core(s, name, pid, sig);
        case CORE_PIPE: /* "|/lib/systemd/systemd-coredump": coredumpctl has it */
                return asprintf(&where, "|%s", name) < 0 ? NULL : where;
        case CORE_ELSEWHERE:
                if (name[0] == '/')
                        return strdup(name);
                return asprintf(&where, "%s/%s", s->home, name) < 0 ? NULL : where;
        default:
                log_slot_warning(s, "The server's core went where core_pattern '%s' says, which "
                                 "slotd cannot tell", pattern);
                return NULL;
        }
}

void slot_collect_core(Slot *s, pid_t pid, int sig) {
        free(s->last_core);
        s->last_core = core_where(s, pid, sig);
        if (s->last_core)
                log_slot_notice(s, "Server %d left a core: %s", (int) pid, s->last_core);
}
