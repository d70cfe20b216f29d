/* opts.c: the harness command line: one table of options (name, argument kind, where the value goes,
 * help text) from which getopt_long's option array, the parser and `harness --help` are all made;
 * each engine's own options are added from the engine table (engines.c). */
#include "harness/cli/opts_int.h"
#include "core/err.h"
#include "trainer/workload.h"
#include "trainer/model.h"
#include "trainer/trainer.h"
#include "core/optim.h"
#include "harness/registry/layouts.h"
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define S_NOPTS h_opt_count
#define S_ENGOPT 1024 /* getopt value S_ENGOPT + k: engine option k (h_engine_opt); table entry i is 256 + i */

static void s_usage_aliases(FILE *f);

void h_opts_usage(FILE *f)
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
"  model fit BENCH... > calibration.json   the emulated cluster's cost model fitted on bench lines only\n"
"  model check calibration.json RUN...     its training runs predicted from the calibration alone: the\n"
"                    error distribution in sample (the bench lines) and out of sample (the training runs)\n"
"  explain           an engine's allreduce schedule step by step for a small world (--engine ring|tree|ps,\n"
"                    --procs N, --servers S, --sizes BYTES, --gpus-per-node G: machines of G workers; --plots DIR:\n"
"                    an SVG per step) and its bytes per link\n"
"  simulate          each engine's schedule replayed on a simulated cluster with SimGrid (--nodes N\n"
"                    --gpus-per-node G --net inter=RATE --lat US --sizes ...): the collective alone, to 1024 GPUs\n"
"  profile MODEL --input SHAPE -o FILE.tsv   a PyTorch model's gradient profile (syncbench-profile, needs\n"
"                    torch: `make peers`) for --model FILE.tsv; MODEL: pkg.module:factory or a torchvision name\n");
    for (size_t i = 0; i < S_NOPTS; i++) {
        if (h_opt_table[i].help_fn) h_opt_table[i].help_fn(f);
        else if (h_opt_table[i].help) fputs(h_opt_table[i].help, f);
    }
    s_usage_aliases(f);
    fprintf(f, "\n  -h, --help            this text (harness MODE --help: that mode's options and defaults)\n"
               "  --version             the git sha this binary was built from\n");
}

/* Other tools' spellings of the table's options: torchrun (--nproc-per-node, --node_rank, ...), nccl-tests'
 * long forms (--minbytes, --stepfactor, ...) and their short options (-b -e -f -n -w -c -d -o -g -t -a, -h); mpirun's
 * -np N is read as --procs N (h_opts_parse). An alias takes its option's getopt value, so the two never
 * make a prefix ambiguous. */
static const struct { const char *alias, *name; } s_aliases[] = {
    {"nproc-per-node", "procs"}, {"nproc_per_node", "procs"}, {"node_rank", "node-rank"},
    {"master_addr", "master-addr"}, {"master_port", "master-port"}, {"stepfactor", "factor"},
    {"warmup_iters", "warmup"}, {"datatype", "dtype"},
};
#define S_NALIASES (sizeof s_aliases / sizeof s_aliases[0])
static const struct { char c; const char *name; } s_shorts[] = {
    {'b', "minbytes"}, {'e', "maxbytes"}, {'f', "factor"}, {'n', "iters"}, {'w', "warmup"},
    {'c', "check"},    {'d', "dtype"},    {'o', "op"},     {'g', "ngpus"}, {'t', "nthreads"}, {'a', "average"},
    {'h', "help"},
};
#define S_NSHORTS (sizeof s_shorts / sizeof s_shorts[0])
#define S_SHORTOPTS ":b:e:f:n:w:c:d:o:g:t:a:h"

static int s_index_of(const char *name)
{
    for (size_t i = 0; i < S_NOPTS; i++)
        if (h_opt_table[i].name && !strcmp(h_opt_table[i].name, name)) return (int)i;
    return -1;
}

/* the table's options, their aliases, then every engine's own options (S_ENGOPT + k), NULL-terminated */
static const struct option *s_longopts(void)
{
    static struct option all[H_OPT_MAX + S_NALIASES + 64];
    size_t n = 0;
    for (size_t i = 0; i < S_NOPTS; i++)
        if (h_opt_table[i].name) {
            int has_arg = h_opt_table[i].kind != K_FLAG && h_opt_table[i].kind != K_NONE && h_opt_table[i].kind != K_HELP;
            all[n++] = (struct option){h_opt_table[i].name, has_arg, 0, 256 + (int)i};
        }
    for (size_t a = 0; a < S_NALIASES; a++) {
        int i = s_index_of(s_aliases[a].name);
        if (i >= 0) all[n++] = (struct option){s_aliases[a].alias, 1, 0, 256 + i};
    }
    const engine_opt_t *eo;
    for (int k = 0; (eo = h_engine_opt(k, NULL)) && n + 1 < sizeof all / sizeof all[0]; k++)
        all[n++] = (struct option){eo->name, eo->has_value ? 1 : 0, 0, S_ENGOPT + k};
    all[n] = (struct option){0, 0, 0, 0};
    return all;
}

