/* opts.c: the harness command line: one table of options (name, argument kind, where the value goes,
 * help text) from which getopt_long's option array, the parser and `harness --help` are all made;
 * each engine's own options are added from the engine table (engines.c). */
#include "harness/harness.h"
#include "harness/peers.h"
#include "core/err.h"
#include "trainer/workload.h"
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- value parsers ---------- */

static int s_parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0) return -1;
    double m = 1;
    if (*end == 'K' || *end == 'k') m = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') m = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') m = 1024.0 * 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end || v * m >= 0x1p62) return -1;
    *out = (size_t)(v * m);
    return 0;
}

static int s_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int s_bad(const char *flag, const char *val, const char *want)
{
    return err_set(ERR_INVAL, "bad value '%s' for %s: expected %s", val, flag, want);
}

/* The modes (first argument) */
static const char *const s_modes[] = {"train", "bench", "run", "selftest", "report", "model", "gemm", "explain", NULL};
static int s_known_mode(const char *m)
{
    for (int i = 0; s_modes[i]; i++)
        if (!strcmp(m, s_modes[i])) return 1;
    return 0;
}

/* ---------- the option table ---------- */

enum { K_SECTION, K_FLAG, K_STR, K_INT, K_CHOICE, K_FN, K_NONE, K_HELP };

typedef struct s_opt s_opt_t;
struct s_opt {
    const char *name;                 /* long name (NULL: a help section line only) */
    int kind;                         /* K_*: how the value is taken */
    size_t off;                       /* where it goes in h_opts_t (K_FLAG, K_STR, K_INT, K_CHOICE, some K_FN) */
    int lo, hi;                       /* K_INT bounds */
    const char *arg;                  /* K_CHOICE: "a|b|c"; otherwise unused */
    const char *want;                 /* what a bad value should have been (error message) */
    int (*fn)(h_opts_t *o, const s_opt_t *d, const char *v); /* K_FN; 0 or ERR_INVAL (err_set) */
    const char *help;                 /* help text (whole lines); NULL: none or shared with a neighbour */
    const char *modes;                /* K_SECTION: the modes its options concern (`harness MODE --help`) */
    void (*help_fn)(FILE *f);         /* dynamic help text (the engine table's) */
};

#define F(field) offsetof(h_opts_t, field)
#define SECTION(text, m) {.kind = K_SECTION, .help = text, .modes = m}
#define FLAG(n, field, h) {.name = n, .kind = K_FLAG, .off = F(field), .help = h}
#define STR(n, field, h) {.name = n, .kind = K_STR, .off = F(field), .help = h}
#define INT(n, field, l, u, w, h) {.name = n, .kind = K_INT, .off = F(field), .lo = l, .hi = u, .want = w, .help = h}
#define CHOICE(n, field, c, w, h) {.name = n, .kind = K_CHOICE, .off = F(field), .arg = c, .want = w, .help = h}
#define FN(n, f, field, w, h) {.name = n, .kind = K_FN, .fn = f, .off = F(field), .want = w, .help = h}

static int s_scaling(h_opts_t *o, const s_opt_t *d, const char *v)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    o->nscaling = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nscaling >= H_MAX_SCALING || s_parse_int(t, 1, 1 << 20, &o->scaling[o->nscaling]) < 0)
            return s_bad("--scaling", v, d->want);
        o->nscaling++;
    }
    return o->nscaling ? 0 : s_bad("--scaling", v, d->want);
}

