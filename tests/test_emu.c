/* test_emu.c: the emulated trainer: compute is waited out (the CPU stays idle), each bucket reaches
 * the engine at its layer's ready time, and real engines keep every rank's parameters identical. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/boot.h"
#include "core/comm.h"
#include "core/err.h"
#include "core/timer.h"
#include "ring/ring.h"
#include "tests/lib/ranks.h"
#include "trainer/emu.h"
#include "trainer/trainer.h"

/* forward 100 FLOPs, backward 200: at 100 samples/s a batch of 8 computes for 80 ms (27 ms forward) */
static const char *s_tiny = "# tiny4: 4 tensors, hand-made\n"
                            "l3.bias\t1000\t10\t40\n"
                            "l3.weight\t30000\t20\t60\n"
                            "l2.weight\t30000\t30\t60\n"
                            "l1.weight\t40000\t40\t40\n";
static char s_path[64];

static void s_profile(void)
{
    snprintf(s_path, sizeof s_path, "/tmp/sb-emu-%d.tsv", (int)getpid());
    FILE *f = fopen(s_path, "w");
    cr_assert_not_null(f);
    fputs(s_tiny, f);
    fclose(f);
}

static void s_cfg(trainer_cfg_t *c, int world, int rank)
{
    trainer_cfg_default(c);
    c->model = s_path;
    c->emu_device = "throughput=100";
    c->global_batch = (size_t)(8 * world);
    c->world = world;
    c->rank = rank;
    c->bucket_mb = 0.1; /* 1000 | 30000 | 30000 | 40000 floats: buckets close at 4 KiB, then 100 KiB */
    c->seed = 5;
    cr_assert_eq(optim_parse("sgd:lr=0.5,momentum=0.9", &c->optim), 0);
}

Test(emu, local_step_sleeps_the_compute)
{
    s_profile();
    trainer_cfg_t c;
    s_cfg(&c, 1, 0);
    trainer_t *t = NULL;
    cr_assert_eq(trainer_new(&t, &c), 0, "%s", err_detail());
    cr_assert_null(trainer_shape(t));
    cr_assert_not_null(trainer_emu(t));
    cr_assert_eq(trainer_attach(t, NULL, NULL), 0, "%s", err_detail());
    trainer_step_t st;
    double step = 0, cpu = 0;
    for (int i = 0; i < 2; i++) cr_assert_eq(trainer_step(t, &st), 0); /* warm-up: first-use set-up costs CPU */
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(trainer_step(t, &st), 0, "%s", err_detail());
        step += st.step_ms;
        cpu += st.cpu_ms;
    }
    cr_expect(step / 5 >= 80.0 && step / 5 < 80.0 + 15.0, "a step takes the device's 80 ms: %.2f ms", step / 5);
    cr_expect(cpu < 0.25 * step, "compute is slept, not burned: %.1f ms CPU in %.1f ms", cpu, step);
    cr_expect_neq(trainer_save(t, "/tmp/never"), 0, "emulated models are not checkpointed");
    trainer_destroy(&t);
    unlink(s_path);
}

/* A mock engine that records when each bucket arrives, relative to step_begin. */
static struct {
    uint64_t t0;
    double at_ms[16];
    size_t off[16], cnt[16];
    int n;
} g_rec;
static int s_rec_create(engine_t **self_p, comm_t *comm, const engine_cfg_t *cfg)
{
    (void)comm; (void)cfg;
    *self_p = (engine_t *)&g_rec;
    return 0;
}
static int s_rec_attach(engine_t *self, const param_set_t *ps) { (void)self; (void)ps; return 0; }
static int s_rec_begin(engine_t *self, const step_ctx_t *ctx)
{
    (void)self; (void)ctx;
    g_rec.n = 0;
    g_rec.t0 = now_ns();
    return 0;
}
static int s_rec_submit(engine_t *self, const bucket_t *b)
{
    (void)self;
    if (g_rec.n >= 16) return ERR_RANGE;
    g_rec.at_ms[g_rec.n] = (double)(now_ns() - g_rec.t0) / 1e6;
    g_rec.off[g_rec.n] = b->offset;
    g_rec.cnt[g_rec.n] = b->count;
    g_rec.n++;
    return 0;
}
static int s_rec_wait(engine_t *self, step_out_t *out, int timeout_ms)
{
    (void)self; (void)timeout_ms;
    memset(out, 0, sizeof *out);
    return 0;
}
static void s_rec_destroy(engine_t **self_p) { *self_p = NULL; }
static const engine_ops_t s_rec_engine = {.name = "rec", .create = s_rec_create, .attach = s_rec_attach,
                                          .step_begin = s_rec_begin, .submit = s_rec_submit, .wait = s_rec_wait,
                                          .destroy = s_rec_destroy};

