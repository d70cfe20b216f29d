/* train.c: `harness train`: for each engine, every worker trains the shared model (trainer/) under
 * that engine: warm-up steps, then --steps timed steps. Each rank measures its own samples/s, step
 * time p50/p99, compute vs communication vs waiting time, loss and peak RSS; the ranks allgather one
 * fixed-size record each and rank 0 prints the table and appends one JSON line per engine. Dedicated
 * PS server ranks serve meanwhile and contribute their memory. OpenBLAS threads per rank: the CPUs
 * the rank is bound to, or when unbound the cores divided by the ranks sharing this host (torchrun's
 * OMP_NUM_THREADS=1 for several ranks on few cores), unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS say
 * otherwise. */
#include "harness/registry/engines.h"
#include "harness/record/result.h"
#include "harness/modes/modes.h"
#include <cblas.h>
#include <math.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/dev.h"
#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/proc.h"
#include "core/timer.h"
#include "trainer/trainer.h"
#include "trainer/ckpt.h"
#include "harness/modes/agree.h"
#include "trainer/workload.h"
#include "harness/emulate/train_emu.h"
#include "harness/emulate/cluster.h"
#include "harness/record/traffic.h"

/* one record per rank, allgathered (plain data, same layout on every rank) */
typedef struct {
    int32_t  rank, server, threads, nbuckets;
    double   samples_per_s;         /* local batch * timed steps / timed seconds */
    double   compute_samples_per_s; /* local batch / compute time (p50) */
    double   step_p50, step_p99, compute_p50, comm_p50, wait_p50, data_p50, sync_p50;
    double   loss_first, loss_last, acc_last;
    double   elapsed_s;
    uint64_t mem_peak, mem_engine_peak, bytes_sent, bytes_received, skipped, samples;
    uint64_t mem_dev_peak;          /* --gpus: the project's device allocations (dev_mem_stats), peak */
    float    loss_scale;
    int32_t  pad;
    double   cpu_s, wall_s;         /* CPU this process used (all threads) over wall seconds: the timed steps, or serving */
    double   system_busy;           /* the whole machine's CPU busy share over the timed steps (/proc/stat); -1 unknown */
    double   run_delay_s;           /* its threads' time waiting for a CPU over the timed steps (proc_run_delay_s); -1 unknown */
} s_rank_t;

static int s_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Percentile (nearest rank) of n values; sorts v. */
static double s_pct(double *v, size_t n, double p)
{
    if (!n) return 0;
    qsort(v, n, sizeof *v, s_cmp_d);
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    return v[k ? k - 1 : 0];
}

/* CPU seconds this process has used, all threads */
static double s_cpu_s(void)
{
    struct timespec ts;
    return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0 ? (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 : 0;
}

static int s_blas_threads(const comm_t *comm)
{
    const char *e = getenv("OPENBLAS_NUM_THREADS");
    if (!e) e = getenv("OMP_NUM_THREADS");
    if (e && atoi(e) > 0) return openblas_get_num_threads();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int lw = comm->local_world > 0 ? comm->local_world : 1;
    int t = (int)(cores / lw);
    /* bound (--bind core/numa): the CPUs this rank owns; unbound: a share of the machine */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int mine = CPU_COUNT(&set);
        if (mine < cores) t = mine;
    }
    if (t < 1) t = 1;
    openblas_set_num_threads(t);
    return t;
}

/* Rank 0's progress line. An emulated model (emu) computes no loss: its line shows none, and its rate and step
 * in emulated time (the host's divided by --dilate), as its table does. */
