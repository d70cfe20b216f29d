/* main.c: the harness program: parses the command line, then either drives launches (with --procs,
 * --gpus or --nnodes: one launch of N ranks per (world size, engine)) or, inside a rank (started by
 * our launcher, torchrun-style env, srun or mpirun), joins the job and runs the mode. */
#include "harness/harness.h"
#include "harness/gemmbench.h"
#include "harness/launch.h"
#include "harness/model.h"
#include "harness/netem.h"
#include "harness/report.h"
#include "harness/timeline.h"
#include "core/dev.h"
#include "core/err.h"
#include "core/log.h"
#include "core/topo.h"
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static void s_usage(FILE *f)
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
"\n"
"Ranks:\n"
"  --procs N             start N local CPU worker ranks (plus --servers for ps)\n"
"  --gpus N              one rank per GPU\n"
"  --ranks-per-gpu K     with --gpus: K ranks share each GPU (world = N x K; e.g. the IPC tree or\n"
"                        several PS workers on one GPU; NCCL refuses two ranks on one GPU)\n"
"  --tf32                train --gpus: cuBLAS may use TF32 tensor cores (f32 otherwise)\n"
"  --scaling 1,2,4       repeat for each world size (with --procs)\n"
"  --nnodes N --node-rank R --master HOST:PORT   multi-node: each node starts its --procs ranks\n"
"  --init-method M       tcp://HOST:PORT | env:// | file:///path (inside ranks; default env://,\n"
"                        which reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, or\n"
"                        Slurm's SLURM_PROCID/SLURM_NTASKS or OpenMPI's OMPI_COMM_WORLD_*)\n"
"  --ifname IF           network interface for peer traffic (or SYNCBENCH_SOCKET_IFNAME)\n"
"  --transport T         auto (shm within a node, tcp across) | shm | tcp | zmq\n"
"  --bind auto|core|numa|none   bind ranks with hwloc (auto: bench binds local rank i to core i mod cores, train does not bind)\n"
"  --timeout S           every blocking step gives up after S seconds (default 60)\n"
"\n"
"Engines:\n"
"  --engine LIST         comma list of: %s (default %s)\n", h_engine_names(), h_engine_at(0)->name);
    /* --impl NAME and each engine's own options, from the engine table */
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
    fprintf(f,
"  --seg-kb KB           pipelining segment of ring/tree (default 256)\n"
"\n"
"Bench:\n"
"  --sizes MIN:MAX       bytes, K/M/G suffixes are powers of 1024 (default 4K:64M); one size works\n"
"  --factor F            size multiplier (default 2)\n"
"  --iters N --warmup N  timed and warm-up iterations (default 20, 5)\n"
"  --dtype f32|f16|bf16  element type (default f32)\n"
"  --op sum|avg          reduction (default sum)\n"
"\n"
"Train:\n"
"  --model mlp:784-1024-1024-10   --data synthetic|PATH   --batch B (global)   --steps N\n"
"  --warmup-steps N  --optim sgd:lr=0.05,momentum=0.9 | adam:lr=1e-3   --grad-dtype f32|f16|bf16\n"
"  --bucket-mb MB  --no-overlap  --check-every N  --save PATH  --resume PATH  --drop-last  --seed N\n"
"  --straggler RANK:MS\n"
"\n"
"Output:\n"
"  --net bw=RATE[,per=rank|node][,nodes=K]   emulated network (root): one namespace per rank (or per\n"
"                        node group), veth + bridge, tc tbf at RATE both ways (e.g. bw=1gbit); TCP\n"
"  --json FILE           append one JSON object per line per result ('-' = stdout)\n"
"  --timeline FILE       train/bench: Chrome trace JSON of every rank (compute, buckets, collectives,\n"
"                        segments, waits) for chrome://tracing or ui.perfetto.dev\n"
"  --plots DIR           report: where figures go (default: plots/ next to the first file)\n"
"  --format F            report: text (default), json, md or csv tables on stdout\n"
"  --measured FILE       model: a results file to compare against (as a positional FILE)\n"
"  --quiet               no progress lines\n");
}

