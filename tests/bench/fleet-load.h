/* SPDX-License-Identifier: MIT */
#pragma once

/* fleet-load's numbers (fleet-load-numbers.c): samples and their percentiles, etcd's counters
 * and the processes' CPU, read at the window's edges. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

typedef struct Samples {
        double *v;
        size_t n, cap;
} Samples;

/* 0, or -ENOMEM. */
int samples_add(Samples *s, double v);
/* Python's round(x, nd): half to even, as the Python client's figures were rounded. */
double py_round(double x, int nd);
/* Sorts the samples (before pct). */
void samples_sort(Samples *s);
/* The p-th percentile of sorted samples by nearest rank (k = max(1, ceil(p/100 n)), the k-th
 * smallest), rounded to 3 decimals (integer: as an integer); JSON null without samples. */
json_t *pct(const Samples *s, double p, bool integer);
/* "2026-11-24T10:00:00.000Z" -> ms since the epoch; false if it is not that. */
bool rfc3339_ms(const char *s, int64_t *ret);
/* etcd's counters (its /metrics and its revision), by name; NULL when etcd did not answer. */
json_t *etcd_counters(const char *endpoint);
/* CPU seconds by NAME of each "NAME=PID" (summed; a PID gone counts 0), and this process's
 * own ("client"). */
json_t *cpu_sample(const char *const *pids, size_t n_pids);
