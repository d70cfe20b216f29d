/* test_workload.c: the built-in gradient profiles (totals against the model definitions), the emulated
 * device's per-layer timing against hand-computed values, presets, and DDP bucket cutting. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "core/err.h"
#include "trainer/emu.h"
#include "trainer/workload.h"

static void s_expect_totals(const char *name, size_t ntensors, size_t params)
{
    workload_t *w = NULL;
    cr_assert_eq(workload_load(&w, name), 0, "%s: %s", name, err_detail());
    cr_expect_eq(w->ntensors, ntensors, "%s: %zu tensors, want %zu", name, w->ntensors, ntensors);
    cr_expect_eq(w->params, params, "%s: %zu parameters, want %zu", name, w->params, params);
    cr_expect(strstr(w->source, name) != NULL, "%s: source line '%s'", name, w->source);
    workload_destroy(&w);
    cr_expect_null(w);
}

Test(workload, totals_match_the_model_definitions)
{
    s_expect_totals("resnet50", 161, 25557032);
    s_expect_totals("resnet101", 314, 44549160);
    s_expect_totals("vgg16", 32, 138357544);
    s_expect_totals("inception3", 292, 27161264);
    s_expect_totals("bert-base", 202, 109514298);
    s_expect_totals("bert-large", 394, 335174458);
    s_expect_totals("gpt2", 148, 124439808);
}

Test(workload, flops_match_the_profile_header)
{
    /* whole-model FLOPs per sample the header states (3-4 significant digits) */
    workload_t *w = NULL;
    cr_assert_eq(workload_load(&w, "vgg16"), 0);
    cr_expect(fabs(w->fwd_flops / 3.094e10 - 1) < 1e-3, "vgg16 forward %g", w->fwd_flops);
    cr_expect(fabs(w->bwd_flops / 6.171e10 - 1) < 1e-3, "vgg16 backward %g", w->bwd_flops);
    cr_expect_str_eq(w->t[0].name, "classifier.6.bias");
    workload_destroy(&w);
    cr_assert_eq(workload_load(&w, "resnet50"), 0);
    cr_expect(fabs(w->fwd_flops / 8.178e9 - 1) < 1e-3, "resnet50 forward %g", w->fwd_flops);
    workload_destroy(&w);
}

static char s_path[64];

