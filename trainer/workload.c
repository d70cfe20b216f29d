/* workload.c: loads gradient profiles (built into the binary from workloads/NAME.tsv, or a .tsv file),
 * resolves emulated devices from published throughputs, and computes a step's per-tensor timing and
 * DDP-style buckets. */
#include "trainer/workload.h"
#include "core/err.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The profiles, built in: workloads/NAME.tsv as NUL-terminated text (the Makefile makes this object
 * depend on the .tsv files). */
#define S_INCBIN(sym, file)                                                                   \
    __asm__(".section .rodata\n.global " #sym "\n.type " #sym ", @object\n.balign 16\n" #sym \
            ":\n.incbin \"" file "\"\n.byte 0\n.previous\n");                                 \
    extern const char sym[]
S_INCBIN(sb_wl_resnet50, "workloads/resnet50.tsv");
S_INCBIN(sb_wl_resnet101, "workloads/resnet101.tsv");
S_INCBIN(sb_wl_vgg16, "workloads/vgg16.tsv");
S_INCBIN(sb_wl_inception3, "workloads/inception3.tsv");
S_INCBIN(sb_wl_bert_base, "workloads/bert-base.tsv");
S_INCBIN(sb_wl_bert_large, "workloads/bert-large.tsv");
S_INCBIN(sb_wl_gpt2, "workloads/gpt2.tsv");

static const struct {
    const char *name;
    const char *text;
} s_builtin[] = {
    {"resnet50", sb_wl_resnet50},     {"resnet101", sb_wl_resnet101}, {"vgg16", sb_wl_vgg16},
    {"inception3", sb_wl_inception3}, {"bert-base", sb_wl_bert_base}, {"bert-large", sb_wl_bert_large},
    {"gpt2", sb_wl_gpt2},
};
#define S_NBUILTIN (sizeof s_builtin / sizeof s_builtin[0])

const char *workload_at(size_t i) { return i < S_NBUILTIN ? s_builtin[i].name : NULL; }

/* "a, b, c" of the names name_at gives, into buf (once: the tables are constant) */
static const char *s_join(char *buf, size_t len, const char *(*name_at)(size_t))
{
    if (!buf[0])
        for (size_t i = 0, off = 0; name_at(i) && off < len; i++)
            off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", name_at(i));
    return buf;
}

const char *workload_names(void)
{
    static char names[256];
    return s_join(names, sizeof names, workload_at);
}

static int s_is_path(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && !strcmp(name + n - 4, ".tsv");
}

int workload_is_known(const char *name)
{
    if (!name) return 0;
    if (s_is_path(name)) return 1;
    for (size_t i = 0; i < S_NBUILTIN; i++)
        if (!strcmp(s_builtin[i].name, name)) return 1;
    return 0;
}

static char *s_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        err_set(ERR_IO, "workload %s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            if (cap > (64u << 20)) { err_set(ERR_RANGE, "workload %s: larger than 64 MiB", path); break; }
            char *nb = realloc(buf, cap);
            if (!nb) { err_set(ERR_NOMEM, "workload %s", path); break; }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, 4096, f);
        len += r;
        if (r < 4096) {
            if (ferror(f)) { err_set(ERR_IO, "workload %s: read failed", path); break; }
            buf[len] = '\0';
            fclose(f);
            return buf;
        }
    }
    free(buf);
    fclose(f);
    return NULL;
}

