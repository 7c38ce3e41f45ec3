/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "time-util.h"

/* The space the state file's journal needs, kept preallocated ahead of need (as etcd's WAL
 * preallocates its segments), so that a commit never meets a full disk: a change is refused
 * before it is applied when the space cannot be had, never failed after (SPEC §12).
 *
 * One commit appends at most one line per slot and the machine's lines (manager-state.c
 * puts a slot once into a commit however often it changed), so a reserve of
 * state_reserve_need() bytes past the end of the file covers the next commit whatever it
 * holds: the changes callers asked for and those slotd makes by itself (process states,
 * crashes). The space is preallocated with FALLOC_FL_KEEP_SIZE: the file's size, and so
 * its parser, never see it. Pure: no I/O. */

/* The longest line format_slot() writes, with every ID at its longest (fleet 64, IDs 128
 * bytes) and every number at its widest, is some 830 bytes; test-state-reserve checks it. A
 * field added to the record must keep it under this. */
#define STATE_SLOT_LINE_MAX 1024u
/* draining=, idle_since=, clock=, epoch=: some 140 bytes at their widest */
#define STATE_MACHINE_LINES_MAX 256u
/* A payload the recovery probe must find room for (ops.h's OPS_PAYLOAD_MAX and its temp
 * file's rounding), so that a cleared fault is not raised again by the next payload. */
#define STATE_PROBE_BYTES (32u * 1024u)

/* <state_dir>/state */
#define STATE_FILE "state"

/* The worst case of one commit. */
uint64_t state_reserve_need(size_t n_slots);
/* What a top-up refills to: need and a half, rounded up to 4 KiB. */
uint64_t state_reserve_target(uint64_t need);
/* The bytes to preallocate from the end of the file (size) when what is preallocated (up to
 * end) has fallen below need and a quarter: state_reserve_target(), so that a top-up comes
 * once per many commits; 0 when it has not. */
uint64_t state_reserve_top_up(uint64_t size, uint64_t end, uint64_t need);
/* Whether bytes more fit in the preallocated space. */
bool state_reserve_covers(uint64_t size, uint64_t end, uint64_t bytes);

/* What the manager knows of the state file's space and of the state_dir fault
 * (manager-state-space.c). */
typedef struct StateSpace {
        uint64_t prealloc_end;       /* the state file has its blocks up to this offset */
        bool no_prealloc;            /* the filesystem cannot preallocate: commits may fail */
        bool journal_broken;         /* the file may end in part of a line: snapshot next */
        bool commit_failed;          /* the last commit failed: the retry timer commits next */
        int error;                   /* the errno the state_dir fault stands for, 0 = none */
        usec_t retry_usec;           /* the retry timer's back-off */
        usec_t snapshot_not_before;  /* CLOCK_MONOTONIC: a snapshot failed, journal till then */
} StateSpace;

/* The recovery timer's back-off: 1 s, doubling, at most 10 s. */
#define STATE_RETRY_MIN_USEC (1 * USEC_PER_SEC)
#define STATE_RETRY_MAX_USEC (10 * USEC_PER_SEC)
usec_t state_retry_next(usec_t previous);