Test(emu, buckets_reach_the_engine_at_their_ready_time)
{
    s_profile();
    trainer_cfg_t c;
    s_cfg(&c, 2, 0); /* two workers' share of the batch, the mock stands for the engine */
    trainer_t *t = NULL;
    engine_t *e = NULL;
    cr_assert_eq(trainer_new(&t, &c), 0, "%s", err_detail());
    cr_assert_eq(s_rec_engine.create(&e, NULL, NULL), 0);
    cr_assert_eq(trainer_attach(t, &s_rec_engine, e), 0);
    trainer_step_t st;
    cr_assert_eq(trainer_step(t, &st), 0, "%s", err_detail());
    /* hand-computed: 8 samples at 100/s = 80 ms; forward 100/300 of it; backward shares 40, 60, 60, 40.
     * Buckets: the first bucket's cap is min(1 MiB, cap) = 0.1 MiB, so [l3.bias l3.weight] (124 KB)
     * closes the first, [l2] (120 KB) the second, [l1] the third. */
    cr_assert_eq(g_rec.n, 3, "3 buckets, got %d", g_rec.n);
    double want[3] = {80.0 * (100 + 40 + 60) / 300, 80.0 * (100 + 40 + 60 + 60) / 300, 80.0};
    size_t woff[3] = {0, 31000, 61000};
    for (int b = 0; b < 3; b++) {
        cr_expect(g_rec.at_ms[b] >= want[b] - 0.5 && g_rec.at_ms[b] < want[b] + 5.0, "bucket %d at %.2f ms, ready at %.2f ms",
                  b, g_rec.at_ms[b], want[b]);
        cr_expect_eq(g_rec.off[b], woff[b], "bucket %d offset %zu", b, g_rec.off[b]);
    }
    cr_expect_eq(g_rec.cnt[2], 40000u);
    trainer_destroy(&t);
    unlink(s_path);
}

static int s_ring_rank(int rank, int world, void *argp)
{
    (void)argp;
    boot_cfg_t bc;
    comm_t *comm = NULL;
    engine_t *e = NULL;
    trainer_t *t = NULL;
    int rc = boot_cfg_init(&bc, "env://", -1, -1, 30000);
    comm_opts_t co = {.transport = "auto"};
    if (!rc) rc = comm_new(&comm, &bc, &co);
    engine_cfg_t ec = {.device = -1, .timeout_ms = 30000, .nworkers = world};
    if (!rc) rc = ring_engine.create(&e, comm, &ec);
    trainer_cfg_t c;
    trainer_cfg_default(&c);
    c.model = s_path;
    c.emu_device = "throughput=100";
    c.global_batch = (size_t)(8 * world);
    c.world = world;
    c.rank = rank;
    c.comm = comm;
    c.bucket_mb = 0.1;
    c.check_every = 1; /* every step: all ranks' parameters identical */
    c.shrink = 4;
    optim_parse("sgd:lr=0.5,momentum=0.9", &c.optim);
    if (!rc) rc = trainer_new(&t, &c);
    if (!rc) rc = trainer_attach(t, &ring_engine, e);
    trainer_step_t st;
    double worst = 0;
    for (int i = 0; i < 4 && !rc; i++) {
        rc = trainer_step(t, &st);
        if (i > 0 && st.step_ms > worst) worst = st.step_ms;
    }
    /* 80 ms of compute; the last bucket (10,000 floats after shrink) is reduced after backward */
    if (!rc && !(worst >= 80.0 && worst < 80.0 + 60.0)) {
        fprintf(stderr, "rank %d: step %.1f ms, want 80 ms + the last bucket's allreduce\n", rank, worst);
        rc = ERR_WRONG;
    }
    if (rc) fprintf(stderr, "rank %d: %s (%s)\n", rank, err_str(rc), err_detail());
    trainer_destroy(&t);
    if (e) ring_engine.destroy(&e);
    comm_destroy(&comm);
    return rc ? 1 : 0;
}

Test(emu, ring_keeps_ranks_identical, .timeout = 60)
{
    s_profile();
    cr_assert_eq(run_ranks(4, s_ring_rank, NULL, 45000), 0, "4 emulated ranks under the ring engine");
    unlink(s_path);
}
