/* SPDX-License-Identifier: MIT */
/* etcd-drive's state and the helpers its files share (etcd-drive.c: the script, requests,
 * watches, benches; etcd-drive-leases.c: many leases kept alive at once). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "etcd.h"
#include "macro.h"
#include "time-util.h"

#define MAX_WORDS 64
#define MAX_WATCHES 8
#define MAX_NESTED 8

typedef struct Drive Drive;

typedef struct DriveWatch {
        Drive *drive;
        char name[32];
        bool created;
        EtcdWatch *watch;
        size_t events;
        int error;
} DriveWatch;

struct Drive {
        sd_event *event;
        Etcd *etcd;
        EtcdBatch *batch;
        EtcdBatchTxn *cancel_later; /* batch-cancel: by the first answer */
        void *cancel_later_data;
        uint64_t batches_before;
        bool bench_batched;
        char *bench_value;
        char **lines;
        size_t n_lines, next;
        usec_t started;
        int64_t lease, rev;
        DriveWatch watches[MAX_WATCHES];
        /* wait */
        DriveWatch *waiting;
        size_t wait_for;
        sd_event_source *timer;
        /* keepalive-for, bench */
        usec_t until, period;
        size_t count, target, ok, issued;
        int64_t last_ttl;
        usec_t *lat;
        /* leases, keepalive-many, keepalive-cancel */
        int64_t *many;
        size_t n_many, answered, errors, expired, last_ok, rounds, round_errors;
        int first_error;
        char many_prefix[32];
        bool many_mode, many_report;
        usec_t round_start;
        unsigned cancelled_called;
        int status;
        /* the script */
        sd_event_source *input;
        char partial[4096];
        size_t partial_len;
        bool busy, eof;
};

/* etcd-drive.c */
void step(Drive *d);
void end_line(Drive *d);
bool print_error(Drive *d, const EtcdResponse *r);
int64_t number(Drive *d, const char *s);

/* etcd-drive-leases.c: leases N TTL [PREFIX], keepalive-many's rounds, keepalive-cancel */
void many_round(Drive *d);
int run_leases(Drive *d, char **w, size_t n);
int run_keepalive_cancel(Drive *d);
