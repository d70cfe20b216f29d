/* result.h: result lines: where a mode's results go (h_out_t), their metadata, and whole-line,
 * all-or-nothing appends of JSON-lines results (written with jansson; record/jsonl.h reads them back). */
#ifndef SB_HARNESS_RESULT_H
#define SB_HARNESS_RESULT_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/* Where a mode's result lines go and what every line carries besides its body: the results file
 * (--json FILE, "-" for stdout, NULL for none), the run's --label, the emulated network (--net) and the
 * command line. Built from the options by cli/ (h_out_of). */
typedef struct {
    const char *json;
    const char *label;
    const char *net;
    int argc;
    char **argv;
} h_out_t;

/* metadata for JSON results: host, git sha, timestamp, command line, topology, library versions */
typedef struct {
    char host[128];
    char git_sha[48];
    char timestamp[40];
    char cmdline[2048];
    char topo[256];
    char cpu[128];
    char versions[256];
    int argc;                         /* the whole command line, for h_meta_cmdline_json */
    char **argv;
} h_meta_t;
void h_meta_fill(h_meta_t *m, int argc, char **argv);
/* The git sha of the sources this binary was built from (`git describe --always --dirty`, baked in by
 * the Makefile; "unknown" when built outside a repository), whatever the current directory is. */
const char *h_git_sha(void);

/* Append whole lines to a results file: h_jappend_line (jsonl.h: one O_APPEND write, a short write
 * undone under a lock, so no other writer's line is lost); "-" writes to stdout. Errors (full disk,
 * ...) are returned (err_set), never half a line. */
int h_json_append(const char *path, const char *lines, size_t len);
/* JSON string escaping into buf (cut to fit). */
void h_json_str(char *buf, size_t len, const char *s);
/* Growable JSON pieces, no length limit; malloc'd, NULL when out of memory (free() them):
 * a quoted, escaped string; the whole command line as one; "[v0, v1, ...]" of n values (decimal
 * integers, or %.*f doubles). */
char *h_json_strdup(const char *s);
char *h_meta_cmdline_json(const h_meta_t *m);
char *h_json_u64_list(const uint64_t *v, size_t n);
char *h_json_f64_list(const double *v, size_t n, int decimals);

/* Result lines (record/result.c, with jansson; jsonl.h reads them back). Every line is one flat object:
 * {"schema": H_RESULT_SCHEMA, "mode": MODE, "label": --label (when given), the body's fields, then the
 * metadata "host", "git_sha", "timestamp", "cmdline" (whole), "topology", "cpu", "versions", "net"}.
 * Schema 2: written by jansson, "topology" in every mode (schema 1, unversioned: train said "topo"). */
#define H_RESULT_SCHEMA 2
/* Append the line made of body (stolen; NULL: out of memory, nothing written) to out->json, whole or not
 * at all: 0, or ERR_NOMEM / ERR_IO / ERR_NOSPC (err_set). Train lines are spaced ("key": value) as they
 * always were, the others compact. */
int h_result_write(const h_out_t *out, const h_meta_t *m, const char *mode, json_t *body);
/* The same line, not written: malloc'd text ending in '\n' (*len its length), or NULL (ERR_NOMEM, err_set);
 * for a mode that appends several lines in one write (model). */
char *h_result_line(const h_out_t *out, const h_meta_t *m, const char *mode, json_t *body, size_t *len);
/* Several result lines appended in one write at the end, whole or not at all (model's tables):
 * h_lines_open (no --json: add and close do nothing), h_lines_add each body (stolen), h_lines_close:
 * 0, or the error of making one line (ERR_NOMEM: nothing written, `what` names them) or of the write. */
typedef struct {
    const h_out_t *out;
    const char *mode;
    h_meta_t meta;
    char *buf;
    size_t len, cap;
    int bad;
} h_lines_t;
void h_lines_open(h_lines_t *L, const h_out_t *out, const char *mode);
void h_lines_add(h_lines_t *L, json_t *body);
int h_lines_close(h_lines_t *L, const char *what);
/* dst += part's fields (part stolen; NULL part: -1); 0 or -1 */
int h_jmerge(json_t *dst, json_t *part);
/* JSON arrays of n integers / doubles, or parsed from JSON text (h_traffic_json's); NULL: no memory */
json_t *h_jarr_u64(const uint64_t *v, size_t n);
json_t *h_jarr_f64(const double *v, size_t n);
json_t *h_jarr_text(const char *text);

#endif
