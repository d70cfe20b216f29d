/* drive.c: the driver: with --procs, --gpus, --nnodes or --nodes, one launch of N ranks per (world
 * size, engine), each rank told its mode and engine on its command line; with --net, all of them
 * inside an emulated network of namespaces that is always removed afterwards. The emulated GPU
 * cluster (--nodes N --gpus-per-node G) puts the ranks of a machine in one namespace (shared memory
 * between them) behind one shaped NIC, and resolves --shrink auto before launching. */
#include "harness/launch/drive.h"
#include "harness/cli/modecfg.h"
#include "harness/launch/launch.h"
#include "harness/emulate/cluster.h"
#include "harness/launch/netem.h"
#include "harness/launch/peers.h"
#include "harness/modes/modes.h"
#include "core/dev.h"
#include "trainer/workload.h"
#include "trainer/trainer.h"
#include "core/err.h"
#include "core/log.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --net: the emulated network of the current h_drive (namespaces live for all its launches) */
static h_netem_t *s_net;
static char **s_net_argv;
static int s_net_argc;
static volatile sig_atomic_t s_net_sig;
static void s_net_on_signal(int sig) { s_net_sig = sig; }

/* The emulated cluster of a launch of `world` GPUs: machines of at most G GPUs, filled in order. */
static h_cluster_t s_cluster(const h_opts_t *o, int world, double inter_bps)
{
    int g = o->gpus_per_node > 0 ? o->gpus_per_node : 1;
    h_cluster_t c = {.nodes = (world + g - 1) / g, .gpus_per_node = world < g ? world : g,
                     .server_nodes = o->server_nodes, .inter_bps = inter_bps, .shrink = o->shrink, .dilate = o->dilate};
    return c;
}

/* The largest launch of o: world and extra (server) ranks. */
static void s_max_launch(const h_opts_t *o, int *maxw, int *maxs)
{
    *maxw = o->procs ? o->procs : (o->nodes ? o->nodes * o->gpus_per_node : 1);
    for (int i = 0; i < o->nscaling; i++) *maxw = o->scaling[i] > *maxw ? o->scaling[i] : *maxw;
    *maxs = 0;
    for (int i = 0; i < o->nengines; i++) {
        h_engset_t es;
        h_engset_of(o, &es);
        int x = h_engine_extra_ranks(&es, o->engines[i], *maxw);
        *maxs = x > *maxs ? x : *maxs;
    }
}

/* Set up the namespaces for the largest launch, run h_drive inside them, and always remove them. */
static int s_drive_net(h_opts_t *o, const char *mode_override)
{
    h_netem_spec_t spec;
    char err[512];
    if (h_netem_parse(o->net, &spec, err, sizeof err) < 0) return err_set(ERR_INVAL, "%s", err);
    if (o->nnodes > 1 || o->master || o->gpus)
        return err_set(ERR_INVAL, "--net emulates a network on one machine: not with --nnodes, --master or --gpus");
    int maxw, maxs;
    s_max_launch(o, &maxw, &maxs);
    char what[256];
    snprintf(what, sizeof what, "TCP transport");
    if (o->nodes) {
        /* one namespace per emulated machine, its NIC shaped at the emulated rate / (shrink x dilate) */
        h_cluster_t c = s_cluster(o, maxw, spec.bits_per_s * spec.eff);
        spec.per_node = 1;
        spec.nodes = h_cluster_machines(&c, maxs > 0);
        spec.bits_per_s = h_cluster_shaped_bps(&c);
        if (spec.bits_per_s < 8000)
            return err_set(ERR_INVAL, "--net %s with --shrink %g --dilate %g shapes the NICs at %.0f bit/s, below tc's "
                           "8 kbit/s: use a smaller --shrink or --dilate", o->net, o->shrink, o->dilate, spec.bits_per_s);
        snprintf(spec.rate, sizeof spec.rate, "%.0fbit", spec.bits_per_s);
        spec.queue_ms *= c.dilate > 0 ? c.dilate : 1; /* the emulated port's buffer, in dilated time */
        spec.lat_us *= c.dilate > 0 ? c.dilate : 1;   /* and the per-hop latency */
        snprintf(what, sizeof what, "emulated NIC %.4g Gbit/s x eff %g = %.4g Mbit/s shaped (shrink %g, dilate %g); shared "
                 "memory within a machine", c.inter_bps / spec.eff / 1e9, spec.eff, spec.bits_per_s / 1e6, c.shrink, c.dilate);
    }
    struct sigaction sa = {.sa_handler = s_net_on_signal}, old[3];
    static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
    s_net_sig = 0;
    int rc;
    if (h_netem_new(&s_net, &spec, maxw + maxs, err, sizeof err) < 0) {
        rc = err_set(ERR_SYS, "%s", err);
    } else if (!(s_net_argv = h_netem_argv(o->argc, o->argv, &s_net_argc))) {
        err_clear();
        rc = ERR_NOMEM;
    } else {
        if (!o->quiet)
            fprintf(stderr, "harness: --net %s: %d namespaces (%s..), tc tbf %s each way (queue %g ms), %g us held on each "
                    "NIC's egress, TCP %s, %s\n", o->net, h_netem_namespaces(s_net), h_netem_ns(s_net, 0), spec.rate,
                    spec.queue_ms, H_NETEM_LAT_HOPS * spec.lat_us, h_netem_cc(s_net), what);
        rc = s_net_sig ? h_interrupt(s_net_sig) : h_drive(o, mode_override);
    }
    h_netem_destroy(&s_net);
    free(s_net_argv);
    s_net_argv = NULL;
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
    if (s_net_sig && rc != ERR_INTERRUPT) rc = h_interrupt(s_net_sig);
    return rc;
}

