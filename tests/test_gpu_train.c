/* test_gpu_train.c: training on GPU buffers. Without a GPU (here): the host-only build's device
 * optimizer, GPU model and device-parameter attach refuse with "built without CUDA"; a GPU trainer with
 * every device hidden fails cleanly (both builds). With a GPU (skipped with the reason otherwise): the
 * cuBLAS model's forward/backward against trainer/model.c on the same inputs, the device optimizers
 * bit-identical to core/optim.c (state included), the non-finite check and dtype conversion, and whole
 * training runs at world 1 through ring (NCCL), tree (GPU-direct) and ps (pinned staging) against the
 * GPU trainer's local mode. Fork rule (test_gpu.c): CUDA is initialized only inside forked ranks. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "allreduce-tree/tree.h"
#include "core/arstep.h"
#include "core/boot.h"
#include "core/comm.h"
#include "core/dev.h"
#include "core/err.h"
#include "core/optim.h"
#include "core/optim_dev.h"
#include "ps/ps.h"
#include "ring/ring.h"
#include "tests/lib/ranks.h"
#include "trainer/model.h"
#include "trainer/model_gpu.h"
#include "trainer/rng.h"
#include "trainer/trainer.h"

#define SKIP_WITHOUT_GPU()                                                                \
    do {                                                                                  \
        char why_[256];                                                                   \
        if (dev_count(why_, sizeof why_) == 0) cr_skip_test("no CUDA device: %s", why_); \
    } while (0)

/* ---------- without a GPU ---------- */

#if !SB_CUDA
static int s_noop_fn(void *ctx, const void *s, void *r, size_t n, dtype_t dt, redop_t op, int t)
{
    (void)ctx; (void)s; (void)r; (void)n; (void)dt; (void)op; (void)t;
    return 0;
}

Test(gpu_train, built_without_cuda)
{
    optim_cfg_t oc;
    optim_cfg_default(&oc, OPT_ADAM);
    optim_dev_t *od = (optim_dev_t *)1;
    cr_assert_eq(optim_dev_new(&od, &oc, 10), ERR_UNSUP);
    cr_assert_null(od);
    cr_assert(strstr(err_detail(), "built without CUDA"), "%s", err_detail());
    int bad = 1;
    cr_assert_eq(optim_dev_nonfinite((void *)&bad, 1, DT_F32, &bad, 100), ERR_UNSUP);
    cr_assert_eq(bad, 0);
    cr_assert_eq(optim_dev_use(0), ERR_UNSUP);
    optim_dev_destroy(&od);

    mlp_shape_t s;
    cr_assert_eq(mlp_parse("mlp:8-4-2", &s), 0);
    mlp_gpu_t *m = (mlp_gpu_t *)1;
    cr_assert_eq(mlp_gpu_new(&m, &s, 4, 0, 1000), ERR_UNSUP);
    cr_assert_null(m);
    cr_assert(strstr(err_detail(), "built without CUDA"), "%s", err_detail());
    double ms = 0;
    cr_assert_eq(mlp_gpu_gemm_bench(&s, 4, 0, 1, 1, &ms, NULL, NULL), ERR_UNSUP);

    /* arstep with device parameters: the attach reaches the device layer, which says why not */
    comm_t fake;
    memset(&fake, 0, sizeof fake);
    engine_cfg_t ec = {.device = 0, .timeout_ms = 1000, .nworkers = 1};
    arstep_t *as = NULL;
    cr_assert_eq(arstep_new(&as, &fake, &ec, s_noop_fn, NULL), 0);
    float p[4] = {1, 2, 3, 4};
    param_set_t ps = {.params = p, .count = 4, .grad_dtype = DT_F32};
    optim_cfg_default(&ps.optim, OPT_SGD);
    cr_assert_eq(arstep_attach(as, &ps), ERR_UNSUP);
    cr_assert(strstr(err_detail(), "built without CUDA"), "%s", err_detail());
    arstep_destroy(&as);
    arstep_destroy(&as);

    trainer_cfg_t tc;
    trainer_cfg_default(&tc);
    cr_assert_eq(tc.device, -1, "the default trainer is the CPU one");
    tc.model = "mlp:8-16-4";
    tc.global_batch = 4;
    tc.synth_samples = 32;
    tc.device = 0;
    trainer_t *t = (trainer_t *)1;
    cr_assert_eq(trainer_new(&t, &tc), ERR_UNSUP);
    cr_assert_null(t);
    cr_assert(strstr(err_detail(), "built without CUDA"), "%s", err_detail());
}
#endif

