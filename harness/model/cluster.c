/* cluster.c (harness/model): `harness model` for emulated real models (harness/model/cluster.h).
 *
 * What the model knows: the device's step time split over layers by FLOPs (the emulator's own
 * schedule, wl_schedule), the buckets (wl_buckets: DDP's rule with the run's cap), the device's
 * optimizer update (wl_update_s) where the engine leaves it to the worker, and the NIC: beta = the
 * wire time of a payload byte, 1/(rate x eff) x 1514/1448 (a 1500-byte MTU frame as the shaper counts
 * it carries 1448 bytes of TCP payload), and alpha, a message in series on the critical path. Every
 * constant (alpha and the PS's slowdowns) comes from a calibration fitted on bench lines alone
 * (calib.c); nothing is fitted to the training runs it is checked against (the check is cluster_check.c). */
#include "harness/model/cluster_int.h"
#include "core/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void h_mc_point_free(s_point_t *p)
{
    workload_destroy(&p->wl);
    free(p->ready);
    free(p->bytes);
    memset(p, 0, sizeof *p);
}

/* The buckets and ready times of the model at one device and batch (unshrunk bytes, undilated). */
int h_mc_point(s_point_t *p, const char *model, const char *device, double device_sps, size_t local_batch,
               double bucket_mb, int no_overlap)
{
    memset(p, 0, sizeof *p);
    p->straggler_rank = -1;
    CHECK(workload_load(&p->wl, model));
    CHECK(wl_device_resolve(device ? device : WL_DEVICE_DEFAULT, p->wl, &p->dev));
    if (device_sps > 0) p->dev.samples_per_s = device_sps; /* the run's own device, whatever the preset says now */
    p->local_batch = local_batch;
    p->bucket_mb = bucket_mb > 0 ? bucket_mb : 25;
    p->no_overlap = no_overlap;
    size_t n = p->wl->ntensors, *ends = calloc(n, sizeof *ends);
    double *tr = calloc(n, sizeof *tr);
    p->ready = calloc(n, sizeof *p->ready);
    p->bytes = calloc(n, sizeof *p->bytes);
    if (!ends || !tr || !p->ready || !p->bytes) { free(ends); free(tr); return err_set(ERR_NOMEM, "model"); }
    size_t cap = (size_t)(p->bucket_mb * 1048576.0), first = cap < (1u << 20) ? cap : (1u << 20);
    p->nb = wl_buckets(p->wl, 1, first, cap, ends);
    double fwd, total;
    wl_schedule(p->wl, &p->dev, local_batch, 1, &fwd, tr, &total);
    size_t begin = 0;
    for (int b = 0; b < p->nb; b++) {
        double sz = 0;
        for (size_t i = begin; i < ends[b]; i++) sz += (double)p->wl->t[i].numel * 4;
        p->bytes[b] = sz;
        p->ready[b] = no_overlap ? total : tr[ends[b] - 1];
        begin = ends[b];
    }
    free(ends);
    free(tr);
    optim_cfg_t oc;
    optim_cfg_default(&oc, OPT_SGD);
    oc.momentum = 0.9f;
    p->update_s = wl_update_s(&p->dev, p->wl->params, 20, 1);
    return 0;
}

/* Predicted step (s) of configuration c on N machines of G GPUs from the calibration (NULL: nothing measured,
 * the law with c = 0): alpha for every message in series; with owners (a PS), the owners' machines' slowdown
 * where the calibration measured it on these machines (servers on the GPU machines: the layout's own, by its
 * label; servers on machines of their own: a + c (K - 1) on these machines, measured with every worker
 * pushing, so for configurations whose every worker pushes: not with machine-local aggregation), else the
 * incast law for the remote ranks pushing into them. The update runs on the workers unless owners run it. */