static int s_parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return -1;
    double m = 1;
    if (*end == 'K' || *end == 'k') m = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') m = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') m = 1024.0 * 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
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
    fprintf(stderr, "harness: bad value '%s' for %s: expected %s\n", val, flag, want);
    return 2;
}

enum {
    O_PROCS = 256, O_GPUS, O_SCALING, O_NNODES, O_NODE_RANK, O_MASTER, O_INIT, O_IFNAME, O_TRANSPORT, O_BIND,
    O_TIMEOUT, O_ENGINE, O_IMPL, O_SEG, O_SIZES, O_FACTOR, O_ITERS,
    O_WARMUP, O_DTYPE, O_OP, O_MODEL, O_DATA, O_BATCH, O_STEPS, O_WSTEPS, O_OPTIM, O_GDT, O_BUCKET, O_NOOV,
    O_CHECKEV, O_SAVE, O_RESUME, O_DROPLAST, O_SEED, O_STRAG, O_JSON, O_QUIET, O_HELP, O_TIMELINE, O_NET, O_CHECK,
    O_PLOTS, O_MEASURED, O_RPG, O_TF32, O_FORMAT,
    O_AS_RANK, O_MODE, O_TLTAG,      /* set by the driver on a rank's command line (not in --help) */
    O_ENGOPT = 1024                  /* O_ENGOPT + k: engine option k (h_engine_opt) */
};

static const struct option s_longopts[] = {
    {"procs", 1, 0, O_PROCS}, {"gpus", 1, 0, O_GPUS}, {"scaling", 1, 0, O_SCALING}, {"nnodes", 1, 0, O_NNODES},
    {"ranks-per-gpu", 1, 0, O_RPG}, {"tf32", 0, 0, O_TF32},
    {"node-rank", 1, 0, O_NODE_RANK}, {"master", 1, 0, O_MASTER}, {"init-method", 1, 0, O_INIT},
    {"ifname", 1, 0, O_IFNAME}, {"transport", 1, 0, O_TRANSPORT}, {"bind", 1, 0, O_BIND},
    {"timeout", 1, 0, O_TIMEOUT}, {"engine", 1, 0, O_ENGINE}, {"impl", 1, 0, O_IMPL},
    {"tree-impl", 1, 0, O_IMPL}, {"ring-impl", 1, 0, O_IMPL},
    {"seg-kb", 1, 0, O_SEG}, {"sizes", 1, 0, O_SIZES}, {"factor", 1, 0, O_FACTOR}, {"iters", 1, 0, O_ITERS},
    {"warmup", 1, 0, O_WARMUP}, {"dtype", 1, 0, O_DTYPE}, {"op", 1, 0, O_OP}, {"check", 1, 0, O_CHECK},
    {"model", 1, 0, O_MODEL}, {"data", 1, 0, O_DATA}, {"batch", 1, 0, O_BATCH}, {"steps", 1, 0, O_STEPS},
    {"warmup-steps", 1, 0, O_WSTEPS}, {"optim", 1, 0, O_OPTIM}, {"grad-dtype", 1, 0, O_GDT},
    {"bucket-mb", 1, 0, O_BUCKET}, {"no-overlap", 0, 0, O_NOOV}, {"check-every", 1, 0, O_CHECKEV},
    {"save", 1, 0, O_SAVE}, {"resume", 1, 0, O_RESUME}, {"drop-last", 0, 0, O_DROPLAST}, {"seed", 1, 0, O_SEED},
    {"straggler", 1, 0, O_STRAG}, {"json", 1, 0, O_JSON}, {"quiet", 0, 0, O_QUIET}, {"help", 0, 0, O_HELP},
    {"timeline", 1, 0, O_TIMELINE}, {"net", 1, 0, O_NET}, {"plots", 1, 0, O_PLOTS}, {"format", 1, 0, O_FORMAT},
    {"measured", 1, 0, O_MEASURED}, {"as-rank", 0, 0, O_AS_RANK}, {"mode", 1, 0, O_MODE},
    {"timeline-tag", 1, 0, O_TLTAG}, {0, 0, 0, 0}};

/* The modes (first argument) */
static const char *const s_modes[] = {"train", "bench", "run", "selftest", "report", "model", "gemm", NULL};
static int s_known_mode(const char *m)
{
    for (int i = 0; s_modes[i]; i++)
        if (!strcmp(m, s_modes[i])) return 1;
    return 0;
}

