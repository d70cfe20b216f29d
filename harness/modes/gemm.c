/* gemm.c: `harness gemm`: what the BLAS alone reaches on the trainer's GEMM shapes, to put the
 * trainer's compute rate (harness train's "compute samples/s") in proportion. Each of --procs forked
 * processes allocates the model's matrices for its per-worker batch and times the step's sgemm calls
 * back to back (no bias, activation, loss, data or communication); the median iteration gives the
 * rate. Results travel back over a pipe. With --gpus N: the same GEMMs through cuBLAS on GPU 0 at the
 * per-GPU batch (--batch / N), in f32 and in TF32, timed with CUDA events (trainer/model_gpu.h), in
 * this process: the ceiling for harness train --gpus's "compute TFLOP/s". */
#include "harness/modes/gemm.h"
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "core/dev.h"
#include "core/err.h"
#include "core/timer.h"
#include "trainer/model.h"
#include "trainer/model_gpu.h"
#include "trainer/trainer.h"

typedef struct {
    double ms_p50, ms_min;
    double layer_ms[MLP_MAX_LAYERS][3];
    int threads;
    int ok;
} s_res_t;

static int s_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *s_buf(size_t n)
{
    float *p = NULL;
    if (posix_memalign((void **)&p, 64, (n ? n : 1) * sizeof(float))) return NULL;
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

static void s_one(const mlp_shape_t *s, size_t b, int threads, int warmup, int iters, s_res_t *res)
{
    memset(res, 0, sizeof *res);
    openblas_set_num_threads(threads);
    res->threads = openblas_get_num_threads();
    int L = s->nlayers;
    float *w[MLP_MAX_LAYERS], *gw[MLP_MAX_LAYERS], *act[MLP_MAX_LAYERS + 1], *dz[MLP_MAX_LAYERS + 1];
    for (int l = 0; l <= L; l++) {
        act[l] = s_buf(b * s->dims[l]);
        dz[l] = s_buf(b * s->dims[l]);
        if (!act[l] || !dz[l]) return;
        if (l < L) {
            w[l] = s_buf(s->dims[l] * s->dims[l + 1]);
            gw[l] = s_buf(s->dims[l] * s->dims[l + 1]);
            if (!w[l] || !gw[l]) return;
        }
    }
    double *t = calloc((size_t)iters, sizeof(double));
    if (!t) return;
    for (int it = -warmup; it < iters; it++) {
        uint64_t t0 = now_ns();
        for (int l = 0; l < L; l++) {
            uint64_t a = now_ns();
            int in = (int)s->dims[l], out = (int)s->dims[l + 1];
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, out, in, 1.0f, act[l], in, w[l], in, 0.0f,
                        act[l + 1], out);
            if (it >= 0) res->layer_ms[l][0] += (double)(now_ns() - a) / 1e6 / iters;
        }
        for (int l = L - 1; l >= 0; l--) {
            int in = (int)s->dims[l], out = (int)s->dims[l + 1];
            uint64_t a = now_ns();
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, (int)b, 1.0f, dz[l + 1], out, act[l], in, 0.0f,
                        gw[l], in);
            uint64_t c = now_ns();
            if (l > 0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b, in, out, 1.0f, dz[l + 1], out, w[l], in,
                            0.0f, dz[l], in);
            if (it >= 0) {
                res->layer_ms[l][1] += (double)(c - a) / 1e6 / iters;
                res->layer_ms[l][2] += (double)(now_ns() - c) / 1e6 / iters;
            }
        }
        if (it >= 0) t[it] = (double)(now_ns() - t0) / 1e6;
    }
    qsort(t, (size_t)iters, sizeof *t, s_cmp_d);
    res->ms_p50 = t[iters / 2];
    res->ms_min = t[0];
    res->ok = 1;
    free(t);
    for (int l = 0; l <= L; l++) {
        free(act[l]);
        free(dz[l]);
        if (l < L) {
            free(w[l]);
            free(gw[l]);
        }
    }
}