static int s_engine(h_opts_t *o, const s_opt_t *d, const char *v)
{
    static char engbuf[256];
    (void)d;
    snprintf(engbuf, sizeof engbuf, "%s", v);
    o->nengines = 0;
    for (char *save = NULL, *t = strtok_r(engbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (h_engine_unbuilt(t)) return err_set(ERR_INVAL, "--engine %s: %s", t, h_engine_unbuilt(t));
        if (!h_engine_find(t)) return err_set(ERR_INVAL, "unknown engine '%s' (known: %s)", t, h_engine_names());
        if (o->nengines >= H_MAX_ENGINES) return s_bad("--engine", v, "at most 8 engines");
        o->engines[o->nengines++] = t;
    }
    return o->nengines ? 0 : s_bad("--engine", v, h_engine_names());
}

static int s_seg(h_opts_t *o, const s_opt_t *d, const char *v)
{
    int kb;
    if (s_parse_int(v, 1, 1 << 20, &kb)) return s_bad("--seg-kb", v, d->want);
    o->seg_bytes = (size_t)kb * 1024;
    return 0;
}

static int s_sizes(h_opts_t *o, const s_opt_t *d, const char *v)
{
    char b[128];
    snprintf(b, sizeof b, "%s", v);
    char *colon = strchr(b, ':');
    if (colon) *colon = '\0';
    if (s_parse_size(b, &o->size_min) || (colon ? s_parse_size(colon + 1, &o->size_max) : (o->size_max = o->size_min, 0)) ||
        o->size_min > o->size_max || o->size_min == 0)
        return s_bad("--sizes", v, d->want);
    return 0;
}

/* nccl-tests' -b/--minbytes and -e/--maxbytes: one end of --sizes (MIN <= MAX is checked at the end) */
static int s_bytes(h_opts_t *o, const s_opt_t *d, const char *v)
{
    size_t *p = (size_t *)((char *)o + d->off), x;
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", d->name);
    if (s_parse_size(v, &x) || x == 0) return s_bad(flag, v, d->want);
    *p = x;
    return 0;
}

/* a double > 1 (--factor) or > 0 (--bucket-mb) */
static int s_double(h_opts_t *o, const s_opt_t *d, const char *v)
{
    char *e;
    double *p = (double *)((char *)o + d->off), x = strtod(v, &e);
    *p = x;
    int over_one = d->off == F(factor);
    if (*e || e == v || !isfinite(x) || (over_one ? x <= 1.0 : x <= 0)) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", d->name);
        return s_bad(flag, v, d->want);
    }
    return 0;
}

/* --shrink S|auto (auto: 0) and --dilate K: factors >= 1 */
static int s_factor(h_opts_t *o, const s_opt_t *d, const char *v)
{
    double *p = (double *)((char *)o + d->off);
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", d->name);
    if (d->off == F(shrink) && !strcmp(v, "auto")) {
        *p = 0;
        return 0;
    }
    char *e;
    double x = strtod(v, &e);
    if (*e || e == v || !(x >= 1) || x > 1e6) return s_bad(flag, v, d->want);
    *p = x;
    return 0;
}

static int s_dtype(h_opts_t *o, const s_opt_t *d, const char *v)
{
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", d->name);
    /* nccl-tests' spellings (-d float|half|bfloat16) too */
    const char *t = !strcmp(v, "float") || !strcmp(v, "float32") ? "f32" : !strcmp(v, "half") || !strcmp(v, "float16") ? "f16"
                  : !strcmp(v, "bfloat16") ? "bf16" : v;
    return dt_parse(t, (dtype_t *)((char *)o + d->off)) ? s_bad(flag, v, d->want) : 0;
}

static int s_op(h_opts_t *o, const s_opt_t *d, const char *v)
{
    return op_parse(v, &o->op) ? s_bad("--op", v, d->want) : 0;
}

static int s_seed(h_opts_t *o, const s_opt_t *d, const char *v)
{
    char *e;
    o->seed = strtoull(v, &e, 10);
    return *e ? s_bad("--seed", v, d->want) : 0;
}

static int s_measured(h_opts_t *o, const s_opt_t *d, const char *v)
{
    if (o->nmeasured >= H_MAX_FILES) return s_bad("--measured", v, d->want);
    o->measured[o->nmeasured++] = (char *)v;
    return 0;
}

static int s_mode(h_opts_t *o, const s_opt_t *d, const char *v)
{
    if (!s_known_mode(v)) return s_bad("--mode", v, d->want);
    o->mode = v;
    return 0;
}

static void s_help_engine(FILE *f)
{
    fprintf(f, "  --engine LIST         comma list of: %s (default %s)\n", h_engine_names(), h_engine_at(0)->name);
}

/* --impl NAME and each engine's own options, from the engine table */
static void s_help_impl(FILE *f)
{
    char impls[256] = "";
    size_t off = 0;
    for (int i = 0; i < h_engine_count() && off < sizeof impls; i++)
        if (h_engine_at(i)->impls)
            off += (size_t)snprintf(impls + off, sizeof impls - off, "%s%s: %s", off ? "; " : "", h_engine_at(i)->name,
                                    h_engine_at(i)->impls);
    fprintf(f, "  %-20s  engine implementation (%s)\n", "--impl NAME", impls);
    const engine_opt_t *eo;
    for (int k = 0; (eo = h_engine_opt(k, NULL)); k++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s%s%s", eo->name, eo->metavar ? " " : "", eo->metavar ? eo->metavar : "");
        fprintf(f, "  %-20s  %s\n", flag, eo->help);
    }
}