/* s_longopts plus every engine's own options (O_ENGOPT + k), NULL-terminated */
static const struct option *s_all_longopts(void)
{
    static struct option all[sizeof s_longopts / sizeof s_longopts[0] + 64];
    size_t n = 0;
    for (; s_longopts[n].name; n++) all[n] = s_longopts[n];
    const engine_opt_t *eo;
    for (int k = 0; (eo = h_engine_opt(k, NULL)) && n + 1 < sizeof all / sizeof all[0]; k++)
        all[n++] = (struct option){eo->name, eo->has_value ? 1 : 0, 0, O_ENGOPT + k};
    all[n] = (struct option){0, 0, 0, 0};
    return all;
}

static int s_split_ints(const char *s, int *out, int max, int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n >= max || s_parse_int(t, 1, 1 << 20, &out[*n]) < 0) return -1;
        (*n)++;
    }
    return *n ? 0 : -1;
}

/* report / model: figures folder and results files (positional ones and --measured) */
static const char *s_plots_dir;
static char *s_measured[64];
static int s_nmeasured;

/* Returns 0, or an exit code (2 for usage errors, 1 for help printed -> exit 0 handled by caller). */
static int s_parse(h_opts_t *o, int argc, char **argv)
{
    static char engbuf[256];
    memset(o, 0, sizeof *o);
    o->mode = "train";
    o->engines[0] = h_engine_at(0)->name;
    o->nengines = 1;
    if (h_engine_opts_init(o) < 0) {
        fprintf(stderr, "harness: out of memory\n");
        return 2;
    }
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
    o->bind = "auto";
    o->transport = "auto";
    o->argc = argc;
    o->argv = argv;
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
    if (!s_known_mode(o->mode)) {
        fprintf(stderr, "harness: unknown mode '%s' (train, bench, run, selftest, report, model, gemm); see harness --help\n", o->mode);
        return 2;
    }
    optind = first;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", s_all_longopts(), NULL)) != -1) {
        const char *v = optarg;
        switch (c) {
        case O_PROCS: if (s_parse_int(v, 1, 4096, &o->procs)) return s_bad("--procs", v, "a rank count >= 1"); break;
        case O_GPUS: if (s_parse_int(v, 1, 1024, &o->gpus)) return s_bad("--gpus", v, "a GPU count >= 1"); break;
        case O_RPG: if (s_parse_int(v, 1, 64, &o->ranks_per_gpu)) return s_bad("--ranks-per-gpu", v, "a count in [1, 64]"); break;
        case O_TF32: o->tf32 = 1; break;
        case O_SCALING: if (s_split_ints(v, o->scaling, H_MAX_SCALING, &o->nscaling)) return s_bad("--scaling", v, "a comma list of world sizes, e.g. 1,2,4"); break;
        case O_NNODES: if (s_parse_int(v, 1, 100000, &o->nnodes)) return s_bad("--nnodes", v, "a node count >= 1"); break;
        case O_NODE_RANK: if (s_parse_int(v, 0, 100000, &o->node_rank)) return s_bad("--node-rank", v, "a node index >= 0"); break;
        case O_MASTER: o->master = v; break;
        case O_INIT: o->init_method = v; break;
        case O_IFNAME: o->ifname = v; break;
        case O_TRANSPORT:
            if (strcmp(v, "auto") && strcmp(v, "shm") && strcmp(v, "tcp") && strcmp(v, "zmq")) return s_bad("--transport", v, "auto, shm, tcp or zmq");
            o->transport = v; break;
        case O_BIND:
            if (strcmp(v, "core") && strcmp(v, "block") && strcmp(v, "numa") && strcmp(v, "none") && strcmp(v, "auto"))
                return s_bad("--bind", v, "auto, core, block, numa or none");
            o->bind = v; break;
        case O_TIMEOUT: if (s_parse_int(v, 1, 86400, &o->timeout_s)) return s_bad("--timeout", v, "seconds >= 1"); break;
        case O_ENGINE: {
            snprintf(engbuf, sizeof engbuf, "%s", v);
            o->nengines = 0;
            for (char *save = NULL, *t = strtok_r(engbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (!h_engine_find(t)) {
                    fprintf(stderr, "harness: unknown engine '%s' (known: %s)\n", t, h_engine_names());
                    return 2;
                }
                if (o->nengines >= H_MAX_ENGINES) return s_bad("--engine", v, "at most 8 engines");
                o->engines[o->nengines++] = t;
            }
            if (!o->nengines) return s_bad("--engine", v, h_engine_names());
            break;
        }
        case O_IMPL: o->impl = v; break;
        case O_SEG: { int kb; if (s_parse_int(v, 1, 1 << 20, &kb)) return s_bad("--seg-kb", v, "KiB >= 1"); o->seg_bytes = (size_t)kb * 1024; break; }
        case O_SIZES: {
            char b[128];
            snprintf(b, sizeof b, "%s", v);
            char *colon = strchr(b, ':');
            if (colon) *colon = '\0';
            if (s_parse_size(b, &o->size_min) || (colon ? s_parse_size(colon + 1, &o->size_max) : (o->size_max = o->size_min, 0)) ||
                o->size_min > o->size_max)
                return s_bad("--sizes", v, "MIN:MAX in bytes with K/M/G suffixes, MIN <= MAX (e.g. 4K:64M)");
            break;
        }
        case O_FACTOR: { char *e; o->factor = strtod(v, &e); if (*e || o->factor <= 1.0) return s_bad("--factor", v, "a number > 1"); break; }
        case O_ITERS: if (s_parse_int(v, 1, 1000000, &o->iters)) return s_bad("--iters", v, "an integer >= 1"); break;
        case O_WARMUP: if (s_parse_int(v, 0, 1000000, &o->warmup)) return s_bad("--warmup", v, "an integer >= 0"); break;
        case O_DTYPE: if (dt_parse(v, &o->dtype)) return s_bad("--dtype", v, "f32, f16 or bf16"); break;
        case O_OP: if (op_parse(v, &o->op)) return s_bad("--op", v, "sum or avg"); break;
        case O_CHECK: if (s_parse_int(v, 0, 1, &o->check)) return s_bad("--check", v, "0 or 1"); break;
        case O_MODEL: o->model = v; break;
        case O_DATA: o->data = v; break;
        case O_BATCH: if (s_parse_int(v, 1, 1 << 24, &o->batch)) return s_bad("--batch", v, "a batch size >= 1"); break;
        case O_STEPS: if (s_parse_int(v, 1, 1 << 30, &o->steps)) return s_bad("--steps", v, "an integer >= 1"); break;
        case O_WSTEPS: if (s_parse_int(v, 0, 1 << 30, &o->warmup_steps)) return s_bad("--warmup-steps", v, "an integer >= 0"); break;
        case O_OPTIM: o->optim = v; break;
        case O_GDT: if (dt_parse(v, &o->grad_dtype)) return s_bad("--grad-dtype", v, "f32, f16 or bf16"); break;
        case O_BUCKET: { char *e; o->bucket_mb = strtod(v, &e); if (*e || o->bucket_mb <= 0) return s_bad("--bucket-mb", v, "MiB > 0"); break; }
        case O_NOOV: o->no_overlap = 1; break;
        case O_CHECKEV: if (s_parse_int(v, 0, 1 << 30, &o->check_every)) return s_bad("--check-every", v, "steps >= 0"); break;
        case O_SAVE: o->save = v; break;
        case O_RESUME: o->resume = v; break;
        case O_DROPLAST: o->drop_last = 1; break;
        case O_SEED: { char *e; o->seed = strtoull(v, &e, 10); if (*e) return s_bad("--seed", v, "an integer"); break; }
        case O_STRAG: o->straggler = v; break;
        case O_JSON: o->json = v; break;
        case O_QUIET: o->quiet = 1; break;
        case O_TIMELINE: o->timeline = v; break;
        case O_NET: o->net = v; break;
        case O_PLOTS: s_plots_dir = v; break;
        case O_FORMAT:
            if (strcmp(v, "text") && strcmp(v, "json") && strcmp(v, "md") && strcmp(v, "csv"))
                return s_bad("--format", v, "text, json, md or csv");
            o->format = v;
            break;
        case O_MEASURED:
            if (s_nmeasured >= (int)(sizeof s_measured / sizeof s_measured[0])) return s_bad("--measured", v, "at most 64 files");
            s_measured[s_nmeasured++] = (char *)v;
            break;
        case O_AS_RANK: break;
        case O_MODE:
            if (!s_known_mode(v)) return s_bad("--mode", v, "a mode");
            o->mode = v;
            break;
        case O_TLTAG: o->timeline_tag = v; break;
        case O_HELP: s_usage(stdout); return 1;
        case ':': fprintf(stderr, "harness: %s needs a value\n", argv[optind - 1]); return 2;
        default:
            if (c >= O_ENGOPT && h_engine_opt(c - O_ENGOPT, NULL)) {
                const engine_opt_t *eo = h_engine_opt(c - O_ENGOPT, NULL);
                char flag[64];
                snprintf(flag, sizeof flag, "--%s", eo->name);
                if (h_engine_opt_set(o, c - O_ENGOPT, v) < 0) return s_bad(flag, v ? v : "", eo->want ? eo->want : "a valid value");
                break;
            }
            fprintf(stderr, "harness: unknown option '%s'; see harness --help\n", argv[optind - 1]); return 2;
        }
    }
    if (optind < argc && (!strcmp(o->mode, "report") || !strcmp(o->mode, "model"))) {
        /* results files; --measured files come after them */
        o->pos = argv + optind;
        o->npos = argc - optind;
        for (int i = 0; i < o->npos && s_nmeasured < 64; i++) s_measured[s_nmeasured++] = o->pos[i];
    } else if (optind < argc) {
        o->pos = argv + optind;
        o->npos = argc - optind;
        fprintf(stderr, "harness: unexpected argument '%s'; see harness --help\n", argv[optind]);
        return 2;
    }
    if (o->ranks_per_gpu && !o->gpus) {
        fprintf(stderr, "harness: --ranks-per-gpu needs --gpus N\n");
        return 2;
    }
    if (o->gpus && o->procs) {
        fprintf(stderr, "harness: --gpus and --procs are exclusive (one rank per GPU, or N CPU ranks)\n");
        return 2;
    }
    if ((o->nnodes > 1 || o->node_rank) && !o->master) {
        fprintf(stderr, "harness: --nnodes needs --master HOST:PORT (the address of node 0)\n");
        return 2;
    }
    if (o->nnodes && o->node_rank >= o->nnodes) {
        fprintf(stderr, "harness: --node-rank %d must be < --nnodes %d\n", o->node_rank, o->nnodes);
        return 2;
    }
    if (h_engine_opts_check(o) < 0) {
        fprintf(stderr, "harness: %s\n", err_detail());
        return 2;
    }
    return 0;
}

