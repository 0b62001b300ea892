/* config: libconfig files, presets, KEY=VALUE overrides and the key table.
 *
 * Storage.  A cfg_t keeps every assignment it was given (not only the
 * winning one): key, value, origin file and line, priority.  The value of a
 * key is the assignment with the highest priority, the latest one among
 * equal priorities.  Keeping shadowed assignments costs a little memory but
 * makes cfg_resolve() repeatable: the presets it loads are marked, dropped
 * and reloaded on every call, so a caller may change model.name with an
 * override and resolve again without the old preset leaking through.
 *
 * Types.  Values are typed as the file or the override text gives them; the
 * key table decides what a key accepts.  An unquoted override value keeps
 * its text, so "model.name=405" can still be a string key's value, while a
 * quoted one is always a string.
 *
 * Presets are ordinary libconfig files using the full key names
 * (`model: { num_layers = 80; ... };`), loaded at CFG_PRIO_PRESET, in the
 * order model.name, cluster.topology, cluster.fitted (the topology's fitted
 * file, if it is there), sim.params (so a parameter file from `parsim
 * calibrate` overrides the topology's efficiencies).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <libconfig.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bounds.h"
#include "bridge_yaml.h"
#include "filecache.h"
#include "infile.h"
#include "kerneltable.h"
#include "microbench.h"
#include "numparse.h"
#include "units.h"

#ifndef PARSIM_DEFAULT_DATA_DIR
#define PARSIM_DEFAULT_DATA_DIR "."
#endif

#define ORIGIN_CMDLINE "command line"
#define KEY_MAX 128

/* ---------------------------------------------------------------- values */

typedef enum { CV_INT, CV_FLOAT, CV_BOOL, CV_STRING, CV_LIST } cv_kind;

typedef struct cfg_value {
    cv_kind kind;
    int64_t i;
    double f;
    bool b;
    /* CV_STRING: the string.  Other scalars: the override text when the
     * value was written unquoted on the command line, else NULL. */
    char *s;
    bool bare;
    /* CV_LIST: elements are all integers (elem CV_INT), numbers of which
     * at least one is not an integer (elem CV_FLOAT), or all strings (elem
     * CV_STRING); an empty list has elem CV_LIST and fits every list key. */
    cv_kind elem;
    int n;
    int64_t *ints;
    double *flts;
    char **strs;
} cfg_value;

typedef struct cfg_entry {
    char *key;
    cfg_value v;
    char *file;      /* origin; ORIGIN_CMDLINE for overrides */
    int line;        /* 0 if none */
    cfg_prio prio;
    bool auto_preset; /* loaded by cfg_resolve from a preset key */
} cfg_entry;

struct cfg {
    char *data_dir;
    cfg_entry *e;    /* in insertion order */
    size_t n, cap;
    bridge_notes *bridge; /* the Megatron Bridge config file, if one was loaded */
    filecache *files;     /* files parsed once for many configurations, or NULL */
    /* find()'s index: open addressing by key, each slot the winning
     * entry of its key or -1; n_slots a power of two above twice the
     * keys (NULL before the first entry). */
    int32_t *slot;
    size_t n_slots, n_keys;
};

static void value_free(cfg_value *v)
{
    free(v->s);
    free(v->ints);
    free(v->flts);
    if (v->strs)
        for (int k = 0; k < v->n; k++)
            free(v->strs[k]);
    free(v->strs);
    memset(v, 0, sizeof *v);
}

static const char *kind_name(cv_kind k)
{
    switch (k) {
    case CV_INT: return "an integer";
    case CV_FLOAT: return "a float";
    case CV_BOOL: return "a boolean";
    case CV_STRING: return "a string";
    case CV_LIST: return "a list";
    }
    return "?";
}

/* Writes a value in config syntax (used by cfg_dump and error messages). */
static void fmt_value(const cfg_value *v, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    switch (v->kind) {
    case CV_INT:
        snprintf(buf, len, "%" PRId64, v->i);
        break;
    case CV_FLOAT:
        snprintf(buf, len, "%.15g", v->f);
        /* keep it readable back as a float */
        if (!strpbrk(buf, ".eEni"))
            snprintf(buf + strlen(buf), len - strlen(buf), ".0");
        break;
    case CV_BOOL:
        snprintf(buf, len, "%s", v->b ? "true" : "false");
        break;
    case CV_STRING:
        snprintf(buf, len, "\"%s\"", v->s);
        break;
    case CV_LIST:
        n += (size_t)snprintf(buf + n, len - n, "[");
        for (int k = 0; k < v->n && n < len; k++) {
            const char *sep = k ? ", " : "";
            if (v->elem == CV_INT)
                n += (size_t)snprintf(buf + n, len - n, "%s%" PRId64, sep, v->ints[k]);
            else if (v->elem == CV_FLOAT)
                n += (size_t)snprintf(buf + n, len - n, "%s%.15g%s", sep, v->flts[k],
                                      v->flts[k] == floor(v->flts[k]) ? ".0" : "");
            else
                n += (size_t)snprintf(buf + n, len - n, "%s\"%s\"", sep, v->strs[k]);
        }
        if (n < len)
            snprintf(buf + n, len - n, "]");
        break;
    }
}

/* --------------------------------------------------------------- storage */

const char *cfg_data_dir(const cfg_t *c)
{
    return c->data_dir;
}

cfg_t *cfg_create(const char *data_dir)
{
    cfg_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (!data_dir || !data_dir[0])
        data_dir = getenv("PARSIM_DATA_DIR");
    if (!data_dir || !data_dir[0])
        data_dir = PARSIM_DEFAULT_DATA_DIR;
    c->data_dir = strdup(data_dir);
    if (!c->data_dir) {
        free(c);
        return NULL;
    }
    return c;
}

static void entry_free(cfg_entry *e)
{
    free(e->key);
    free(e->file);
    value_free(&e->v);
}

void cfg_destroy(cfg_t *c)
{
    if (!c)
        return;
    for (size_t k = 0; k < c->n; k++)
        entry_free(&c->e[k]);
    free(c->e);
    free(c->slot);
    free(c->data_dir);
    bridge_notes_destroy(c->bridge);
    free(c);
}

/* Eight bytes at a time: byte by byte, hashing was most of a lookup's
 * cost (about 500 lookups resolve a configuration). */
static size_t key_hash(const char *key)
{
    const size_t n = strlen(key);
    uint64_t h = 14695981039346656037ull ^ n;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, key + i, n - i < 8 ? n - i : 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 32;
    }
    return (size_t)h;
}

/* The slot of key in c's index: the one holding it, else the empty one
 * where it goes. */
static size_t slot_of(const cfg_t *c, const char *key)
{
    size_t i = key_hash(key) & (c->n_slots - 1);
    while (c->slot[i] >= 0 && strcmp(c->e[c->slot[i]].key, key) != 0)
        i = (i + 1) & (c->n_slots - 1);
    return i;
}

/* Entry k into the index: it wins over the one there at the same or a
 * lower priority (find()'s rule, as the entries come in order). */
static void index_entry(cfg_t *c, size_t k)
{
    const size_t i = slot_of(c, c->e[k].key);
    if (c->slot[i] < 0)
        c->n_keys++;
    if (c->slot[i] < 0 || c->e[k].prio >= c->e[c->slot[i]].prio)
        c->slot[i] = (int32_t)k;
}

/* The index rebuilt from the entries in its slots. */
static void reindex(cfg_t *c)
{
    c->n_keys = 0;
    for (size_t i = 0; i < c->n_slots; i++)
        c->slot[i] = -1;
    for (size_t k = 0; k < c->n; k++)
        index_entry(c, k);
}

/* Room in the index for one key more: false when out of memory. */
static bool index_room(cfg_t *c)
{
    if (c->slot && 2 * (c->n_keys + 1) < c->n_slots)
        return true;
    size_t n = 64;
    while (n <= 2 * (c->n_keys + 1))
        n *= 2;
    int32_t *slot = c->n < INT32_MAX ? malloc(n * sizeof *slot) : NULL;
    if (!slot)
        return false;
    free(c->slot);
    c->slot = slot;
    c->n_slots = n;
    reindex(c);
    return true;
}

/* Takes ownership of *v (cleared on return, also on failure). */
static int add_entry(cfg_t *c, const char *key, cfg_value *v, const char *file, int line,
                     cfg_prio prio, bool auto_preset, sim_err *err)
{
    if (!index_room(c)) {
        value_free(v);
        return sim_err_set(err, SIM_ENOMEM, "out of memory storing %s", key);
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        cfg_entry *e = realloc(c->e, cap * sizeof *e);
        if (!e) {
            value_free(v);
            return sim_err_set(err, SIM_ENOMEM, "out of memory storing %s", key);
        }
        c->e = e;
        c->cap = cap;
    }
    cfg_entry *e = &c->e[c->n];
    e->key = strdup(key);
    e->file = strdup(file ? file : "");
    if (!e->key || !e->file) {
        free(e->key);
        free(e->file);
        value_free(v);
        return sim_err_set(err, SIM_ENOMEM, "out of memory storing %s", key);
    }
    e->v = *v;
    memset(v, 0, sizeof *v);
    e->line = line;
    e->prio = prio;
    e->auto_preset = auto_preset;
    c->n++;
    index_entry(c, c->n - 1);
    return SIM_OK;
}

/* The winning assignment of key: highest priority, latest among equals. */
static bool path_near(const cfg_entry *e, const char *name, char *path, size_t len, char *tried, size_t tlen);

static const cfg_entry *find(const cfg_t *c, const char *key)
{
    if (!c->slot)
        return NULL;
    const int32_t k = c->slot[slot_of(c, key)];
    return k >= 0 ? &c->e[k] : NULL;
}

static void drop_auto_presets(cfg_t *c)
{
    size_t w = 0;
    for (size_t k = 0; k < c->n; k++) {
        if (c->e[k].auto_preset)
            entry_free(&c->e[k]);
        else
            c->e[w++] = c->e[k];
    }
    c->n = w;
    if (c->slot) /* fewer keys: the same slots hold them */
        reindex(c);
}

bool cfg_origin(const cfg_t *c, const char *key, const char **file, int *line)
{
    const cfg_entry *e = c ? find(c, key) : NULL;
    if (file)
        *file = e ? e->file : NULL;
    if (line)
        *line = e ? e->line : 0;
    return e != NULL;
}

int cfg_err_key(const cfg_t *c, sim_err *err, int code, const char *key, const char *fmt, ...)
{
    if (!err)
        return code;
    const char *file = NULL;
    int line = 0;
    cfg_origin(c, key, &file, &line);
    char msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sim_err_set_at(err, code, file, line, key, "%s", msg);
}

/* An error about a file a key names, as an error of the key: "origin: key:
 * file:line: what".  inner may be err itself. */
static int key_err_of(const cfg_t *c, sim_err *err, int code, const char *key, const sim_err *inner)
{
    char msg[sizeof inner->msg + sizeof inner->file + 16];
    sim_err_format(inner, msg, sizeof msg);
    return cfg_err_key(c, err, code, key, "%s", msg);
}

/* ------------------------------------------------------- libconfig files */

static int list_from_setting(const config_setting_t *s, const char *key, const char *file,
                             int line, cfg_value *v, sim_err *err)
{
    int n = config_setting_length(s);
    v->kind = CV_LIST;
    v->elem = CV_LIST;
    v->n = 0;
    if (n == 0)
        return SIM_OK;
    /* The element kind: integers, numbers (some not integers) or strings. */
    int ints = 0, nums = 0, strs = 0;
    for (int k = 0; k < n; k++) {
        int t = config_setting_type(config_setting_get_elem(s, (unsigned)k));
        ints += t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
        nums += t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64 || t == CONFIG_TYPE_FLOAT;
        strs += t == CONFIG_TYPE_STRING;
    }
    if (ints == n) {
        v->elem = CV_INT;
        v->ints = calloc((size_t)n, sizeof *v->ints);
    } else if (nums == n) {
        v->elem = CV_FLOAT;
        v->flts = calloc((size_t)n, sizeof *v->flts);
    } else if (strs == n) {
        v->elem = CV_STRING;
        v->strs = calloc((size_t)n, sizeof *v->strs);
    } else {
        return sim_err_set_at(err, SIM_EINVAL, file, line, key,
                              "list elements must be all numbers or all strings");
    }
    if (!v->ints && !v->flts && !v->strs)
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", key);
    for (int k = 0; k < n; k++) {
        const config_setting_t *el = config_setting_get_elem(s, (unsigned)k);
        if (v->elem == CV_INT) {
            v->ints[k] = config_setting_get_int64(el);
        } else if (v->elem == CV_FLOAT) {
            int t = config_setting_type(el);
            v->flts[k] = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(el)
                                                : (double)config_setting_get_int64(el);
        } else {
            v->strs[k] = strdup(config_setting_get_string(el));
            if (!v->strs[k]) {
                v->n = k;
                value_free(v);
                return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", key);
            }
        }
        v->n = k + 1;
    }
    return SIM_OK;
}

/* Flattens one group into dotted keys. */
static int walk(cfg_t *c, const config_setting_t *g, const char *prefix, const char *path,
                cfg_prio prio, bool auto_preset, sim_err *err)
{
    int n = config_setting_length(g);
    for (int k = 0; k < n; k++) {
        const config_setting_t *s = config_setting_get_elem(g, (unsigned)k);
        const char *name = config_setting_name(s);
        const char *file = config_setting_source_file(s);
        int line = (int)config_setting_source_line(s);
        char key[KEY_MAX];
        if (!file)
            file = path;
        int kn = snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "." : "",
                          name ? name : "?");
        if (kn < 0 || (size_t)kn >= sizeof key)
            return sim_err_set_at(err, SIM_EINVAL, file, line, NULL, "key too long: %s.%s",
                                  prefix, name ? name : "?");

        cfg_value v = { 0 };
        int rc = SIM_OK;
        switch (config_setting_type(s)) {
        case CONFIG_TYPE_GROUP:
            rc = walk(c, s, key, path, prio, auto_preset, err);
            if (rc)
                return rc;
            continue;
        case CONFIG_TYPE_INT:
        case CONFIG_TYPE_INT64:
            v.kind = CV_INT;
            v.i = config_setting_get_int64(s);
            break;
        case CONFIG_TYPE_FLOAT:
            v.kind = CV_FLOAT;
            v.f = config_setting_get_float(s);
            break;
        case CONFIG_TYPE_BOOL:
            v.kind = CV_BOOL;
            v.b = config_setting_get_bool(s) != 0;
            break;
        case CONFIG_TYPE_STRING:
            v.kind = CV_STRING;
            v.s = strdup(config_setting_get_string(s));
            if (!v.s)
                return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", key);
            break;
        case CONFIG_TYPE_ARRAY:
        case CONFIG_TYPE_LIST:
            rc = list_from_setting(s, key, file, line, &v, err);
            if (rc)
                return rc;
            break;
        default:
            return sim_err_set_at(err, SIM_EINVAL, file, line, key, "unsupported setting type");
        }
        rc = add_entry(c, key, &v, file, line, prio, auto_preset, err);
        if (rc)
            return rc;
    }
    return SIM_OK;
}

/* A copy of n elements of elem bytes at p (room for one when n is 0). */
static void *dup_array(const void *p, int n, size_t elem)
{
    void *q = malloc((n > 0 ? (size_t)n : 1) * elem);
    if (q && n > 0)
        memcpy(q, p, (size_t)n * elem);
    return q;
}

/* Copies *v into *out (deep); false when out of memory (out cleared). */
static bool value_copy(const cfg_value *v, cfg_value *out)
{
    *out = *v;
    out->s = v->s ? strdup(v->s) : NULL;
    out->ints = v->ints ? dup_array(v->ints, v->n, sizeof *v->ints) : NULL;
    out->flts = v->flts ? dup_array(v->flts, v->n, sizeof *v->flts) : NULL;
    out->strs = v->strs ? calloc(v->n > 0 ? (size_t)v->n : 1, sizeof *out->strs) : NULL;
    bool ok = (!v->s || out->s) && (!v->ints || out->ints) && (!v->flts || out->flts) && (!v->strs || out->strs);
    for (int k = 0; ok && v->strs && k < v->n; k++)
        ok = (out->strs[k] = strdup(v->strs[k])) != NULL;
    if (!ok)
        value_free(out);
    return ok;
}

/* Adds src's entries to c in their order, as walk() added them to src,
 * at prio. */
