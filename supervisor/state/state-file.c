/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "fileio.h"
#include "macro.h"
#include "state-file.h"

#define STATE_HEADER "slotd-state 1\n"
#define STATE_MAX_SIZE (16u << 20)

void slot_record_done(SlotRecord *s) {
        free(s->fleet);
        free(s->allocation_uuid);
        free(s->build_configuration);
        free(s->reservation_uuid);
        free(s->failure);
        *s = (SlotRecord){};
}

void state_record_done(StateRecord *r) {
        for (size_t i = 0; i < r->n_slots; i++)
                slot_record_done(&r->slots[i]);
        free(r->slots);
        *r = (StateRecord){};
}

typedef struct Buffer {
        char *data;
        size_t size, allocated;
        bool failed;
} Buffer;

_printf_(2, 3) static void buffer_printf(Buffer *b, const char *fmt, ...) {
        va_list ap;
        int n;

        if (b->failed)
                return;
        for (;;) {
                va_start(ap, fmt);
                n = vsnprintf(b->data ? b->data + b->size : NULL,
                              b->data ? b->allocated - b->size : 0, fmt, ap);
                va_end(ap);
                if (n < 0) {
                        b->failed = true;
                        return;
                }
                if (b->data && b->size + (size_t) n < b->allocated) {
                        b->size += (size_t) n;
                        return;
                }
                size_t want = MAX(b->allocated * 2, b->size + (size_t) n + 256);
                char *t = realloc(b->data, want);
                if (!t) {
                        b->failed = true;
                        return;
                }
                b->data = t;
                b->allocated = want;
        }
}

static void format_slot(Buffer *b, const SlotRecord *s) {
        buffer_printf(b, "slot id=%u fleet=%s", s->id, s->fleet);
        if (s->allocation_uuid)
                buffer_printf(b, " uuid=%s", s->allocation_uuid);
        if (s->allocation_uuid && s->ready_for_players)
                buffer_printf(b, " ready_for_players=1");
        if (s->allocation_uuid && s->payload_at)
                buffer_printf(b, " payload_at=%" PRIu64, s->payload_at);
        if (s->events)
                buffer_printf(b, " events=%" PRIu64, s->events);
        if (s->build_configuration)
                buffer_printf(b, " build=%s", s->build_configuration);
        if (s->reservation_uuid)
                buffer_printf(b, " reserved=%s reserved_until=%" PRIu64,
                              s->reservation_uuid, s->reserved_until);
        if (s->hold_until)
                buffer_printf(b, " hold_until=%" PRIu64, s->hold_until);
        if (s->failure)
                buffer_printf(b, " failure=%s", s->failure);
        if (s->keeper)
                buffer_printf(b, " keeper=%u ready=%d started=%" PRIu64, s->keeper,
                              s->ready, s->started_at);
        if (s->keeper && s->keeper_restarts)
                buffer_printf(b, " keeper_restarts=%u", s->keeper_restarts);
        buffer_printf(b, " failed=%d restarts=%u exit_code=%d exit_signal=%d\n",
                      s->failed, s->restarts, s->last_exit_code, s->last_exit_signal);
}

static void format_machine(Buffer *b, const StateRecord *r) {
        buffer_printf(b, "draining=%d\nidle_since=%" PRIu64 "\n", r->draining, r->idle_since);
        if (r->boot_id[0])
                buffer_printf(b, "clock=boottime %s %" PRIu64 "\n", r->boot_id, r->wall_offset);
        if (r->epoch)
                buffer_printf(b, "epoch=%" PRIu64 "\n", r->epoch);
}

static void format_header(Buffer *b, const StateRecord *r) {
        buffer_printf(b, STATE_HEADER);
        format_machine(b, r);
}

