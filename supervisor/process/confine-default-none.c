/* SPDX-License-Identifier: MIT */
/* A cross build cannot run confine-gen: no prebuilt default filter, libseccomp compiles it at
 * run time (confine_seccomp_default()). */
#include "confine.h"

const struct sock_filter confine_default_eperm[] = { { 0, 0, 0, 0 } };
const unsigned short confine_default_eperm_len = 0;