/* One launch's rank command line: the user's (argc, argv), then --as-rank and what the driver chose:
 * the mode (when it overrides the first argument), the single engine, the results file and the
 * timeline tag; `ps` shows what a rank runs. Returns a malloc'd NULL-terminated array (pointers into
 * argv and the arguments), or NULL. */
static char **s_rank_argv(const h_opts_t *o, int argc, char **argv, const char *mode, const char *eng, const char *tag,
                          int world, int *ac)
{
    static char shrink[32], nodes[16], gpn[16];
    char **av = calloc((size_t)argc + 16, sizeof *av);
    if (!av) return NULL;
    int n = 0;
    for (int i = 0; i < argc; i++) av[n++] = argv[i];
    av[n++] = "--as-rank";
    if (mode) av[n++] = "--mode", av[n++] = (char *)mode;
    av[n++] = "--engine", av[n++] = (char *)eng;
    if (o->json) av[n++] = "--json", av[n++] = (char *)o->json;
    if (tag && *tag) av[n++] = "--timeline-tag", av[n++] = (char *)tag;
    if (workload_is_known(o->model)) {
        snprintf(shrink, sizeof shrink, "%.17g", o->shrink);
        av[n++] = "--shrink", av[n++] = shrink;   /* resolved here when auto */
    }
    if (o->nodes) {
        h_cluster_t c = s_cluster(o, world, 0);   /* this launch's machines (--scaling) */
        snprintf(nodes, sizeof nodes, "%d", c.nodes);
        snprintf(gpn, sizeof gpn, "%d", c.gpus_per_node);
        av[n++] = "--nodes", av[n++] = nodes, av[n++] = "--gpus-per-node", av[n++] = gpn;
    }
    av[n] = NULL;
    *ac = n;
    return av;
}

/* Place this launch's ranks on the emulated machines: worker r on machine r / G; dedicated server s on
 * CPU machine s mod K after the largest launch's GPU machines (--server-nodes K), else on GPU machine
 * s mod N. */
static int s_map_cluster(const h_opts_t *o, int world, int servers)
{
    int maxw, maxs;
    s_max_launch(o, &maxw, &maxs);
    h_cluster_t big = s_cluster(o, maxw, 0), c = s_cluster(o, world, 0);
    int *map = calloc((size_t)(world + servers), sizeof *map);
    if (!map) return err_set(ERR_NOMEM, "out of memory");
    for (int r = 0; r < world + servers; r++) {
        int m = h_cluster_machine_of(&c, r, world);
        map[r] = r >= world && c.server_nodes > 0 ? m - c.nodes + big.nodes : m;
    }
    int rc = h_netem_map(s_net, map, world + servers) == 0 ? 0 : err_set(ERR_STATE, "emulated cluster: bad placement");
    free(map);
    return rc;
}

/* --shrink auto: as much as this host needs for the largest launch (buffers within a third of the
 * memory, NICs shaped at <= 1 Gbit/s, each rank's gradients at most H_HOST_BYTES_PER_MS per millisecond
 * of the step's compute at the smallest local batch), at least 1. The host-work rule is left out where
 * a parameter server spans machines: how its workers' TCP flows share a shaped NIC moves with the
 * shaped rate (tbf's bucket cannot shrink below a GSO packet), so a larger shrink there trades one
 * host artifact for another (docs/emulation.md). */