/* The edit distance between a and b, case ignored: insertions, deletions, substitutions and swaps of two
 * neighbours ("warmpu" is one from "warmup"), each 1; names longer than 63 characters count as far. */
static int s_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 64;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int same = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]);
            int v = d[i - 1][j - 1] + !same;
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* The option a misspelt long name most likely meant: the closest of the table's user-facing options, their
 * aliases and the engines' options, within 1 edit for names up to 5 characters and 2 beyond (the first of
 * the closest in table order on a tie); NULL when none is that close. */
static const char *s_nearest(const char *name)
{
    size_t len = strlen(name);
    int best = len <= 2 ? 0 : len <= 5 ? 1 : 2;
    const char *near = NULL;
    int hidden = s_index_of("as-rank"); /* it and what follows are set by the driver on a rank's command line */
    for (const struct option *lo = s_longopts(); lo->name; lo++) {
        if (lo->val >= 256 && lo->val < 256 + (int)S_NOPTS && hidden >= 0 && lo->val - 256 >= hidden) continue;
        int dist = s_distance(name, lo->name);
        if (dist <= best && (!near || dist < best)) near = lo->name, best = dist;
    }
    return near;
}

/* getopt_long's '?' for the long option arg ("--warm" or "--warm=3"): ambiguous (naming the options it
 * could be) or unknown. */
static int s_bad_long(const char *arg)
{
    char name[128];
    snprintf(name, sizeof name, "%s", arg + 2);
    name[strcspn(name, "=")] = '\0';
    size_t len = strlen(name);
    char cands[512] = "";
    size_t off = 0;
    int n = 0, vals[16];
    for (const struct option *lo = s_longopts(); lo->name && len; lo++) {
        if (strncmp(lo->name, name, len)) continue;
        int seen = 0;
        for (int j = 0; j < n && j < 16; j++) seen |= vals[j] == lo->val;
        if (seen) continue;
        if (n < 16) vals[n] = lo->val;
        n++;
        if (off < sizeof cands)
            off += (size_t)snprintf(cands + off, sizeof cands - off, "%s--%s", off ? ", " : "", lo->name);
    }
    if (n > 1) return err_set(ERR_INVAL, "--%s is ambiguous: %s", name, cands);
    const char *near = s_nearest(name);
    if (near) return err_set(ERR_INVAL, "unknown option '--%s'; did you mean --%s? (see harness --help)", name, near);
    return err_set(ERR_INVAL, "unknown option '--%s'; see harness --help", name);
}

static void s_usage_aliases(FILE *f)
{
    fprintf(f, "\nOther tools' spellings (torchrun, nccl-tests, mpirun):\n  ");
    for (size_t a = 0; a < S_NALIASES; a++) fprintf(f, "--%s = --%s%s", s_aliases[a].alias, s_aliases[a].name,
                                                    a % 3 == 2 || a + 1 == S_NALIASES ? "\n  " : ", ");
    for (size_t k = 0; k < S_NSHORTS; k++) fprintf(f, "-%c = --%s%s", s_shorts[k].c, s_shorts[k].name, k % 5 == 4 ? "\n  " : ", ");
    fprintf(f, "-np N = --procs N; -d also takes float|half|bfloat16\n");
}


