/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "docs.h"
#include "macro.h"

#define KEY_COMPONENT_MAX 128U

/* ---- times ---- */

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
        int64_t era;
        unsigned yoe, doy, doe;

        y -= m <= 2;
        era = (y >= 0 ? y : y - 399) / 400;
        yoe = (unsigned) (y - era * 400);
        doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + (int64_t) doe - 719468;
}

static unsigned days_in_month(unsigned y, unsigned m) {
        static const unsigned days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

        if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
                return 29;
        return days[m - 1];
}

/* n decimal digits at *p, advancing it; -1 if they are not all digits. */
static int digits(const char **p, unsigned n) {
        int v = 0;

        for (unsigned i = 0; i < n; i++) {
                char c = (*p)[i];

                if (c < '0' || c > '9')
                        return -1;
                v = v * 10 + (c - '0');
        }
        *p += n;
        return v;
}

static bool expect(const char **p, const char *set) {
        if (**p == '\0' || !strchr(set, **p))
                return false;
        (*p)++;
        return true;
}

/* ".fraction" (optional) → microseconds; digits below the microsecond are ignored. */
static int parse_fraction(const char **p, usec_t *ret) {
        usec_t us = 0, scale = 100000;
        unsigned n = 0;

        *ret = 0;
        if (**p != '.')
                return 0;
        (*p)++;
        while (**p >= '0' && **p <= '9') {
                if (n++ >= 64)
                        return -EINVAL;
                us += (usec_t) (**p - '0') * scale;
                scale /= 10;
                (*p)++;
        }
        if (n == 0)
                return -EINVAL;
        *ret = us;
        return 0;
}

/* "Z" → 0, "±HH:MM" → seconds east of UTC. */
static int parse_offset(const char **p, int64_t *ret) {
        int sign, h, m;

        if (expect(p, "Zz")) {
                *ret = 0;
                return 0;
        }
        if (**p != '+' && **p != '-')
                return -EINVAL;
        sign = **p == '-' ? -1 : 1;
        (*p)++;
        h = digits(p, 2);
        if (h < 0 || h > 23 || !expect(p, ":"))
                return -EINVAL;
        m = digits(p, 2);
        if (m < 0 || m > 59)
                return -EINVAL;
        *ret = sign * (int64_t) (h * 3600 + m * 60);
        return 0;
}

int rfc3339_parse(const char *s, usec_t *ret) {
        int y, mo, d, h, mi, sec;
        int64_t offset, t;
        usec_t frac;
        const char *p = s;

        if (!s || !ret)
                return -EINVAL;
        if (*s == '\0') {
                *ret = 0;
                return 0;
        }
        y = digits(&p, 4);
        if (y < 1970 || !expect(&p, "-") || (mo = digits(&p, 2)) < 1 || mo > 12 ||
            !expect(&p, "-") || (d = digits(&p, 2)) < 1 ||
            (unsigned) d > days_in_month((unsigned) y, (unsigned) mo) || !expect(&p, "Tt") ||
            (h = digits(&p, 2)) < 0 || h > 23 || !expect(&p, ":") ||
            (mi = digits(&p, 2)) < 0 || mi > 59 || !expect(&p, ":") ||
            (sec = digits(&p, 2)) < 0 || sec > 60)
                return -EINVAL;
        if (parse_fraction(&p, &frac) < 0 || parse_offset(&p, &offset) < 0 || *p != '\0')
                return -EINVAL;
        t = days_from_civil(y, (unsigned) mo, (unsigned) d) * 86400 + h * 3600 + mi * 60 + sec -
            offset;
        if (t < 0 || (usec_t) t * USEC_PER_SEC + frac > RFC3339_LAST_USEC)
                return -EINVAL;
        /* 0 means none: the epoch itself is its first microsecond. */
        *ret = MAX((usec_t) t * USEC_PER_SEC + frac, (usec_t) 1);
        return 0;
}

/* ---- keys ---- */

bool fleet_key_component_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");
        return n > 0 && n <= KEY_COMPONENT_MAX && s[n] == '\0' && !streq(s, ".") &&
               !streq(s, "..");
}

