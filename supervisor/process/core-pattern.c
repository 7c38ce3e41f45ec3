/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>

#include "core-pattern.h"
#include "macro.h"

typedef struct Out {
        char *buf;
        size_t n;
        bool overflow;
} Out;

static void put(Out *o, const char *s, size_t len) {
        if (o->overflow || o->n + len >= CORE_NAME_MAX) {
                o->overflow = true;
                return;
        }
        memcpy(o->buf + o->n, s, len);
        o->n += len;
        o->buf[o->n] = '\0';
}

static void put_number(Out *o, unsigned long long v) {
        char b[24];
        int n = snprintf(b, sizeof(b), "%llu", v);

        put(o, b, (size_t) n);
}

static const char *base_name(const char *path) {
        const char *slash = strrchr(path, '/');

        return slash ? slash + 1 : path;
}

/* One specifier of core(5); false when slotd cannot know its value. */
static bool put_specifier(Out *o, char c, const CoreProcess *p) {
        const char *exe = p->exe ?: "";

        switch (c) {
        case '%':
                put(o, "%", 1);
                return true;
        case 'p':
        case 'P':
                if (p->pid <= 0)
                        return false;
                put_number(o, (unsigned long long) p->pid);
                return true;
        case 'u':
                put_number(o, p->uid);
                return true;
        case 'g':
                put_number(o, p->gid);
                return true;
        case 's':
                put_number(o, (unsigned long long) p->signal);
                return true;
        case 'h':
                if (!p->hostname)
                        return false;
                put(o, p->hostname, strlen(p->hostname));
                return true;
        case 'e': /* the thread's name: the executable's first 15 bytes, as exec sets it */
                put(o, base_name(exe), MIN(strlen(base_name(exe)), (size_t) 15));
                return true;
        case 'f':
                put(o, base_name(exe), strlen(base_name(exe)));
                return true;
        case 'E': /* the path with '/' written as '!' */
                for (const char *s = exe; *s; s++)
                        put(o, *s == '/' ? "!" : s, 1);
                return true;
        default: /* %t, %i, %I, %c, %d, %F, and any the kernel adds */
                return false;
        }
}

CoreWhere core_pattern_resolve(const char *pattern, bool uses_pid, const CoreProcess *p,
                               char ret[static CORE_NAME_MAX]) {
        Out o = { .buf = ret };
        bool has_pid = false;

        ret[0] = '\0';
        if (pattern[0] == '|') {
                /* The program is the first word; its arguments are the kernel's business. */
                const char *s = pattern + 1 + strspn(pattern + 1, " \t");

                put(&o, s, strcspn(s, " \t"));
                return o.overflow || o.n == 0 ? CORE_UNKNOWN : CORE_PIPE;
        }
        for (const char *s = pattern; *s; s++) {
                if (*s != '%') {
                        put(&o, s, 1);
                        continue;
                }
                if (!s[1])
                        break; /* a lone '%' at the end is dropped, as the kernel does */
                s++;
                has_pid = has_pid || *s == 'p' || *s == 'P';
                if (!put_specifier(&o, *s, p))
                        return CORE_UNKNOWN;
        }
        /* core_uses_pid appends ".PID" unless the pattern has %p already. */
        if (uses_pid && !has_pid) {
                if (p->pid <= 0)
                        return CORE_UNKNOWN;
                put(&o, ".", 1);
                put_number(&o, (unsigned long long) p->pid);
        }
        if (o.overflow || o.n == 0 || streq(ret, ".") || streq(ret, ".."))
                return CORE_UNKNOWN;
        return strchr(ret, '/') ? CORE_ELSEWHERE : CORE_IN_CWD;
}