/* ---------- inside a rank ---------- */

static int s_rank_main(h_opts_t *o)
{
    if (o->argc > 1 && !strcmp(o->argv[1], "run") && !strcmp(o->mode, "bench")) {
        /* `harness run` keeps the default comparison short */
        o->size_max = o->size_max > (16u << 20) ? (16u << 20) : o->size_max;
        o->iters = o->iters > 10 ? 10 : o->iters;
    }
    const char *e = getenv("SYNCBENCH_TIMEOUT");
    if (e && atoi(e) > 0) o->timeout_s = atoi(e);
    if (!strcmp(o->mode, "selftest")) {
        int r = getenv("RANK") ? atoi(getenv("RANK")) : 0, w = getenv("WORLD_SIZE") ? atoi(getenv("WORLD_SIZE")) : 1;
        return h_selftest(r, w);
    }
    /* a plain `harness bench` with no launcher and no rank environment: a world of one */
    if (!o->init_method && !getenv("RANK") && !getenv("SLURM_PROCID") && !getenv("OMPI_COMM_WORLD_RANK")) {
        setenv("RANK", "0", 1);
        setenv("WORLD_SIZE", "1", 1);
        setenv("LOCAL_RANK", "0", 1);
        if (!getenv("MASTER_ADDR")) setenv("MASTER_ADDR", "127.0.0.1", 1);
        if (!getenv("MASTER_PORT")) {
            char p[16];
            snprintf(p, sizeof p, "%d", 20000 + (int)(getpid() % 30000));
            setenv("MASTER_PORT", p, 1);
        }
    }
    boot_cfg_t bc;
    char msg[1024];
    int rc = boot_cfg_init(&bc, o->init_method, -1, -1, o->timeout_s * 1000);
    if (rc < 0) {
        fprintf(stderr, "harness: %s\n", err_trace(rc, msg, sizeof msg));
        return 1;
    }
    if (o->ifname) snprintf(bc.ifname, sizeof bc.ifname, "%s", o->ifname);
    log_set_rank(bc.rank);
    const char *bind = o->bind;
    if (!strcmp(bind, "auto")) {
        /* ranks round-robin over cores (local rank i on core i mod cores), oversubscribed or not:
         * measured here, a fixed placement makes the ring 1.1x to 1.6x faster at 4 and 8 ranks
         * on 2 cores against letting the scheduler move ranks (results/bind-placement.txt) */
        bind = topo_ncores() > 0 && !strcmp(o->mode, "bench") ? "core" : "none";
        /* train stays unbound: the engine's communication thread and the BLAS threads then use
         * whatever core is free, as under torchrun */
    }
    if (strcmp(bind, "none")) {
        char desc[128];
        rc = topo_bind(bind, bc.local_rank >= 0 ? bc.local_rank : bc.rank, bc.local_world, desc, sizeof desc);
        if (rc < 0) {
            fprintf(stderr, "harness: rank %d: --bind: %s\n", bc.rank, err_trace(rc, msg, sizeof msg));
            return 1;
        }
        LOG_I("bound: %s", desc);
    }
    if (o->gpus) {
        char desc[256] = "";
        int lr = bc.local_rank >= 0 ? bc.local_rank : bc.rank;
        int dev = dev_select_of(o->ranks_per_gpu > 1 ? lr / o->ranks_per_gpu : lr, o->gpus, desc, sizeof desc);
        if (dev < 0) {
            fprintf(stderr, "harness: rank %d: %s\n", bc.rank, err_trace(dev, msg, sizeof msg));
            return 1;
        }
        o->device = dev;
        LOG_I("using %s", desc);
    }
    comm_t *comm = NULL;
    comm_opts_t co = {.transport = o->transport};
    rc = comm_new(&comm, &bc, &co);
    if (rc < 0) {
        fprintf(stderr, "harness: rank %d: joining the job failed: %s\n", bc.rank, err_trace(rc, msg, sizeof msg));
        return 1;
    }
    rc = h_timeline_begin(o, comm); /* --timeline: every rank records, rank 0 writes the file at the end */
    if (rc < 0) {}
    else if (!strcmp(o->mode, "bench")) rc = h_bench(o, comm);
    else if (!strcmp(o->mode, "model")) rc = h_model(o, comm, s_nmeasured, s_measured);
    else rc = h_train(o, comm);
    if (rc >= 0 && h_timeline_end(o, comm) < 0 && rc == 0) rc = 1; /* h_timeline_end said why */
    if (rc < 0) fprintf(stderr, "harness: rank %d: %s failed: %s\n", comm->rank, o->mode, err_trace(rc, msg, sizeof msg));
    comm_destroy(&comm);
    return rc < 0 ? 1 : (rc > 0 ? rc : 0);
}

