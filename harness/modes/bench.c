/* bench.c: `harness bench`, the collective microbenchmark in the manner of nccl-tests: for each size,
 * warm-up then timed out-of-place (--in-place: in place) allreduces, inputs chosen so the exact result is known (#wrong),
 * time = median over iterations of the slowest rank's time, algbw = bytes / time, busbw = algbw *
 * 2(P-1)/P (GB = 1e9 bytes; 0 at P = 1: no bus traffic, as nccl-tests), P = the number of workers.
 * Dedicated PS servers serve meanwhile. --quiet drops progress lines only: the table always prints. */
#include "harness/registry/engines.h"
#include "harness/record/result.h"
#include "harness/modes/modes.h"
#include "harness/emulate/cluster.h"
#include "harness/record/traffic.h"
#include "core/dev.h"
#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/timer.h"
#include "core/trace.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Input of rank r at element i: a small integer, so every partial sum of up to 64 ranks is exact in
 * f32, f16 and bf16 (|sum| <= 256). */
static inline float s_input(int r, size_t i) { return (float)((int)((i * 7 + (size_t)r * 13) % 9) - 4); }

static void s_fill(void *buf, size_t count, dtype_t dt, int rank)
{
    float tmp[1024];
    for (size_t off = 0; off < count; off += 1024) {
        size_t n = count - off < 1024 ? count - off : 1024;
        for (size_t i = 0; i < n; i++) tmp[i] = s_input(rank, off + i);
        dt_convert((char *)buf + off * dt_size(dt), dt, tmp, DT_F32, n);
    }
}

static size_t s_check(const void *buf, size_t count, dtype_t dt, int nworkers, redop_t op)
{
    float got[1024];
    size_t wrong = 0;
    for (size_t off = 0; off < count; off += 1024) {
        size_t n = count - off < 1024 ? count - off : 1024;
        dt_convert(got, DT_F32, (const char *)buf + off * dt_size(dt), dt, n);
        for (size_t i = 0; i < n; i++) {
            float want = 0;
            for (int r = 0; r < nworkers; r++) want += s_input(r, off + i);
            if (op == OP_AVG) {
                /* the average of integers: allow the rounding of the dtype */
                float exact = want / (float)nworkers;
                float tol = dt == DT_F32 ? 1e-6f : dt == DT_F16 ? 2e-3f : 1.6e-2f;
                if (!(fabsf(got[i] - exact) <= tol * fmaxf(1.0f, fabsf(exact)))) wrong++;
            } else if (got[i] != want) {
                wrong++;
            }
        }
    }
    return wrong;
}

/* -a: how an iteration's time is taken over the workers, by its value (JSON "time_ranks" unless 3) */
static const char *const s_time_ranks[] = {"rank0", "mean", "min", "max"};

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One engine's run on this rank. */
typedef struct {
    const h_bench_cfg_t *o;
    comm_t *comm;
    const char *name;
    const engine_ops_t *ops;
    engine_t *eng;
    engine_cfg_t cfg;
    const h_meta_t *meta;
    int P, tmo;                       /* workers; timeout (ms) */
    void *sendbuf, *recvbuf;          /* host buffers, filled and checked here */
    void *dsend, *drecv;              /* with GPUs: the device copies the collective runs on */
    double *times;                    /* this size's iterations (us) */
    double loop_us;                   /* this size's timed loop on this worker / iterations (us) */
    uint64_t *traffic;                /* with --json: this size's traffic matrix (world x world bytes) */
    double sys_busy;                  /* rank 0: the whole machine's CPU busy share over this size (-1 unknown) */
} s_bench_t;

/* The sizes to run: MIN, MIN * factor, ... up to MAX, whole elements, no repeats; returns how many. */
static size_t s_sizes(const h_bench_cfg_t *o, size_t *sizes, size_t max)
{
    size_t esz = dt_size(o->dtype), n = 0;
    for (double s = (double)o->size_min; s <= (double)o->size_max * 1.0000001 && n < max; s *= o->factor) {
        size_t b = ((size_t)s / esz) * esz;
        if (b < esz) b = esz;
        if (n == 0 || b != sizes[n - 1]) sizes[n++] = b;
    }
    return n;
}

/* What carries the engine's bytes: the engine says when it is not the communicator's transport (the
 * PS's ZeroMQ van, NCCL, MPI), else the transport towards the next rank. */
static const char *s_transport(const s_bench_t *B)
{
    engine_stats_t st;
    B->ops->stats(B->eng, &st);
    if (st.transport) return st.transport;
    const comm_t *comm = B->comm;
    return comm->world > 1 ? tp_kind(comm->tp, (comm->rank + 1) % comm->world) : "self";
}

