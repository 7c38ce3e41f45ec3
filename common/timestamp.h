/* SPDX-License-Identifier: MIT */
#pragma once

#include "time-util.h"

/* Times shown to people and written for clients: RFC 3339 (ISO 8601) in UTC with
 * milliseconds, "2026-11-24T10:00:00.000Z". One implementation for the fleet's documents and
 * answers, log lines on stderr, and slotd's messages. */

/* "2026-11-24T10:00:00.000Z" plus NUL. */
#define RFC3339_MAX 32
/* 9999-12-31T23:59:59.999999Z: the last moment written (and the last rfc3339_parse() of
 * fleet/docs accepts). */
#define RFC3339_LAST_USEC ((usec_t) 253402300799999999ULL)

/* t: CLOCK_REALTIME microseconds, 0 = none (→ ""). Writes at most RFC3339_MAX bytes to buf
 * and returns buf. Milliseconds are truncated; later than RFC3339_LAST_USEC is that. */
const char *rfc3339_format(usec_t t, char buf[static RFC3339_MAX]);