static int replay(cfg_t *c, const cfg_t *src, cfg_prio prio, bool auto_preset, sim_err *err)
{
    for (size_t k = 0; k < src->n; k++) {
        const cfg_entry *e = &src->e[k];
        cfg_value v;
        if (!value_copy(&e->v, &v))
            return sim_err_set(err, SIM_ENOMEM, "out of memory storing %s", e->key);
        int rc = add_entry(c, e->key, &v, e->file, e->line, prio, auto_preset, err);
        if (rc)
            return rc;
    }
    return SIM_OK;
}

static void free_settings(void *p) { cfg_destroy(p); }

/* With a filecache, the file's settings are parsed once into a cfg of
 * their own, kept, and added from there (filecache.h); the same entries
 * in the same order as walking it into c. */
static int load_file(cfg_t *c, const char *path, cfg_prio prio, bool auto_preset, sim_err *err)
{
    const cfg_t *kept = c->files ? filecache_get(c->files, FILECACHE_SETTINGS, path) : NULL;
    if (kept)
        return replay(c, kept, prio, auto_preset, err);
    cfg_t *into = c->files ? calloc(1, sizeof *into) : c;
    if (!into)
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
    config_t lc;
    int rc = infile_read_libconfig(&lc, path, err);
    if (rc == SIM_OK) {
        rc = walk(into, config_root_setting(&lc), "", path, prio, auto_preset, err);
        config_destroy(&lc);
    }
    if (into == c)
        return rc;
    /* What walk() added before an error stays in c, as without a cache. */
    sim_err quiet;
    sim_err_clear(&quiet);
    const int added = replay(c, into, prio, auto_preset, rc == SIM_OK ? err : &quiet);
    if (rc == SIM_OK && added == SIM_OK)
        filecache_put(c->files, FILECACHE_SETTINGS, path, into, free_settings);
    else
        cfg_destroy(into);
    return rc == SIM_OK ? added : rc;
}

void cfg_use_filecache(cfg_t *c, filecache *fc) { c->files = fc; }

/* The Bridge reader's sink: the key table and cfg_set_at at the file's
 * priority. */
typedef struct bridge_target {
    cfg_t *c;
    cfg_prio prio;
} bridge_target;

static bool bridge_key_known(const char *key) { return cfg_key_known(key, NULL); }

static int bridge_set(void *ctx, const char *key, const char *value, const char *file, int line, sim_err *err)
{
    const bridge_target *t = ctx;
    return cfg_set_at(t->c, key, value, file, line, t->prio, err);
}

int cfg_load_file(cfg_t *c, const char *path, cfg_prio prio, sim_err *err)
{
    if (!bridge_yaml_is_path(path))
        return load_file(c, path, prio, false, err);
    bridge_notes_destroy(c->bridge);
    c->bridge = bridge_notes_create();
    if (!c->bridge)
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
    bridge_target t = { c, prio };
    const bridge_sink sink = { bridge_key_known, bridge_set, &t };
    return bridge_yaml_load(path, &sink, c->bridge, err);
}

const bridge_notes *cfg_bridge_notes(const cfg_t *c) { return c ? c->bridge : NULL; }

/* ------------------------------------------------------------- overrides */

static void trim(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* Parses a quoted string s[0..n) (with its quotes); handles \" and \\. */
static int unquote(const char *s, size_t n, char **out)
{
    if (n < 2 || s[n - 1] != s[0])
        return -1;
    char *d = malloc(n);
    if (!d)
        return -2;
    size_t w = 0;
    for (size_t k = 1; k + 1 < n; k++) {
        if (s[k] == '\\' && k + 2 < n)
            k++;
        else if (s[k] == s[0]) { /* stray quote inside */
            free(d);
            return -1;
        }
        d[w++] = s[k];
    }
    d[w] = '\0';
    *out = d;
    return 0;
}

static bool ieq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return false;
    return *a == *b;
}

/* One scalar of override syntax.  Returns 0, -1 malformed, -2 no memory. */
static int parse_scalar(const char *s, size_t n, cfg_value *v)
{
    memset(v, 0, sizeof *v);
    trim(&s, &n);
    if (n && (s[0] == '"' || s[0] == '\'')) {
        v->kind = CV_STRING;
        return unquote(s, n, &v->s);
    }
    v->s = strndup(s, n);
    if (!v->s)
        return -2;
    v->bare = true;
    if (num_parse_int(v->s, &v->i))
        v->kind = CV_INT;
    else if (num_parse_double(v->s, &v->f))
        v->kind = CV_FLOAT;
    else if (ieq(v->s, "true") || ieq(v->s, "false")) {
        v->kind = CV_BOOL;
        v->b = ieq(v->s, "true");
    } else
        v->kind = CV_STRING;
    return 0;
}

/* Override syntax: a scalar or [a, b, ...] / (a, b, ...).  A list whose
 * elements all read as integers is an integer list, one whose elements all
 * read as numbers a float list, else a string list.
 * Returns 0, -1 malformed, -2 no memory. */
static int parse_value(const char *s, cfg_value *v)
{
    size_t n = strlen(s);
    trim(&s, &n);
    memset(v, 0, sizeof *v);
    if (!n || (s[0] != '[' && s[0] != '('))
        return parse_scalar(s, n, v);
    char close = s[0] == '[' ? ']' : ')';
    if (n < 2 || s[n - 1] != close)
        return -1;
    s++;
    n -= 2;
    v->kind = CV_LIST;
    v->elem = CV_LIST;
    const char *t = s;
    size_t tn = n;
    trim(&t, &tn);
    if (!tn)
        return 0; /* [] */

    size_t cap = 1;
    for (size_t k = 0; k < n; k++)
        cap += s[k] == ',';
    cfg_value *items = calloc(cap, sizeof *items);
    if (!items)
        return -2;

    /* split on commas outside quotes */
    int count = 0, rc = 0;
    size_t start = 0;
    char q = 0;
    for (size_t k = 0; k <= n && !rc; k++) {
        if (k < n) {
            char ch = s[k];
            if (q) {
                if (ch == '\\')
                    k++;
                else if (ch == q)
                    q = 0;
                continue;
            }
            if (ch == '"' || ch == '\'') {
                q = ch;
                continue;
            }
            if (ch != ',')
                continue;
        }
        const char *it = s + start;
        size_t in = k - start;
        trim(&it, &in);
        if (!in) { /* empty element, as in "[1,,2]" */
            rc = -1;
            break;
        }
        rc = parse_scalar(it, in, &items[count]);
        if (!rc)
            count++;
        start = k + 1;
    }
    if (!rc && q)
        rc = -1; /* unterminated quote */

    bool all_int = true, all_num = true;
    for (int k = 0; k < count; k++) {
        all_int = all_int && items[k].kind == CV_INT;
        all_num = all_num && (items[k].kind == CV_INT || items[k].kind == CV_FLOAT);
    }
    if (!rc) {
        v->elem = all_int ? CV_INT : all_num ? CV_FLOAT : CV_STRING;
        if (all_int)
            v->ints = calloc((size_t)count, sizeof *v->ints);
        else if (all_num)
            v->flts = calloc((size_t)count, sizeof *v->flts);
        else
            v->strs = calloc((size_t)count, sizeof *v->strs);
        if (!v->ints && !v->flts && !v->strs)
            rc = -2;
    }
    for (int k = 0; k < count; k++) {
        if (!rc && all_int) {
            v->ints[k] = items[k].i;
        } else if (!rc && all_num) {
            v->flts[k] = items[k].kind == CV_INT ? (double)items[k].i : items[k].f;
        } else if (!rc) {
            v->strs[k] = items[k].s; /* the string, or the bare text */
            items[k].s = NULL;
        }
        value_free(&items[k]);
    }
    free(items);
    v->n = rc ? 0 : count;
    if (rc)
        value_free(v);
    return rc;
}

static bool valid_key_syntax(const char *k, size_t n)
{
    if (!n || k[0] == '.' || k[n - 1] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)k[i];
        if (!(isalnum(ch) || ch == '_' || ch == '-' || (ch == '.' && k[i + 1] != '.')))
            return false;
    }
    return true;
}

/* Splits "key=value" into key (KEY_MAX bytes) and its parsed value. */
static int parse_assignment(const char *assignment, char *key, cfg_value *v, sim_err *err)
{
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return sim_err_set_at(err, SIM_EINVAL, ORIGIN_CMDLINE, 0, NULL,
                              "\"%s\": an override is KEY=VALUE (e.g. "
                              "model.tensor_model_parallel_size=4)", assignment);
    const char *k = assignment;
    size_t kn = (size_t)(eq - assignment);
    trim(&k, &kn);
    if (!valid_key_syntax(k, kn) || kn >= KEY_MAX)
        return sim_err_set_at(err, SIM_EINVAL, ORIGIN_CMDLINE, 0, NULL,
                              "\"%s\": not a valid key (dotted names such as model.seq_length)",
                              assignment);
    memcpy(key, k, kn);
    key[kn] = '\0';

    int rc = parse_value(eq + 1, v);
    if (rc == -2)
        return sim_err_set(err, SIM_ENOMEM, "out of memory storing %s", key);
    if (rc)
        return sim_err_set_at(err, SIM_EINVAL, ORIGIN_CMDLINE, 0, key,
                              "malformed value \"%s\" (expected a number, true/false, a string "
                              "or a [list])", eq + 1);
    return SIM_OK;
}

int cfg_set_at(cfg_t *c, const char *key, const char *value, const char *file, int line, cfg_prio prio,
               sim_err *err)
{
    size_t kn = strlen(key);
    if (!valid_key_syntax(key, kn) || kn >= KEY_MAX)
        return sim_err_set_at(err, SIM_EINVAL, file, line, NULL, "\"%.60s\": not a valid key", key);
    cfg_value v;
    int rc = parse_value(value, &v);
    if (rc == -2)
        return sim_err_set(err, SIM_ENOMEM, "out of memory storing %s", key);
    if (rc)
        return sim_err_set_at(err, SIM_EINVAL, file, line, key, "malformed value \"%.60s\"", value);
    return add_entry(c, key, &v, file, line, prio, false, err);
}

int cfg_set_override(cfg_t *c, const char *assignment, sim_err *err)
{
    char key[KEY_MAX];
    cfg_value v;
    int rc = parse_assignment(assignment, key, &v, err);
    if (rc != SIM_OK)
        return rc;
    return add_entry(c, key, &v, ORIGIN_CMDLINE, 0, CFG_PRIO_CLI, false, err);
}

/* ------------------------------------------------------------ key table */

typedef enum {
    KT_INT, KT_FLOAT, KT_BOOL, KT_STRING, KT_INT_LIST, KT_STR_LIST, KT_INT_OR_LIST, KT_FLOAT_LIST
} key_type;

/* The lower end of a numeric key's range; the upper end is the key's max
 * (1 for RG_UNIT and RG_FRAC).  RG_ANY: every int64 (sim.seed). */
typedef enum {
    RG_ANY = 0,
    RG_GE0,     /* [0, max] ("0 = derived" fields, latencies) */
    RG_GE1,     /* [1, max] (sizes, counts) */
    RG_POS,     /* (0, max] (peaks, bandwidths) */
    RG_UNIT,    /* (0, 1] (efficiencies) */
    RG_FRAC,    /* [0, 1] (shares) */
} range_kind;

typedef struct key_def key_def;
typedef int (*setter_fn)(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                         sim_err *err);

struct key_def {
    const char *key;
    key_type type;
    const char *def;   /* default in override syntax; NULL = required */
    range_kind range;  /* numeric keys and numeric list elements */
    double max;        /* upper end of the range, in config units */
    size_t offset;     /* field in run_inputs when set == NULL */
    size_t size;       /* KT_STRING: size of the char array; KT_FLOAT_LIST:
                          number of elements (0 = a curve, up to NET_CURVE_MAX) */
    double scale;      /* KT_FLOAT: config unit -> SI (0 = 1) */
    setter_fn set;     /* converts and stores (lists, derived fields) */
    bool late;         /* applied after all other keys (reads them) */
    const char *help;
    /* Name keys (K_ENUM, K_FLAGS): the accepted names and the value each
     * stores (K_ENUM: the enum or bool at offset; K_FLAGS: bits OR-ed into
     * an unsigned at offset). */
    const char *const *names;
    const int *values;
    int n_names;
};

#define FIELD(f) offsetof(run_inputs, f)
#define FSIZE(f) sizeof(((run_inputs *)0)->f)

#define K_INT(k, f, d, rg, mx, h) \
    { .key = k, .type = KT_INT, .def = d, .range = rg, .max = mx, .offset = FIELD(f), .help = h }
#define K_BOOL(k, f, d, h) { .key = k, .type = KT_BOOL, .def = d, .offset = FIELD(f), .help = h }
#define K_FLT(k, f, d, rg, mx, sc, h) \
    { .key = k, .type = KT_FLOAT, .def = d, .range = rg, .max = mx, .offset = FIELD(f), .scale = sc, .help = h }
#define K_STR(k, f, d, h) { .key = k, .type = KT_STRING, .def = d, .offset = FIELD(f), .size = FSIZE(f), .help = h }
#define K_SET(k, t, d, fn, h) { .key = k, .type = t, .def = d, .set = fn, .help = h }
/* A fixed-length list of numbers (one per NCCL protocol LL, LL128, Simple,
 * or per domain count) into a double array. */
#define K_FLTS(k, f, cnt, rg, mx, sc, h)                                                 \
    { .key = k, .type = KT_FLOAT_LIST, .range = rg, .max = mx, .offset = FIELD(f), .size = cnt, \
      .scale = sc, .set = set_floats, .help = h }
/* An efficiency curve: sizes (KiB per rank), then efficiencies (late: the
 * counts must match). */
#define K_CURVE(prefix, f, what, size)                                                    \
    { .key = prefix ".efficiency_size_kib", .type = KT_INT_LIST, .offset = FIELD(f),      \
      .range = RG_GE1, .max = LIMIT_CURVE_KIB, .set = set_curve_sizes,                    \
      .help = what " efficiency curve: " size ", KiB, increasing" },                      \
    { .key = prefix ".efficiency", .type = KT_FLOAT_LIST, .range = RG_UNIT, .max = 1,     \
      .offset = FIELD(f), .set = set_curve_eff, .late = true,                             \
      .help = what " efficiency at each size (linear in log2 size between points)" }