/* The values of table entry d, space separated, into buf ("" when it has no list). */
static void s_values_of(const h_opt_t *d, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
#define S_ADD(v) (off < len ? off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? " " : "", (v)) : 0)
    if (d->off == F(model) && d->kind == K_STR) {
        S_ADD("mlp:784-1024-1024-10");
        for (size_t i = 0; workload_at(i); i++) S_ADD(workload_at(i));
    } else if (d->off == F(emu_device) && d->kind == K_STR) {
        for (size_t i = 0; wl_device_at(i); i++) S_ADD(wl_device_at(i));
        S_ADD("throughput=");
        S_ADD("tflops=");
    } else if (d->kind == K_FN && !strcmp(d->name, "engine")) {
        for (int i = 0; i < h_engine_count(); i++) S_ADD(h_engine_at(i)->name);
        for (int i = 0; i < h_peer_engine_count(); i++) S_ADD(h_peer_engine_at(i)->name);
        for (int i = 0; i < h_layout_count(); i++)
            if (!h_engine_find(h_layout_at(i)->label)) S_ADD(h_layout_at(i)->label); /* simulate's */
        S_ADD("all");
    } else if (d->kind == K_CHOICE) {
        char words[256];
        snprintf(words, sizeof words, "%s", d->arg);
        for (char *save = NULL, *t = strtok_r(words, "|", &save); t; t = strtok_r(NULL, "|", &save)) S_ADD(t);
    } else if (d->kind == K_FN && (d->off == F(dtype) || d->off == F(grad_dtype))) {
        for (int t = 0; t < DT_COUNT; t++) S_ADD(dt_name((dtype_t)t));
    } else if (d->kind == K_FN && d->off == F(op)) {
        for (int op = 0; strcmp(op_name((redop_t)op), "?"); op++) S_ADD(op_name((redop_t)op));
    }
#undef S_ADD
}

int h_opts_list_values(FILE *f, const char *opt)
{
    char vals[1024];
    int all = !strcmp(opt, "all");
    const char *name = opt + (opt[0] == '-' && opt[1] == '-' ? 2 : 0);
    for (size_t i = 0; i < S_NOPTS; i++) {
        const h_opt_t *d = &h_opt_table[i];
        if (d->kind == K_HELP) break; /* the driver's own options follow */
        if (!d->name || (!all && strcmp(d->name, name))) continue;
        s_values_of(d, vals, sizeof vals);
        if (!vals[0] && all) continue;
        if (!vals[0]) return err_set(ERR_INVAL, "--list-values %s: --%s takes no fixed list of values", opt, d->name);
        if (!all) {
            for (char *save = NULL, *t = strtok_r(vals, " ", &save); t; t = strtok_r(NULL, " ", &save)) fprintf(f, "%s\n", t);
            return 0;
        }
        fprintf(f, "--%s", d->name);
        for (size_t k = 0; k < S_NSHORTS; k++)
            if (!strcmp(s_shorts[k].name, d->name)) fprintf(f, "|-%c", s_shorts[k].c);
        for (size_t a = 0; a < S_NALIASES; a++)
            if (!strcmp(s_aliases[a].name, d->name)) fprintf(f, "|--%s", s_aliases[a].alias);
        fprintf(f, "\t%s\n", vals);
    }
    return all ? 0 : err_set(ERR_INVAL, "--list-values %s: no such option; see harness --help", opt);
}

static void s_defaults(h_opts_t *o, int argc, char **argv);

/* Whether option d concerns the mode in key (" MODE "): its own modes when it names them, else its
 * section's (sec). */
static int s_concerns(const h_opt_t *d, const char *sec, const char *key)
{
    const char *m = d->kind != K_SECTION && d->modes ? d->modes : sec;
    return m && strstr(m, key) != NULL;
}

void h_opts_usage_mode(FILE *f, const char *mode)
{
    char key[32];
    snprintf(key, sizeof key, " %s ", mode);
    h_opts_t o;
    s_defaults(&o, 0, NULL);
    fprintf(f, "usage: harness %s [options]   (every mode and option: harness --help)\n", mode);
    const char *sec = NULL;
    for (size_t i = 0; i < S_NOPTS; i++) {
        if (h_opt_table[i].kind == K_SECTION) sec = h_opt_table[i].modes;
        if (!s_concerns(&h_opt_table[i], sec, key)) continue;
        if (h_opt_table[i].help_fn) h_opt_table[i].help_fn(f);
        else if (h_opt_table[i].help) fputs(h_opt_table[i].help, f);
    }
    fprintf(f, "\nDefaults of `harness %s`%s:\n", mode, !strcmp(mode, "run") ? " (run: every engine, --procs 4)" : "");
    size_t col = 0;
    sec = NULL;
    for (size_t i = 0; i < S_NOPTS; i++) {
        if (h_opt_table[i].kind == K_SECTION) sec = h_opt_table[i].modes;
        if (h_opt_table[i].kind == K_HELP) break; /* the driver's own options follow */
        if (!s_concerns(&h_opt_table[i], sec, key) || !h_opt_table[i].name || h_opt_no_default(&h_opt_table[i])) continue;
        int same = 0; /* --tree-impl, --ring-impl: --impl's */
        for (size_t j = 0; j < i; j++) same |= h_opt_table[j].name && h_opt_table[j].off == h_opt_table[i].off && h_opt_table[j].kind == h_opt_table[i].kind;
        if (same) continue;
        char v[64], item[128];
        h_opt_default_of(&o, &h_opt_table[i], v, sizeof v);
        int n = snprintf(item, sizeof item, "--%s %s", h_opt_table[i].name, v);
        if (col && col + (size_t)n + 3 > 100) fputc('\n', f), col = 0;
        fprintf(f, "%s%s", col ? "   " : "  ", item);
        col += (size_t)n + 3;
    }
    fprintf(f, "\n(-: unset)\n");
    if (strstr(" train bench run ", key)) s_usage_aliases(f);
}

