/* SPDX-License-Identifier: MIT */
#pragma once

#include <syslog.h>

#include "macro.h"

/* Logging for the daemon: structured journal entries when stderr is connected to journald
 * (JOURNAL_STREAM matches), plain lines on stderr otherwise. Pure modules do not log. */

void log_open(void);
/* The name the lines on stderr start with: "slotd" unless a program of the project says its
 * own (slotd-proxy). */
void log_set_program(const char *name);
void log_set_max_level(int level);
int log_get_max_level(void);

/* 'fields' is NULL or a NULL-terminated list of "KEY=value" strings added to the journal
 * entry (SLOT_ID=3, FLEET=shooter); on stderr they become a "[slot 3 shooter] " prefix given
 * by 'prefix'. Returns -abs(error) so callers can 'return log_error_errno(r, ...)'. */
int log_internal(int level, int error, const char *prefix, char *const *fields,
                 const char *file, int line, const char *func, const char *format, ...)
        _printf_(8, 9);

#define log_full_errno(level, error, ...)                                                  \
        ({                                                                                 \
                int _l = (level), _e = (error);                                            \
                (log_get_max_level() >= _l)                                                \
                        ? log_internal(_l, _e, NULL, NULL, __FILE__, __LINE__, __func__,   \
                                       __VA_ARGS__)                                        \
                        : -abs(_e);                                                        \
        })
#define log_full(level, ...) (void) log_full_errno(level, 0, __VA_ARGS__)

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_notice_errno(e, ...) log_full_errno(LOG_NOTICE, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

#define log_oom() log_error_errno(ENOMEM, "Out of memory")