static int format_all(const StateRecord *r, bool header, char **ret) {
        Buffer b = {};

        if (header)
                format_header(&b, r);
        else
                format_machine(&b, r);
        for (size_t i = 0; i < r->n_slots; i++)
                format_slot(&b, &r->slots[i]);
        if (b.failed) {
                free(b.data);
                return -ENOMEM;
        }
        *ret = b.data;
        return (int) b.size;
}

int state_format_journal(const StateRecord *r, char **ret) {
        return format_all(r, false, ret);
}

int state_format(const StateRecord *r, char **ret) {
        return format_all(r, true, ret);
}

static bool record_equal(const SlotRecord *a, const SlotRecord *b) {
        return a->id == b->id && streq_ptr(a->fleet, b->fleet) &&
               streq_ptr(a->allocation_uuid, b->allocation_uuid) &&
               streq_ptr(a->build_configuration, b->build_configuration) &&
               streq_ptr(a->reservation_uuid, b->reservation_uuid) &&
               a->reserved_until == b->reserved_until && a->hold_until == b->hold_until &&
               streq_ptr(a->failure, b->failure) && a->failed == b->failed &&
               a->restarts == b->restarts && a->last_exit_code == b->last_exit_code &&
               a->last_exit_signal == b->last_exit_signal && a->keeper == b->keeper &&
               a->keeper_restarts == b->keeper_restarts &&
               a->ready == b->ready && a->started_at == b->started_at &&
               a->events == b->events && a->ready_for_players == b->ready_for_players &&
               a->payload_at == b->payload_at;
}

static int record_copy(SlotRecord *dst, const SlotRecord *src) {
        SlotRecord c = *src;

        c.fleet = c.allocation_uuid = c.build_configuration = c.reservation_uuid = c.failure = NULL;
        if ((src->fleet && !(c.fleet = strdup(src->fleet))) ||
            (src->allocation_uuid && !(c.allocation_uuid = strdup(src->allocation_uuid))) ||
            (src->build_configuration && !(c.build_configuration = strdup(src->build_configuration))) ||
            (src->reservation_uuid && !(c.reservation_uuid = strdup(src->reservation_uuid))) ||
            (src->failure && !(c.failure = strdup(src->failure)))) {
                slot_record_done(&c);
                return -ENOMEM;
        }
        slot_record_done(dst);
        *dst = c;
        return 0;
}

void state_cache_done(StateCache *c) {
        for (size_t i = 0; i < c->n; i++) {
                slot_record_done(&c->lines[i].rec);
                free(c->lines[i].line);
        }
        free(c->lines);
        *c = (StateCache){};
}

int state_format_cached(StateCache *c, const StateRecord *r, char **ret) {
        Buffer head = {};
        size_t total;
        char *out, *p;

        if (r->n_slots > c->n) {
                StateLine *t = reallocarray(c->lines, r->n_slots, sizeof(StateLine));
                if (!t)
                        return -ENOMEM;
                memset(t + c->n, 0, (r->n_slots - c->n) * sizeof(StateLine));
                c->lines = t;
                c->n = r->n_slots;
        }
        format_header(&head, r);
        if (head.failed) {
                free(head.data);
                return -ENOMEM;
        }
        total = head.size;
        for (size_t i = 0; i < r->n_slots; i++) {
                StateLine *l = &c->lines[i];

                /* Only a slot whose record changed since the last commit is formatted again. */
                if (!l->line || !record_equal(&l->rec, &r->slots[i])) {
                        Buffer b = {};

                        format_slot(&b, &r->slots[i]);
                        if (b.failed || record_copy(&l->rec, &r->slots[i]) < 0) {
                                free(b.data);
                                free(l->line);
                                l->line = NULL; /* formatted afresh next time */
                                free(head.data);
                                return -ENOMEM;
                        }
                        free(l->line);
                        l->line = b.data;
                        l->len = b.size;
                }
                total += l->len;
        }
        out = malloc(total + 1);
        if (!out) {
                free(head.data);
                return -ENOMEM;
        }
        p = mempcpy(out, head.data, head.size);
        for (size_t i = 0; i < r->n_slots; i++)
                p = mempcpy(p, c->lines[i].line, c->lines[i].len);
        *p = '\0';
        free(head.data);
        *ret = out;
        return (int) total;
}