static const s_opt_t s_opts[] = {
    SECTION("\nRanks:\n", " train bench run model selftest gemm explain "),
    INT("procs", procs, 1, 4096, "a rank count >= 1",
        "  --procs N             start N local CPU worker ranks (plus --servers for ps)\n"),
    INT("gpus", gpus, 1, 1024, "a GPU count >= 1", "  --gpus N              one rank per GPU\n"),
    INT("ranks-per-gpu", ranks_per_gpu, 1, 64, "a count in [1, 64]",
        "  --ranks-per-gpu K     with --gpus: K ranks share each GPU (world = N x K; e.g. the IPC tree or\n"
        "                        several PS workers on one GPU; NCCL refuses two ranks on one GPU)\n"),
    FLAG("tf32", tf32, "  --tf32                train --gpus: cuBLAS may use TF32 tensor cores (f32 otherwise)\n"),
    FN("scaling", s_scaling, nscaling, "a comma list of world sizes, e.g. 1,2,4",
       "  --scaling 1,2,4       repeat for each world size (with --procs)\n"),
    INT("nnodes", nnodes, 1, 100000, "a node count >= 1",
        "  --nnodes N --node-rank R --master HOST:PORT   multi-node: each node starts its --procs ranks\n"),
    INT("node-rank", node_rank, 0, 100000, "a node index >= 0", NULL),
    STR("master", master, NULL),
    STR("master-addr", master_addr,
        "  --master-addr A --master-port P   torchrun's spelling of --master A:P (port default 29500)\n"),
    STR("master-port", master_port, NULL),
    STR("init-method", init_method,
        "  --init-method M       tcp://HOST:PORT | env:// | file:///path (inside ranks; default env://,\n"
        "                        which reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, or\n"
        "                        Slurm's SLURM_PROCID/SLURM_NTASKS or OpenMPI's OMPI_COMM_WORLD_*)\n"),
    STR("ifname", ifname, "  --ifname IF           network interface for peer traffic (or SYNCBENCH_SOCKET_IFNAME)\n"),
    CHOICE("transport", transport, "auto|shm|tcp|zmq", "auto, shm, tcp or zmq",
           "  --transport T         auto (shm within a node, tcp across) | shm | tcp | zmq\n"),
    CHOICE("bind", bind, "core|block|numa|none|auto", "auto, core, block, numa or none",
           "  --bind auto|core|numa|none   bind ranks with hwloc (auto: bench binds local rank i to core i mod cores, "
           "train does not bind)\n"),
    INT("timeout", timeout_s, 1, 86400, "seconds >= 1",
        "  --timeout S           every blocking step gives up after S seconds (default 60)\n"),
    FLAG("require-auth", require_auth,
         "  --require-auth        refuse to run without a job secret (SYNCBENCH_JOB_SECRET or _FILE; the launcher\n"
         "                        makes one for a single node, --nnodes needs the same one on every node)\n"),
    SECTION("\nEngines:\n", " train bench run explain "),
    {.name = "engine", .kind = K_FN, .fn = s_engine, .help_fn = s_help_engine},
    {.name = "impl", .kind = K_STR, .off = F(impl), .help_fn = s_help_impl},
    STR("tree-impl", impl, NULL),
    STR("ring-impl", impl, NULL),
    FN("seg-kb", s_seg, seg_bytes, "KiB >= 1", "  --seg-kb KB           pipelining segment of ring/tree (default 256)\n"),
    SECTION("\nBench:\n", " bench run gemm explain "),
    FN("sizes", s_sizes, size_min, "MIN:MAX in bytes with K/M/G suffixes, 0 < MIN <= MAX (e.g. 4K:64M)",
       "  --sizes MIN:MAX       bytes, K/M/G suffixes are powers of 1024 (default 4K:64M); one size works\n"),
    FN("factor", s_double, factor, "a number > 1", "  --factor F            size multiplier (default 2)\n"),
    INT("iters", iters, 1, 1000000, "an integer >= 1",
        "  --iters N --warmup N  timed and warm-up iterations (default 20, 5)\n"),
    INT("warmup", warmup, 0, 1000000, "an integer >= 0", NULL),
    FN("dtype", s_dtype, dtype, "f32, f16 or bf16", "  --dtype f32|f16|bf16  element type (default f32)\n"),
    FN("op", s_op, op, "sum or avg", "  --op sum|avg          reduction (default sum)\n"),
    INT("check", check, 0, 1, "0 or 1", "  --check 0|1           check every result exactly (default 1)\n"),
    FN("minbytes", s_bytes, size_min, "bytes > 0 with K/M/G suffixes", NULL),
    FN("maxbytes", s_bytes, size_max, "bytes > 0 with K/M/G suffixes", NULL),
    SECTION("\nTrain:\n", " train run gemm model "),
    STR("model", model,
        "  --model mlp:784-1024-1024-10   --data synthetic|PATH   --batch B (global)   --steps N\n"
        "  --warmup-steps N  --optim sgd:lr=0.05,momentum=0.9 | adam:lr=1e-3   --grad-dtype f32|f16|bf16\n"
        "  --bucket-mb MB  --no-overlap  --check-every N  --save PATH  --resume PATH  --drop-last  --seed N\n"
        "  --straggler RANK:MS\n"),
    STR("data", data, NULL),
    INT("batch", batch, 1, 1 << 24, "a batch size >= 1", NULL),
    INT("steps", steps, 1, 1 << 30, "an integer >= 1", NULL),
    INT("warmup-steps", warmup_steps, 0, 1 << 30, "an integer >= 0", NULL),
    STR("optim", optim, NULL),
    FN("grad-dtype", s_dtype, grad_dtype, "f32, f16 or bf16", NULL),
    FN("bucket-mb", s_double, bucket_mb, "MiB > 0", NULL),
    FLAG("no-overlap", no_overlap, NULL),
    INT("check-every", check_every, 0, 1 << 30, "steps >= 0", NULL),
    STR("save", save, NULL),
    STR("resume", resume, NULL),
    FLAG("drop-last", drop_last, NULL),
    FN("seed", s_seed, seed, "an integer", NULL),
    STR("straggler", straggler, NULL),
    SECTION("\nEmulated GPU cluster (train --model resnet50|resnet101|vgg16|inception3|bert-base|bert-large|gpt2):\n",
            " train model bench "),
    STR("device", emu_device,
        "  --device D            emulated device: pascal, v100, v100-amp, a100, a100-amp (published throughputs),\n"
        "                        throughput=SAMPLES_PER_S or tflops=X (default v100)\n"),
    INT("nodes", nodes, 1, 4096, "a machine count >= 1",
        "  --nodes N --gpus-per-node G   N machines of G emulated GPUs (one rank each); with --net inter=RATE\n"
        "                        every machine gets one shaped NIC (root), ranks of a machine share memory\n"),
    INT("gpus-per-node", gpus_per_node, 1, 1024, "a GPU count >= 1", NULL),
    INT("server-nodes", server_nodes, 0, 4096, "a machine count >= 0",
        "  --server-nodes K      dedicated PS servers on K CPU-only machines (the BytePS layout)\n"),
    FN("shrink", s_factor, shrink, "a factor >= 1 or auto",
       "  --shrink S|auto       divide every tensor and link rate by S (transfer times unchanged, host load / S;\n"
       "                        default auto: as much as this host needs)\n"),
    FN("dilate", s_factor, dilate, "a factor >= 1",
       "  --dilate K            compute times x K, link rates / K, reported times / K (default 1)\n"),
    SECTION("\nOutput:\n", " train bench run model report gemm explain "),
    STR("net", net,
        "  --net bw=RATE[,per=rank|node][,nodes=K]   emulated network (root): one namespace per rank (or per\n"
        "                        node group), veth + bridge, tc tbf at RATE both ways (e.g. bw=1gbit); TCP\n"),
    STR("json", json, "  --json FILE           append one JSON object per line per result ('-' = stdout)\n"),
    STR("timeline", timeline,
        "  --timeline FILE       train/bench: Chrome trace JSON of every rank (compute, buckets, collectives,\n"
        "                        segments, waits) for chrome://tracing or ui.perfetto.dev\n"),
    STR("plots", plots_dir, "  --plots DIR           report: where figures go (default: plots/ next to the first file)\n"),
    CHOICE("format", format, "text|json|md|csv", "text, json, md or csv",
           "  --format F            report: text (default), json, md or csv tables on stdout\n"),
    FN("measured", s_measured, nmeasured, "at most 64 files",
       "  --measured FILE       model: a results file to compare against (as a positional FILE)\n"),
    FLAG("quiet", quiet, "  --quiet               no progress lines\n"),
    FLAG("peers", peers,
         "  --peers               bench/train/run: also the peers, in the same rounds: --engine mpi (MPI_Allreduce,\n"
         "                        through mpirun) and PyTorch DDP / all_reduce over gloo (peers/torch_ddp.py)\n"),
    {.name = "help", .kind = K_HELP},
    {.name = "version", .kind = K_HELP},
    /* set by the driver on a rank's command line (not in --help) */
    {.name = "as-rank", .kind = K_NONE},
    FN("mode", s_mode, mode, "a mode", NULL),
    STR("timeline-tag", timeline_tag, NULL),
};
#define S_NOPTS (sizeof s_opts / sizeof s_opts[0])
#define S_ENGOPT 1024 /* getopt value S_ENGOPT + k: engine option k (h_engine_opt); table entry i is 256 + i */