static void s_progress(const h_train_cfg_t *o, const char *engine, int tty, int i, int total, const trainer_step_t *st,
                       int nworkers, int warm, int emu)
{
    if (o->quiet) return;
    double d = emu && o->dilate > 1 ? o->dilate : 1, step_ms = st->step_ms / d;
    double rate = step_ms > 0 ? (double)st->samples * nworkers * 1000.0 / step_ms : 0;
    if (emu) {
        static double last_emu;
        double now = now_ms();
        if (tty && i != total && now - last_emu < 100) return;
        last_emu = now;
        int every = total >= 10 ? total / 10 : 1;
        if (!tty && i % every && i != total) return;
        printf(tty ? "\r  %-5s %s %4d/%-4d  ~%.0f samples/s (emulated)  step %.2f ms   " :
                     "# %s %s %d/%d: ~%.0f samples/s emulated (rank 0 x workers), step %.2f ms\n", engine,
               warm ? "warm-up" : tty ? "step   " : "step", i, total, rate, step_ms);
        fflush(stdout);
        return;
    }
    static double last_ms;
    double now = now_ms();
    if (tty && i != total && now - last_ms < 100) return; /* at most 10 updates a second */
    last_ms = now;
    if (tty) {
        printf("\r  %-5s %s %4d/%-4d  rank 0 loss %.4f  ~%.0f samples/s  step %.2f ms  scale %g   ", engine, warm ? "warm-up" : "step   ",
               i, total, st->loss, rate, st->step_ms, (double)st->loss_scale);
        fflush(stdout);
    } else {
        int every = total >= 10 ? total / 10 : 1;
        if (i % every == 0 || i == total) {
            printf("# %s %s %d/%d: rank 0 loss %.4f, ~%.0f samples/s (rank 0 x %d), step %.2f ms\n", engine, warm ? "warm-up" : "step",
                   i, total, st->loss, rate, nworkers, st->step_ms);
            fflush(stdout);
        }
    }
}

static int s_parse_straggler(const char *s, int *rank, double *ms)
{
    *rank = -1;
    *ms = 0;
    if (!s || !*s) return 0;
    char *end;
    long r = strtol(s, &end, 10);
    if (end == s || *end != ':' || r < 0) return err_set(ERR_INVAL, "--straggler '%s': expected RANK:MS", s);
    double v = strtod(end + 1, &end);
    if (*end || !(v >= 0)) return err_set(ERR_INVAL, "--straggler '%s': expected RANK:MS", s);
    *rank = (int)r;
    *ms = v;
    return 0;
}

typedef struct {
    double *step, *compute, *comm, *wait, *data, *sync;
} s_series_t;

