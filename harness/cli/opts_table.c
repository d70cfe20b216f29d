/* opts_table.c: the harness option table (name, argument kind, where the value goes, help text) and
 * the value parsers it names; opts.c makes getopt_long's array, the parser and the help from it. */
#include "harness/cli/opts_int.h"
#include "harness/registry/layouts.h"
#include "harness/emulate/netspec.h"
#include "trainer/workload.h"
#include "core/err.h"
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- value parsers ---------- */

int h_opt_parse_size(const char *s, size_t *out)
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

int h_opt_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int h_opt_bad(const char *flag, const char *val, const char *want)
{
    return err_set(ERR_INVAL, "bad value '%s' for %s: expected %s", val, flag, want);
}

/* The modes (first argument) */
static const char *const s_modes[] = {"train", "bench", "run", "selftest", "report", "model", "gemm", "explain", "simulate", NULL};
int h_opt_known_mode(const char *m)
{
    for (int i = 0; s_modes[i]; i++)
        if (!strcmp(m, s_modes[i])) return 1;
    return 0;
}

/* ---------- the option table ---------- */

#define SECTION(text, m) {.kind = K_SECTION, .help = text, .modes = m}
#define FLAG(n, field, h) {.name = n, .kind = K_FLAG, .off = F(field), .help = h}
#define STR(n, field, h) {.name = n, .kind = K_STR, .off = F(field), .help = h}
#define INT(n, field, l, u, w, h) {.name = n, .kind = K_INT, .off = F(field), .lo = l, .hi = u, .want = w, .help = h}
#define CHOICE(n, field, c, w, h) {.name = n, .kind = K_CHOICE, .off = F(field), .arg = c, .want = w, .help = h}
#define FN(n, f, field, w, h) {.name = n, .kind = K_FN, .fn = f, .off = F(field), .want = w, .help = h}
/* the same for an option of fewer modes than its section's (m: " MODE MODE "; `harness MODE --help` and the
 * warning that an option does nothing in a mode both read it) */
#define FLAG_IN(m, n, field, h) {.name = n, .kind = K_FLAG, .off = F(field), .help = h, .modes = m}
#define STR_IN(m, n, field, h) {.name = n, .kind = K_STR, .off = F(field), .help = h, .modes = m}
#define INT_IN(m, n, field, l, u, w, h) \
    {.name = n, .kind = K_INT, .off = F(field), .lo = l, .hi = u, .want = w, .help = h, .modes = m}
#define CHOICE_IN(m, n, field, c, w, h) {.name = n, .kind = K_CHOICE, .off = F(field), .arg = c, .want = w, .help = h, .modes = m}
#define FN_IN(m, n, f, field, w, h) {.name = n, .kind = K_FN, .fn = f, .off = F(field), .want = w, .help = h, .modes = m}
/* the modes that start ranks (the launcher's and the rendezvous' options) */
#define M_LAUNCH " train bench run model selftest "

static int s_scaling(h_opts_t *o, const h_opt_t *d, const char *v)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    o->nscaling = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nscaling >= H_MAX_SCALING || h_opt_parse_int(t, 1, 1 << 20, &o->scaling[o->nscaling]) < 0)
            return h_opt_bad("--scaling", v, d->want);
        o->nscaling++;
    }
    return o->nscaling ? 0 : h_opt_bad("--scaling", v, d->want);
}