/* Both builds: the trainer runs on the CPU unless asked for a device. */
Test(gpu_train, cpu_is_the_default)
{
    trainer_cfg_t tc;
    trainer_cfg_default(&tc);
    cr_assert_eq(tc.device, -1);
    cr_assert_eq(tc.tf32, 0);
}

/* Both builds: with every device hidden, a GPU trainer fails with an error (no crash, no hang). */
static int s_hidden_rank(int rank, int world, void *arg)
{
    (void)rank; (void)world; (void)arg;
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    trainer_cfg_t tc;
    trainer_cfg_default(&tc);
    tc.model = "mlp:8-16-4";
    tc.global_batch = 4;
    tc.synth_samples = 32;
    tc.device = 0;
    trainer_t *t = (trainer_t *)1;
    int rc = trainer_new(&t, &tc);
    if (rc >= 0 || t != NULL || !err_detail()[0]) {
        fprintf(stderr, "trainer_new on a hidden device: %d (%s)\n", rc, err_detail());
        return 1;
    }
    trainer_destroy(&t);
    return 0;
}

Test(gpu_train, hidden_device_fails_cleanly, .timeout = 60)
{
    cr_assert_eq(run_ranks(1, s_hidden_rank, NULL, 50000), 0);
}

/* ---------- with a GPU ---------- */

#if SB_CUDA
static int s_fail(const char *what, int rc)
{
    char b[512];
    fprintf(stderr, "%s: %s\n", what, err_trace(rc, b, sizeof b));
    return 1;
}
#define TRY(expr) do { int rc_ = (expr); if (rc_ < 0) return s_fail(#expr, rc_); } while (0)

static int s_order_fn(void *ctx, int layer)
{
    int *seen = ctx;
    seen[seen[0] + 1] = layer;
    seen[0]++;
    return 0;
}