int h_opts_given(const h_opts_t *o, const char *name)
{
    int i = s_index_of(name);
    return i >= 0 && (size_t)i < 64 * sizeof o->given / sizeof o->given[0] && (o->given[i / 64] >> (i % 64) & 1);
}

int h_opts_check_mode(const h_opts_t *o)
{
    if (h_opts_given(o, "scaling") && h_opts_given(o, "procs"))
        return err_set(ERR_INVAL, "--scaling sets the world sizes: --procs would be ignored; give one of them "
                       "(e.g. --scaling 1,2,4 alone)");
    if (!strcmp(o->mode, "run") && h_opts_given(o, "scaling"))
        return err_set(ERR_INVAL, "run is one world of --procs ranks (default 4): --scaling is for bench or train");
    char key[32];
    snprintf(key, sizeof key, " %s ", o->mode);
    const char *sec = NULL;
    for (size_t i = 0; i < S_NOPTS; i++) {
        if (h_opt_table[i].kind == K_SECTION) sec = h_opt_table[i].modes;
        if (h_opt_table[i].kind == K_HELP) break;
        int unused = (h_opt_table[i].modes || sec) && !s_concerns(&h_opt_table[i], sec, key);
        /* model (the probe): one launch of the default engine, whatever --engine and --scaling say */
        if (!strcmp(o->mode, "model") && !workload_is_known(o->model) &&
            (!strcmp(h_opt_table[i].name ? h_opt_table[i].name : "", "engine") || !strcmp(h_opt_table[i].name ? h_opt_table[i].name : "", "scaling")))
            unused = 1;
        if (h_opt_table[i].off == F(model) && h_opt_table[i].kind == K_STR && workload_is_known(o->model) &&
            strstr(" train model bench run gemm ", key))
            unused = 0; /* the emulated cluster's model: bench on its machines too */
        if (unused && h_opt_table[i].name && h_opts_given(o, h_opt_table[i].name) && !o->quiet)
            fprintf(stderr, "harness: warning: --%s does nothing in %s mode (ignored); see harness %s --help\n",
                    h_opt_table[i].name, o->mode, o->mode);
    }
    return 0;
}

/* whether v is one of the '|'-separated words of choices */
static int h_opt_is_choice(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; p; p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL)
        if (!strncmp(p, v, n) && (p[n] == '|' || p[n] == '\0')) return 1;
    return 0;
}

/* Apply table entry d to its value v (NULL for flags). */
static int s_apply(h_opts_t *o, const h_opt_t *d, const char *v)
{
    size_t i = (size_t)(d - h_opt_table);
    if (i < 64 * sizeof o->given / sizeof o->given[0]) o->given[i / 64] |= 1ull << (i % 64);
    char *at = (char *)o + d->off;
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", d->name);
    switch (d->kind) {
    case K_FLAG: *(int *)at = 1; return 0;
    case K_STR: *(const char **)at = v; return 0;
    case K_INT: return h_opt_parse_int(v, d->lo, d->hi, (int *)at) ? h_opt_bad(flag, v, d->want) : 0;
    case K_CHOICE:
        if (!h_opt_is_choice(d->arg, v)) return h_opt_bad(flag, v, d->want);
        *(const char **)at = v;
        return 0;
    case K_FN: return d->fn(o, d, v);
    case K_HELP: *(strcmp(d->name, "version") ? &o->help : &o->version) = 1; return 0;
    default: return 0;
    }
}

