/* SPDX-License-Identifier: MIT */
/* Reading the configuration: the files, the INI reader that feeds inih line by line, the
 * dispatch of each key to its parser, and the messages every error ends up as. */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <ini.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "config-internal.h"
#include "strv.h"

static const char *const query_type_table[_QUERY_TYPE_MAX] = {
        [QUERY_NONE] = "none",
        [QUERY_SQP] = "sqp",
        [QUERY_A2S] = "a2s",
};

const char *query_type_to_string(QueryType t) {
        if ((unsigned) t >= _QUERY_TYPE_MAX)
                return NULL;
        return query_type_table[t];
}

QueryType query_type_from_string(const char *s) {
        if (s)
                for (size_t i = 0; i < _QUERY_TYPE_MAX; i++)
                        if (streq(s, query_type_table[i]))
                                return (QueryType) i;
        return (QueryType) -1;
}

/* Length of the valid UTF-8 sequence at s (1 for ASCII), 0 when the bytes there are not
 * one: overlong forms, surrogates and code points past U+10FFFF included. */
static size_t utf8_char_len(const char *s) {
        const unsigned char *p = (const unsigned char *) s;
        uint32_t cp;
        size_t n;

        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf) {
                n = 2;
                cp = p[0] & 0x1f;
        } else if ((p[0] & 0xf0) == 0xe0) {
                n = 3;
                cp = p[0] & 0x0f;
        } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
                n = 4;
                cp = p[0] & 0x07;
        } else
                return 0;

        for (size_t i = 1; i < n; i++) {
                /* The terminating NUL fails this test too, so a cut sequence is caught. */
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }

        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

static bool utf8_is_valid(const char *s) {
        for (size_t n; *s; s += n) {
                n = utf8_char_len(s);
                if (n == 0)
                        return false;
        }
        return true;
}

/* Messages end up in the journal and in D-Bus errors, which must be valid UTF-8, so a bad
 * value is quoted with control characters and stray bytes as \xNN, and cut when long. */
const char *config_quote(const char *s, char buf[static QUOTE_BUF]) {
        size_t o = 0;

        for (unsigned n = 0; *s; n++) {
                size_t l;

                if (n >= QUOTE_MAX) {
                        memcpy(buf + o, "...", 3);
                        o += 3;
                        break;
                }
                l = (unsigned char) *s >= 0x20 && *s != 0x7f ? utf8_char_len(s) : 0;
                if (l > 0) {
                        memcpy(buf + o, s, l);
                        o += l;
                        s += l;
                } else {
                        snprintf(buf + o, 5, "\\x%02x", (unsigned char) *s);
                        o += 4;
                        s++;
                }
        }
        buf[o] = '\0';
        return buf;
}

/* Stores "FILE:LINE: BODY" (or "FILE: BODY" when line is 0) in *ret_error; returns r. */
_printf_(5, 6)
int config_set_error(char **ret_error, int r, const char *file, unsigned line, const char *fmt,
                     ...) {
        _cleanup_free_ char *body = NULL;
        va_list ap;
        char *m;
        int k;

        if (!ret_error)
                return r;

        /* So that a %m in fmt always describes r. */
        errno = -r;
        va_start(ap, fmt);
        k = vasprintf(&body, fmt, ap);
        va_end(ap);
        if (k < 0) {
                body = NULL; /* undefined after a failure */
                return r;
        }

        if (line > 0)
                k = asprintf(&m, "%s:%u: %s", file, line, body);
        else
                k = asprintf(&m, "%s: %s", file, body);
        if (k >= 0)
                *ret_error = m;
        return r;
}

/* Records every error of a file, one a line, so that one run tells them all (--check); past
 * CONFIG_ERRORS_MAX they are counted only. After an error of memory nothing more is tried. */