static void s_usage_aliases(FILE *f);

void h_opts_usage(FILE *f)
{
    fprintf(f,
"usage: harness [MODE] [options]\n"
"\n"
"Modes:\n"
"  train (default)   train the same model with each engine; throughput, step times, memory balance\n"
"  bench             the collective alone, nccl-tests style (size, count, algbw, busbw, #wrong)\n"
"  run               the default CPU comparison: bench + train, every engine, 4 ranks\n"
"  gemm              the bare BLAS GEMMs of one training step (the trainer's compute ceiling)\n"
"  selftest          launcher self-test (SYNCBENCH_SELFTEST_FAIL/HANG/SLEEP_MS)\n"
"  report FILE...    engines side by side from results files, plus PNG/SVG plots (--plots DIR)\n"
"  model [FILE...]   fit alpha/beta/gamma on this setup (2 ranks), predict each engine beside the\n"
"                    measured results in FILE... (or --measured FILE), extrapolate to P = 1024\n"
"  explain           an engine's allreduce schedule step by step for a small world (--engine ring|tree|ps,\n"
"                    --procs N, --servers S, --sizes BYTES; --plots DIR: an SVG per step) and its bytes per link\n");
    for (size_t i = 0; i < S_NOPTS; i++) {
        if (s_opts[i].help_fn) s_opts[i].help_fn(f);
        else if (s_opts[i].help) fputs(s_opts[i].help, f);
    }
    s_usage_aliases(f);
    fprintf(f, "\n  -h, --help            this text (harness MODE --help: that mode's options and defaults)\n"
               "  --version             the git sha this binary was built from\n");
}

