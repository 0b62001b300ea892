/* vsetup: the files validate and calibrate build their runs from, opened by
 * path: the framework defaults (sim/frameworks.h) and the recipes
 * (sim/recipes.h), so that a fit sees the same runs validate reports.
 * Ownership: vsetup_open reads into the caller's struct, vsetup_close frees. */
#ifndef PARSIM_VSETUP_H
#define PARSIM_VSETUP_H

#include "err.h"
#include "frameworks.h"
#include "recipes.h"
#include "validate.h"

/* Reads the framework defaults (frameworks_path) and the recipes
 * (recipes_path: a file, "none", or NULL for recipes.csv beside in_path
 * when there is one); s->setup points into s.  SIM_EINVAL / SIM_EIO naming
 * the file. */
typedef struct vsetup_files {
    vfw_table fws;
    recipes_t rec;
    vsetup setup;
} vsetup_files;
int vsetup_open(vsetup_files *s, const char *in_path, const char *recipes_path,
                const char *frameworks_path, sim_err *err);
void vsetup_close(vsetup_files *s);

#endif
