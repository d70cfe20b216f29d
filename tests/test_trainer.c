/* test_trainer.c: the shared trainer: the loss falls on the synthetic task; an AMP overflow skips
 * the step (parameters untouched) and lowers the loss scale; a resumed checkpoint continues
 * bit-identically; missing and corrupt data or checkpoint files give clear errors; world 1 with batch
 * B and world 4 with batch B/4 under the ring engine follow the same loss trajectory; and the
 * parameter checksum comparison names the rank that diverged. */
#include <criterion/criterion.h>
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/boot.h"
#include "core/comm.h"
#include "core/err.h"
#include "ring/ring.h"
#include "tests/lib/ranks.h"
#include "trainer/amp.h"
#include "trainer/ckpt.h"
#include "trainer/data.h"
#include "trainer/trainer.h"

static void s_cfg(trainer_cfg_t *c, const char *model, size_t batch, size_t nsamples, const char *optim)
{
    trainer_cfg_default(c);
    c->model = model;
    c->global_batch = batch;
    c->synth_samples = nsamples;
    c->seed = 1234;
    cr_assert_eq(optim_parse(optim, &c->optim), 0);
}

static trainer_t *s_local(const trainer_cfg_t *c)
{
    trainer_t *t = NULL;
    int rc = trainer_new(&t, c);
    cr_assert_eq(rc, 0, "trainer_new: %s", err_detail());
    cr_assert_eq(trainer_attach(t, NULL, NULL), 0, "attach: %s", err_detail());
    return t;
}

static char *s_tmp(const char *name)
{
    static char buf[4][256];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 256, "/tmp/sb_test_trainer_%d_%s", (int)getpid(), name);
    return p;
}

Test(trainer, loss_falls_on_synthetic_task)
{
    trainer_cfg_t c;
    s_cfg(&c, "mlp:784-128-10", 64, 4096, "sgd:lr=0.01,momentum=0.9");
    trainer_t *t = s_local(&c);
    double first = 0, last = 0;
    size_t correct = 0, seen = 0;
    trainer_step_t st;
    for (int i = 0; i < 300; i++) {
        cr_assert_eq(trainer_step(t, &st), 0, "step %d: %s", i, err_detail());
        cr_assert(isfinite(st.loss));
        cr_assert_eq(st.skipped, 0);
        if (i < 5) first += st.loss / 5;
        if (i >= 290) {
            last += st.loss / 10;
            correct += st.correct;
            seen += st.samples;
        }
    }
    cr_assert(first > 2.0 && first < 2.6, "starts near ln(10): %f", first);
    cr_assert(last < 0.5 * first, "loss fell from %f to %f", first, last);
    cr_assert(correct * 10 > seen * 6, "accuracy %zu/%zu", correct, seen);
    trainer_destroy(&t);
    trainer_destroy(&t);
    cr_assert_null(t);
}

Test(trainer, buckets_follow_ddp_layout)
{
    trainer_cfg_t c;
    s_cfg(&c, "mlp:784-1024-1024-10", 8, 64, "sgd");
    trainer_t *t = NULL;
    cr_assert_eq(trainer_new(&t, &c), 0);
    /* first bucket closes past 1 MiB: b2, W2, b1, W1 (4.2 MB); then b0, W0 */
    cr_assert_eq(trainer_nbuckets(t), 2);
    trainer_destroy(&t);
    c.bucket_mb = 1.0;
    cr_assert_eq(trainer_new(&t, &c), 0);
    cr_assert_eq(trainer_nbuckets(t), 2);
    trainer_destroy(&t);
    c.bucket_mb = 0.001; /* 1048 bytes: b2 (40 bytes) joins W2; then every tensor alone */
    cr_assert_eq(trainer_new(&t, &c), 0);
    cr_assert_eq(trainer_nbuckets(t), 5);
    trainer_destroy(&t);
    c.bucket_mb = 1e-7; /* every tensor its own bucket */
    cr_assert_eq(trainer_new(&t, &c), 0);
    cr_assert_eq(trainer_nbuckets(t), 6);
    trainer_destroy(&t);
}