double h_mc_step(const s_point_t *p, const h_cal_t *cal, const h_mc_conf_t *c, int N, int G, double bps, double *exposed)
{
    h_cl_net_t net = {.nodes = N, .gpus_per_node = G, .beta = S_WIRE * 8.0 / bps, .alpha = h_cal_alpha(cal)};
    h_cl_engine_t e;
    if (h_mc_traffic(c, N, G, &e, NULL) < 0) return NAN;
    double pw = e.part_bytes * net.beta; /* the partition's wire time (unshrunk bytes at the nominal rate) */
    e.pipelined = p->ps_pipelined;
    e.incast = h_cal_incast(cal, pw, &e.incast_fmax);
    if (e.owners)
        e.slow = e.own_machines ? (e.fan_in == N * G ? h_cal_servers_slow(cal, N, G, h_mc_conf_server_nodes(c, N), pw) : 0)
                                : h_cal_layout_slow(cal, c->label, N, G, pw);
    /* the slowest GPU's compute: a synchronous step waits for it, every bucket ready when that GPU's is */
    double lag = p->straggler_rank >= 0 && p->straggler_rank < N * G ? p->straggler_s : 0;
    double total = (double)p->local_batch / p->dev.samples_per_s + lag, *ready = p->ready;
    if (lag > 0 && N * G > 1) {
        if (!(ready = malloc((size_t)(p->nb > 0 ? p->nb : 1) * sizeof *ready))) return NAN;
        for (int b = 0; b < p->nb; b++) ready[b] = p->ready[b] + lag;
    }
    double step = N * G > 1 ? h_cl_step(&net, &e, p->nb, ready, p->bytes, total, exposed) : total;
    if (ready != p->ready) free(ready);
    if (!e.owners || N * G == 1) step += p->update_s;
    return step;
}


int h_mc_straggler(const char *spec, int *rank, double *sec)
{
    *rank = -1, *sec = 0;
    if (!spec || !*spec) return 0;
    char *end;
    long r = strtol(spec, &end, 10);
    if (end == spec || *end != ':' || r < 0 || r > 1 << 30) return -1;
    const char *v = end + 1;
    double ms = strtod(v, &end);
    if (end == v || *end || !(ms >= 0)) return -1;
    *rank = (int)r, *sec = ms / 1e3;
    return 0;
}

/* The TCP congestion control the model's NIC runs: --net's cc=, else the emulation's default. */
const char *h_mc_model_cc(const h_model_cluster_cfg_t *o, char *buf, size_t len)
{
    h_netem_spec_t spec;
    char err[256];
    snprintf(buf, len, "%s", o->net && h_netem_parse(o->net, &spec, err, sizeof err) == 0 ? h_netem_spec_cc(&spec)
                                                                                         : H_NETEM_CC_DEFAULT);
    return buf;
}

/* Whether a result line's emulated machines ran congestion control cc: its versions say "tcp NAME" (the
 * rank's namespace's); a line that does not say is taken to have run the default. TCP's congestion
 * control sets how flows share a NIC (emulation-cc), so lines of another are not the model's points. */
int h_mc_line_cc_is(const h_jobj_t *r, const char *cc)
{
    const char *v = h_jstr(r, "versions", ""), *t = strstr(v, "tcp ");
    if (!t) return !strcmp(cc, H_NETEM_CC_DEFAULT);
    t += 4;
    size_t n = strcspn(t, ", ");
    return n == strlen(cc) && !strncmp(t, cc, n);
}

static int s_link(const h_model_cluster_cfg_t *o, double *bps, double *eff)
{
    *bps = 25e9;
    *eff = 1;
    if (!o->net) return 0;
    h_netem_spec_t spec;
    char err[256];
    if (h_netem_parse(o->net, &spec, err, sizeof err) < 0) return err_set(ERR_INVAL, "%s", err);
    *bps = spec.bits_per_s * spec.eff;
    *eff = spec.eff;
    return 0;
}

/* The answer for the cluster asked (--nodes N --gpus-per-node G): the best allreduce against the best
 * PS layout at N x G GPUs, the layouts named once. The cost model's answer, with its limits above. */
