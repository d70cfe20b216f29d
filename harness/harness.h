/* harness.h: the harness program's shared pieces: parsed options, the engine table, the launcher,
 * and the modes (bench, train, model, report) that main() dispatches to. */
#ifndef SB_HARNESS_H
#define SB_HARNESS_H
#include <stddef.h>
#include <stdio.h>
#include "core/comm.h"
#include "core/engine.h"
#include <jansson.h>

#define H_MAX_ENGINES 8
#define H_MAX_SCALING 16
#define H_MAX_FILES   64

typedef struct {
    /* mode and engines */
    const char *mode;                 /* "train" (default), "bench", "run", "model", "report" */
    const char *engines[H_MAX_ENGINES];
    int   nengines;
    const char *impl;                 /* --impl / --tree-impl / --ring-impl: engine implementation */
    /* ranks */
    int   procs;                      /* --procs N: local CPU ranks (workers) started by the launcher */
    int   gpus;                       /* --gpus N */
    int   ranks_per_gpu;              /* --ranks-per-gpu K (0 = 1): world = gpus * K, local rank r on GPU r / K */
    int   tf32;                       /* --tf32: the GPU trainer's cuBLAS GEMMs may use TF32 tensor cores */
    int   nnodes, node_rank;          /* --nnodes, --node-rank */
    const char *master;               /* --master HOST:PORT (or made from --master-addr/--master-port) */
    const char *master_addr;          /* --master-addr A (torchrun's spelling) */
    const char *master_port;          /* --master-port P (default 29500 with --master-addr) */
    const char *init_method;          /* --init-method */
    const char *ifname;               /* --ifname */
    const char *transport;            /* --transport auto|shm|tcp */
    const char *bind;                 /* --bind core|none */
    int   timeout_s;                  /* --timeout (default 60) */
    int   require_auth;               /* --require-auth: refuse to run without a job secret */
    int   scaling[H_MAX_SCALING];     /* --scaling 1,2,4 */
    int   nscaling;
    int   rounds;                     /* --rounds N: run: repeat the comparison, engines alternating (default 3) */
    /* bench */
    size_t size_min, size_max;        /* --sizes MIN:MAX */
    double factor;                    /* --factor */
    int   iters, warmup;              /* --iters, --warmup */
    dtype_t dtype;                    /* --dtype */
    redop_t op;                       /* --op sum|avg */
    int   check;                      /* --check 0|1 (correctness check in bench, default 1) */
    size_t seg_bytes;                 /* --seg-kb */
    /* train */
    const char *model;                /* --model mlp:784-1024-1024-10 */
    const char *data;                 /* --data PATH | synthetic */
    int   batch;                      /* --batch (global batch, split across workers) */
    int   steps, warmup_steps;        /* --steps, --warmup-steps */
    const char *optim;                /* --optim sgd:lr=...  */
    dtype_t grad_dtype;               /* --grad-dtype */
    double bucket_mb;                 /* --bucket-mb */
    int   no_overlap;                 /* --no-overlap */
    int   check_every;                /* --check-every */
    const char *save, *resume;        /* --save, --resume */
    int   drop_last;                  /* --drop-last */
    unsigned long long seed;          /* --seed */
    const char *straggler;            /* --straggler RANK:MS */
    /* the emulated GPU cluster (--model NAME of a real model: trainer/workload.h; harness/cluster.h) */
    const char *emu_device;           /* --device SPEC: preset, throughput=X or tflops=X */
    double shrink, dilate;            /* --shrink S (0: auto), --dilate K (default 1) */
    int   nodes, gpus_per_node;       /* --nodes N --gpus-per-node G */
    int   server_nodes;               /* --server-nodes K: dedicated PS servers on CPU machines of their own */
    /* the engines' own options (engine_ops_t.options), one blob per engine of the table, by index */
    void *eopts[H_MAX_ENGINES];
    int   device;                     /* inside a rank with --gpus: this rank's CUDA device */
    /* output */
    const char *json;                 /* --json FILE|- */
    const char *label;                /* --label NAME: the run's name in every JSON line; report: keep only it */
    const char *timeline;             /* --timeline FILE */
    const char *timeline_tag;         /* --timeline-tag TAG (set by the driver: FILE.TAG.json) */
    const char *net;                  /* --net bw=1gbit[,per=node] */
    int   quiet;
    int   peers;                      /* --peers: also the peer engines (mpi) and PyTorch DDP / gloo (harness/peers.h) */
    const char *format;               /* --format text|json|md|csv (report) */
    const char *plots_dir;            /* --plots DIR (report) */
    char *measured[H_MAX_FILES];      /* report / model: results files (positional ones, then --measured) */
    int   nmeasured;
    int   no_check;                   /* --no-check (model): no check against the measured files' runs */
    int   help;                       /* --help or -h was given (parsing stopped there) */
    int   version;                    /* --version was given (parsing stopped there) */
    unsigned long long given[8];      /* bit i: option i of opts.c's table was on the command line */
    /* raw command line (for result metadata) */
    int   argc;
    char **argv;
    /* positional args (report files) */
    char **pos;
    int   npos;
} h_opts_t;