/* Forward and backward of the cuBLAS model against the host model, same parameters and inputs. */
static int s_model_rank(int rank, int world, void *arg)
{
    (void)rank; (void)world; (void)arg;
    TRY(dev_select(0, NULL, 0));
    mlp_shape_t s;
    TRY(mlp_parse("mlp:37-64-48-11", &s));
    const size_t B = 19;
    mlp_t *cpu = NULL;
    mlp_gpu_t *gpu = NULL;
    TRY(mlp_new(&cpu, &s, B));
    TRY(mlp_gpu_new(&gpu, &s, B, 0, 30000));
    mlp_init(cpu, 42);
    TRY(mlp_gpu_set_params(gpu, mlp_params(cpu)));
    rng_t r;
    rng_seed(&r, 7, 1);
    int32_t labels[19];
    for (size_t i = 0; i < B * s.dims[0]; i++) mlp_input(cpu)[i] = mlp_gpu_input(gpu)[i] = 2.0f * rng_uniform(&r) - 1.0f;
    for (size_t i = 0; i < B; i++) labels[i] = (int32_t)(i * 7 % s.dims[s.nlayers]);
    double lc = 0, lg = 0;
    size_t cc = 0, cg = 0;
    TRY(mlp_forward(cpu, B, labels, 4.0f, &lc, &cc));
    TRY(mlp_gpu_forward(gpu, B, labels, 4.0f, &lg, &cg));
    int bad = 0;
    if (fabs(lc - lg) > 1e-5 * fmax(1.0, fabs(lc)) || cc != cg) {
        fprintf(stderr, "loss cpu %.9f gpu %.9f, correct %zu vs %zu\n", lc, lg, cc, cg);
        bad++;
    }
    int oc[MLP_MAX_LAYERS + 1] = {0}, og[MLP_MAX_LAYERS + 1] = {0};
    TRY(mlp_backward(cpu, s_order_fn, oc));
    TRY(mlp_gpu_backward(gpu, s_order_fn, og));
    if (oc[0] != s.nlayers || og[0] != s.nlayers) bad++;
    for (int l = 0; l < s.nlayers; l++)
        if (og[l + 1] != s.nlayers - 1 - l) bad++;
    float *g = malloc(s.count * sizeof(float));
    if (!g) return 1;
    TRY(mlp_gpu_get_grads(gpu, g));
    const float *gc = mlp_grads(cpu);
    float gmax = 0;
    for (size_t i = 0; i < s.count; i++) gmax = fmaxf(gmax, fabsf(gc[i]));
    size_t nbad = 0;
    for (size_t i = 0; i < s.count; i++)
        if (!(fabsf(g[i] - gc[i]) <= 1e-4f * gmax + 1e-6f)) {
            if (nbad++ < 5) fprintf(stderr, "grad[%zu] cpu %g gpu %g (max |g| %g)\n", i, gc[i], g[i], gmax);
        }
    bad += nbad > 0;
    /* the layout is the host model's: same arena size, the same views */
    if (mlp_gpu_shape(gpu)->count != mlp_shape(cpu)->count || mlp_gpu_shape(gpu)->b_off[1] != s.b_off[1]) bad++;
    /* labels are checked as on the host */
    labels[3] = 99;
    if (mlp_gpu_forward(gpu, B, labels, 1.0f, &lg, NULL) != ERR_INVAL) bad++;
    free(g);
    mlp_gpu_destroy(&gpu);
    mlp_gpu_destroy(&gpu);
    mlp_destroy(&cpu);
    return bad ? 1 : 0;
}

Test(gpu_train, model_matches_cpu, .timeout = 120)
{
    SKIP_WITHOUT_GPU();
    cr_assert_eq(run_ranks(1, s_model_rank, NULL, 110000), 0);
}