static int s_engine(h_opts_t *o, const h_opt_t *d, const char *v)
{
    static char engbuf[256];
    (void)d;
    snprintf(engbuf, sizeof engbuf, "%s", v);
    o->nengines = 0;
    o->engine_all = 0;
    if (!strcmp(v, "all")) { /* simulate: every layout of the registry (h_opts_parse refuses it elsewhere) */
        o->engine_all = 1;
        return 0;
    }
    for (char *save = NULL, *t = strtok_r(engbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (h_engine_unbuilt(t)) return err_set(ERR_INVAL, "--engine %s: %s", t, h_engine_unbuilt(t));
        /* a layout's label (ps-K=N, ring-hier, ...) names an engine configuration: simulate's (h_opts_parse) */
        if (!h_engine_find(t) && !h_layout_find(t))
            return err_set(ERR_INVAL, "unknown engine '%s' (known: %s; simulate also takes the layouts of --engine all)", t,
                           h_engine_names());
        if (o->nengines >= H_MAX_ENGINES) return h_opt_bad("--engine", v, "at most 8 engines");
        o->engines[o->nengines++] = t;
    }
    return o->nengines ? 0 : h_opt_bad("--engine", v, h_engine_names());
}

static int s_seg(h_opts_t *o, const h_opt_t *d, const char *v)
{
    int kb;
    if (h_opt_parse_int(v, 1, 1 << 20, &kb)) return h_opt_bad("--seg-kb", v, d->want);
    o->seg_bytes = (size_t)kb * 1024;
    return 0;
}

static int s_sizes(h_opts_t *o, const h_opt_t *d, const char *v)
{
    char b[128];
    snprintf(b, sizeof b, "%s", v);
    char *colon = strchr(b, ':');
    if (colon) *colon = '\0';
    if (h_opt_parse_size(b, &o->size_min) || (colon ? h_opt_parse_size(colon + 1, &o->size_max) : (o->size_max = o->size_min, 0)) ||
        o->size_min > o->size_max || o->size_min == 0)
        return h_opt_bad("--sizes", v, d->want);
    return 0;
}

/* --size B: one size, as --sizes B:B */
static int s_size(h_opts_t *o, const h_opt_t *d, const char *v)
{
    size_t x;
    if (h_opt_parse_size(v, &x) || x == 0) return h_opt_bad("--size", v, d->want);
    o->size_min = o->size_max = x;
    return 0;
}

/* nccl-tests' -b/--minbytes and -e/--maxbytes: one end of --sizes (MIN <= MAX is checked at the end) */
static int s_bytes(h_opts_t *o, const h_opt_t *d, const char *v)
{
    size_t *p = (size_t *)((char *)o + d->off), x;
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", d->name);
    if (h_opt_parse_size(v, &x) || x == 0) return h_opt_bad(flag, v, d->want);
    *p = x;
    return 0;
}

/* a double > 1 (--factor) or > 0 (--bucket-mb) */
static int s_double(h_opts_t *o, const h_opt_t *d, const char *v)
{
    char *e;
    double *p = (double *)((char *)o + d->off), x = strtod(v, &e);
    *p = x;
    int over_one = d->off == F(factor);
    if (*e || e == v || !isfinite(x) || (over_one ? x <= 1.0 : x <= 0)) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", d->name);
        return h_opt_bad(flag, v, d->want);
    }
    return 0;
}

/* --shrink S|auto (auto: 0) and --dilate K: factors >= 1 */
/* --lat US: a latency in microseconds, >= 0 */
static int s_lat(h_opts_t *o, const h_opt_t *d, const char *v)
{
    char *e;
    double x = strtod(v, &e);
    if (*e || e == v || !(x >= 0) || x > 1e6) return h_opt_bad("--lat", v, d->want);
    o->lat_us = x;
    return 0;
}

/* --server-rate MBPS: a server core's rate in MB/s (10^6 bytes), > 0, or inf (no CPU time; stored as 0) */
static int s_srate(h_opts_t *o, const h_opt_t *d, const char *v)
{
    if (!strcmp(v, "inf")) {
        o->server_rate = 0;
        return 0;
    }
    char *e;
    double x = strtod(v, &e);
    if (*e || e == v || !(x > 0) || x > 1e9) return h_opt_bad("--server-rate", v, d->want);
    o->server_rate = x * 1e6;
    return 0;
}

/* --intra RATE: bits/s with bit, kbit, mbit, gbit or tbit */
static int s_intra(h_opts_t *o, const h_opt_t *d, const char *v)
{
    char *e;
    double x = strtod(v, &e), m = 0;
    if (!strcmp(e, "bit")) m = 1;
    else if (!strcmp(e, "kbit")) m = 1e3;
    else if (!strcmp(e, "mbit")) m = 1e6;
    else if (!strcmp(e, "gbit")) m = 1e9;
    else if (!strcmp(e, "tbit")) m = 1e12;
    if (e == v || !m || !(x > 0) || x * m < 8000 || x * m > 1e14) return h_opt_bad("--intra", v, d->want);
    o->intra_bps = x * m;
    return 0;
}