static void s_header(const s_bench_t *B)
{
    const h_bench_cfg_t *o = B->o;
    engine_stats_t s0;
    B->ops->stats(B->eng, &s0);
    const char *impl = s0.impl ? s0.impl : "default";
    char label[128];
    h_engine_label(label, sizeof label, B->name, impl, B->comm->world - B->cfg.nworkers, (int)engine_counter(&s0, "colocate"));
    const char *note = h_engine_impl_note(label, impl);
    printf("#\n# syncbench bench: engine %s%s%s%s, %d ranks%s, dtype %s, op %s, transport %s, %s%s%s\n", label,
           *note ? " (" : "", note, *note ? ")" : "", B->P,
           B->comm->world > B->cfg.nworkers ? " + dedicated servers" : "", dt_name(o->dtype), op_name(o->op),
           s_transport(B), o->in_place ? "in place" : "out-of-place", o->time_ranks != 3 ? ", time over the workers: " : "",
           o->time_ranks != 3 ? s_time_ranks[o->time_ranks] : "");
    printf("# %12s %12s %6s %6s %10s %9s %9s %8s %8s\n", "size(B)", "count", "type", "redop", "time(us)", "algbw",
           "busbw", "#wrong", "algo");
    printf("# %12s %12s %6s %6s %10s %9s %9s %8s %8s\n", "", "(elements)", "", "", "", "(GB/s)", "(GB/s)", "", "");
    fflush(stdout);
}

/* Host and (with GPUs) device buffers for the largest size and the iteration times: 0 or an error. */
static int s_buffers(s_bench_t *B, size_t maxb)
{
    size_t alloc = maxb ? (maxb + 63) / 64 * 64 : 64;
    B->sendbuf = aligned_alloc(64, alloc);
    B->recvbuf = aligned_alloc(64, alloc);
    B->times = calloc((size_t)B->o->iters, sizeof(double));
    if (!B->sendbuf || !B->recvbuf || !B->times) return ERR_NOMEM;
    if (B->cfg.device >= 0) {
        CHECK(dev_malloc(&B->dsend, alloc));
        CHECK(dev_malloc(&B->drecv, alloc));
    }
    return 0;
}

/* Worker 0, unless --quiet: after iteration i of n (warm-up or timed) of a size, a progress line when the
 * last one (or the size's start, *last) is H_BENCH_PROGRESS_S old, so a long size is never silent. */
#define H_BENCH_PROGRESS_S 3.0
static void s_progress(const s_bench_t *B, size_t bytes, const char *what, int i, int n, double *last)
{
    double now = now_us();
    if (B->o->quiet || B->comm->rank != 0 || i == n || now - *last < H_BENCH_PROGRESS_S * 1e6) return;
    *last = now;
    printf("# ... %zu bytes: %s iteration %d of %d\n", bytes, what, i, n);
    fflush(stdout);
}

/* Warm-up and timed allreduces of `bytes` on this rank; *wrong: the elements it got wrong. */
static int s_time_size(s_bench_t *B, size_t bytes, uint64_t *wrong)
{
    const h_bench_cfg_t *o = B->o;
    size_t count = bytes / dt_size(o->dtype);
    int dev = B->cfg.device >= 0;
    void *xsend = dev ? B->dsend : B->sendbuf, *xrecv = dev ? B->drecv : B->recvbuf;
    s_fill(B->sendbuf, count, o->dtype, B->comm->rank);
    memset(B->recvbuf, o->in_place ? 0 : 0xff, bytes); /* in place: zeros stay zeros, iteration after iteration */
    if (o->in_place) xsend = xrecv;
    if (dev) {
        CHECK(dev_memcpy(B->dsend, B->sendbuf, bytes));
        CHECK(dev_memcpy(B->drecv, B->recvbuf, bytes));
    }
    double last = now_us(); /* worker 0's progress: a line when a size runs on, at most one every H_BENCH_PROGRESS_S */
    for (int w = 0; w < o->warmup; w++) {
        CHECK(B->ops->allreduce(B->eng, xsend, xrecv, count, o->dtype, o->op, B->tmo));
        s_progress(B, bytes, "warm-up", w + 1, o->warmup, &last);
    }
    double l0 = now_us();
    for (int it = 0; it < o->iters; it++) {
        double t0 = now_us();
        uint64_t tr = trace_t0(); /* --timeline: one span per timed iteration */
        CHECK(B->ops->allreduce(B->eng, xsend, xrecv, count, o->dtype, o->op, B->tmo));
        B->times[it] = now_us() - t0;
        trace_x2("iteration", tr, "bytes", (int64_t)bytes, "iter", it);
        s_progress(B, bytes, "timed", it + 1, o->iters, &last);
    }
    B->loop_us = (now_us() - l0) / o->iters;
    if (o->in_place && o->check && o->op != OP_MOVE) { /* one more, untimed, over the input the check knows */
        s_fill(B->recvbuf, count, o->dtype, B->comm->rank);
        if (dev) CHECK(dev_memcpy(B->drecv, B->recvbuf, bytes));
        CHECK(B->ops->allreduce(B->eng, xrecv, xrecv, count, o->dtype, o->op, B->tmo));
    }
    if (dev) CHECK(dev_memcpy(B->recvbuf, B->drecv, bytes));
    /* op move (the ceiling) leaves no defined result to check */
    *wrong = o->check && o->op != OP_MOVE ? s_check(B->recvbuf, count, o->dtype, B->P, o->op) : 0;
    return 0;
}

