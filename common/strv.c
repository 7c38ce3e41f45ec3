/* SPDX-License-Identifier: MIT */
#include <ctype.h>

#include "strv.h"

char **strv_free(char **l) {
        if (!l)
                return NULL;
        for (char **s = l; *s; s++)
                free(*s);
        free(l);
        return NULL;
}

size_t strv_length(char *const *l) {
        size_t n = 0;
        while (l && l[n])
                n++;
        return n;
}

int strv_push(char ***l, char *s) {
        size_t n = strv_length(*l);
        char **t = realloc(*l, sizeof(char *) * (n + 2));
        if (!t)
                return -ENOMEM;
        t[n] = s;
        t[n + 1] = NULL;
        *l = t;
        return 0;
}

int strv_extend(char ***l, const char *s) {
        char *c = strdup(s);
        if (!c)
                return -ENOMEM;
        int r = strv_push(l, c);
        if (r < 0)
                free(c);
        return r;
}

char **strv_copy(char *const *l) {
        _cleanup_strv_free_ char **c = calloc(1, sizeof(char *));
        if (!c)
                return NULL;
        STRV_FOREACH(s, l)
                if (strv_extend(&c, *s) < 0)
                        return NULL;
        return TAKE_PTR(c);
}

bool strv_equal(char *const *a, char *const *b) {
        size_t i = 0;
        for (; a && a[i] && b && b[i]; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return (!a || !a[i]) && (!b || !b[i]);
}

bool strv_contains(char *const *l, const char *s) {
        STRV_FOREACH(i, l)
                if (streq(*i, s))
                        return true;
        return false;
}

int strv_split_quoted(const char *s, char ***ret) {
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));
        _cleanup_free_ char *word = NULL;
        size_t len = 0;
        bool in_word = false;
        char quote = 0;
        int r;

        if (!l)
                return -ENOMEM;
        word = malloc(strlen(s) + 1);
        if (!word)
                return -ENOMEM;

        for (const char *p = s;; p++) {
                char c = *p;

                if (c == '\0') {
                        if (quote)
                                return -EINVAL;
                        break;
                }
                if (quote) {
                        if (c == quote)
                                quote = 0;
                        else if (c == '\\' && quote == '"' && p[1] != '\0')
                                word[len++] = *++p;
                        else
                                word[len++] = c;
                        continue;
                }
                if (isspace((unsigned char) c)) {
                        if (in_word) {
                                word[len] = '\0';
                                r = strv_extend(&l, word);
                                if (r < 0)
                                        return r;
                                len = 0;
                                in_word = false;
                        }
                        continue;
                }
                in_word = true;
                if (c == '\'' || c == '"')
                        quote = c;
                else if (c == '\\') {
                        if (p[1] == '\0')
                                return -EINVAL;
                        word[len++] = *++p;
                } else
                        word[len++] = c;
        }
        if (in_word) {
                word[len] = '\0';
                r = strv_extend(&l, word);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(l);
        return 0;
}