_printf_(5, 6)
int ctx_error(ParseContext *ctx, int r, unsigned line, const char *value, const char *fmt,
              ...) {
        _cleanup_free_ char *body = NULL, *m = NULL;
        char q[QUOTE_BUF], *joined;
        va_list ap;
        int k;

        if (ctx->r == -ENOMEM)
                return ctx->r;
        if (ctx->r >= 0)
                ctx->r = r;
        if (++ctx->n_errors > CONFIG_ERRORS_MAX)
                return r;

        va_start(ap, fmt);
        k = vasprintf(&body, fmt, ap);
        va_end(ap);
        if (k < 0) {
                body = NULL;
                return r;
        }

        if (value)
                (void) config_set_error(&m, r, ctx->file, line, "%s (got '%s')", body,
                                        config_quote(value, q));
        else
                (void) config_set_error(&m, r, ctx->file, line, "%s", body);
        if (!m)
                return r;
        if (!ctx->error) {
                ctx->error = TAKE_PTR(m);
                return r;
        }
        if (asprintf(&joined, "%s\n%s", ctx->error, m) >= 0) {
                free(ctx->error);
                ctx->error = joined;
        }
        return r;
}

_printf_(5, 6)
int key_error(ParseContext *ctx, const ConfigKey *k, const char *value, int r,
              const char *fmt, ...) {
        _cleanup_free_ char *what = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&what, fmt, ap);
        va_end(ap);
        if (n < 0)
                return ctx_error(ctx, -ENOMEM, ctx->line, NULL, "out of memory");

        return ctx_error(ctx, r, ctx->line, value, "%s.%s: %s", k->section, k->name, what);
}

int ctx_oom(ParseContext *ctx) {
        return ctx_error(ctx, -ENOMEM, ctx->line, NULL, "out of memory");
}

int store_string(ParseContext *ctx, char **p, const char *value) {
        if (free_and_strdup(p, value) < 0)
                return ctx_oom(ctx);
        return 0;
}

static bool schema_has_section(const ConfigSchema *s, const char *section) {
        for (size_t i = 0; i < s->n_keys; i++)
                if (streq(s->keys[i].section, section))
                        return true;
        return false;
}

/* Index of the key in the schema, or -1. */
static ssize_t schema_find(const ConfigSchema *s, const char *section, const char *name) {
        for (size_t i = 0; i < s->n_keys; i++)
                if (streq(s->keys[i].section, section) && streq(s->keys[i].name, name))
                        return (ssize_t) i;
        return -1;
}

/* Line a key was set on, 0 when unset. */
unsigned key_line(const ParseContext *ctx, const char *section, const char *name) {
        ssize_t i = schema_find(ctx->schema, section, name);

        assert(i >= 0);
        return ctx->key_lines[i];
}

/* The ID of a "[<dynamic_section> ID]" header, "" for a bare "[<dynamic_section>]", NULL
 * for any other section. */
static const char *dynamic_section_id(const ConfigSchema *s, const char *name) {
        size_t n;

        if (!s->dynamic_section)
                return NULL;
        n = strlen(s->dynamic_section);
        if (strncmp(name, s->dynamic_section, n) != 0 || (name[n] != '\0' && name[n] != ' '))
                return NULL;
        return name[n] == ' ' ? name + n + 1 : name + n;
}

/* inih only calls the handler for keys, so an empty unknown section and the line of [fleet]
 * are found here, on the raw line; and the whole section name is kept here, since inih's is
 * cut short. */
static int reader_check_section(ParseContext *ctx, const char *line) {
        char q[QUOTE_BUF];
        const char *end, *id;
        char *name;

        if (ctx->line == 1 && strncmp(line, "\xef\xbb\xbf", 3) == 0)
                line += 3;
        line += strspn(line, " \t\r\v\f");
        if (*line != '[')
                return 0;
        end = strchr(line, ']');
        if (!end) {
                /* inih reports the syntax error; the keys below it are in no known section,
                 * which is that error's consequence, not one of their own. */
                ctx->section_unknown = true;
                return 0;
        }

        name = strndup(line + 1, (size_t) (end - line - 1));
        if (!name)
                return ctx_oom(ctx);
        free(ctx->section);
        ctx->section = name;
        ctx->section_unknown = false;

        id = dynamic_section_id(ctx->schema, name);
        ctx->dynamic = id != NULL;
        if (id)
                return ctx->schema->dynamic_open(ctx, id);
        if (!schema_has_section(ctx->schema, name)) {
                ctx->section_unknown = true; /* one error for the section, none for its keys */
                return ctx_error(ctx, -EINVAL, ctx->line, NULL, "unknown section [%s]; %s",
                                 config_quote(name, q), ctx->schema->sections);
        }
        if (streq(name, "fleet") && ctx->fleet_line == 0)
                ctx->fleet_line = ctx->line;
        return 0;
}