Test(trainer, amp_scaler_semantics)
{
    amp_t a;
    amp_init(&a, DT_F32);
    cr_assert_eq(a.enabled, 0);
    cr_assert_float_eq(a.scale, 1.0f, 0);
    amp_init(&a, DT_F16);
    cr_assert_float_eq(a.scale, 65536.0f, 0);
    amp_update(&a, 1);
    cr_assert_float_eq(a.scale, 32768.0f, 0);
    for (int i = 0; i < 1999; i++) amp_update(&a, 0);
    cr_assert_float_eq(a.scale, 32768.0f, 0);
    amp_update(&a, 0);
    cr_assert_float_eq(a.scale, 65536.0f, 0, "doubles after 2000 clean steps");
    cr_assert_eq(a.overflows, 1u);
}

Test(trainer, amp_overflow_skips_step_and_lowers_scale)
{
    trainer_cfg_t c;
    s_cfg(&c, "mlp:784-64-10", 32, 1024, "sgd:lr=0.1,momentum=0.9");
    c.grad_dtype = DT_F16;
    trainer_t *t = s_local(&c);
    const mlp_shape_t *sh = trainer_shape(t);
    float *p = trainer_params(t);
    float *keep = malloc(sh->count * sizeof(float)), *blown = malloc(sh->count * sizeof(float));
    memcpy(keep, p, sh->count * sizeof(float));
    /* huge weights: activations and gradients far beyond f16's 65504 at any loss scale */
    for (size_t i = 0; i < sh->count; i++) p[i] *= 3000.0f;
    memcpy(blown, p, sh->count * sizeof(float));
    trainer_step_t st;
    cr_assert_eq(trainer_step(t, &st), 0, "%s", err_detail());
    cr_assert_eq(st.skipped, 1, "overflow detected");
    cr_assert_float_eq(st.loss_scale, 65536.0f, 0);
    cr_assert_float_eq(trainer_loss_scale(t), 32768.0f, 0, "scale halved");
    cr_assert_eq(memcmp(p, blown, sh->count * sizeof(float)), 0, "a skipped step leaves the parameters alone");
    cr_assert_eq(trainer_step(t, &st), 0);
    cr_assert_eq(st.skipped, 1);
    cr_assert_float_eq(trainer_loss_scale(t), 16384.0f, 0);
    /* sane weights again: training resumes at the lowered scale and the parameters move */
    memcpy(p, keep, sh->count * sizeof(float));
    int applied = 0;
    for (int i = 0; i < 20 && !applied; i++) {
        cr_assert_eq(trainer_step(t, &st), 0);
        applied = !st.skipped;
    }
    cr_assert(applied, "a clean step happens once the gradients fit");
    cr_assert(isfinite(st.loss));
    cr_assert_neq(memcmp(p, keep, sh->count * sizeof(float)), 0);
    for (size_t i = 0; i < sh->count; i++) cr_assert(isfinite(p[i]));
    free(keep);
    free(blown);
    trainer_destroy(&t);
}

static void s_run(trainer_t *t, int steps, double *losses)
{
    trainer_step_t st;
    for (int i = 0; i < steps; i++) {
        cr_assert_eq(trainer_step(t, &st), 0, "%s", err_detail());
        if (losses) losses[i] = st.loss;
    }
}