/* ---------- the driver: one launch per (world, engine) ---------- */

/* --net: the emulated network of the current s_drive (namespaces live for all its launches) */
static h_netem_t *s_net;
static char **s_net_argv;
static int s_net_argc;
static volatile sig_atomic_t s_net_sig;
static void s_net_on_signal(int sig) { s_net_sig = sig; }
static int s_drive(h_opts_t *o, const char *mode_override);

/* Set up the namespaces for the largest launch, run s_drive inside them, and always remove them. */
static int s_drive_net(h_opts_t *o, const char *mode_override)
{
    h_netem_spec_t spec;
    char err[512];
    if (h_netem_parse(o->net, &spec, err, sizeof err) < 0) {
        fprintf(stderr, "harness: %s\n", err);
        return 2;
    }
    if (o->nnodes > 1 || o->master || o->gpus) {
        fprintf(stderr, "harness: --net emulates a network on one machine: not with --nnodes, --master or --gpus\n");
        return 2;
    }
    int maxw = o->procs ? o->procs : 1;
    for (int i = 0; i < o->nscaling; i++) maxw = o->scaling[i] > maxw ? o->scaling[i] : maxw;
    int maxs = 0;
    for (int i = 0; i < o->nengines; i++) {
        int x = h_engine_extra_ranks(o, o->engines[i], maxw);
        maxs = x > maxs ? x : maxs;
    }
    struct sigaction sa = {.sa_handler = s_net_on_signal}, old[3];
    static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
    s_net_sig = 0;
    int rc;
    if (h_netem_new(&s_net, &spec, maxw + maxs, err, sizeof err) < 0) {
        fprintf(stderr, "harness: %s\n", err);
        rc = 1;
    } else if (!(s_net_argv = h_netem_argv(o->argc, o->argv, &s_net_argc))) {
        rc = 1;
    } else {
        if (!o->quiet)
            fprintf(stderr, "harness: --net %s: %d namespaces (%s..), tc tbf %s each way, TCP transport\n", o->net,
                    spec.per_node ? spec.nodes : maxw + maxs, h_netem_ns(s_net, 0), spec.rate);
        rc = s_net_sig ? 128 + s_net_sig : s_drive(o, mode_override);
    }
    h_netem_destroy(&s_net);
    free(s_net_argv);
    s_net_argv = NULL;
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
    if (s_net_sig && rc < 128) rc = 128 + s_net_sig;
    return rc;
}

