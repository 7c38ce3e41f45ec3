/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* Variable expansion for fleet.args and fleet.environment (SPEC §2, "Launch parameters").
 * Pure. Two syntaxes live side by side:
 *
 *   ${NAME}    slotd's own variables (PORT, QUERY_PORT, ...)
 *   $$name$$   Unity Multiplay's launch parameters: its server variables ($$port$$,
 *              $$query_port$$, ...) and a build configuration's own variables
 *              (variables.NAME), as Multiplay's "Launch parameters" page defines them:
 *              https://docs.unity.com/ugs/en-us/manual/game-server-hosting/manual/concepts/launch-parameters
 *
 * A "$$" starts a reference when a name character (A-Z a-z 0-9 _ . -) follows it; the name
 * runs over those characters and must be closed by "$$". Any other "$" is text and stays as
 * it is: Multiplay documents no escape, and "$$" that names nothing has nothing to expand.
 * Text is read one "$" at a time, so in "$$$port$$" and "$${PORT}" the reference is the one
 * that starts at the last "$" that can start one ("$9001"). */

typedef struct ExpandVariable {
        const char *name;
        const char *value;
        bool launch;               /* written $$name$$ (Multiplay's); false: ${NAME} */
} ExpandVariable;

typedef enum ExpandFlags {
        /* A well-formed $$name$$ that no variable names stays as it is, not an error: for the
         * parser of args, which learns a build configuration's variables only later. */
        EXPAND_KEEP_UNKNOWN_LAUNCH = 1 << 0,
} ExpandFlags;

/* Replaces every ${NAME} and $$name$$ in 'in' with its value (the first variable of that
 * syntax and name in vars). An unknown name, an unterminated "${" or "$$name", or an empty
 * "${}" is -EINVAL (and *ret_bad, when given, points into 'in' at the offending "${" or
 * "$$"). "$" not followed by "{" or "$" stays as it is. */
int expand_variables_full(const char *in, const ExpandVariable *vars, unsigned n_vars,
                          ExpandFlags flags, char **ret, const char **ret_bad);

static inline int expand_variables(const char *in, const ExpandVariable *vars, unsigned n_vars,
                                   char **ret, const char **ret_bad) {
        return expand_variables_full(in, vars, n_vars, 0, ret, ret_bad);
}

/* What is wrong at 'bad' (as expand_variables() set it), for messages: "unknown variable
 * '$$map$$'", "unterminated '$$map'", "unknown variable '${NOPE}'", "unterminated '${'".
 * Writes at most n bytes, always terminated. */
void expand_describe_error(const char *bad, char *buf, unsigned n);

/* The length of the name of a $$name$$ at p (p points at the first "$"), 0 when p does not
 * start a reference; *ret_closed tells whether "$$" closes it. */
unsigned expand_launch_name_length(const char *p, bool *ret_closed);

/* The names fleet.args/fleet.environment may use as ${NAME}. */
extern const char *const expand_known_names[];
extern const unsigned expand_n_known_names;

/* Multiplay's server variables, usable as $$name$$ (SPEC "Launch parameters"), in this order:
 * port, query_port, query_type, log_dir, file_dir, config_dir, game_exe, serverid,
 * machineid, fleetid, regionid, regionname, ip, ipv6, timestamp, commandline. */
extern const char *const expand_launch_names[];
extern const unsigned expand_n_launch_names;
