/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* Allocation and reservation UUIDs, build configuration IDs: what the contract lets them hold
 * (SPEC §7). They name files (payloads), lines of the state file and server.json's fields. */
#define ALLOC_ID_MAX 128
/* 1 to ALLOC_ID_MAX characters of A-Z a-z 0-9 . _ : - */
bool alloc_id_is_valid(const char *s);
