/* outfile: resolving an output path, whole-or-nothing replacement of
 * regular files, in-place writing of streams, and removal of temporary
 * files on a fatal signal (the rules are in outfile.h). */
#include "outfile.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------- signal-time cleanup */

/* The temporary files being written right now.  This is parsim's one piece
 * of mutable global state, and it has to be: a signal handler can reach
 * nothing but globals, and it must know which files to remove.  A slot's
 * path is written before `used` is set and only read while it is set, so
 * the handler never sees half a name.  Slots beyond these (more outputs at
 * once than parsim ever has) are simply not cleaned up. */
#define CLEANUP_SLOTS 8
/* The C library's path and file-name limits (Linux: 4096 and 255). */
#define PATH_LEN PATH_MAX
#define NAME_LEN NAME_MAX
static char cleanup_path[CLEANUP_SLOTS][PATH_LEN];
static volatile sig_atomic_t cleanup_used[CLEANUP_SLOTS];
static pthread_mutex_t cleanup_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t cleanup_once = PTHREAD_ONCE_INIT;

/* Only async-signal-safe calls: unlink, then the default action. */
static void on_fatal_signal(int sig)
{
    for (int k = 0; k < CLEANUP_SLOTS; k++)
        if (cleanup_used[k])
            unlink(cleanup_path[k]);
    /* SA_RESETHAND restored the default action; the signal is blocked
     * until the handler returns, then it takes effect */
    raise(sig);
}

static void install_handlers(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        struct sigaction old;
        /* a signal the caller ignores (nohup) or handles stays so */
        if (sigaction(sigs[k], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigfillset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        sigaction(sigs[k], &sa, NULL);
    }
}

/* Registers path for removal on a fatal signal; the slot, or -1. */
static int cleanup_add(const char *path)
{
    pthread_once(&cleanup_once, install_handlers);
    size_t n = strlen(path);
    if (n >= PATH_LEN)
        return -1;
    int slot = -1;
    pthread_mutex_lock(&cleanup_mu);
    for (int k = 0; k < CLEANUP_SLOTS && slot < 0; k++) {
        if (!cleanup_used[k]) {
            memcpy(cleanup_path[k], path, n + 1);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            cleanup_used[k] = 1;
            slot = k;
        }
    }
    pthread_mutex_unlock(&cleanup_mu);
    return slot;
}

static void cleanup_remove(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&cleanup_mu);
    cleanup_used[slot] = 0;
    pthread_mutex_unlock(&cleanup_mu);
}

/* ---------------------------------------------------------------- resolve */

static int io_err(sim_err *err, const char *name, const char *what, int e)
{
    return sim_err_set_at(err, SIM_EIO, name, 0, NULL, "%s: %s", what, strerror(e));
}

/* The path a link's text names: absolute, or relative to the link's folder. */
static char *link_target(const char *link, const char *text)
{
    const char *slash = strrchr(link, '/');
    size_t dirlen = (text[0] != '/' && slash) ? (size_t)(slash - link) + 1 : 0;
    size_t n = dirlen + strlen(text) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%.*s%s", (int)dirlen, link, text);
    return s;
}

static int refuse(const char *path, const struct stat *st, sim_err *err)
{
    return sim_err_set_at(err, SIM_EINVAL, path, 0, NULL, "%s, not a file to write",
                          S_ISDIR(st->st_mode) ? "is a directory" : "is a socket or other special file");
}

int outfile_resolve(const char *path, outfile_target *t, sim_err *err)
{
    memset(t, 0, sizeof *t);
    if (!path[0])
        return sim_err_set(err, SIM_EINVAL, "an output file name is empty");
    if (!strcmp(path, "-")) {
        t->kind = OUTFILE_STREAM;
        return SIM_OK;
    }
    /* what the kernel reaches through every link, /proc/self/fd/1 (whose
     * link text, "pipe:[123]", names no file) included */
    struct stat end;
    if (stat(path, &end) == 0 && !S_ISREG(end.st_mode)) {
        if (S_ISDIR(end.st_mode) || !(S_ISFIFO(end.st_mode) || S_ISCHR(end.st_mode) || S_ISBLK(end.st_mode)))
            return refuse(path, &end, err);
        t->kind = OUTFILE_STREAM;
        t->path = strdup(path);
        return t->path ? SIM_OK : sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    /* a regular file or nothing at the end: find its name, beside which
     * the temporary file goes */
    char *cur = strdup(path);
    if (!cur)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    for (int links = 0;; links++) {
        struct stat st;
        if (lstat(cur, &st) != 0) {
            int e = errno;
            if (e == ENOENT) {
                t->kind = OUTFILE_NEW;
                t->path = cur;
                return SIM_OK;
            }
            free(cur);
            return io_err(err, path, "cannot examine", e);
        }
        if (S_ISLNK(st.st_mode)) {
            if (links >= OUTFILE_MAX_LINKS) {
                free(cur);
                return sim_err_set_at(err, SIM_EINVAL, path, 0, NULL,
                                      "more than %d symbolic links to follow (a loop?)", OUTFILE_MAX_LINKS);
            }
            char text[PATH_LEN];
            ssize_t n = readlink(cur, text, sizeof text);
            int e = errno;
            if (n < 0 || (size_t)n >= sizeof text) {
                free(cur);
                return io_err(err, path, "cannot read the symbolic link", n < 0 ? e : ENAMETOOLONG);
            }
            text[n] = '\0';
            char *next = link_target(cur, text);
            free(cur);
            if (!next)
                return sim_err_set(err, SIM_ENOMEM, "out of memory");
            cur = next;
            continue;
        }
        if (S_ISREG(st.st_mode)) {
            t->kind = OUTFILE_REGULAR;
            t->mode = st.st_mode & 07777;
        } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
            t->kind = OUTFILE_STREAM;
        } else {
            free(cur);
            return refuse(path, &st, err);
        }
        t->path = cur;
        return SIM_OK;
    }
}

