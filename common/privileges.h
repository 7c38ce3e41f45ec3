/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* For the processes that parse the network (slotd-registry, slotd-allocator): started as
 * root, they become user and keep no capability: setresuid() away from uid 0 clears them
 * all, and no_new_privs keeps a setuid binary from giving any back. Not started as root, only
 * no_new_privs is set. key names the setting in messages ("allocator.user"). With
 * user_groups, the user's supplementary groups are taken (initgroups()), else none. */
int drop_privileges(const char *user, const char *key, bool user_groups);