static void s_resume_case(const char *optim, dtype_t gdt)
{
    trainer_cfg_t c;
    /* 256 samples, batch 48: an epoch is 6 batches (the last one short), so 13 steps cross epochs and
     * the save at step 7 lands mid-epoch */
    s_cfg(&c, "mlp:784-32-16-10", 48, 256, optim);
    c.grad_dtype = gdt;
    const int total = 13, cut = 7;
    double la[13], lb[13];
    trainer_t *a = s_local(&c);
    s_run(a, total, la);
    const char *path = s_tmp("resume.ckpt");
    trainer_t *b = s_local(&c);
    s_run(b, cut, lb);
    cr_assert_eq(trainer_save(b, path), 0, "save: %s", err_detail());
    trainer_destroy(&b);
    trainer_t *r = NULL;
    cr_assert_eq(trainer_new(&r, &c), 0);
    cr_assert_eq(trainer_resume(r, path), 0, "resume: %s", err_detail());
    cr_assert_eq(trainer_attach(r, NULL, NULL), 0);
    cr_assert_eq(trainer_steps_done(r), (uint64_t)cut);
    s_run(r, total - cut, lb + cut);
    for (int i = 0; i < total; i++) cr_assert_eq(la[i], lb[i], "step %d: loss %.9g vs %.9g", i + 1, la[i], lb[i]);
    size_t n = trainer_shape(a)->count;
    cr_assert_eq(memcmp(trainer_params(a), trainer_params(r), n * sizeof(float)), 0, "parameters bit-identical");
    cr_assert_eq(trainer_checksum(a), trainer_checksum(r));
    cr_assert_float_eq(trainer_loss_scale(a), trainer_loss_scale(r), 0);
    trainer_destroy(&a);
    trainer_destroy(&r);
    unlink(path);
}

Test(trainer, resumed_checkpoint_is_bit_identical_sgd_momentum) { s_resume_case("sgd:lr=0.05,momentum=0.9", DT_F32); }
Test(trainer, resumed_checkpoint_is_bit_identical_adam_f16) { s_resume_case("adam:lr=1e-3", DT_F16); }

static void s_write(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    if (len) cr_assert_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
}

Test(trainer, bad_checkpoints_are_refused_clearly)
{
    trainer_cfg_t c;
    s_cfg(&c, "mlp:784-16-10", 16, 128, "sgd:lr=0.1,momentum=0.9");
    trainer_t *t = s_local(&c);
    s_run(t, 2, NULL);
    const char *path = s_tmp("bad.ckpt");
    cr_assert_eq(trainer_save(t, path), 0);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    unsigned char *buf = malloc((size_t)len);
    cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    trainer_t *r = NULL;
    cr_assert_eq(trainer_new(&r, &c), 0);
    /* a flipped bit in the parameters */
    buf[len / 2] ^= 0x10;
    s_write(path, buf, (size_t)len);
    cr_assert_eq(trainer_resume(r, path), ERR_CORRUPT);
    cr_assert(strstr(err_detail(), "checksum"), "%s", err_detail());
    buf[len / 2] ^= 0x10;
    /* truncated */
    s_write(path, buf, (size_t)len - 100);
    cr_assert_eq(trainer_resume(r, path), ERR_CORRUPT);
    cr_assert(strstr(err_detail(), "does not match"), "%s", err_detail());
    /* not a checkpoint */
    s_write(path, "hello world, this is not a checkpoint at all, really not", 56);
    cr_assert_lt(trainer_resume(r, path), 0);
    /* missing */
    unlink(path);
    cr_assert_eq(trainer_resume(r, path), ERR_IO);
    cr_assert(strstr(err_detail(), path), "%s", err_detail());
    /* a FIFO (opening it once waited for a writer forever) and a directory: refused at once */
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_assert_eq(trainer_resume(r, path), ERR_INVAL);
    cr_assert(strstr(err_detail(), "not a regular file"), "%s", err_detail());
    unlink(path);
    cr_assert_eq(mkdir(path, 0700), 0);
    cr_assert_eq(trainer_resume(r, path), ERR_INVAL);
    /* --save's path is checked before training: a directory there, a missing directory, a good path */
    cr_assert_eq(ckpt_check_path(path), ERR_INVAL);
    rmdir(path);
    cr_assert_eq(ckpt_check_path("/nonexistent-sb-dir/x.ckpt"), ERR_IO);
    cr_assert(strstr(err_detail(), "/nonexistent-sb-dir"), "%s", err_detail());
    cr_assert_eq(ckpt_check_path(path), 0, "%s", err_detail());
    /* another model */
    s_write(path, buf, (size_t)len);
    trainer_t *o = NULL;
    trainer_cfg_t c2 = c;
    c2.model = "mlp:784-17-10";
    cr_assert_eq(trainer_new(&o, &c2), 0);
    cr_assert_eq(trainer_resume(o, path), ERR_MISMATCH);
    cr_assert(strstr(err_detail(), "mlp:784-16-10"), "%s", err_detail());
    /* the good file still resumes */
    cr_assert_eq(trainer_resume(r, path), 0, "%s", err_detail());
    trainer_destroy(&o);
    trainer_destroy(&r);
    trainer_destroy(&t);
    unlink(path);
    free(buf);
}