/* Other tools' spellings of the table's options: torchrun (--nproc-per-node, --node_rank, ...), nccl-tests'
 * long forms (--minbytes, --stepfactor, ...) and their short options (-b -e -f -n -w -c -d -o, -h); mpirun's
 * -np N is read as --procs N (h_opts_parse). An alias takes its option's getopt value, so the two never
 * make a prefix ambiguous. */
static const struct { const char *alias, *name; } s_aliases[] = {
    {"nproc-per-node", "procs"}, {"nproc_per_node", "procs"}, {"node_rank", "node-rank"},
    {"master_addr", "master-addr"}, {"master_port", "master-port"}, {"stepfactor", "factor"},
    {"warmup_iters", "warmup"}, {"datatype", "dtype"},
};
#define S_NALIASES (sizeof s_aliases / sizeof s_aliases[0])
static const struct { char c; const char *name; } s_shorts[] = {
    {'b', "minbytes"}, {'e', "maxbytes"}, {'f', "factor"}, {'n', "iters"}, {'w', "warmup"},
    {'c', "check"},    {'d', "dtype"},    {'o', "op"},     {'h', "help"},
};
#define S_NSHORTS (sizeof s_shorts / sizeof s_shorts[0])
#define S_SHORTOPTS ":b:e:f:n:w:c:d:o:h"

static int s_index_of(const char *name)
{
    for (size_t i = 0; i < S_NOPTS; i++)
        if (s_opts[i].name && !strcmp(s_opts[i].name, name)) return (int)i;
    return -1;
}

/* the table's options, their aliases, then every engine's own options (S_ENGOPT + k), NULL-terminated */
static const struct option *s_longopts(void)
{
    static struct option all[S_NOPTS + S_NALIASES + 64];
    size_t n = 0;
    for (size_t i = 0; i < S_NOPTS; i++)
        if (s_opts[i].name) {
            int has_arg = s_opts[i].kind != K_FLAG && s_opts[i].kind != K_NONE && s_opts[i].kind != K_HELP;
            all[n++] = (struct option){s_opts[i].name, has_arg, 0, 256 + (int)i};
        }
    for (size_t a = 0; a < S_NALIASES; a++) {
        int i = s_index_of(s_aliases[a].name);
        if (i >= 0) all[n++] = (struct option){s_aliases[a].alias, 1, 0, 256 + i};
    }
    const engine_opt_t *eo;
    for (int k = 0; (eo = h_engine_opt(k, NULL)) && n + 1 < sizeof all / sizeof all[0]; k++)
        all[n++] = (struct option){eo->name, eo->has_value ? 1 : 0, 0, S_ENGOPT + k};
    all[n] = (struct option){0, 0, 0, 0};
    return all;
}

/* getopt_long's '?' for the long option arg ("--warm" or "--warm=3"): ambiguous (naming the options it
 * could be) or unknown. */