static void s_defaults(h_opts_t *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->mode = "train";
    o->engines[0] = h_engine_at(0)->name;
    o->nengines = 1;
    o->timeout_s = 60;
    o->size_min = 4096;
    o->size_max = 64u << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->dtype = DT_F32;
    o->op = OP_SUM;
    o->check = 1;
    o->average = 3;
    o->model = "mlp:784-1024-1024-10";
    o->data = "synthetic";
    o->batch = 256;
    o->lat_us = -1;
    o->sim_groups = -1;
    o->sim_streams = -1;
    o->sim_join = 0; /* joined streams failed their check (results/sim-reduction-join) */
    o->sim_bundles = -1; /* auto: past 200 k communications a run (results/sim-reduction-bundles) */
    o->server_rate = -1;
    o->steps = 50;
    o->warmup_steps = 5;
    o->optim = "sgd";
    o->grad_dtype = DT_F32;
    o->bucket_mb = 25;
    o->check_every = 100;
    o->seed = 42;
    o->dilate = 1;
    o->bind = "auto";
    o->transport = "auto";
    o->argc = argc;
    o->argv = argv;
}

/* The emulated cluster's options go together (a real --model; --nodes instead of --procs or --gpus);
 * fills the nodes / gpus_per_node defaults. 0 or ERR_INVAL (err_detail says why). */
static int h_opts_check_cluster(h_opts_t *o)
{
    if (o->mode && !strcmp(o->mode, "simulate")) { /* machines of simulated GPUs: no model, no ranks */
        if (o->procs || o->gpus) return err_set(ERR_INVAL, "simulate places GPUs with --nodes N --gpus-per-node G, not --procs or --gpus");
        if (h_opts_given(o, "model") && !workload_is_known(o->model))
            return err_set(ERR_INVAL, "simulate --model: a real model's profile (%s, or a .tsv profile)", workload_names());
        if (!o->nodes) o->nodes = 1;
        if (!o->gpus_per_node) o->gpus_per_node = 1;
        return 0;
    }
    if (o->mode && !strcmp(o->mode, "explain")) { /* --procs workers, --gpus-per-node G a machine: no model, no NICs */
        if (o->nodes || o->server_nodes)
            return err_set(ERR_INVAL, "explain places its --procs workers on machines of --gpus-per-node G (not --nodes "
                                      "or --server-nodes)");
        return 0;
    }
    int emulated = workload_is_known(o->model);
    /* bench places its ranks on machines too (a collective's cost with G ranks behind each NIC) */
    int bench_machines = !emulated && o->mode && !strcmp(o->mode, "bench") && o->net && !o->emu_device && !o->shrink &&
                         o->dilate == 1;
    if (bench_machines && (o->nodes || o->gpus_per_node || o->server_nodes)) {
        if (o->gpus || o->procs) return err_set(ERR_INVAL, "--nodes N --gpus-per-node G place the bench's ranks: not with --procs or --gpus");
        if (o->server_nodes && !o->nodes) return err_set(ERR_INVAL, "--server-nodes needs --nodes");
        if (!o->nodes) o->nodes = 1;
        if (!o->gpus_per_node) o->gpus_per_node = 1;
        return 0;
    }
    if (!emulated && (o->emu_device || o->nodes || o->gpus_per_node || o->server_nodes || o->shrink || o->dilate != 1))
        return err_set(ERR_INVAL, "--device, --nodes, --gpus-per-node, --server-nodes, --shrink and --dilate emulate a "
                       "real model: give --model %s", workload_names());
    if (!emulated) return 0;
    if (o->gpus) return err_set(ERR_INVAL, "--model %s is emulated: it runs on CPU ranks (--nodes/--procs), not --gpus", o->model);
    if (o->nodes && o->procs)
        return err_set(ERR_INVAL, "--nodes N --gpus-per-node G and --procs are exclusive (world = N x G)");
    if (o->server_nodes && !o->nodes) return err_set(ERR_INVAL, "--server-nodes needs --nodes");
    if (o->gpus_per_node && !o->nodes) o->nodes = 1;
    if (o->nodes && !o->gpus_per_node) o->gpus_per_node = 1;
    if (o->net && !o->nodes && !o->procs) return err_set(ERR_INVAL, "--net with an emulated model needs --nodes N --gpus-per-node G");
    return 0;
}


/* nccl-tests' GPU count: -np N processes of -t T threads of -g G GPUs each is N x T x G GPUs, here as many
 * ranks, one a GPU (--gpus). Bench only, decided on the user's mode (a rank of `harness run` is told
 * --mode bench: it must read -g as its parent did, which warned that it does nothing). */
