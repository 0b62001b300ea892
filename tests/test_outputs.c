#define _DEFAULT_SOURCE /* mkdtemp, makedev */
/* Output files: what is at an --out / --trace path survives being written
 * to.  A regular file is replaced whole, a symbolic link stays a link and its
 * target gets the content, a FIFO or a device is written in place (still a
 * FIFO or device afterwards), a directory is refused with exit 2, `-` is
 * standard output, and a command stopped by a signal leaves no temporary
 * file.  Nothing outside a scratch directory is touched. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "scratch.h"

/* A cheap command with a file output: the Chrome trace of a small run. */
#define SMALL_RUN "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=8"

/* Reads everything from fd; caller frees. */
static char *read_fd(int fd, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The trace of SMALL_RUN written to a fresh path: what every other kind of
 * target must receive. */
static char *reference_trace(size_t *len)
{
    char path[256];
    result r;
    runf(&r, SMALL_RUN " --trace %s", path_in(path, sizeof path, "ref.json"));
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *s = read_file(path, len);
    cr_assert(*len > 1000 && strstr(s, "traceEvents"), "no trace in %s", path);
    remove(path);
    return s;
}

/* Names in dir holding ".tmp": temporary files left behind. */
static int stray_temps(void)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp"))
            n++;
    closedir(d);
    return n;
}

static mode_t lmode(const char *path)
{
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "%s is gone", path);
    return st.st_mode;
}

Test(outputs, a_regular_file_is_replaced_whole_keeping_its_permissions)
{
    make_dir();
    size_t nref, n;
    char *ref = reference_trace(&nref);
    char path[256];
    path_in(path, sizeof path, "t.json");
    /* longer than the trace: a write in place would leave its tail */
    char *old = malloc(nref + 5000);
    memset(old, 'x', nref + 4999);
    old[nref + 4999] = '\0';
    write_file(path, old);
    free(old);
    cr_assert_eq(chmod(path, 0640), 0);
    result r;
    runf(&r, SMALL_RUN " --trace %s", path);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *got = read_file(path, &n);
    cr_assert(n == nref && !memcmp(got, ref, n), "%s: %zu bytes, the trace has %zu", path, n, nref);
    cr_assert(S_ISREG(lmode(path)) && (lmode(path) & 07777) == 0640, "mode %o", lmode(path));
    cr_assert_eq(stray_temps(), 0);
    free(got);
    free(ref);
    remove_dir();
}

