/* SPDX-License-Identifier: MIT */
#pragma once

/* A YAML document as a small tree, for the Multiplay config-as-code (.gsh) mapping: libyaml's
 * parser events made into nodes that keep the line and column they start at. Pure: no I/O,
 * no logging. Anchors may be set but aliases, tags other than the implicit ones, complex keys,
 * duplicate keys, NUL bytes in scalars and a second document are refused. */

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

/* How deep maps and lists may nest: a .gsh file needs 5. */
#define GSH_DEPTH_MAX 32

typedef enum GshNodeType {
        GSH_SCALAR,
        GSH_MAP,
        GSH_LIST,
} GshNodeType;

typedef struct GshNode GshNode;
struct GshNode {
        GshNodeType type;
        unsigned line, column;     /* 1-based, where the node starts */
        char *value;               /* GSH_SCALAR: its text, never NULL */
        bool plain;                /* GSH_SCALAR: written without quotes (so "null", "~", ""
                                    * and "true" mean what YAML says) */
        char *key;                 /* the key it is the value of, in a map; NULL otherwise */
        unsigned key_line, key_column;
        GshNode **children;        /* GSH_MAP and GSH_LIST: in file order */
        size_t n_children;
};

GshNode *gsh_node_free(GshNode *n);
DEFINE_TRIVIAL_CLEANUP_FUNC(GshNode *, gsh_node_free);

/* Parses data (size bytes, need not end in NUL). Returns 0 with *ret the root (NULL for an
 * empty document), or a negative errno with *ret_line, *ret_column (1-based) and a malloc'd
 * *ret_message saying what is wrong there (-EINVAL, -ENOMEM without a message). */
int gsh_parse(const char *data, size_t size, GshNode **ret, unsigned *ret_line,
              unsigned *ret_column, char **ret_message);

/* The value of key in a map, or NULL. */
GshNode *gsh_map_get(const GshNode *map, const char *key);
/* A scalar that YAML reads as null: ~, null, Null, NULL or nothing, unquoted. */
bool gsh_is_null(const GshNode *n);
