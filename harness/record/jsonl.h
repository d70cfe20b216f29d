/* jsonl.h: reading and writing results files, one flat JSON object per line, with jansson: values
 * are numbers, strings, true/false/null and arrays of numbers; anything else (nested objects, arrays
 * of strings, trailing garbage, bad escapes, duplicate keys) is an error with a message that says
 * where ("column C: ..." or the key). Lines are appended whole or not at all. Used by every mode that
 * writes results, `harness report` and `harness model`. */
#ifndef SB_HARNESS_JSONL_H
#define SB_HARNESS_JSONL_H
#include <stddef.h>
#include <jansson.h>

typedef enum { HJ_NUM, HJ_STR, HJ_ARR, HJ_BOOL, HJ_NULL } h_jtype_t;

typedef struct {
    char     *key;
    h_jtype_t type;
    double    num;      /* HJ_NUM; HJ_BOOL: 0 or 1 */
    char     *str;      /* HJ_STR (unescaped, UTF-8) */
    double   *arr;      /* HJ_ARR */
    size_t    n;        /* HJ_ARR: elements */
} h_jfield_t;

typedef struct {
    h_jfield_t *f;
    size_t      n, cap;
    char        src[256];   /* "file:line" it came from */
} h_jobj_t;

/* Parse one line (no '\n' needed; trailing whitespace allowed) into obj (which must be zeroed or
 * freed). Returns 0, or ERR_CORRUPT with a message in err ("column 17: invalid token near '01'",
 * "key \"a\": nested objects are not expected ..."); obj is then empty. */
int  h_jparse(const char *line, size_t len, h_jobj_t *obj, char *err, size_t errlen);
void h_jfree(h_jobj_t *obj);

const h_jfield_t *h_jget(const h_jobj_t *obj, const char *key);
/* Number of key, or dflt when absent or not a number. */
double      h_jnum(const h_jobj_t *obj, const char *key, double dflt);
/* Whether key holds a flag (true/false, or a number as older lines wrote them); the flag (1 for true
 * or a non-zero number, 0 for false or zero), or dflt when absent or not a flag. */
int         h_jis_flag(const h_jobj_t *obj, const char *key);
int         h_jflag(const h_jobj_t *obj, const char *key, int dflt);
/* String of key, or dflt when absent or not a string. */
const char *h_jstr(const h_jobj_t *obj, const char *key, const char *dflt);

/* Read every line of the files: good objects are appended to *objs (realloc'd, *nobjs updated), malformed
 * lines counted in *nbad and said on `diag` (when not NULL) in one line a file: "FILE:LINE: malformed result
 * line: why" for one, "FILE: N malformed result lines skipped: lines A, B, ... (the first ten); the first
 * (line A): why" for more. Blank lines are skipped silently. Returns 0, ERR_IO when a file cannot be read
 * (reported on diag and in err_detail; the other files are still read) or ERR_NOMEM (reading stops). */
int  h_jread_files(int nfiles, char **files, h_jobj_t **objs, size_t *nobjs, size_t *nbad, void *diag);
void h_jfree_all(h_jobj_t **objs, size_t *nobjs);

/* obj as one line ending in '\n', compact ({"a":1,"b":2}) or spaced ({"a": 1, "b": 2}) (malloc'd; *len
 * its length; NULL when out of memory). */
char *h_jdump_line(const json_t *obj, int spaced, size_t *len);

/* Append whole lines (len bytes ending in '\n') to the results file path (created 0644): one write()
 * with O_APPEND, so lines of concurrent writers never interleave or get lost; on a short write (disk
 * full) the file is cut back to where it was, under an exclusive flock so that no other writer's line
 * goes with it. Returns 0, ERR_NOSPC / ERR_IO (err_set, the file left as it was) or ERR_INVAL. */
int  h_jappend_line(const char *path, const char *lines, size_t len);
/* Open path for appending now and hold the descriptor for the process's life, so that the appends to it at
 * the end of a run need no new descriptor (a process whose descriptors were exhausted meanwhile, by a flood
 * of connections or a leak, still writes its results). 0, or ERR_IO naming why it cannot be written. */
int  h_jreserve(const char *path);

#endif
