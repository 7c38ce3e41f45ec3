/* SPDX-License-Identifier: MIT */
/* The text exposition format (prom-text.h), as Prometheus' own text parser reads it
 * (prometheus/common expfmt, format 0.0.4). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "prom-text.h"

/* Labels of one sample, "le" of a histogram's buckets included. */
#define PROM_LABELS_MAX 8

static const char *const type_names[_PROM_TYPE_MAX] = {
        [PROM_COUNTER] = "counter",
        [PROM_GAUGE] = "gauge",
        [PROM_HISTOGRAM] = "histogram",
};

const char *prom_type_to_string(PromType t) {
        return t >= 0 && t < _PROM_TYPE_MAX ? type_names[t] : "untyped";
}

void prom_text_done(PromText *t) {
        free(t->data);
        *t = (PromText){};
}

int prom_text_take(PromText *t, char **ret, size_t *ret_size) {
        int r = t->error;

        if (r >= 0 && !t->data && !(t->data = strdup("")))
                r = -ENOMEM;
        if (r < 0) {
                prom_text_done(t);
                return r;
        }
        *ret = TAKE_PTR(t->data);
        *ret_size = t->size;
        prom_text_done(t);
        return 0;
}

static void fail(PromText *t, int error) {
        if (t->error == 0)
                t->error = error;
}

static void append(PromText *t, const char *s, size_t n) {
        if (t->error < 0)
                return;
        if (n + 1 > t->allocated - t->size) {
                size_t want = MAX(t->allocated * 2, t->size + n + 1);
                char *p;

                want = MAX(want, (size_t) 4096);
                p = realloc(t->data, want);
                if (!p)
                        return fail(t, -ENOMEM);
                t->data = p;
                t->allocated = want;
        }
        memcpy(t->data + t->size, s, n);
        t->size += n;
        t->data[t->size] = '\0';
}

static void append_str(PromText *t, const char *s) {
        append(t, s, strlen(s));
}

/* in_label: a label value (\\, \" and \n escaped); else HELP text (\\ and \n). */
static void append_escaped(PromText *t, const char *s, bool in_label) {
        const char *run = s;

        for (; *s; s++) {
                const char *esc = *s == '\\' ? "\\\\"
                                  : *s == '\n' ? "\\n"
                                  : *s == '"' && in_label ? "\\\""
                                                          : NULL;
                if (!esc)
                        continue;
                append(t, run, (size_t) (s - run));
                append(t, esc, 2);
                run = s + 1;
        }
        append(t, run, (size_t) (s - run));
}

static bool name_chars_valid(const char *s, bool colon) {
        if (!s || !*s || (*s >= '0' && *s <= '9'))
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || *s == '_' || (colon && *s == ':')))
                        return false;
        return true;
}

bool prom_metric_name_is_valid(const char *s) {
        return name_chars_valid(s, true);
}

bool prom_label_name_is_valid(const char *s) {
        return name_chars_valid(s, false) && strncmp(s, "__", 2) != 0;
}

void prom_family(PromText *t, const char *name, PromType type, const char *help) {
        if (!prom_metric_name_is_valid(name) || type < 0 || type >= _PROM_TYPE_MAX)
                return fail(t, -EINVAL);
        append_str(t, "# HELP ");
        append_str(t, name);
        append(t, " ", 1);
        append_escaped(t, help ?: "", false);
        append_str(t, "\n# TYPE ");
        append_str(t, name);
        append(t, " ", 1);
        append_str(t, type_names[type]);
        append(t, "\n", 1);
}

/* Go's strconv.ParseFloat reads what %g writes; the shortest of 15 or 17 digits that reads
 * back as the same double. */
static void format_double(double v, char buf[static 32]) {
        if (isnan(v))
                strcpy(buf, "NaN");
        else if (isinf(v))
                strcpy(buf, v > 0 ? "+Inf" : "-Inf");
        else {
                (void) snprintf(buf, 32, "%.15g", v);
                if (strtod(buf, NULL) != v)
                        (void) snprintf(buf, 32, "%.17g", v);
        }
}

static void append_labels(PromText *t, const char *const *labels) {
        size_t n = 0;

        if (!labels || !labels[0])
                return;
        append(t, "{", 1);
        for (; labels[0]; labels += 2, n++) {
                if (!labels[1] || n >= PROM_LABELS_MAX || !prom_label_name_is_valid(labels[0]))
                        return fail(t, -EINVAL);
                if (n > 0)
                        append(t, ",", 1);
                append_str(t, labels[0]);
                append(t, "=\"", 2);
                append_escaped(t, labels[1], true);
                append(t, "\"", 1);
        }
        append(t, "}", 1);
}

static void sample_text(PromText *t, const char *name, const char *const *labels,
                        const char *value) {
        if (!prom_metric_name_is_valid(name))
                return fail(t, -EINVAL);
        append_str(t, name);
        append_labels(t, labels);
        append(t, " ", 1);
        append_str(t, value);
        append(t, "\n", 1);
}

void prom_sample(PromText *t, const char *name, const char *const *labels, double value) {
        char buf[32];

        format_double(value, buf);
        sample_text(t, name, labels, buf);
}

void prom_sample_u64(PromText *t, const char *name, const char *const *labels, uint64_t value) {
        char buf[24];

        (void) snprintf(buf, sizeof(buf), "%" PRIu64, value);
        sample_text(t, name, labels, buf);
}

int prom_histogram_init(PromHistogram *h, const double *bounds, size_t n_bounds) {
        if (n_bounds > PROM_BUCKETS_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n_bounds; i++)
                if (!isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1]))
                        return -EINVAL;
        *h = (PromHistogram){ .bounds = bounds, .n_bounds = n_bounds };
        return 0;
}

void prom_histogram_observe(PromHistogram *h, double value) {
        size_t i = 0;

        while (i < h->n_bounds && !(value <= h->bounds[i]))
                i++;
        h->buckets[i]++;
        h->count++;
        h->sum += value;
}

/* name + suffix, for the lines of a histogram. */
static int suffixed(const char *name, const char *suffix, char *buf, size_t size) {
        int n = snprintf(buf, size, "%s%s", name, suffix);

        return n < 0 || (size_t) n >= size ? -EINVAL : 0;
}

void prom_histogram(PromText *t, const char *name, const char *const *labels,
                    const PromHistogram *h) {
        const char *with_le[2 * PROM_LABELS_MAX + 1];
        char line[256], le[32];
        size_t n = 0;
        uint64_t cumulative = 0;

        for (; labels && labels[n]; n += 2)
                if (n / 2 + 1 >= PROM_LABELS_MAX || !labels[n + 1] || streq(labels[n], "le"))
                        return fail(t, -EINVAL);
        if (n > 0)
                memcpy(with_le, labels, n * sizeof(char *));
        with_le[n] = "le";
        with_le[n + 1] = le;
        with_le[n + 2] = NULL;
        if (suffixed(name, "_bucket", line, sizeof(line)) < 0)
                return fail(t, -EINVAL);
        for (size_t i = 0; i <= h->n_bounds; i++) {
                cumulative += h->buckets[i];
                if (i < h->n_bounds)
                        format_double(h->bounds[i], le);
                else
                        strcpy(le, "+Inf");
                prom_sample_u64(t, line, with_le, cumulative);
        }
        if (suffixed(name, "_sum", line, sizeof(line)) < 0)
                return fail(t, -EINVAL);
        prom_sample(t, line, labels, h->sum);
        if (suffixed(name, "_count", line, sizeof(line)) < 0)
                return fail(t, -EINVAL);
        prom_sample_u64(t, line, labels, h->count);
}
