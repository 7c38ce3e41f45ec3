/* SPDX-License-Identifier: MIT */
#pragma once

/* ${NAME} expansion for fleet.args and fleet.environment (SPEC §2). Pure. */

typedef struct ExpandVariable {
        const char *name;
        const char *value;
} ExpandVariable;

/* Replaces every ${NAME} in 'in' with its value. An unknown name, an unterminated "${" or an
 * empty name is -EINVAL (and *ret_bad, when given, points into 'in' at the offending "${").
 * "$" not followed by "{" stays as it is. */
int expand_variables(const char *in, const ExpandVariable *vars, unsigned n_vars, char **ret,
                     const char **ret_bad);

/* The names fleet.args/fleet.environment may use. */
extern const char *const expand_known_names[];
extern const unsigned expand_n_known_names;
