/* SPDX-License-Identifier: MIT */
/* fleet-load's numbers (fleet-load.h): samples, etcd's counters, the processes' CPU. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "fleet-load.h"

/* ---- the numbers ---- */

int samples_add(Samples *s, double v) {
        if (s->n == s->cap) {
                size_t cap = s->cap ? 2 * s->cap : 1024;
                double *n = realloc(s->v, cap * sizeof(double));

                if (!n)
                        return -ENOMEM;
                s->v = n;
                s->cap = cap;
        }
        s->v[s->n++] = v;
        return 0;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;

        return x < y ? -1 : x > y;
}

/* Python's round(x, nd): the correctly rounded decimal (glibc's printf is exact). */
double py_round(double x, int nd) {
        char buf[64];

        if (x >= 1e15 || x <= -1e15)
                return x;
        snprintf(buf, sizeof(buf), "%.*f", nd, x);
        return strtod(buf, NULL);
}

void samples_sort(Samples *s) {
        qsort(s->v, s->n, sizeof(double), cmp_double);
}

/* Nearest rank: k = max(1, ceil(p% of n)), rounded to 3 decimals; null without samples.
 * integer: the samples are whole numbers, printed as such (confirm_ms). s is sorted. */
json_t *pct(const Samples *s, double p, bool integer) {
        size_t k;

        if (s->n == 0)
                return json_null();
        k = (size_t) (p / 100.0 * (double) s->n + 0.999999);
        if (k < 1)
                k = 1;
        if (integer)
                return json_integer((json_int_t) s->v[k - 1]);
        return json_real(py_round(s->v[k - 1], 3));
}

/* "2026-11-24T10:00:00.000Z" -> ms since the epoch. */
bool rfc3339_ms(const char *s, int64_t *ret) {
        struct tm tm = {};
        int ms = 0;

        if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                         &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
                return false;
        if (strlen(s) >= 23 && s[19] == '.' && sscanf(s + 20, "%3d", &ms) != 1)
                return false;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        *ret = (int64_t) timegm(&tm) * 1000 + ms;
        return true;
}

/* ---- etcd's counters and the processes' CPU, at the window's edges ---- */

/* A blocking request (only at the window's edges): its body, NUL-terminated, or NULL. */
static char *fetch(const char *base, const char *path, const char *post) {
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        CURL *easy = curl_easy_init();
        char *url = NULL, *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        long status = 0;
        bool ok = false;

        if (h && easy && f && asprintf(&url, "%s%s", base, path) >= 0) {
                curl_easy_setopt(easy, CURLOPT_URL, url);
                curl_easy_setopt(easy, CURLOPT_TIMEOUT, 10L);
                curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
                curl_easy_setopt(easy, CURLOPT_WRITEDATA, f);
                curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h);
                if (post)
                        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, post);
                ok = curl_easy_perform(easy) == CURLE_OK &&
                     curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
                     status == 200;
        }
        if (f && fclose(f) != 0)
                ok = false;
        if (!ok) {
                free(buf);
                buf = NULL;
        }
        free(url);
        curl_easy_cleanup(easy);
        curl_slist_free_all(h);
        return buf;
}

/* Adds v to the number name[0..len) of the object cs, which has it from 0. */
static void counter_add(json_t *cs, const char *name, size_t len, double v) {
        char key[64];
        json_t *n;

        if (len >= sizeof(key))
                return;
        memcpy(key, name, len);
        key[len] = '\0';
        if ((n = json_object_get(cs, key)))
                json_real_set(n, json_real_value(n) + v);
        else
                json_object_set_new(cs, key, json_real(v));
}

/* etcd's /metrics, as the Python client read it (its expressions; a name is [a-z_]+): the
 * metrics wanted, summed over their labels, and the unary gRPC calls etcd served (each gateway
 * request is one), in all and by method. */