/* Parse one data line "name\tnumel\tfwd\tbwd" into t; 0 or -1. */
static int s_parse_line(char *line, wl_tensor_t *t)
{
    char *f[4];
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(line, "\t", &save); tok && n < 5; tok = strtok_r(NULL, "\t", &save)) {
        if (n == 4) return -1;
        f[n++] = tok;
    }
    if (n != 4 || strlen(f[0]) >= sizeof t->name) return -1;
    snprintf(t->name, sizeof t->name, "%s", f[0]);
    char *e;
    errno = 0;
    unsigned long long v = strtoull(f[1], &e, 10);
    if (*e || errno || v == 0 || f[1][0] == '-') return -1;
    t->numel = (size_t)v;
    t->fwd_flops = strtod(f[2], &e);
    if (*e || !isfinite(t->fwd_flops) || t->fwd_flops < 0) return -1;
    t->bwd_flops = strtod(f[3], &e);
    if (*e || !isfinite(t->bwd_flops) || t->bwd_flops < 0) return -1;
    return 0;
}

/* The model's name a header line gives ("NAME: ..."): 1..31 characters of [A-Za-z0-9._+-] before the first colon;
 * 0 and out untouched when the line does not start that way. */
static int s_header_name(const char *line, char *out, size_t len)
{
    size_t n = strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-");
    if (!n || n >= len || line[n] != ':') return 0;
    snprintf(out, len, "%.*s", (int)n, line);
    return 1;
}

static int s_parse(workload_t *w, char *text, const char *origin)
{
    size_t lines = 1;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    w->t = calloc(lines, sizeof *w->t);
    if (!w->t) return err_set(ERR_NOMEM, "workload %s", origin);
    size_t lineno = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r') line[--l] = '\0';
        if (!l) continue;
        if (line[0] == '#') {
            if (!w->source[0]) snprintf(w->source, sizeof w->source, "%s", line + (line[1] == ' ' ? 2 : 1));
            continue;
        }
        wl_tensor_t *t = &w->t[w->ntensors];
        if (s_parse_line(line, t) < 0)
            return err_set(ERR_CORRUPT, "workload %s line %zu: expected NAME<TAB>NUMEL<TAB>FWD_FLOPS<TAB>BWD_FLOPS", origin,
                           lineno);
        w->params += t->numel;
        w->fwd_flops += t->fwd_flops;
        w->bwd_flops += t->bwd_flops;
        w->ntensors++;
    }
    if (!w->ntensors) return err_set(ERR_CORRUPT, "workload %s: no tensors", origin);
    if (!(w->fwd_flops + w->bwd_flops > 0)) return err_set(ERR_CORRUPT, "workload %s: no FLOPs", origin);
    /* a header that states its totals ("N trainable tensors, P parameters") must agree with its lines */
    const char *tot = strchr(w->source, ':');
    size_t nt, np;
    if (tot && sscanf(tot + 1, " %zu trainable tensors, %zu parameters", &nt, &np) == 2 &&
        (nt != w->ntensors || np != w->params))
        return err_set(ERR_CORRUPT, "workload %s: its header says %zu tensors and %zu parameters, its lines hold %zu and %zu",
                       origin, nt, np, w->ntensors, w->params);
    return 0;
}

int workload_load(workload_t **self_p, const char *name)
{
    *self_p = NULL;
    if (!name || !workload_is_known(name))
        return err_set(ERR_INVAL, "unknown workload '%s' (have %s, or a path to a .tsv profile)", name ? name : "",
                       workload_names());
    char *text = NULL;
    const char *base = name;
    if (s_is_path(name)) {
        if (!(text = s_read_file(name))) return ERR_IO;
        const char *sl = strrchr(name, '/');
        base = sl ? sl + 1 : name;
    } else {
        for (size_t i = 0; i < S_NBUILTIN; i++)
            if (!strcmp(s_builtin[i].name, name)) text = strdup(s_builtin[i].text);
        if (!text) return err_set(ERR_NOMEM, "workload %s", name);
    }
    workload_t *w = calloc(1, sizeof *w);
    if (!w) { free(text); return err_set(ERR_NOMEM, "workload %s", name); }
    int rc = s_parse(w, text, name);
    free(text);
    if (rc < 0) {
        workload_destroy(&w);
        return rc;
    }
    /* the model's name: the header's ("# NAME: ..."), else the file's name without .tsv */
    if (!s_header_name(w->source, w->name, sizeof w->name))
        snprintf(w->name, sizeof w->name, "%.*s", (int)(s_is_path(name) ? strlen(base) - 4 : strlen(base)), base);
    *self_p = w;
    return 0;
}