/* The device optimizers against core/optim.c: bit-identical parameters and state after 3 steps. */
static int s_optim_rank(int rank, int world, void *arg)
{
    (void)rank; (void)world; (void)arg;
    TRY(dev_select(0, NULL, 0));
    const size_t n = 10007;
    const char *specs[] = {"sgd:lr=0.1,momentum=0.9,wd=0.01", "sgd:lr=0.05,momentum=0", "adam:lr=0.01,wd=0.001"};
    float *p = malloc(n * 4), *g = malloc(n * 4), *got = malloc(n * 4);
    void *dp = NULL, *dg = NULL;
    TRY(dev_malloc(&dp, n * 4));
    TRY(dev_malloc(&dg, n * 4));
    int bad = 0;
    rng_t r;
    for (int k = 0; k < 3; k++) {
        optim_cfg_t c;
        TRY(optim_parse(specs[k], &c));
        optim_t *ho = NULL;
        optim_dev_t *dov = NULL;
        TRY(optim_new(&ho, &c, n));
        TRY(optim_dev_new(&dov, &c, n));
        rng_seed(&r, 11, (uint64_t)k);
        for (size_t i = 0; i < n; i++) p[i] = 2.0f * rng_uniform(&r) - 1.0f;
        TRY(dev_memcpy(dp, p, n * 4));
        for (uint64_t step = 1; step <= 3; step++) {
            for (size_t i = 0; i < n; i++) g[i] = (rng_uniform(&r) - 0.5f) * 3.0f;
            TRY(dev_memcpy(dg, g, n * 4));
            TRY(optim_step(ho, p, g, 0, n, 0.5f, c.lr, step));
            TRY(optim_dev_step(dov, dp, dg, 0, n, 0.5f, c.lr, step, 30000));
        }
        TRY(dev_memcpy(got, dp, n * 4));
        if (memcmp(got, p, n * 4)) {
            for (size_t i = 0; i < n; i++)
                if (got[i] != p[i]) { fprintf(stderr, "%s: p[%zu] host %.9g device %.9g\n", specs[k], i, p[i], got[i]); break; }
            bad++;
        }
        float *hb[OPTIM_MAX_BUFS], *db[OPTIM_MAX_BUFS];
        int hn = 0, dn = 0;
        size_t hc = 0, dc = 0;
        TRY(optim_state(ho, hb, &hn, &hc));
        TRY(optim_dev_state(dov, db, &dn, &dc));
        if (hn != dn || hc != dc) bad++;
        for (int b = 0; b < hn && b < dn; b++)
            if (memcmp(hb[b], db[b], n * 4)) { fprintf(stderr, "%s: state %d differs\n", specs[k], b); bad++; }
        /* a restored snapshot is uploaded before the next step: both continue alike */
        for (int b = 0; b < dn; b++) db[b][5] = hb[b][5] = 0.25f;
        TRY(optim_step(ho, p, g, 0, n, 1.0f, c.lr, 4));
        TRY(optim_dev_step(dov, dp, dg, 0, n, 1.0f, c.lr, 4, 30000));
        TRY(dev_memcpy(got, dp, n * 4));
        if (memcmp(got, p, n * 4)) { fprintf(stderr, "%s: after restoring state\n", specs[k]); bad++; }
        optim_destroy(&ho);
        optim_dev_destroy(&dov);
        optim_dev_destroy(&dov);
    }
    /* non-finite check and conversion */
    int nf = -1;
    TRY(optim_dev_nonfinite(dg, n, DT_F32, &nf, 30000));
    if (nf != 0) bad++;
    g[n - 1] = NAN;
    TRY(dev_memcpy(dg, g, n * 4));
    TRY(optim_dev_nonfinite(dg, n, DT_F32, &nf, 30000));
    if (nf != 1) bad++;
    for (int dt = DT_F16; dt <= DT_BF16; dt++) {
        unsigned short *h = malloc(n * 2), *d = malloc(n * 2);
        g[n - 1] = 1.0f / 3.0f;
        dt_convert(h, (dtype_t)dt, g, DT_F32, n);
        TRY(dev_memcpy(dg, g, n * 4));
        TRY(optim_dev_convert(dp, (dtype_t)dt, dg, DT_F32, n, 30000));
        TRY(dev_memcpy(d, dp, n * 2));
        if (memcmp(h, d, n * 2)) { fprintf(stderr, "convert to %s differs\n", dt_name((dtype_t)dt)); bad++; }
        TRY(optim_dev_convert(dg, DT_F32, dp, (dtype_t)dt, n, 30000));
        TRY(dev_memcpy(got, dg, n * 4));
        dt_convert(g, DT_F32, h, (dtype_t)dt, n);
        if (memcmp(got, g, n * 4)) { fprintf(stderr, "convert from %s differs\n", dt_name((dtype_t)dt)); bad++; }
        free(h);
        free(d);
    }
    dev_free(&dp);
    dev_free(&dg);
    free(p); free(g); free(got);
    return bad ? 1 : 0;
}

Test(gpu_train, device_optimizers_match_host, .timeout = 120)
{
    SKIP_WITHOUT_GPU();
    cr_assert_eq(run_ranks(1, s_optim_rank, NULL, 110000), 0);
}

static int s_comm(comm_t **comm)
{
    boot_cfg_t bc;
    int rc = boot_cfg_init(&bc, "env://", -1, -1, 30000);
    if (rc == 0) rc = comm_new(comm, &bc, NULL);
    return rc;
}

static void s_tcfg(trainer_cfg_t *tc, int dev, const char *optim)
{
    trainer_cfg_default(tc);
    tc->model = "mlp:32-64-10";
    tc->global_batch = 16;
    tc->synth_samples = 256;
    tc->seed = 99;
    tc->device = dev;
    (void)optim_parse(optim, &tc->optim);
}

