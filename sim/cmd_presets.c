/* parsim presets [models|topologies]: the presets model.name= and
 * cluster.topology= load, each with the summary line that opens its file
 * (what the model is, what the system assumes: GPUs, NVLink, NICs). */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* Presets are NAME.cfg files; the folder's README and subfolders are not. */
static int is_preset(const struct dirent *e)
{
    size_t l = strlen(e->d_name);
    return l > 4 && e->d_name[0] != '.' && !strcmp(e->d_name + l - 4, ".cfg");
}

/* The file's first comment line, with its continuation lines ("#   ..."),
 * without the "# " and a trailing "; preset NAME." (the file name says
 * that), or "" when it has none. */
static void summary_line(const char *path, const char *name, char *buf, size_t len)
{
    buf[0] = '\0';
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return; /* never open a FIFO or a device: it could block */
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    size_t w = 0;
    for (int i = 0; i < 4 && fgets(line, sizeof line, f) && line[0] == '#'; i++) {
        bool cont = !strncmp(line, "#   ", 4);
        if (i > 0 && !cont)
            break;
        const char *s = line + 1;
        while (*s == ' ')
            s++;
        int k = snprintf(buf + w, len - w, "%s%.*s", i ? " " : "", (int)strcspn(s, "\r\n"), s);
        if (k < 0 || (size_t)k >= len - w)
            break;
        w += (size_t)k;
    }
    fclose(f);
    char tail[300];
    snprintf(tail, sizeof tail, "; preset %s.", name);
    size_t bl = strlen(buf), tl = strlen(tail);
    if (bl >= tl && !strcmp(buf + bl - tl, tail))
        buf[bl - tl] = '\0';
}

static int list_dir(const char *data_dir, const char *sub, const char *key)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", data_dir, sub);
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, is_preset, alphasort);
    if (n < 0) {
        fprintf(stderr, "parsim: presets: cannot read %s\n", dir);
        return 1;
    }
    printf("%s (%s=NAME, from %s)\n", sub, key, dir);
    for (int i = 0; i < n; i++) {
        char name[256], path[1400], sum[512];
        snprintf(name, sizeof name, "%.*s", (int)(strlen(ents[i]->d_name) - 4), ents[i]->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
        summary_line(path, name, sum, sizeof sum);
        printf("  %-26s %s\n", name, sum);
        free(ents[i]);
    }
    free(ents);
    return 0;
}

int cmd_presets(int argc, char **argv)
{
    if (argc > 1)
        return cli_usage_error("presets: at most one argument (models or topologies)");
    bool models = true, topologies = true;
    if (argc == 1) {
        models = !strcmp(argv[0], "models");
        topologies = !strcmp(argv[0], "topologies");
        if (!models && !topologies)
            return cli_usage_error("presets: '%s' is neither models nor topologies", argv[0]);
    }
    cfg_t *cfg = cfg_create(NULL);
    if (!cfg) {
        fprintf(stderr, "parsim: out of memory\n");
        return 1;
    }
    int rc = 0;
    if (models)
        rc |= list_dir(cfg_data_dir(cfg), "models", "model.name");
    if (models && topologies)
        printf("\n");
    if (topologies)
        rc |= list_dir(cfg_data_dir(cfg), "topologies", "cluster.topology");
    cfg_destroy(cfg);
    return rc;
}