void workload_destroy(workload_t **self_p)
{
    if (!self_p || !*self_p) return;
    free((*self_p)->t);
    free(*self_p);
    *self_p = NULL;
}

/* ---- emulated devices ------------------------------------------------------------------------ */

typedef struct {
    const char *model;
    double samples_per_s;
    const char *source;       /* where, which table, container or version, batch a GPU, precision */
} s_figure_t;

#define S_NFIG 8

typedef struct {
    const char *name;
    const char *desc;
    double mem_gbps;          /* memory bandwidth from the spec sheet */
    s_figure_t fig[S_NFIG];
} s_preset_t;

/* Published single-device training throughputs (images or sequences per second), each with its source.
 * A preset holds one precision only: FP32 presets take no TF32 or mixed-precision figure; "a100" and
 * "h100" are TF32 (what FP32 code runs on those GPUs by default: matrix maths in TF32); "-amp" presets are
 * mixed precision. A model without a figure here is derived from the preset's figures (s_preset).
 * Abbreviations in the sources: DLE = github.com/NVIDIA/DeepLearningExamples; Lambda TF =
 * github.com/lambdal/lambda-tensorflow-benchmark (tf_cnn_benchmarks, synthetic data); Lambda PyTorch =
 * github.com/lambdal/deeplearning-benchmark (DLE's PyTorch ConvNets, synthetic data). Sequence models: BERT
 * pre-training at sequence 128, the length of workloads/bert-*.tsv. */
static const s_preset_t s_presets[] = {
    {"pascal", "Pascal GPU (P100, 732 GB/s), FP32, batch 64 (Horovod README, Sep 2017)", 732,
     {{"inception3", 134.4, "Horovod README 2017"}, {"resnet101", 119.4, "Horovod README 2017"},
      {"vgg16", 130.9, "Horovod README 2017"}}},
    {"v100", "V100 (SXM2 900 GB/s), FP32", 900,
     {{"resnet50", 367, "DLE PyTorch ResNet50 v1.5 README, DGX-1 16GB table, pytorch 21.03, batch 112, FP32"},
      {"vgg16", 249.19, "Lambda TF, V100-SXM3-32GB, TF 2.2.0, batch 192, fp32 (tf-train-throughput-fp32.csv)"},
      {"inception3", 273.17, "Lambda TF, V100-SXM3-32GB, TF 2.2.0, batch 192, fp32 (tf-train-throughput-fp32.csv)"},
      {"bert-large", 40.32, "DLE PyTorch BERT README (commit 3d3ff3e1), DGX-1 32G pre-training, pytorch 19.07, batch 32, FP32"}}},
    {"v100-amp", "V100 (SXM2 900 GB/s), mixed precision", 900,
     {{"resnet50", 1200, "DLE PyTorch ResNet50 v1.5 README, DGX-1 16GB table, pytorch 21.03, batch 256, AMP"},
      {"vgg16", 455.93, "Lambda TF, V100-SXM3-32GB, TF 2.2.0, batch 384, --use_fp16 (tf-train-throughput-fp16.csv)"},
      {"inception3", 771.37, "Lambda TF, V100-SXM3-32GB, TF 2.2.0, batch 384, --use_fp16 (tf-train-throughput-fp16.csv)"},
      {"bert-large", 171.52, "DLE PyTorch BERT README (commit 3d3ff3e1), DGX-1 32G pre-training, pytorch 19.07, batch 64, mixed"}}},
    {"a100", "A100 80 GB (SXM, 2039 GB/s), TF32", 2039,
     {{"resnet50", 938, "DLE PyTorch ResNet50 v1.5 README, DGX A100 80GB table, pytorch 21.03, batch 256, TF32"},
      {"bert-large", 317, "DLE PyTorch BERT README, DGX A100 80GB pre-training, pytorch 21.11, batch 128, TF32"}}},
    {"a100-amp", "A100 80 GB (SXM, 2039 GB/s), mixed precision", 2039,
     {{"resnet50", 2470, "DLE PyTorch ResNet50 v1.5 README, DGX A100 80GB table, pytorch 21.03, batch 256, AMP"},
      {"bert-large", 694, "DLE PaddlePaddle BERT README, DGX A100 80GB pre-training, PaddlePaddle 22.12, batch 256, mixed"}}},
    {"h100", "H100 80 GB SXM5 (3350 GB/s), TF32", 3350,
     {{"resnet50", 1753, "Lambda PyTorch, H100 80GB SXM5, pytorch 22.10, batch 640, no --amp (TF32 by default)"}}},
    {"h100-amp", "H100 80 GB SXM5 (3350 GB/s), mixed precision", 3350,
     {{"resnet50", 2616, "Lambda PyTorch, H100 80GB SXM5, pytorch 22.10, batch 1280, --amp"}}},
};
#define S_NPRESETS (sizeof s_presets / sizeof s_presets[0])