static int s_run_worker(const h_train_cfg_t *o, comm_t *comm, const char *name, const engine_ops_t *ops, engine_t **eng,
                        const engine_cfg_t *ecfg, s_rank_t *me, trainer_t **tp)
{
    trainer_cfg_t tc;
    trainer_cfg_default(&tc);
    tc.model = o->model;
    tc.data = o->data;
    /* --batch-per-gpu B: B a worker; --batch: global; neither: an emulated real model takes 64 a GPU (the
     * batch of Horovod's and BytePS's benchmarks), the MLP the trainer's default global batch */
    size_t per = o->batch_per_gpu > 0 ? (size_t)o->batch_per_gpu
                 : o->batch <= 0 && workload_is_known(o->model) ? (size_t)H_EMU_BATCH_PER_GPU : 0;
    tc.global_batch = per ? per * (size_t)ecfg->nworkers : o->batch > 0 ? (size_t)o->batch : 0;
    tc.world = ecfg->nworkers;
    tc.rank = comm->rank;
    if (o->optim) CHECK(optim_parse(o->optim, &tc.optim));
    tc.grad_dtype = o->grad_dtype;
    tc.bucket_mb = o->bucket_mb;
    tc.no_overlap = o->no_overlap;
    int sync_mode = h_engine_in_sync(&o->es, name);
    tc.check_every = sync_mode ? o->check_every : 0;
    tc.drop_last = o->drop_last;
    tc.seed = o->seed;
    tc.timeout_ms = o->timeout_s > 0 ? o->timeout_s * 1000 : 60000;
    CHECK(s_parse_straggler(o->straggler, &tc.straggler_rank, &tc.straggler_ms));
    if (tc.straggler_rank >= ecfg->nworkers)
        return err_set(ERR_INVAL, "--straggler %s: rank %d is not a worker of this run (workers 0..%d)", o->straggler,
                       tc.straggler_rank, ecfg->nworkers - 1);
    tc.comm = comm;
    tc.device = ecfg->device;       /* --gpus: the model on this rank's GPU (--gpus) */
    tc.tf32 = o->tf32;
    tc.emu_device = o->emu_device;  /* an emulated real model (--model resnet50 ...) */
    tc.shrink = o->shrink;
    tc.dilate = o->dilate;
    CHECK(trainer_new(tp, &tc));
    trainer_t *t = *tp;
    if (o->resume) CHECK(trainer_resume(t, o->resume));
    CHECK(trainer_attach(t, ops, *eng));
    if (o->save) CHECK(trainer_can_save(t)); /* every rank, before training: fail early and together */
    if (o->save) CHECK(ckpt_check_path(o->save)); /* the path too: a missing directory must not cost the run */

    /* --steps optimizer steps in all: the first W (warm-up) untimed, the S after them timed */
    int W = o->warmup_steps > 0 ? o->warmup_steps : 0, S = o->steps - W > 0 ? o->steps - W : 1;
    s_series_t s = {calloc((size_t)S, sizeof(double)), calloc((size_t)S, sizeof(double)), calloc((size_t)S, sizeof(double)),
                    calloc((size_t)S, sizeof(double)), calloc((size_t)S, sizeof(double)), calloc((size_t)S, sizeof(double))};
    int rc = 0;
    if (!s.step || !s.compute || !s.comm || !s.wait || !s.data || !s.sync) {
        rc = ERR_NOMEM;
        goto out;
    }
    int tty = comm->rank == 0 && isatty(STDOUT_FILENO);
    int show = comm->rank == 0;
    trainer_step_t st;
    for (int i = 0; i < W; i++) {
        CHECK_GOTO(rc, trainer_step(t, &st), out);
        if (i == 0) me->loss_first = st.loss;
        me->skipped += (uint64_t)st.skipped; /* an overflow skip is a skip, warm-up or not */
        if (show) s_progress(o, name, tty, i + 1, W, &st, ecfg->nworkers, 1, !trainer_shape(t));
    }
    uint64_t t0 = now_ns();
    double cpu0 = s_cpu_s(), rd0 = proc_run_delay_s();
    unsigned long long sb0 = 0, st0 = 0, sb1 = 0, st1 = 0;
    int sys_ok = h_host_cpu_sample(&sb0, &st0) == 0;
    for (int i = 0; i < S; i++) {
        CHECK_GOTO(rc, trainer_step(t, &st), out);
        if (i == 0 && W == 0) me->loss_first = st.loss;
        s.step[i] = st.step_ms;
        s.compute[i] = st.compute_ms;
        s.comm[i] = st.comm_ms;
        s.wait[i] = st.wait_ms;
        s.data[i] = st.data_ms;
        s.sync[i] = st.sync_ms;
        me->samples += st.samples;
        me->skipped += (uint64_t)st.skipped;
        if (show) s_progress(o, name, tty, i + 1, S, &st, ecfg->nworkers, 0, !trainer_shape(t));
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    me->cpu_s = s_cpu_s() - cpu0;
    me->wall_s = secs;
    double rd1 = proc_run_delay_s();
    me->run_delay_s = rd0 >= 0 && rd1 >= rd0 ? rd1 - rd0 : -1;
    sys_ok = sys_ok && h_host_cpu_sample(&sb1, &st1) == 0 && st1 > st0;
    me->system_busy = sys_ok ? (double)(sb1 - sb0) / (double)(st1 - st0) : -1;
    if (tty && !o->quiet) printf("\r%100s\r", "");
    /* a last comparison of the parameters, whatever --check-every says (sync modes only) */
    if (sync_mode) CHECK_GOTO(rc, trainer_check(t), out);
    me->loss_last = st.loss;
    me->acc_last = st.samples ? (double)st.correct / (double)st.samples : 0;
    me->loss_scale = trainer_loss_scale(t);
    me->elapsed_s = secs;
    me->samples_per_s = secs > 0 ? (double)me->samples / secs : 0;
    me->step_p99 = s_pct(s.step, (size_t)S, 99);
    me->step_p50 = s_pct(s.step, (size_t)S, 50);
    me->compute_p50 = s_pct(s.compute, (size_t)S, 50);
    me->comm_p50 = s_pct(s.comm, (size_t)S, 50);
    me->wait_p50 = s_pct(s.wait, (size_t)S, 50);
    me->data_p50 = s_pct(s.data, (size_t)S, 50);
    me->sync_p50 = s_pct(s.sync, (size_t)S, 50);
    me->compute_samples_per_s = me->compute_p50 > 0 ? (double)trainer_local_batch(t) * 1000.0 / me->compute_p50 : 0;
    me->nbuckets = trainer_nbuckets(t);
out:
    free(s.step); free(s.compute); free(s.comm); free(s.wait); free(s.data); free(s.sync);
    return rc;
}

/* A JSON array of the field at byte offset off (a uint64_t) of the first n records (NULL when out of
 * memory) */
static json_t *s_list_u64(const s_rank_t *all, int n, size_t off)
{
    uint64_t *v = malloc(((size_t)n + 1) * sizeof *v);
    if (!v) return NULL;
    for (int r = 0; r < n; r++) v[r] = *(const uint64_t *)((const char *)&all[r] + off);
    json_t *a = h_jarr_u64(v, (size_t)n);
    free(v);
    return a;
}

/* max / mean of the field at byte offset off (a uint64_t) over the first n records; 0 if all are 0 */
static double s_imbalance(const s_rank_t *all, int n, size_t off, double *max)
{
    double m = 0, sum = 0;
    for (int r = 0; r < n; r++) {
        double v = (double)*(const uint64_t *)((const char *)&all[r] + off);
        m = fmax(m, v);
        sum += v;
    }
    if (max) *max = m;
    return sum > 0 ? m / (sum / n) : 0;
}

/* The engine's result over all ranks: sums and means over workers, slowest worker's times. */
typedef struct {
    int P, R;                         /* workers, ranks */
    double sps, csps, step50, step99, comp50, comm50, wait50, data50, sync50, lf, ll, acc;
    double mmax, imb, dmax, dimb, tflops;
    uint64_t sent, skipped;
    size_t lb;                        /* local batch */
    size_t params;                    /* parameters the engine moved (an emulated model's after --shrink) */
    char model[160];
    h_emu_sum_t emu;                  /* an emulated model's figures (emu.on) */
    const char *traffic;              /* the run's traffic matrix as JSON ("null": none) */
} s_sum_t;

static void s_summarize(const h_train_cfg_t *o, const comm_t *comm, const engine_cfg_t *ecfg, const s_rank_t *all,
                        const trainer_t *t, s_sum_t *S)
{
    memset(S, 0, sizeof *S);
    int P = S->P = ecfg->nworkers, R = S->R = comm->world;
    S->skipped = all[0].skipped;
    for (int r = 0; r < P; r++) {
        S->sps += all[r].samples_per_s;
        S->csps += all[r].compute_samples_per_s;
        S->step50 = fmax(S->step50, all[r].step_p50);
        S->step99 = fmax(S->step99, all[r].step_p99);
        S->comp50 = fmax(S->comp50, all[r].compute_p50);
        S->comm50 = fmax(S->comm50, all[r].comm_p50);
        S->wait50 = fmax(S->wait50, all[r].wait_p50);
        S->data50 = fmax(S->data50, all[r].data_p50);
        S->sync50 = fmax(S->sync50, all[r].sync_p50);
        S->lf += all[r].loss_first / P;
        S->ll += all[r].loss_last / P;
        S->acc += all[r].acc_last / P;
    }
    for (int r = 0; r < R; r++) S->sent += all[r].bytes_sent;
    S->imb = s_imbalance(all, R, offsetof(s_rank_t, mem_peak), &S->mmax);
    S->dimb = s_imbalance(all, R, offsetof(s_rank_t, mem_dev_peak), &S->dmax);
    S->lb = trainer_local_batch(t);
    S->params = trainer_param_count(t);
    const mlp_shape_t *sh = trainer_shape(t);
    if (!sh) {
        h_emu_summarize(trainer_emu(t), &o->emu, S->P, S->sps, S->step50, all[0].system_busy, all, R, sizeof *all,
                        offsetof(s_rank_t, cpu_s), offsetof(s_rank_t, wall_s), offsetof(s_rank_t, run_delay_s), &S->emu);
        S->emu.local_batch = S->lb;
        snprintf(S->model, sizeof S->model, "%s", S->emu.model);
        return;
    }
    mlp_format(sh, S->model, sizeof S->model);
    S->tflops = S->csps * mlp_flops_per_sample(sh) / 1e12; /* the trainer's achieved GEMM-equivalent rate */
}

/* Rank 0: the table on stdout. */
static void s_print(const h_train_cfg_t *o, const char *label, const s_rank_t *all, const trainer_t *t, const char *impl,
                    const s_sum_t *S)
{
    int P = S->P, R = S->R;
    const mlp_shape_t *sh = trainer_shape(t);
    if (!sh) {
        h_emu_print(&o->emu, label, impl, P, R > P, all[0].nbuckets, &S->emu);
        return;
    }
    printf("#\n# syncbench train: engine %s%s%s%s, %d worker%s%s, model %s (%.2fM params, %d bucket%s closed at >= %g MiB%s), "
           "data %s, batch %zu (%zu/worker), optim %s, grads %s, %d BLAS thread%s/rank\n",
           label, *h_engine_impl_note(label, impl) ? " (" : "", h_engine_impl_note(label, impl),
           *h_engine_impl_note(label, impl) ? ")" : "", P, P > 1 ? "s" : "", R > P ? " + dedicated servers" : "", S->model,
           (double)sh->count / 1e6, all[0].nbuckets, all[0].nbuckets > 1 ? "s" : "", o->bucket_mb > 0 ? o->bucket_mb : 25.0,
           o->no_overlap ? ", no overlap" : "", trainer_data_name(t), S->lb * (size_t)P, S->lb, o->optim ? o->optim : "sgd",
           dt_name(o->grad_dtype), all[0].threads, all[0].threads > 1 ? "s" : "");
    printf("# %-18s %5s %11s %11s %9s %9s %9s %9s %9s %17s %10s %9s\n", "engine", "world", "samples/s", "compute", "step p50",
           "step p99", "compute", "comm", "wait", "loss", "mem peak", "mem");
    printf("# %-18s %5s %11s %11s %9s %9s %9s %9s %9s %17s %10s %9s\n", "", "", "(sum)", "samples/s", "(ms)", "(ms)",
           "p50 (ms)", "p50 (ms)", "p50 (ms)", "first -> last", "max (MiB)", "max/mean");
    printf("  %-18s %5d %11.1f %11.1f %9.2f %9.2f %9.2f %9.2f %9.2f %8.4f -> %6.4f %10.1f %9.3f\n", label, P, S->sps, S->csps,
           S->step50, S->step99, S->comp50, S->comm50, S->wait50, S->lf, S->ll, S->mmax / 1048576.0, S->imb);
    if (S->skipped) printf("# %llu step%s skipped on overflow; final loss scale %g\n", (unsigned long long)S->skipped,
                           S->skipped > 1 ? "s" : "", (double)all[0].loss_scale);
    for (int r = 0; r < R && R <= 16; r++) {
        char dev_s[48] = ""; /* --gpus: the rank's device memory beside its host RSS */
        if (o->gpus) snprintf(dev_s, sizeof dev_s, "  device %7.1f MiB", (double)all[r].mem_dev_peak / 1048576.0);
        printf("#   rank %2d %-6s %10.1f samples/s  step p50 %7.2f ms  compute %7.2f  comm %7.2f  wait %7.2f  peak %7.1f MiB"
               "  engine %7.1f MiB%s\n",
               r, all[r].server ? "server" : "worker", all[r].samples_per_s, all[r].step_p50, all[r].compute_p50,
               all[r].comm_p50, all[r].wait_p50, (double)all[r].mem_peak / 1048576.0,
               (double)all[r].mem_engine_peak / 1048576.0, dev_s);
    }
    if (o->gpus)
        printf("# device memory (the project's allocations): peak max %.1f MiB, max/mean %.3f; compute %.3f TFLOP/s "
               "(compute samples/s x %.3g FLOP/sample; compare harness gemm --gpus 1)\n", S->dmax / 1048576.0, S->dimb,
               S->tflops, mlp_flops_per_sample(sh));
    fflush(stdout);
}

/* Rank 0: the engine's JSON line appended to --json: 0, or why it could not be written. */
static int s_json(const h_train_cfg_t *o, const char *name, const char *label, const s_rank_t *all, const trainer_t *t,
                  const char *impl, const h_meta_t *meta, const s_sum_t *S)
{
    int P = S->P, R = S->R;
    double eimb = s_imbalance(all, R, offsetof(s_rank_t, mem_engine_peak), NULL);
    double *sps = malloc(((size_t)P + 1) * sizeof *sps);
    for (int r = 0; sps && r < P; r++) sps[r] = all[r].samples_per_s;
    json_t *body = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:s, s:I, s:s, s:s, s:s, s:f, s:i, s:b}",
        "engine", name, "engine_label", label, "impl", impl ? impl : "default", "world", P, "ranks", R, "servers", R - P,
        "steps", o->steps, "warmup_steps", o->warmup_steps, "batch", (json_int_t)(S->lb * (size_t)P),
        "local_batch", (json_int_t)S->lb, "model", S->model, "params", (json_int_t)S->params, "data", trainer_data_name(t),
        "optim", o->optim ? o->optim : "sgd", "grad_dtype", dt_name(o->grad_dtype),
        "bucket_mb", o->bucket_mb > 0 ? o->bucket_mb : 25.0, "nbuckets", all[0].nbuckets, "overlap", !o->no_overlap);
    /* steps: every optimizer step, warm-up included (older files: the timed steps, with no timed_steps) */
    int bad = h_jmerge(body, json_pack("{s:i}", "timed_steps", o->steps - o->warmup_steps));
    bad = bad || h_jmerge(body, json_pack("{s:i, s:f, s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I}",
        "blas_threads", all[0].threads, "samples_per_s", S->sps, "samples_per_s_rank", sps ? h_jarr_f64(sps, (size_t)P) : NULL,
        "compute_samples_per_s", S->csps, "step_ms_p50", S->step50, "step_ms_p99", S->step99, "compute_ms_p50", S->comp50,
        "comm_ms_p50", S->comm50, "wait_ms_p50", S->wait50, "data_ms_p50", S->data50, "sync_ms_p50", S->sync50,
        "skipped_steps", (json_int_t)S->skipped, "bytes_sent", (json_int_t)S->sent));
    /* an emulated model computes no loss and no accuracy: its line has none (older files wrote 0 for both) */
    if (!S->emu.on)
        bad = bad || h_jmerge(body, json_pack("{s:f, s:f, s:f}", "loss_first", S->lf, "loss_last", S->ll, "acc_last", S->acc));
    free(sps);
    /* mem_engine_bytes: what each rank's engine holds (buffers, shards, optimizer state, aggregation):
     * the part of the memory the synchronization scheme decides, where a PS server's load shows */
    bad |= h_jmerge(body, json_pack("{s:o, s:f, s:i, s:o, s:f, s:f, s:s, s:o, s:f, s:o}",
        "mem_peak_bytes", s_list_u64(all, R, offsetof(s_rank_t, mem_peak)), "mem_imbalance", S->imb, "gpus", o->gpus,
        "mem_dev_peak_bytes", s_list_u64(all, R, offsetof(s_rank_t, mem_dev_peak)), "mem_dev_imbalance", S->dimb,
        "compute_tflops", S->tflops, "straggler", o->straggler ? o->straggler : "",
        "mem_engine_bytes", s_list_u64(all, R, offsetof(s_rank_t, mem_engine_peak)), "mem_engine_imbalance", eimb,
        "traffic_bytes", S->traffic ? h_jarr_text(S->traffic) : json_null()));
    if (S->emu.on) bad |= h_jmerge(body, h_emu_json(&o->emu, &S->emu)); /* an emulated run's own fields */
    if (bad && body) {
        json_decref(body);
        body = NULL;
    }
    return h_result_write(&o->out, meta, "train", body);
}