static int s_nccl_gpus(h_opts_t *o, int argc, char **argv)
{
    if (!o->ngpus && !o->nthreads) return 0;
    if (argc < 2 || strcmp(argv[1], "bench")) return 0;
    if (h_opts_given(o, "gpus"))
        return err_set(ERR_INVAL, "-g/-t count the GPUs as nccl-tests does and --gpus N counts them itself: give one");
    long n = (long)(o->procs ? o->procs : 1) * (o->nthreads ? o->nthreads : 1) * (o->ngpus ? o->ngpus : 1);
    if (n > 1024) return err_set(ERR_INVAL, "-np x -t x -g makes %ld GPUs: at most 1024", n);
    o->gpus = (int)n;
    o->procs = 0;
    return 0;
}

/* The fewest workers a train run of these options has: the smallest world of --scaling, N x G machines' GPUs,
 * --gpus x K, --procs (x --nnodes), run's 4, or a world of one with no rank environment; 0 when the world
 * comes from a torchrun-style environment (the rank checks it there). */
static int s_min_workers(const h_opts_t *o)
{
    if (o->nscaling) {
        int m = o->scaling[0];
        for (int i = 1; i < o->nscaling; i++) m = o->scaling[i] < m ? o->scaling[i] : m;
        return o->nodes ? m * (o->gpus_per_node ? o->gpus_per_node : 1) : m;
    }
    if (o->nodes) return o->nodes * (o->gpus_per_node ? o->gpus_per_node : 1);
    if (o->gpus) return o->gpus * (o->ranks_per_gpu > 1 ? o->ranks_per_gpu : 1);
    if (o->procs) return o->procs * (o->nnodes > 1 ? o->nnodes : 1);
    if (!strcmp(o->mode, "run")) return 4;
    if (!o->init_method && !getenv("RANK") && !getenv("WORLD_SIZE") && !getenv("SLURM_PROCID") &&
        !getenv("OMPI_COMM_WORLD_RANK"))
        return 1;
    return 0;
}

/* train's global batch (--batch, or the trainer's default when neither it nor --batch-per-gpu is given and the
 * model is not an emulated one, which takes a batch a GPU) split evenly over the workers of every world of the
 * run, found before launch (every rank failed with it) with the way out: --batch-per-gpu, or a multiple. */
static int s_check_batch(const h_opts_t *o)
{
    if (strcmp(o->mode, "train") && strcmp(o->mode, "run")) return 0;
    int given = h_opts_given(o, "batch");
    if (!given && (o->batch_per_gpu > 0 || workload_is_known(o->model))) return 0;
    long b = given ? o->batch : TRAINER_DEFAULT_BATCH;
    int worlds[H_MAX_SCALING + 1], nw = 0;
    for (int i = 0; i < o->nscaling; i++) worlds[nw++] = o->scaling[i] * (o->nodes && o->gpus_per_node ? o->gpus_per_node : 1);
    if (!nw && (worlds[0] = s_min_workers(o)) > 0) nw = 1; /* 0: a torchrun-style world, the rank checks it */
    for (int i = 0; i < nw; i++) {
        int w = worlds[i];
        if (w < 1 || b % w == 0) continue;
        long lo = b / w * w, hi = lo + w;
        char near[64];
        if (lo > 0) snprintf(near, sizeof near, "%ld or %ld", lo, hi);
        else snprintf(near, sizeof near, "%ld", hi);
        return err_set(ERR_INVAL, "the global batch %ld (%s) is not a multiple of the %d workers%s: give each worker's "
                       "batch, --batch-per-gpu B (torchrun's and Horovod's way), or a --batch that %d divides (%s)", b,
                       given ? "--batch" : "the default", w, o->nscaling ? " of a --scaling world" : "", w, near);
    }
    return 0;
}

/* The values the ranks would otherwise refuse only once launched (each rank, with a source location):
 * --model, --optim and --straggler, checked here, before any launch. */