/* Train 6 steps under an engine at world 1 and compare with the GPU trainer's local mode. */
static int s_engine_rank(int rank, int world, void *arg)
{
    (void)rank; (void)world; (void)arg;
    comm_t *comm = NULL;
    TRY(s_comm(&comm));
    int dev = dev_select(comm->local_rank, NULL, 0);
    TRY(dev);
    const char *optim = "adam:lr=0.01";
    trainer_cfg_t tc;
    s_tcfg(&tc, dev, optim);
    trainer_t *ref = NULL;
    TRY(trainer_new(&ref, &tc));
    TRY(trainer_attach(ref, NULL, NULL));
    trainer_step_t st;
    for (int i = 0; i < 6; i++) TRY(trainer_step(ref, &st));
    size_t count = trainer_shape(ref)->count;
    float *want = malloc(count * 4);
    memcpy(want, trainer_params(ref), count * 4);
    /* and the CPU trainer, same seed: same start, close after 6 steps */
    trainer_cfg_t cc;
    s_tcfg(&cc, -1, optim);
    trainer_t *cpu = NULL;
    TRY(trainer_new(&cpu, &cc));
    TRY(trainer_attach(cpu, NULL, NULL));
    for (int i = 0; i < 6; i++) TRY(trainer_step(cpu, &st));
    int bad = 0;
    const float *pc = trainer_params(cpu);
    for (size_t i = 0; i < count; i++)
        if (!(fabsf(pc[i] - want[i]) <= 1e-3f)) { fprintf(stderr, "cpu vs gpu local: p[%zu] %g vs %g\n", i, pc[i], want[i]); bad++; break; }
    trainer_destroy(&cpu);
    trainer_destroy(&ref);
    const struct { const engine_ops_t *ops; const char *impl; int exact; } cases[] = {
        {&ring_engine, NULL, 1}, {&tree_engine, "gpu", 1}, {&ps_engine, NULL, 0}};
    for (int k = 0; k < 3; k++) {
        ps_opts_t po = {.colocate = 1, .mode = PS_SYNC};
        engine_cfg_t ec = {.device = dev, .impl = cases[k].impl, .timeout_ms = 30000, .nworkers = 1,
                           .opts = cases[k].ops == &ps_engine ? &po : NULL};
        engine_t *eng = NULL;
        trainer_t *t = NULL;
        dev_mem_reset_peak();
        TRY(cases[k].ops->create(&eng, comm, &ec));
        TRY(trainer_new(&t, &tc));
        TRY(trainer_attach(t, cases[k].ops, eng));
        for (int i = 0; i < 6; i++) TRY(trainer_step(t, &st));
        const float *p = trainer_params(t);
        for (size_t i = 0; i < count; i++) {
            float tol = cases[k].exact ? 0.0f : 1e-6f * fmaxf(1.0f, fabsf(want[i]));
            if (!(fabsf(p[i] - want[i]) <= tol)) {
                fprintf(stderr, "%s: p[%zu] %.9g, local GPU trainer %.9g\n", cases[k].ops->name, i, p[i], want[i]);
                bad++;
                break;
            }
        }
        if (cases[k].ops->optim_state) { /* checkpoints see the device optimizer's state */
            float *bufs[OPTIM_MAX_BUFS];
            int nb = 0;
            size_t n = 0;
            TRY(cases[k].ops->optim_state(eng, bufs, &nb, &n));
            if (nb != 2 || n != count) bad++;
        }
        dev_mem_t dm;
        dev_mem_stats(&dm);
        /* the model's parameters and gradients; ring and tree add the averaged gradients and Adam's m, v */
        size_t want_bytes = count * sizeof(float) * (cases[k].ops == &ps_engine ? 2 : 5);
        if (dm.dev_peak < want_bytes) {
            fprintf(stderr, "%s: device memory peak %zu < %zu\n", cases[k].ops->name, dm.dev_peak, want_bytes);
            bad++;
        }
        cases[k].ops->destroy(&eng);
        trainer_destroy(&t);
    }
    free(want);
    comm_destroy(&comm);
    return bad ? 1 : 0;
}

Test(gpu_train, engines_world1_match_local, .timeout = 180)
{
    SKIP_WITHOUT_GPU();
    cr_assert_eq(run_ranks(1, s_engine_rank, NULL, 170000), 0);
}
#endif
