/* SPDX-License-Identifier: MIT */
/* The scaler's targets from .gsh fleets, and allocator.ini's over them (scaler-gsh.h): pure. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaler-gsh.h"
#include "strv.h"

void scaler_targets_done(ScalerTargets *t) {
        scaler_targets_free(t->targets, t->n);
        strv_free(t->origins);
        *t = (ScalerTargets) {};
}

/* Appends target (its strings taken) and a copy of origin. */
static int targets_add(ScalerTargets *t, ScalerTarget *target, const char *origin) {
        ScalerTarget *grown = reallocarray(t->targets, t->n + 1, sizeof(*grown));

        if (!grown)
                return -ENOMEM;
        t->targets = grown;
        if (strv_extend(&t->origins, origin) < 0)
                return -ENOMEM;
        t->targets[t->n++] = *target;
        *target = (ScalerTarget) {};
        return 0;
}

static int region_target(const FleetConfig *f, const FleetRegion *g, ScalerTargets *t) {
        _cleanup_free_ char *origin = NULL;
        ScalerTarget target = {
                .fleet = strdup(f->name),
                .region = strdup(g->name),
                .buffer = g->online ? g->min_available : 0,
                .ceiling = !g->online ? 0 : g->max_servers_set ? g->max_servers
                                                               : SCALER_CEILING_NONE,
        };
        int r = -ENOMEM;

        if (target.fleet && target.region &&
            asprintf(&origin, "%s:%u:%u: fleets.%s.regions.%s%s", f->file, g->line, g->column,
                     f->gsh_name ?: f->name, g->name, g->online ? "" : " (offline)") >= 0)
                r = targets_add(t, &target, origin);
        else
                origin = NULL;
        free(target.fleet);
        free(target.region);
        return r;
}

int scaler_targets_from_gsh(const Config *c, ScalerTargets *t, char ***notes) {
        for (size_t i = 0; i < c->n_fleets; i++) {
                const FleetConfig *f = &c->fleets[i];

                if (f->n_regions == 0) {
                        _cleanup_free_ char *note = NULL;

                        if (asprintf(&note, "%s:%u: fleets.%s: no regions, so no target of "
                                     "the scaler (fleet %s)", f->file, f->line,
                                     f->gsh_name ?: f->name, f->name) < 0)
                                return -ENOMEM;
                        if (strv_push(notes, note) < 0)
                                return -ENOMEM;
                        note = NULL;
                        continue;
                }
                for (size_t k = 0; k < f->n_regions; k++)
                        if (region_target(f, &f->regions[k], t) < 0)
                                return -ENOMEM;
        }
        return 0;
}

/* allocator.ini's entry that replaces the .gsh's target g: FLEET/REGION, else FLEET. */
static ssize_t explicit_over(const ScalerTargets *explicit, const ScalerTarget *g) {
        ssize_t any = -1;

        for (size_t i = 0; i < explicit->n; i++) {
                const ScalerTarget *e = &explicit->targets[i];

                if (!streq(e->fleet, g->fleet))
                        continue;
                if (!e->region)
                        any = (ssize_t) i;
                else if (streq(e->region, g->region))
                        return (ssize_t) i;
        }
        return any;
}

static int note_replaced(const ScalerTargets *explicit, size_t e, const ScalerTargets *gsh,
                         size_t g, char ***notes) {
        _cleanup_free_ char *mine = scaler_target_format(&explicit->targets[e]),
                            *theirs = scaler_target_format(&gsh->targets[g]), *note = NULL;

        if (!mine || !theirs ||
            asprintf(&note, "%s: %s replaces %s of %s", explicit->origins[e], mine, theirs,
                     gsh->origins[g]) < 0)
                return -ENOMEM;
        if (strv_push(notes, note) < 0)
                return -ENOMEM;
        note = NULL;
        return 0;
}

int scaler_targets_merge(ScalerTargets *explicit, ScalerTargets *gsh, char ***notes) {
        for (size_t g = 0; g < gsh->n; g++) {
                ssize_t e = explicit_over(explicit, &gsh->targets[g]);
                int r;

                if (e >= 0)
                        r = note_replaced(explicit, (size_t) e, gsh, g, notes);
                else
                        r = targets_add(explicit, &gsh->targets[g], gsh->origins[g]);
                if (r < 0)
                        return r;
        }
        scaler_targets_done(gsh);
        return 0;
}

char *scaler_target_format(const ScalerTarget *t) {
        _cleanup_free_ char *name = NULL;
        char ceiling[32] = "";
        char *s;
        bool quote;

        if (asprintf(&name, "%s%s%s", t->fleet, t->region ? "/" : "", t->region ?: "") < 0)
                return NULL;
        quote = strpbrk(name, " \t") != NULL;
        if (t->ceiling != SCALER_CEILING_NONE)
                (void) snprintf(ceiling, sizeof(ceiling), " ceiling=%" PRIu32, t->ceiling);
        if (asprintf(&s, "%s%s%s buffer=%" PRIu32 " floor=%" PRIu32 "%s", quote ? "\"" : "",
                     name, quote ? "\"" : "", t->buffer, t->floor, ceiling) < 0)
                return NULL;
        return s;
}