static int s_gemm_gpu(const h_gemm_cfg_t *o)
{
    mlp_shape_t s;
    CHECK(mlp_parse(o->model ? o->model : TRAINER_DEFAULT_MODEL, &s));
    size_t batch = o->batch > 0 ? (size_t)o->batch : TRAINER_DEFAULT_BATCH;
    if (batch % (size_t)o->gpus) return err_set(ERR_INVAL, "gemm: batch %zu is not a multiple of --gpus %d", batch, o->gpus);
    size_t b = batch / (size_t)o->gpus;
    int iters = o->iters > 0 ? o->iters : 20, warmup = o->warmup >= 0 ? o->warmup : 5;
    char desc[256] = "";
    int dev = dev_select(0, desc, sizeof desc);
    if (dev < 0) return dev;
    char model[160];
    mlp_format(&s, model, sizeof model);
    double flop = mlp_flops_per_sample(&s);
    printf("# syncbench gemm --gpus: the cublasSgemm calls of one training step of %s, batch %zu per GPU, on %s, "
           "%d iterations (median)\n", model, b, desc, iters);
    int rc = 0;
    for (int tf32 = 0; tf32 <= 1 && rc == 0; tf32++) {
        double p50 = 0, mn = 0, lay[MLP_MAX_LAYERS][3];
        CHECK(mlp_gpu_gemm_bench(&s, b, tf32, warmup, iters, &p50, &mn, lay));
        const char *math = tf32 ? "TF32" : "f32";
        printf("# %-5s %8s %4s %4s %10s %10s %10s   (%s)\n", "layer", "shape", "", "", "fwd (ms)", "dW (ms)", "dX (ms)", math);
        for (int l = 0; l < s.nlayers; l++)
            printf("  %-5d %8zu x %-8zu %10.4f %10.4f %10.4f\n", l, s.dims[l + 1], s.dims[l], lay[l][0], lay[l][1], lay[l][2]);
        double sps = p50 > 0 ? (double)b * 1000.0 / p50 : 0;
        printf("  cuBLAS %s: %.4f ms/step (min %.4f), %.1f samples/s, %.3f TFLOP/s (%.3g GFLOP per sample)\n", math, p50,
               mn, sps, sps * flop / 1e12, flop / 1e9);
        fflush(stdout);
        if (o->out.json) {
            h_meta_t m;
            h_meta_fill(&m, o->out.argc, o->out.argv);
            rc = h_result_write(&o->out, &m, "gemm", json_pack("{s:s, s:s, s:s, s:i, s:I, s:I, s:i, s:f, s:f, s:f}", "device", desc,
                                                          "math", math, "model", model, "gpus", o->gpus, "batch",
                                                          (json_int_t)batch, "local_batch", (json_int_t)b, "iters", iters,
                                                          "step_ms_p50", p50, "samples_per_s", sps, "tflops",
                                                          sps * flop / 1e12));
        }
    }
    return rc;
}

