/* jsonl.c: the strict reader of flat JSON-lines results (see jsonl.h), and the appender every results
 * writer uses. Parsing is jansson's (Debian libjansson-dev): it rejects duplicate keys itself and says
 * where a line went wrong; this file keeps results lines flat and turns them into fields. */
#include "harness/record/jsonl.h"
#include "core/err.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "column C: why" from jansson's error (its duplicate-key message names the key as ours did). */
static int s_fail(char *err, size_t errlen, const json_error_t *e)
{
    if (!err || !errlen) return ERR_CORRUPT;
    int col = e->column > 0 ? e->column : 1;
    const char *near = strstr(e->text, " near '");
    if (json_error_code(e) == json_error_duplicate_key && near) {
        size_t n = strlen(near + 7);
        snprintf(err, errlen, "column %d: duplicate key %.*s", col, (int)(n ? n - 1 : 0), near + 7);
    } else {
        snprintf(err, errlen, "column %d: %s", col, e->text);
    }
    return ERR_CORRUPT;
}

/* A value of a results line into f: numbers, strings, true/false/null, arrays of numbers; anything
 * else is named with its key (jansson keeps no position for a value once parsed). */
static int s_value(const char *key, const json_t *v, h_jfield_t *f, char *err, size_t errlen)
{
    const char *why = NULL;
    switch (json_typeof(v)) {
    case JSON_REAL:
    case JSON_INTEGER: f->type = HJ_NUM; f->num = json_number_value(v); return 0;
    case JSON_TRUE: f->type = HJ_BOOL; f->num = 1; return 0;
    case JSON_FALSE: f->type = HJ_BOOL; f->num = 0; return 0;
    case JSON_NULL: f->type = HJ_NULL; return 0;
    case JSON_STRING:
        f->type = HJ_STR;
        f->str = strdup(json_string_value(v));
        if (!f->str) why = "out of memory";
        break;
    case JSON_ARRAY: {
        f->type = HJ_ARR;
        size_t n = json_array_size(v), i;
        json_t *x;
        f->arr = n ? malloc(n * sizeof *f->arr) : NULL;
        if (n && !f->arr) { why = "out of memory"; break; }
        json_array_foreach(v, i, x) {
            if (!json_is_number(x)) { why = "only arrays of numbers are expected in a results line"; break; }
            f->arr[f->n++] = json_number_value(x);
        }
        break;
    }
    case JSON_OBJECT: why = "nested objects are not expected in a results line"; break;
    }
    if (!why) return 0;
    if (err && errlen) snprintf(err, errlen, "key \"%s\": %s", key, why);
    return ERR_CORRUPT;
}

static void s_field_free(h_jfield_t *f)
{
    free(f->key);
    free(f->str);
    free(f->arr);
    memset(f, 0, sizeof *f);
}

void h_jfree(h_jobj_t *obj)
{
    if (!obj) return;
    for (size_t i = 0; i < obj->n; i++) s_field_free(&obj->f[i]);
    free(obj->f);
    obj->f = NULL;
    obj->n = obj->cap = 0;
}

int h_jparse(const char *line, size_t len, h_jobj_t *obj, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    obj->f = NULL;
    obj->n = obj->cap = 0;
    json_error_t e;
    /* integers as doubles (the fields are doubles; 1e20 written as digits is no error); duplicate
     * keys, NUL escapes, lone surrogates, NaN and overflowing numbers are errors */
    json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &e);
    if (!j) return s_fail(err, errlen, &e);
    if (!json_is_object(j)) {
        json_decref(j);
        if (err && errlen) snprintf(err, errlen, "column 1: expected '{', a results line is one object");
        return ERR_CORRUPT;
    }
    size_t n = json_object_size(j);
    obj->f = calloc(n ? n : 1, sizeof *obj->f);
    obj->cap = n;
    const char *key;
    json_t *v;
    int rc = obj->f ? 0 : ERR_CORRUPT;
    if (rc && err && errlen) snprintf(err, errlen, "column 1: out of memory");
    json_object_foreach(j, key, v) {
        if (rc) break;
        h_jfield_t *f = &obj->f[obj->n++];
        f->key = strdup(key);
        rc = f->key ? s_value(key, v, f, err, errlen) : ERR_CORRUPT;
    }
    json_decref(j);
    if (rc) h_jfree(obj);
    return rc;
}