/* The command line (opts.c): defaults, then argv; 0, or ERR_INVAL / ERR_NOMEM with the message in
 * err_detail() (a usage error: exit 2). On --help it stops there with o->help set; h_opts_usage prints
 * the help text made from the same option table. */
int  h_opts_parse(h_opts_t *o, int argc, char **argv);
void h_opts_usage(FILE *f);
/* `harness MODE --help`: the options that concern MODE, then their defaults */
void h_opts_usage_mode(FILE *f, const char *mode);
/* The options given that the mode does not use: a warning on stderr for each (unless --quiet), or
 * ERR_INVAL for a combination where one would be dropped (--scaling with --procs). For the process the
 * user started, not for the ranks. */
int  h_opts_check_mode(const h_opts_t *o);
/* 1 if the option of this (long) name, or one of its aliases, was on the command line */
int  h_opts_given(const h_opts_t *o, const char *name);

/* The driver (drive.c): one launch per (world size, engine) of mode_override (NULL: o->mode), inside
 * the emulated network of --net when given. 0; ERR_INVAL for a usage error (message in err_detail);
 * ERR_INTERRUPT when a signal stopped it (h_interrupt_signal()); another code when a launch failed
 * (each failure already reported on stderr, err_detail() empty) or could not start (err_detail). */
int  h_drive(h_opts_t *o, const char *mode_override);
/* The emulated cluster's options go together (a real --model; --nodes instead of --procs or --gpus);
 * fills the nodes / gpus_per_node defaults. 0 or ERR_INVAL (err_detail says why). */
int  h_drive_check_cluster(h_opts_t *o);

/* engine table (engines.c, the only list of engines; the first is the default) */
int h_engine_count(void);
const engine_ops_t *h_engine_at(int i);
const engine_ops_t *h_engine_find(const char *name);
/* The one name of an engine configuration, in every table, JSON line ("engine_label"), report, plot and
 * paper: the engine; "/impl" unless the default host path; a descriptive impl that starts with
 * "<engine>-" (ps-sync-servers1, ps-sync-colocated) is the label itself; a PS without one gets
 * "-colocated" or "-serversN". */
void h_engine_label(char *out, size_t len, const char *engine, const char *impl, int servers, int coloc);
/* What a table's header adds after the label: the implementation when the label does not already say
 * it and it is not the default host path ("" otherwise). */
const char *h_engine_impl_note(const char *label, const char *impl);
/* The communication pattern of an engine (cost models, labels): H_PATTERN_NONE for unknown names. */
typedef enum { H_PATTERN_NONE = -1, H_PATTERN_RING = 0, H_PATTERN_TREE, H_PATTERN_PS } h_pattern_t;
h_pattern_t h_engine_pattern(const char *name);
const char *h_engine_names(void);     /* "ring, tree, ps": the table's names for help and errors */
/* The engines' own options: blobs with defaults for every engine (0 or ERR_NOMEM), freed by _free;
 * option k over all engines' tables in order (NULL past the end; *engine = its table index); set
 * option k from a flag's value (0 or ERR_INVAL); the engines' whole-set checks (err_set detail). */
