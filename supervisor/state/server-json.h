/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* server.json, the file Unity Multiplay game servers read (SPEC §4). Every value is a JSON
 * string; NULL is written as "". The build configuration's variables follow the fixed keys:
 * Unity's SDKs hand the game every key they do not know as a variable of its build
 * configuration. */
typedef struct ServerJson {
        const char *server_id;
        const char *allocated_uuid;
        const char *machine_id;         /* the machine number (SPEC §4), not MachineID */
        const char *fleet_id;
        const char *ip;
        const char *ipv6;
        const char *port;
        const char *query_port;
        const char *query_type;
        const char *server_log_dir;
        const char *server_files_dir;   /* Multiplay's serverFilesDir: the slot's home */
        const char *local_proxy_url;
        const char *region_id;
        const char *region_name;
        char *const *variable_names;
        char *const *variable_values;
        size_t n_variables;
        /* Room to keep for the file beyond what this content needs (a refused write's). */
        size_t reserve;
} ServerJson;

/* The longest allocation UUID (alloc-id.h, ALLOC_ID_MAX): the room every write keeps. */
#define SERVER_JSON_UUID_MAX 128

/* Formats with jansson; returns the length and the text in *ret (free it), or -ENOMEM. Pure. */
int server_json_format(const ServerJson *j, char **ret);

/* Rewrites dirfd/server.json in place. Never a rename, since SDKs watch the file for writes;
 * never through a symlink or a hard link the game server may have planted (its home is its
 * own). New files get the given owner, mode 0644.
 *
 * A full disk fails the write before the file is touched: the file's blocks are reserved
 * first (fallocate, FALLOC_FL_KEEP_SIZE) for this content and for the same with the longest
 * allocation UUID, then the content is written over them from offset 0 and the file cut to
 * its length. An allocation or deallocation after a successful write therefore needs no new
 * space, unless it changes the build configuration. On failure *ret_need (may be NULL) is
 * the room the write needed. */
int server_json_write_at(int dirfd, const ServerJson *j, uid_t uid, gid_t gid,
                         size_t *ret_need);

/* 1 when dirfd/server.json (a regular file, not through a symlink) holds exactly what
 * server_json_write_at() would write for j, 0 when it differs or is missing, <0 on error. */
int server_json_same_at(int dirfd, const ServerJson *j);
