/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Prometheus' text exposition format, version 0.0.4: a family's "# HELP" and "# TYPE" lines,
 * samples "name{label="value",…} value" with escaped label values, and histograms as
 * cumulative name_bucket{le="…"} lines, then name_sum and name_count. Pure: it writes into a
 * growing buffer, does no I/O and never logs. slotd (supervisor/core/manager-metrics.c) and the
 * fleet's programs share it. */

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef enum PromType {
        PROM_COUNTER,
        PROM_GAUGE,
        PROM_HISTOGRAM,
        _PROM_TYPE_MAX,
} PromType;

const char *prom_type_to_string(PromType t);

/* The text made so far. The first failure (-ENOMEM, or -EINVAL for an invalid metric or
 * label name) is kept in 'error' and every later call does nothing, so a caller writes a
 * whole exposition and checks once. */
typedef struct PromText {
        char *data;            /* NUL-terminated while size > 0 */
        size_t size;
        size_t allocated;
        int error;
} PromText;

void prom_text_done(PromText *t);
/* Hands the text over (*ret NUL-terminated, "" when nothing was written) and empties t; or
 * returns t's error. */
int prom_text_take(PromText *t, char **ret, size_t *ret_size);

/* Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*. Label names: [a-zA-Z_][a-zA-Z0-9_]*, not starting
 * with "__" (reserved by Prometheus). */
bool prom_metric_name_is_valid(const char *s);
bool prom_label_name_is_valid(const char *s);

/* A family's "# HELP name help" (help escaped: \\ and \n) and "# TYPE name type" lines. Every
 * sample of the family follows it, before the next family. */
void prom_family(PromText *t, const char *name, PromType type, const char *help);

/* One sample. 'labels' is NULL or a NULL-terminated list of names and values alternately:
 * (const char *[]){ "fleet", "game", "state", "online", NULL }. Values are escaped (\\, \",
 * \n); NaN and infinities are written as Prometheus spells them. */
void prom_sample(PromText *t, const char *name, const char *const *labels, double value);
void prom_sample_u64(PromText *t, const char *name, const char *const *labels, uint64_t value);

/* A histogram with at most PROM_BUCKETS_MAX finite upper bounds. The counts are per bucket
 * (not cumulative): buckets[i] counts the values in (bounds[i-1], bounds[i]], buckets[n_bounds]
 * those above the last bound; the text is made cumulative when written. Observing is
 * O(bounds) and needs no memory. */
#define PROM_BUCKETS_MAX 16

typedef struct PromHistogram {
        const double *bounds;  /* ascending, finite; static */
        size_t n_bounds;
        uint64_t buckets[PROM_BUCKETS_MAX + 1];
        double sum;
        uint64_t count;
} PromHistogram;

/* -EINVAL when the bounds are more than PROM_BUCKETS_MAX, not ascending or not finite. */
int prom_histogram_init(PromHistogram *h, const double *bounds, size_t n_bounds);
void prom_histogram_observe(PromHistogram *h, double value);
/* name_bucket{labels…,le="…"} for each bound and "+Inf", name_sum{labels}, name_count{labels}.
 * 'labels' must not hold "le". */
void prom_histogram(PromText *t, const char *name, const char *const *labels,
                    const PromHistogram *h);