static int s_bad_long(const char *arg)
{
    char name[128];
    snprintf(name, sizeof name, "%s", arg + 2);
    name[strcspn(name, "=")] = '\0';
    size_t len = strlen(name);
    char cands[512] = "";
    size_t off = 0;
    int n = 0, vals[16];
    for (const struct option *lo = s_longopts(); lo->name && len; lo++) {
        if (strncmp(lo->name, name, len)) continue;
        int seen = 0;
        for (int j = 0; j < n && j < 16; j++) seen |= vals[j] == lo->val;
        if (seen) continue;
        if (n < 16) vals[n] = lo->val;
        n++;
        if (off < sizeof cands)
            off += (size_t)snprintf(cands + off, sizeof cands - off, "%s--%s", off ? ", " : "", lo->name);
    }
    if (n > 1) return err_set(ERR_INVAL, "--%s is ambiguous: %s", name, cands);
    return err_set(ERR_INVAL, "unknown option '--%s'; see harness --help", name);
}

static void s_usage_aliases(FILE *f)
{
    fprintf(f, "\nOther tools' spellings (torchrun, nccl-tests, mpirun):\n  ");
    for (size_t a = 0; a < S_NALIASES; a++) fprintf(f, "--%s = --%s%s", s_aliases[a].alias, s_aliases[a].name,
                                                    a % 3 == 2 || a + 1 == S_NALIASES ? "\n  " : ", ");
    for (size_t k = 0; k < S_NSHORTS; k++) fprintf(f, "-%c = --%s%s", s_shorts[k].c, s_shorts[k].name, k % 5 == 4 ? "\n  " : ", ");
    fprintf(f, "-np N = --procs N; -d also takes float|half|bfloat16\n");
}

/* The default of table entry d (o: the defaults), for `harness MODE --help`. */
static void s_default_of(const h_opts_t *o, const s_opt_t *d, char *buf, size_t len)
{
    const char *at = (const char *)o + d->off;
    snprintf(buf, len, "-");
    switch (d->kind) {
    case K_FLAG: snprintf(buf, len, "off"); return;
    case K_INT: if (*(const int *)at) snprintf(buf, len, "%d", *(const int *)at); return;
    case K_STR:
    case K_CHOICE: if (*(const char *const *)at) snprintf(buf, len, "%s", *(const char *const *)at); return;
    case K_FN: break;
    default: return;
    }
    if (d->fn == s_engine) snprintf(buf, len, "%s", o->engines[0]);
    else if (d->fn == s_double || (d->fn == s_factor && d->off == F(dilate))) snprintf(buf, len, "%g", *(const double *)at);
    else if (d->fn == s_factor) snprintf(buf, len, "auto");
    else if (d->fn == s_dtype) snprintf(buf, len, "%s", dt_name(*(const dtype_t *)at));
    else if (d->fn == s_op) snprintf(buf, len, "%s", op_name(o->op));
    else if (d->fn == s_sizes) snprintf(buf, len, "%zuK:%zuM", o->size_min >> 10, o->size_max >> 20);
    else if (d->fn == s_bytes) snprintf(buf, len, "%zu", *(const size_t *)at);
    else if (d->fn == s_seed) snprintf(buf, len, "%llu", o->seed);
    else if (d->fn == s_seg) snprintf(buf, len, "256");
}

static void s_defaults(h_opts_t *o, int argc, char **argv);

void h_opts_usage_mode(FILE *f, const char *mode)
{
    char key[32];
    snprintf(key, sizeof key, " %s ", mode);
    h_opts_t o;
    s_defaults(&o, 0, NULL);
    fprintf(f, "usage: harness %s [options]   (every mode and option: harness --help)\n", mode);
    int on = 0;
    for (size_t i = 0; i < S_NOPTS; i++) {
        if (s_opts[i].kind == K_SECTION) on = s_opts[i].modes && strstr(s_opts[i].modes, key);
        if (!on) continue;
        if (s_opts[i].help_fn) s_opts[i].help_fn(f);
        else if (s_opts[i].help) fputs(s_opts[i].help, f);
    }
    fprintf(f, "\nDefaults of `harness %s`%s:\n", mode, !strcmp(mode, "run") ? " (run: every engine, --procs 4)" : "");
    size_t col = 0;
    on = 0;
    for (size_t i = 0; i < S_NOPTS; i++) {
        if (s_opts[i].kind == K_SECTION) on = s_opts[i].modes && strstr(s_opts[i].modes, key);
        if (s_opts[i].kind == K_HELP) break; /* the driver's own options follow */
        if (!on || !s_opts[i].name || s_opts[i].fn == s_bytes) continue;
        int same = 0; /* --tree-impl, --ring-impl: --impl's */
        for (size_t j = 0; j < i; j++) same |= s_opts[j].name && s_opts[j].off == s_opts[i].off && s_opts[j].kind == s_opts[i].kind;
        if (same) continue;
        char v[64], item[128];
        s_default_of(&o, &s_opts[i], v, sizeof v);
        int n = snprintf(item, sizeof item, "--%s %s", s_opts[i].name, v);
        if (col && col + (size_t)n + 3 > 100) fputc('\n', f), col = 0;
        fprintf(f, "%s%s", col ? "   " : "  ", item);
        col += (size_t)n + 3;
    }
    fprintf(f, "\n(-: unset)\n");
    if (strstr(" train bench run ", key)) s_usage_aliases(f);
}

