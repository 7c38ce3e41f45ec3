/* SPDX-License-Identifier: MIT */
#pragma once

/* The scaler's targets (SPEC §13, "The scaler") with where each came from: allocator.ini's
 * [scaler] targets, and the regions of Multiplay .gsh fleets ([scaler] gsh), read with
 * slotd's own loader (config/gsh*.c). Pure: no I/O, no logging.
 *
 * A .gsh fleet's region is a target of fleet gsh_name_to_id(NAME) (slotd's fleet name, the
 * one its machines register) and region REGION (the key, as machine.region names it):
 * minAvailable the buffer, maxServers the ceiling (none when the file has no maxServers), a
 * floor of 0; a region online: false runs nothing (buffer 0, ceiling 0). A fleet without
 * regions has no target. allocator.ini's targets win: a FLEET/REGION entry over that region
 * of the .gsh, a FLEET entry (every region) over every region of that fleet of the .gsh. */

#include "config.h"
#include "scaler-plan.h"

typedef struct ScalerTargets {
        ScalerTarget *targets;
        size_t n;
        char **origins;  /* n of them: "FILE:LINE: scaler.targets",
                          * "FILE:LINE:COLUMN: fleets.NAME.regions.REGION" */
} ScalerTargets;

void scaler_targets_done(ScalerTargets *t);

/* One target per region of every fleet of c (.gsh fleets: config_parse_gsh() with
 * c->gsh_every_region), appended to *t; with a note in *notes for each fleet that has no
 * regions (and so no target). 0 or -ENOMEM. */
int scaler_targets_from_gsh(const Config *c, ScalerTargets *t, char ***notes);

/* Merges the .gsh's targets (gsh, emptied) into allocator.ini's (explicit) by the rule above;
 * a note in *notes for each .gsh target allocator.ini replaces, saying which. 0 or -ENOMEM
 * (explicit then holds what it held, gsh what is left). */
int scaler_targets_merge(ScalerTargets *explicit, ScalerTargets *gsh, char ***notes);

/* "FLEET/REGION buffer=N floor=N ceiling=N" as [scaler] targets takes it back ("FLEET" for
 * every region; FLEET/REGION in double quotes when it has a blank; no ceiling=N for none;
 * a region with both a blank and a '"' does not parse back): malloc'd, NULL on OOM. */
char *scaler_target_format(const ScalerTarget *t);