static int s_factor(h_opts_t *o, const h_opt_t *d, const char *v)
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
    if (*e || e == v || !(x >= 1) || x > 1e6) return h_opt_bad(flag, v, d->want);
    *p = x;
    return 0;
}

static int s_dtype(h_opts_t *o, const h_opt_t *d, const char *v)
{
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", d->name);
    /* nccl-tests' spellings (-d float|half|bfloat16) too */
    const char *t = !strcmp(v, "float") || !strcmp(v, "float32") ? "f32" : !strcmp(v, "half") || !strcmp(v, "float16") ? "f16"
                  : !strcmp(v, "bfloat16") ? "bf16" : v;
    return dt_parse(t, (dtype_t *)((char *)o + d->off)) ? h_opt_bad(flag, v, d->want) : 0;
}

static int s_op(h_opts_t *o, const h_opt_t *d, const char *v)
{
    return op_parse(v, &o->op) ? h_opt_bad("--op", v, d->want) : 0;
}

static int s_seed(h_opts_t *o, const h_opt_t *d, const char *v)
{
    char *e;
    o->seed = strtoull(v, &e, 10);
    return *e ? h_opt_bad("--seed", v, d->want) : 0;
}

static int s_measured(h_opts_t *o, const h_opt_t *d, const char *v)
{
    if (o->nmeasured >= H_MAX_FILES) return h_opt_bad("--measured", v, d->want);
    o->measured[o->nmeasured++] = (char *)v;
    return 0;
}

