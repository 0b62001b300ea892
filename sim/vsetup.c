#include "vsetup.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int vsetup_open(vsetup_files *s, const char *in_path, const char *recipes_path,
                    const char *frameworks_path, sim_err *err)
{
    memset(s, 0, sizeof *s);
    char beside[4096];
    if (!recipes_path) {
        const char *slash = strrchr(in_path, '/');
        int dir = slash ? (int)(slash - in_path) : 0;
        snprintf(beside, sizeof beside, "%.*s%srecipes.csv", dir, in_path, slash ? "/" : "");
        if (strcmp(in_path, "-") && access(beside, F_OK) == 0)
            recipes_path = beside;
    } else if (!strcmp(recipes_path, "none"))
        recipes_path = NULL;
    if (vfw_read(frameworks_path, &s->fws, err) != SIM_OK)
        return err->code;
    if (recipes_path && recipes_read(recipes_path, &s->rec, err) != SIM_OK) {
        vfw_free(&s->fws);
        return err->code;
    }
    s->setup.frameworks = &s->fws;
    s->setup.recipes = recipes_path ? &s->rec : NULL;
    return SIM_OK;
}

void vsetup_close(vsetup_files *s)
{
    recipes_free(&s->rec);
    vfw_free(&s->fws);
}