static void s_be32(unsigned char *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

Test(trainer, data_files_missing_corrupt_and_valid)
{
    dataset_t *d = NULL;
    const char *missing = s_tmp("no-such-images-idx3-ubyte");
    cr_assert_eq(dataset_open(&d, missing), ERR_IO);
    cr_assert(strstr(err_detail(), missing) && strstr(err_detail(), "No such file"), "%s", err_detail());
    cr_assert_null(d);

    /* a valid tiny MNIST pair: 3 images of 28x28 */
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/sb_test_mnist_%d", (int)getpid());
    mkdir(dir, 0755);
    char img[300], lab[300];
    snprintf(img, sizeof img, "%s/train-images-idx3-ubyte", dir);
    snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte", dir);
    size_t n = 3, ilen = 16 + n * 784;
    unsigned char *ib = calloc(1, ilen), lb[8 + 3];
    s_be32(ib, 0x803); s_be32(ib + 4, (uint32_t)n); s_be32(ib + 8, 28); s_be32(ib + 12, 28);
    for (size_t i = 16; i < ilen; i++) ib[i] = (unsigned char)(i * 7);
    s_be32(lb, 0x801); s_be32(lb + 4, (uint32_t)n);
    lb[8] = 7; lb[9] = 0; lb[10] = 9;
    s_write(img, ib, ilen);
    s_write(lab, lb, sizeof lb);
    cr_assert_eq(dataset_open(&d, dir), 0, "%s", err_detail());
    cr_assert_eq(dataset_size(d), 3u);
    cr_assert_eq(dataset_dim(d), 784u);
    size_t idx[2] = {2, 0};
    float x[2 * 784];
    int32_t y[2];
    dataset_gather(d, idx, 2, x, y);
    cr_assert(y[0] == 9 && y[1] == 7);
    cr_assert_float_eq(x[784 + 0], ((float)ib[16] / 255.0f - 0.1307f) / 0.3081f, 1e-6);
    dataset_destroy(&d);
    cr_assert_eq(dataset_open(&d, img), 0, "the images file finds its labels: %s", err_detail());
    dataset_destroy(&d);
    /* the trainer takes it, and refuses a model of the wrong shape */
    trainer_cfg_t c;
    s_cfg(&c, "mlp:784-8-10", 2, 0, "sgd");
    c.data = dir;
    trainer_t *t = s_local(&c);
    s_run(t, 3, NULL);
    trainer_destroy(&t);
    c.model = "mlp:100-8-10";
    cr_assert_eq(trainer_new(&t, &c), ERR_INVAL);
    cr_assert(strstr(err_detail(), "784 features"), "%s", err_detail());

    /* corrupt: bad magic, truncated images, label out of range, labels count mismatch */
    s_be32(ib, 0x1234);
    s_write(img, ib, ilen);
    cr_assert_eq(dataset_open(&d, dir), ERR_CORRUPT);
    cr_assert(strstr(err_detail(), "bad IDX header"), "%s", err_detail());
    s_be32(ib, 0x803);
    s_write(img, ib, ilen - 5);
    cr_assert_eq(dataset_open(&d, dir), ERR_CORRUPT);
    cr_assert(strstr(err_detail(), "header says"), "%s", err_detail());
    s_write(img, ib, ilen);
    lb[9] = 12;
    s_write(lab, lb, sizeof lb);
    cr_assert_eq(dataset_open(&d, dir), ERR_CORRUPT);
    cr_assert(strstr(err_detail(), "label 12"), "%s", err_detail());
    lb[9] = 1;
    s_write(lab, lb, sizeof lb - 1);
    cr_assert_eq(dataset_open(&d, dir), ERR_CORRUPT);
    unlink(lab);
    cr_assert_eq(dataset_open(&d, dir), ERR_IO, "images without labels");
    cr_assert(strstr(err_detail(), "train-labels-idx1-ubyte"), "%s", err_detail());
    unlink(img);
    cr_assert_eq(dataset_open(&d, dir), ERR_IO, "an empty directory");
    cr_assert(strstr(err_detail(), "neither MNIST"), "%s", err_detail());

    /* CIFAR-10 binary: 2 records; then a torn record */
    char cif[300];
    snprintf(cif, sizeof cif, "%s/data_batch_1.bin", dir);
    unsigned char *cb = calloc(2, 3073);
    cb[0] = 3; cb[3073] = 8;
    s_write(cif, cb, 2 * 3073);
    cr_assert_eq(dataset_open(&d, dir), 0, "%s", err_detail());
    cr_assert_eq(dataset_size(d), 2u);
    cr_assert_eq(dataset_dim(d), 3072u);
    cr_assert_str_eq(dataset_name(d), "cifar10");
    dataset_destroy(&d);
    s_write(cif, cb, 2 * 3073 - 1);
    cr_assert_eq(dataset_open(&d, cif), ERR_CORRUPT);
    cr_assert(strstr(err_detail(), "3073-byte records"), "%s", err_detail());
    unlink(cif);
    rmdir(dir);
    free(cb);
    free(ib);
}

/* ---- a recording engine: what the trainer submits, and when ---- */

typedef struct {
    float *gbase;          /* the gradient arena, learnt from the first bucket */
    size_t count;
    int nsub;
    size_t off[32], cnt[32];
    int idx[32];
    int w0_untouched_at_first; /* layer 0's weight gradients not yet computed when bucket 0 arrived */
} s_mock_t;
static s_mock_t g_mock;

static int s_mock_create(engine_t **self_p, comm_t *comm, const engine_cfg_t *cfg)
{
    (void)comm; (void)cfg;
    *self_p = (engine_t *)&g_mock;
    return 0;
}
static int s_mock_attach(engine_t *self, const param_set_t *ps) { (void)self; g_mock.count = ps->count; return 0; }
static int s_mock_begin(engine_t *self, const step_ctx_t *ctx) { (void)self; (void)ctx; g_mock.nsub = 0; return 0; }
static int s_mock_submit(engine_t *self, const bucket_t *b)
{
    (void)self;
    if (g_mock.nsub >= 32) return ERR_RANGE;
    if (b->index == 0) {
        g_mock.gbase = (float *)b->grad - b->offset;
        g_mock.w0_untouched_at_first = isnan(g_mock.gbase[0]);
    }
    g_mock.off[g_mock.nsub] = b->offset;
    g_mock.cnt[g_mock.nsub] = b->count;
    g_mock.idx[g_mock.nsub] = b->index;
    g_mock.nsub++;
    return 0;
}
static int s_mock_wait(engine_t *self, step_out_t *out, int timeout_ms)
{
    (void)self; (void)timeout_ms;
    memset(out, 0, sizeof *out);
    /* poison the gradients: the next step's backward overwrites them layer by layer */
    for (size_t i = 0; i < g_mock.count; i++) g_mock.gbase[i] = NAN;
    return 0;
}
static void s_mock_destroy(engine_t **self_p) { *self_p = NULL; }
static const engine_ops_t s_mock_engine = {.name = "mock", .create = s_mock_create, .attach = s_mock_attach,
                                           .step_begin = s_mock_begin, .submit = s_mock_submit, .wait = s_mock_wait,
                                           .destroy = s_mock_destroy};

static void s_overlap_case(int no_overlap)
{
    trainer_cfg_t c;
    s_cfg(&c, "mlp:784-256-128-64-10", 32, 256, "sgd:lr=0.01,momentum=0");
    c.bucket_mb = 0.01; /* 10 KiB: [b3 W3 b2 W2], [b1 W1], [b0 W0] */
    c.no_overlap = no_overlap;
    trainer_t *t = NULL;
    engine_t *e = NULL;
    cr_assert_eq(trainer_new(&t, &c), 0);
    cr_assert_eq(s_mock_engine.create(&e, NULL, NULL), 0);
    cr_assert_eq(trainer_attach(t, &s_mock_engine, e), 0);
    trainer_step_t st;
    for (int k = 0; k < 2; k++) cr_assert_eq(trainer_step(t, &st), 0, "%s", err_detail());
    int nb = trainer_nbuckets(t);
    cr_assert_eq(g_mock.nsub, nb);
    cr_assert_eq(nb, 3);
    /* reverse layer order, contiguous, descending, covering the arena once */
    size_t top = g_mock.count;
    for (int i = 0; i < nb; i++) {
        cr_assert_eq(g_mock.idx[i], i);
        cr_assert_eq(g_mock.off[i] + g_mock.cnt[i], top, "bucket %d ends where the previous one starts", i);
        top = g_mock.off[i];
    }
    cr_assert_eq(top, 0u);
    if (no_overlap)
        cr_assert_eq(g_mock.w0_untouched_at_first, 0, "--no-overlap: submitted after backward finished");
    else
        cr_assert_eq(g_mock.w0_untouched_at_first, 1, "overlap: bucket 0 submitted before layer 0's backward");
    trainer_destroy(&t);
}

Test(trainer, buckets_submitted_during_backward) { s_overlap_case(0); }
Test(trainer, no_overlap_submits_after_backward) { s_overlap_case(1); }

/* ---- multi-rank: world 4 under the ring engine vs world 1 ---- */

#define EQ_STEPS 12
#define EQ_BATCH 64
typedef struct {
    char path[256];
    const char *model;
    int corrupt_rank;     /* for the checksum test: this rank perturbs a parameter */
} s_eq_arg_t;

static int s_join(comm_t **comm, int world)
{
    boot_cfg_t bc;
    int rc = boot_cfg_init(&bc, "env://", -1, -1, 30000);
    if (rc) return rc;
    comm_opts_t co = {.transport = "auto"};
    (void)world;
    return comm_new(comm, &bc, &co);
}

static int s_eq_rank(int rank, int world, void *argp)
{
    s_eq_arg_t *arg = argp;
    openblas_set_num_threads(1);
    comm_t *comm = NULL;
    int rc = s_join(&comm, world);
    if (rc) { fprintf(stderr, "rank %d: join: %s\n", rank, err_detail()); return 1; }
    engine_cfg_t ec = {.device = -1, .timeout_ms = 30000, .nworkers = world};
    engine_t *e = NULL;
    trainer_t *t = NULL;
    if ((rc = ring_engine.create(&e, comm, &ec))) goto out;
    trainer_cfg_t c;
    trainer_cfg_default(&c);
    c.model = arg->model;
    c.global_batch = EQ_BATCH;
    c.synth_samples = 512;
    c.seed = 77;
    c.world = world;
    c.rank = rank;
    c.comm = comm;
    c.bucket_mb = 0.01; /* several buckets, submitted during backward */
    c.check_every = 4;
    if ((rc = optim_parse("sgd:lr=0.1,momentum=0.9", &c.optim))) goto out;
    if ((rc = trainer_new(&t, &c))) goto out;
    if ((rc = trainer_attach(t, &ring_engine, e))) goto out;
    double loss[EQ_STEPS], all[EQ_STEPS * 8];
    trainer_step_t st;
    for (int i = 0; i < EQ_STEPS && !rc; i++) {
        rc = trainer_step(t, &st);
        loss[i] = st.loss;
    }
    if (rc) goto out;
    if (arg->corrupt_rank >= 0) {
        if (rank == arg->corrupt_rank) trainer_params(t)[5] += 1e-3f;
        rc = trainer_check(t);
        if (rc == ERR_MISMATCH) {
            char want[64];
            snprintf(want, sizeof want, "1 rank differs from it: %d (", arg->corrupt_rank);
            rc = strstr(err_detail(), want) ? 0 : ERR_WRONG;
            if (rc) fprintf(stderr, "rank %d: unexpected detail: %s\n", rank, err_detail());
        } else {
            fprintf(stderr, "rank %d: checksum mismatch not detected (rc %d)\n", rank, rc);
            rc = ERR_WRONG;
        }
        goto out;
    }
    if ((rc = comm_allgather(comm, loss, sizeof loss, all, 30000))) goto out;
    if (rank == 0) {
        FILE *f = fopen(arg->path, "wb");
        if (!f) { rc = ERR_IO; goto out; }
        for (int i = 0; i < EQ_STEPS; i++) {
            double m = 0;
            for (int r = 0; r < world; r++) m += all[r * EQ_STEPS + i] / world;
            fwrite(&m, sizeof m, 1, f);
        }
        fwrite(trainer_params(t), sizeof(float), trainer_shape(t)->count, f);
        fclose(f);
    }
out:
    if (rc) fprintf(stderr, "rank %d: %s (%s)\n", rank, err_str(rc), err_detail());
    trainer_destroy(&t);
    if (e) ring_engine.destroy(&e);
    comm_destroy(&comm);
    return rc ? 1 : 0;
}

Test(trainer, world4_quarter_batch_matches_world1, .timeout = 120)
{
    s_eq_arg_t arg = {.model = "mlp:784-64-32-10", .corrupt_rank = -1};
    snprintf(arg.path, sizeof arg.path, "%s", s_tmp("eq4.bin"));
    cr_assert_eq(run_ranks(4, s_eq_rank, &arg, 90000), 0, "world 4 ran");
    /* world 1, batch B, local optimizer: the reference */
    trainer_cfg_t c;
    trainer_cfg_default(&c);
    c.model = arg.model;
    c.global_batch = EQ_BATCH;
    c.synth_samples = 512;
    c.seed = 77;
    cr_assert_eq(optim_parse("sgd:lr=0.1,momentum=0.9", &c.optim), 0);
    trainer_t *t = s_local(&c);
    double ref[EQ_STEPS];
    s_run(t, EQ_STEPS, ref);
    size_t n = trainer_shape(t)->count;
    FILE *f = fopen(arg.path, "rb");
    cr_assert_not_null(f);
    double got[EQ_STEPS];
    float *p4 = malloc(n * sizeof(float));
    cr_assert_eq(fread(got, sizeof(double), EQ_STEPS, f), (size_t)EQ_STEPS);
    cr_assert_eq(fread(p4, sizeof(float), n, f), n);
    fclose(f);
    unlink(arg.path);
    for (int i = 0; i < EQ_STEPS; i++)
        cr_assert(fabs(got[i] - ref[i]) <= 1e-4 * fmax(1.0, fabs(ref[i])), "step %d: world 4 loss %.7f, world 1 %.7f",
                  i + 1, got[i], ref[i]);
    cr_assert(ref[EQ_STEPS - 1] < ref[0], "and it trains");
    double worst = 0;
    const float *p1 = trainer_params(t);
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)p1[i] - p4[i]));
    cr_assert(worst < 1e-4, "parameters agree within f32 tolerance (max diff %g)", worst);
    free(p4);
    trainer_destroy(&t);
}