int h_opts_given(const h_opts_t *o, const char *name)
{
    int i = s_index_of(name);
    return i >= 0 && (size_t)i < 64 * sizeof o->given / sizeof o->given[0] && (o->given[i / 64] >> (i % 64) & 1);
}

int h_opts_check_mode(const h_opts_t *o)
{
    if (h_opts_given(o, "scaling") && h_opts_given(o, "procs"))
        return err_set(ERR_INVAL, "--scaling sets the world sizes: --procs would be ignored; give one of them "
                       "(e.g. --scaling 1,2,4 alone)");
    if (!strcmp(o->mode, "run") && h_opts_given(o, "scaling"))
        return err_set(ERR_INVAL, "run is one world of --procs ranks (default 4): --scaling is for bench or train");
    char key[32];
    snprintf(key, sizeof key, " %s ", o->mode);
    const char *sec = NULL;
    for (size_t i = 0; i < S_NOPTS; i++) {
        if (s_opts[i].kind == K_SECTION) sec = s_opts[i].modes;
        if (s_opts[i].kind == K_HELP) break;
        int unused = sec && !strstr(sec, key);
        /* model (the probe): one launch of the default engine, whatever --engine and --scaling say */
        if (!strcmp(o->mode, "model") && !workload_is_known(o->model) &&
            (!strcmp(s_opts[i].name ? s_opts[i].name : "", "engine") || !strcmp(s_opts[i].name ? s_opts[i].name : "", "scaling")))
            unused = 1;
        if (s_opts[i].off == F(model) && s_opts[i].kind == K_STR && workload_is_known(o->model) &&
            strstr(" train model bench run gemm ", key))
            unused = 0; /* the emulated cluster's model: bench on its machines too */
        if (unused && s_opts[i].name && h_opts_given(o, s_opts[i].name) && !o->quiet)
            fprintf(stderr, "harness: warning: --%s does nothing in %s mode (ignored); see harness %s --help\n",
                    s_opts[i].name, o->mode, o->mode);
    }
    return 0;
}

/* whether v is one of the '|'-separated words of choices */
static int s_is_choice(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; p; p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL)
        if (!strncmp(p, v, n) && (p[n] == '|' || p[n] == '\0')) return 1;
    return 0;
}

/* Apply table entry d to its value v (NULL for flags). */
static int s_apply(h_opts_t *o, const s_opt_t *d, const char *v)
{
    size_t i = (size_t)(d - s_opts);
    if (i < 64 * sizeof o->given / sizeof o->given[0]) o->given[i / 64] |= 1ull << (i % 64);
    char *at = (char *)o + d->off;
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", d->name);
    switch (d->kind) {
    case K_FLAG: *(int *)at = 1; return 0;
    case K_STR: *(const char **)at = v; return 0;
    case K_INT: return s_parse_int(v, d->lo, d->hi, (int *)at) ? s_bad(flag, v, d->want) : 0;
    case K_CHOICE:
        if (!s_is_choice(d->arg, v)) return s_bad(flag, v, d->want);
        *(const char **)at = v;
        return 0;
    case K_FN: return d->fn(o, d, v);
    case K_HELP: *(strcmp(d->name, "version") ? &o->help : &o->version) = 1; return 0;
    default: return 0;
    }
}

static void s_defaults(h_opts_t *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->mode = "train";
    o->engines[0] = h_engine_at(0)->name;
    o->nengines = 1;
    o->timeout_s = 60;
    o->size_min = 4096;
    o->size_max = 64u << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->dtype = DT_F32;
    o->op = OP_SUM;
    o->check = 1;
    o->model = "mlp:784-1024-1024-10";
    o->data = "synthetic";
    o->batch = 256;
    o->steps = 50;
    o->warmup_steps = 5;
    o->optim = "sgd";
    o->grad_dtype = DT_F32;
    o->bucket_mb = 25;
    o->check_every = 100;
    o->seed = 42;
    o->dilate = 1;
    o->bind = "auto";
    o->transport = "auto";
    o->argc = argc;
    o->argv = argv;
}

