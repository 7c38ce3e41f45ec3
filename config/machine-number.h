/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

/* machine.number (SPEC §2): the machine's ID as Multiplay has it, an integer: server.json's
 * machineID, the Allocations API's machineId. Unity's SDKs and API clients read it as a 64-bit
 * signed integer, from a JSON number or a numeric string (Go's json.Number refuses a leading
 * zero, Unreal's Strtoi64 with base 0 would read one as octal): so 1 to INT64_MAX, written in
 * decimal without sign or leading zero. Pure: no I/O, no logging. */

#define MACHINE_NUMBER_MAX ((uint64_t) INT64_MAX)
#define MACHINE_NUMBER_RULE "a decimal number from 1 to 9223372036854775807, without sign or " \
                            "leading zero"

/* 0 and the number; -EINVAL when s is not decimal digits without a leading zero (a sign, a
 * space, a dot, "0x…" and "" included), -ERANGE for 0 or above MACHINE_NUMBER_MAX. *ret is
 * untouched on failure. */
int machine_number_parse(const char *s, uint64_t *ret);

/* The number of a machine whose machine.number is not set, from its machine ID (machine.id,
 * else /etc/machine-id): the ID itself when machine_number_parse() takes it; otherwise the
 * first 8 bytes of the SHA-256 of the ID's characters, big-endian, with the top bit cleared,
 * and 1 for 0. Stable across restarts and hosts; two IDs share a number with odds 2^-63. */
uint64_t machine_number_from_id(const char *id);