/* *t: per iteration the slowest worker (-a: rank 0, the mean or the fastest instead), then the median over iterations (a descheduled iteration on a
 * busy host moves it little); *loop: the slowest worker's loop time / iterations, each worker from its
 * own loop start to its own end: the steady rate of back-to-back collectives, what a training step
 * sees. The two differ where workers finish an iteration apart (a PS's unevenly served workers): the
 * slowest of each iteration is often the one that began it first, so *t adds that spread to every
 * iteration (2-6% on a PS on 8 machines: scripts/server-nic-use results/ps-incast-8x1.jsonl). *wrong
 * summed over workers.
 * Workers only: servers are busy serving, so this exchange goes through the worker group. */
static int s_gather(const s_bench_t *B, double *t, double *loop, uint64_t *wrong)
{
    int iters = B->o->iters, P = B->P;
    size_t per = (size_t)iters + 2;
    double *mine = calloc(per, sizeof(double));
    double *all = calloc(per * (size_t)B->comm->world, sizeof(double));
    double *med = calloc((size_t)iters, sizeof(double));
    int rc = mine && all && med ? 0 : ERR_NOMEM;
    if (rc == 0) {
        memcpy(mine, B->times, (size_t)iters * sizeof(double));
        mine[iters] = (double)*wrong;
        mine[iters + 1] = B->loop_us;
        rc = comm_allgather_group(B->comm, mine, per * sizeof(double), all, P, B->tmo);
    }
    if (rc == 0) {
        *wrong = 0;
        for (int it = 0; it < iters; it++) {
            double m = all[(size_t)it], sum = 0; /* worker 0's */
            for (int r = 0; r < P; r++) {
                double x = all[(size_t)r * per + (size_t)it];
                sum += x;
                if (B->o->time_ranks == 2) m = fmin(m, x);
                else if (B->o->time_ranks == 3) m = fmax(m, x);
            }
            med[it] = B->o->time_ranks == 1 ? sum / P : m;
        }
        *loop = 0;
        for (int r = 0; r < P; r++) {
            *wrong += (uint64_t)all[(size_t)r * per + (size_t)iters];
            *loop = fmax(*loop, all[(size_t)r * per + (size_t)iters + 1]);
        }
        qsort(med, (size_t)iters, sizeof(double), s_cmp_double);
        *t = iters % 2 ? med[iters / 2] : 0.5 * (med[iters / 2 - 1] + med[iters / 2]);
    }
    free(mine);
    free(all);
    free(med);
    return rc;
}

