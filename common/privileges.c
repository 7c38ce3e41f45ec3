/* SPDX-License-Identifier: MIT */
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>

#include "log.h"
#include "macro.h"
#include "privileges.h"

int drop_privileges(const char *user, const char *key, bool user_groups) {
        struct passwd *pw;
        int r;

        if (geteuid() != 0) {
                log_debug("Not started as root: running as uid %u", (unsigned) geteuid());
                return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ? negative_errno() : 0;
        }
        errno = 0;
        pw = getpwnam(user);
        if (!pw)
                return log_error_errno(errno > 0 ? errno : ENOENT, "%s: no such user '%s'%s", key,
                                       user, errno > 0 ? ": %m" : "");
        if (pw->pw_uid == 0)
                return log_error_errno(EPERM, "%s: '%s' is root; this process parses the "
                                       "network and runs unprivileged", key, user);
        r = user_groups ? initgroups(user, pw->pw_gid) : setgroups(0, NULL);
        if (r < 0 || setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
            setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0)
                return log_error_errno(errno, "Failed to become user '%s': %m", user);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return log_error_errno(errno, "Failed to set no_new_privs: %m");
        log_info("Running as user %s (uid %u, gid %u)", user, (unsigned) pw->pw_uid,
                 (unsigned) pw->pw_gid);
        return 0;
}