int h_gemm_bench(const h_gemm_cfg_t *o)
{
    if (o->gpus) return s_gemm_gpu(o);
    mlp_shape_t s;
    CHECK(mlp_parse(o->model ? o->model : TRAINER_DEFAULT_MODEL, &s));
    int P = o->procs > 0 ? o->procs : 1;
    size_t batch = o->batch > 0 ? (size_t)o->batch : TRAINER_DEFAULT_BATCH;
    if (batch % (size_t)P) return err_set(ERR_INVAL, "gemm: batch %zu is not a multiple of --procs %d", batch, P);
    size_t b = batch / (size_t)P;
    int iters = o->iters > 0 ? o->iters : 20, warmup = o->warmup >= 0 ? o->warmup : 5;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = (int)(cores / P) > 0 ? (int)(cores / P) : 1;
    const char *e = getenv("OPENBLAS_NUM_THREADS");
    if (!e) e = getenv("OMP_NUM_THREADS");
    if (e && atoi(e) > 0) threads = atoi(e);
    s_res_t *res = calloc((size_t)P, sizeof *res);
    pid_t *pids = calloc((size_t)P, sizeof *pids);
    int (*pipes)[2] = calloc((size_t)P, sizeof *pipes);
    if (!res || !pids || !pipes) return ERR_NOMEM;
    fflush(NULL);
    for (int p = 0; p < P; p++) {
        if (pipe(pipes[p]) != 0) return err_set(ERR_SYS, "gemm: pipe");
        pids[p] = fork();
        if (pids[p] < 0) return err_set(ERR_SYS, "gemm: fork");
        if (pids[p] == 0) {
            s_res_t r;
            s_one(&s, b, threads, warmup, iters, &r);
            ssize_t w = write(pipes[p][1], &r, sizeof r);
            _exit(w == (ssize_t)sizeof r && r.ok ? 0 : 1);
        }
        close(pipes[p][1]);
    }
    int bad = 0;
    for (int p = 0; p < P; p++) {
        ssize_t got = read(pipes[p][0], &res[p], sizeof res[p]);
        close(pipes[p][0]);
        int st = 0;
        waitpid(pids[p], &st, 0);
        if (got != (ssize_t)sizeof res[p] || !res[p].ok || !WIFEXITED(st) || WEXITSTATUS(st)) bad++;
    }
    free(pids);
    free(pipes);
    if (bad) {
        free(res);
        return err_set(ERR_NOMEM, "gemm: %d of %d processes failed (out of memory?)", bad, P);
    }
    double flop = mlp_flops_per_sample(&s);
    double sum_sps = 0;
    for (int p = 0; p < P; p++) sum_sps += (double)b * 1000.0 / res[p].ms_p50;
    char model[160];
    mlp_format(&s, model, sizeof model);
    printf("# syncbench gemm: the sgemm calls of one training step of %s, batch %zu per process, %d process%s x %d BLAS "
           "thread%s, %d iterations (median)\n", model, b, P, P > 1 ? "es" : "", res[0].threads, res[0].threads > 1 ? "s" : "",
           iters);
    printf("# %-5s %8s %4s %4s %10s %10s %10s\n", "layer", "shape", "", "", "fwd (ms)", "dW (ms)", "dX (ms)");
    for (int l = 0; l < s.nlayers; l++)
        printf("  %-5d %8zu x %-8zu %10.3f %10.3f %10.3f\n", l, s.dims[l + 1], s.dims[l], res[0].layer_ms[l][0],
               res[0].layer_ms[l][1], res[0].layer_ms[l][2]);
    for (int p = 0; p < P; p++)
        printf("  process %d: %.3f ms/step (min %.3f), %.1f samples/s, %.2f GFLOP/s\n", p, res[p].ms_p50, res[p].ms_min,
               (double)b * 1000.0 / res[p].ms_p50, flop * (double)b / res[p].ms_p50 / 1e6);
    printf("  total: %.1f samples/s, %.2f GFLOP/s (%.3g GFLOP per sample)\n", sum_sps, sum_sps * flop / 1e9, flop / 1e9);
    fflush(stdout);
    int rc = 0;
    if (o->out.json) {
        h_meta_t m;
        h_meta_fill(&m, o->out.argc, o->out.argv);
        /* "cpu" comes with the metadata */
        rc = h_result_write(&o->out, &m, "gemm", json_pack("{s:s, s:i, s:i, s:I, s:I, s:i, s:f, s:f, s:f}", "model", model, "procs", P,
                                                      "blas_threads", res[0].threads, "batch", (json_int_t)batch,
                                                      "local_batch", (json_int_t)b, "iters", iters, "step_ms_p50",
                                                      res[0].ms_p50, "samples_per_s", sum_sps, "gflops", sum_sps * flop / 1e9));
    }
    free(res);
    return rc;
}