#define H_HOST_BYTES_PER_MS 48e3
static int s_resolve_shrink(h_opts_t *o)
{
    if (!workload_is_known(o->model) || o->shrink >= 1) return 0;
    workload_t *wl = NULL;
    CHECK(workload_load(&wl, o->model));
    int maxw, maxs;
    s_max_launch(o, &maxw, &maxs);
    double inter = 0;
    if (o->net) {
        h_netem_spec_t spec;
        char err[256];
        if (h_netem_parse(o->net, &spec, err, sizeof err) == 0) inter = spec.bits_per_s;
    }
    h_cluster_t c = s_cluster(o, maxw, inter);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    double compute_s = 0;
    wl_device_t dev;
    size_t global = o->batch > 0 ? (size_t)o->batch : TRAINER_DEFAULT_BATCH;
    size_t lb = maxw > 0 ? global / (size_t)maxw : global;
    int ps_across = 0;
    /* a PS whose pushes converge on a shaped NIC from other machines: its incast moves with the shrink */
    for (int i = 0; i < o->nengines; i++)
        ps_across |= h_engine_has_servers(o->engines[i]) && (c.nodes > 1 || o->server_nodes > 0);
    if (lb > 0 && !ps_across && wl_device_resolve(o->emu_device ? o->emu_device : WL_DEVICE_DEFAULT, wl, &dev) == 0)
        wl_schedule(wl, &dev, lb, o->dilate >= 1 ? o->dilate : 1, NULL, NULL, &compute_s);
    err_clear(); /* a bad device is reported by the ranks, with its context */
    h_shrink_need_t need = {.model_bytes = wl->params * sizeof(float), .nranks = maxw + maxs,
                            .mem_budget = pages > 0 && psz > 0 ? (double)pages * (double)psz / 3 : 8e9,
                            .max_link_bps = 1e9, .compute_host_ms = compute_s * 1e3,
                            .max_bytes_per_ms = H_HOST_BYTES_PER_MS};
    o->shrink = h_cluster_auto_shrink(&c, &need);
    if (!o->quiet) {
        char why[96];
        if (ps_across)
            snprintf(why, sizeof why, "host-work rule off: a PS across machines");
        else
            snprintf(why, sizeof why, "%.0f ms of compute a step", compute_s * 1e3);
        fprintf(stderr, "harness: --shrink auto: %g (%s: %.0f MB of gradients per worker, %.1f MB after shrink; %s)\n",
                o->shrink, wl->name, (double)wl->params * 4 / 1e6, (double)wl->params * 4 / 1e6 / o->shrink, why);
    }
    workload_destroy(&wl);
    return 0;
}

/* One launch: engine eng at world ranks (+ its servers). 0, ERR_INVAL (usage), or the launch's code
 * with its failure reported on stderr. */
static int s_launch_one(h_opts_t *o, const char *mode_override, const char *eng, int world, int nlaunch)
{
    h_engset_t es;
    h_engset_of(o, &es);
    int servers = h_engine_extra_ranks(&es, eng, world);
    int nlocal = world + servers;
    char tag[96] = "";
    if (o->timeline && (nlaunch > 1 || mode_override)) /* one file each: FILE.[MODE-]ENGINE.pN.json */
        snprintf(tag, sizeof tag, "%s%s%s.p%d", mode_override ? mode_override : "", mode_override ? "-" : "", eng, world);
    h_launch_cfg_t lc = {.nlocal = nlocal, .nnodes = o->nnodes, .node_rank = o->node_rank,
                         .master = o->master, .timeout_s = o->timeout_s, .gpus = o->gpus, .quiet = 1,
                         .require_auth = o->require_auth};
    if (o->nnodes > 1 && servers)
        return err_set(ERR_INVAL, "multi-node %s with dedicated servers is not supported yet; use its colocated mode", eng);
    char net_master[64];
    if (s_net && o->nodes) CHECK(s_map_cluster(o, world, servers));
    if (s_net) h_netem_launch_cfg(s_net, &lc, nlocal, net_master, sizeof net_master);
    int ac;
    /* the emulated cluster keeps the transport automatic: shared memory within a machine's namespace */
    int forced = s_net && !o->nodes;
    char **av = s_rank_argv(o, forced ? s_net_argc : o->argc, forced ? s_net_argv : o->argv, mode_override, eng, tag, world,
                            &ac);
    err_clear();
    int mpirun = h_engine_via_mpirun(eng);
    if (mpirun && s_net) {
        free(av);
        return err_set(ERR_INVAL, "--engine %s starts its ranks with mpirun: not with --net", eng);
    }
    int rc = !av ? err_set(ERR_NOMEM, "out of memory") : mpirun ? h_launch_mpirun(&lc, ac, av) : h_launch(&lc, ac, av);
    free(av);
    if (rc < 0) {
        /* one line: what was running, then why (a signal is an interruption, not a failure) */
        const char *what = mode_override ? mode_override : o->mode;
        if (rc == ERR_INTERRUPT)
            fprintf(stderr, "harness: %s with engine %s at %d ranks interrupted (%s)\n", what, eng, world,
                    strsignal(h_interrupt_signal()));
        else if (err_detail()[0])
            fprintf(stderr, "harness: %s with engine %s at %d ranks: %s\n", what, eng, world, err_detail());
        else
            fprintf(stderr, "harness: %s with engine %s at %d ranks failed\n", what, eng, world);
        err_clear();
    }
    return rc;
}

