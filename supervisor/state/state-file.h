/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "time-util.h"

/* slotd's durable record (supervisor.state_dir/state): what a restart must not lose. One
 * line per slot of space-separated key=value words; values are IDs that contain no spaces
 * (fleet names, allocation UUIDs, build configuration IDs are validated before they get
 * here). Unknown keys are ignored so that an older slotd can read a newer file.
 *
 * The file is a snapshot (the header line, then every slot) followed by a journal: each
 * commit appends the lines of the slots that changed (and the machine's lines), so that a
 * commit costs what changed, not what exists; a later line of a slot replaces the earlier.
 * When the journal has grown as large as the snapshot, the next commit writes a new
 * snapshot (manager-state.c). Only whole lines count: a last line without its newline is
 * a write that a crash cut short, and is skipped. */

typedef struct SlotRecord {
        unsigned id;
        char *fleet;
        char *allocation_uuid;       /* NULL = none */
        char *build_configuration;   /* NULL = the fleet's */
        char *reservation_uuid;      /* NULL = none */
        usec_t reserved_until;       /* the file's clock (StateRecord.boot_id) */
        usec_t hold_until;           /* the file's clock, 0 = none */
        char *failure;               /* FailureReason name, NULL = none */
        bool failed;                 /* ProcessState failed */
        unsigned restarts;
        int last_exit_code;
        int last_exit_signal;
        unsigned keeper;             /* PID of the keeper while a server runs, 0 = none */
        unsigned keeper_restarts;    /* its restarts (keeper.c) that slotd has accounted */
        bool ready;
        usec_t started_at;           /* the file's clock */
        uint64_t events;             /* allocation events announced so far (their offsets) */
        bool ready_for_players;      /* ReadyForPlayers of the allocation in uuid */
        usec_t payload_at;           /* when its payload was given (the file's clock), 0 = none */
} SlotRecord;

typedef struct StateRecord {
        bool draining;
        usec_t idle_since;           /* the file's clock, 0 = not idle */
        /* The file's clock: CLOCK_BOOTTIME of the boot boot_id names (32 hex digits, as
         * /proc/sys/kernel/random/boot_id without its dashes), whose wall offset (wallclock.h)
         * was wall_offset at the last commit. A file without it (written by an older slotd) is in
         * CLOCK_REALTIME. */
        char boot_id[33];
        usec_t wall_offset;
        uint64_t epoch;              /* names this state's run of event offsets, 0 = none yet */
        SlotRecord *slots;
        size_t n_slots;
} StateRecord;

/* The formatted lines of the last commit, so that a commit formats only the slots whose
 * record changed (the rest is copied). */
typedef struct StateLine {
        SlotRecord rec;              /* owns its strings */
        char *line;
        size_t len;
} StateLine;

typedef struct StateCache {
        StateLine *lines;
        size_t n;
} StateCache;

/* The same text as state_format(), from the cache where the records are unchanged. */
int state_format_cached(StateCache *c, const StateRecord *r, char **ret);
void state_cache_done(StateCache *c);

void state_record_done(StateRecord *r);
void slot_record_done(SlotRecord *s);

/* Pure. Returns the length written, or -ENOBUFS. */
int state_format(const StateRecord *r, char **ret);
/* The lines a commit appends: the machine's, then the slots in r (those that changed). */
int state_format_journal(const StateRecord *r, char **ret);
/* Pure and hostile-safe: a line that does not parse is skipped and counted in
 * *ret_skipped; -EBADMSG only when the header is missing. */
int state_parse(const char *text, size_t size, StateRecord *ret, unsigned *ret_skipped);

typedef enum StateClock {
        STATE_CLOCK_SAME_BOOT,       /* nothing to convert */
        STATE_CLOCK_OTHER_BOOT,      /* converted through the wall clock of the last commit */
        STATE_CLOCK_REALTIME,        /* an older slotd's file: converted from real time */
} StateClock;
/* Pure. Moves every time of r to the CLOCK_BOOTTIME of this boot (boot_id, wall_offset):
 * across a reboot through the wall clock, the only clock both boots share. A moment from
 * before this boot becomes its earliest (1): a deadline that passed is over, and a machine
 * idle since then counts as idle since the boot. */
StateClock state_record_rebase(StateRecord *r, const char *boot_id, usec_t wall_offset);

/* Writes dir/name atomically and durably: a temp file, fsync, rename, fsync of the
 * directory. */
int state_write_atomic(int dir_fd, const char *name, const char *data, size_t size);
/* The same, with reserve bytes preallocated past the end of the new file (KEEP_SIZE) before
 * it replaces the old: 1 when they were, 0 when the filesystem cannot preallocate
 * (EOPNOTSUPP); any other failure to get them fails the write and leaves the old file. */
int state_write_atomic_reserve(int dir_fd, const char *name, const char *data, size_t size,
                               uint64_t reserve);
/* fallocate(FALLOC_FL_KEEP_SIZE): the blocks of [offset, offset + length) without changing
 * the file's size; -EOPNOTSUPP where the filesystem cannot. */
int state_preallocate(int fd, uint64_t offset, uint64_t length);
/* Writes size bytes to dir/name, fsyncs and removes it: does the directory take writes? */
int state_probe_write(int dir_fd, const char *name, size_t size);
/* Appends to fd (opened O_APPEND) and makes it durable (fdatasync). On an error the file
 * may end in part of the data: write a new snapshot next. */
int state_append(int fd, const char *data, size_t size);
/* Reads dir/name; -ENOENT if there is none. Refuses files over 16 MiB. */
int state_read(int dir_fd, const char *name, char **ret, size_t *ret_size);
