/* SPDX-License-Identifier: MIT */
/* YAML into a GshNode tree, from libyaml's parser events (never by hand). The tree is built
 * with an explicit stack, so a deep document cannot exhaust ours. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config-internal.h"
#include "gsh.h"

GshNode *gsh_node_free(GshNode *n) {
        if (!n)
                return NULL;
        for (size_t i = 0; i < n->n_children; i++)
                gsh_node_free(n->children[i]);
        free(n->children);
        free(n->value);
        free(n->key);
        free(n);
        return NULL;
}

GshNode *gsh_map_get(const GshNode *map, const char *key) {
        if (!map || map->type != GSH_MAP)
                return NULL;
        for (size_t i = 0; i < map->n_children; i++)
                if (streq(map->children[i]->key, key))
                        return map->children[i];
        return NULL;
}

bool gsh_is_null(const GshNode *n) {
        static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };

        if (!n || n->type != GSH_SCALAR || !n->plain)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(nulls); i++)
                if (streq(n->value, nulls[i]))
                        return true;
        return false;
}

typedef struct Builder {
        GshNode *stack[GSH_DEPTH_MAX + 1];
        size_t depth;
        GshNode *root;
        /* The key scalar read in the map on top of the stack, waiting for its value. */
        GshNode *pending_key[GSH_DEPTH_MAX + 1];
        bool done;                 /* the first document ended */

        unsigned line, column;
        char *message;
} Builder;

_printf_(4, 5)
static int builder_error(Builder *b, int r, const yaml_mark_t *m, const char *fmt, ...) {
        va_list ap;

        b->line = (unsigned) m->line + 1;
        b->column = (unsigned) m->column + 1;
        va_start(ap, fmt);
        if (vasprintf(&b->message, fmt, ap) < 0)
                b->message = NULL;
        va_end(ap);
        return r;
}

static void builder_done(Builder *b) {
        for (size_t i = 0; i < b->depth; i++)
                gsh_node_free(b->pending_key[i]);
        /* stack[0] is the root or hangs below it; a node is in its parent once added. */
        gsh_node_free(b->root);
        free(b->message);
}

static GshNode *node_new(GshNodeType type, const yaml_mark_t *m) {
        GshNode *n = calloc(1, sizeof(GshNode));

        if (!n)
                return NULL;
        n->type = type;
        n->line = (unsigned) m->line + 1;
        n->column = (unsigned) m->column + 1;
        return n;
}

/* Puts n where it belongs: the root, the value of the pending key, a list's item, or a map's
 * key. Takes n (freed on failure). */
static int builder_add(Builder *b, GshNode *n, const yaml_mark_t *m) {
        GshNode *parent, **children;
        char q[QUOTE_BUF];
        _cleanup_(gsh_node_freep) GshNode *owned = n;

        if (b->depth == 0) {
                if (b->root)
                        return builder_error(b, -EINVAL, m, "a .gsh file holds one YAML document");
                b->root = TAKE_PTR(owned);
                return 0;
        }
        parent = b->stack[b->depth - 1];
        if (parent->type == GSH_MAP && !b->pending_key[b->depth - 1]) {
                if (n->type != GSH_SCALAR)
                        return builder_error(b, -EINVAL, m, "a key must be a scalar");
                if (gsh_map_get(parent, n->value))
                        return builder_error(b, -EINVAL, m, "duplicate key '%s'",
                                             config_quote(n->value, q));
                b->pending_key[b->depth - 1] = TAKE_PTR(owned);
                return 0;
        }
        if (parent->type == GSH_MAP) {
                GshNode *key = b->pending_key[b->depth - 1];

                n->key = TAKE_PTR(key->value);
                n->key_line = key->line;
                n->key_column = key->column;
                b->pending_key[b->depth - 1] = gsh_node_free(key);
        }
        children = reallocarray(parent->children, parent->n_children + 1, sizeof(GshNode *));
        if (!children)
                return -ENOMEM;
        parent->children = children;
        children[parent->n_children++] = TAKE_PTR(owned);
        return 0;
}