static void s_verdict(const h_model_cluster_cfg_t *o, const s_point_t *p, const h_cal_t *t, int G, double bps)
{
    int N = o->nodes > 0 ? o->nodes : 1, P = N * G, n = h_layout_count();
    h_verdict_row_t rows[32];
    h_mc_conf_t cs[32], c;
    int nr = 0, nps = 0;
    for (int l = 0; nr < 32 && h_mc_conf_at(l, &cs[nr]) == 0; l++) {
        h_cl_engine_t e;
        if (h_mc_traffic(&cs[nr], N, G, &e, NULL) < 0) continue;
        double step = h_mc_step(p, t, &cs[nr], N, G, bps, NULL);
        double s = step > 0 ? (double)P * (double)p->local_batch / step / p->dev.samples_per_s : 0;
        rows[nr] = (h_verdict_row_t){.label = cs[nr].label, .ps = e.owners != 0, .speedup = s};
        nps += e.owners != 0, nr++;
    }
    if (!nps || nps == nr) return;
    printf("# PS layouts (the registry's, with servers):");
    for (int l = 0, k = 0; l < n && h_mc_conf_at(l, &c) == 0; l++) {
        h_cl_engine_t e;
        if (h_mc_traffic(&c, N, G, &e, NULL) == 0 && e.owners)
            printf("%s\n#   %-22s %s", k++ ? "" : "", c.label, c.layout->about);
    }
    printf("\n");
    char net[32];
    snprintf(net, sizeof net, "%.4g Gbit/s", bps / 1e9);
    h_verdict_print("the cost model's, within its limits above", p->wl->name, N, G, net, rows, nr);
}

/* Beside the model's table, the simulator's figures for the same model, device, batch, machines of G and
 * NIC rate where the files hold `harness simulate --model` lines (they are read, not run: the simulator is
 * a room above this one): speedups over one device with latency, link sharing and stragglers simulated. */
static void s_sim_beside(const h_model_cluster_cfg_t *o, const s_point_t *p, int G, double line_bps)
{
    h_jobj_t *objs = NULL;
    size_t n = 0, nbad = 0;
    if (!o->nfiles || h_jread_files(o->nfiles, o->files, &objs, &n, &nbad, NULL) < 0) return;
    int gp[32], ng = 0;
    char labels[16][48];
    int nl = 0;
    for (size_t i = 0; i < n; i++) {
        const h_jobj_t *r = &objs[i];
        if (strcmp(h_jstr(r, "mode", ""), "simulate") || strcmp(h_jstr(r, "kind", ""), "train") ||
            strcmp(h_jstr(r, "model", ""), p->wl->name) || strcmp(h_jstr(r, "device", ""), p->dev.name) ||
            (int)h_jnum(r, "gpus_per_node", 0) != G || (size_t)h_jnum(r, "batch_per_gpu", 0) != p->local_batch ||
            fabs(h_jnum(r, "inter_bps", 0) - line_bps) > 1e-6 * line_bps)
            continue;
        int g = (int)h_jnum(r, "gpus", 0), k, seen = 0;
        for (k = 0; k < ng; k++) seen |= gp[k] == g;
        if (!seen && ng < 32) gp[ng++] = g;
        const char *lab = h_jstr(r, "engine_label", "");
        for (k = 0, seen = 0; k < nl; k++) seen |= !strcmp(labels[k], lab);
        if (!seen && nl < 16) snprintf(labels[nl++], sizeof labels[0], "%s", lab);
    }
    if (!ng) {
        h_jfree_all(&objs, &n);
        return;
    }
    for (int a = 0; a < ng; a++) /* ascending GPUs */
        for (int b = a + 1; b < ng; b++)
            if (gp[b] < gp[a]) { int t = gp[a]; gp[a] = gp[b]; gp[b] = t; }
    printf("# the simulator's speedups over one device (harness simulate lines in the files, SimGrid: latency, link\n"
           "# sharing, incast and stragglers simulated, docs/simulate.md), beside the model's above; the last one for\n"
           "# a configuration in the files\n# %-20s", "simulated");
    for (int k = 0; k < ng; k++) printf(" %7d", gp[k]);
    printf("\n");
    for (int l = 0; l < nl; l++) {
        printf("  %-20s", labels[l]);
        for (int k = 0; k < ng; k++) {
            double sp = -1;
            for (size_t i = 0; i < n; i++) {
                const h_jobj_t *r = &objs[i];
                if (!strcmp(h_jstr(r, "mode", ""), "simulate") && !strcmp(h_jstr(r, "kind", ""), "train") &&
                    !strcmp(h_jstr(r, "model", ""), p->wl->name) && !strcmp(h_jstr(r, "device", ""), p->dev.name) &&
                    (int)h_jnum(r, "gpus_per_node", 0) == G && (int)h_jnum(r, "gpus", 0) == gp[k] &&
                    (size_t)h_jnum(r, "batch_per_gpu", 0) == p->local_batch &&
                    fabs(h_jnum(r, "inter_bps", 0) - line_bps) <= 1e-6 * line_bps &&
                    !strcmp(h_jstr(r, "engine_label", ""), labels[l]))
                    sp = h_jnum(r, "speedup", -1);
            }
            if (sp >= 0) printf(" %7.2f", sp);
            else printf(" %7s", "-");
        }
        printf("\n");
    }
    h_jfree_all(&objs, &n);
}