/* One launch's rank command line: the user's (argc, argv), then --as-rank and what the driver chose:
 * the mode (when it overrides the first argument), the single engine, the results file and the
 * timeline tag; `ps` shows what a rank runs. Returns a malloc'd NULL-terminated array (pointers into
 * argv and the arguments), or NULL. */
static char **s_rank_argv(const h_opts_t *o, int argc, char **argv, const char *mode, const char *eng, const char *tag,
                          int *ac)
{
    char **av = calloc((size_t)argc + 10, sizeof *av);
    if (!av) return NULL;
    int n = 0;
    for (int i = 0; i < argc; i++) av[n++] = argv[i];
    av[n++] = "--as-rank";
    if (mode) av[n++] = "--mode", av[n++] = (char *)mode;
    av[n++] = "--engine", av[n++] = (char *)eng;
    if (o->json) av[n++] = "--json", av[n++] = (char *)o->json;
    if (tag && *tag) av[n++] = "--timeline-tag", av[n++] = (char *)tag;
    av[n] = NULL;
    *ac = n;
    return av;
}

static int s_drive(h_opts_t *o, const char *mode_override)
{
    if (o->net && !s_net) return s_drive_net(o, mode_override);
    int worlds[H_MAX_SCALING], nw = 0;
    int rpg = o->ranks_per_gpu > 1 ? o->ranks_per_gpu : 1;
    int base = o->gpus ? o->gpus * rpg : (o->procs ? o->procs : 1);
    if (o->nscaling) {
        for (int i = 0; i < o->nscaling; i++) worlds[nw++] = o->scaling[i];
    } else {
        worlds[nw++] = base;
    }
    int status = 0;
    if (o->gpus) {
        int maxw = 0;
        for (int i = 0; i < nw; i++) maxw = worlds[i] > maxw ? worlds[i] : maxw;
        if (dev_check_gpus((maxw + rpg - 1) / rpg) < 0) { /* GPUs needed: ranks / ranks per GPU */
            fprintf(stderr, "harness: %s\n", err_detail());
            return 1;
        }
    }
    for (int wi = 0; wi < nw; wi++) {
        for (int ei = 0; ei < o->nengines; ei++) {
            const char *eng = o->engines[ei];
            int servers = h_engine_extra_ranks(o, eng, worlds[wi]);
            int nlocal = worlds[wi] + servers;
            char tag[96] = "";
            if (o->timeline && (nw * o->nengines > 1 || mode_override)) /* one file each: FILE.[MODE-]ENGINE.pN.json */
                snprintf(tag, sizeof tag, "%s%s%s.p%d", mode_override ? mode_override : "", mode_override ? "-" : "", eng,
                         worlds[wi]);
            h_launch_cfg_t lc = {.nlocal = nlocal, .nnodes = o->nnodes, .node_rank = o->node_rank,
                                 .master = o->master, .timeout_s = o->timeout_s, .gpus = o->gpus, .quiet = 1};
            if (o->nnodes > 1 && servers) {
                fprintf(stderr, "harness: multi-node %s with dedicated servers is not supported yet; use its colocated mode\n", eng);
                return 2;
            }
            char net_master[64];
            if (s_net) h_netem_launch_cfg(s_net, &lc, nlocal, net_master, sizeof net_master);
            int ac;
            char **av = s_rank_argv(o, s_net ? s_net_argc : o->argc, s_net ? s_net_argv : o->argv, mode_override, eng,
                                    tag, &ac);
            int rc = av ? h_launch(&lc, ac, av) : 1;
            if (!av) fprintf(stderr, "harness: out of memory\n");
            free(av);
            if (rc != 0) {
                fprintf(stderr, "harness: %s with engine %s at %d ranks failed\n", mode_override ? mode_override : o->mode, eng, worlds[wi]);
                if (rc >= 128) return rc; /* interrupted: stop everything */
                status = 1;
            }
        }
    }
    return status;
}