/* An fgets() over the file's bytes that counts lines and refuses what inih would silently
 * mangle: a NUL byte ends inih's line early, and a line longer than its buffer is split into
 * two lines. */
static char *config_ini_reader(char *str, int num, void *stream) {
        ParseContext *ctx = stream;
        const char *p, *nl;
        size_t len, content;

        /* After an error the file is read on (every error is told), but for a line that
         * cannot be read as a line (NUL, too long) and for memory. */
        if (ctx->r == -ENOMEM || ctx->stop || ctx->pos >= ctx->size)
                return NULL;

        p = ctx->data + ctx->pos;
        nl = memchr(p, '\n', ctx->size - ctx->pos);
        len = nl ? (size_t) (nl - p) + 1 : ctx->size - ctx->pos;
        ctx->line++;

        if (memchr(p, '\0', len)) {
                ctx_error(ctx, -EINVAL, ctx->line, NULL, "line contains a NUL byte");
                ctx->stop = true;
                return NULL;
        }
        content = len;
        while (content > 0 && (p[content - 1] == '\n' || p[content - 1] == '\r'))
                content--;
        if (content > CONFIG_LINE_MAX || len + 1 > (size_t) MAX(num, 0)) {
                ctx_error(ctx, -EINVAL, ctx->line, NULL, "line too long (at most %d characters)",
                          CONFIG_LINE_MAX);
                ctx->stop = true;
                return NULL;
        }

        memcpy(str, p, len);
        str[len] = '\0';
        ctx->pos += len;

        if (reader_check_section(ctx, str) == -ENOMEM)
                return NULL;
        return str;
}

static int config_ini_handle(void *user, const char *inih_section, const char *name,
                             const char *value) {
        ParseContext *ctx = user;
        char q1[QUOTE_BUF], q2[QUOTE_BUF];
        const char *section = isempty(inih_section) ? NULL : ctx->section;
        const ConfigKey *k;
        ssize_t i;

        if (ctx->r == -ENOMEM || ctx->section_unknown)
                return 1;

        if (isempty(section))
                return ctx_error(ctx, -EINVAL, ctx->line, NULL,
                                 "%s: key outside of any section; %s", config_quote(name, q1),
                                 ctx->schema->sections) >= 0;
        if (ctx->dynamic) {
                if (!utf8_is_valid(value))
                        return ctx_error(ctx, -EILSEQ, ctx->line, value, "%s.%s: not valid UTF-8",
                                         section, config_quote(name, q1)) >= 0;
                return ctx->schema->dynamic_key(ctx, name, value) >= 0;
        }
        if (!schema_has_section(ctx->schema, section))
                return ctx_error(ctx, -EINVAL, ctx->line, NULL, "unknown section [%s]; %s",
                                 config_quote(section, q1), ctx->schema->sections) >= 0;

        i = schema_find(ctx->schema, section, name);
        if (i < 0)
                return ctx_error(ctx, -EINVAL, ctx->line, NULL, "%s.%s: unknown key",
                                 config_quote(section, q1), config_quote(name, q2)) >= 0;
        k = &ctx->schema->keys[i];

        if (ctx->key_lines[i] > 0)
                return ctx_error(ctx, -EINVAL, ctx->line, NULL,
                                 "%s.%s: duplicate key, already set on line %u", k->section,
                                 k->name, ctx->key_lines[i]) >= 0;
        if (!utf8_is_valid(value))
                return key_error(ctx, k, value, -EILSEQ, "not valid UTF-8") >= 0;

        if (k->parse(ctx, k, value, (uint8_t *) ctx->base + k->offset) < 0)
                return 0;
        ctx->key_lines[i] = ctx->line;
        return 1;
}

/* inih's handler: an error the handler recorded is told as it is, and the line is not also a
 * "syntax error" of inih's (which a 0 would make it). */
static int config_ini_handler(void *user, const char *inih_section, const char *name,
                              const char *value) {
        ParseContext *ctx = user;
        unsigned before = ctx->n_errors;

        return config_ini_handle(user, inih_section, name, value) || ctx->n_errors > before;
}

/* Debian builds inih 55 with its options as run-time globals. The defaults would cut lines
 * at 200 bytes (a long fleet.args becomes two lines) and read an indented line as the
 * continuation of the key before it, which the handler would take for a duplicate. */