static int builder_open(Builder *b, GshNodeType type, const yaml_mark_t *m) {
        GshNode *n;
        int r;

        if (b->depth >= GSH_DEPTH_MAX)
                return builder_error(b, -EINVAL, m, "nested more than %d deep", GSH_DEPTH_MAX);
        n = node_new(type, m);
        if (!n)
                return -ENOMEM;
        /* A map's key is refused before the node joins the tree. */
        r = builder_add(b, n, m);
        if (r < 0)
                return r;
        b->stack[b->depth] = n;
        b->pending_key[b->depth] = NULL;
        b->depth++;
        return 0;
}

static int builder_scalar(Builder *b, const yaml_event_t *e) {
        const yaml_mark_t *m = &e->start_mark;
        GshNode *n;

        if (e->data.scalar.tag && !e->data.scalar.plain_implicit &&
            !e->data.scalar.quoted_implicit)
                return builder_error(b, -EINVAL, m, "YAML tags are not supported");
        if (strlen((const char *) e->data.scalar.value) != e->data.scalar.length)
                return builder_error(b, -EINVAL, m, "a NUL character in a scalar");
        n = node_new(GSH_SCALAR, m);
        if (!n)
                return -ENOMEM;
        n->value = strndup((const char *) e->data.scalar.value, e->data.scalar.length);
        if (!n->value) {
                gsh_node_free(n);
                return -ENOMEM;
        }
        n->plain = e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        return builder_add(b, n, m);
}

static int builder_event(Builder *b, const yaml_event_t *e) {
        switch (e->type) {
        case YAML_DOCUMENT_START_EVENT:
                if (b->done)
                        return builder_error(b, -EINVAL, &e->start_mark,
                                             "a .gsh file holds one YAML document");
                return 0;
        case YAML_DOCUMENT_END_EVENT:
                b->done = true;
                return 0;
        case YAML_ALIAS_EVENT:
                return builder_error(b, -EINVAL, &e->start_mark,
                                     "YAML aliases (*%s) are not supported",
                                     (const char *) e->data.alias.anchor);
        case YAML_SCALAR_EVENT:
                return builder_scalar(b, e);
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
                if ((e->type == YAML_MAPPING_START_EVENT ? e->data.mapping_start.tag
                                                          : e->data.sequence_start.tag) &&
                    !(e->type == YAML_MAPPING_START_EVENT ? e->data.mapping_start.implicit
                                                           : e->data.sequence_start.implicit))
                        return builder_error(b, -EINVAL, &e->start_mark,
                                             "YAML tags are not supported");
                return builder_open(b, e->type == YAML_MAPPING_START_EVENT ? GSH_MAP : GSH_LIST,
                                    &e->start_mark);
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
                /* libyaml pairs them: a map never ends between a key and its value. */
                b->depth--;
                b->pending_key[b->depth] = gsh_node_free(b->pending_key[b->depth]);
                return 0;
        default:
                return 0;
        }
}

int gsh_parse(const char *data, size_t size, GshNode **ret, unsigned *ret_line,
              unsigned *ret_column, char **ret_message) {
        Builder b = {};
        yaml_parser_t parser;
        int r = 0;

        if (!yaml_parser_initialize(&parser))
                return -ENOMEM;
        yaml_parser_set_input_string(&parser, (const unsigned char *) data, size);

        for (bool end = false; !end && r >= 0;) {
                yaml_event_t e;

                if (!yaml_parser_parse(&parser, &e)) {
                        if (parser.error == YAML_MEMORY_ERROR)
                                r = -ENOMEM;
                        else if (parser.context)
                                r = builder_error(&b, -EINVAL, &parser.problem_mark,
                                                  "YAML syntax error: %s %s",
                                                  parser.problem ?: "", parser.context);
                        else
                                r = builder_error(&b, -EINVAL, &parser.problem_mark,
                                                  "YAML syntax error: %s", parser.problem ?: "");
                        break;
                }
                end = e.type == YAML_STREAM_END_EVENT;
                r = builder_event(&b, &e);
                yaml_event_delete(&e);
        }
        yaml_parser_delete(&parser);

        if (r < 0) {
                *ret_line = b.line;
                *ret_column = b.column;
                *ret_message = TAKE_PTR(b.message);
                builder_done(&b);
                return r;
        }
        *ret = TAKE_PTR(b.root);
        builder_done(&b);
        return 0;
}