const char *wl_device_at(size_t i) { return i < S_NPRESETS ? s_presets[i].name : NULL; }

const char *wl_device_names(void)
{
    static char names[256];
    return s_join(names, sizeof names, wl_device_at);
}

static int s_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int s_preset(const s_preset_t *p, const workload_t *wl, wl_device_t *out)
{
    snprintf(out->name, sizeof out->name, "%s", p->name);
    out->mem_gbps = p->mem_gbps;
    double fps = wl->fwd_flops + wl->bwd_flops;
    double eff[S_NFIG], other_work = 0;
    int n = 0;
    for (int i = 0; i < S_NFIG && p->fig[i].model; i++) {
        workload_t *other = NULL;
        CHECK(workload_load(&other, p->fig[i].model));
        double ofps = other->fwd_flops + other->bwd_flops;
        workload_destroy(&other);
        /* a profile of that name from a file is the same model only if it does the same work (within 2%) */
        if (!strcmp(p->fig[i].model, wl->name) && fabs(fps / ofps - 1) <= 0.02) {
            out->samples_per_s = p->fig[i].samples_per_s;
            out->tflops = out->samples_per_s * fps / 1e12;
            snprintf(out->basis, sizeof out->basis, "%s: %g samples/s published (%s)", p->desc, out->samples_per_s,
                     p->fig[i].source);
            return 0;
        }
        if (!strcmp(p->fig[i].model, wl->name)) other_work = fps / ofps;
        eff[n++] = p->fig[i].samples_per_s * ofps / 1e12;
    }
    qsort(eff, (size_t)n, sizeof eff[0], s_cmp_d);
    out->tflops = n % 2 ? eff[n / 2] : (eff[n / 2 - 1] + eff[n / 2]) / 2;
    out->samples_per_s = out->tflops * 1e12 / fps;
    out->derived = 1;
    if (other_work > 0)
        snprintf(out->basis, sizeof out->basis, "%s: this %s profile does %.3gx the built-in's FLOPs, so not its published "
                 "figure; %.3g effective TFLOP/s of its published ones", p->desc, wl->name, other_work, out->tflops);
    else
        snprintf(out->basis, sizeof out->basis, "%s: no published figure for %s; %.3g effective TFLOP/s of its published "
                 "ones", p->desc, wl->name, out->tflops);
    return 0;
}

static int s_resolve(const char *spec, const workload_t *wl, wl_device_t *out);