/* Prints the table, a row for every layout of the registry; with --json appends its lines ("kind":"cluster") in
 * one write, whole or not at all. */
static int s_extrapolate(const h_model_cluster_cfg_t *o, const s_point_t *p, const h_cal_t *t, int G, double bps)
{
    h_lines_t lines;
    h_lines_open(&lines, &o->out, "model");
    h_mc_conf_t c;
    int w = 14;
    for (int l = 0; h_mc_conf_at(l, &c) == 0; l++)
        if ((int)strlen(c.label) > w) w = (int)strlen(c.label);
    printf("# predicted speedup over one device (GPUs = machines x %d)\n# %-*s", G, w, "engine");
    for (int P = 1; P <= 1024; P *= 2) printf(" %7d", P);
    printf("\n");
    for (int l = 0; h_mc_conf_at(l, &c) == 0; l++) {
        printf("  %-*s", w, c.label);
        for (int P = 1; P <= 1024; P *= 2) {
            int g = P < G ? P : G, N = (P + g - 1) / g;
            double step = h_mc_step(p, t, &c, N, g, bps, NULL);
            double sp = (double)P * (double)p->local_batch / step / p->dev.samples_per_s;
            printf(" %7.2f", sp);
            if (o->out.json)
                h_lines_add(&lines, json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:f, s:f}", "kind",
                                                 "cluster", "model", p->wl->name, "device", p->dev.name, "engine",
                                                 c.label, "gpus", P, "nodes", N, "gpus_per_node", g,
                                                 "net_bps", (json_int_t)llround(bps), "local_batch",
                                                 (json_int_t)p->local_batch, "step_ms", step * 1e3, "speedup", sp));
        }
        printf("\n");
    }
    s_verdict(o, p, t, G, bps);
    return h_lines_close(&lines, "the result lines");
}

/* The calibration's constants, one line each with its bench lines (the prediction's basis). */
void h_mc_print_cal(const h_cal_t *cal)
{
    long used = 0;
    for (int i = 0; i < cal->nfiles; i++) used += cal->files[i].used;
    printf("# calibration: %s; TCP %s; %d constants from %ld bench lines of %d files\n", H_CAL_SPLIT, cal->cc,
           cal->n, used, cal->nfiles);
    printf("#   alpha %.2f us a message in series", h_cal_alpha(cal) * 1e6);
    for (int k = 0; k < cal->n; k++)
        if (cal->c[k].kind == H_CAL_ALPHA)
            printf(" (%d ring and tree lines; least squares %.2f us%s)", cal->c[k].lines, cal->c[k].raw * 1e6,
                   cal->c[k].raw < 0 ? ", held at 0" : "");
    printf("\n");
    for (int k = 0; k < cal->n; k++) {
        const h_cal_const_t *c = &cal->c[k];
        if (c->kind == H_CAL_INCAST)
            printf("#   incast law c = %.4f at a %.2f ms partition (%d lines of one server fed by %d to %d ranks, a link "
                   "each; held at %d)\n", c->value, c->part_wire * 1e3, c->lines, c->kmin, c->kmax, c->kmax);
        else if (c->kind == H_CAL_LAYOUT)
            printf("#   %s on %dx%d: slowdown %.3f at a %.2f ms partition (%d lines)\n", c->layout, c->nodes, c->gpn,
                   c->value, c->part_wire * 1e3, c->lines);
        else if (c->kind == H_CAL_SERVERS)
            printf("#   servers on K machines of their own, %dx%d: slowdown %.3f %+.4f (K - 1), K %d..%d, at a %.2f ms "
                   "partition (%d lines)\n", c->nodes, c->gpn, c->value, c->slope, c->kmin, c->kmax, c->part_wire * 1e3,
                   c->lines);
    }
}