static void s_write_profile(const char *text)
{
    snprintf(s_path, sizeof s_path, "/tmp/sb-wl-%d.tsv", (int)getpid());
    FILE *f = fopen(s_path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* three tensors: forward 10+20+70 = 100, backward 50+0+150 = 200 FLOPs per sample */
static const char *s_tiny = "# tiny: 3 tensors, hand-made\n"
                            "head.bias\t4\t10\t50\n"
                            "head.weight\t8\t20\t0\n"
                            "body.weight\t1000\t70\t150\n";

Test(workload, per_layer_timing_against_hand_computed_values)
{
    s_write_profile(s_tiny);
    workload_t *w = NULL;
    cr_assert_eq(workload_load(&w, s_path), 0, "%s", err_detail());
    cr_expect_str_eq(w->name, "tiny", "the name comes from the header, not the file (%s)", s_path);
    wl_device_t d;
    cr_assert_eq(wl_device_resolve("throughput=100", w, &d), 0);
    /* batch 50 at 100 samples/s: 0.5 s; forward a third (100 of 300 FLOPs), then backward by share */
    double fwd, total, ready[3];
    wl_schedule(w, &d, 50, 1, &fwd, ready, &total);
    cr_expect(fabs(total - 0.5) < 1e-12, "total %g", total);
    cr_expect(fabs(fwd - 0.5 / 3) < 1e-12, "forward %g", fwd);
    cr_expect(fabs(ready[0] - (0.5 / 3 + 0.5 * 50 / 300)) < 1e-12, "ready[0] %g", ready[0]);
    cr_expect(fabs(ready[1] - ready[0]) < 1e-12, "a tensor with no FLOPs of its own is ready with its module's first");
    cr_expect(fabs(ready[2] - 0.5) < 1e-12, "last gradient at the end of backward: %g", ready[2]);
    /* dilation multiplies every time */
    wl_schedule(w, &d, 50, 4, &fwd, ready, &total);
    cr_expect(fabs(total - 2.0) < 1e-12 && fabs(ready[0] - 4 * (0.5 / 3 + 0.5 * 50 / 300)) < 1e-12);
    /* tflops= gives samples/s = TFLOP/s / FLOPs per sample */
    cr_assert_eq(wl_device_resolve("tflops=3e-10", w, &d), 0); /* 300 FLOP/s */
    cr_expect(fabs(d.samples_per_s - 1.0) < 1e-9, "samples/s %g", d.samples_per_s);
    workload_destroy(&w);
    unlink(s_path);
}

/* Every published figure in the presets, as trainer/workload.c cites it: returned exactly, derived = 0. */
static const struct {
    const char *preset, *model;
    double samples_per_s;
} s_published[] = {
    {"pascal", "inception3", 134.4}, {"pascal", "resnet101", 119.4},  {"pascal", "vgg16", 130.9},
    {"v100", "resnet50", 367},       {"v100", "vgg16", 249.19},       {"v100", "inception3", 273.17},
    {"v100", "bert-large", 40.32},   {"v100-amp", "resnet50", 1200},  {"v100-amp", "vgg16", 455.93},
    {"v100-amp", "inception3", 771.37}, {"v100-amp", "bert-large", 171.52}, {"a100", "resnet50", 938},
    {"a100", "bert-large", 317},     {"a100-amp", "resnet50", 2470},  {"a100-amp", "bert-large", 694},
    {"h100", "resnet50", 1753},      {"h100-amp", "resnet50", 2616},
};

Test(workload, presets_return_published_figures_exactly)
{
    for (size_t i = 0; i < sizeof s_published / sizeof s_published[0]; i++) {
        workload_t *w = NULL;
        cr_assert_eq(workload_load(&w, s_published[i].model), 0);
        wl_device_t d;
        cr_assert_eq(wl_device_resolve(s_published[i].preset, w, &d), 0, "%s", err_detail());
        cr_expect(d.samples_per_s == s_published[i].samples_per_s && !d.derived, "%s on %s: %g (derived %d), want %g",
                  s_published[i].model, s_published[i].preset, d.samples_per_s, d.derived, s_published[i].samples_per_s);
        cr_expect(strstr(d.basis, "published") != NULL, "%s on %s: basis '%s'", s_published[i].model,
                  s_published[i].preset, d.basis);
        cr_expect(d.mem_gbps > 0, "%s has its spec-sheet bandwidth", s_published[i].preset);
        cr_expect(strstr(wl_device_names(), s_published[i].preset) != NULL, "%s listed in wl_device_names",
                  s_published[i].preset);
        workload_destroy(&w);
    }
}

static double s_eff(const char *model, double samples_per_s)
{
    workload_t *w = NULL;
    cr_assert_eq(workload_load(&w, model), 0);
    double e = samples_per_s * (w->fwd_flops + w->bwd_flops);
    workload_destroy(&w);
    return e;
}

Test(workload, presets_published_and_derived)
{
    workload_t *v = NULL, *r101 = NULL, *r50 = NULL, *inc = NULL;
    cr_assert_eq(workload_load(&v, "vgg16"), 0);
    cr_assert_eq(workload_load(&r101, "resnet101"), 0);
    cr_assert_eq(workload_load(&r50, "resnet50"), 0);
    cr_assert_eq(workload_load(&inc, "inception3"), 0);
    wl_device_t d;
    /* resnet50 on pascal: the median effective TFLOP/s of pascal's three published figures */
    double e[3] = {134.4 * (inc->fwd_flops + inc->bwd_flops), 119.4 * (r101->fwd_flops + r101->bwd_flops),
                   130.9 * (v->fwd_flops + v->bwd_flops)};
    double lo = fmin(e[0], fmin(e[1], e[2])), hi = fmax(e[0], fmax(e[1], e[2]));
    double med = e[0] + e[1] + e[2] - lo - hi;
    cr_assert_eq(wl_device_resolve("pascal", r50, &d), 0);
    cr_expect(d.derived && fabs(d.samples_per_s - med / (r50->fwd_flops + r50->bwd_flops)) < 1e-9, "derived %g",
              d.samples_per_s);
    cr_expect(strstr(d.basis, "no published figure") != NULL, "a derived figure says so: %s", d.basis);
    /* resnet101 on v100: the mean of the middle two of v100's four figures' effective FLOP/s */
    double f[4] = {s_eff("resnet50", 367), s_eff("vgg16", 249.19), s_eff("inception3", 273.17),
                   s_eff("bert-large", 40.32)};
    for (int i = 0; i < 4; i++) /* sort four */
        for (int j = i + 1; j < 4; j++)
            if (f[j] < f[i]) { double t = f[i]; f[i] = f[j]; f[j] = t; }
    cr_assert_eq(wl_device_resolve("v100", r101, &d), 0);
    cr_expect(d.derived && fabs(d.samples_per_s - (f[1] + f[2]) / 2 / (r101->fwd_flops + r101->bwd_flops)) < 1e-6,
              "resnet101 on v100 derived %g", d.samples_per_s);
    cr_expect(strstr(d.basis, "no published figure") != NULL, "%s", d.basis);
    /* vgg16 on h100: one published figure, so resnet50's effective TFLOP/s */
    cr_assert_eq(wl_device_resolve("h100", v, &d), 0);
    cr_expect(d.derived && fabs(d.samples_per_s - s_eff("resnet50", 1753) / (v->fwd_flops + v->bwd_flops)) < 1e-9,
              "vgg16 on h100 derived %g", d.samples_per_s);
    cr_expect(d.mem_gbps == 3350);
    cr_expect_lt(wl_device_resolve("tpu", r50, &d), 0);
    cr_expect(strstr(err_detail(), "pascal") != NULL && strstr(err_detail(), "h100") != NULL,
              "the error lists the presets: %s", err_detail());
    cr_expect_lt(wl_device_resolve("throughput=-1", r50, &d), 0);
    workload_destroy(&v); workload_destroy(&r101); workload_destroy(&r50); workload_destroy(&inc);
}

/* the builtin's text with its first line's name replaced by `name` and every FLOP count times `scale` */
static void s_write_variant(const char *builtin, const char *name, double scale)
{
    char path[256];
    snprintf(path, sizeof path, "workloads/%s.tsv", builtin);
    FILE *in = fopen(path, "r");
    if (!in) cr_skip_test("run from the checkout (%s not found)", path);
    snprintf(s_path, sizeof s_path, "/tmp/sb-wl-%d.tsv", (int)getpid());
    FILE *out = fopen(s_path, "w");
    cr_assert_not_null(out);
    char line[1024], tname[128];
    unsigned long long numel;
    double f, b;
    for (int first = 1; fgets(line, sizeof line, in); first = 0) {
        if (first) fprintf(out, "# %s%s", name, strchr(line, ':'));
        else if (sscanf(line, "%127[^\t]\t%llu\t%lf\t%lf", tname, &numel, &f, &b) == 4)
            fprintf(out, "%s\t%llu\t%.17g\t%.17g\n", tname, numel, f * scale, b * scale);
        else fputs(line, out);
    }
    fclose(in);
    fclose(out);
}

/* A profile file is named by its header (harness train|model|simulate --model path.tsv answer for that model);
 * one named like a built-in gets the built-in's published figure only if it does the same work. */
Test(workload, profile_files_are_named_by_their_header)
{
    workload_t *w = NULL;
    wl_device_t d;
    s_write_variant("resnet50", "resnet50", 1.0);
    cr_assert_eq(workload_load(&w, s_path), 0, "%s", err_detail());
    cr_expect_str_eq(w->name, "resnet50");
    cr_expect(w->ntensors == 161 && w->params == 25557032);
    cr_assert_eq(wl_device_resolve("v100", w, &d), 0);
    cr_expect(d.samples_per_s == 367 && !d.derived, "the same model: its published figure (%g)", d.samples_per_s);
    workload_destroy(&w);
    s_write_variant("resnet50", "resnet50", 1.5); /* named resnet50, 1.5x the work: not resnet50's figure */
    cr_assert_eq(workload_load(&w, s_path), 0, "%s", err_detail());
    cr_assert_eq(wl_device_resolve("v100", w, &d), 0);
    cr_expect(d.derived && strstr(d.basis, "1.5x the built-in") != NULL, "%s", d.basis);
    workload_destroy(&w);
    s_write_variant("vgg16", "my-vgg_v2.1", 1.0);
    cr_assert_eq(workload_load(&w, s_path), 0, "%s", err_detail());
    cr_expect_str_eq(w->name, "my-vgg_v2.1");
    cr_assert_eq(wl_device_resolve("v100", w, &d), 0);
    cr_expect(d.derived && strstr(d.basis, "no published figure for my-vgg_v2.1") != NULL, "%s", d.basis);
    workload_destroy(&w);
    /* a first line that does not start with NAME: names nothing: the file's name stands */
    s_write_profile("# a profile made by hand\nx.weight\t10\t5\t10\n");
    cr_assert_eq(workload_load(&w, s_path), 0, "%s", err_detail());
    cr_expect(!strncmp(w->name, "sb-wl-", 6), "name from the file: %s", w->name);
    workload_destroy(&w);
    /* a header whose totals disagree with its lines is refused, saying both */
    s_write_profile("# m: 2 trainable tensors, 30 parameters; by hand\nx.weight\t10\t5\t10\n");
    cr_expect_eq(workload_load(&w, s_path), ERR_CORRUPT);
    cr_expect(strstr(err_detail(), "2 tensors and 30 parameters, its lines hold 1 and 10") != NULL, "%s", err_detail());
    cr_expect_null(w);
    unlink(s_path);
}

Test(workload, buckets_ddp_rule_and_shrink)
{
    s_write_profile(s_tiny);
    workload_t *w = NULL;
    cr_assert_eq(workload_load(&w, s_path), 0);
    size_t ends[3];
    /* 16 B, 32 B, 4000 B: first cap 16 B closes after tensor 0; cap 1 KiB closes after tensor 2 */
    cr_assert_eq(wl_buckets(w, 1, 16, 1024, ends), 2);
    cr_expect(ends[0] == 1 && ends[1] == 3);
    /* first cap 64 B: 16 + 32 < 64 stays open, + 4000 closes */
    cr_assert_eq(wl_buckets(w, 1, 64, 1024, ends), 1);
    /* shrink 8: 1, 1, 125 elements (ceil) */
    cr_expect_eq(wl_shrunk_numel(w, 0, 8), 1);
    cr_expect_eq(wl_shrunk_numel(w, 2, 8), 125);
    workload_destroy(&w);
    unlink(s_path);
}

Test(workload, malformed_profiles_name_the_line)
{
    workload_t *w = NULL;
    s_write_profile("# bad\nok\t4\t1\t1\nbroken\tfour\t1\t1\n");
    cr_expect_eq(workload_load(&w, s_path), ERR_CORRUPT);
    cr_expect(strstr(err_detail(), "line 3") != NULL, "%s", err_detail());
    s_write_profile("# empty\n");
    cr_expect_eq(workload_load(&w, s_path), ERR_CORRUPT);
    cr_expect_eq(workload_load(&w, "alexnet"), ERR_INVAL);
    cr_expect(strstr(err_detail(), "resnet50") != NULL);
    cr_expect_eq(workload_load(&w, "/nonexistent/x.tsv"), ERR_IO);
    cr_expect_null(w);
    unlink(s_path);
}

Test(emu, vgg16_shrunk_layout_and_schedule)
{
    emu_cfg_t c = {.model = "vgg16", .device = "pascal", .local_batch = 64, .shrink = 16, .dilate = 2,
                   .grad_dtype = DT_F32, .bucket_mb = 25, .rank = 3, .seed = 1};
    emu_t *e = NULL;
    cr_assert_eq(emu_new(&e, &c), 0, "%s", err_detail());
    const workload_t *w = emu_workload(e);
    size_t want = 0;
    for (size_t i = 0; i < w->ntensors; i++) want += (w->t[i].numel + 15) / 16;
    cr_expect_eq(emu_count(e), want);
    /* buckets tile the arena in order, ready times non-decreasing, the last at the end of backward */
    size_t next = 0;
    double prev = 0, ready = 0;
    for (int b = 0; b < emu_nbuckets(e); b++) {
        size_t off, cnt;
        emu_bucket(e, b, &off, &cnt, &ready);
        cr_expect_eq(off, next, "bucket %d starts at %zu, want %zu", b, off, next);
        cr_expect_geq(ready, prev);
        next = off + cnt;
        prev = ready;
    }
    cr_expect_eq(next, emu_count(e));
    cr_expect(fabs(ready - emu_compute_s(e)) < 1e-12);
    cr_expect(fabs(emu_compute_s(e) - 2 * 64 / 130.9) < 1e-12, "compute %g", emu_compute_s(e));
    /* the gradients are multiples of 2^-12 */
    const float *g = emu_grads(e);
    for (size_t i = 0; i < 1000; i++) cr_expect(g[i] * 4096.0f == (float)(int)(g[i] * 4096.0f));
    emu_destroy(&e);
    cr_expect_null(e);
}