/* Rank 0: the engine's table and JSON line: 0, or why the line could not be written. */
static int s_report(const h_train_cfg_t *o, comm_t *comm, const char *name, const engine_cfg_t *ecfg, const s_rank_t *all,
                     const trainer_t *t, const char *impl, const h_meta_t *meta, const char *traffic)
{
    s_sum_t S;
    s_summarize(o, comm, ecfg, all, t, &S);
    S.traffic = traffic;
    char label[128];
    h_engine_label(label, sizeof label, name, impl, S.R - S.P, 0);
    s_print(o, label, all, t, impl, &S);
    return o->out.json ? s_json(o, name, label, all, t, impl, meta, &S) : 0;
}

static int s_train_engine(const h_train_cfg_t *o, comm_t *comm, const char *name, const h_meta_t *meta)
{
    const engine_ops_t *ops = h_engine_find(name);
    if (!ops) return err_set(ERR_INVAL, "unknown engine '%s' (have %s)", name, h_engine_names());
    engine_cfg_t ecfg;
    h_engine_cfg(&o->es, comm, name, &ecfg);
    if (ecfg.nworkers < 1) return err_set(ERR_INVAL, "engine %s: no workers", name);
    s_rank_t me;
    memset(&me, 0, sizeof me);
    me.rank = comm->rank;
    me.threads = s_blas_threads(comm);
    mem_reset_peak();
    dev_mem_reset_peak();
    uint64_t *tsent0 = calloc((size_t)comm->world, sizeof *tsent0); /* the traffic matrix counts from here */
    if (!tsent0) return ERR_NOMEM;
    h_traffic_snap(comm, tsent0, NULL);
    engine_t *eng = NULL;
    trainer_t *t = NULL;
    int rc = ops->create(&eng, comm, &ecfg);
    if (rc < 0) {
        err_note(rc, __FILE__, __LINE__, "ops->create");
        free(tsent0);
        return rc;
    }
    engine_stats_t es;
    memset(&es, 0, sizeof es);
    if (h_is_server(comm, &ecfg)) {
        me.server = 1;
        double c0 = s_cpu_s(), d0 = proc_run_delay_s();
        uint64_t w0 = now_ns();
        if (!ops->serve) rc = err_set(ERR_STATE, "engine %s has no server role", name);
        else rc = ops->serve(eng);
        me.cpu_s = s_cpu_s() - c0;
        double d1 = proc_run_delay_s();
        me.run_delay_s = d0 >= 0 && d1 >= d0 ? d1 - d0 : -1;
        me.wall_s = (double)(now_ns() - w0) / 1e9;
    } else {
        rc = s_run_worker(o, comm, name, ops, &eng, &ecfg, &me, &t);
    }
    if (ops->stats) ops->stats(eng, &es);
    me.bytes_sent = es.bytes_sent;
    me.bytes_received = es.bytes_received;
    me.mem_engine_peak = es.mem_engine_peak_bytes;
    const char *impl = es.impl;
    char impl_buf[64];
    snprintf(impl_buf, sizeof impl_buf, "%s", impl ? impl : "default");
    /* the checkpoint before the engine goes: ring and tree keep the optimizer state in the engine; its
     * failure is returned after the gather, so it cannot leave the other ranks waiting */
    int save_rc = 0;
    char save_err[512] = "";
    uint64_t sum = 0;
    if (rc == 0 && t && comm->rank == 0) {
        sum = trainer_checksum(t);
        if (o->save && (save_rc = trainer_save(t, o->save)) < 0) snprintf(save_err, sizeof save_err, "%s", err_detail());
    }
    ops->destroy(&eng); /* before the gather: workers leaving is what lets dedicated servers return */
    me.mem_peak = mem_peak_rss();
    dev_mem_t dm;
    dev_mem_stats(&dm);
    me.mem_dev_peak = dm.dev_peak;
    if (rc < 0) {
        trainer_destroy(&t);
        free(tsent0);
        return rc;
    }
    s_rank_t *all = calloc((size_t)comm->world, sizeof *all);
    uint64_t *tmat = calloc((size_t)comm->world * (size_t)comm->world, sizeof *tmat);
    if (!all || !tmat) {
        trainer_destroy(&t);
        free(all);
        free(tmat);
        free(tsent0);
        return ERR_NOMEM;
    }
    rc = comm_allgather(comm, &me, sizeof me, all, o->timeout_s > 0 ? o->timeout_s * 1000 : 60000);
    if (rc == 0) rc = h_traffic_gather_all(comm, tsent0, tmat, o->timeout_s > 0 ? o->timeout_s * 1000 : 60000);
    char *tjson = rc == 0 && comm->rank == 0 ? h_traffic_json(tmat, comm->world) : NULL;
    int jrc = rc == 0 && comm->rank == 0 ? s_report(o, comm, name, &ecfg, all, t, impl_buf, meta, tjson) : 0;
    free(tjson);
    free(tmat);
    free(tsent0);
    if (rc == 0 && comm->rank == 0) {
        printf("# %s: parameters after step %llu: checksum %016llx\n", name, (unsigned long long)trainer_steps_done(t),
               (unsigned long long)sum);
        if (save_rc < 0) rc = err_set(save_rc, "%s", save_err);
        else if (jrc < 0) rc = jrc; /* a results file that cannot be written fails the run */
        else if (o->save && !o->quiet)
            printf("# %s: checkpoint after step %llu written to %s\n", name, (unsigned long long)trainer_steps_done(t), o->save);
    }
    free(all);
    trainer_destroy(&t);
    return rc;
}