int h_model_cluster(const h_model_cluster_cfg_t *o)
{
    double bps, eff;
    CHECK(s_link(o, &bps, &eff));
    int G = o->gpus_per_node > 0 ? o->gpus_per_node : 4, N = o->nodes > 0 ? o->nodes : 1;
    size_t lb = o->batch_per_gpu > 0 ? (size_t)o->batch_per_gpu
              : o->batch > 0 ? (size_t)o->batch / (size_t)(N * G) : (size_t)H_EMU_BATCH_PER_GPU;
    if (!lb) return err_set(ERR_INVAL, "--batch %d is less than one sample a GPU on %d GPUs", o->batch, N * G);
    char cc[16];
    h_mc_model_cc(o, cc, sizeof cc);
    h_cal_t cal;
    int rc = h_cal_fit(&cal, o->nfiles, o->files, cc);
    if (rc < 0) {
        h_cal_free(&cal);
        return rc;
    }
    s_point_t p;
    rc = h_mc_point(&p, o->model, o->emu_device, 0, lb, o->bucket_mb, o->no_overlap);
    p.ps_pipelined = o->grad_dtype == DT_F32; /* as the engine decides (ps/ps_step.c; loss scaling implies half gradients) */
    if (rc == 0 && h_mc_straggler(o->straggler, &p.straggler_rank, &p.straggler_s) < 0)
        rc = err_set(ERR_INVAL, "--straggler '%s': expected RANK:MS", o->straggler);
    if (rc < 0) {
        h_mc_point_free(&p);
        h_cal_free(&cal);
        return rc;
    }
    printf("# syncbench model (emulated cluster): %s on %s (%.1f samples/s: %s), batch %zu/GPU, NIC %.4g Gbit/s "
           "(eff %g, TCP %s), %d buckets of <= %g MiB%s; device update %.2f ms where the worker updates\n",
           p.wl->name, p.dev.name, p.dev.samples_per_s, p.dev.basis, lb, bps / eff / 1e9, eff, cc,
           p.nb, p.bucket_mb, p.no_overlap ? " (after backward)" : " (overlapping backward)", p.update_s * 1e3);
    if (p.straggler_rank >= 0)
        printf("# the slowest GPU: worker %d's compute + %.2f ms (--straggler %s), every bucket that much later, where\n"
               "# the cluster has that worker\n", p.straggler_rank, p.straggler_s * 1e3, o->straggler);
    h_mc_print_cal(&cal);
    printf("# the model's limits: one collective at a time, links paced by the busiest NIC, alpha a message in series,\n"
           "# no CPU or PCIe limits, servers' CPU work free, TCP's share of a shared NIC only through the PS's slowdowns\n"
           "# (measured on this host's tc tbf, not on a switch, under TCP %s: a layout's own where a bench measured\n"
           "# it on the same machines, else the incast law); the emulated runs share them, a real cluster may not\n",
           cc);
    rc = s_extrapolate(o, &p, &cal, G, bps);
    if (rc == 0) s_sim_beside(o, &p, G, bps / eff);
    if (rc == 0 && o->nfiles && !o->no_check) rc = h_mc_check(&cal, o->nfiles, o->files, &o->out, NULL);
    h_mc_point_free(&p);
    h_cal_free(&cal);
    return rc;
}