/* The engines of one round: --engine's, then with --peers the peer engines of this build not already
 * there (the GPU and emulated-network runs have none). Returns how many. */
static int s_engines_with_peers(const h_opts_t *o, const char **engs)
{
    int n = 0;
    for (int i = 0; i < o->nengines; i++) engs[n++] = o->engines[i];
    for (int p = 0; o->peers && !o->gpus && !o->net && p < h_peer_engine_count(); p++) {
        const char *name = h_peer_engine_at(p)->name;
        int have = 0;
        for (int i = 0; i < n; i++) have |= !strcmp(engs[i], name);
        if (!have && n < H_MAX_ENGINES * 2) engs[n++] = name;
    }
    return n;
}

/* Whether an MPS control daemon answers where CUDA clients will look for it (CUDA_MPS_PIPE_DIRECTORY,
 * or the driver's default /tmp/nvidia-mps): its control pipe exists. */
static int s_mps_running(void)
{
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    char path[512];
    snprintf(path, sizeof path, "%s/control", dir && *dir ? dir : "/tmp/nvidia-mps");
    return access(path, F_OK) == 0;
}

int h_drive(h_opts_t *o, const char *mode_override)
{
    if (!s_net) CHECK(s_resolve_shrink(o));
    if (o->net && !s_net) return s_drive_net(o, mode_override);
    int worlds[H_MAX_SCALING], nw = 0;
    int rpg = o->ranks_per_gpu > 1 ? o->ranks_per_gpu : 1;
    int base = o->gpus ? o->gpus * rpg : (o->procs ? o->procs : (o->nodes ? o->nodes * o->gpus_per_node : 1));
    if (o->nscaling) {
        for (int i = 0; i < o->nscaling; i++) worlds[nw++] = o->scaling[i];
    } else {
        worlds[nw++] = base;
    }
    if (o->gpus) {
        int maxw = 0;
        for (int i = 0; i < nw; i++) maxw = worlds[i] > maxw ? worlds[i] : maxw;
        int rc = dev_check_gpus((maxw + rpg - 1) / rpg); /* GPUs needed: ranks / ranks per GPU */
        if (rc < 0) return rc == ERR_INVAL ? ERR_NODEV : rc; /* the detail says why; not a usage error */
        if (rpg > 1 && !s_mps_running())
            LOG_W("%d ranks share each GPU without MPS: the driver time-slices their contexts (measured on an "
                  "H200: the IPC tree 10x slower than under MPS); start it with nvidia-cuda-mps-control -d",
                  rpg);
    }
    const char *engs[H_MAX_ENGINES * 2];
    int ne = s_engines_with_peers(o, engs);
    const char *mode = mode_override ? mode_override : o->mode;
    int most = 0; /* the largest launch's ranks on this host (workers and servers; per node with --nnodes) */
    h_engset_t es;
    h_engset_of(o, &es);
    for (int wi = 0; wi < nw; wi++)
        for (int ei = 0; ei < ne; ei++) {
            int r = worlds[wi] + h_engine_extra_ranks(&es, engs[ei], worlds[wi]);
            most = r > most ? r : most;
        }
    h_oversub_warn(most, stderr, "harness: ");
    int torch = o->peers && (!strcmp(mode, "bench") || !strcmp(mode, "train")) && !o->gpus && !o->net && o->nnodes <= 1;
    int status = 0;
    for (int wi = 0; wi < nw; wi++) {
        for (int ei = 0; ei < ne; ei++) {
            int rc = s_launch_one(o, mode_override, engs[ei], worlds[wi], nw * ne);
            if (rc == ERR_INVAL && err_detail()[0]) return rc; /* a usage error: nothing was launched */
            if (rc == ERR_INTERRUPT) return rc;                /* interrupted: stop everything */
            if (rc == ERR_AUTH) return rc;                     /* no job secret (said): no launch can start */
            if (rc < 0) status = ERR_PEER;
        }
        /* --peers: PyTorch in the same round, right after our engines at this world size */
        int rc = torch ? h_torch_peer_run(o, mode, worlds[wi]) : 0;
        if (rc == ERR_INTERRUPT) return rc;
        if (rc == ERR_NODEV) torch = 0;
        else if (rc < 0) status = ERR_PEER;
    }
    return status;
}
