/* bench.c: `harness bench`, the collective microbenchmark in the manner of nccl-tests: for each size,
 * warm-up then timed out-of-place allreduces, inputs chosen so the exact result is known (#wrong),
 * time = median over iterations of the slowest rank's time, algbw = bytes / time, busbw = algbw *
 * 2(P-1)/P (GB = 1e9 bytes), P = the number of workers. Dedicated PS servers serve meanwhile. */
#include "harness/harness.h"
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

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double time_us;
    uint64_t wrong;
} row_t;

static int s_bench_engine(const h_opts_t *o, comm_t *comm, const char *name, const h_meta_t *meta)
{
    const engine_ops_t *ops = h_engine_find(name);
    if (!ops) return err_set(ERR_INVAL, "unknown engine %s", name);
    engine_cfg_t cfg;
    h_engine_cfg(o, comm, name, &cfg);
    engine_t *eng = NULL;
    CHECK(ops->create(&eng, comm, &cfg));
    int server = h_is_server(comm, &cfg);
    int P = cfg.nworkers;
    int rc = 0;
    size_t esz = dt_size(o->dtype);
    size_t nsizes = 0;
    size_t sizes[128];
    for (double s = (double)o->size_min; s <= (double)o->size_max * 1.0000001 && nsizes < 128; s *= o->factor) {
        size_t b = ((size_t)s / esz) * esz;
        if (nsizes == 0 || b != sizes[nsizes - 1]) sizes[nsizes++] = b;
    }
    double *times = NULL, *all = NULL;
    row_t *rows = calloc(nsizes, sizeof *rows);
    void *sendbuf = NULL, *recvbuf = NULL, *dsend = NULL, *drecv = NULL;
    engine_stats_t st = {0};
    if (server) {
        if (!ops->serve) { rc = err_set(ERR_STATE, "engine %s has no server role", name); goto done; }
        CHECK_GOTO(rc, ops->serve(eng), done);
        goto done;
    }
    if (!ops->allreduce) { rc = err_set(ERR_UNSUP, "engine %s has no allreduce", name); goto done; }
    size_t maxb = sizes[nsizes - 1];
    size_t alloc = maxb ? (maxb + 63) / 64 * 64 : 64;
    /* host buffers are filled and checked here; with GPUs the collective runs on device copies */
    sendbuf = aligned_alloc(64, alloc);
    recvbuf = aligned_alloc(64, alloc);
    times = calloc((size_t)o->iters, sizeof(double));
    if (!rows || !sendbuf || !recvbuf || !times) { rc = ERR_NOMEM; goto done; }
    if (cfg.device >= 0) {
        CHECK_GOTO(rc, dev_malloc(&dsend, alloc), done);
        CHECK_GOTO(rc, dev_malloc(&drecv, alloc), done);
    }
    void *xsend = cfg.device >= 0 ? dsend : sendbuf, *xrecv = cfg.device >= 0 ? drecv : recvbuf;
    int tmo = o->timeout_s * 1000;
    if (comm->rank == 0 && !o->quiet) {
        engine_stats_t s0;
        ops->stats(eng, &s0);
        printf("#\n# syncbench bench: engine %s (%s), %d ranks%s, dtype %s, op %s, transport %s, out-of-place\n",
               name, s0.impl ? s0.impl : "default", P,
               comm->world > cfg.nworkers ? " + dedicated servers" : "", dt_name(o->dtype), op_name(o->op),
               comm->world > 1 ? tp_kind(comm->tp, (comm->rank + 1) % comm->world) : "self");
        printf("# %12s %12s %6s %6s %10s %9s %9s %8s\n", "size(B)", "count", "type", "redop", "time(us)",
               "algbw", "busbw", "#wrong");
        printf("# %12s %12s %6s %6s %10s %9s %9s %8s\n", "", "(elements)", "", "", "", "(GB/s)", "(GB/s)", "");
        fflush(stdout);
    }
    for (size_t si = 0; si < nsizes; si++) {
        size_t count = sizes[si] / esz;
        s_fill(sendbuf, count, o->dtype, comm->rank);
        memset(recvbuf, 0xff, sizes[si]);
        if (cfg.device >= 0) {
            CHECK_GOTO(rc, dev_memcpy(dsend, sendbuf, sizes[si]), done);
            CHECK_GOTO(rc, dev_memcpy(drecv, recvbuf, sizes[si]), done);
        }
        for (int w = 0; w < o->warmup; w++)
            CHECK_GOTO(rc, ops->allreduce(eng, xsend, xrecv, count, o->dtype, o->op, tmo), done);
        for (int it = 0; it < o->iters; it++) {
            double t0 = now_us();
            uint64_t tr = trace_t0(); /* --timeline: one span per timed iteration */
            CHECK_GOTO(rc, ops->allreduce(eng, xsend, xrecv, count, o->dtype, o->op, tmo), done);
            times[it] = now_us() - t0;
            trace_x2("iteration", tr, "bytes", (int64_t)sizes[si], "iter", it);
        }
        if (cfg.device >= 0) CHECK_GOTO(rc, dev_memcpy(recvbuf, drecv, sizes[si]), done);
        rows[si].wrong = o->check ? s_check(recvbuf, count, o->dtype, P, o->op) : 0;
        /* per iteration the slowest worker, then the median over iterations: gathered at the end */
        size_t per = (size_t)o->iters + 1;
        double *mine = calloc(per, sizeof(double));
        all = calloc(per * (size_t)comm->world, sizeof(double));
        if (!mine || !all) { free(mine); rc = ERR_NOMEM; goto done; }
        memcpy(mine, times, (size_t)o->iters * sizeof(double));
        mine[o->iters] = (double)rows[si].wrong;
        /* workers only: servers are busy serving, so this exchange goes through the worker group */
        rc = comm_allgather_group(comm, mine, per * sizeof(double), all, P, tmo);
        free(mine);
        if (rc < 0) goto done;
        double *med = calloc((size_t)o->iters, sizeof(double));
        uint64_t wrong = 0;
        for (int it = 0; it < o->iters; it++) {
            double m = 0;
            for (int r = 0; r < P; r++) m = fmax(m, all[(size_t)r * per + (size_t)it]);
            med[it] = m;
        }
        for (int r = 0; r < P; r++) wrong += (uint64_t)all[(size_t)r * per + (size_t)o->iters];
        qsort(med, (size_t)o->iters, sizeof(double), s_cmp_double);
        double t = o->iters % 2 ? med[o->iters / 2] : 0.5 * (med[o->iters / 2 - 1] + med[o->iters / 2]);
        free(med);
        free(all);
        all = NULL;
        rows[si].time_us = t;
        rows[si].wrong = wrong;
        double algbw = t > 0 ? (double)sizes[si] / (t * 1e-6) / 1e9 : 0;
        double busbw = P > 1 ? algbw * 2.0 * (P - 1) / P : algbw;
        if (comm->rank == 0) {
            if (!o->quiet) {
                printf("  %12zu %12zu %6s %6s %10.1f %9.3f %9.3f %8llu\n", sizes[si], count, dt_name(o->dtype),
                       op_name(o->op), t, algbw, busbw, (unsigned long long)wrong);
                fflush(stdout);
            }
            if (o->json) {
                engine_stats_t s1;
                ops->stats(eng, &s1);
                char line[4600], cmd[2200], host[256], topo[512], cpu[300], net[160];
                h_json_str(net, sizeof net, o->net ? o->net : "");
                h_json_str(cmd, sizeof cmd, meta->cmdline);
                h_json_str(host, sizeof host, meta->host);
                h_json_str(topo, sizeof topo, meta->topo);
                h_json_str(cpu, sizeof cpu, meta->cpu);
                int n = snprintf(line, sizeof line,
                    "{\"mode\":\"bench\",\"engine\":\"%s\",\"impl\":\"%s\",\"world\":%d,\"servers\":%d,"
                    "\"colocate\":%d,\"transport\":\"%s\",\"bytes\":%zu,\"count\":%zu,\"dtype\":\"%s\",\"op\":\"%s\","
                    "\"iters\":%d,\"warmup\":%d,\"time_us\":%.3f,\"algbw_gbs\":%.6f,\"busbw_gbs\":%.6f,"
                    "\"wrong\":%llu,\"host\":%s,\"git_sha\":\"%s\",\"timestamp\":\"%s\",\"cmdline\":%s,"
                    "\"topology\":%s,\"cpu\":%s,\"versions\":\"%s\",\"net\":%s}\n",
                    name, s1.impl ? s1.impl : "default", P, comm->world - cfg.nworkers, (int)engine_counter(&s1, "colocate"),
                    comm->world > 1 ? tp_kind(comm->tp, (comm->rank + 1) % comm->world) : "self", sizes[si], count,
                    dt_name(o->dtype), op_name(o->op), o->iters, o->warmup, t, algbw, busbw,
                    (unsigned long long)wrong, host, meta->git_sha, meta->timestamp, cmd, topo, cpu, meta->versions, net);
                if (n > 0 && (size_t)n < sizeof line) CHECK_GOTO(rc, h_json_append(o->json, line, (size_t)n), done);
            }
        }
    }
    ops->stats(eng, &st);
done:
    ops->destroy(&eng);
    free(times);
    free(all);
    free(sendbuf);
    free(recvbuf);
    dev_free(&dsend);
    dev_free(&drecv);
    if (rc < 0) { free(rows); return rc; }
    uint64_t total_wrong = 0;
    for (size_t si = 0; rows && si < nsizes; si++) total_wrong += rows[si].wrong;
    free(rows);
    if (total_wrong && comm->rank == 0) {
        fprintf(stderr, "harness: bench: %llu wrong elements with engine %s\n", (unsigned long long)total_wrong, name);
        return 3;
    }
    return 0;
}

int h_bench(const h_opts_t *o, comm_t *comm)
{
    h_meta_t meta;
    h_meta_fill(&meta, o->argc, o->argv);
    int status = 0;
    for (int i = 0; i < o->nengines; i++) {
        int rc = s_bench_engine(o, comm, o->engines[i], &meta);
        if (rc < 0) return rc;
        if (rc > 0) status = rc;
    }
    return status;
}