int  h_engine_opts_init(h_opts_t *o);
void h_engine_opts_free(h_opts_t *o);
const engine_opt_t *h_engine_opt(int k, int *engine);
int  h_engine_opt_set(h_opts_t *o, int k, const char *value);
int  h_engine_opts_check(const h_opts_t *o);
const void *h_engine_opts(const h_opts_t *o, const char *engine);
/* Extra (non-training) ranks engine needs beside world training ranks; 1 if it trains in sync. */
int  h_engine_extra_ranks(const h_opts_t *o, const char *engine, int world);
int  h_engine_in_sync(const h_opts_t *o, const char *engine);
/* The engine configuration for `engine` in this world from the options: nworkers is the world minus
 * the engine's extra ranks (from its options, at most world - 1); device from --gpus (o->device). */
void h_engine_cfg(const h_opts_t *o, const comm_t *comm, const char *engine, engine_cfg_t *cfg);
/* 1 if this rank is one of the engine's extra ranks for cfg (rank >= nworkers), e.g. a PS server. */
static inline int h_is_server(const comm_t *comm, const engine_cfg_t *cfg) { return comm->rank >= cfg->nworkers; }

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

/* Result lines (meta.c, with jansson; jsonl.h reads them back). Every line is one flat object:
 * {"schema": H_RESULT_SCHEMA, "mode": MODE, "label": --label (when given), the body's fields, then the
 * metadata "host", "git_sha", "timestamp", "cmdline" (whole), "topology", "cpu", "versions", "net"}.
 * Schema 2: written by jansson, "topology" in every mode (schema 1, unversioned: train said "topo"). */
#define H_RESULT_SCHEMA 2
/* Append the line made of body (stolen; NULL: out of memory, nothing written) to --json, whole or not
 * at all: 0, or ERR_NOMEM / ERR_IO / ERR_NOSPC (err_set). Train lines are spaced ("key": value) as they
 * always were, the others compact. */
int h_result_write(const h_opts_t *o, const h_meta_t *m, const char *mode, json_t *body);
/* The same line, not written: malloc'd text ending in '\n' (*len its length), or NULL (ERR_NOMEM, err_set);
 * for a mode that appends several lines in one write (model). */
char *h_result_line(const h_opts_t *o, const h_meta_t *m, const char *mode, json_t *body, size_t *len);
/* Several result lines appended in one write at the end, whole or not at all (model's tables):
 * h_lines_open (no --json: add and close do nothing), h_lines_add each body (stolen), h_lines_close:
 * 0, or the error of making one line (ERR_NOMEM: nothing written, `what` names them) or of the write. */
typedef struct {
    const h_opts_t *o;
    const char *mode;
    h_meta_t meta;
    char *buf;
    size_t len, cap;
    int bad;
} h_lines_t;
void h_lines_open(h_lines_t *L, const h_opts_t *o, const char *mode);
void h_lines_add(h_lines_t *L, json_t *body);
int h_lines_close(h_lines_t *L, const char *what);
/* dst += part's fields (part stolen; NULL part: -1); 0 or -1 */
int h_jmerge(json_t *dst, json_t *part);
/* JSON arrays of n integers / doubles, or parsed from JSON text (h_traffic_json's); NULL: no memory */
json_t *h_jarr_u64(const uint64_t *v, size_t n);
json_t *h_jarr_f64(const double *v, size_t n);
json_t *h_jarr_text(const char *text);

/* `harness run` (run.c): warn on out when the load average exceeds the cores or the ranks outnumber them
 * (1 if it warned); after the rounds, the train samples/s per engine (median, min - max) from the
 * results file and whether the ranking is within the spread (0, or -1 when the file cannot be read). */
int h_run_load_check(const h_opts_t *o, FILE *out);
int h_run_summary(const char *json, FILE *out);

/* modes: each runs on one rank inside the launched world */
/* h_bench: 0 or a negative code; *wrong set when some results were wrong (err_detail says which,
 * on rank 0: "bench: N wrong elements with engine E", one such line per engine). */
int h_bench(const h_opts_t *o, comm_t *comm, int *wrong);
int h_train(const h_opts_t *o, comm_t *comm);

#endif