/* After the options: positional arguments and the checks across options. */
static int s_finish(h_opts_t *o, int argc, char **argv, int next)
{
    if (next < argc) {
        o->pos = argv + next;
        o->npos = argc - next;
        if (strcmp(o->mode, "report") && strcmp(o->mode, "model"))
            return err_set(ERR_INVAL, "unexpected argument '%s'; see harness --help", argv[next]);
        /* results files; --measured files come after them */
        for (int i = 0; i < o->npos && o->nmeasured < H_MAX_FILES; i++) o->measured[o->nmeasured++] = o->pos[i];
    }
    if (o->master_addr || o->master_port) {
        static char master[300];
        int port;
        if (o->master) return err_set(ERR_INVAL, "--master HOST:PORT and --master-addr/--master-port are two spellings: give one");
        if (!o->master_addr) return err_set(ERR_INVAL, "--master-port needs --master-addr (the address of node 0)");
        if (o->master_port && s_parse_int(o->master_port, 1, 65535, &port))
            return s_bad("--master-port", o->master_port, "a port in [1, 65535]");
        snprintf(master, sizeof master, "%s:%s", o->master_addr, o->master_port ? o->master_port : "29500");
        o->master = master;
    }
    if (o->size_min > o->size_max)
        return err_set(ERR_INVAL, "the smallest size (%zu bytes, --sizes or -b) is above the largest (%zu, -e)", o->size_min,
                       o->size_max);
    if (o->ranks_per_gpu && !o->gpus) return err_set(ERR_INVAL, "--ranks-per-gpu needs --gpus N");
    if (o->gpus && o->procs)
        return err_set(ERR_INVAL, "--gpus and --procs are exclusive (one rank per GPU, or N CPU ranks)");
    if ((o->nnodes > 1 || o->node_rank) && !o->master)
        return err_set(ERR_INVAL, "--nnodes needs --master HOST:PORT (the address of node 0)");
    if (o->nnodes && o->node_rank >= o->nnodes)
        return err_set(ERR_INVAL, "--node-rank %d must be < --nnodes %d", o->node_rank, o->nnodes);
    CHECK(h_drive_check_cluster(o));
    return h_engine_opts_check(o) < 0 ? ERR_INVAL : 0; /* the engine's detail stays */
}

int h_opts_parse(h_opts_t *o, int argc, char **argv)
{
    s_defaults(o, argc, argv);
    if (h_engine_opts_init(o) < 0) return err_set(ERR_NOMEM, "out of memory");
    int first = 1;
    if (argc > 1 && argv[1][0] != '-') {
        o->mode = argv[1];
        first = 2;
    }
    /* a rank's command line: the user's, then --as-rank and what the driver chose for this launch;
     * result metadata records the user's part */
    for (int i = first; i < argc; i++)
        if (!strcmp(argv[i], "--as-rank")) {
            o->argc = i;
            break;
        }
    if (!s_known_mode(o->mode))
        return err_set(ERR_INVAL, "unknown mode '%s' (train, bench, run, selftest, report, model, gemm, explain); see harness --help",
                       o->mode);
    /* mpirun's -np N: --procs N */
    for (int i = first; i < o->argc; i++)
        if (!strcmp(argv[i], "-np")) argv[i] = "--procs";
    optind = first;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, S_SHORTOPTS, s_longopts(), NULL)) != -1) {
        const char *v = optarg;
        for (size_t k = 0; k < S_NSHORTS; k++)
            if (c == s_shorts[k].c) c = 256 + s_index_of(s_shorts[k].name);
        if (c >= 256 && c < 256 + (int)S_NOPTS) {
            int rc = s_apply(o, &s_opts[c - 256], v);
            if (rc < 0 || o->help || o->version) return rc;
        } else if (c >= S_ENGOPT && h_engine_opt(c - S_ENGOPT, NULL)) {
            const engine_opt_t *eo = h_engine_opt(c - S_ENGOPT, NULL);
            char flag[64];
            snprintf(flag, sizeof flag, "--%s", eo->name);
            if (h_engine_opt_set(o, c - S_ENGOPT, v) < 0) return s_bad(flag, v ? v : "", eo->want ? eo->want : "a valid value");
        } else if (c == ':') {
            if (optopt && optopt < 256) return err_set(ERR_INVAL, "-%c needs a value", optopt);
            return err_set(ERR_INVAL, "%s needs a value", argv[optind - 1]);
        } else if (optopt) {
            /* a short option: getopt is inside argv[optind] (or just past it) */
            return err_set(ERR_INVAL, "unknown option '-%c'%s; see harness --help", optopt,
                           optopt == 'p' ? " (mpirun's -np N is understood alone: -np 4)" : "");
        } else {
            return s_bad_long(argv[optind - 1]);
        }
    }
    return s_finish(o, argc, argv, optind);
}