/* Rank 0: one size's row of the table and its JSON line; *busbw_out: the row's busbw. */
static int s_row(const s_bench_t *B, size_t bytes, double t, double loop, uint64_t wrong, double *busbw_out)
{
    const h_bench_cfg_t *o = B->o;
    size_t count = bytes / dt_size(o->dtype);
    int P = B->P;
    double algbw = t > 0 ? (double)bytes / (t * 1e-6) / 1e9 : 0;
    double busbw = P > 1 ? algbw * 2.0 * (P - 1) / P : 0;
    *busbw_out = busbw;
    engine_stats_t s1; /* after this size's calls: the algorithm the engine chose for it (NULL: not stated) */
    /* on emulated links (--net) a bench measures them only while the host keeps up: the whole machine's
     * CPU over the size's iterations, every rank and server included, against train's threshold */
    int hb = o->net && B->sys_busy >= 0 && h_cluster_host_bound(0, 0, 1.0, 1, B->sys_busy, NULL);
    B->ops->stats(B->eng, &s1);
    {
        printf("  %12zu %12zu %6s %6s %10.1f %9.3f %9.3f %8llu %8s\n", bytes, count, dt_name(o->dtype), op_name(o->op), t,
               algbw, busbw, (unsigned long long)wrong, s1.algo ? s1.algo : "-");
        if (hb)
            printf("# host-bound: this machine was %.0f%% busy during that size: the figure measures the host, not the\n"
                   "# emulated links\n", B->sys_busy * 100);
        fflush(stdout);
    }
    if (!o->out.json) return 0;
    const char *impl = s1.impl ? s1.impl : "default";
    int servers = B->comm->world - B->cfg.nworkers, coloc = (int)engine_counter(&s1, "colocate");
    char label[128];
    h_engine_label(label, sizeof label, B->name, impl, servers, coloc);
    char *traffic = h_traffic_json(B->traffic, B->comm->world);
    json_t *body = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:I, s:I, s:s, s:s, s:i, s:i, s:f, s:f, s:f, s:I, s:s?, s:o}",
        "engine", B->name, "engine_label", label, "impl", impl, "world", P, "servers", servers, "colocate", coloc,
        "transport", s_transport(B), "bytes", (json_int_t)bytes, "count", (json_int_t)count, "dtype", dt_name(o->dtype),
        "op", op_name(o->op), "iters", o->iters, "warmup", o->warmup, "time_us", t, "algbw_gbs", algbw, "busbw_gbs", busbw,
        "wrong", (json_int_t)wrong, "algo", s1.algo, "traffic_bytes", h_jarr_text(traffic));
    free(traffic);
    /* loop_us: the slowest worker's loop / iterations (s_gather), what harness model calibrates with */
    if (body) h_jmerge(body, json_pack("{s:f}", "loop_us", loop));
    if (body && o->in_place) /* a configuration of its own: no fit reads it as the out-of-place collective's */
        h_jmerge(body, json_pack("{s:b}", "in_place", 1));
    if (body && o->time_ranks != 3) /* -a: a configuration of its own (report never medians it with the max) */
        h_jmerge(body, json_pack("{s:s}", "time_ranks", s_time_ranks[o->time_ranks]));
    if (body && o->emu.nodes > 0) /* placed on emulated machines (--nodes, --net): the layout is part of the configuration */
        h_jmerge(body, json_pack("{s:i, s:i, s:i}", "nodes", o->emu.nodes, "gpus_per_node", o->emu.gpus_per_node,
                                 "server_nodes", o->emu.server_nodes));
    if (body && o->net && B->sys_busy >= 0)
        h_jmerge(body, json_pack("{s:f, s:b}", "system_busy", B->sys_busy, "host_bound", hb));
    uint64_t part = engine_counter(&s1, "partition_bytes"); /* a PS's partition: the unit its replies follow pushes in */
    if (body && part) h_jmerge(body, json_pack("{s:I}", "ps_partition_bytes", (json_int_t)part));
    return h_result_write(&o->out, B->meta, "bench", body);
}

/* A worker's whole run: every size; *total_wrong: the wrong elements over all sizes and workers. */
static int s_worker(s_bench_t *B, uint64_t *total_wrong)
{
    size_t sizes[128];
    size_t nsizes = s_sizes(B->o, sizes, 128);
    if (!B->ops->allreduce) return err_set(ERR_UNSUP, "engine %s has no allreduce", B->name);
    CHECK(s_buffers(B, sizes[nsizes - 1]));
    if (B->comm->rank == 0) s_header(B);
    size_t esz = dt_size(B->o->dtype);
    if (B->comm->rank == 0 && (B->o->size_min % esz || B->o->size_max % esz || B->o->size_min < esz)) {
        printf("# note: --sizes are rounded to whole %s elements (multiples of %zu bytes)\n", dt_name(B->o->dtype), esz);
        fflush(stdout);
    }
    size_t W = (size_t)B->comm->world;
    uint64_t *t0 = B->o->out.json ? calloc(2 * W, sizeof *t0) : NULL;
    B->traffic = B->o->out.json ? calloc(W * W, sizeof *B->traffic) : NULL;
    if (B->o->out.json && (!t0 || !B->traffic)) {
        free(t0);
        return ERR_NOMEM;
    }
    double busbw_sum = 0;
    uint64_t engine_wrong = 0;
    for (size_t si = 0; si < nsizes; si++) {
        uint64_t wrong = 0;
        double t = 0, loop = 0;
        if (t0) h_traffic_snap(B->comm, t0, t0 + W);
        unsigned long long sb0 = 0, st0 = 0, sb1 = 0, st1 = 0;
        int sys_ok = B->comm->rank == 0 && h_host_cpu_sample(&sb0, &st0) == 0;
        int rc = s_time_size(B, sizes[si], &wrong);
        sys_ok = sys_ok && h_host_cpu_sample(&sb1, &st1) == 0 && st1 > st0;
        B->sys_busy = sys_ok ? (double)(sb1 - sb0) / (double)(st1 - st0) : -1;
        if (rc == 0 && t0) rc = h_traffic_gather_workers(B->comm, B->P, t0, t0 + W, B->traffic, B->tmo);
        if (rc < 0) {
            free(t0);
            return rc;
        }
        CHECK(s_gather(B, &t, &loop, &wrong));
        *total_wrong += wrong;
        engine_wrong += wrong;
        double busbw = 0;
        if (B->comm->rank == 0) CHECK(s_row(B, sizes[si], t, loop, wrong, &busbw));
        busbw_sum += busbw;
    }
    free(t0);
    if (B->comm->rank == 0) { /* nccl-tests' closing lines: the wrong elements, the mean busbw over the sizes */
        printf("# Out of bounds values : %llu %s\n# Avg bus bandwidth    : %g \n#\n", (unsigned long long)engine_wrong,
               engine_wrong ? "FAILED" : "OK", busbw_sum / (double)nsizes);
        fflush(stdout);
    }
    return 0;
}