static bool word_is_safe(const char *s, size_t n) {
        if (n == 0 || n > 256)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] <= ' ' || s[i] == 0x7f || s[i] == '=')
                        return false;
        return true;
}

static int parse_u64(const char *s, size_t n, uint64_t *ret) {
        uint64_t v = 0;

        if (n == 0 || n > 20)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                if (v > (UINT64_MAX - (uint64_t) (s[i] - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        *ret = v;
        return 0;
}

static int parse_int(const char *s, size_t n, int *ret) {
        uint64_t v;
        bool neg = n > 0 && s[0] == '-';
        int r = parse_u64(s + neg, n - neg, &v);

        if (r < 0)
                return r;
        if (v > (uint64_t) INT32_MAX)
                return -ERANGE;
        *ret = neg ? -(int) v : (int) v;
        return 0;
}

static int dup_word(const char *s, size_t n, char **ret) {
        if (!word_is_safe(s, n))
                return -EINVAL;
        free(*ret);
        *ret = strndup(s, n);
        return *ret ? 0 : -ENOMEM;
}

static bool key_is(const char *key, size_t kn, const char *name) {
        return kn == strlen(name) && memcmp(key, name, kn) == 0;
}

/* The numbers with a range of their own. Like the other field groups below: 1 when the key
 * is none of the group's. */
static int parse_slot_bounded(const char *key, size_t kn, const char *val, size_t vn,
                              SlotRecord *s, bool *have_id) {
        uint64_t v = 0;
        int r;

        if (key_is(key, kn, "id")) {
                r = parse_u64(val, vn, &v);
                if (r >= 0 && v > UINT32_MAX)
                        r = -ERANGE;
                s->id = (unsigned) v;
                *have_id = r >= 0;
                return r;
        }
        if (key_is(key, kn, "keeper")) {
                r = parse_u64(val, vn, &v);
                if (r >= 0 && (v == 0 || v > INT32_MAX))
                        r = -ERANGE;
                s->keeper = (unsigned) v;
                return r;
        }
        return 1;
}

/* Who has the slot, and why it failed. */
static int parse_slot_word(const char *key, size_t kn, const char *val, size_t vn, SlotRecord *s) {
        char **field = key_is(key, kn, "fleet") ? &s->fleet :
                       key_is(key, kn, "uuid") ? &s->allocation_uuid :
                       key_is(key, kn, "build") ? &s->build_configuration :
                       key_is(key, kn, "reserved") ? &s->reservation_uuid :
                       key_is(key, kn, "failure") ? &s->failure : NULL;

        return field ? dup_word(val, vn, field) : 1;
}

/* Times and the event count, taken whole. */
static int parse_slot_u64(const char *key, size_t kn, const char *val, size_t vn, SlotRecord *s) {
        uint64_t *field = key_is(key, kn, "reserved_until") ? &s->reserved_until :
                          key_is(key, kn, "hold_until") ? &s->hold_until :
                          key_is(key, kn, "events") ? &s->events :
                          key_is(key, kn, "payload_at") ? &s->payload_at :
                          key_is(key, kn, "started") ? &s->started_at : NULL;

        return field ? parse_u64(val, vn, field) : 1;
}

static int parse_slot_flag(const char *key, size_t kn, const char *val, size_t vn, SlotRecord *s) {
        bool *field = key_is(key, kn, "failed") ? &s->failed :
                      key_is(key, kn, "ready") ? &s->ready :
                      key_is(key, kn, "ready_for_players") ? &s->ready_for_players : NULL;
        uint64_t v = 0;
        int r;

        if (!field)
                return 1;
        r = parse_u64(val, vn, &v);
        *field = v != 0;
        return r;
}

/* Restart counts: a larger one saturates rather than fails. */
static int parse_slot_count(const char *key, size_t kn, const char *val, size_t vn,
                            SlotRecord *s) {
        unsigned *field = key_is(key, kn, "restarts") ? &s->restarts :
                          key_is(key, kn, "keeper_restarts") ? &s->keeper_restarts : NULL;
        uint64_t v = 0;
        int r;

        if (!field)
                return 1;
        r = parse_u64(val, vn, &v);
        *field = (unsigned) MIN(v, (uint64_t) UINT32_MAX);
        return r;
}

static int parse_slot_exit(const char *key, size_t kn, const char *val, size_t vn, SlotRecord *s) {
        int *field = key_is(key, kn, "exit_code") ? &s->last_exit_code :
                     key_is(key, kn, "exit_signal") ? &s->last_exit_signal : NULL;

        return field ? parse_int(val, vn, field) : 1;
}

/* One "key=value"; a key this version does not know is skipped. */
static int parse_slot_field(const char *key, size_t kn, const char *val, size_t vn,
                            SlotRecord *s, bool *have_id) {
        int r;

        r = parse_slot_bounded(key, kn, val, vn, s, have_id);
        if (r <= 0)
                return r;
        r = parse_slot_word(key, kn, val, vn, s);
        if (r <= 0)
                return r;
        r = parse_slot_u64(key, kn, val, vn, s);
        if (r <= 0)
                return r;
        r = parse_slot_flag(key, kn, val, vn, s);
        if (r <= 0)
                return r;
        r = parse_slot_count(key, kn, val, vn, s);
        if (r <= 0)
                return r;
        r = parse_slot_exit(key, kn, val, vn, s);
        return r <= 0 ? r : 0;
}

/* Fields that mean nothing without their owner are dropped, as the writer would. */
static void slot_record_drop_orphans(SlotRecord *s) {
        if (!s->reservation_uuid)
                s->reserved_until = 0;
        if (!s->allocation_uuid) {
                s->ready_for_players = false;
                s->payload_at = 0;
        }
        if (!s->keeper) {
                s->ready = false;
                s->started_at = 0;
                s->keeper_restarts = 0;
        }
}

static int parse_slot_line(const char *p, size_t len, SlotRecord *ret) {
        SlotRecord s = {};
        bool have_id = false;
        int r = 0;

        for (size_t pos = 0; pos < len && r >= 0;) {
                const char *w = p + pos, *eq, *sp = memchr(w, ' ', len - pos);
                size_t wn = sp ? (size_t) (sp - w) : len - pos, kn;

                pos += wn + 1;
                if (wn == 0)
                        continue;
                eq = memchr(w, '=', wn);
                if (!eq) {
                        r = -EINVAL;
                        break;
                }
                kn = (size_t) (eq - w);
                r = parse_slot_field(w, kn, eq + 1, wn - kn - 1, &s, &have_id);
        }
        if (r >= 0 && (!have_id || !s.fleet))
                r = -EINVAL;
        slot_record_drop_orphans(&s);
        if (r < 0) {
                slot_record_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

/* "boottime <32 hex digits> <wall offset>" */
static int parse_clock(const char *p, size_t len, StateRecord *rec) {
        static const char kind[] = "boottime ";
        const size_t kn = sizeof(kind) - 1, idn = sizeof(rec->boot_id) - 1;
        uint64_t offset;

        if (len < kn + idn + 2 || memcmp(p, kind, kn) != 0 || p[kn + idn] != ' ' ||
            parse_u64(p + kn + idn + 1, len - kn - idn - 1, &offset) < 0)
                return -EINVAL;
        for (size_t i = 0; i < idn; i++)
                if (!strchr("0123456789abcdef", p[kn + i]) || p[kn + i] == '\0')
                        return -EINVAL;
        memcpy(rec->boot_id, p + kn, idn);
        rec->boot_id[idn] = '\0';
        rec->wall_offset = offset;
        return 0;
}

StateClock state_record_rebase(StateRecord *r, const char *boot_id, usec_t wall_offset) {
        StateClock c = !r->boot_id[0] ? STATE_CLOCK_REALTIME
                       : streq(r->boot_id, boot_id) ? STATE_CLOCK_SAME_BOOT
                                                    : STATE_CLOCK_OTHER_BOOT;
        usec_t from = c == STATE_CLOCK_REALTIME ? 0 : r->wall_offset;

        if (c == STATE_CLOCK_SAME_BOOT)
                return c;
        r->idle_since = boottime_rebase(r->idle_since, from, wall_offset);
        for (size_t i = 0; i < r->n_slots; i++) {
                SlotRecord *s = &r->slots[i];

                s->reserved_until = boottime_rebase(s->reserved_until, from, wall_offset);
                s->hold_until = boottime_rebase(s->hold_until, from, wall_offset);
                s->started_at = boottime_rebase(s->started_at, from, wall_offset);
                s->payload_at = boottime_rebase(s->payload_at, from, wall_offset);
        }
        return c;
}

typedef struct SlotOrder {
        unsigned id;
        size_t pos;
} SlotOrder;

static int slot_order_compare(const void *a, const void *b) {
        const SlotOrder *x = a, *y = b;

        if (x->id != y->id)
                return x->id < y->id ? -1 : 1;
        return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* The journal may hold several lines of one slot: the last one is its record. Leaves the
 * slots in id order. */
static int keep_last_of_each(StateRecord *rec) {
        _cleanup_free_ SlotOrder *order = NULL;
        SlotRecord *kept;
        size_t n = 0;

        if (rec->n_slots < 2)
                return 0;
        order = new0(SlotOrder, rec->n_slots);
        kept = new0(SlotRecord, rec->n_slots);
        if (!order || !kept) {
                free(kept);
                return -ENOMEM;
        }
        for (size_t i = 0; i < rec->n_slots; i++)
                order[i] = (SlotOrder){ rec->slots[i].id, i };
        qsort(order, rec->n_slots, sizeof(SlotOrder), slot_order_compare);
        for (size_t i = 0; i < rec->n_slots; i++) {
                SlotRecord *s = &rec->slots[order[i].pos];

                if (i + 1 < rec->n_slots && order[i + 1].id == order[i].id)
                        slot_record_done(s);
                else
                        kept[n++] = *s;
        }
        free(rec->slots);
        rec->slots = kept;
        rec->n_slots = n;
        return 0;
}

int state_parse(const char *text, size_t size, StateRecord *ret, unsigned *ret_skipped) {
        StateRecord rec = {};
        unsigned skipped = 0;
        size_t pos;
        int r;

        if (size < strlen(STATE_HEADER) || memcmp(text, STATE_HEADER, strlen(STATE_HEADER)) != 0)
                return -EBADMSG;
        for (pos = strlen(STATE_HEADER); pos < size;) {
                const char *line = text + pos, *nl = memchr(line, '\n', size - pos);
                size_t len = nl ? (size_t) (nl - line) : size - pos;
                uint64_t v;

                pos += len + 1;
                if (len == 0)
                        continue;
                /* No newline: an append that a crash cut short. */
                if (!nl || memchr(line, '\0', len)) {
                        skipped++;
                        continue;
                }
                if (len > 5 && memcmp(line, "slot ", 5) == 0) {
                        SlotRecord s;
                        SlotRecord *t;
                        if (parse_slot_line(line + 5, len - 5, &s) < 0) {
                                skipped++;
                                continue;
                        }
                        t = realloc(rec.slots, sizeof(SlotRecord) * (rec.n_slots + 1));
                        if (!t) {
                                slot_record_done(&s);
                                state_record_done(&rec);
                                return -ENOMEM;
                        }
                        rec.slots = t;
                        rec.slots[rec.n_slots++] = s;
                } else if (len > 9 && memcmp(line, "draining=", 9) == 0 &&
                           parse_u64(line + 9, len - 9, &v) >= 0)
                        rec.draining = v != 0;
                else if (len > 11 && memcmp(line, "idle_since=", 11) == 0 &&
                         parse_u64(line + 11, len - 11, &v) >= 0)
                        rec.idle_since = v;
                else if (len > 6 && memcmp(line, "epoch=", 6) == 0 &&
                         parse_u64(line + 6, len - 6, &v) >= 0)
                        rec.epoch = v;
                else if (len > 6 && memcmp(line, "clock=", 6) == 0) {
                        if (parse_clock(line + 6, len - 6, &rec) < 0)
                                skipped++;
                } else
                        skipped++;
        }
        r = keep_last_of_each(&rec);
        if (r < 0) {
                state_record_done(&rec);
                return r;
        }
        *ret = rec;
        if (ret_skipped)
                *ret_skipped = skipped;
        return 0;
}

int state_preallocate(int fd, uint64_t offset, uint64_t length) {
        if (offset > INT64_MAX || length > INT64_MAX - offset)
                return -EFBIG;
        while (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t) offset, (off_t) length) < 0)
                if (errno != EINTR)
                        return negative_errno();
        return 0;
}

int state_write_atomic(int dir_fd, const char *name, const char *data, size_t size) {
        int r = state_write_atomic_reserve(dir_fd, name, data, size, 0);

        return r < 0 ? r : 0;
}

int state_write_atomic_reserve(int dir_fd, const char *name, const char *data, size_t size,
                               uint64_t reserve) {
        char tmp[256];
        _cleanup_close_ int fd = -EBADF;
        bool reserved = false;
        size_t done = 0;
        int r;

        if ((size_t) snprintf(tmp, sizeof(tmp), ".%s.tmp", name) >= sizeof(tmp))
                return -ENAMETOOLONG;
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        while (done < size) {
                ssize_t n = write(fd, data + done, size - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = negative_errno();
                        goto fail;
                }
                done += (size_t) n;
        }
        /* The space comes before the rename: a file that could not have it is not taken. */
        if (reserve > 0) {
                r = state_preallocate(fd, size, reserve);
                if (r < 0 && r != -EOPNOTSUPP)
                        goto fail;
                reserved = r >= 0;
        }
        if (fsync(fd) < 0) {
                r = negative_errno();
                goto fail;
        }
        if (renameat(dir_fd, tmp, dir_fd, name) < 0) {
                r = negative_errno();
                goto fail;
        }
        /* The rename itself is durable only once the directory is. */
        if (fsync(dir_fd) < 0)
                return negative_errno();
        return reserved;
fail:
        (void) unlinkat(dir_fd, tmp, 0);
        return r;
}

int state_append(int fd, const char *data, size_t size) {
        size_t done = 0;

        while (done < size) {
                ssize_t n = write(fd, data + done, size - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                done += (size_t) n;
        }
        /* The file's new size is what fdatasync() makes durable with the data. */
        if (fdatasync(fd) < 0)
                return negative_errno();
        return 0;
}

int state_probe_write(int dir_fd, const char *name, size_t size) {
        static const char zeros[4096];
        _cleanup_close_ int fd = -EBADF;
        int r = 0;

        fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        for (size_t done = 0; done < size && r >= 0;) {
                ssize_t n = write(fd, zeros, MIN(sizeof(zeros), size - done));
                if (n < 0 && errno != EINTR)
                        r = negative_errno();
                else if (n > 0)
                        done += (size_t) n;
        }
        if (r >= 0 && fsync(fd) < 0)
                r = negative_errno();
        if (unlinkat(dir_fd, name, 0) < 0 && r >= 0)
                r = negative_errno();
        return r;
}

int state_read(int dir_fd, const char *name, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;

        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        return read_full_fd(fd, STATE_MAX_SIZE, ret, ret_size);
}
