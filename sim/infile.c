/* infile: see infile.h. */
#include "infile.h"

#include <errno.h>
#include <fcntl.h>
#include <libconfig.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lcints.h"

static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a regular file";
}

/* Opens an input file for reading, refusing anything but a regular file:
 * stat first, then open without blocking (a FIFO would wait for a writer
 * forever) and check the opened file again (it may have been replaced). */
int infile_open(const char *path, FILE **out, sim_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return sim_err_set_at(err, SIM_EINVAL, path, 0, NULL, "cannot open: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return sim_err_set_at(err, SIM_EINVAL, path, 0, NULL,
                              "is %s: a config file must be a regular file", file_kind(st.st_mode));
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return sim_err_set_at(err, SIM_EINVAL, path, 0, NULL, "cannot open: %s", strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sim_err_set_at(err, SIM_EINVAL, path, 0, NULL,
                              "is %s: a config file must be a regular file", file_kind(st.st_mode));
    }
    *out = fdopen(fd, "r");
    if (!*out) {
        close(fd);
        return sim_err_set(err, SIM_ENOMEM, "%s: cannot open: out of memory", path);
    }
    return SIM_OK;
}

/* libconfig opens @include files itself with a blocking fopen, so every
 * file the text of f includes (and those include) is checked to be a
 * regular file first.  libconfig takes an include name relative to the
 * include dir (the top file's folder; none: the working directory) and
 * stops at its nesting limit, as this scan does. */
enum { INCLUDE_DEPTH_MAX = 10 };

static int check_includes(FILE *f, const char *file, const char *incdir, int depth, sim_err *err)
{
    char *line = NULL;
    size_t cap = 0;
    int rc = SIM_OK, lineno = 0;
    while (rc == SIM_OK && getline(&line, &cap, f) >= 0) {
        lineno++;
        const char *p = line + strspn(line, " \t");
        if (strncmp(p, "@include", 8) != 0)
            continue;
        p += 8;
        p += strspn(p, " \t");
        if (*p != '"')
            continue; /* libconfig reports the syntax error */
        char name[512];
        size_t n = 0;
        for (p++; *p && *p != '"' && n + 1 < sizeof name; p++) {
            if (*p == '\\' && p[1])
                p++;
            name[n++] = *p;
        }
        name[n] = '\0';
        if (depth >= INCLUDE_DEPTH_MAX) {
            rc = sim_err_set_at(err, SIM_EINVAL, file, lineno, NULL,
                                "@include \"%s\": includes nested more than %d deep", name,
                                INCLUDE_DEPTH_MAX);
            break;
        }
        char path[1024];
        snprintf(path, sizeof path, "%s%s%s", incdir ? incdir : "", incdir ? "/" : "", name);
        FILE *inc = NULL;
        sim_err inner;
        sim_err_clear(&inner);
        rc = infile_open(path, &inc, &inner);
        if (rc == SIM_OK) {
            rc = check_includes(inc, path, incdir, depth + 1, err);
            fclose(inc);
        } else {
            char msg[sizeof inner.msg + sizeof inner.file + 8];
            sim_err_format(&inner, msg, sizeof msg);
            sim_err_set_at(err, rc, file, lineno, NULL, "@include \"%s\": %s", name, msg);
        }
    }
    free(line);
    return rc;
}

int infile_read_libconfig(struct config_t *lc, const char *path, sim_err *err)
{
    /* @include "x.cfg" is relative to the including file. */
    char dir[512];
    bool have_dir = false;
    const char *slash = strrchr(path, '/');
    if (slash && (size_t)(slash - path) < sizeof dir) {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
        if (!dir[0])
            snprintf(dir, sizeof dir, "/");
        have_dir = true;
    }

    FILE *f = NULL;
    int rc = infile_open(path, &f, err);
    if (rc)
        return rc;
    rc = check_includes(f, path, have_dir ? dir : NULL, 0, err);
    if (rc == SIM_OK && fseek(f, 0, SEEK_SET) != 0)
        rc = sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot read: %s", strerror(errno));
    /* libconfig 1.5 would read a wide literal without L as its low 32 bits */
    if (rc == SIM_OK)
        rc = lcints_check_file(path, err);
    if (rc) {
        fclose(f);
        return rc;
    }
    config_init(lc);
    if (have_dir)
        config_set_include_dir(lc, dir);

    errno = 0;
    int ok = config_read(lc, f);
    int read_errno = errno;
    fclose(f);
    if (ok == CONFIG_TRUE)
        return SIM_OK;
    if (config_error_type(lc) == CONFIG_ERR_FILE_IO) {
        int e = read_errno;
        rc = sim_err_set_at(err, SIM_EINVAL, path, 0, NULL, "cannot open%s%s", e ? ": " : "",
                            e ? strerror(e) : "");
    } else {
        const char *where = config_error_file(lc);
        rc = sim_err_set_at(err, SIM_EINVAL, where ? where : path, config_error_line(lc), NULL, "syntax error: %s",
                            config_error_text(lc));
    }
    config_destroy(lc);
    return rc;
}
