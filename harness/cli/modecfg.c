/* modecfg.c: each mode's configuration from the parsed command line (modecfg.h); field for field, no
 * defaults of its own (those are the option table's, cli/opts_table.c, or the mode's). */
#include "harness/cli/modecfg.h"
#include "trainer/workload.h"
#include <string.h>

void h_out_of(const h_opts_t *o, h_out_t *out)
{
    *out = (h_out_t){.json = o->json, .label = o->label, .net = o->net, .argc = o->argc, .argv = o->argv};
}

void h_engset_of(const h_opts_t *o, h_engset_t *es)
{
    memset(es, 0, sizeof *es);
    memcpy(es->eopts, o->eopts, sizeof es->eopts);
    es->impl = o->impl;
    es->timeout_s = o->timeout_s;
    es->seg_bytes = o->seg_bytes;
    es->gpus = o->gpus;
    es->device = o->device;
    es->shrink = o->shrink;
}

void h_emu_cfg_of(const h_opts_t *o, h_emu_cfg_t *c)
{
    *c = (h_emu_cfg_t){.nodes = o->nodes, .gpus_per_node = o->gpus_per_node, .server_nodes = o->server_nodes,
                       .shrink = o->shrink, .dilate = o->dilate, .net = o->net};
}

static void s_engines(const h_opts_t *o, const char **engines, int *n)
{
    memcpy(engines, o->engines, sizeof o->engines);
    *n = o->nengines;
}

void h_bench_cfg_of(const h_opts_t *o, h_bench_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    s_engines(o, c->engines, &c->nengines);
    c->size_min = o->size_min;
    c->size_max = o->size_max;
    c->factor = o->factor;
    c->iters = o->iters;
    c->warmup = o->warmup;
    c->dtype = o->dtype;
    c->op = o->op;
    c->check = o->check;
    c->in_place = o->in_place;
    c->time_ranks = o->average;
    c->timeout_s = o->timeout_s;
    c->quiet = o->quiet;
    c->net = o->net;
    h_emu_cfg_of(o, &c->emu);
    h_engset_of(o, &c->es);
    h_out_of(o, &c->out);
}

void h_train_cfg_of(const h_opts_t *o, h_train_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    s_engines(o, c->engines, &c->nengines);
    c->model = o->model;
    c->data = o->data;
    c->batch = h_opts_given(o, "batch") ? o->batch : 0;
    c->batch_per_gpu = o->batch_per_gpu;
    c->steps = o->steps;
    c->warmup_steps = o->warmup_steps;
    c->optim = o->optim;
    c->grad_dtype = o->grad_dtype;
    c->bucket_mb = o->bucket_mb;
    c->no_overlap = o->no_overlap;
    c->check_every = o->check_every;
    c->save = o->save;
    c->eopt_given = o->eopt_given;
    c->resume = o->resume;
    c->drop_last = o->drop_last;
    c->seed = o->seed;
    c->straggler = o->straggler;
    c->emu_device = o->emu_device;
    c->shrink = o->shrink;
    c->dilate = o->dilate;
    c->gpus = o->gpus;
    c->tf32 = o->tf32;
    c->timeout_s = o->timeout_s;
    c->quiet = o->quiet;
    h_emu_cfg_of(o, &c->emu);
    h_engset_of(o, &c->es);
    h_out_of(o, &c->out);
}

void h_run_cfg_of(const h_opts_t *o, h_run_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    s_engines(o, c->engines, &c->nengines);
    c->procs = o->procs;
    h_engset_of(o, &c->es);
}

void h_explain_cfg_of(const h_opts_t *o, h_explain_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    c->engine = o->nengines ? o->engines[0] : NULL;
    c->procs = o->procs;
    c->bytes = o->size_max;
    c->dtype = o->dtype;
    c->plots_dir = o->plots_dir;
    c->gpus_per_node = o->gpus_per_node;
    h_engset_of(o, &c->es);
}

void h_gemm_cfg_of(const h_opts_t *o, h_gemm_cfg_t *c)
{
    *c = (h_gemm_cfg_t){.model = o->model, .batch = o->batch, .procs = o->procs, .gpus = o->gpus,
                        .iters = o->iters, .warmup = o->warmup};
    h_out_of(o, &c->out);
}

