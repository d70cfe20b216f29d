/* jsonl.c: the strict reader of flat JSON-lines results (see jsonl.h), and the appender every results
 * writer should use. A recursive-descent parser over one line with a cursor; every failure records its
 * column and what was expected. Duplicate keys are found with a hash set of the keys seen (linear in
 * the number of keys, not quadratic). */
#include "harness/jsonl.h"
#include "core/err.h"
#include "core/hash.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t len, pos;
    char *err;
    size_t errlen;
    int failed;
} s_cur_t;

static int s_fail(s_cur_t *c, const char *fmt, ...)
{
    if (c->failed) return ERR_CORRUPT;
    c->failed = 1;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->err && c->errlen) snprintf(c->err, c->errlen, "column %zu: %s", c->pos + 1, msg);
    return ERR_CORRUPT;
}

static void s_ws(s_cur_t *c)
{
    while (c->pos < c->len && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' || c->s[c->pos] == '\r' || c->s[c->pos] == '\n'))
        c->pos++;
}

static int s_peek(s_cur_t *c) { return c->pos < c->len ? (unsigned char)c->s[c->pos] : -1; }

static int s_expect(s_cur_t *c, char ch)
{
    s_ws(c);
    if (s_peek(c) != (unsigned char)ch) {
        if (s_peek(c) < 0) return s_fail(c, "expected '%c', found the end of the line", ch);
        return s_fail(c, "expected '%c', found '%c'", ch, c->s[c->pos]);
    }
    c->pos++;
    return 0;
}

static int s_hex4(s_cur_t *c, unsigned *out)
{
    if (c->pos + 4 > c->len) return s_fail(c, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char h = c->s[c->pos + (size_t)i];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= (unsigned)(h - '0');
        else if (h >= 'a' && h <= 'f') v |= (unsigned)(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') v |= (unsigned)(h - 'A' + 10);
        else return s_fail(c, "bad hex digit in \\u escape");
    }
    c->pos += 4;
    *out = v;
    return 0;
}

static size_t s_utf8(char *d, unsigned cp)
{
    if (cp < 0x80) { d[0] = (char)cp; return 1; }
    if (cp < 0x800) { d[0] = (char)(0xc0 | (cp >> 6)); d[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        d[0] = (char)(0xe0 | (cp >> 12)); d[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); d[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    d[0] = (char)(0xf0 | (cp >> 18)); d[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); d[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string at the cursor (the opening quote included) -> malloc'd, unescaped. */
static int s_string(s_cur_t *c, char **out)
{
    *out = NULL;
    if (s_expect(c, '"')) return ERR_CORRUPT;
    size_t start = c->pos;
    /* unescaped length <= escaped length */
    size_t end = start;
    while (end < c->len && c->s[end] != '"') end += (c->s[end] == '\\') ? 2 : 1;
    if (end >= c->len) return s_fail(c, "unterminated string");
    char *d = malloc(end - start + 1);
    if (!d) return s_fail(c, "out of memory");
    size_t k = 0;
    while (c->pos < c->len && c->s[c->pos] != '"') {
        unsigned char ch = (unsigned char)c->s[c->pos];
        if (ch < 0x20) { free(d); return s_fail(c, "control character in a string"); }
        if (ch != '\\') { d[k++] = (char)ch; c->pos++; continue; }
        c->pos++;
        if (c->pos >= c->len) { free(d); return s_fail(c, "unterminated escape"); }
        char e = c->s[c->pos++];
        switch (e) {
        case '"': d[k++] = '"'; break;
        case '\\': d[k++] = '\\'; break;
        case '/': d[k++] = '/'; break;
        case 'b': d[k++] = '\b'; break;
        case 'f': d[k++] = '\f'; break;
        case 'n': d[k++] = '\n'; break;
        case 'r': d[k++] = '\r'; break;
        case 't': d[k++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (s_hex4(c, &cp)) { free(d); return ERR_CORRUPT; }
            if (cp >= 0xd800 && cp < 0xdc00) {
                unsigned lo;
                if (c->pos + 2 > c->len || c->s[c->pos] != '\\' || c->s[c->pos + 1] != 'u') {
                    free(d);
                    return s_fail(c, "lone high surrogate in \\u escape");
                }
                c->pos += 2;
                if (s_hex4(c, &lo)) { free(d); return ERR_CORRUPT; }
                if (lo < 0xdc00 || lo > 0xdfff) { free(d); return s_fail(c, "bad low surrogate in \\u escape"); }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                free(d);
                return s_fail(c, "lone low surrogate in \\u escape");
            }
            if (cp == 0) { free(d); return s_fail(c, "\\u0000 in a string"); }
            /* at most 6 escaped chars -> at most 4 bytes: fits */
            k += s_utf8(d + k, cp);
            break;
        }
        default: free(d); c->pos--; return s_fail(c, "bad escape '\\%c'", e);
        }
    }
    d[k] = '\0';
    c->pos++; /* closing quote */
    *out = d;
    return 0;
}

/* A JSON number (strict grammar: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?). */
static int s_number(s_cur_t *c, double *out)
{
    size_t p = c->pos;
    const char *s = c->s;
    if (p < c->len && s[p] == '-') p++;
    if (p >= c->len || s[p] < '0' || s[p] > '9') return s_fail(c, "expected a value");
    if (s[p] == '0') p++;
    else while (p < c->len && s[p] >= '0' && s[p] <= '9') p++;
    if (p < c->len && s[p] == '.') {
        p++;
        if (p >= c->len || s[p] < '0' || s[p] > '9') { c->pos = p; return s_fail(c, "expected a digit after '.'"); }
        while (p < c->len && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p < c->len && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < c->len && (s[p] == '+' || s[p] == '-')) p++;
        if (p >= c->len || s[p] < '0' || s[p] > '9') { c->pos = p; return s_fail(c, "expected a digit in the exponent"); }
        while (p < c->len && s[p] >= '0' && s[p] <= '9') p++;
    }
    char buf[64];
    size_t n = p - c->pos;
    if (n >= sizeof buf) return s_fail(c, "number too long");
    memcpy(buf, s + c->pos, n);
    buf[n] = '\0';
    errno = 0;
    double v = strtod(buf, NULL);
    if (!isfinite(v)) return s_fail(c, "number out of range");
    c->pos = p;
    *out = v;
    return 0;
}

static int s_lit(s_cur_t *c, const char *w)
{
    size_t n = strlen(w);
    if (c->pos + n > c->len || memcmp(c->s + c->pos, w, n)) return s_fail(c, "expected a value");
    c->pos += n;
    return 0;
}

static int s_value(s_cur_t *c, h_jfield_t *f)
{
    s_ws(c);
    int ch = s_peek(c);
    if (ch < 0) return s_fail(c, "expected a value, found the end of the line");
    if (ch == '"') { f->type = HJ_STR; return s_string(c, &f->str); }
    if (ch == 't') { f->type = HJ_BOOL; f->num = 1; return s_lit(c, "true"); }
    if (ch == 'f') { f->type = HJ_BOOL; f->num = 0; return s_lit(c, "false"); }
    if (ch == 'n') { f->type = HJ_NULL; return s_lit(c, "null"); }
    if (ch == '{') return s_fail(c, "nested objects are not expected in a results line");
    if (ch == '[') {
        f->type = HJ_ARR;
        c->pos++;
        size_t cap = 0;
        s_ws(c);
        if (s_peek(c) == ']') { c->pos++; return 0; }
        for (;;) {
            double v;
            s_ws(c);
            if (s_peek(c) == '"' || s_peek(c) == '[' || s_peek(c) == '{')
                return s_fail(c, "only arrays of numbers are expected in a results line");
            if (s_number(c, &v)) return ERR_CORRUPT;
            if (f->n == cap) {
                cap = cap ? cap * 2 : 8;
                double *a = realloc(f->arr, cap * sizeof *a);
                if (!a) return s_fail(c, "out of memory");
                f->arr = a;
            }
            f->arr[f->n++] = v;
            s_ws(c);
            if (s_peek(c) == ',') { c->pos++; continue; }
            return s_expect(c, ']');
        }
    }
    f->type = HJ_NUM;
    return s_number(c, &f->num);
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

/* The keys seen so far in one object: open addressing over indices into obj->f (+1; 0 = empty). */
typedef struct { size_t *slot; size_t cap; } s_keyset_t;

static unsigned long s_key_compares; /* key comparisons made by s_keyset_add (tests read it) */

/* 1 when obj->f[i].key was already there (not added), 0 when added, -1 out of memory. */
static int s_keyset_add(s_keyset_t *ks, const h_jobj_t *obj, size_t i)
{
    if (2 * (i + 1) > ks->cap) {
        size_t cap = ks->cap ? ks->cap * 2 : 64;
        size_t *slot = calloc(cap, sizeof *slot);
        if (!slot) return -1;
        for (size_t k = 0; k < ks->cap; k++)
            if (ks->slot[k]) {
                size_t h = hash_str(obj->f[ks->slot[k] - 1].key) & (cap - 1);
                while (slot[h]) h = (h + 1) & (cap - 1);
                slot[h] = ks->slot[k];
            }
        free(ks->slot);
        ks->slot = slot;
        ks->cap = cap;
    }
    const char *key = obj->f[i].key;
    size_t h = hash_str(key) & (ks->cap - 1);
    for (; ks->slot[h]; h = (h + 1) & (ks->cap - 1)) {
        s_key_compares++;
        if (!strcmp(obj->f[ks->slot[h] - 1].key, key)) return 1;
    }
    ks->slot[h] = i + 1;
    return 0;
}

int h_jparse(const char *line, size_t len, h_jobj_t *obj, char *err, size_t errlen)
{
    s_keyset_t ks = {0};
    s_cur_t c = {.s = line, .len = len, .err = err, .errlen = errlen};
    if (err && errlen) err[0] = '\0';
    obj->f = NULL;
    obj->n = obj->cap = 0;
    if (s_expect(&c, '{')) goto bad;
    s_ws(&c);
    if (s_peek(&c) == '}') { c.pos++; goto tail; }
    for (;;) {
        h_jfield_t f = {0};
        s_ws(&c);
        if (s_peek(&c) != '"') { s_fail(&c, "expected a key in double quotes"); goto bad; }
        if (s_string(&c, &f.key)) goto bad;
        if (s_expect(&c, ':') || s_value(&c, &f)) { s_field_free(&f); goto bad; }
        if (obj->n == obj->cap) {
            size_t cap = obj->cap ? obj->cap * 2 : 32;
            h_jfield_t *a = realloc(obj->f, cap * sizeof *a);
            if (!a) { s_field_free(&f); s_fail(&c, "out of memory"); goto bad; }
            obj->f = a;
            obj->cap = cap;
        }
        obj->f[obj->n] = f;
        int dup = s_keyset_add(&ks, obj, obj->n);
        if (dup) {
            if (dup > 0) s_fail(&c, "duplicate key \"%s\"", f.key);
            else s_fail(&c, "out of memory");
            s_field_free(&f);
            goto bad;
        }
        obj->n++;
        s_ws(&c);
        if (s_peek(&c) == ',') { c.pos++; continue; }
        if (s_expect(&c, '}')) goto bad;
        break;
    }
tail:
    s_ws(&c);
    if (c.pos != c.len) { s_fail(&c, "trailing characters after the object"); goto bad; }
    free(ks.slot);
    return 0;
bad:
    free(ks.slot);
    h_jfree(obj);
    return ERR_CORRUPT;
}

int h_jappend_line(const char *path, const char *lines, size_t len)
{
    if (!path || !lines) return err_set(ERR_INVAL, "h_jappend_line: NULL argument");
    if (!len) return 0;
    if (lines[len - 1] != '\n') return err_set(ERR_INVAL, "results for %s must end with a line break", path);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(ERR_IO, "cannot open results file %s: %s", path, strerror(errno));
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
    if (close(fd) != 0 && rc == 0) rc = err_set(ERR_IO, "closing %s: %s", path, strerror(errno));
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

const char *h_jstr(const h_jobj_t *obj, const char *key, const char *dflt)
{
    const h_jfield_t *f = h_jget(obj, key);
    return f && f->type == HJ_STR ? f->str : dflt;
}

/* One line (without its line break) of file:lineno: appended to objs, or reported and counted. */
static int s_read_line(const char *line, size_t len, const char *file, size_t lineno, h_jobj_t **objs, size_t *nobjs,
                       size_t *cap, size_t *nbad, FILE *dg)
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
        if (dg) fprintf(dg, "%s:%zu: malformed result line: %s\n", file, lineno, why);
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
        char *line = NULL;
        size_t lcap = 0, lineno = 0;
        ssize_t n;
        int rc = 0;
        while (rc == 0 && (n = getline(&line, &lcap, f)) >= 0) {
            size_t len = (size_t)n;
            while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
            rc = s_read_line(line, len, files[fi], ++lineno, objs, nobjs, &cap, nbad, dg);
        }
        if (rc == 0 && ferror(f)) {
            if (dg) fprintf(dg, "harness: error reading %s: %s\n", files[fi], strerror(errno));
            rc = err_set(ERR_IO, "error reading %s: %s", files[fi], strerror(errno));
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