static void ini_setup(void) {
        ini_max_line = CONFIG_LINE_MAX + 3; /* + "\r\n" and NUL */
        ini_allow_multiline = false;
        ini_allow_no_value = false;
        ini_stop_on_first_error = false; /* every error of a file is told */
}

int parse_context_run(ParseContext *ctx) {
        int r;

        if (ctx->size > CONFIG_FILE_SIZE_MAX)
                return ctx_error(ctx, -EFBIG, 0, NULL, "file too large (%zu bytes, at most %zu)",
                                 ctx->size, CONFIG_FILE_SIZE_MAX);

        ini_setup();
        r = ini_parse_stream(config_ini_reader, ctx, config_ini_handler, ctx);
        if (r > 0) /* the first line inih could not read; the handler's errors are told too */
                (void) ctx_error(ctx, -EINVAL, (unsigned) r, NULL,
                                 "syntax error: expected [section], key = value, or a comment");
        else if (r < 0)
                return ctx_oom(ctx);
        if (ctx->n_errors > CONFIG_ERRORS_MAX) {
                char *joined;

                if (asprintf(&joined, "%s\n%s: and %u more errors", ctx->error, ctx->file,
                             ctx->n_errors - CONFIG_ERRORS_MAX) >= 0) {
                        free(ctx->error);
                        ctx->error = joined;
                }
        }
        return ctx->r < 0 ? ctx->r : 0;
}

/* Hands the message to the caller on failure; returns r. */
int parse_context_finish(ParseContext *ctx, int r, char **ret_error) {
        if (r < 0 && ret_error && ctx->error)
                *ret_error = TAKE_PTR(ctx->error);
        free(ctx->error);
        ctx->error = NULL;
        ctx->section = mfree_str(ctx->section);
        return r;
}

/* Reads a whole config file. A missing file is -ENOENT without a message when missing_ok, so
 * that an absent slotd.ini means defaults. */
static int read_config_file(const char *path, bool missing_ok, char **ret, size_t *ret_size,
                            char **ret_error) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, allocated;
        struct stat st;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                if (errno == ENOENT && missing_ok)
                        return -ENOENT;
                return config_set_error(ret_error, negative_errno(), path, 0, "cannot open: %m");
        }
        if (fstat(fd, &st) < 0)
                return config_set_error(ret_error, negative_errno(), path, 0, "cannot stat: %m");
        if (!S_ISREG(st.st_mode))
                return config_set_error(ret_error, -EINVAL, path, 0, "not a regular file");
        if ((uint64_t) st.st_size > CONFIG_FILE_SIZE_MAX)
                return config_set_error(ret_error, -EFBIG, path, 0,
                                        "file too large (%jd bytes, at most %zu)",
                                        (intmax_t) st.st_size, CONFIG_FILE_SIZE_MAX);

        /* The file may grow between fstat() and read(): read one byte past the limit to
         * notice. */
        allocated = (size_t) st.st_size + 2;
        buf = malloc(allocated);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n;

                if (size + 1 >= allocated) {
                        char *t;

                        if (allocated > CONFIG_FILE_SIZE_MAX + 1)
                                return config_set_error(ret_error, -EFBIG, path, 0,
                                                        "file too large (at most %zu bytes)",
                                                        CONFIG_FILE_SIZE_MAX);
                        allocated = MIN(allocated * 2, CONFIG_FILE_SIZE_MAX + 2);
                        t = realloc(buf, allocated);
                        if (!t)
                                return -ENOMEM;
                        buf = t;
                }
                n = read(fd, buf + size, allocated - size - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return config_set_error(ret_error, negative_errno(), path, 0,
                                                "cannot read: %m");
                }
                if (n == 0)
                        break;
                size += (size_t) n;
        }
        if (size > CONFIG_FILE_SIZE_MAX)
                return config_set_error(ret_error, -EFBIG, path, 0,
                                        "file too large (at most %zu bytes)", CONFIG_FILE_SIZE_MAX);
        buf[size] = '\0';

        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

static void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}