Test(trainer, checksum_mismatch_names_the_rank, .timeout = 60)
{
    s_eq_arg_t arg = {.model = "mlp:784-16-10", .corrupt_rank = 2};
    cr_assert_eq(run_ranks(4, s_eq_rank, &arg, 45000), 0, "every rank reports rank 2 as different");
}

/* Resume under an engine: the ring's optimizer state (momentum) goes into the checkpoint and back. */
typedef struct {
    int cut;              /* 0: run straight through; else save after cut steps and resume */
    char out[256];
    char ckpt[256];
} s_res_arg_t;

static int s_res_rank(int rank, int world, void *argp)
{
    s_res_arg_t *arg = argp;
    openblas_set_num_threads(1);
    comm_t *comm = NULL;
    if (s_join(&comm, world)) return 1;
    engine_cfg_t ec = {.device = -1, .timeout_ms = 30000, .nworkers = world};
    trainer_cfg_t c;
    trainer_cfg_default(&c);
    c.model = "mlp:784-32-10";
    c.global_batch = 32;
    c.synth_samples = 256;
    c.seed = 5;
    c.world = world;
    c.rank = rank;
    c.comm = comm;
    int rc = optim_parse("sgd:lr=0.05,momentum=0.9", &c.optim);
    const int total = 10;
    char ck[300];
    snprintf(ck, sizeof ck, "%s.%d", arg->ckpt, rank);
    trainer_step_t st;
    engine_t *e = NULL;
    trainer_t *t = NULL;
    if (!rc) rc = ring_engine.create(&e, comm, &ec);
    if (!rc) rc = trainer_new(&t, &c);
    if (!rc) rc = trainer_attach(t, &ring_engine, e);
    int first = arg->cut ? arg->cut : total;
    for (int i = 0; i < first && !rc; i++) rc = trainer_step(t, &st);
    if (!rc && arg->cut) {
        rc = trainer_save(t, ck);
        trainer_destroy(&t);
        ring_engine.destroy(&e);
        if (!rc) rc = ring_engine.create(&e, comm, &ec);
        if (!rc) rc = trainer_new(&t, &c);
        if (!rc) rc = trainer_resume(t, ck);
        if (!rc) rc = trainer_attach(t, &ring_engine, e);
        for (int i = arg->cut; i < total && !rc; i++) rc = trainer_step(t, &st);
        unlink(ck);
    }
    if (!rc && rank == 0) {
        FILE *f = fopen(arg->out, "wb");
        if (f) {
            fwrite(trainer_params(t), sizeof(float), trainer_shape(t)->count, f);
            fclose(f);
        } else rc = ERR_IO;
    }
    if (rc) fprintf(stderr, "rank %d: %s (%s)\n", rank, err_str(rc), err_detail());
    trainer_destroy(&t);
    if (e) ring_engine.destroy(&e);
    comm_destroy(&comm);
    return rc ? 1 : 0;
}

Test(trainer, resume_under_ring_engine_is_bit_identical, .timeout = 120)
{
    s_res_arg_t a = {.cut = 0}, b = {.cut = 4};
    snprintf(a.out, sizeof a.out, "%s", s_tmp("res-a.bin"));
    snprintf(b.out, sizeof b.out, "%s", s_tmp("res-b.bin"));
    snprintf(b.ckpt, sizeof b.ckpt, "%s", s_tmp("res.ckpt"));
    cr_assert_eq(run_ranks(2, s_res_rank, &a, 60000), 0, "uninterrupted run");
    cr_assert_eq(run_ranks(2, s_res_rank, &b, 60000), 0, "saved and resumed run");
    FILE *fa = fopen(a.out, "rb"), *fb = fopen(b.out, "rb");
    cr_assert(fa && fb);
    static char ba[1 << 20], bb[1 << 20];
    size_t na = fread(ba, 1, sizeof ba, fa), nb = fread(bb, 1, sizeof bb, fb);
    fclose(fa);
    fclose(fb);
    cr_assert(na > 0 && na == nb);
    cr_assert_eq(memcmp(ba, bb, na), 0, "parameters after resume differ from the uninterrupted run");
    unlink(a.out);
    unlink(b.out);
}