void h_model_cfg_of(const h_opts_t *o, h_model_cfg_t *c)
{
    *c = (h_model_cfg_t){.timeout_s = o->timeout_s, .net = o->net, .nfiles = o->nmeasured, .files = (char **)o->measured};
    h_out_of(o, &c->out);
}

void h_model_cluster_cfg_of(const h_opts_t *o, h_model_cluster_cfg_t *c)
{
    *c = (h_model_cluster_cfg_t){.model = o->model, .emu_device = o->emu_device, .nodes = o->nodes,
                                 .gpus_per_node = o->gpus_per_node, .batch = h_opts_given(o, "batch") ? o->batch : 0,
                                 .batch_per_gpu = o->batch_per_gpu, .bucket_mb = o->bucket_mb,
                                 .no_overlap = o->no_overlap, .straggler = o->straggler, .grad_dtype = o->grad_dtype,
                                 .net = o->net,
                                 .nfiles = o->nmeasured, .files = (char **)o->measured, .no_check = o->no_check};
    h_out_of(o, &c->out);
}

void h_model_fc_cfg_of(const h_opts_t *o, h_model_fc_cfg_t *c)
{
    int check = o->model_action && !strcmp(o->model_action, "check");
    *c = (h_model_fc_cfg_t){.action = o->model_action, .net = o->net,
                            .calibration = check && o->nmeasured > 0 ? o->measured[0] : NULL,
                            .nfiles = check ? (o->nmeasured > 0 ? o->nmeasured - 1 : 0) : o->nmeasured,
                            .files = (char **)(check && o->nmeasured > 0 ? o->measured + 1 : o->measured)};
    h_out_of(o, &c->out);
}

void h_timeline_cfg_of(const h_opts_t *o, h_timeline_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    c->path = o->timeline;
    c->tag = o->timeline_tag;
    c->mode = o->mode;
    c->engine = o->nengines > 0 ? o->engines[0] : NULL;
    c->quiet = o->quiet;
    c->timeout_s = o->timeout_s;
    h_engset_of(o, &c->es);
}

void h_simulate_cfg_of(const h_opts_t *o, h_simulate_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    s_engines(o, c->engines, &c->nengines);
    c->nodes = o->nodes;
    c->gpus_per_node = o->gpus_per_node;
    c->server_nodes = o->server_nodes;
    c->net = o->net;
    c->lat_us = o->lat_us;
    c->intra_bps = o->intra_bps;
    c->server_rate = o->server_rate;
    c->server_cores = o->server_cores;
    c->fabric = o->fabric;
    c->size_min = o->size_min;
    c->size_max = o->size_max;
    c->factor = o->factor;
    c->esz = dt_size(o->dtype);
    /* a simulation of 1,024 GPUs runs for minutes: --timeout bounds it when given, else 30 minutes */
    c->timeout_s = h_opts_given(o, "timeout") ? o->timeout_s : 1800;
    c->engine_all = o->engine_all;
    c->model = o->model && workload_is_known(o->model) && h_opts_given(o, "model") ? o->model : NULL;
    c->device = o->emu_device;
    c->batch_per_gpu = o->batch_per_gpu;
    c->bucket_mb = o->bucket_mb;
    c->no_overlap = o->no_overlap;
    c->steps = h_opts_given(o, "steps") ? o->steps : 3;
    c->seed = o->seed;
    c->spread = o->spread;
    c->max_groups = o->sim_groups;
    c->min_stream = o->sim_streams;
    c->fan_bundle = o->sim_bundles;
    c->join = o->sim_join;
    c->nscaling = o->nscaling < H_SIM_MAX_SCALE ? o->nscaling : H_SIM_MAX_SCALE;
    memcpy(c->scaling, o->scaling, (size_t)c->nscaling * sizeof c->scaling[0]);
    c->emulated = o->sim_emulated;
    c->check_from = o->sim_check_from;
    c->nfiles = o->nmeasured;
    c->files = (char **)o->measured;
    h_engset_of(o, &c->es);
    h_out_of(o, &c->out);
}