_printf_(1, 2) static char *key_printf(const char *format, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, format);
        r = vasprintf(&s, format, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

char *fleet_key_machine(const char *prefix, const char *machine_id) {
        return key_printf("%s/machines/%s", prefix, machine_id);
}

char *fleet_key_slot(const char *prefix, const char *fleet, const char *machine_id,
                     uint32_t slot_id) {
        return key_printf("%s/slots/%s/%s/%" PRIu32, prefix, fleet, machine_id, slot_id);
}

char *fleet_key_allocation(const char *prefix, const char *fleet, const char *allocation_id) {
        return key_printf("%s/allocations/%s/%s", prefix, fleet, allocation_id);
}

char *fleet_key_claim(const char *prefix, const char *machine_id, uint32_t slot_id) {
        return key_printf("%s/hosts/%s/claims/%" PRIu32, prefix, machine_id, slot_id);
}

char *fleet_key_fence(const char *prefix, const char *machine_id, uint32_t slot_id) {
        return key_printf("%s/fences/%s/%" PRIu32, prefix, machine_id, slot_id);
}

char *fleet_key_deallocation(const char *prefix, const char *machine_id,
                             const char *allocation_id) {
        return key_printf("%s/hosts/%s/deallocations/%s", prefix, machine_id, allocation_id);
}

char *fleet_key_allocation_id(const char *prefix, const char *allocation_id) {
        return key_printf("%s/allocation-ids/%s", prefix, allocation_id);
}

char *fleet_key_scale(const char *prefix, const char *machine_id, uint32_t slot_id) {
        return key_printf("%s/hosts/%s/scale/%" PRIu32, prefix, machine_id, slot_id);
}

/* Splits what follows "<prefix>/<kind>/" into exactly n '/'-separated components, each
 * valid; parts[] get malloc'd copies. */
static int key_split(const char *prefix, const char *kind, const char *key, size_t n,
                     char **parts) {
        size_t lp, lk;
        const char *p;

        if (!prefix || !key)
                return -EINVAL;
        lp = strlen(prefix);
        lk = strlen(kind);
        if (strncmp(key, prefix, lp) != 0 || key[lp] != '/' ||
            strncmp(key + lp + 1, kind, lk) != 0 || key[lp + 1 + lk] != '/')
                return -EINVAL;
        p = key + lp + 1 + lk + 1;
        for (size_t i = 0; i < n; i++) {
                size_t len = strcspn(p, "/");

                if ((i + 1 < n) != (p[len] == '/'))
                        goto fail;
                parts[i] = strndup(p, len);
                if (!parts[i] || !fleet_key_component_valid(parts[i])) {
                        free(parts[i]);
                        goto fail;
                }
                p += len + (p[len] == '/');
                continue;
        fail:
                for (size_t j = 0; j < i; j++)
                        parts[j] = mfree(parts[j]);
                return -EINVAL;
        }
        return 0;
}

static int slot_id_parse(const char *s, uint32_t *ret) {
        uint64_t v = 0;

        if (!s || s[0] == '\0' || (s[0] == '0' && s[1] != '\0'))
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = v * 10 + (uint64_t) (*p - '0');
                if (v > UINT32_MAX)
                        return -EINVAL;
        }
        *ret = (uint32_t) v;
        return 0;
}

static void give(char **part, char **ret) {
        if (ret)
                *ret = *part;
        else
                free(*part);
        *part = NULL;
}

int fleet_key_parse_machine(const char *prefix, const char *key, char **ret_machine_id) {
        char *parts[1];
        int r = key_split(prefix, "machines", key, 1, parts);

        if (r < 0)
                return r;
        give(&parts[0], ret_machine_id);
        return 0;
}

int fleet_key_parse_slot(const char *prefix, const char *key, char **ret_fleet,
                         char **ret_machine_id, uint32_t *ret_slot_id) {
        char *parts[3];
        uint32_t id;
        int r = key_split(prefix, "slots", key, 3, parts);

        if (r < 0)
                return r;
        r = slot_id_parse(parts[2], &id);
        free(parts[2]);
        if (r < 0) {
                free(parts[0]);
                free(parts[1]);
                return r;
        }
        give(&parts[0], ret_fleet);
        give(&parts[1], ret_machine_id);
        if (ret_slot_id)
                *ret_slot_id = id;
        return 0;
}

int fleet_key_parse_allocation(const char *prefix, const char *key, char **ret_fleet,
                               char **ret_allocation_id) {
        char *parts[2];
        int r = key_split(prefix, "allocations", key, 2, parts);

        if (r < 0)
                return r;
        give(&parts[0], ret_fleet);
        give(&parts[1], ret_allocation_id);
        return 0;
}

int fleet_key_parse_host(const char *prefix, const char *key, FleetHostKeyKind *ret_kind,
                         char **ret_machine_id, uint32_t *ret_slot_id,
                         char **ret_allocation_id) {
        FleetHostKeyKind kind;
        char *parts[3];
        uint32_t id = 0;
        int r = key_split(prefix, "hosts", key, 3, parts);

        if (r < 0)
                return r;
        if (streq(parts[1], "claims") || streq(parts[1], "scale")) {
                kind = streq(parts[1], "claims") ? FLEET_HOST_KEY_CLAIM : FLEET_HOST_KEY_SCALE;
                r = slot_id_parse(parts[2], &id);
        } else
                kind = FLEET_HOST_KEY_DEALLOCATION;
        if (r < 0 || (kind == FLEET_HOST_KEY_DEALLOCATION && !streq(parts[1], "deallocations"))) {
                for (size_t i = 0; i < 3; i++)
                        free(parts[i]);
                return -EINVAL;
        }
        free(parts[1]);
        give(&parts[0], ret_machine_id);
        if (kind != FLEET_HOST_KEY_DEALLOCATION) {
                free(parts[2]);
                if (ret_slot_id)
                        *ret_slot_id = id;
        } else
                give(&parts[2], ret_allocation_id);
        if (ret_kind)
                *ret_kind = kind;
        return 0;
}