Test(outputs, a_symlink_stays_a_link_and_its_target_gets_the_content)
{
    make_dir();
    size_t nref, n;
    char *ref = reference_trace(&nref);
    char sub[256], target[256], link[256], link2[256];
    cr_assert_eq(mkdir(path_in(sub, sizeof sub, "sub"), 0755), 0);
    write_file(path_in(target, sizeof target, "sub/target.json"), "old\n");
    /* relative links, one through the other */
    cr_assert_eq(symlink("sub/target.json", path_in(link, sizeof link, "link.json")), 0);
    cr_assert_eq(symlink("link.json", path_in(link2, sizeof link2, "link2.json")), 0);
    result r;
    runf(&r, SMALL_RUN " --trace %s", link2);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(S_ISLNK(lmode(link)) && S_ISLNK(lmode(link2)), "a link was replaced");
    char *got = read_file(target, &n);
    cr_assert(n == nref && !memcmp(got, ref, n), "the target has %zu bytes, the trace %zu", n, nref);
    free(got);
    /* the temporary file was made beside the target, and is gone */
    cr_assert_eq(stray_temps(), 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q tmp", sub);
    cr_assert_neq(system(cmd), 0, "a temporary file is left in %s", sub);

    /* a dangling link: its target is created, the link kept */
    char dangling[256], created[256];
    cr_assert_eq(symlink("sub/new.json", path_in(dangling, sizeof dangling, "dangling.json")), 0);
    runf(&r, SMALL_RUN " --trace %s", dangling);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(S_ISLNK(lmode(dangling)), "the dangling link was replaced");
    got = read_file(path_in(created, sizeof created, "sub/new.json"), &n);
    cr_assert(n == nref && !memcmp(got, ref, n), "the new target has %zu bytes", n);
    free(got);
    free(ref);
    remove_dir();
}

/* Reads a FIFO to its end in a thread. */
typedef struct fifo_reader {
    const char *path;
    char *got;
    size_t len;
    pthread_t tid;
} fifo_reader;

static void *read_fifo(void *arg)
{
    fifo_reader *fr = arg;
    int fd = open(fr->path, O_RDONLY);
    if (fd < 0)
        return NULL;
    fr->got = read_fd(fd, &fr->len);
    close(fd);
    return NULL;
}

static void fifo_start(fifo_reader *fr, const char *path)
{
    memset(fr, 0, sizeof *fr);
    fr->path = path;
    cr_assert_eq(mkfifo(path, 0644), 0);
    cr_assert_eq(pthread_create(&fr->tid, NULL, read_fifo, fr), 0);
}

/* Waits for the reader; if the command never opened the FIFO, a writer
 * opened here releases the reader's open (it then reads nothing). */
static void fifo_join(fifo_reader *fr)
{
    int fd = open(fr->path, O_WRONLY | O_NONBLOCK);
    if (fd >= 0)
        close(fd);
    pthread_join(fr->tid, NULL);
    cr_assert_not_null(fr->got, "the reader could not open %s", fr->path);
}

/* Runs args (which name the FIFO fifo as their output) with a reader on
 * it: the reader gets want (n bytes) and the FIFO stays a FIFO. */
static void assert_fifo_gets(const char *fifo, const char *args, const char *want, size_t n)
{
    fifo_reader fr;
    fifo_start(&fr, fifo);
    result r;
    run(&r, args);
    fifo_join(&fr);
    cr_assert_eq(r.status, 0, "%s: %s", args, r.out);
    cr_assert(fr.len == n && !memcmp(fr.got, want, n), "%s: the reader got %zu bytes, not %zu", args, fr.len, n);
    cr_assert(S_ISFIFO(lmode(fifo)), "%s replaced the FIFO", args);
    free(fr.got);
}

Test(outputs, a_fifo_gets_the_content_and_stays_a_fifo)
{
    make_dir();
    size_t nref;
    char *ref = reference_trace(&nref);
    char path[256], args[1024];
    snprintf(args, sizeof args, SMALL_RUN " --trace %s", path_in(path, sizeof path, "pipe"));
    assert_fifo_gets(path, args, ref, nref);
    cr_assert_eq(stray_temps(), 0);
    free(ref);
    remove_dir();
}

Test(outputs, a_directory_or_an_empty_name_is_refused_with_exit_2)
{
    make_dir();
    char sub[256], loop[256];
    cr_assert_eq(mkdir(path_in(sub, sizeof sub, "adir"), 0755), 0);
    result r;
    runf(&r, SMALL_RUN " --trace %s", sub);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, sub) && strstr(r.out, "is a directory") && count_lines(r.out) == 1, "%s", r.out);
    /* search's --out goes through the same path */
    runf(&r, "search model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 "
             "train.global_batch_size=8 --top 1 --out %s",
         sub);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "is a directory"), "%s", r.out);
    /* a link to a directory is a directory */
    cr_assert_eq(symlink("adir", path_in(loop, sizeof loop, "dirlink")), 0);
    runf(&r, SMALL_RUN " --trace %s", loop);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, loop) && strstr(r.out, "is a directory"), "%s", r.out);
    /* a link loop */
    cr_assert_eq(symlink("loop-b", path_in(loop, sizeof loop, "loop-a")), 0);
    cr_assert_eq(symlink("loop-a", path_in(loop, sizeof loop, "loop-b")), 0);
    runf(&r, SMALL_RUN " --trace %s", loop);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, loop) && strstr(r.out, "symbolic links") && count_lines(r.out) == 1, "%s", r.out);
    runf(&r, SMALL_RUN " --trace ''");
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "empty") && count_lines(r.out) == 1, "%s", r.out);
    cr_assert(S_ISDIR(lmode(sub)));
    cr_assert_eq(stray_temps(), 0);
    remove_dir();
}

Test(outputs, dash_is_standard_output)
{
    make_dir();
    size_t nref;
    char *ref = reference_trace(&nref);
    result r;
    /* the report goes to a file, the trace to stdout */
    runf(&r, SMALL_RUN " --format csv --trace - >%s/out 2>%s/err", dir, dir);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char path[256];
    size_t n;
    char *got = read_file(path_in(path, sizeof path, "out"), &n);
    cr_assert(n > nref && strstr(got, ref), "stdout (%zu bytes) does not hold the trace", n);
    struct stat st;
    cr_assert(stat(path_in(path, sizeof path, "-"), &st) != 0, "a file named '-' was written");
    free(got);
    free(ref);
    remove_dir();
}