char *h_jdump_line(const json_t *obj, int spaced, size_t *len)
{
    /* 15 significant digits: every measured figure exactly as measured, without 0.1's binary tail;
     * JSON_INDENT(0) without JSON_COMPACT: one line with a space after ',' and ':' */
    char *s = json_dumps(obj, (spaced ? JSON_INDENT(0) : JSON_COMPACT) | JSON_REAL_PRECISION(15));
    if (!s) return NULL;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) { free(s); return NULL; }
    line[n] = '\n';
    line[n + 1] = '\0';
    if (len) *len = n + 1;
    return line;
}

static int s_append_fd(int fd, const char *path, const char *lines, size_t len, int owned);

/* results files opened ahead (h_jreserve): path and descriptor */
#define S_RESERVED 4
static struct { char path[4096]; int fd; } s_res[S_RESERVED];
static int s_nres;

int h_jreserve(const char *path)
{
    for (int i = 0; i < s_nres; i++)
        if (!strcmp(s_res[i].path, path)) return 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(ERR_IO, "cannot open results file %s: %s", path, strerror(errno));
    if (s_nres == S_RESERVED || strlen(path) >= sizeof s_res[0].path) { close(fd); return 0; } /* opened at the end */
    snprintf(s_res[s_nres].path, sizeof s_res[s_nres].path, "%s", path);
    s_res[s_nres++].fd = fd;
    return 0;
}