static int set_pos_emb(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_moe_layer_freq(const cfg_t *, const key_def *, const cfg_value *, run_inputs *,
                              sim_err *);
static int set_window_size(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_hybrid_pattern(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_mtp_pattern(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_window_skip(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_hier_cp(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_microbench(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_fitted(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_kernels(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_precision(const cfg_t *, const key_def *, const cfg_value *, run_inputs *,
                         sim_err *);
static int set_floats(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_curve_sizes(const cfg_t *, const key_def *, const cfg_value *, run_inputs *,
                           sim_err *);
static int set_curve_eff(const cfg_t *, const key_def *, const cfg_value *, run_inputs *,
                         sim_err *);
static int set_algo(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_proto(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);

static int set_enum(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_megatron_fsdp(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);
static int set_flags(const cfg_t *, const key_def *, const cfg_value *, run_inputs *, sim_err *);

/* A key whose value is one of names[] (stores the matching value). */
#define K_ENUM(k, f, d, names_, values_, h)                                                       \
    { .key = k, .type = KT_STRING, .def = d, .set = set_enum, .offset = FIELD(f), .size = FSIZE(f), \
      .names = names_, .values = values_, .n_names = (int)(sizeof names_ / sizeof *names_), .help = h }
/* A key whose value is a list of names[] (stores the OR of their bits). */
#define K_FLAGS(k, f, d, names_, values_, h)                                                       \
    { .key = k, .type = KT_STR_LIST, .def = d, .set = set_flags, .offset = FIELD(f), .size = FSIZE(f), \
      .names = names_, .values = values_, .n_names = (int)(sizeof names_ / sizeof *names_), .help = h }

static const char *const norm_names[] = { "LayerNorm", "RMSNorm" };
static const int norm_values[] = { NORM_LAYERNORM, NORM_RMSNORM };
static const char *const dispatcher_names[] = { "allgather", "alltoall", "flex" };
static const int dispatcher_values[] = { MOE_DISPATCHER_ALLGATHER, MOE_DISPATCHER_ALLTOALL, MOE_DISPATCHER_FLEX };
static const int schedule_values[SCHED_NAMES] = { SCHED_MEGATRON, SCHED_1F1B, SCHED_INTERLEAVED,
                                                  SCHED_ZB_H1,    SCHED_ZB_V, SCHED_DUALPIPEV };
static const char *const cp_comm_names[] = { "p2p", "all_gather", "a2a", "a2a+p2p" };
static const int cp_comm_values[] = { CP_COMM_P2P, CP_COMM_ALL_GATHER, CP_COMM_A2A, CP_COMM_A2A_P2P };
/* Megatron Core's AttnBackend names. */
static const char *const attn_names[] = { "auto", "flash", "fused", "unfused", "local" };
static const int attn_values[] = { ATTN_AUTO, ATTN_FLASH, ATTN_FUSED, ATTN_UNFUSED, ATTN_UNFUSED };
static const char *const flex_backend_names[] = { "deepep", "hybridep" };
static const int flex_backend_values[] = { KT_DEEPEP, KT_HYBRIDEP };
/* Megatron Core's softmax_type (gpt-oss: learnable sinks). */
static const char *const softmax_names[] = { "vanilla", "off-by-one", "learnable" };
static const int softmax_values[] = { 0, 1, 2 };
static const char *const recompute_names[] = { "none", "selective", "full" };
static const int recompute_values[] = { RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL };
static const char *const recompute_mod_names[] = { "core_attn", "mlp", "moe", "moe_act", "layernorm",
                                                   "mla_up_proj", "shared_experts" };
static const int recompute_mod_values[] = { RECOMPUTE_MOD_CORE_ATTN, RECOMPUTE_MOD_MLP, RECOMPUTE_MOD_MOE,
                                            RECOMPUTE_MOD_MOE_ACT, RECOMPUTE_MOD_LAYERNORM,
                                            RECOMPUTE_MOD_MLA_UP_PROJ, RECOMPUTE_MOD_SHARED_EXPERTS };
static const char *const graph_impl_names[] = { "none", "local", "transformer_engine", "full_iteration" };
static const int graph_impl_values[] = { GRAPH_NONE, GRAPH_LOCAL, GRAPH_TE, GRAPH_FULL_ITERATION };
static const char *const graph_mod_names[] = { "attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba",
                                               "full_iteration" };
static const int graph_mod_values[] = { GRAPH_MOD_ATTN, GRAPH_MOD_MLP, GRAPH_MOD_MOE, GRAPH_MOD_MOE_ROUTER,
                                        GRAPH_MOD_MOE_PREPROCESS, GRAPH_MOD_MAMBA, GRAPH_MOD_FULL_ITERATION };
/* Megatron Bridge's activation_func (torch.nn.functional.gelu / silu /
 * relu, megatron.core's squared_relu) and moe_router_score_function. */
static const char *const act_names[] = { "gelu", "silu", "relu", "squared_relu" };
static const int act_values[] = { MODEL_ACT_GELU, MODEL_ACT_SILU, MODEL_ACT_RELU, MODEL_ACT_SQUARED_RELU };
static const char *const score_names[] = { "softmax", "sigmoid" };
static const int score_values[] = { MODEL_ROUTER_SOFTMAX, MODEL_ROUTER_SIGMOID };
/* Megatron-FSDP's sharding strategies (ZeRO stages 0-3); the outer one
 * (HSDP / HFSDP) takes the first two. */
static const char *const dp_shard_names[] = { "no_shard", "optim", "optim_grads", "optim_grads_params" };

const char *dp_shard_name(int k)
{
    return k >= 0 && k < (int)(sizeof dp_shard_names / sizeof dp_shard_names[0]) ? dp_shard_names[k] : "no_shard";
}
static const int dp_shard_values[] = { DP_SHARD_NONE, DP_SHARD_OPTIM, DP_SHARD_OPTIM_GRADS,
                                       DP_SHARD_OPTIM_GRADS_PARAMS };
static const char *const outer_shard_names[] = { "no_shard", "optim" };
static const int outer_shard_values[] = { DP_SHARD_NONE, DP_SHARD_OPTIM };
static const char *const peft_names[] = { "none", "lora" };
static const int peft_values[] = { 0, 1 };
static const char *const lora_target_names[] = { "linear_qkv", "linear_proj", "linear_fc1", "linear_fc2" };
static const int lora_target_values[] = { LORA_QKV, LORA_PROJ, LORA_FC1, LORA_FC2 };
static const char *const scaleup_names[] = { "nvlink", "pcie" };
static const int scaleup_values[] = { SCALEUP_NVLINK, SCALEUP_PCIE };
static const char *const fabric_names[] = { "infiniband", "roce", "ethernet" };
static const int fabric_values[] = { FABRIC_INFINIBAND, FABRIC_ROCE, FABRIC_ETHERNET };

/* Every key parsim accepts, in the order --help-config and cfg_dump list
 * them.  Names follow Megatron Bridge (ConfigContainer fields) so recipe
 * overrides work unchanged; cluster.* and sim.* are parsim's own and carry
 * their unit in the name. */
static const key_def keys[] = {
    /* model: architecture */
    K_STR("model.name", model.name, "\"\"", "model preset: loads <data_dir>/models/<name>.cfg"),
    K_SET("model.hybrid_override_pattern", KT_STRING, "\"\"", set_hybrid_pattern,
          "deprecated name of model.hybrid_layer_pattern"),
    K_SET("model.hybrid_layer_pattern", KT_STRING, "\"\"", set_hybrid_pattern,
          "hybrid model, one symbol a layer: M Mamba-2, * attention, - dense MLP, E MoE, | stage boundary, "
          "/ MTP depth (main/mtp/mtp); sets num_layers and mtp_num_layers"),
    K_SET("model.mtp_hybrid_override_pattern", KT_STRING, "\"\"", set_mtp_pattern,
          "legacy hybrid MTP: the symbols of one MTP depth, repeated mtp_num_layers times"),
    K_INT("model.num_layers", model.num_layers, NULL, RG_GE1, MODEL_MAX_LAYERS,
          "transformer layers L (a hybrid pattern sets it)"),
    K_INT("model.mamba_state_dim", model.mamba_state_dim, "128", RG_GE1, LIMIT_WIDTH, "Mamba-2 state size N"),
    K_INT("model.mamba_head_dim", model.mamba_head_dim, "64", RG_GE1, LIMIT_WIDTH, "Mamba-2 head dimension P"),
    K_INT("model.mamba_num_groups", model.mamba_num_groups, "8", RG_GE1, LIMIT_HEADS, "Mamba-2 B/C groups G"),
    K_INT("model.mamba_num_heads", model.mamba_num_heads, "0", RG_GE0, LIMIT_WIDTH,
          "Mamba-2 heads H; 0 = 2*hidden_size/mamba_head_dim"),
    K_INT("model.mamba_chunk_size", model.mamba_chunk_size, "128", RG_GE1, LIMIT_SEQ_TOKENS,
          "Mamba-2 SSD chunk length, tokens"),
    K_BOOL("model.use_mamba_mem_eff_path", model.mamba_mem_eff_path, "true",
           "Mamba-2 mixer as the fused conv1d + scan + norm kernel (false: separate kernels, conv output kept)"),
    K_INT("model.hidden_size", model.hidden_size, NULL, RG_GE1, LIMIT_WIDTH, "hidden size h"),
    K_INT("model.ffn_hidden_size", model.ffn_hidden_size, "0", RG_GE0, LIMIT_WIDTH,
          "dense MLP hidden size F; 0 = 4*hidden_size"),
    K_INT("model.num_attention_heads", model.num_attention_heads, NULL, RG_GE1, LIMIT_HEADS,
          "attention heads a"),
    K_INT("model.num_query_groups", model.num_query_groups, "0", RG_GE0, LIMIT_HEADS,
          "KV heads g (GQA); 0 = num_attention_heads"),
    K_INT("model.kv_channels", model.kv_channels, "0", RG_GE0, LIMIT_WIDTH,
          "head dimension d; 0 = hidden_size/num_attention_heads"),
    K_BOOL("model.gated_linear_unit", model.gated_linear_unit, "false",
           "SwiGLU/GeGLU MLP (fc1 is 2F wide)"),
    K_ENUM("model.normalization", model.normalization, "\"LayerNorm\"", norm_names, norm_values,
           "LayerNorm | RMSNorm"),
    K_BOOL("model.share_embeddings_and_output_weights", model.share_embeddings_and_output_weights,
           "true", "tie input embedding and output layer"),
    K_BOOL("model.add_bias_linear", model.add_bias_linear, "true", "biases in linear layers"),
    K_BOOL("model.qk_layernorm", model.qk_layernorm, "false", "norms on queries and keys"),
    K_SET("model.position_embedding_type", KT_STRING, "\"learned_absolute\"", set_pos_emb,
          "learned_absolute | rope | yarn | mrope | alibi | relative | none"),
    K_INT("model.vocab_size", model.vocab_size, NULL, RG_GE1, LIMIT_VOCAB, "vocabulary size (unpadded)"),
    K_INT("model.make_vocab_size_divisible_by", model.make_vocab_size_divisible_by, "128", RG_GE1, LIMIT_VOCAB_MULTIPLE,
          "vocabulary padded to a multiple of this times TP"),
    K_INT("model.seq_length", model.seq_length, NULL, RG_GE1, LIMIT_SEQ_TOKENS, "sequence length s, tokens"),
    /* model: MoE */
    K_INT("model.num_moe_experts", model.num_moe_experts, "0", RG_GE0, LIMIT_HEADS,
          "routed experts E; 0 = dense model"),
    K_INT("model.moe_router_topk", model.moe_router_topk, "2", RG_GE1, LIMIT_HEADS, "experts per token k"),
    K_INT("model.moe_ffn_hidden_size", model.moe_ffn_hidden_size, "0", RG_GE0, LIMIT_WIDTH,
          "expert MLP hidden size; 0 = ffn_hidden_size"),
    K_INT("model.moe_shared_expert_intermediate_size", model.moe_shared_expert_intermediate_size,
          "0", RG_GE0, LIMIT_WIDTH, "shared experts' total hidden size; 0 = none"),
    K_INT("model.moe_router_num_groups", model.moe_router_num_groups, "0", RG_GE0, LIMIT_HEADS,
          "group-limited routing: expert groups (DeepSeek-V3: 8); 0 = off"),
    K_INT("model.moe_router_group_topk", model.moe_router_group_topk, "0", RG_GE0, LIMIT_HEADS,
          "group-limited routing: groups one token may use (DeepSeek-V3: 4); 0 = off"),
    K_INT("model.moe_latent_size", model.moe_latent_size, "0", RG_GE0, LIMIT_WIDTH,
          "latent MoE: routed experts run at this width (h -> l before dispatch, l -> h after combine); "
          "0 = none"),
    K_ENUM("model.activation_func", model.activation_func, "\"gelu\"", act_names, act_values,
           "MLP activation: gelu | silu | relu | squared_relu (one elementwise pass; the width follows "
           "gated_linear_unit)"),
    K_ENUM("model.moe_router_score_function", model.moe_router_score_function, "\"softmax\"", score_names,
           score_values, "router scores: softmax | sigmoid"),
    K_BOOL("model.moe_router_enable_expert_bias", model.moe_router_enable_expert_bias, "false",
           "fp32 per-expert bias added to the scores that select the experts (aux-loss-free balancing)"),
    K_FLT("model.moe_router_topk_scaling_factor", model.moe_router_topk_scaling_factor, "0", RG_GE0, 1e6, 1,
          "scale on the top-k routing weights; 0 = none"),
    { .key = "model.moe_layer_freq", .type = KT_INT_OR_LIST, .def = "1", .set = set_moe_layer_freq,
      .range = RG_GE1, .max = MODEL_MAX_LAYERS, .late = true,
      .help = "MoE layer frequency f (layer i is MoE iff i % f == 0), or a 0/1 list of "
              "num_layers entries" },
    { .key = "model.window_size", .type = KT_INT_LIST, .def = "[]", .set = set_window_size,
      .range = RG_GE0, .max = LIMIT_SEQ_TOKENS,
      .help = "sliding-window attention (left, right) keys, causal: [W, 0]; [] = full attention" },
    { .key = "model.window_attn_skip_freq", .type = KT_INT_OR_LIST, .def = "0", .set = set_window_skip,
      .range = RG_GE0, .max = MODEL_MAX_LAYERS, .late = true,
      .help = "with window_size: every N-th layer (1-based) full attention, the rest windowed; 0 = all "
              "windowed; or a 0/1 list of num_layers entries (1 = windowed)" },
    K_ENUM("model.moe_token_dispatcher_type", par.moe_token_dispatcher, "\"allgather\"", dispatcher_names,
           dispatcher_values,
          "allgather | alltoall | flex (Megatron Core's default: allgather)"),
    K_ENUM("model.moe_flex_dispatcher_backend", par.moe_flex_backend, "\"deepep\"", flex_backend_names,
           flex_backend_values, "flex dispatcher kernels: deepep | hybridep (rates from the kernel table)"),
    K_INT("model.moe_hybridep_num_sms", par.moe_hybridep_num_sms, "16", RG_GE1, LIMIT_SM_COUNT,
          "SMs HybridEP's kernels run on (Megatron Core's default 16): the kernel table's rates at the "
          "nearest published SM count"),
    K_FLT("model.moe_expert_capacity_factor", par.moe_capacity_factor, "0", RG_GE0, 64, 1,
          "expert capacity as a multiple of the balanced share; tokens beyond it are dropped; "
          "0 = dropless (Megatron's None)"),
    K_BOOL("model.moe_pad_expert_input_to_capacity", par.moe_pad_to_capacity, "false",
           "pad every expert's input to its capacity (needs moe_expert_capacity_factor): static "
           "shapes, no token-count sync, experts graphable"),
    K_BOOL("model.moe_shared_expert_overlap", par.moe_shared_expert_overlap, "false",
           "shared experts beside the EP exchange: fc1 with the dispatch, fc2 with the combine "
           "(alltoall or flex; not with overlap_moe_expert_parallel_comm)"),
    K_ENUM("model.softmax_type", model.softmax_type, "\"vanilla\"", softmax_names, softmax_values,
           "vanilla | off-by-one | learnable (softmax sinks: attention runs a family that has them)"),
    /* model: multi-latent attention, multi-token prediction */
    K_BOOL("model.multi_latent_attention", model.multi_latent_attention, "false",
           "DeepSeek multi-latent attention"),
    K_INT("model.q_lora_rank", model.q_lora_rank, "0", RG_GE0, LIMIT_WIDTH, "MLA query latent; 0 = none"),
    K_INT("model.kv_lora_rank", model.kv_lora_rank, "0", RG_GE0, LIMIT_WIDTH, "MLA key/value latent"),
    K_INT("model.qk_head_dim", model.qk_head_dim, "0", RG_GE0, LIMIT_WIDTH, "MLA q/k head dim (no rope)"),
    K_INT("model.qk_pos_emb_head_dim", model.qk_pos_emb_head_dim, "0", RG_GE0, LIMIT_WIDTH,
          "MLA q/k rope head dim"),
    K_INT("model.v_head_dim", model.v_head_dim, "0", RG_GE0, LIMIT_WIDTH, "MLA value head dim"),
    K_INT("model.mtp_num_layers", model.mtp_num_layers, "0", RG_GE0, MODEL_MAX_LAYERS,
          "multi-token prediction layers"),
    K_BOOL("model.mtp_use_repeated_layer", model.mtp_use_repeated_layer, "false",
           "every MTP depth runs the same block (its weights counted once)"),
    /* model: parallelism (Megatron ModelParallelConfig) */
    K_INT("model.tensor_model_parallel_size", par.tp, "1", RG_GE1, LIMIT_GPUS, "TP"),
    K_INT("model.pipeline_model_parallel_size", par.pp, "1", RG_GE1, LIMIT_GPUS, "PP"),
    K_INT("model.virtual_pipeline_model_parallel_size", par.vp, "0", RG_GE0, MODEL_MAX_LAYERS,
          "virtual stages per PP rank (interleaved 1F1B); 0 = not interleaved"),
    K_INT("model.context_parallel_size", par.cp, "1", RG_GE1, LIMIT_GPUS, "CP"),
    K_INT("model.expert_model_parallel_size", par.ep, "1", RG_GE1, LIMIT_GPUS, "EP"),
    K_INT("model.expert_tensor_parallel_size", par.etp, "0", RG_GE0, LIMIT_GPUS,
          "ETP; 0 = tensor_model_parallel_size"),
    K_BOOL("model.sequence_parallel", par.sequence_parallel, "false",
           "sequence parallelism (needs TP > 1)"),
    K_ENUM("model.cp_comm_type", par.cp_comm_type, "\"p2p\"", cp_comm_names, cp_comm_values,
          "p2p | all_gather | a2a | a2a+p2p"),
    K_ENUM("model.attention_backend", par.attention_backend, "\"auto\"", attn_names, attn_values,
          "auto | flash | fused | unfused | local (unfused/local keep the s x s scores)"),
    { .key = "model.hierarchical_context_parallel_sizes", .type = KT_INT_LIST, .def = "[]",
      .set = set_hier_cp, .range = RG_GE1, .max = LIMIT_GPUS,
      .help = "CP levels for a2a+p2p, product = context_parallel_size" },
    K_ENUM("model.recompute_granularity", par.recompute_granularity, "\"none\"", recompute_names,
           recompute_values,
          "none | selective | full"),
    K_FLAGS("model.recompute_modules", par.recompute_modules, "[core_attn]", recompute_mod_names,
            recompute_mod_values,
          "selective recompute: core_attn, mlp, moe, moe_act, layernorm, mla_up_proj, "
          "shared_experts"),
    K_ENUM("model.cuda_graph_impl", graphs.impl, "\"none\"", graph_impl_names, graph_impl_values,
           "CUDA graphs: none | local | transformer_engine | full_iteration (fwd+bwd, optimizer excluded)"),
    K_FLAGS("model.cuda_graph_modules", graphs.modules, "[]", graph_mod_names, graph_mod_values,
            "graphed modules: attn, mlp, moe, moe_router, moe_preprocess, mamba; [] = the whole layer"),
    K_FLAGS("model.cuda_graph_scope", graphs.scope, "[]", graph_mod_names, graph_mod_values,
            "deprecated name of model.cuda_graph_modules (also full_iteration)"),
    K_BOOL("model.enable_cuda_graph", graphs.enable_local, "false",
           "deprecated switch: true = cuda_graph_impl local (per-layer graphs) when that key is not given"),
    K_INT("model.recompute_num_layers", par.recompute_num_layers, "1", RG_GE1, MODEL_MAX_LAYERS,
          "full recompute: layers per recompute group"),
    K_INT("model.microbatch_group_size_per_vp_stage", par.microbatch_group_size_per_vp_stage,
          "0", RG_GE0, LIMIT_BATCH, "interleaved: microbatches per chunk group N; 0 = PP"),
    K_INT("model.num_layers_in_first_pipeline_stage", par.num_layers_in_first_pipeline_stage, "0", RG_GE0, MODEL_MAX_LAYERS,
          "uneven pipeline: layers on the first stage; 0 = even split"),
    K_INT("model.num_layers_in_last_pipeline_stage", par.num_layers_in_last_pipeline_stage, "0", RG_GE0, MODEL_MAX_LAYERS,
          "uneven pipeline: layers on the last stage; 0 = even split"),
    K_STR("model.pipeline_model_parallel_layout", par.pipeline_model_parallel_layout, "\"\"",
          "uneven pipeline: Megatron layout string, e.g. \"Et*3|(tttt|)*14tmL\""),
    K_BOOL("model.account_for_embedding_in_pipeline_split", par.account_for_embedding_in_pipeline_split, "false",
           "count the embedding as one layer when splitting layers over stages"),
    K_BOOL("model.account_for_loss_in_pipeline_split", par.account_for_loss_in_pipeline_split, "false",
           "count the output layer and loss as one layer when splitting layers over stages"),
    K_BOOL("model.overlap_p2p_comm", par.overlap_p2p_comm, "true",
           "interleaved: overlap pipeline send/recv with compute"),
    K_BOOL("model.tp_comm_overlap", par.tp_comm_overlap, "false",
           "overlap TP collectives with GEMMs (needs sequence_parallel)"),
    K_BOOL("model.overlap_moe_expert_parallel_comm", par.overlap_moe_ep_comm, "false",
           "combined 1F1B: each backward paired with the next forward layer by layer, EP all-to-all beside "
           "the other microbatch's compute (EP > 1, alltoall or flex; PP > 1 needs VP)"),
    K_BOOL("model.delay_wgrad_compute", par.delay_wgrad_compute, "false",
           "with overlap_moe_expert_parallel_comm: weight-gradient GEMMs as nodes after the dgrads"),
    K_BOOL("model.cpu_offloading", par.cpu_offloading, "false",
           "offload saved activations of the first cpu_offloading_num_layers layers to host memory"),
    K_INT("model.cpu_offloading_num_layers", par.cpu_offloading_num_layers, "0", RG_GE0, MODEL_MAX_LAYERS,
          "CPU offloading: layers offloaded, from the first (Megatron: below model.num_layers)"),
    K_BOOL("model.cpu_offloading_activations", par.cpu_offloading_activations, "true",
           "CPU offloading: offload the layers' saved activations"),
    K_BOOL("model.cpu_offloading_weights", par.cpu_offloading_weights, "false",
           "CPU offloading of weights: not modeled (true is refused)"),
    /* train, ddp, precision */
    K_INT("train.global_batch_size", train.global_batch_size, NULL, RG_GE1, LIMIT_BATCH,
          "sequences per step"),
    K_INT("train.micro_batch_size", train.micro_batch_size, "1", RG_GE1, LIMIT_BATCH,
          "sequences per microbatch"),
    K_ENUM("peft.scheme", peft.lora, "\"none\"", peft_names, peft_values,
          "none | lora (frozen base weights, trained low-rank adapters)"),
    K_INT("peft.dim", peft.dim, "32", RG_GE1, LIMIT_WIDTH, "LoRA adapter rank"),
    K_FLAGS("peft.target_modules", peft.targets, "[linear_qkv, linear_proj, linear_fc1, linear_fc2]", lora_target_names,
            lora_target_values, "LoRA targets: linear_qkv, linear_proj, linear_fc1, linear_fc2"),
    K_BOOL("ddp.use_distributed_optimizer", ddp.use_distributed_optimizer, "false",
           "shard optimizer state over data parallel ranks"),
    K_BOOL("ddp.overlap_grad_reduce", ddp.overlap_grad_reduce, "false",
           "overlap gradient reduction with backward"),
    K_BOOL("ddp.overlap_param_gather", ddp.overlap_param_gather, "false",
           "overlap parameter all-gather with forward (distributed optimizer)"),
    K_BOOL("ddp.grad_reduce_in_fp32", ddp.grad_reduce_in_fp32, "true",
           "reduce gradients in fp32 (else bf16)"),
    K_INT("ddp.bucket_size", ddp.bucket_size, "0", RG_GE0, LIMIT_BUCKET_PARAMS,
          "parameters per gradient bucket; 0 = Megatron's max(40000000, 1000000*dp)"),
    { .key = "ddp.use_megatron_fsdp", .type = KT_BOOL, .def = "false", .set = set_megatron_fsdp, .late = true,
      .help = "Megatron-FSDP: shard as ddp.data_parallel_sharding_strategy says (sets the distributed "
              "optimizer; optim_grads forces overlap_grad_reduce, optim_grads_params both overlaps)" },
    K_ENUM("ddp.data_parallel_sharding_strategy", ddp.sharding, "\"no_shard\"", dp_shard_names, dp_shard_values,
           "Megatron-FSDP only: no_shard | optim | optim_grads | optim_grads_params (ZeRO 0-3); "
           "ignored without ddp.use_megatron_fsdp"),
    K_INT("ddp.num_distributed_optimizer_instances", ddp.num_distributed_optimizer_instances, "1", RG_GE1,
          LIMIT_GPUS, "outer DP size: shards span dp*cp / instances ranks (HSDP / HFSDP); 1 = none"),
    K_ENUM("ddp.outer_dp_sharding_strategy", ddp.outer_sharding, "\"no_shard\"", outer_shard_names,
           outer_shard_values,
           "Megatron-FSDP only: no_shard (HSDP: all-reduce over the instances) | optim (HFSDP: the "
           "optimizer state sharded over them too)"),
    K_BOOL("ddp.fsdp_double_buffer", ddp.fsdp_double_buffer, "false",
           "Megatron-FSDP: a persistent pair of unit buffers (two units of the most common size)"),
    K_INT("ddp.suggested_communication_unit_size", ddp.suggested_communication_unit_size, "0", RG_GE0,
          LIMIT_BUCKET_PARAMS, "Megatron-FSDP collective bundling, elements (launch count only: not simulated); 0 = none"),
    K_BOOL("mixed_precision.fp8_param_gather", ddp.fp8_param_gather, "false",
           "gather parameters in fp8 (1 byte) for the distributed optimizer / Megatron-FSDP; needs an FP8 recipe"),
    K_SET("mixed_precision", KT_STRING, "\"bf16\"", set_precision,
          "bf16 | fp16 | fp8 | fp8-cs | fp8-delayed | mxfp8 | fp8-blockwise | nvfp4, or a "
          "Megatron Bridge recipe name (bf16_with_fp8_current_scaling_mixed, ...)"),
    /* cluster */
    K_STR("cluster.topology", cluster.name, "\"\"",
          "topology preset: loads <data_dir>/topologies/<name>.cfg"),
    K_SET("cluster.fitted", KT_STRING, "\"\"", set_fitted,
          "parameter file fitted to measurements (topologies/fitted/, written by "
          "bench/validation/fit_defaults.sh), relative to the file that names it; a file that is "
          "not there, or \"\", = the topology's own values (PARSIM_FITTED=none: in every run)"),
    K_INT("cluster.num_gpus", cluster.num_gpus, NULL, RG_GE1, LIMIT_GPUS, "GPUs in the job (world size)"),
    K_INT("cluster.gpus_per_node", cluster.gpus_per_node, NULL, RG_GE1, LIMIT_GPUS, "GPUs per node"),
    K_INT("cluster.nvlink_domain_gpus", cluster.nvlink_domain_gpus, NULL, RG_GE1, LIMIT_GPUS,
          "GPUs in one NVLink (scale-up) domain"),
    K_INT("cluster.nvlink_domain_job_gpus", cluster.nvlink_domain_job_gpus, "0", RG_GE0, LIMIT_GPUS,
          "GPUs of each NVLink domain a job's ranks fill, in rank order (a multiple of gpus_per_node; "
          "NVL72 jobs commonly use 16 of a rack's 18 trays); 0 = all of them"),
    K_STR("cluster.gpu.name", cluster.gpu.name, NULL, "GPU model"),
    K_FLT("cluster.gpu.peak_bf16_tflops", cluster.gpu.peak_bf16_flops_per_s, NULL, RG_POS, LIMIT_TFLOPS, TFLOPS,
          "dense bf16 tensor-core peak, TFLOP/s"),
    K_FLT("cluster.gpu.peak_fp8_tflops", cluster.gpu.peak_fp8_flops_per_s, "0", RG_GE0, LIMIT_TFLOPS, TFLOPS,
          "dense fp8 peak, TFLOP/s; 0 = unsupported"),
    K_FLT("cluster.gpu.peak_fp4_tflops", cluster.gpu.peak_fp4_flops_per_s, "0", RG_GE0, LIMIT_TFLOPS, TFLOPS,
          "dense fp4 peak, TFLOP/s; 0 = unsupported"),
    K_FLT("cluster.gpu.hbm_gbytes", cluster.gpu.hbm_capacity_bytes, NULL, RG_POS, LIMIT_HBM_GB, GB,
          "HBM capacity, GB (1e9 bytes)"),
    K_FLT("cluster.gpu.hbm_bw_gbytes_per_s", cluster.gpu.hbm_bw_bytes_per_s, NULL, RG_POS, LIMIT_BW_GBPS, GB,
          "HBM bandwidth peak, GB/s"),
    K_FLT("cluster.gpu.host_link_gbytes_per_s", cluster.gpu.host_link_bytes_per_s, "0", RG_GE0, LIMIT_BW_GBPS, GB,
          "GPU <-> host memory copy bandwidth per GPU and direction, GB/s (CPU offloading); 0 = not given"),
    K_INT("cluster.gpu.sm_count", cluster.gpu.sm_count, "0", RG_GE0, LIMIT_SM_COUNT,
          "streaming multiprocessors (GEMM wave quantization; 0 = off)"),
    K_FLT("cluster.compute.gemm_efficiency", cluster.compute.gemm_efficiency, "0", RG_FRAC, 1, 1,
          "analytic model: every bf16 GEMM at this share of the peak x its shape; 0 = the kernel table"),
    K_FLT("cluster.compute.gemm_fp8_efficiency", cluster.compute.gemm_fp8_efficiency, "0",
          RG_FRAC, 1, 1, "analytic model: fp8/fp4 GEMMs at this share of their peak; 0 = the kernel table"),
    K_FLT("cluster.compute.attention_fwd_efficiency", cluster.compute.attention_fwd_efficiency,
          "0", RG_FRAC, 1, 1, "analytic model: attention forward plateau / bf16 peak; 0 = the kernel table"),
    K_FLT("cluster.compute.attention_bwd_efficiency", cluster.compute.attention_bwd_efficiency,
          "0", RG_FRAC, 1, 1, "analytic model: attention backward plateau / bf16 peak; 0 = the kernel table"),
    { .key = "cluster.compute.kernels", .type = KT_STRING, .def = "\"\"", .set = set_kernels, .late = true,
      .help = "published kernel table of the GPU (kernels/<gpu>.cfg): GEMM by shape and precision, "
              "attention by family, flex dispatcher rates; \"\" = none (then the efficiencies are required)" },
    K_FLT("cluster.compute.hbm_efficiency", cluster.compute.hbm_efficiency, NULL, RG_UNIT, 1, 1,
          "achievable / peak HBM bandwidth"),
    K_SET("cluster.compute.microbench", KT_STRING, "\"\"", set_microbench,
          "measured GEMM/attention efficiency table (bench/gpu_microbench.py --format cfg); \"\" = none"),
    K_FLT("cluster.compute.sustained_fraction", cluster.compute.sustained_fraction, "1", RG_UNIT, 1, 1,
          "share of the benchmarked GEMM and attention ceilings a training job sustains (fit with calibrate)"),
    K_FLT("cluster.compute.kernel_overhead_us", cluster.compute.kernel_overhead_s, NULL, RG_GE0, LIMIT_LATENCY_US,
          1e-6, "fixed cost per kernel launch, us"),
    K_FLT("cluster.compute.pass_overhead_us", cluster.compute.pass_overhead_s, "0", RG_GE0, LIMIT_LATENCY_US, 1e-6,
          "fixed host cost per forward or backward pass of a microbatch, us (fit with calibrate)"),
    /* cluster.host: sources in topologies/README.md and each topology file */
    K_FLT("cluster.host.launch_us", cluster.host.launch_s, "4", RG_GE0, LIMIT_LATENCY_US, 1e-6,
          "host time to issue one kernel or collective, us (PyTorch dispatch + CUDA launch)"),
    K_FLT("cluster.host.op_overhead_us", cluster.host.op_overhead_s, "10", RG_GE0, LIMIT_LATENCY_US, 1e-6,
          "framework host time per module call (attention, MLP, router, ...), us"),
    K_FLT("cluster.host.sync_us", cluster.host.sync_s, "39", RG_GE0, LIMIT_LATENCY_US, 1e-6,
          "device-to-host copy + sync round trip at an MoE dispatch and the optimizer step, us, beyond the "
          "wait for the GPU"),
    K_FLT("cluster.host.graph_launch_us", cluster.host.graph_launch_s, "10", RG_GE0, LIMIT_LATENCY_US, 1e-6,
          "host time of one CUDA graph replay, us"),
    K_FLT("cluster.host.optimizer_us", cluster.host.optimizer_s, "200", RG_GE0, LIMIT_LATENCY_US, 1e-6,
          "host time issuing the optimizer step, us"),
    K_INT("cluster.host.framework_ops.attn", cluster.host.framework_ops[HOST_OPS_ATTN], "0", RG_GE0,
          LIMIT_HOST_OPS, "framework ops (PyTorch calls beyond the costed kernels) per attention module call"),
    K_INT("cluster.host.framework_ops.mlp", cluster.host.framework_ops[HOST_OPS_MLP], "0", RG_GE0, LIMIT_HOST_OPS,
          "framework ops per dense MLP (or shared-expert) module call"),
    K_INT("cluster.host.framework_ops.moe_router", cluster.host.framework_ops[HOST_OPS_MOE_ROUTER], "0", RG_GE0,
          LIMIT_HOST_OPS, "framework ops per MoE router call (scores, top-k, routing map, aux loss)"),
    K_INT("cluster.host.framework_ops.moe_preprocess", cluster.host.framework_ops[HOST_OPS_MOE_PREPROCESS], "0",
          RG_GE0, LIMIT_HOST_OPS, "framework ops per MoE dispatch preprocess (token counts, splits, permute)"),
    K_INT("cluster.host.framework_ops.moe_dispatch", cluster.host.framework_ops[HOST_OPS_MOE_DISPATCH], "0",
          RG_GE0, LIMIT_HOST_OPS, "framework ops per MoE token dispatch"),
    K_INT("cluster.host.framework_ops.moe_experts", cluster.host.framework_ops[HOST_OPS_MOE_EXPERTS], "0",
          RG_GE0, LIMIT_HOST_OPS, "framework ops per grouped expert MLP call, fixed part"),
    K_INT("cluster.host.framework_ops.moe_per_expert", cluster.host.framework_ops[HOST_OPS_MOE_PER_EXPERT], "0",
          RG_GE0, LIMIT_HOST_OPS, "framework ops per grouped expert MLP call and local expert"),
    K_INT("cluster.host.framework_ops.moe_combine", cluster.host.framework_ops[HOST_OPS_MOE_COMBINE], "0",
          RG_GE0, LIMIT_HOST_OPS, "framework ops per MoE token combine (unsort, all-to-all, unpermute)"),
    K_INT("cluster.host.framework_ops.embedding", cluster.host.framework_ops[HOST_OPS_EMBEDDING], "0", RG_GE0,
          LIMIT_HOST_OPS, "framework ops per embedding call"),
    K_INT("cluster.host.framework_ops.output", cluster.host.framework_ops[HOST_OPS_OUTPUT], "0", RG_GE0,
          LIMIT_HOST_OPS, "framework ops per output layer + loss call"),
    K_INT("cluster.host.framework_ops.mamba", cluster.host.framework_ops[HOST_OPS_MAMBA], "0", RG_GE0,
          LIMIT_HOST_OPS, "framework ops per Mamba mixer call (views, casts, allocations beside its kernels)"),
    K_INT("cluster.host.ssd_launches_fwd", cluster.host.ssd_launches_fwd, "1", RG_GE1, LIMIT_HOST_OPS,
          "kernel launches of the chunked SSD scan forward (mamba_chunk_scan_combined's Triton kernels)"),
    K_INT("cluster.host.ssd_launches_bwd", cluster.host.ssd_launches_bwd, "1", RG_GE1, LIMIT_HOST_OPS,
          "kernel launches of the chunked SSD scan backward"),
    K_FLT("cluster.host.framework_ops_bwd_factor", cluster.host.framework_ops_bwd_factor, "1", RG_GE0,
          LIMIT_FACTOR, 1, "backward framework ops per forward framework op (autograd replays each op)"),
    K_BOOL("cluster.host.grouped_gemm_per_expert", cluster.host.grouped_gemm_per_expert, "false",
           "a grouped expert GEMM issues one launch per local expert (Transformer Engine's multi-stream cuBLAS)"),
    K_BOOL("cluster.host.grouped_quantize_per_expert", cluster.host.grouped_quantize_per_expert, "false",
           "the fp8/mxfp8 quantize of the expert inputs issues one launch per local expert"),
    K_FLT("cluster.host.graph_pool_gib", cluster.host.graph_pool_bytes, "3", RG_GE0, LIMIT_HBM_GB, GIB,
          "CUDA graph memory pool with PP = 1, GiB (added to the peak when graphs are on)"),
    K_FLT("cluster.host.graph_pool_pp_gib", cluster.host.graph_pool_pp_bytes, "10", RG_GE0, LIMIT_HBM_GB, GIB,
          "CUDA graph memory pool with PP > 1, GiB"),
    K_FLT("cluster.compute.gemm_tile_m", cluster.compute.gemm_tile_m, "0", RG_GE0, LIMIT_WIDTH, 1,
          "GEMM output tile rows (tile and wave quantization; 0 = off)"),
    K_FLT("cluster.compute.gemm_tile_n", cluster.compute.gemm_tile_n, "0", RG_GE0, LIMIT_WIDTH, 1,
          "GEMM output tile columns"),
    K_FLT("cluster.compute.gemm_k_overhead", cluster.compute.gemm_k_overhead, "0", RG_GE0, LIMIT_WIDTH, 1,
          "GEMM depth equivalent of a tile's prologue/epilogue (efficiency k/(k+this))"),
    K_FLT("cluster.compute.overlap_sm_share_nvlink", cluster.compute.overlap_sm_share_nvlink, "0", RG_FRAC, 1, 1,
          "share of SM throughput an overlapped NVLink collective takes from compute"),
    K_FLT("cluster.compute.overlap_sm_share_network", cluster.compute.overlap_sm_share_network, "0", RG_FRAC, 1, 1,
          "share of SM throughput an overlapped network collective takes from compute"),
    K_FLT("cluster.compute.attention_head_dim_half", cluster.compute.attention_head_dim_half, "0", RG_GE0, LIMIT_WIDTH, 1,
          "head-dimension scale of attention efficiency (relative to head dim 128)"),
    K_FLT("cluster.compute.attention_seq_half_tokens", cluster.compute.attention_seq_half_tokens, "0", RG_GE0, LIMIT_SEQ_TOKENS,
          1, "key length at which flash attention reaches half its plateau efficiency"),
    /* cluster: scale-up tier */
    K_ENUM("cluster.nvlink.kind", cluster.scaleup.kind, "\"nvlink\"", scaleup_names, scaleup_values,
          "nvlink | pcie: the scale-up tier (PCIe for systems without NVLink)"),
    K_FLT("cluster.nvlink.bw_gbytes_per_s", cluster.scaleup.bw_bytes_per_s, NULL, RG_POS, LIMIT_BW_GBPS, GB,
          "ring bus bandwidth per GPU in the domain, one direction, GB/s"),
    K_FLT("cluster.nvlink.a2a_bw_gbytes_per_s", cluster.scaleup.a2a_bw_bytes_per_s, NULL, RG_POS, LIMIT_BW_GBPS, GB, "all-to-all bus bandwidth per GPU in the domain, GB/s"),
    K_FLT("cluster.nvlink.nvls_bw_gbytes_per_s", cluster.scaleup.nvls_bw_bytes_per_s, NULL,
          RG_GE0, LIMIT_BW_GBPS, GB, "NVLink SHARP per-GPU rate, GB/s; 0 = no NVLS"),
    K_CURVE("cluster.nvlink", cluster.scaleup.efficiency, "scale-up", "collective size"),
    /* cluster: scale-out tier */
    K_ENUM("cluster.scaleout.kind", cluster.scaleout.kind, "\"infiniband\"", fabric_names, fabric_values,
          "infiniband | roce | ethernet"),
    K_INT("cluster.scaleout.nics_per_node", cluster.scaleout.nics_per_node, NULL, RG_GE1, LIMIT_NICS_PER_NODE,
          "compute-fabric NICs (rails) per node"),
    K_FLT("cluster.scaleout.nic_bw_gbytes_per_s", cluster.scaleout.nic_bw_bytes_per_s, NULL,
          RG_POS, LIMIT_BW_GBPS, GB, "achievable bandwidth per NIC, one direction, GB/s"),
    K_FLT("cluster.scaleout.a2a_efficiency", cluster.scaleout.a2a_efficiency, NULL, RG_UNIT, 1, 1,
          "all-to-all across domains: achieved share of the NIC bandwidth"),
    K_INT("cluster.scaleout.su_nodes", cluster.scaleout.su_nodes, NULL, RG_GE0, LIMIT_GPUS,
          "nodes per scalable unit (one leaf switch per rail); 0 = one unit"),
    K_FLT("cluster.scaleout.spine_oversubscription", cluster.scaleout.spine_oversubscription,
          NULL, RG_GE1, LIMIT_FACTOR, 1, "leaf downlink:uplink bandwidth ratio (1 = non-blocking)"),
    K_FLT("cluster.scaleout.hier_serial_fraction", cluster.scaleout.hier_serial_fraction, NULL,
          RG_FRAC, 1, 1, "two-tier algorithms: share of the shorter tier's time not overlapped"),
    K_CURVE("cluster.scaleout", cluster.scaleout.efficiency, "scale-out",
            "bytes per rank (all-to-all: per remote domain)"),
    /* cluster: NCCL's tuning model (lists are per protocol: LL, LL128, Simple) */
    K_FLTS("cluster.nccl.base_latency_us.ring", cluster.nccl.base.ring, 3, RG_GE0, LIMIT_LATENCY_US, 1e-6,
           "NCCL base latency of a ring call, us"),
    K_FLTS("cluster.nccl.base_latency_us.tree", cluster.nccl.base.tree, 3, RG_GE0, LIMIT_LATENCY_US, 1e-6,
           "NCCL base latency of a tree call, us"),
    K_FLTS("cluster.nccl.nvlink_latency_us.ring", cluster.nccl.nvlink.ring, 3, RG_GE0, LIMIT_LATENCY_US, 1e-6,
           "NCCL NVLink latency per ring step, us"),
    K_FLTS("cluster.nccl.nvlink_latency_us.tree", cluster.nccl.nvlink.tree, 3, RG_GE0, LIMIT_LATENCY_US, 1e-6,
           "NCCL NVLink latency per tree step, us"),
    K_FLT("cluster.nccl.nvlink_latency_us.nvls", cluster.nccl.nvlink.nvls, NULL, RG_GE0, LIMIT_LATENCY_US, 1e-6,
          "NCCL NVLink latency of NVLS (Simple), us"),
    K_FLT("cluster.nccl.nvlink_latency_us.nvls_tree", cluster.nccl.nvlink.nvls_tree, NULL, RG_GE0, LIMIT_LATENCY_US,
          1e-6, "NCCL NVLink latency of NVLS tree (Simple), us"),
    K_FLTS("cluster.nccl.pcie_latency_us.ring", cluster.nccl.pcie.ring, 3, RG_GE0, LIMIT_LATENCY_US, 1e-6,
           "NCCL PCIe latency per ring step, us"),
    K_FLTS("cluster.nccl.pcie_latency_us.tree", cluster.nccl.pcie.tree, 3, RG_GE0, LIMIT_LATENCY_US, 1e-6,
           "NCCL PCIe latency per tree step, us"),
    K_FLTS("cluster.nccl.net_latency_us.ring", cluster.nccl.net.ring, 3, RG_GE0, LIMIT_LATENCY_US, 1e-6,
           "NCCL network latency per ring step, us"),
    K_FLTS("cluster.nccl.net_latency_us.tree", cluster.nccl.net.tree, 3, RG_GE0, LIMIT_LATENCY_US, 1e-6,
           "NCCL network latency per tree level, us"),
    K_FLT("cluster.nccl.net_latency_us.nvls", cluster.nccl.net.nvls, NULL, RG_GE0, LIMIT_LATENCY_US, 1e-6,
          "NCCL network latency of NVLS, us"),
    K_FLT("cluster.nccl.net_latency_us.nvls_tree", cluster.nccl.net.nvls_tree, NULL, RG_GE0, LIMIT_LATENCY_US, 1e-6,
          "NCCL network latency per NVLS tree level, us"),
    K_FLT("cluster.nccl.net_overhead_us", cluster.nccl.net_overhead_s, NULL, RG_GE0, LIMIT_LATENCY_US, 1e-6,
          "NCCL net overhead per intra-domain step once a group spans domains, us"),
    K_FLT("cluster.nccl.net_overhead_simple_factor", cluster.nccl.net_overhead_simple_factor,
          NULL, RG_POS, LIMIT_FACTOR, 1, "net overhead multiplier for Simple"),
    K_FLTS("cluster.nccl.ll_max_bw_gbytes_per_s", cluster.nccl.ll_max_bw_bytes_per_s, 3, RG_POS, LIMIT_BW_GBPS, GB, "LL bus bandwidth cap for groups on 1, 2, >= 3 domains, GB/s"),
    K_FLTS("cluster.nccl.ring_bw_factor", cluster.nccl.ring_bw_factor, 3, RG_UNIT, 1, 1,
           "share of the ring bandwidth each protocol carries"),
    K_FLTS("cluster.nccl.tree_bw_factor", cluster.nccl.tree_bw_factor, 3, RG_UNIT, 1, 1,
           "share of the bandwidth a tree carries per protocol (LL128: across domains)"),
    K_FLT("cluster.nccl.tree_ll128_one_node_factor", cluster.nccl.tree_ll128_one_domain_factor,
          NULL, RG_UNIT, 1, 1, "tree LL128 share inside one domain"),
    K_FLT("cluster.nccl.ring_plateau_factor", cluster.nccl.ring_plateau_factor, NULL, RG_POS, LIMIT_FACTOR, 1,
          "latency factor of ring Simple all-reduce across domains"),
    K_BOOL("cluster.nccl.ll128", cluster.nccl.ll128, NULL, "LL128 protocol enabled"),
    /* sim */
    K_BOOL("sim.ideal_pipeline", sim.ideal_pipeline, "false",
           "zero communication, identical work per stage and chunk"),
    K_INT("sim.seed", sim.seed, "1", RG_ANY, 0, "seed for any randomness"),
    K_BOOL("sim.steady_extension", sim.steady_extension, "true",
           "derive a step's steady periods from two short simulations where the timeline is verified periodic "
           "(the same figures, faster); false simulates every microbatch"),
    K_ENUM("sim.pipeline_schedule", par.pipeline_schedule, "\"megatron\"", sched_name_strs, schedule_values,
           "megatron (1F1B or interleaved, as Megatron chooses) | 1f1b | interleaved | zb-h1 | zb-v | dualpipev "
           "(zero-bubble and DualPipeV: beyond Megatron)"),
    K_STR("sim.params", sim.params_file, "\"\"",
          "parameter file loaded as a preset (e.g. from parsim calibrate)"),
    K_SET("sim.nccl_algo", KT_STRING, "\"auto\"", set_algo,
          "auto | ring | tree | nvls | nvls_tree | hierarchical (forced where it can run)"),
    K_SET("sim.nccl_proto", KT_STRING, "\"auto\"", set_proto, "auto | ll | ll128 | simple"),
};

#define N_KEYS (sizeof keys / sizeof keys[0])

/* The key table by name, for key_lookup's binary search (built once). */
static const key_def *keys_sorted[N_KEYS];
static pthread_once_t keys_sorted_once = PTHREAD_ONCE_INIT;

static int key_def_cmp(const void *a, const void *b)
{
    const key_def *x = *(const key_def *const *)a, *y = *(const key_def *const *)b;
    const int d = strcmp(x->key, y->key);
    return d ? d : (x > y) - (x < y); /* a name twice: the first in the table first */
}

static void sort_keys(void)
{
    for (size_t k = 0; k < N_KEYS; k++)
        keys_sorted[k] = &keys[k];
    qsort(keys_sorted, N_KEYS, sizeof *keys_sorted, key_def_cmp);
}

/* The first entry of the key table named key, or NULL. */
static const key_def *key_lookup(const char *key)
{
    pthread_once(&keys_sorted_once, sort_keys);
    size_t lo = 0, hi = N_KEYS; /* the first with a name >= key is in [lo, hi] */
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (strcmp(keys_sorted[mid]->key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < N_KEYS && strcmp(keys_sorted[lo]->key, key) == 0 ? keys_sorted[lo] : NULL;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 127 || lb > 127)
        return (size_t)-1;
    size_t row[128];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* A known key the user probably meant: a near spelling, else the same last
 * name in another group (parallel.tensor_model_parallel_size), preferring
 * one in the same top-level group. */
static const char *closest_key(const char *key)
{
    const char *best = NULL;
    size_t best_d = 4; /* more than 3 edits is not a typo */
    for (size_t k = 0; k < N_KEYS; k++) {
        size_t d = edit_distance(key, keys[k].key);
        if (d < best_d) {
            best_d = d;
            best = keys[k].key;
        }
    }
    if (best)
        return best;
    const char *last = strrchr(key, '.');
    last = last ? last + 1 : key;
    const char *dot = strchr(key, '.');
    size_t group_len = dot ? (size_t)(dot - key) + 1 : 0;
    for (size_t k = 0; k < N_KEYS; k++) {
        const char *kl = strrchr(keys[k].key, '.');
        kl = kl ? kl + 1 : keys[k].key;
        if (strcmp(kl, last) != 0)
            continue;
        if (!best || (group_len && strncmp(keys[k].key, key, group_len) == 0))
            best = keys[k].key;
    }
    return best;
}

/* ------------------------------------------------------- typed access */

static double num(const cfg_value *v) { return v->kind == CV_INT ? (double)v->i : v->f; }

static const char *type_name(key_type t)
{
    switch (t) {
    case KT_INT: return "an integer";
    case KT_FLOAT: return "a number";
    case KT_BOOL: return "true or false";
    case KT_STRING: return "a string";
    case KT_INT_LIST: return "a list of integers";
    case KT_STR_LIST: return "a list of names";
    case KT_INT_OR_LIST: return "an integer or a list of integers";
    case KT_FLOAT_LIST: return "a list of numbers";
    }
    return "?";
}

static bool type_ok(key_type t, const cfg_value *v)
{
    switch (t) {
    case KT_INT: return v->kind == CV_INT;
    case KT_FLOAT: return v->kind == CV_INT || v->kind == CV_FLOAT;
    case KT_BOOL: return v->kind == CV_BOOL;
    case KT_STRING: return v->kind == CV_STRING || v->bare;
    case KT_INT_LIST: return v->kind == CV_LIST && (v->elem == CV_INT || v->elem == CV_LIST);
    case KT_FLOAT_LIST: return v->kind == CV_LIST && v->elem != CV_STRING;
    /* one name stands for a one-element list: model.recompute_modules=mlp */
    case KT_STR_LIST:
        return (v->kind == CV_LIST && (v->elem == CV_STRING || v->elem == CV_LIST)) ||
               v->kind == CV_STRING;
    case KT_INT_OR_LIST:
        return v->kind == CV_INT ||
               (v->kind == CV_LIST && (v->elem == CV_INT || v->elem == CV_LIST));
    }
    return false;
}

/* Keys whose values (or list elements) are numbers with a range. */
static bool numeric_key(const key_def *k)
{
    return k->type == KT_INT || k->type == KT_FLOAT || k->type == KT_INT_LIST ||
           k->type == KT_FLOAT_LIST || k->type == KT_INT_OR_LIST;
}

static double range_max(const key_def *k)
{
    return k->range == RG_UNIT || k->range == RG_FRAC ? 1.0 : k->max;
}

/* The key's range as --help-config and errors print it: "[1, 262144]",
 * "(0, 100000]", "any" (sim.seed); "" for keys that are not numbers. */
static void range_text(const key_def *k, char *buf, size_t len)
{
    if (!numeric_key(k) || k->range == RG_ANY) {
        snprintf(buf, len, "%s", numeric_key(k) ? "any" : "");
        return;
    }
    double hi = range_max(k);
    bool open = k->range == RG_POS || k->range == RG_UNIT;
    /* bounds are whole numbers (or 1) below 2^53: no exponent needed */
    snprintf(buf, len, "%s%s, %.0f]", open ? "(" : "[", k->range == RG_GE1 ? "1" : "0", hi);
}

bool cfg_key_range(const char *key, double *lo, bool *lo_open, double *hi)
{
    const key_def *k = key_lookup(key);
    if (!k || !numeric_key(k) || k->range == RG_ANY)
        return false;
    *lo = k->range == RG_GE1 ? 1.0 : 0.0;
    *lo_open = k->range == RG_POS || k->range == RG_UNIT;
    *hi = range_max(k);
    return true;
}

/* x (in config units) is inside the key's range and finite in SI units:
 * the upper bound is what keeps 1e308 GB from becoming inf bytes, and the
 * comparison itself refuses libconfig's inf for 1e400. */
static bool in_range(const key_def *k, double x)
{
    double scale = k->scale != 0 ? k->scale : 1.0;
    if (!isfinite(x) || !isfinite(x * scale))
        return false;
    switch (k->range) {
    case RG_ANY: return true;
    case RG_GE0: case RG_FRAC: if (!(x >= 0)) return false; break;
    case RG_GE1: if (!(x >= 1)) return false; break;
    case RG_POS: case RG_UNIT: if (!(x > 0)) return false; break;
    }
    return x <= range_max(k);
}

static double list_num(const cfg_value *v, int j)
{
    return v->elem == CV_FLOAT ? v->flts[j] : (double)v->ints[j];
}

/* A number, or each element of a list of numbers, against the key's
 * range.  The 0/1 lists of an int-or-list key are checked by its setter. */
static int check_range(const cfg_t *c, const key_def *k, const cfg_value *v, sim_err *err)
{
    if (!numeric_key(k))
        return SIM_OK;
    /* the range written out only for the message: most values are in it */
    char want[64];
    if (v->kind == CV_INT || v->kind == CV_FLOAT) {
        if (in_range(k, num(v)))
            return SIM_OK;
        char got[64];
        fmt_value(v, got, sizeof got);
        range_text(k, want, sizeof want);
        return cfg_err_key(c, err, SIM_EINVAL, k->key, "must be in %s (got %s)", want, got);
    }
    if (v->kind != CV_LIST || k->type == KT_INT_OR_LIST || (v->elem != CV_INT && v->elem != CV_FLOAT))
        return SIM_OK;
    for (int j = 0; j < v->n; j++)
        if (!in_range(k, list_num(v, j))) {
            range_text(k, want, sizeof want);
            return cfg_err_key(c, err, SIM_EINVAL, k->key, "element %d must be in %s (got %.15g)",
                               j, want, list_num(v, j));
        }
    return SIM_OK;
}

/* Index of s in names[], or an error listing them. */
static int pick_name(const cfg_t *c, const key_def *k, const char *s, const char *const *names,
                     int n, int *out, sim_err *err)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return SIM_OK;
        }
    char list[256];
    size_t w = 0;
    list[0] = '\0';
    for (int i = 0; i < n && w < sizeof list; i++)
        w += (size_t)snprintf(list + w, sizeof list - w, "%s%s", i ? ", " : "", names[i]);
    return cfg_err_key(c, err, SIM_EINVAL, k->key, "unknown value \"%s\" (expected one of: %s)",
                       s, list);
}

/* Stores an int-valued name key into its field: an enum or a bool. */
static int store_int(const key_def *k, int value, run_inputs *in)
{
    char *field = (char *)in + k->offset;
    if (k->size == sizeof(int)) {
        memcpy(field, &value, sizeof value);
        return SIM_OK;
    }
    if (k->size == sizeof(bool)) {
        bool b = value != 0;
        memcpy(field, &b, sizeof b);
        return SIM_OK;
    }
    return SIM_ESIM;
}

static int set_enum(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in, sim_err *err)
{
    int i = 0;
    int rc = pick_name(c, k, v->s, k->names, k->n_names, &i, err);
    if (rc)
        return rc;
    if (store_int(k, k->values[i], in) != SIM_OK)
        return sim_err_set(err, SIM_ESIM, "%s: key table: field of unexpected size", k->key);
    return SIM_OK;
}

/* One name stands for a one-element list (model.recompute_modules=mlp). */
static int set_flags(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in, sim_err *err)
{
    int mask = 0;
    int n = v->kind == CV_STRING ? 1 : v->n;
    for (int j = 0; j < n; j++) {
        int i = 0;
        int rc = pick_name(c, k, v->kind == CV_STRING ? v->s : v->strs[j], k->names, k->n_names, &i, err);
        if (rc)
            return rc;
        mask |= k->values[i];
    }
    if (store_int(k, mask, in) != SIM_OK)
        return sim_err_set(err, SIM_ESIM, "%s: key table: field of unexpected size", k->key);
    return SIM_OK;
}

static int set_pos_emb(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                       sim_err *err)
{
    /* Megatron Core's choices; only learned_absolute adds parameters. */
    static const char *const names[] = { "learned_absolute", "rope", "yarn", "mrope",
                                         "alibi", "relative", "none" };
    int i = 0;
    int rc = pick_name(c, k, v->s, names, (int)(sizeof names / sizeof names[0]), &i, err);
    if (!rc)
        snprintf(in->model.position_embedding_type, sizeof in->model.position_embedding_type,
                 "%s", names[i]);
    return rc;
}

/* cluster.fitted is loaded with the presets (load_presets); nothing to
 * store. */
static int set_fitted(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                      sim_err *err)
{
    (void)c, (void)k, (void)v, (void)in, (void)err;
    return SIM_OK;
}

/* A kernel or measured table (kind) read from path into out, from c's
 * filecache where it has it (the tables are plain values: copied). */
static int table_load(const cfg_t *c, filecache_kind kind, const char *path, void *out, sim_err *err)
{
    const size_t size = kind == FILECACHE_KERNELS ? sizeof(kernel_table) : sizeof(microbench_table);
    const void *kept = c->files ? filecache_get(c->files, kind, path) : NULL;
    if (kept) {
        memcpy(out, kept, size);
        return SIM_OK;
    }
    const int rc = kind == FILECACHE_KERNELS ? kerneltable_load(path, out, err) : microbench_load(path, out, err);
    void *copy = rc == SIM_OK && c->files ? malloc(size) : NULL;
    if (copy) {
        memcpy(copy, out, size);
        filecache_put(c->files, kind, path, copy, free);
    }
    return rc;
}

/* A relative table path is taken relative to the file that names it (a
 * topology), then to the working directory, as sim.params. */
static int set_microbench(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in, sim_err *err)
{
    memset(&in->cluster.compute.bench, 0, sizeof in->cluster.compute.bench);
    if (!v->s[0])
        return SIM_OK;
    char path[1024], tried[2100];
    path_near(find(c, k->key), v->s, path, sizeof path, tried, sizeof tried);
    sim_err inner;
    sim_err_clear(&inner);
    if (table_load(c, FILECACHE_MICROBENCH, path, &in->cluster.compute.bench, &inner) != SIM_OK)
        return key_err_of(c, err, SIM_EINVAL, k->key, &inner);
    return SIM_OK;
}

/* Late: the analytic efficiencies are known by then, so the compute model
 * is whole or the configuration is refused. */
static int set_kernels(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in, sim_err *err)
{
    compute_params *p = &in->cluster.compute;
    memset(&p->kernels, 0, sizeof p->kernels);
    if (v->s[0]) {
        char path[1024], tried[2100];
        path_near(find(c, k->key), v->s, path, sizeof path, tried, sizeof tried);
        sim_err inner;
        sim_err_clear(&inner);
        if (table_load(c, FILECACHE_KERNELS, path, &p->kernels, &inner) != SIM_OK)
            return key_err_of(c, err, SIM_EINVAL, k->key, &inner);
    }
    bool gemms = false, attn = p->kernels.n_curves > 0;
    for (int i = 0; i < KT_PRECISIONS; i++)
        gemms = gemms || p->kernels.n_gemm[i] > 0;
    if ((!gemms && !(p->gemm_efficiency > 0)) || (!attn && !(p->attention_fwd_efficiency > 0 &&
                                                             p->attention_bwd_efficiency > 0)))
        return cfg_err_key(c, err, SIM_EINVAL, k->key,
                           "no kernel table with %s: name one (kernels/<gpu>.cfg) or set "
                           "cluster.compute.%s", !gemms ? "GEMM figures" : "attention curves",
                           !gemms ? "gemm_efficiency" : "attention_fwd_efficiency and attention_bwd_efficiency");
    return SIM_OK;
}

static int set_algo(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                    sim_err *err)
{
    if (!net_algo_from_name(v->s, &in->cluster.force_algo))
        return cfg_err_key(c, err, SIM_EINVAL, k->key,
                           "unknown value \"%s\" (expected one of: auto, ring, tree, nvls, "
                           "nvls_tree, hierarchical)", v->s);
    return SIM_OK;
}

static int set_proto(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                     sim_err *err)
{
    if (!net_proto_from_name(v->s, &in->cluster.force_proto))
        return cfg_err_key(c, err, SIM_EINVAL, k->key,
                           "unknown value \"%s\" (expected one of: auto, ll, ll128, simple)",
                           v->s);
    return SIM_OK;
}

static int set_floats(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                      sim_err *err)
{
    if ((size_t)v->n != k->size)
        return cfg_err_key(c, err, SIM_EINVAL, k->key,
                           "expected %zu numbers (one per protocol LL, LL128, Simple, or per "
                           "1, 2, >= 3 domains), got %d", k->size, v->n);
    double *out = (double *)(void *)((char *)in + k->offset);
    for (int j = 0; j < v->n; j++)
        out[j] = list_num(v, j) * (k->scale != 0 ? k->scale : 1.0);
    return SIM_OK;
}

static int set_curve_sizes(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                           sim_err *err)
{
    net_curve *cv = (net_curve *)(void *)((char *)in + k->offset);
    if (v->n > NET_CURVE_MAX)
        return cfg_err_key(c, err, SIM_EINVAL, k->key, "at most %d points (got %d)",
                           NET_CURVE_MAX, v->n);
    for (int j = 0; j < v->n; j++) {
        if (j > 0 && v->ints[j] <= v->ints[j - 1])
            return cfg_err_key(c, err, SIM_EINVAL, k->key,
                               "sizes must be increasing (element %d is %" PRId64 ")", j, v->ints[j]);
        cv->log2_bytes[j] = log2((double)v->ints[j] * 1024.0);
    }
    cv->n = v->n;
    return SIM_OK;
}

/* Runs after the sizes (late key). */
static int set_curve_eff(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                         sim_err *err)
{
    net_curve *cv = (net_curve *)(void *)((char *)in + k->offset);
    if (v->n != cv->n)
        return cfg_err_key(c, err, SIM_EINVAL, k->key,
                           "%d efficiencies for %d sizes (the lists pair up)", v->n, cv->n);
    for (int j = 0; j < v->n; j++)
        cv->efficiency[j] = list_num(v, j);
    return SIM_OK;
}

static int set_hier_cp(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                       sim_err *err)
{
    if (v->n > MAX_HIER_CP)
        return cfg_err_key(c, err, SIM_EINVAL, k->key, "at most %d levels (got %d)", MAX_HIER_CP,
                           v->n);
    for (int j = 0; j < v->n; j++)
        in->par.hierarchical_cp_sizes[j] = v->ints[j];
    in->par.n_hierarchical_cp_sizes = v->n;
    return SIM_OK;
}

/* Megatron-FSDP sets the distributed optimizer, and its strategies force
 * the overlaps (megatron-features.md C.1: "The distributed optimizer is
 * set automatically"; optim_grads forces overlap_grad_reduce,
 * optim_grads_params also overlap_param_gather).  Late: it reads the
 * strategy and the graph implementation. */
static int set_megatron_fsdp(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in, sim_err *err)
{
    (void)k;
    ddp_spec *d = &in->ddp;
    d->use_megatron_fsdp = v->b;
    if (!v->b)
        return SIM_OK;
    /* C.3 / C.1 interactions: Bridge's FSDP recipes turn TE graphs off. */
    if (in->graphs.impl == GRAPH_TE)
        return cfg_err_key(c, err, SIM_EINVAL, "model.cuda_graph_impl",
                           "transformer_engine graphs with ddp.use_megatron_fsdp: Transformer Engine's graph "
                           "capture rejects the module hooks Megatron-FSDP registers");
    d->use_distributed_optimizer = true;
    if (d->sharding >= DP_SHARD_OPTIM_GRADS)
        d->overlap_grad_reduce = true;
    if (d->sharding == DP_SHARD_OPTIM_GRADS_PARAMS)
        d->overlap_param_gather = true;
    return SIM_OK;
}

static int set_precision(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                         sim_err *err)
{
    if (!precision_from_name(v->s, &in->par.precision))
        return cfg_err_key(c, err, SIM_EINVAL, k->key,
                           "unknown precision \"%s\" (expected bf16, fp16, fp8, fp8-cs, "
                           "fp8-delayed, mxfp8, fp8-blockwise, nvfp4 or a Megatron Bridge recipe "
                           "name such as bf16_with_fp8_current_scaling_mixed)", v->s);
    return SIM_OK;
}

/* Runs after num_layers and num_moe_experts are set (late key). */
/* A per-layer 0/1 list (moe_layer_freq, window_attn_skip_freq): one entry
 * per layer. */
static int layer_list(const cfg_t *c, const key_def *k, const cfg_value *v, int64_t L, uint8_t *pattern,
                      sim_err *err)
{
    if (v->n != L)
        return cfg_err_key(c, err, SIM_EINVAL, k->key,
                           "list has %d entries but model.num_layers is %" PRId64 " (one 0/1 entry per layer)",
                           v->n, L);
    for (int i = 0; i < v->n; i++) {
        if (v->ints[i] != 0 && v->ints[i] != 1)
            return cfg_err_key(c, err, SIM_EINVAL, k->key, "list entries must be 0 or 1 (entry %d is %" PRId64 ")",
                               i, v->ints[i]);
        pattern[i] = (uint8_t)v->ints[i];
    }
    return SIM_OK;
}

/* model.hybrid_override_pattern (deprecated) and hybrid_layer_pattern,
 * applied before num_layers: the pattern gives the layers and their number
 * (Megatron: arguments.py:743-793), so num_layers is then not required;
 * an explicit one must agree (check_hybrid). */
static int set_hybrid_pattern(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in, sim_err *err)
{
    model_spec *m = &in->model;
    if (v->s[0] == '\0')
        return SIM_OK;
    if (m->hybrid)
        return cfg_err_key(c, err, SIM_EINVAL, k->key,
                           "model.hybrid_override_pattern is already set: give the pattern once "
                           "(hybrid_layer_pattern)");
    char msg[160];
    if (model_hybrid_parse(m, v->s, msg, sizeof msg) != 0)
        return cfg_err_key(c, err, SIM_EINVAL, k->key, "%s", msg);
    return SIM_OK;
}

/* model.mtp_hybrid_override_pattern: one MTP depth's symbols (Megatron
 * converts it with mtp_num_layers into main/mtp/... form, arguments.py:780-785;
 * check_hybrid does the same). */
static int set_mtp_pattern(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in, sim_err *err)
{
    if (v->s[0] == '\0')
        return SIM_OK;
    char msg[160];
    if (model_mtp_pattern_parse(&in->model, v->s, msg, sizeof msg) != 0)
        return cfg_err_key(c, err, SIM_EINVAL, k->key, "%s", msg);
    return SIM_OK;
}

static int set_moe_layer_freq(const cfg_t *c, const key_def *k, const cfg_value *v,
                              run_inputs *in, sim_err *err)
{
    model_spec *m = &in->model;
    int64_t L = m->num_layers;
    if (m->hybrid)
        return SIM_OK; /* the pattern places the MoE layers (E) */
    if (v->kind == CV_INT) {
        for (int64_t i = 0; i < L; i++)
            m->layers[i].mlp = i % v->i == 0 ? MODEL_MLP_MOE : MODEL_MLP_DENSE;
    } else {
        uint8_t moe[MODEL_MAX_LAYERS];
        int rc = layer_list(c, k, v, L, moe, err);
        if (rc)
            return rc;
        for (int64_t i = 0; i < L; i++)
            m->layers[i].mlp = moe[i] ? MODEL_MLP_MOE : MODEL_MLP_DENSE;
    }
    /* The pattern describes where experts go; a dense model has none. */
    if (m->num_moe_experts == 0)
        for (int64_t i = 0; i < MODEL_MAX_LAYERS; i++)
            m->layers[i].mlp = MODEL_MLP_DENSE;
    return SIM_OK;
}

static int set_window_size(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in, sim_err *err)
{
    in->model.window_size = 0;
    if (v->n == 0)
        return SIM_OK;
    if (v->n > 2)
        return cfg_err_key(c, err, SIM_EINVAL, k->key, "expected [left, right] (got %d entries)", v->n);
    if (v->ints[0] < 1)
        return cfg_err_key(c, err, SIM_EINVAL, k->key, "the left window must be >= 1 (got %" PRId64 ")",
                           v->ints[0]);
    if (v->n == 2 && v->ints[1] != 0)
        return cfg_err_key(c, err, SIM_EINVAL, k->key,
                           "a causal decoder attends to no later keys: the right window must be 0 (got %" PRId64
                           ")", v->ints[1]);
    in->model.window_size = v->ints[0];
    return SIM_OK;
}

/* Megatron's is_layer_window_attention: with an int N, 1-based layer n is
 * windowed iff n % N != 0; with a list, iff its entry is 1. */
static int set_window_skip(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in, sim_err *err)
{
    model_spec *m = &in->model;
    int64_t L = m->num_layers;
    uint8_t win[MODEL_MAX_LAYERS] = { 0 };
    if (v->kind == CV_INT) {
        for (int64_t i = 0; i < L && i < MODEL_MAX_LAYERS; i++)
            win[i] = v->i == 0 || (i + 1) % v->i != 0;
    } else {
        int rc = layer_list(c, k, v, L, win, err);
        if (rc)
            return rc;
    }
    for (int64_t i = 0; i < MODEL_MAX_LAYERS; i++)
        m->layers[i].window = m->window_size == 0 ? 0 : win[i];
    return SIM_OK;
}

static int apply_key(const cfg_t *c, const key_def *k, const cfg_value *v, run_inputs *in,
                     sim_err *err)
{
    if (!type_ok(k->type, v)) {
        char got[96], range[64], in_range_of[72] = "";
        fmt_value(v, got, sizeof got);
        range_text(k, range, sizeof range);
        if (numeric_key(k) && k->range != RG_ANY)
            snprintf(in_range_of, sizeof in_range_of, " in %s", range);
        return cfg_err_key(c, err, SIM_EINVAL, k->key, "expected %s%s, got %s (%s)",
                           type_name(k->type), in_range_of, kind_name(v->kind), got);
    }
    int rc = check_range(c, k, v, err);
    if (rc)
        return rc;
    if (k->set)
        return k->set(c, k, v, in, err);
    char *field = (char *)in + k->offset;
    switch (k->type) {
    case KT_INT:
        *(int64_t *)(void *)field = v->i;
        break;
    case KT_FLOAT:
        *(double *)(void *)field = num(v) * (k->scale != 0 ? k->scale : 1.0);
        break;
    case KT_BOOL:
        *(bool *)(void *)field = v->b;
        break;
    case KT_STRING:
        if (strlen(v->s) >= k->size)
            return cfg_err_key(c, err, SIM_EINVAL, k->key, "too long (at most %zu characters)",
                               k->size - 1);
        memcpy(field, v->s, strlen(v->s) + 1);
        break;
    default:
        return sim_err_set(err, SIM_ESIM, "%s: list key without a setter", k->key);
    }
    return SIM_OK;
}

/* ---------------------------------------------------------------- presets */

static bool readable(const char *path) { return access(path, R_OK) == 0; }

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Describes the presets in dir for an error about the name `want`: the
 * nearest name if one is close, then the first few names (sorted). */
static void list_presets(const char *dir, const char *want, char *buf, size_t len)
{
    enum { MAX_NAMES = 512, MAX_SHOWN = 10 };
    snprintf(buf, len, "no presets there");
    DIR *d = opendir(dir);
    if (!d)
        return;
    char **names = calloc(MAX_NAMES, sizeof *names);
    int n = 0;
    struct dirent *ent;
    while (names && (ent = readdir(d)) && n < MAX_NAMES) {
        size_t l = strlen(ent->d_name);
        if (l > 4 && strcmp(ent->d_name + l - 4, ".cfg") == 0)
            if ((names[n] = strndup(ent->d_name, l - 4)))
                n++;
    }
    closedir(d);
    if (n > 0) {
        qsort(names, (size_t)n, sizeof names[0], cmp_str);
        const char *near = NULL;
        size_t near_d = 4; /* more than 3 edits is not a typo */
        for (int i = 0; i < n; i++) {
            size_t dist = edit_distance(want, names[i]);
            if (dist < near_d) {
                near_d = dist;
                near = names[i];
            }
        }
        size_t w = 0;
        if (near)
            w += (size_t)snprintf(buf, len, "did you mean %s? ", near);
        if (w < len)
            w += (size_t)snprintf(buf + w, len - w, "%d there: ", n);
        for (int i = 0; i < n && i < MAX_SHOWN && w < len; i++)
            w += (size_t)snprintf(buf + w, len - w, "%s%s", i ? ", " : "", names[i]);
        if (n > MAX_SHOWN && w < len)
            snprintf(buf + w, len - w, ", ...");
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

typedef struct preset_key {
    const char *key;
    const char *subdir;  /* under data_dir; NULL = key is a path */
    const char *what;
    bool optional;       /* a file that is not there loads nothing */
} preset_key;

/* Loaded in this order, later winning among presets: the fitted file of
 * a topology above the topology, a parameter file above both. */
static const preset_key preset_keys[] = {
    { "model.name", "models", "model", false },
    { "cluster.topology", "topologies", "topology", false },
    { "cluster.fitted", NULL, "fitted parameter file", true },
    { "sim.params", NULL, "parameter file", false },
};

/* The file a key names: a relative name is taken relative to the file that
 * set the key, then to the working directory.  Fills tried with where it
 * looked. */
static bool path_near(const cfg_entry *e, const char *name, char *path, size_t len, char *tried, size_t tlen)
{
    tried[0] = '\0';
    const char *slash = e ? strrchr(e->file, '/') : NULL;
    if (name[0] != '/' && slash && strcmp(e->file, ORIGIN_CMDLINE) != 0) {
        snprintf(path, len, "%.*s/%s", (int)(slash - e->file), e->file, name);
        snprintf(tried, tlen, "%s, ", path);
        if (readable(path))
            return true;
    }
    snprintf(path, len, "%s", name);
    size_t tl = strlen(tried);
    snprintf(tried + tl, tlen - tl, "%s", path);
    return readable(path);
}

/* A preset is named, not located: a plain file name in its folder of the
 * data dir, so that no name reaches outside it ("../x", "/etc/x"). */
static bool preset_name_ok(const char *name)
{
    if (name[0] == '.')
        return false;
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-')
            return false;
    return true;
}

/* Finds the file a preset key names; fills tried with where it looked. */
static bool preset_path(const cfg_t *c, const preset_key *pk, const cfg_entry *e,
                        char *path, size_t len, char *tried, size_t tlen)
{
    const char *name = e->v.s;
    if (pk->subdir) {
        snprintf(path, len, "%s/%s/%s.cfg", c->data_dir, pk->subdir, name);
        snprintf(tried, tlen, "%s", path);
        return readable(path);
    }
    return path_near(e, name, path, len, tried, tlen);
}

static int load_presets(cfg_t *c, sim_err *err)
{
    enum { NP = sizeof preset_keys / sizeof preset_keys[0] };
    bool loaded[NP] = { false };
    /* A preset may itself name another (a params file naming a topology);
     * repeat until nothing new loads.  Each key loads at most once. */
    for (bool again = true; again;) {
        again = false;
        for (size_t p = 0; p < NP; p++) {
            const preset_key *pk = &preset_keys[p];
            const cfg_entry *e = find(c, pk->key);
            if (loaded[p] || !e)
                continue;
            if (!type_ok(KT_STRING, &e->v))
                return cfg_err_key(c, err, SIM_EINVAL, pk->key, "expected a %s name, got %s",
                                   pk->what, kind_name(e->v.kind));
            loaded[p] = true;
            if (!e->v.s[0])
                continue;
            /* PARSIM_FITTED=none: every preset on its physical values, as
             * cluster.fitted="" does for one run (tests, fits from scratch) */
            const char *fitted_env = pk->optional ? getenv("PARSIM_FITTED") : NULL;
            if (fitted_env && !strcmp(fitted_env, "none"))
                continue;
            if (pk->subdir && !preset_name_ok(e->v.s))
                return cfg_err_key(c, err, SIM_EINVAL, pk->key,
                                   "\"%s\" is not a %s preset name (letters, digits, '.', '_', '-', "
                                   "not starting with '.'; a file of your own goes as the config file "
                                   "argument)", e->v.s, pk->what);
            char path[1024], tried[2100];
            if (pk->optional) {
                /* only beside the file that names it: a stray file of the
                 * same name in the working directory is not the fit */
                const char *slash = strrchr(e->file, '/');
                if (e->v.s[0] == '/' || !slash)
                    snprintf(path, sizeof path, "%s", e->v.s);
                else
                    snprintf(path, sizeof path, "%.*s/%s", (int)(slash - e->file), e->file,
                             e->v.s);
                if (access(path, F_OK) != 0)
                    continue;
            } else if (!preset_path(c, pk, e, path, sizeof path, tried, sizeof tried)) {
                if (!pk->subdir)
                    return cfg_err_key(c, err, SIM_EINVAL, pk->key,
                                       "cannot open %s \"%s\" (looked for %s)", pk->what,
                                       e->v.s, tried);
                char dir[1024], avail[1024];
                snprintf(dir, sizeof dir, "%s/%s", c->data_dir, pk->subdir);
                list_presets(dir, e->v.s, avail, sizeof avail);
                return cfg_err_key(c, err, SIM_EINVAL, pk->key,
                                   "unknown %s preset \"%s\" (looked for %s; %s)", pk->what,
                                   e->v.s, tried, avail);
            }
            int rc = load_file(c, path, CFG_PRIO_PRESET, true, err);
            /* a file that cannot be read at all: say which key named it */
            if (rc && err && err->line == 0 && strcmp(err->file, path) == 0)
                return key_err_of(c, err, rc, pk->key, err);
            if (rc)
                return rc;
            again = true;
        }
    }
    return SIM_OK;
}

/* --------------------------------------------------------------- resolve */

static int check_known_keys(const cfg_t *c, sim_err *err)
{
    for (size_t k = 0; k < c->n; k++) {
        const cfg_entry *e = &c->e[k];
        if (key_lookup(e->key))
            continue;
        const char *near = closest_key(e->key);
        if (near)
            return sim_err_set_at(err, SIM_EINVAL, e->file, e->line, e->key,
                                  "unknown key (did you mean %s?)", near);
        return sim_err_set_at(err, SIM_EINVAL, e->file, e->line, e->key,
                              "unknown key (parsim --help-config lists them)");
    }
    return SIM_OK;
}

/* Megatron's CUDA graph rules (transformer_config.py; megatron-features.md
 * §C.3).  The scope list may come by either name. */
static int check_graphs(const cfg_t *c, run_inputs *in, sim_err *err)
{
    graph_spec *g = &in->graphs;
    bool by_scope = !find(c, "model.cuda_graph_modules") && find(c, "model.cuda_graph_scope");
    const char *mods = by_scope ? "model.cuda_graph_scope" : "model.cuda_graph_modules";
    if (by_scope)
        g->modules = g->scope;
    if (g->enable_local && !find(c, "model.cuda_graph_impl"))
        g->impl = GRAPH_LOCAL;
    if (g->modules & GRAPH_MOD_FULL_ITERATION) {
        if (g->modules != GRAPH_MOD_FULL_ITERATION)
            return cfg_err_key(c, err, SIM_EINVAL, mods, "full_iteration graphs the whole step: it stands alone");
        if (g->impl == GRAPH_TE)
            return cfg_err_key(c, err, SIM_EINVAL, mods,
                               "full_iteration goes with cuda_graph_impl local or full_iteration, not "
                               "transformer_engine");
        if (g->impl == GRAPH_LOCAL)
            g->impl = GRAPH_FULL_ITERATION; /* Megatron Bridge's legacy spelling */
        g->modules = 0;
    }
    /* megatron-features.md §C.3: CUDA graphs are incompatible with CPU
     * offloading (the hooks copy tensors a graph would capture). */
    if (g->impl != GRAPH_NONE && in->par.cpu_offloading)
        return cfg_err_key(c, err, SIM_EINVAL, "model.cpu_offloading", "cannot go with CUDA graphs (model.cuda_graph_impl %s)",
                           graph_impl_names[g->impl]);
    if (g->impl == GRAPH_NONE || g->impl == GRAPH_FULL_ITERATION)
        return SIM_OK;
    if (g->impl == GRAPH_TE && in->par.recompute_granularity == RECOMPUTE_FULL)
        return cfg_err_key(c, err, SIM_EINVAL, "model.cuda_graph_impl",
                           "transformer_engine graphs cannot do full recompute (model.recompute_granularity)");
    if ((g->modules & GRAPH_MOD_MOE_PREPROCESS) && !(g->modules & GRAPH_MOD_MOE_ROUTER))
        return cfg_err_key(c, err, SIM_EINVAL, mods, "moe_preprocess requires moe_router");
    if ((g->modules & GRAPH_MOD_MOE) && !in->par.moe_pad_to_capacity)
        return cfg_err_key(c, err, SIM_EINVAL, mods,
                           "moe is graphed only with drop-and-pad experts (static shapes): set "
                           "model.moe_expert_capacity_factor and model.moe_pad_expert_input_to_capacity");
    /* transformer_config.py: the EP overlap splits the layer into nodes;
     * a graph of the moe or mlp scope (or of the whole layer) would hold
     * them in one. */
    if (g->impl == GRAPH_TE && in->par.overlap_moe_ep_comm &&
        (g->modules == 0 || (g->modules & (GRAPH_MOD_MOE | GRAPH_MOD_MLP))))
        return cfg_err_key(c, err, SIM_EINVAL, mods,
                           "transformer_engine graphs of the %s cannot go with "
                           "model.overlap_moe_expert_parallel_comm",
                           g->modules == 0 ? "whole layer" : (g->modules & GRAPH_MOD_MOE) ? "moe scope" : "mlp scope");
    return SIM_OK;
}

/* use_mamba_mem_eff_path = false changes nothing without Mamba layers:
 * refused rather than accepted for nothing. */
static int no_mamba_path(const cfg_t *c, const model_spec *m, sim_err *err)
{
    if (m->mamba_mem_eff_path)
        return SIM_OK;
    return cfg_err_key(c, err, SIM_EINVAL, "model.use_mamba_mem_eff_path",
                       "false selects the Mamba mixer's unfused path, but the model has no Mamba layer "
                       "(M in model.hybrid_layer_pattern)");
}

/* Rules between model keys that the key table cannot express alone. */
/* Hybrid MTP (megatron-features.md B.1): the '/' parts of the pattern set
 * the depth, an explicit mtp_num_layers must agree (0 drops them); the
 * legacy pattern repeats mtp_num_layers times; MTP without either is
 * refused, as is the legacy key without a hybrid pattern. */
static int check_hybrid_mtp(const cfg_t *c, model_spec *m, sim_err *err)
{
    const cfg_entry *given = find(c, "model.mtp_num_layers");
    if (m->mtp_pattern_depth > 0) {
        if (m->mtp_legacy_pattern)
            return cfg_err_key(c, err, SIM_EINVAL, "model.mtp_hybrid_override_pattern",
                               "model.hybrid_layer_pattern already has MTP parts ('/'): give MTP once");
        if (given && m->mtp_num_layers != 0 && m->mtp_num_layers != m->mtp_pattern_depth)
            return cfg_err_key(c, err, SIM_EINVAL, "model.mtp_num_layers",
                               "is %" PRId64 " but model.hybrid_layer_pattern has %d MTP parts (the pattern sets "
                               "it: leave mtp_num_layers out, or 0 for none)", m->mtp_num_layers,
                               (int)m->mtp_pattern_depth);
        if (!given)
            m->mtp_num_layers = m->mtp_pattern_depth;
    } else if (m->mtp_num_layers > 0 && !m->mtp_legacy_pattern) {
        return cfg_err_key(c, err, SIM_EINVAL, "model.mtp_num_layers",
                           "a hybrid model's MTP layers need their symbols: '/' parts in "
                           "model.hybrid_layer_pattern or model.mtp_hybrid_override_pattern (got %" PRId64 ")",
                           m->mtp_num_layers);
    }
    if (m->mtp_num_layers == 0)
        m->mtp_layers_per_depth = 0;
    return SIM_OK;
}

/* Hybrid models: E layers need experts; the Mamba-2 shape rules of
 * megatron/core/ssm/mamba_mixer.py:239-274 that do not involve TP. */
static int check_hybrid(const cfg_t *c, model_spec *m, sim_err *err)
{
    if (!m->hybrid)
        return no_mamba_path(c, m, err);
    int64_t n = 0;
    while (n < MODEL_MAX_LAYERS && (m->layers[n].mixer != MODEL_MIXER_NONE || m->layers[n].mlp != MODEL_MLP_NONE))
        n++;
    if (m->num_layers != n)
        return cfg_err_key(c, err, SIM_EINVAL, "model.num_layers",
                           "is %" PRId64 " but model.hybrid_layer_pattern has %" PRId64
                           " layers (the pattern sets it: leave num_layers out)", m->num_layers, n);
    for (int64_t i = 0; i < m->num_layers; i++)
        if (m->layers[i].mlp == MODEL_MLP_MOE && m->num_moe_experts == 0)
            return cfg_err_key(c, err, SIM_EINVAL, "model.hybrid_layer_pattern",
                               "layer %" PRId64 " is MoE (E) but model.num_moe_experts is 0", i);
    int rc = check_hybrid_mtp(c, m, err);
    if (rc != SIM_OK)
        return rc;
    for (int32_t i = 0; i < m->mtp_layers_per_depth; i++)
        if (m->mtp_layers[i].mlp == MODEL_MLP_MOE && m->num_moe_experts == 0)
            return cfg_err_key(c, err, SIM_EINVAL, m->mtp_legacy_pattern ? "model.mtp_hybrid_override_pattern"
                                                                          : "model.hybrid_layer_pattern",
                               "MTP layer %d is MoE (E) but model.num_moe_experts is 0", (int)i);
    if (!model_has_mamba(m))
        return no_mamba_path(c, m, err);
    if (m->mamba_num_heads == 0) {
        /* transformer_config.py:1259-1270: expand 2 */
        if ((2 * m->hidden_size) % m->mamba_head_dim != 0)
            return cfg_err_key(c, err, SIM_EINVAL, "model.mamba_head_dim",
                               "2 x hidden_size (%" PRId64 ") must be a multiple of it (%" PRId64
                               ") when mamba_num_heads is not set", 2 * m->hidden_size, m->mamba_head_dim);
        m->mamba_num_heads = 2 * m->hidden_size / m->mamba_head_dim;
    }
    if (m->mamba_num_heads % m->mamba_num_groups != 0)
        return cfg_err_key(c, err, SIM_EINVAL, "model.mamba_num_groups",
                           "mamba_num_heads (%" PRId64 ") must be divisible by mamba_num_groups (%" PRId64 ")",
                           m->mamba_num_heads, m->mamba_num_groups);
    return SIM_OK;
}

static int check_model(const cfg_t *c, run_inputs *in, sim_err *err)
{
    model_spec *m = &in->model;
    int hrc = check_hybrid(c, m, err);
    if (hrc)
        return hrc;
    if (!m->hybrid && m->mtp_legacy_pattern)
        return cfg_err_key(c, err, SIM_EINVAL, "model.mtp_hybrid_override_pattern",
                           "needs a hybrid model (model.hybrid_layer_pattern)");
    if (m->moe_latent_size > 0 && m->num_moe_experts == 0)
        return cfg_err_key(c, err, SIM_EINVAL, "model.moe_latent_size",
                           "is the routed experts' width: needs model.num_moe_experts > 0");
    if (m->ffn_hidden_size == 0)
        m->ffn_hidden_size = 4 * m->hidden_size; /* Megatron TransformerConfig default */
    if (m->num_moe_experts > 0 && m->moe_router_topk > m->num_moe_experts)
        return cfg_err_key(c, err, SIM_EINVAL, "model.moe_router_topk",
                           "routes each token to %" PRId64 " experts but the model has only %"
                           PRId64 " (model.num_moe_experts)", m->moe_router_topk,
                           m->num_moe_experts);
    if (m->multi_latent_attention) {
        static const char *const need[] = { "model.kv_lora_rank", "model.qk_head_dim",
                                            "model.v_head_dim" };
        const int64_t vals[] = { m->kv_lora_rank, m->qk_head_dim, m->v_head_dim };
        for (int i = 0; i < 3; i++)
            if (vals[i] < 1)
                return cfg_err_key(c, err, SIM_EINVAL, need[i],
                                   "multi_latent_attention needs it >= 1 (got %" PRId64 ")",
                                   vals[i]);
    }
    if (in->par.moe_pad_to_capacity && in->par.moe_capacity_factor <= 0)
        return cfg_err_key(c, err, SIM_EINVAL, "model.moe_pad_expert_input_to_capacity",
                           "pads to a capacity: needs model.moe_expert_capacity_factor > 0 (Megatron's rule)");
    int rc = check_graphs(c, in, err);
    if (rc != SIM_OK)
        return rc;
    /* LoRA is modeled on the linear layers of standard attention and dense
     * MLPs, the targets Megatron Bridge's LoRA names. */
    if (in->peft.lora) {
        if (m->num_moe_experts > 0 || m->multi_latent_attention || m->hybrid)
            return cfg_err_key(c, err, SIM_EINVAL, "peft.scheme",
                               "LoRA is modeled for dense models with standard attention (this model "
                               "has %s)", m->num_moe_experts > 0 ? "MoE layers"
                                          : m->hybrid ? "a hybrid layer pattern" : "multi-latent attention");
        if (in->peft.targets == 0)
            return cfg_err_key(c, err, SIM_EINVAL, "peft.target_modules",
                               "LoRA needs at least one target module");
    }
    /* The SSD scan's rate is a kernel-table figure, like every kernel's. */
    if (model_has_mamba(m) && !(in->cluster.compute.kernels.ssd_efficiency > 0))
        return cfg_err_key(c, err, SIM_EINVAL, "cluster.compute.kernels",
                           "Mamba layers need the ssd entry of the GPU's kernel table (its SSD scan "
                           "efficiency); this topology has none");
    return SIM_OK;
}

/* Keys a fabric-only resolve fills: the cluster and parsim's own options. */
static bool fabric_key(const char *key)
{
    return strncmp(key, "cluster.", 8) == 0 || strncmp(key, "sim.", 4) == 0;
}

static int resolve(cfg_t *c, run_inputs *in, bool fabric_only, sim_err *err)
{
    drop_auto_presets(c);
    int rc = load_presets(c, err);
    if (!rc)
        rc = check_known_keys(c, err);
    if (rc)
        return rc;

    memset(in, 0, sizeof *in);
    cluster_defaults(&in->cluster);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < N_KEYS; k++) {
            const key_def *kd = &keys[k];
            if (kd->late != (pass == 1) || (fabric_only && !fabric_key(kd->key)))
                continue;
            const cfg_entry *e = find(c, kd->key);
            if (e) {
                rc = apply_key(c, kd, &e->v, in, err);
            } else if (!kd->def && in->model.hybrid && strcmp(kd->key, "model.num_layers") == 0) {
                rc = SIM_OK; /* the hybrid pattern has set it */
            } else if (!kd->def) {
                rc = cfg_err_key(c, err, SIM_EINVAL, kd->key,
                                 "required key not set (set it, or name a preset with "
                                 "model.name / cluster.topology)");
            } else {
                cfg_value v;
                if (parse_value(kd->def, &v) != 0)
                    return sim_err_set(err, SIM_ENOMEM, "%s: out of memory building its default", kd->key);
                rc = apply_key(c, kd, &v, in, err);
                value_free(&v);
            }
            if (rc)
                return rc;
        }
    }
    /* Ranks fill nvlink_domain_job_gpus of each domain: to the job that is
     * the domain (the GPUs left over run nothing of it). */
    cluster_spec *cl = &in->cluster;
    int64_t fill = cl->nvlink_domain_job_gpus;
    if (fill > 0) {
        if (fill > cl->nvlink_domain_gpus || fill % cl->gpus_per_node != 0)
            return cfg_err_key(c, err, SIM_EINVAL, "cluster.nvlink_domain_job_gpus",
                               "%" PRId64 " GPUs: at most the domain's %" PRId64 " and whole nodes of %" PRId64,
                               fill, cl->nvlink_domain_gpus, cl->gpus_per_node);
        cl->nvlink_domain_gpus = fill;
    }
    /* Megatron refuses some settings by recompute_num_layers being given at
     * all (not None), whatever its value */
    in->par.recompute_num_layers_given = find(c, "model.recompute_num_layers") != NULL;
    /* a Megatron Bridge config names its provider class in the report */
    if (!in->model.name[0] && c->bridge)
        snprintf(in->model.name, sizeof in->model.name, "%s", bridge_notes_provider(c->bridge));
    return fabric_only ? SIM_OK : check_model(c, in, err);
}

int cfg_resolve(cfg_t *c, run_inputs *in, sim_err *err) { return resolve(c, in, false, err); }

int cfg_err_locate(const cfg_t *c, sim_err *err)
{
    const char *file = NULL;
    int line = 0;
    if (!err)
        return SIM_OK;
    if (err->key[0] && !err->file[0] && cfg_origin(c, err->key, &file, &line)) {
        sim_err was = *err; /* set_at writes the fields it reads */
        sim_err_set_at(err, was.code, file, line, was.key, "%s", was.msg);
    }
    return err->code;
}

int cfg_resolve_all(cfg_t *c, run_inputs *in, strategy_t *s, sim_err *err)
{
    int rc = cfg_resolve(c, in, err);
    if (rc == SIM_OK && strategy_resolve(s, &in->model, &in->cluster, &in->par, &in->train, &in->ddp, err))
        rc = cfg_err_locate(c, err);
    return rc;
}

int cfg_resolve_cluster(cfg_t *c, run_inputs *in, sim_err *err)
{
    return resolve(c, in, true, err);
}

/* ------------------------------------------------------------ printing */

void cfg_dump(const cfg_t *c, FILE *out)
{
    char val[4096];
    for (size_t k = 0; k < N_KEYS; k++) {
        const key_def *kd = &keys[k];
        const cfg_entry *e = find(c, kd->key);
        if (e) {
            fmt_value(&e->v, val, sizeof val);
            if (e->line > 0)
                fprintf(out, "%s = %s;  # %s:%d\n", kd->key, val, e->file, e->line);
            else
                fprintf(out, "%s = %s;  # %s\n", kd->key, val, e->file);
        } else if (kd->def) {
            fprintf(out, "%s = %s;  # default\n", kd->key, kd->def);
        } else {
            fprintf(out, "# %s: required, not set\n", kd->key);
        }
    }
    for (size_t k = 0; k < c->n; k++) {
        if (key_lookup(c->e[k].key))
            continue;
        fmt_value(&c->e[k].v, val, sizeof val);
        fprintf(out, "# unknown: %s = %s;  # %s:%d\n", c->e[k].key, val, c->e[k].file,
                c->e[k].line);
    }
}

bool cfg_key_known(const char *key, const char **def)
{
    const key_def *k = key_lookup(key);
    if (def)
        *def = k ? k->def : NULL;
    return k != NULL;
}

int cfg_check_setting(const char *assignment, sim_err *err)
{
    char key[KEY_MAX];
    cfg_value v;
    int rc = parse_assignment(assignment, key, &v, err);
    if (rc != SIM_OK)
        return rc;
    const key_def *k = key_lookup(key);
    if (!k)
        rc = sim_err_set_at(err, SIM_EINVAL, NULL, 0, key, "unknown key");
    else if (!type_ok(k->type, &v))
        rc = sim_err_set_at(err, SIM_EINVAL, NULL, 0, key, "must be %s", type_name(k->type));
    else
        rc = check_range(NULL, k, &v, err);
    /* names: the key's own list, or the precision names */
    int i = 0;
    if (rc == SIM_OK && k->names && v.kind == CV_STRING)
        rc = pick_name(NULL, k, v.s, k->names, k->n_names, &i, err);
    for (int j = 0; rc == SIM_OK && k->names && v.kind == CV_LIST && v.elem == CV_STRING && j < v.n; j++)
        rc = pick_name(NULL, k, v.strs[j], k->names, k->n_names, &i, err);
    precision_kind prec;
    if (rc == SIM_OK && k->set == set_precision && !precision_from_name(v.s, &prec))
        rc = sim_err_set_at(err, SIM_EINVAL, NULL, 0, key, "unknown precision \"%s\"", v.s);
    value_free(&v);
    return rc;
}

void cfg_print_keys(FILE *out)
{
    fprintf(out, "%-45s %-10s %-14s %-21s %s\n", "key", "type", "default", "range", "meaning");
    for (size_t k = 0; k < N_KEYS; k++) {
        const key_def *kd = &keys[k];
        static const char *const tn[] = { "int", "float", "bool", "string", "int list",
                                          "name list", "int|list", "float list" };
        char range[64];
        range_text(kd, range, sizeof range);
        fprintf(out, "%-45s %-10s %-14s %-21s %s\n", kd->key, tn[kd->type],
                kd->def ? kd->def : "(required)", range, kd->help);
    }
}

/* -------------------------------------------------------------- precision */

static const struct {
    const char *name;
    precision_kind kind;
} precision_names[] = {
    /* canonical short names first: precision_name() returns these */
    { "bf16", PREC_BF16 },
    { "fp16", PREC_FP16 },
    { "fp8-delayed", PREC_FP8_DELAYED },
    { "fp8-cs", PREC_FP8_CS },
    { "mxfp8", PREC_MXFP8 },
    { "fp8-blockwise", PREC_FP8_BLOCKWISE },
    { "nvfp4", PREC_NVFP4 },
    /* fp8 alone means Transformer Engine's current default recipe,
     * per-tensor current scaling */
    { "fp8", PREC_FP8_CS },
    /* Megatron Bridge recipe names (bridge/training/mixed_precision.py) */
    { "bf16_mixed", PREC_BF16 },
    { "fp16_mixed", PREC_FP16 },
    { "bf16_with_fp8_delayed_scaling_mixed", PREC_FP8_DELAYED },
    { "bf16_with_fp8_current_scaling_mixed", PREC_FP8_CS },
    { "bf16_with_mxfp8_mixed", PREC_MXFP8 },
    { "bf16_with_fp8_subchannel_scaling_mixed", PREC_FP8_BLOCKWISE },
    { "bf16_with_nvfp4_mixed", PREC_NVFP4 },
};

bool precision_from_name(const char *name, precision_kind *out)
{
    for (size_t k = 0; k < sizeof precision_names / sizeof precision_names[0]; k++) {
        if (strcmp(name, precision_names[k].name) == 0) {
            *out = precision_names[k].kind;
            return true;
        }
    }
    return false;
}

const char *precision_name(precision_kind p)
{
    for (size_t k = 0; k < sizeof precision_names / sizeof precision_names[0]; k++)
        if (precision_names[k].kind == p)
            return precision_names[k].name;
    return "?";
}