static int s_check_values(const h_opts_t *o)
{
    if (o->model && !workload_is_known(o->model)) {
        mlp_shape_t shape;
        int mlp_like = !strncmp(o->model, "mlp:", 4) || (o->model[0] >= '0' && o->model[0] <= '9');
        if (!mlp_like)
            return err_set(ERR_INVAL, "--model %s: unknown model; the named models are %s (emulated), or a profile "
                           "FILE.tsv, or an MLP mlp:W0-W1-...-Wn (default mlp:784-1024-1024-10)", o->model,
                           workload_names());
        if (mlp_parse(o->model, &shape) < 0)
            return err_set(ERR_INVAL, "--model %s: an MLP is mlp:W0-W1-...-Wn, at least two widths in [1, 1048576] "
                           "(named models: %s)", o->model, workload_names());
    } else if (o->model && strlen(o->model) > 4 && !strcmp(o->model + strlen(o->model) - 4, ".tsv")) {
        workload_t *wl = NULL; /* a profile file: read now, not by every rank after the launch */
        if (workload_load(&wl, o->model) < 0) {
            char why[512];
            snprintf(why, sizeof why, "%s", err_detail());
            err_clear();
            return err_set(ERR_INVAL, "--model %s: %s", o->model, why);
        }
        workload_destroy(&wl);
    }
    if (o->emu_device && workload_is_known(o->model)) {
        workload_t *wl = NULL; /* a preset, throughput=X or tflops=X: resolved on the model, as the ranks will */
        wl_device_t dev;
        int rc = workload_load(&wl, o->model);
        if (rc == 0) rc = wl_device_resolve(o->emu_device, wl, &dev);
        workload_destroy(&wl);
        if (rc < 0) return ERR_INVAL; /* its detail names --device and the presets */
    }
    if (o->optim) {
        optim_cfg_t oc;
        if (optim_parse(o->optim, &oc) < 0) {
            char why[512];
            const char *d = err_detail();
            snprintf(why, sizeof why, "%s", !strncmp(d, "optimizer: ", 11) ? d + 11 : d);
            err_clear();
            return err_set(ERR_INVAL, "--optim %s: %s; e.g. sgd:lr=0.05,momentum=0.9 or adam:lr=1e-3", o->optim, why);
        }
    }
    CHECK(s_check_batch(o));
    if (o->straggler && *o->straggler) {
        char *end;
        long r = strtol(o->straggler, &end, 10);
        int ok = end != o->straggler && *end == ':' && r >= 0 && r <= 1 << 30;
        const char *ms = ok ? end + 1 : "";
        double v = ok ? strtod(ms, &end) : -1;
        if (!ok || end == ms || *end || !(v >= 0) || !isfinite(v))
            return err_set(ERR_INVAL, "--straggler %s: expected RANK:MS (worker RANK >= 0 sleeps MS >= 0 milliseconds "
                           "every step, e.g. 1:30)", o->straggler);
        int w = !strcmp(o->mode, "train") || !strcmp(o->mode, "run") ? s_min_workers(o) : 0;
        if (w > 0 && r >= w)
            return err_set(ERR_INVAL, "--straggler %s: rank %ld is not a worker of %s (workers 0..%d)", o->straggler, r,
                           o->nscaling ? "the smallest world of --scaling" : "this run", w - 1);
    }
    return 0;
}