int h_jappend_line(const char *path, const char *lines, size_t len)
{
    if (!path || !lines) return err_set(ERR_INVAL, "h_jappend_line: NULL argument");
    if (!len) return 0;
    if (lines[len - 1] != '\n') return err_set(ERR_INVAL, "results for %s must end with a line break", path);
    for (int i = 0; i < s_nres; i++) /* held since the start: no descriptor needed now */
        if (!strcmp(s_res[i].path, path)) return s_append_fd(s_res[i].fd, path, lines, len, 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(ERR_IO, "cannot open results file %s: %s", path, strerror(errno));
    return s_append_fd(fd, path, lines, len, 1);
}

static int s_append_fd(int fd, const char *path, const char *lines, size_t len, int owned)
{
    /* the lock only matters on a short write: cutting the file back is safe only when no other writer
     * can have appended meanwhile; every append of whole lines is one write() with O_APPEND */
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {}
    struct stat st;
    off_t before = fstat(fd, &st) == 0 ? st.st_size : -1;
    ssize_t w;
    while ((w = write(fd, lines, len)) < 0 && errno == EINTR) {}
    int e = errno, rc = 0;
    if (w != (ssize_t)len) {
        if (w > 0 && before >= 0 && ftruncate(fd, before) != 0) { /* nothing more we can do */ }
        rc = err_set(e == ENOSPC ? ERR_NOSPC : ERR_IO, "results not written to %s: %s (file left as it was)", path,
                     w < 0 ? strerror(e) : "short write");
    } else if (fsync(fd) != 0 && errno != EINVAL) {
        rc = err_set(ERR_IO, "fsync %s: %s", path, strerror(errno));
    }
    flock(fd, LOCK_UN);
    if (owned && close(fd) != 0 && rc == 0) rc = err_set(ERR_IO, "closing %s: %s", path, strerror(errno));
    return rc;
}

const h_jfield_t *h_jget(const h_jobj_t *obj, const char *key)
{
    for (size_t i = 0; obj && i < obj->n; i++)
        if (!strcmp(obj->f[i].key, key)) return &obj->f[i];
    return NULL;
}

double h_jnum(const h_jobj_t *obj, const char *key, double dflt)
{
    const h_jfield_t *f = h_jget(obj, key);
    return f && f->type == HJ_NUM ? f->num : dflt;
}

int h_jis_flag(const h_jobj_t *obj, const char *key)
{
    const h_jfield_t *f = h_jget(obj, key);
    return f && (f->type == HJ_BOOL || f->type == HJ_NUM);
}

int h_jflag(const h_jobj_t *obj, const char *key, int dflt)
{
    return h_jis_flag(obj, key) ? h_jget(obj, key)->num != 0 : dflt;
}

const char *h_jstr(const h_jobj_t *obj, const char *key, const char *dflt)
{
    const h_jfield_t *f = h_jget(obj, key);
    return f && f->type == HJ_STR ? f->str : dflt;
}

/* One line (without its line break) of file:lineno: appended to objs, or reported and counted. */
/* A file's malformed lines, said in one line once it is read (a README given by mistake has hundreds). */
#define S_BAD_LIST 10
typedef struct {
    size_t n, line[S_BAD_LIST];
    char   why[256];                /* the first one's reason */
} s_bad_t;

static void s_bad_note(s_bad_t *b, size_t lineno, const char *why)
{
    if (b->n < S_BAD_LIST) b->line[b->n] = lineno;
    if (b->n == 0) snprintf(b->why, sizeof b->why, "%s", why);
    b->n++;
}

static void s_bad_say(const s_bad_t *b, const char *file, FILE *dg)
{
    if (!dg || b->n == 0) return;
    if (b->n == 1) {
        fprintf(dg, "%s:%zu: malformed result line: %s\n", file, b->line[0], b->why);
        return;
    }
    fprintf(dg, "%s: %zu malformed result lines skipped: lines", file, b->n);
    for (size_t i = 0; i < b->n && i < S_BAD_LIST; i++) fprintf(dg, "%s %zu", i ? "," : "", b->line[i]);
    fprintf(dg, "%s; the first (line %zu): %s\n", b->n > S_BAD_LIST ? ", ..." : "", b->line[0], b->why);
}

static int s_read_line(const char *line, size_t len, const char *file, size_t lineno, h_jobj_t **objs, size_t *nobjs,
                       size_t *cap, size_t *nbad, s_bad_t *bad)
{
    size_t k = 0;
    while (k < len && (line[k] == ' ' || line[k] == '\t')) k++;
    if (k == len) return 0;
    h_jobj_t o = {0};
    char err[256];
    const char *why = err;
    if (memchr(line, '\0', len)) why = "NUL byte";
    else if (h_jparse(line, len, &o, err, sizeof err) < 0) why = err;
    else if (!h_jstr(&o, "mode", NULL)) why = "no \"mode\" string";
    else why = NULL;
    if (why) {
        s_bad_note(bad, lineno, why);
        (*nbad)++;
        h_jfree(&o);
        return 0;
    }
    snprintf(o.src, sizeof o.src, "%s:%zu", file, lineno);
    if (*nobjs == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        h_jobj_t *a = realloc(*objs, ncap * sizeof *a);
        if (!a) {
            h_jfree(&o);
            return err_set(ERR_NOMEM, "out of memory reading %s", file);
        }
        *objs = a;
        *cap = ncap;
    }
    (*objs)[(*nobjs)++] = o;
    return 0;
}

int h_jread_files(int nfiles, char **files, h_jobj_t **objs, size_t *nobjs, size_t *nbad, void *diag)
{
    FILE *dg = diag;
    int status = 0;
    size_t cap = *nobjs;
    for (int fi = 0; fi < nfiles; fi++) {
        FILE *f = fopen(files[fi], "r");
        if (!f) {
            if (dg) fprintf(dg, "harness: cannot read %s: %s\n", files[fi], strerror(errno));
            status = err_set(ERR_IO, "cannot read %s: %s", files[fi], strerror(errno));
            continue;
        }
        struct stat st;
        if (fstat(fileno(f), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISDIR(st.st_mode))) {
            if (dg) fprintf(dg, "harness: %s is not a results file (a device or directory)\n", files[fi]);
            status = err_set(ERR_INVAL, "%s is not a results file (a device or directory)", files[fi]);
            fclose(f);
            continue;
        }
        char *line = NULL;
        size_t lcap = 0, lineno = 0;
        ssize_t n = 0;
        int rc = 0;
        s_bad_t bad = {0};
        errno = 0;
        while (rc == 0 && (n = getline(&line, &lcap, f)) >= 0) {
            size_t len = (size_t)n;
            while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
            rc = s_read_line(line, len, files[fi], ++lineno, objs, nobjs, &cap, nbad, &bad);
        }
        s_bad_say(&bad, files[fi], dg);
        /* a read that stopped before the end (an I/O error, or getline out of memory) is an error, never EOF */
        if (rc == 0 && (ferror(f) || (n < 0 && !feof(f)))) {
            int e = errno ? errno : EIO;
            if (dg) fprintf(dg, "harness: error reading %s after line %zu: %s\n", files[fi], lineno, strerror(e));
            rc = err_set(e == ENOMEM ? ERR_NOMEM : ERR_IO, "error reading %s after line %zu: %s", files[fi], lineno, strerror(e));
        }
        free(line);
        fclose(f);
        if (rc == ERR_NOMEM) {
            if (dg) fprintf(dg, "harness: out of memory reading %s\n", files[fi]);
            return rc;
        }
        if (rc < 0) status = rc;
    }
    return status;
}

void h_jfree_all(h_jobj_t **objs, size_t *nobjs)
{
    if (!objs || !*objs) return;
    for (size_t i = 0; i < *nobjs; i++) h_jfree(&(*objs)[i]);
    free(*objs);
    *objs = NULL;
    *nobjs = 0;
}