int wl_device_resolve(const char *spec, const workload_t *wl, wl_device_t *out)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) return err_set(ERR_INVAL, "--device: empty (have %s, throughput=X or tflops=X)", wl_device_names());
    char head[96];
    snprintf(head, sizeof head, "%s", spec);
    char *mb = strstr(head, ",membw=");
    double bw = 0;
    if (mb) {
        char *e;
        bw = strtod(mb + 7, &e);
        if (*e || !isfinite(bw) || bw <= 0) return err_set(ERR_INVAL, "--device %s: membw= expects GB/s > 0", spec);
        *mb = '\0';
    }
    CHECK(s_resolve(head, wl, out));
    if (bw > 0) out->mem_gbps = bw;
    return 0;
}

double wl_update_s(const wl_device_t *dev, size_t n, double bytes_per_param, double dilate)
{
    if (!(dev->mem_gbps > 0)) return 0;
    return (double)n * bytes_per_param / (dev->mem_gbps * 1e9) * (dilate >= 1 ? dilate : 1);
}

static int s_resolve(const char *spec, const workload_t *wl, wl_device_t *out)
{
    for (size_t i = 0; i < S_NPRESETS; i++)
        if (!strcmp(s_presets[i].name, spec)) return s_preset(&s_presets[i], wl, out);
    double fps = wl->fwd_flops + wl->bwd_flops;
    const char *eq = strchr(spec, '=');
    if (eq) {
        char *e;
        double v = strtod(eq + 1, &e);
        if (*e || !isfinite(v) || v <= 0) return err_set(ERR_INVAL, "--device %s: expected a positive number after '='", spec);
        if (!strncmp(spec, "throughput=", 11)) {
            out->samples_per_s = v;
            out->tflops = v * fps / 1e12;
            snprintf(out->basis, sizeof out->basis, "given: %g samples/s", v);
        } else if (!strncmp(spec, "tflops=", 7)) {
            out->tflops = v;
            out->samples_per_s = v * 1e12 / fps;
            out->derived = 1;
            snprintf(out->basis, sizeof out->basis, "given: %g effective TFLOP/s", v);
        } else {
            return err_set(ERR_INVAL, "--device %s: expected throughput=X or tflops=X", spec);
        }
        snprintf(out->name, sizeof out->name, "%.*s", (int)(sizeof out->name - 1), spec);
        return 0;
    }
    return err_set(ERR_INVAL, "--device '%s': unknown (presets %s; or throughput=X, tflops=X)", spec, wl_device_names());
}

/* ---- timing and buckets ---------------------------------------------------------------------- */

void wl_schedule(const workload_t *wl, const wl_device_t *dev, size_t local_batch, double dilate, double *fwd_s,
                 double *ready, double *total_s)
{
    double k = dilate >= 1 ? dilate : 1;
    double total = (double)local_batch / dev->samples_per_s * k;
    double fl = wl->fwd_flops + wl->bwd_flops;
    double fwd = total * wl->fwd_flops / fl;
    double cum = 0;
    for (size_t i = 0; ready && i < wl->ntensors; i++) {
        cum += wl->t[i].bwd_flops;
        ready[i] = fwd + total * cum / fl;
    }
    if (fwd_s) *fwd_s = fwd;
    if (total_s) *total_s = total;
}

size_t wl_shrunk_numel(const workload_t *wl, size_t i, double shrink)
{
    double s = shrink >= 1 ? shrink : 1;
    return (size_t)ceil((double)wl->t[i].numel / s);
}

int wl_buckets(const workload_t *wl, double shrink, size_t first_cap, size_t cap, size_t *ends)
{
    if (!cap || !first_cap) return err_set(ERR_INVAL, "bucket caps must be > 0");
    int nb = 0;
    size_t open = 0;
    for (size_t i = 0; i < wl->ntensors; i++) {
        open += wl_shrunk_numel(wl, i, shrink) * sizeof(float);
        if (open >= (nb == 0 ? first_cap : cap) || i + 1 == wl->ntensors) {
            ends[nb++] = i + 1;
            open = 0;
        }
    }
    return nb;
}