static int cmp_strings(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static bool is_fleet_file(const char *name) {
        size_t n = strlen(name);

        return n > 4 && (streq(name + n - 4, ".ini") || streq(name + n - 4, ".gsh"));
}

/* The *.ini and *.gsh files of dir sorted by strcmp(); a missing dir has none. Dotfiles are
 * skipped: editors and package managers leave ".foo.ini.swp"-style and ".dpkg-new" files
 * around. */
static int list_fleet_files(const char *dir, char ***ret, char **ret_error) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_strv_free_ char **names = NULL;
        struct dirent *de;

        names = calloc(1, sizeof(char *));
        if (!names)
                return -ENOMEM;

        d = opendir(dir);
        if (!d) {
                if (errno == ENOENT) {
                        *ret = TAKE_PTR(names);
                        return 0;
                }
                return config_set_error(ret_error, negative_errno(), dir, 0,
                                        "cannot open directory: %m");
        }

        for (;;) {
                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                return config_set_error(ret_error, negative_errno(), dir, 0,
                                                        "cannot read directory: %m");
                        break;
                }
                if (de->d_name[0] == '.' || !is_fleet_file(de->d_name))
                        continue;
                if (strv_extend(&names, de->d_name) < 0)
                        return -ENOMEM;
        }

        qsort(names, strv_length(names), sizeof(char *), cmp_strings);
        *ret = TAKE_PTR(names);
        return 0;
}

/* Adds one file's (or check's) errors, taken from *error, to what the run has told so far. */
void config_errors_add(char **all, char **error) {
        size_t a, e;
        char *joined;

        if (!*error)
                return;
        if (!*all) {
                *all = TAKE_PTR(*error);
                return;
        }
        a = strlen(*all);
        e = strlen(*error);
        joined = realloc(*all, a + 1 + e + 1);
        if (joined) {
                joined[a] = '\n';
                memcpy(joined + a + 1, *error, e + 1);
                *all = joined;
        }
        *error = mfree_str(*error);
}

/* slotd.ini (absent: every default), then every fleet file: each file's errors are told,
 * and the files after one with errors are read too, so that a run tells them all. With
 * 'keep', *ret is what was read even then (config_load_for_check()). */
int config_load_keep(const char *config_file, const char *fleets_dir, bool keep, Config **ret,
                     char **ret_error) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_free_ char *errors = NULL;
        int r, first = 0;

        c = config_new();
        if (!c)
                return -ENOMEM;

        if (config_file) {
                _cleanup_free_ char *data = NULL, *error = NULL;
                size_t size = 0;

                if (free_and_strdup(&c->config_file, config_file) < 0)
                        return -ENOMEM;
                r = read_config_file(config_file, true, &data, &size, &error);
                if (r >= 0)
                        r = parse_machine_data(c, config_file, data, size, &error);
                else if (r == -ENOENT)
                        r = 0; /* no slotd.ini: all defaults */
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        first = r;
                config_errors_add(&errors, &error);
        }

        if (fleets_dir) {
                size_t n = strlen(fleets_dir);

                while (n > 1 && fleets_dir[n - 1] == '/')
                        n--;
                c->fleets_dir = strndup(fleets_dir, n);
                if (!c->fleets_dir)
                        return -ENOMEM;

                r = list_fleet_files(c->fleets_dir, &names, ret_error);
                if (r < 0)
                        return r;
        }

        STRV_FOREACH(name, names) {
                _cleanup_free_ char *path = NULL, *data = NULL, *error = NULL;
                size_t size = 0;

                if (asprintf(&path, "%s/%s", streq(c->fleets_dir, "/") ? "" : c->fleets_dir,
                             *name) < 0)
                        return -ENOMEM;
                r = read_config_file(path, false, &data, &size, &error);
                if (r >= 0 && streq(path + strlen(path) - 4, ".gsh"))
                        r = config_parse_gsh(c, path, data, size, &error);
                else if (r >= 0)
                        r = parse_fleet_data(c, path, data, size, &error);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 && first == 0)
                        first = r;
                config_errors_add(&errors, &error);
        }

        if (first < 0) {
                if (ret_error)
                        *ret_error = TAKE_PTR(errors);
                if (keep)
                        *ret = TAKE_PTR(c);
                return first;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

int config_load(const char *config_file, const char *fleets_dir, Config **ret, char **ret_error) {
        return config_load_keep(config_file, fleets_dir, false, ret, ret_error);
}