int h_train(const h_train_cfg_t *o, comm_t *comm)
{
    h_meta_t meta;
    memset(&meta, 0, sizeof meta);
    if (comm->rank == 0) h_meta_fill(&meta, o->out.argc, o->out.argv);
    /* every rank, servers too, runs the same training: a rank started with other options fails them all */
    h_agree_t ag = {0};
    char engines[160] = "";
    for (int i = 0; i < o->nengines; i++)
        snprintf(engines + strlen(engines), sizeof engines - strlen(engines), "%s%s", i ? "," : "", o->engines[i]);
    h_agree_add(&ag, "--engine", "%s", engines);
    h_agree_add(&ag, "--impl", "%s", o->es.impl ? o->es.impl : "(default)");
    h_agree_add(&ag, "--seg-kb", "%zu", o->es.seg_bytes);
    h_agree_add(&ag, "--model", "%s", o->model ? o->model : "(default)");
    h_agree_add(&ag, "--data", "%s", o->data ? o->data : "(default)");
    h_agree_add(&ag, "--optim", "%s", o->optim ? o->optim : "(default)");
    h_agree_add(&ag, "--grad-dtype", "%d", (int)o->grad_dtype);
    h_agree_add(&ag, "--steps", "%d", o->steps);
    h_agree_add(&ag, "--warmup-steps", "%d", o->warmup_steps);
    h_agree_add(&ag, "--batch", "%d", o->batch);
    h_agree_add(&ag, "--batch-per-gpu", "%d", o->batch_per_gpu);
    h_agree_add(&ag, "--bucket-mb", "%.17g", o->bucket_mb);
    h_agree_add(&ag, "--no-overlap", "%d", o->no_overlap);
    h_agree_add(&ag, "--drop-last", "%d", o->drop_last);
    h_agree_add(&ag, "--seed", "%llu", o->seed);
    h_agree_add(&ag, "--gpus", "%d", o->gpus);
    h_agree_add(&ag, "--resume", "%s", o->resume ? "yes" : "no");
    /* the engines' own options (--servers, --ps-*, --ring-*, ...), given or left at their defaults */
    const engine_opt_t *eo;
    char flag[40];
    for (int k = 0; (eo = h_engine_opt(k, NULL)) && k < H_MAX_ENGOPTS; k++) {
        snprintf(flag, sizeof flag, "--%s", eo->name);
        h_agree_add(&ag, flag, "%s", o->eopt_given && o->eopt_given[k] ? o->eopt_given[k] : "(default)");
    }
    CHECK(h_agree(comm, "train", &ag, o->timeout_s > 0 ? o->timeout_s * 1000 : 60000));
    for (int i = 0; i < o->nengines; i++) CHECK(s_train_engine(o, comm, o->engines[i], &meta));
    return 0;
}