void outfile_target_free(outfile_target *t)
{
    free(t->path);
    t->path = NULL;
}

/* ------------------------------------------------------------------ write */

FILE *outfile_open_stream(const outfile_target *t)
{
    /* no O_CREAT, no O_TRUNC: a device or FIFO is used as it is */
    int fd = open(t->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

/* "<dir>/<name>.tmp<pid>" beside target, the name shortened so that the
 * whole stays within NAME_MAX. */
static char *temp_name(const char *target)
{
    const char *slash = strrchr(target, '/');
    size_t dirlen = slash ? (size_t)(slash - target) + 1 : 0;
    size_t blen = strlen(target + dirlen);
    if (blen > NAME_LEN - 24)
        blen = NAME_LEN - 24;
    size_t n = dirlen + blen + 32;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%.*s%.*s.tmp%ld", (int)dirlen, target, (int)blen, target + dirlen, (long)getpid());
    return s;
}

/* Creates the temporary file; a stale one of an earlier process that had
 * the same pid is replaced. */
static int create_temp(const char *tmp)
{
    for (int tries = 0; tries < 2; tries++) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST || tries)
            return fd;
        unlink(tmp);
    }
    return -1;
}

int outfile_open(outfile *o, const char *path, sim_err *err)
{
    memset(o, 0, sizeof *o);
    o->name = path;
    o->slot = -1;
    int rc = outfile_resolve(path, &o->t, err);
    if (rc)
        return rc;
    if (o->t.kind == OUTFILE_STREAM) {
        o->f = o->t.path ? outfile_open_stream(&o->t) : stdout;
        if (!o->f) {
            rc = io_err(err, path, "cannot open", errno);
            outfile_target_free(&o->t);
        }
        return rc;
    }
    o->tmp = temp_name(o->t.path);
    if (!o->tmp) {
        outfile_target_free(&o->t);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    o->slot = cleanup_add(o->tmp);
    int fd = create_temp(o->tmp);
    int e = errno;
    if (fd >= 0 && o->t.kind == OUTFILE_REGULAR && fchmod(fd, o->t.mode) != 0)
        e = errno; /* keeps the default permissions; not worth failing for */
    if (fd >= 0 && !(o->f = fdopen(fd, "w"))) {
        e = errno;
        close(fd);
        unlink(o->tmp);
    }
    if (!o->f) {
        rc = io_err(err, path, "cannot write", e);
        outfile_close(o, false, NULL);
    }
    return rc;
}

/* Flushes and closes o->f (stdout is only flushed); 0, or the errno of the
 * first failure. */
static int finish_stream(outfile *o, bool keep)
{
    int e = ferror(o->f) ? (errno ? errno : EIO) : 0;
    if (o->f == stdout) {
        if (fflush(stdout) != 0 && !e)
            e = errno;
        return e;
    }
    /* a temporary file reaches the disk before it is renamed into place */
    if (o->tmp && keep && !e && (fflush(o->f) != 0 || fsync(fileno(o->f)) != 0))
        e = errno;
    if (fclose(o->f) != 0 && !e)
        e = errno;
    return e;
}

int outfile_close(outfile *o, bool keep, sim_err *err)
{
    int rc = SIM_OK;
    if (o->f) {
        int e = finish_stream(o, keep);
        if (e && keep)
            rc = io_err(err, o->name, "cannot write", e);
    }
    if (o->tmp) {
        if (keep && rc == SIM_OK && rename(o->tmp, o->t.path) != 0)
            rc = io_err(err, o->name, "cannot write", errno);
        if (!keep || rc != SIM_OK)
            unlink(o->tmp);
        cleanup_remove(o->slot);
    }
    free(o->tmp);
    outfile_target_free(&o->t);
    memset(o, 0, sizeof *o);
    o->slot = -1;
    return rc;
}