static void metrics_parse(json_t *cs, char *text) {
        regex_t plain, grpc;
        regmatch_t m[6];
        char *line, *save = NULL, name[64];
        double v;
        int n;

        if (regcomp(&plain, "^(etcd_mvcc_(put|delete|txn|range)_total|"
                            "etcd_disk_wal_fsync_duration_seconds_(count|sum)|"
                            "etcd_disk_backend_commit_duration_seconds_count|"
                            "etcd_server_proposals_committed_total)(\\{[^}]*\\})? ([0-9.e+-]+)$",
                    REG_EXTENDED) != 0)
                return;
        if (regcomp(&grpc, "^grpc_server_handled_total\\{.*grpc_method=\"([A-Za-z]+)\".*"
                           "grpc_type=\"unary\"\\} ([0-9.e+-]+)$", REG_EXTENDED) != 0) {
                regfree(&plain);
                return;
        }
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                /* (glibc's regexec is slow, and this is inside the window: the client's CPU) */
                if (strncmp(line, "etcd_", 5) == 0 && regexec(&plain, line, 6, m, 0) == 0)
                        counter_add(cs, line, (size_t) m[1].rm_eo, strtod(line + m[5].rm_so, NULL));
                if (!strstr(line, "grpc_type=\"unary\"}") || regexec(&grpc, line, 3, m, 0) != 0)
                        continue;
                v = strtod(line + m[2].rm_so, NULL);
                n = snprintf(name, sizeof(name), "requests_%.*s", (int) (m[1].rm_eo - m[1].rm_so),
                             line + m[1].rm_so);
                counter_add(cs, "requests", strlen("requests"), v);
                counter_add(cs, name, (size_t) n, v);
        }
        regfree(&plain);
        regfree(&grpc);
}

/* The counters, and the revision (the gateway gives header.revision as a JSON string). */
json_t *etcd_counters(const char *endpoint) {
        char *text = fetch(endpoint, "/metrics", NULL), *status = NULL;
        json_t *cs = json_object(), *doc = NULL, *rev;

        if (cs && text)
                metrics_parse(cs, text);
        if (text)
                status = fetch(endpoint, "/v3/maintenance/status", "{}");
        if (status)
                doc = json_loads(status, 0, NULL);
        rev = json_object_get(json_object_get(doc, "header"), "revision");
        if (cs && json_is_string(rev))
                json_object_set_new(cs, "revision",
                                    json_real(strtod(json_string_value(rev), NULL)));
        else if (cs && json_is_integer(rev))
                json_object_set_new(cs, "revision", json_real((double) json_integer_value(rev)));
        else
                cs = (json_decref(cs), NULL);
        json_decref(doc);
        free(status);
        free(text);
        return cs;
}

/* utime + stime of /proc/PID/stat in seconds; < 0 when it cannot be read. */
static double cpu_of(int pid) {
        char path[64], buf[1024], *p;
        unsigned long long ut, st;
        FILE *f;
        size_t n;

        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 1, " %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu",
                         &ut, &st) != 2)
                return -1;
        return (double) (ut + st) / (double) sysconf(_SC_CLK_TCK);
}

/* CPU seconds by --pid NAME (summed; a PID gone counts 0), in the order first given, and the
 * client's own ("client"). */
json_t *cpu_sample(const char *const *pids, size_t n_pids) {
        json_t *out = json_object();
        struct rusage ru;

        for (size_t i = 0; out && i < n_pids; i++) {
                const char *eq = strchr(pids[i], '=');
                double c = cpu_of(atoi(eq + 1));

                counter_add(out, pids[i], (size_t) (eq - pids[i]), c >= 0 ? c : 0);
        }
        getrusage(RUSAGE_SELF, &ru);
        if (out)
                json_object_set_new(out, "client", json_real((double) ru.ru_utime.tv_sec +
                                                             (double) ru.ru_utime.tv_usec / 1e6 +
                                                             (double) ru.ru_stime.tv_sec +
                                                             (double) ru.ru_stime.tv_usec / 1e6));
        return out;
}