static int s_mode(h_opts_t *o, const h_opt_t *d, const char *v)
{
    if (!h_opt_known_mode(v)) return h_opt_bad("--mode", v, d->want);
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

/* the emulated cluster's section title and --device, from the workload registry and the device presets */
static void s_help_emulated(FILE *f)
{
    fprintf(f, "\nEmulated GPU cluster (train --model ");
    for (size_t i = 0; workload_at(i); i++) fprintf(f, "%s%s", i ? "|" : "", workload_at(i));
    fprintf(f, "):\n");
}

static void s_help_device(FILE *f)
{
    fprintf(f, "  --device D            emulated device: %s\n"
               "                        (published throughputs; v100 FP32, a100/h100 TF32, -amp mixed),\n"
               "                        throughput=SAMPLES_PER_S or tflops=X (default %s)\n", wl_device_names(), WL_DEVICE_DEFAULT);
}

const h_opt_t h_opt_table[] = {
    SECTION("\nRanks:\n", " train bench run model selftest gemm explain "),
    INT("procs", procs, 1, 4096, "a rank count >= 1",
        "  --procs N             start N local CPU worker ranks (plus --servers for ps)\n"),
    INT_IN(M_LAUNCH "gemm ", "gpus", gpus, 1, 1024, "a GPU count >= 1", "  --gpus N              one rank per GPU\n"),
    INT_IN(M_LAUNCH, "ranks-per-gpu", ranks_per_gpu, 1, 64, "a count in [1, 64]",
        "  --ranks-per-gpu K     with --gpus: K ranks share each GPU (world = N x K; e.g. the IPC tree or\n"
        "                        several PS workers on one GPU; NCCL refuses two ranks on one GPU)\n"),
    FLAG_IN(" train run ", "tf32", tf32, "  --tf32                train --gpus: cuBLAS may use TF32 tensor cores (f32 otherwise)\n"),
    {.name = "scaling", .kind = K_FN, .fn = s_scaling, .off = F(nscaling), .want = "a comma list of world sizes, e.g. 1,2,4",
     .modes = " train bench selftest simulate ", /* run refuses it (one world); gemm, explain and model take none */
     .help = "  --scaling 1,2,4       repeat for each world size (with --procs); simulate: each machine count\n"},
    {.name = "rounds", .kind = K_INT, .off = F(rounds), .lo = 1, .hi = 100, .want = "a round count in [1, 100]",
     .modes = " run ", /* the other modes warn that it does nothing */
     .help = "  --rounds N            run: repeat the comparison N times, engines alternating (default 3)\n"},
    INT_IN(M_LAUNCH, "nnodes", nnodes, 1, 100000, "a node count >= 1",
        "  --nnodes N --node-rank R --master HOST:PORT   multi-node: each node starts its --procs ranks\n"),
    INT_IN(M_LAUNCH, "node-rank", node_rank, 0, 100000, "a node index >= 0", NULL),
    STR_IN(M_LAUNCH, "master", master, NULL),
    STR_IN(M_LAUNCH, "master-addr", master_addr,
        "  --master-addr A --master-port P   torchrun's spelling of --master A:P (port default 29500)\n"),
    STR_IN(M_LAUNCH, "master-port", master_port, NULL),
    STR_IN(M_LAUNCH, "init-method", init_method,
        "  --init-method M       tcp://HOST:PORT | env:// | file:///path (inside ranks; default env://,\n"
        "                        which reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, or\n"
        "                        Slurm's SLURM_PROCID/SLURM_NTASKS or OpenMPI's OMPI_COMM_WORLD_*)\n"),
    STR_IN(M_LAUNCH, "ifname", ifname, "  --ifname IF           network interface for peer traffic (or SYNCBENCH_SOCKET_IFNAME)\n"),
    CHOICE_IN(M_LAUNCH, "transport", transport, "auto|shm|tcp|zmq", "auto, shm, tcp or zmq",
           "  --transport T         auto (shm within a node, tcp across) | shm | tcp | zmq\n"),
    CHOICE_IN(M_LAUNCH, "bind", bind, "auto|core|block|numa|none", "auto, core, block, numa or none",
           "  --bind auto|core|block|numa|none   bind ranks with hwloc: core, local rank i on core i mod cores; block,\n"
           "                        consecutive ranks on a core; numa, a rank to a NUMA node; auto: bench binds as core,\n"
           "                        train does not bind\n"),
    /* simulate: it bounds the simulation (default 30 minutes there) */
    INT_IN(M_LAUNCH "simulate ", "timeout", timeout_s, 1, 86400, "seconds from 1 to 86400 (one day)",
        "  --timeout S           every blocking step gives up after S seconds (default 60)\n"),
    FLAG_IN(M_LAUNCH, "require-auth", require_auth,
         "  --require-auth        refuse to run without a job secret (SYNCBENCH_JOB_SECRET or _FILE; the launcher\n"
         "                        makes one for a single node, --nnodes needs the same one on every node)\n"),
    SECTION("\nEngines:\n", " train bench run explain simulate "),
    {.name = "engine", .kind = K_FN, .fn = s_engine, .help_fn = s_help_engine},
    {.name = "impl", .kind = K_STR, .off = F(impl), .help_fn = s_help_impl},
    STR("tree-impl", impl, NULL),
    STR("ring-impl", impl, NULL),
    FN("seg-kb", s_seg, seg_bytes, "KiB >= 1", "  --seg-kb KB           pipelining segment of ring/tree (default 256)\n"),
    SECTION("\nBench:\n", " bench run gemm explain simulate "),
    FN_IN(" bench run explain simulate ", "sizes", s_sizes, size_min, "MIN:MAX in bytes with K/M/G suffixes, 0 < MIN <= MAX (e.g. 4K:64M)",
       "  --sizes MIN:MAX       bytes, K/M/G suffixes are powers of 1024 (default 4K:64M); one size works\n"),
    FN_IN(" bench run explain simulate ", "size", s_size, size_min, "bytes > 0 with K/M/G suffixes (e.g. 64K)",
       "  --size B              one message size (the same as --sizes B:B)\n"),
    FN_IN(" bench run simulate ", "factor", s_double, factor, "a number > 1", "  --factor F            size multiplier (default 2)\n"),
    INT_IN(" bench run gemm ", "iters", iters, 1, 1000000, "an integer >= 1",
        "  --iters N --warmup N  timed and warm-up iterations (default 20, 5)\n"),
    INT_IN(" bench run gemm ", "warmup", warmup, 0, 1000000, "an integer >= 0", NULL),
    FN_IN(" bench run explain simulate ", "dtype", s_dtype, dtype, "f32, f16 or bf16", "  --dtype f32|f16|bf16  element type (default f32)\n"),
    FN_IN(" bench run ", "op", s_op, op, "sum, avg (or mean) or move",
        "  --op sum|avg|move     reduction (default sum); move: the transport ceiling, every byte the schedule\n"
        "                        moves, nothing reduced (not checked)\n"),
    INT_IN(" bench run ", "check", check, 0, 1, "0 or 1", "  --check 0|1           check every result exactly (default 1)\n"),
    FLAG_IN(" bench ", "in-place", in_place,
            "  --in-place            bench: each allreduce's result over its input (one buffer, as syncbench.h's\n"
            "                        sb_allreduce and the Python package), zeros while timed, a known input checked\n"
            "                        after; default out-of-place (nccl-tests' default)\n"),
    INT_IN(" bench run ", "average", average, 0, 3, "0 (rank 0's), 1 (the mean), 2 (the min) or 3 (the max)",
        "  -a, --average 0|1|2|3 an iteration's time over the workers, as nccl-tests' -a: rank 0's, the mean, the\n"
        "                        min or the max (default 3: the slowest; nccl-tests' default is 1); loop_us stays the max\n"),
    /* nccl-tests' -g and -t: a process's threads, each driving G GPUs; here one rank a GPU (h_opts_parse) */
    INT_IN(" bench ", "ngpus", ngpus, 1, 1024, "a GPU count in [1, 1024]",
        "  -g, --ngpus G  -t, --nthreads T   nccl-tests' GPUs a thread and threads a process: --gpus G x T\n"
        "                        (x N with -np N, nccl-tests' world of N processes; one rank a GPU here)\n"),
    INT_IN(" bench ", "nthreads", nthreads, 1, 1024, "a thread count in [1, 1024]", NULL),
    FN_IN(" bench run explain simulate ", "minbytes", s_bytes, size_min, "bytes > 0 with K/M/G suffixes", NULL),
    FN_IN(" bench run explain simulate ", "maxbytes", s_bytes, size_max, "bytes > 0 with K/M/G suffixes", NULL),
    SECTION("\nTrain:\n", " train run gemm model simulate "),
    STR("model", model,
        "  --model NAME          mlp:784-1024-1024-10 (default: the trainer's MLP) or a real model, emulated (below)\n"),
    STR_IN(" train run ", "data", data, "  --data synthetic|PATH synthetic (default: a learnable task from the seed) or an MNIST IDX / CIFAR-10 path\n"),
    INT_IN(" train run gemm model ", "batch", batch, 1, 1 << 24, "a batch size >= 1",
        "  --batch B             the global batch, split across the workers (the MLP's default 256)\n"),
    {.name = "batch-per-gpu", .kind = K_INT, .off = F(batch_per_gpu), .lo = 1, .hi = 1 << 20, .want = "a batch size >= 1",
     .modes = " train run model simulate ",
     .help = "  --batch-per-gpu B     each worker's batch, as torchrun and Horovod scripts count (an emulated real\n"
             "                        model's default: 64, the batch of Horovod's and BytePS's benchmarks)\n"},
    INT_IN(" train run simulate ", "steps", steps, 1, 1 << 30, "an integer >= 1",
        "  --steps N             every optimizer step, the warm-up's included (default 50)\n"),
    INT_IN(" train run ", "warmup-steps", warmup_steps, 0, 1 << 30, "an integer >= 0",
        "  --warmup-steps W      the first W of --steps untimed (default 5)\n"),
    STR_IN(" train run ", "optim", optim, "  --optim SPEC          sgd:lr=0.05,momentum=0.9 | adam:lr=1e-3 (default sgd)\n"),
    FN_IN(" train run model ", "grad-dtype", s_dtype, grad_dtype, "f32, f16 or bf16",
        "  --grad-dtype f32|f16|bf16   the gradients' type (f16/bf16: dynamic loss scaling, f32 master weights)\n"),
    FN_IN(" train run model simulate ", "bucket-mb", s_double, bucket_mb, "MiB > 0",
        "  --bucket-mb MB        gradients handed to the engine as backward fills each bucket of MB (default 25)\n"
        "  --no-overlap          handed only after the whole backward pass (to compare)\n"),
    FLAG_IN(" train run model simulate ", "no-overlap", no_overlap, NULL),
    INT_IN(" train run ", "check-every", check_every, 0, 1 << 30, "steps >= 0",
        "  --check-every N       the ranks compare parameter checksums every N steps (default 100; 0: never)\n"
        "  --save PATH --resume PATH   a checkpoint (atomic; a resumed run continues bit-identical)\n"
        "  --drop-last           an epoch's last short batch dropped\n"),
    STR_IN(" train run ", "save", save, NULL),
    STR_IN(" train run ", "resume", resume, NULL),
    FLAG_IN(" train run ", "drop-last", drop_last, NULL),
    FN_IN(" train run simulate ", "seed", s_seed, seed, "an integer", "  --seed N              the run's random seed (default 42)\n"),
    STR_IN(" train run model ", "straggler", straggler, "  --straggler RANK:MS   worker RANK sleeps MS every step\n"),
    {.kind = K_SECTION, .help_fn = s_help_emulated, .modes = " train model bench simulate "},
    {.name = "device", .kind = K_STR, .off = F(emu_device), .help_fn = s_help_device},
    INT("nodes", nodes, 1, 4096, "a machine count >= 1",
        "  --nodes N --gpus-per-node G   N machines of G emulated GPUs (one rank each); with --net inter=RATE\n"
        "                        every machine gets one shaped NIC (root), ranks of a machine share memory\n"),
    /* explain too: its --procs workers on machines of G (the schedules of engines that reduce within a machine) */
    {.name = "gpus-per-node", .kind = K_INT, .off = F(gpus_per_node), .lo = 1, .hi = 1024, .want = "a GPU count >= 1",
     .modes = " train model bench simulate explain "},
    INT("server-nodes", server_nodes, 0, 4096, "a machine count >= 0",
        "  --server-nodes K      dedicated PS servers on K CPU-only machines (the BytePS layout)\n"),
    {.name = "lat", .kind = K_FN, .fn = s_lat, .off = F(lat_us), .want = "microseconds >= 0", .modes = " simulate ",
     .help = "  --lat US              simulate: latency of one hop (a GPU to its machine, a machine to the switch), us;\n"
             "                        no default: give the network's own\n"},
    {.name = "intra", .kind = K_FN, .fn = s_intra, .off = F(intra_bps), .want = "a rate such as 100gbit", .modes = " simulate ",
     .help = "  --intra RATE          simulate: a GPU's link to its machine, each way (default PCIe 3.0 x16, 126 Gbit/s)\n"},
    {.name = "server-rate", .kind = K_FN, .fn = s_srate, .off = F(server_rate), .want = "MB/s > 0, or inf",
     .modes = " simulate ",
     .help = "  --server-rate MBPS    simulate: a PS server core's rate in MB/s: the bytes of pushed gradient it takes in\n"
             "                        (handles and sums) a second, each push across machines an execution on its\n"
             "                        host (default inf: no CPU time; --emulated fits its own from the PS bench lines)\n"},
    {.name = "server-cores", .kind = K_INT, .off = F(server_cores), .lo = 1, .hi = 1024, .want = "a core count >= 1",
     .modes = " simulate ",
     .help = "  --server-cores C      simulate: cores a server's host gives that work (default 1: the server's one thread)\n"},
    {.name = "fabric", .kind = K_STR, .off = F(fabric), .modes = " simulate ",
     .help = "  --fabric F            simulate: the switch fabric: star (default: every NIC on one non-blocking switch) or\n"
             "                        fattree:R:O (racks of R machines under a leaf switch, its uplink to the spine\n"
             "                        R x NIC / O; O = 1 non-blocking)\n"},
    {.name = "spread", .kind = K_STR, .off = F(spread), .modes = " simulate ",
     .help = "  --spread DIST         simulate --model: each GPU's compute x a factor fixed for the run: none, uniform:R\n"
             "                        ([1, 1 + R]) or normal:S (default uniform:0.08: same-SKU GPUs differ by 8% on\n"
             "                        average, Sinha et al., SC'22, five clusters)\n"},
    {.name = "emulated", .kind = K_FLAG, .off = F(sim_emulated), .modes = " simulate ",
     .help = "  --emulated FILE...    simulate: check the simulator against the emulated training runs of the files\n"
             "                        (latency and shared memory fitted from their bench lines only)\n"},
    STR_IN(" simulate ", "check-from", sim_check_from,
           "  --check-from FILE     --emulated: the check points from FILE's runs only (the constants still fitted\n"
           "                        from every file's bench lines), for a check of new runs without the old ones\n"),
    {.name = "sim-groups", .kind = K_INT, .off = F(sim_groups), .lo = 0, .hi = 1 << 20, .want = "a group count >= 0",
     .modes = " simulate ",
     .help = "  --sim-groups G        simulate: replay a ring's steps in at most G merged groups, their latencies kept\n"
             "                        (0: every step; default: every step while a run stays under 4 M\n"
             "                        communications, else 64; its error: results/sim-reduction)\n"},
    {.name = "sim-streams", .kind = K_INT, .off = F(sim_streams), .lo = 0, .hi = 1 << 20, .want = "0, or a run length >= 3",
     .modes = " simulate ",
     .help = "  --sim-streams M       simulate: a tree's or a PS's connection sends a run of >= M like pieces as one\n"
             "                        stream, each piece held as the flow carries it (0: every piece; default: every\n"
             "                        piece while a run stays under 200 k communications, else 4; results/sim-reduction-streams)\n"},
    {.name = "sim-join", .kind = K_INT, .off = F(sim_join), .lo = 0, .hi = 1, .want = "0 or 1",
     .modes = " simulate ",
     .help = "  --sim-join J          simulate: with the streams, a stream takes in the streams after it on its\n"
             "                        connection whose buckets are released when it starts, as one communication\n"
             "                        (1, experimental: failed its check, results/sim-reduction-join); default 0\n"},
    {.name = "sim-bundles", .kind = K_INT, .off = F(sim_bundles), .lo = 0, .hi = 1 << 20, .want = "0, 1, or a pool >= 2",
     .modes = " simulate ",
     .help = "  --sim-bundles Q       simulate: a round of a PS's transfers between two machines as one communication\n"
             "                        (1), with server machines merged Q to one (Q >= 2, experimental: VGG-16 moves by up\n"
             "                        to a quarter, results/sim-reduction-pools); 0: never; default:\n"
             "                        1 past 200 k communications a run (results/sim-reduction-bundles)\n"},
    FN("shrink", s_factor, shrink, "a factor >= 1 or auto",
       "  --shrink S|auto       divide every tensor and link rate by S (transfer times unchanged, host load / S;\n"
       "                        default auto: as much as this host needs)\n"),
    FN("dilate", s_factor, dilate, "a factor >= 1",
       "  --dilate K            compute times x K, link rates / K, reported times / K (default 1)\n"),
    SECTION("\nOutput:\n", " train bench run model report gemm explain simulate "),
    STR_IN(" train bench run model simulate ", "net", net,
        "  --net bw=RATE[,per=rank|node][,nodes=K][,queue=MS][,gso=off][,cc=NAME][,lat=US]   emulated network (root):\n"
        "                        one namespace per rank (or per node group), veth + bridge, tc tbf at RATE both\n"
        "                        ways (e.g. bw=1gbit), a packet waiting at most queue= ms (default 100) before\n"
        "                        a drop; gso=off: one MTU frame per packet, a 1 ms token bucket at any rate;\n"
        "                        ranks talk TCP with congestion control cc= (default " H_NETEM_CC_DEFAULT ", not the host's);\n"
        "                        lat=US: a per-hop latency, 4 hops (4 x US x --dilate) held on each NIC's egress, as\n"
        "                        `simulate --lat` counts a transfer across machines (needs iptables: an NFQUEUE)\n"),
    STR_IN(" train bench run model gemm simulate ", "json", json, "  --json FILE           append one JSON object per line per result ('-' = stdout)\n"),
    STR_IN(" train bench run model report gemm simulate ", "label", label,
        "  --label NAME          name this run: written into every JSON line (\"label\"), shown by report;\n"
        "                        report --label NAME keeps only that run's lines\n"),
    STR_IN(" train bench run model ", "timeline", timeline,
        "  --timeline FILE       train/bench: Chrome trace JSON of every rank (compute, buckets, collectives,\n"
        "                        segments, waits) for chrome://tracing or ui.perfetto.dev\n"),
    STR_IN(" report explain ", "plots", plots_dir, "  --plots DIR           report: where figures go (default: plots/ next to the first file)\n"),
    CHOICE_IN(" report ", "format", format, "text|json|md|csv", "text, json, md or csv",
           "  --format F            report: text (default), json, md or csv tables on stdout\n"),
    CHOICE_IN(" report ", "table", table, "bench|train|model", "bench, train or model",
           "  --table T             report: only that table (bench, train or model), in any format\n"),
    STR_IN(" report ", "csv", csv_dir, "  --csv DIR             report: one CSV file per table, DIR/bench.csv, DIR/train.csv\n"
                                       "                        (DIR/model.csv), each with one header (pandas.read_csv)\n"),
    FN_IN(" model simulate ", "measured", s_measured, nmeasured, "at most 64 files",
       "  --measured FILE       model: a results file to compare against (as a positional FILE)\n"),
    {.name = "no-check", .kind = K_FLAG, .off = F(no_check), .modes = " model ",
     .help = "  --no-check            model: the files' bench lines calibrate the model (as model fit) but no check\n"
             "                        against their runs is printed or written\n"},
    FLAG("quiet", quiet, "  --quiet               no progress lines\n"),
    FLAG("verbose", verbose, "  --verbose             an error also says where in the source it passed (file:line)\n"),
    FLAG_IN(" train bench run ", "peers", peers,
         "  --peers               bench/train/run: also the peers, in the same rounds: --engine mpi (MPI_Allreduce,\n"
         "                        through mpirun) and PyTorch DDP / all_reduce over gloo (peers/torch_ddp.py)\n"),
    {.name = "help", .kind = K_HELP},
    {.name = "version", .kind = K_HELP},
    /* set by the driver on a rank's command line (not in --help) */
    {.name = "as-rank", .kind = K_NONE},
    FN("mode", s_mode, mode, "a mode", NULL),
    STR("timeline-tag", timeline_tag, NULL),
    /* for scripts/gen-completion (not in --help) */
    STR("list-values", list_values, NULL),
};
const size_t h_opt_count = sizeof h_opt_table / sizeof h_opt_table[0];
_Static_assert(sizeof h_opt_table / sizeof h_opt_table[0] <= H_OPT_MAX, "H_OPT_MAX too small for the option table");

/* The default of table entry d (o: the defaults), for `harness MODE --help`. */
void h_opt_default_of(const h_opts_t *o, const h_opt_t *d, char *buf, size_t len)
{
    const char *at = (const char *)o + d->off;
    snprintf(buf, len, "-");
    switch (d->kind) {
    case K_FLAG: snprintf(buf, len, "off"); return;
    case K_INT: if (*(const int *)at) snprintf(buf, len, "%d", *(const int *)at); return;
    case K_STR:
        if (d->off == F(emu_device)) { /* NULL: the emulation's default device */
            snprintf(buf, len, "%s", WL_DEVICE_DEFAULT);
            return;
        }
        /* fall through */
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
    else if (d->fn == s_bytes || d->fn == s_size) snprintf(buf, len, "%zu", *(const size_t *)at);
    else if (d->fn == s_seed) snprintf(buf, len, "%llu", o->seed);
    else if (d->fn == s_seg) snprintf(buf, len, "256");
}

int h_opt_no_default(const h_opt_t *d)
{
    return d->fn == s_bytes; /* -b/-e: the ends of --sizes, whose default is shown */
}