/* After the options: positional arguments and the checks across options. */
static int s_finish(h_opts_t *o, int argc, char **argv, int next)
{
    if (next < argc) {
        o->pos = argv + next;
        o->npos = argc - next;
        if (strcmp(o->mode, "report") && strcmp(o->mode, "model") && !(!strcmp(o->mode, "simulate") && o->sim_emulated))
            return err_set(ERR_INVAL, "unexpected argument '%s'; see harness --help", argv[next]);
        /* model fit BENCH... / model check CALIBRATION RUN...: the action first, then the files */
        int first = 0;
        if (!strcmp(o->mode, "model") && (!strcmp(o->pos[0], "fit") || !strcmp(o->pos[0], "check")))
            o->model_action = o->pos[first++];
        /* results files; --measured files come after them */
        for (int i = first; i < o->npos && o->nmeasured < H_MAX_FILES; i++) o->measured[o->nmeasured++] = o->pos[i];
    }
    if (o->master_addr || o->master_port) {
        static char master[300];
        int port;
        if (o->master) return err_set(ERR_INVAL, "--master HOST:PORT and --master-addr/--master-port are two spellings: give one");
        if (!o->master_addr) return err_set(ERR_INVAL, "--master-port needs --master-addr (the address of node 0)");
        if (o->master_port && h_opt_parse_int(o->master_port, 1, 65535, &port))
            return h_opt_bad("--master-port", o->master_port, "a port in [1, 65535]");
        snprintf(master, sizeof master, "%s:%s", o->master_addr, o->master_port ? o->master_port : "29500");
        o->master = master;
    }
    /* --steps counts every optimizer step a run takes, its untimed warm-up included, so that a run of S
     * steps saved and resumed for S more equals one of 2 S. The default warm-up (5) leaves one timed step of
     * a short run; a warm-up given on the command line must leave one. */
    if (o->warmup_steps >= o->steps) {
        if (h_opts_given(o, "warmup-steps"))
            return err_set(ERR_INVAL, "--warmup-steps %d leaves no timed step of --steps %d (--steps counts every "
                           "optimizer step, the warm-up included)", o->warmup_steps, o->steps);
        o->warmup_steps = o->steps - 1;
    }
    CHECK(s_nccl_gpus(o, argc, argv));
    if (h_opts_given(o, "batch") && h_opts_given(o, "batch-per-gpu"))
        return err_set(ERR_INVAL, "--batch B is the global batch and --batch-per-gpu B each worker's: give one");
    if (o->size_min > o->size_max)
        return err_set(ERR_INVAL, "the smallest size (%zu bytes, --sizes or -b) is above the largest (%zu, -e)", o->size_min,
                       o->size_max);
    if (o->ranks_per_gpu && !o->gpus) return err_set(ERR_INVAL, "--ranks-per-gpu needs --gpus N");
    if (o->gpus && o->procs)
        return err_set(ERR_INVAL, "--gpus and --procs are exclusive (one rank per GPU, or N CPU ranks)");
    if ((o->nnodes > 1 || o->node_rank) && !o->master)
        return err_set(ERR_INVAL, "--nnodes needs --master HOST:PORT (the address of node 0)");
    if (o->nnodes && o->node_rank >= o->nnodes)
        return err_set(ERR_INVAL, "--node-rank %d must be < --nnodes %d", o->node_rank, o->nnodes);
    for (int i = 0; i < o->nengines && (!o->mode || strcmp(o->mode, "simulate")); i++)
        if (!h_engine_find(o->engines[i]))
            return err_set(ERR_INVAL, "--engine %s: a layout's label is simulate's; give the engine and its options (%s)",
                           o->engines[i], h_engine_names());
    if (o->engine_all && (!o->mode || strcmp(o->mode, "simulate")))
        return err_set(ERR_INVAL, "--engine all is simulate's (every layout side by side); give engines by name (%s)",
                       h_engine_names());
    CHECK(h_opts_check_cluster(o));
    CHECK(s_check_values(o));
    return h_engine_opts_check(o->eopts) < 0 ? ERR_INVAL : 0; /* the engine's detail stays */
}

int h_opts_parse(h_opts_t *o, int argc, char **argv)
{
    s_defaults(o, argc, argv);
    if (h_engine_opts_init(o->eopts) < 0) return err_set(ERR_NOMEM, "out of memory");
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
    if (!h_opt_known_mode(o->mode))
        return err_set(ERR_INVAL, "unknown mode '%s' (train, bench, run, selftest, report, model, gemm, explain, simulate); see harness --help",
                       o->mode);
    /* mpirun's -np N: --procs N */
    for (int i = first; i < o->argc; i++)
        if (!strcmp(argv[i], "-np")) argv[i] = "--procs";
    optind = first;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, S_SHORTOPTS, s_longopts(), NULL)) != -1) {
        const char *v = optarg;
        for (size_t k = 0; k < S_NSHORTS; k++)
            if (c == s_shorts[k].c) c = 256 + s_index_of(s_shorts[k].name);
        if (c >= 256 && c < 256 + (int)S_NOPTS) {
            int rc = s_apply(o, &h_opt_table[c - 256], v);
            if (rc < 0 || o->help || o->version) return rc;
        } else if (c >= S_ENGOPT && h_engine_opt(c - S_ENGOPT, NULL)) {
            const engine_opt_t *eo = h_engine_opt(c - S_ENGOPT, NULL);
            char flag[64];
            snprintf(flag, sizeof flag, "--%s", eo->name);
            if (h_engine_opt_set(o->eopts, c - S_ENGOPT, v) < 0) return h_opt_bad(flag, v ? v : "", eo->want ? eo->want : "a valid value");
            if (c - S_ENGOPT < H_MAX_ENGOPTS) o->eopt_given[c - S_ENGOPT] = v ? v : "on"; /* for the ranks' agreement */
        } else if (c == ':') {
            if (optopt && optopt < 256) return err_set(ERR_INVAL, "-%c needs a value", optopt);
            return err_set(ERR_INVAL, "%s needs a value", argv[optind - 1]);
        } else if (optopt) {
            /* a short option: getopt is inside argv[optind] (or just past it) */
            return err_set(ERR_INVAL, "unknown option '-%c'%s; see harness --help", optopt,
                           optopt == 'p' ? " (mpirun's -np N is understood alone: -np 4)" : "");
        } else {
            return s_bad_long(argv[optind - 1]);
        }
    }
    return s_finish(o, argc, argv, optind);
}