Test(outputs, a_character_device_is_written_in_place)
{
    if (geteuid() != 0)
        cr_skip_test("mknod needs root");
    make_dir();
    char path[256];
    /* the null device, made inside the scratch folder */
    cr_assert_eq(mknod(path_in(path, sizeof path, "null"), S_IFCHR | 0666, makedev(1, 3)), 0, "%s", strerror(errno));
    result r;
    runf(&r, SMALL_RUN " --trace %s", path);
    cr_assert_eq(r.status, 0, "%s", r.out);
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3), "the device was replaced");
    cr_assert_eq(stray_temps(), 0);
    remove_dir();
}

/* Starts `parsim run` of a 70B model with a trace of about 25 MB into
 * dir/big.json, its own output into dir/log. */
static pid_t start_big_trace(void)
{
    char trace[256], log[256];
    path_in(trace, sizeof trace, "big.json");
    path_in(log, sizeof log, "log");
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (chdir(PARSIM_SOURCE_DIR) != 0 || !freopen(log, "w", stdout) || !freopen(log, "a", stderr))
            _exit(127);
        execl(PARSIM_BINARY, PARSIM_BINARY, "run", "configs/llama3-70b-h100x64.cfg", "--trace", trace,
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

Test(outputs, a_command_stopped_by_a_signal_leaves_no_temporary_file, .timeout = 240)
{
    make_dir();
    static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
    for (size_t s = 0; s < sizeof sigs / sizeof sigs[0]; s++) {
        int hits = 0;
        /* kill at several delays after the temporary file appears */
        for (int trial = 0; trial < 4; trial++) {
            pid_t pid = start_big_trace();
            int status = 0;
            bool exited = false, seen = false;
            struct timespec nap = { 0, 100000 };
            for (int k = 0; k < 200000 && !exited && !seen; k++) {
                seen = stray_temps() > 0;
                exited = !seen && waitpid(pid, &status, WNOHANG) == pid;
                if (!seen && !exited)
                    nanosleep(&nap, NULL);
            }
            if (seen) {
                struct timespec delay = { 0, trial * 2000000L };
                nanosleep(&delay, NULL);
                kill(pid, sigs[s]);
            }
            if (!exited)
                cr_assert_eq(waitpid(pid, &status, 0), pid);
            if (WIFSIGNALED(status)) {
                cr_assert_eq(WTERMSIG(status), sigs[s], "stopped by signal %d", WTERMSIG(status));
                hits++;
            } else {
                cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
            }
            cr_assert_eq(stray_temps(), 0, "signal %d, trial %d: a temporary file is left", sigs[s], trial);
            char trace[256];
            remove(path_in(trace, sizeof trace, "big.json"));
        }
        cr_log_info("signal %d: %d of 4 runs stopped while writing", sigs[s], hits);
        cr_assert(hits > 0, "signal %d never arrived while the trace was written", sigs[s]);
    }
    remove_dir();
}

/* A sweep of two configurations, written to dir/spec.cfg, and its output
 * written to a fresh dir/ref.csv (spec, ref: 256 bytes); returns the
 * output's text (*len bytes, 4 lines), which the caller frees. */
static char *reference_sweep(char *spec, char *ref, size_t *len)
{
    write_file(path_in(spec, 256, "spec.cfg"),
               "sweep: {\n  set = [ \"model.name=llama3-8b\", \"cluster.topology=dgx-h100\", \"cluster.num_gpus=8\",\n"
               "          \"train.global_batch_size=8\" ];\n"
               "  vary = ( { key = \"model.tensor_model_parallel_size\"; values = [1, 2]; } );\n};\n");
    result r;
    runf(&r, "sweep %s --out %s", spec, path_in(ref, 256, "ref.csv"));
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *text = read_file(ref, len);
    cr_assert_eq(count_lines(text), 4, "%s", text);
    return text;
}

Test(outputs, sweep_writes_a_fifo_or_device_in_place_and_refuses_a_directory)
{
    make_dir();
    char spec[256], ref[256], path[256];
    size_t nref;
    char *want = reference_sweep(spec, ref, &nref);
    result r;

    /* a FIFO: the reader gets the whole sweep, the FIFO stays */
    char args[1024];
    snprintf(args, sizeof args, "sweep %s --out %s", spec, path_in(path, sizeof path, "pipe"));
    assert_fifo_gets(path, args, want, nref);

    /* `--out -` is standard output, as without --out */
    runf(&r, "sweep %s --out - >%s/stdout.csv", spec, dir);
    cr_assert_eq(r.status, 0, "%s", r.out);
    size_t n;
    char *got = read_file(path_in(path, sizeof path, "stdout.csv"), &n);
    cr_assert(n == nref && !memcmp(got, want, n), "%s", got);
    free(got);

    /* a directory, also behind a link */
    char sub[256], link[256];
    cr_assert_eq(mkdir(path_in(sub, sizeof sub, "adir"), 0755), 0);
    cr_assert_eq(symlink("adir", path_in(link, sizeof link, "dirlink")), 0);
    const char *dirs[] = { sub, link };
    for (int k = 0; k < 2; k++) {
        runf(&r, "sweep %s --out %s", spec, dirs[k]);
        cr_assert_eq(r.status, 2, "%s", r.out);
        cr_assert(strstr(r.out, dirs[k]) && strstr(r.out, "is a directory") && count_lines(r.out) == 1, "%s",
                  r.out);
        runf(&r, "merge %s %s", dirs[k], ref);
        cr_assert_eq(r.status, 2, "%s", r.out);
        cr_assert(strstr(r.out, dirs[k]) && strstr(r.out, "is a directory") && count_lines(r.out) == 1, "%s",
                  r.out);
    }
    cr_assert(S_ISDIR(lmode(sub)) && S_ISLNK(lmode(link)));

    /* a link to a regular file: resumed in place, still a link */
    char target[256];
    got = malloc(nref + 1);
    memcpy(got, want, nref + 1);
    got[nref - 20] = '\0'; /* cut mid-row */
    write_file(path_in(target, sizeof target, "target.csv"), got);
    free(got);
    cr_assert_eq(symlink("target.csv", path_in(link, sizeof link, "link.csv")), 0);
    runf(&r, "sweep %s --out %s", spec, link);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(S_ISLNK(lmode(link)), "the link was replaced");
    got = read_file(target, &n);
    cr_assert(n == nref && !memcmp(got, want, n), "%s", got);
    free(got);

    /* merge into a FIFO */
    snprintf(args, sizeof args, "merge %s %s", path_in(path, sizeof path, "pipe2"), ref);
    assert_fifo_gets(path, args, want, nref);
    cr_assert_eq(stray_temps(), 0);
    free(want);
    remove_dir();
}

Test(outputs, sweep_writes_a_character_device_in_place)
{
    if (geteuid() != 0)
        cr_skip_test("mknod needs root");
    make_dir();
    char spec[256], ref[256], path[256];
    free(reference_sweep(spec, ref, NULL));
    cr_assert_eq(mknod(path_in(path, sizeof path, "null"), S_IFCHR | 0666, makedev(1, 3)), 0, "%s", strerror(errno));
    result r;
    for (int k = 0; k < 2; k++) { /* twice: nothing is resumed from a device */
        runf(&r, "sweep %s --out %s", spec, path);
        cr_assert_eq(r.status, 0, "%s", r.out);
    }
    runf(&r, "merge %s %s", path, path);
    cr_assert_eq(r.status, 2, "%s", r.out); /* the null device reads empty: no header */
    cr_assert(strstr(r.out, "no header"), "%s", r.out);
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3), "the device was replaced");
    cr_assert_eq(stray_temps(), 0);
    remove_dir();
}

Test(outputs, a_link_to_proc_self_fd_1_writes_to_standard_output)
{
    make_dir();
    char spec[256], ref[256], link[256];
    char *want = reference_sweep(spec, ref, NULL);
    result r;
    /* what /dev/stdout is: a link whose text ("pipe:[123]") names no file */
    cr_assert_eq(symlink("/proc/self/fd/1", path_in(link, sizeof link, "stdout")), 0);
    runf(&r, "sweep %s --out %s", spec, link);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert_str_eq(r.out, want);
    runf(&r, "merge %s %s", link, ref);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert_str_eq(r.out, want);
    cr_assert(S_ISLNK(lmode(link)));
    cr_assert_eq(stray_temps(), 0);
    free(want);
    remove_dir();
}
