/* drive.c: the driver: with --procs, --gpus or --nnodes, one launch of N ranks per (world size,
 * engine), each rank told its mode and engine on its command line; with --net, all of them inside an
 * emulated network of namespaces that is always removed afterwards. */
#include "harness/harness.h"
#include "harness/launch.h"
#include "harness/netem.h"
#include "harness/peers.h"
#include "core/dev.h"
#include "core/err.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --net: the emulated network of the current h_drive (namespaces live for all its launches) */
static h_netem_t *s_net;
static char **s_net_argv;
static int s_net_argc;
static volatile sig_atomic_t s_net_sig;
static void s_net_on_signal(int sig) { s_net_sig = sig; }

/* The largest launch of o: world and extra (server) ranks. */
static void s_max_launch(const h_opts_t *o, int *maxw, int *maxs)
{
    *maxw = o->procs ? o->procs : 1;
    for (int i = 0; i < o->nscaling; i++) *maxw = o->scaling[i] > *maxw ? o->scaling[i] : *maxw;
    *maxs = 0;
    for (int i = 0; i < o->nengines; i++) {
        int x = h_engine_extra_ranks(o, o->engines[i], *maxw);
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
            fprintf(stderr, "harness: --net %s: %d namespaces (%s..), tc tbf %s each way, TCP transport\n", o->net,
                    spec.per_node ? spec.nodes : maxw + maxs, h_netem_ns(s_net, 0), spec.rate);
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
                          int *ac)
{
    char **av = calloc((size_t)argc + 10, sizeof *av);
    if (!av) return NULL;
    int n = 0;
    for (int i = 0; i < argc; i++) av[n++] = argv[i];
    av[n++] = "--as-rank";
    if (mode) av[n++] = "--mode", av[n++] = (char *)mode;
    av[n++] = "--engine", av[n++] = (char *)eng;
    if (o->json) av[n++] = "--json", av[n++] = (char *)o->json;
    if (tag && *tag) av[n++] = "--timeline-tag", av[n++] = (char *)tag;
    av[n] = NULL;
    *ac = n;
    return av;
}

/* One launch: engine eng at world ranks (+ its servers). 0, ERR_INVAL (usage), or the launch's code
 * with its failure reported on stderr. */
static int s_launch_one(h_opts_t *o, const char *mode_override, const char *eng, int world, int nlaunch)
{
    int servers = h_engine_extra_ranks(o, eng, world);
    int nlocal = world + servers;
    char tag[96] = "";
    if (o->timeline && (nlaunch > 1 || mode_override)) /* one file each: FILE.[MODE-]ENGINE.pN.json */
        snprintf(tag, sizeof tag, "%s%s%s.p%d", mode_override ? mode_override : "", mode_override ? "-" : "", eng, world);
    h_launch_cfg_t lc = {.nlocal = nlocal, .nnodes = o->nnodes, .node_rank = o->node_rank,
                         .master = o->master, .timeout_s = o->timeout_s, .gpus = o->gpus, .quiet = 1};
    if (o->nnodes > 1 && servers)
        return err_set(ERR_INVAL, "multi-node %s with dedicated servers is not supported yet; use its colocated mode", eng);
    char net_master[64];
    if (s_net) h_netem_launch_cfg(s_net, &lc, nlocal, net_master, sizeof net_master);
    int ac;
    char **av = s_rank_argv(o, s_net ? s_net_argc : o->argc, s_net ? s_net_argv : o->argv, mode_override, eng, tag, &ac);
    err_clear();
    int mpirun = h_engine_via_mpirun(eng);
    if (mpirun && s_net) {
        free(av);
        return err_set(ERR_INVAL, "--engine %s starts its ranks with mpirun: not with --net", eng);
    }
    int rc = !av ? err_set(ERR_NOMEM, "out of memory") : mpirun ? h_launch_mpirun(&lc, ac, av) : h_launch(&lc, ac, av);
    free(av);
    if (rc < 0) {
        if (err_detail()[0]) fprintf(stderr, "harness: %s\n", err_detail());
        fprintf(stderr, "harness: %s with engine %s at %d ranks failed\n", mode_override ? mode_override : o->mode, eng,
                world);
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

int h_drive(h_opts_t *o, const char *mode_override)
{
    if (o->net && !s_net) return s_drive_net(o, mode_override);
    int worlds[H_MAX_SCALING], nw = 0;
    int rpg = o->ranks_per_gpu > 1 ? o->ranks_per_gpu : 1;
    int base = o->gpus ? o->gpus * rpg : (o->procs ? o->procs : 1);
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
    }
    const char *engs[H_MAX_ENGINES * 2];
    int ne = s_engines_with_peers(o, engs);
    const char *mode = mode_override ? mode_override : o->mode;
    int torch = o->peers && (!strcmp(mode, "bench") || !strcmp(mode, "train")) && !o->gpus && !o->net && o->nnodes <= 1;
    int status = 0;
    for (int wi = 0; wi < nw; wi++) {
        for (int ei = 0; ei < ne; ei++) {
            int rc = s_launch_one(o, mode_override, engs[ei], worlds[wi], nw * ne);
            if (rc == ERR_INVAL && err_detail()[0]) return rc; /* a usage error: nothing was launched */
            if (rc == ERR_INTERRUPT) return rc;                /* interrupted: stop everything */
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