/* One engine: a worker runs every size, a dedicated server serves. *nwrong: on rank 0, the elements
 * the workers got wrong. */
static int s_bench_engine(const h_bench_cfg_t *o, comm_t *comm, const char *name, const h_meta_t *meta, uint64_t *nwrong)
{
    s_bench_t B = {.o = o, .comm = comm, .name = name, .ops = h_engine_find(name), .meta = meta,
                   .tmo = o->timeout_s * 1000};
    if (!B.ops) return err_set(ERR_INVAL, "unknown engine %s", name);
    h_engine_cfg(&o->es, comm, name, &B.cfg);
    B.P = B.cfg.nworkers;
    CHECK(B.ops->create(&B.eng, comm, &B.cfg));
    int rc;
    if (h_is_server(comm, &B.cfg))
        rc = B.ops->serve ? B.ops->serve(B.eng) : err_set(ERR_STATE, "engine %s has no server role", name);
    else
        rc = s_worker(&B, nwrong);
    if (rc < 0) err_note(rc, __FILE__, __LINE__, "bench");
    B.ops->destroy(&B.eng);
    free(B.times);
    free(B.traffic);
    free(B.sendbuf);
    free(B.recvbuf);
    dev_free(&B.dsend);
    dev_free(&B.drecv);
    return rc;
}

/* Before any buffer: the ranks on this host need at least their send and receive buffers of the largest
 * size (the engines' own working memory comes on top); more than the host has available is refused, not
 * left to the OOM killer in the middle of the run. Every rank of the host decides alike. */
static int s_mem_check(const h_bench_cfg_t *o, const comm_t *comm)
{
    size_t avail = mem_available(), maxb = o->size_max;
    if (!avail || !maxb) return 0;
    int local = 0;
    for (int r = 0; r < comm->world; r++) local += !comm->node_of || comm->node_of[r] == comm->node_of[comm->rank];
    double need = (double)local * 2.0 * (double)maxb;
    if (need <= (double)avail) return 0;
    return err_set(ERR_NOMEM, "bench --sizes up to %.3g GiB: the %d rank(s) on this host need at least %.3g GiB (a send and "
                   "a receive buffer of the largest size each, the engines' own memory besides) and it has %.3g GiB "
                   "available: lower the largest size or run fewer ranks a host", maxb / 1073741824.0, local,
                   need / 1073741824.0, avail / 1073741824.0);
}

int h_bench(const h_bench_cfg_t *o, comm_t *comm, int *wrong)
{
    CHECK(s_mem_check(o, comm));
    h_meta_t meta;
    h_meta_fill(&meta, o->out.argc, o->out.argv);
    char msg[512] = "";
    size_t off = 0;
    *wrong = 0;
    for (int i = 0; i < o->nengines; i++) {
        uint64_t nwrong = 0;
        CHECK(s_bench_engine(o, comm, o->engines[i], &meta, &nwrong));
        if (!nwrong || comm->rank != 0) continue;
        *wrong = 1; /* one line per engine, as main prints them: "harness: " + err_detail() */
        if (off < sizeof msg)
            off += (size_t)snprintf(msg + off, sizeof msg - off, "%sbench: %llu wrong elements with engine %s",
                                    off ? "\nharness: " : "", (unsigned long long)nwrong, o->engines[i]);
    }
    if (*wrong) err_set(ERR_WRONG, "%s", msg);
    return 0;
}