/* A results or timeline file that can't be written should fail the run before any work, not after. */
static int s_check_writable(const char *flag, const char *path)
{
    if (!path || !strcmp(path, "-")) return 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "harness: %s %s: cannot write there: %s\n", flag, path, strerror(errno));
        return 2;
    }
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    h_opts_t o;
    int rc = s_parse(&o, argc, argv);
    if (rc == 1) return 0;
    if (rc) return rc;
    if (!h_is_launched() && s_check_writable("--json", o.json)) return 2;
    if (h_is_launched()) return s_rank_main(&o);
    if (!strcmp(o.mode, "report")) {
        /* h_report returns an exit code (>= 0) or an err.h code (< 0, explained on stderr or by err_detail) */
        err_clear();
        int r = h_report(s_nmeasured, s_measured, s_plots_dir, o.format ? o.format : "text");
        if (r >= 0) return r;
        if (err_detail()[0]) fprintf(stderr, "harness: report: %s\n", err_detail());
        return r == ERR_INVAL ? 2 : 1;
    }
    if (!strcmp(o.mode, "gemm")) {
        int grc = h_gemm_bench(&o);
        if (grc < 0) {
            char m[512];
            fprintf(stderr, "harness: gemm: %s\n", err_trace(grc, m, sizeof m));
            return 1;
        }
        return 0;
    }
    if (!strcmp(o.mode, "model")) {
        /* one launch of the probe world (2 ranks by default), whatever --engine / --scaling say */
        if (!o.procs && !o.gpus && !o.nnodes) o.procs = 2;
        o.nscaling = 0;
        o.engines[0] = h_engine_at(0)->name;
        o.nengines = 1;
        return s_drive(&o, NULL);
    }
    if (!strcmp(o.mode, "run")) {
        /* the default comparison: every engine, 4 CPU ranks, bench then train */
        if (!o.procs) o.procs = 4;
        o.nengines = 0;
        for (int i = 0; i < h_engine_count(); i++) o.engines[o.nengines++] = h_engine_at(i)->name;
        if (!o.json) {
            /* a scratch file of this run only (results/tmp is not committed) */
            o.json = "results/tmp/run-latest.jsonl";
            mkdir("results", 0755);
            mkdir("results/tmp", 0755);
            unlink(o.json);
        }
        printf("# syncbench run: bench then train, engines %s; %d CPU ranks; results in %s\n", h_engine_names(), o.procs, o.json);
        fflush(stdout);
        int a = s_drive(&o, "bench");
        int b = a >= 128 ? a : s_drive(&o, "train");
        if (a < 128 && b < 128 && strcmp(o.json, "-")) {
            /* the comparison side by side, and where the figures went */
            char *files[1] = {(char *)o.json};
            printf("\n# syncbench run: the engines side by side (harness report %s)\n", o.json);
            fflush(stdout);
            h_report(1, files, NULL, "text");
        }
        return a ? a : b;
    }
    if (o.procs || o.gpus || o.nnodes || o.nscaling) return s_drive(&o, NULL);
    return s_rank_main(&o);
}
