/* ps_opts.c: the parameter server's own options (servers, colocation, consistency mode, partition
 * size): the table the harness offers as flags, parsing into ps_opts_t, and what they imply for the
 * world (dedicated server ranks) and for the trainer (sync mode or not). */
#include "ps/ps.h"
#include "core/err.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const engine_opt_t ps_options[] = {
    {"servers", 1, "S", "ps: dedicated server processes beside the workers", "a server count >= 0"},
    {"ps-colocate", 0, NULL, "ps: one server thread inside every worker (BytePS style)", NULL},
    {"ps-mode", 1, "M", "ps: sync | async | ssp:K", "sync, async or ssp:K"},
    {"ps-partition-kb", 1, "KB", "ps: partition size (default 4096)", "KiB >= 1"},
    {"ps-van", 1, "V", "ps: auto | tcp | ipc | cma (auto: on one host ipc + cross-memory reads (cma) when allowed, "
                       "else ipc; tcp across hosts)", "auto, tcp, ipc or cma"},
    {"ps-lane", 1, "L", "ps: auto | on | off: data messages to a server on this host through a shared-memory lane "
                        "beside ZeroMQ (auto: wherever cma is in use)", "auto, on or off"},
    {"ps-window", 1, "W", "ps: at most W partitions a server pushed and not yet answered, per worker (sync, f32 "
                          "gradients; credits that keep the workers' flows to a server in step; default 0: no limit)",
     "partitions >= 0"},
    {"ps-local-agg", 0, NULL, "ps: machine-local aggregation (BytePS, MXNet kvstore): a machine's workers sum at its "
                              "lowest rank, which alone pushes and pulls each partition, then hands it on; sync only; "
                              "with --ps-colocate one server a machine. Off by default: runs on one host would measure "
                              "a local reduce, and the recorded results ran without it (labels say -localagg)", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static int s_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

void ps_opts_init(void *opts)
{
    memset(opts, 0, sizeof(ps_opts_t));
    ((ps_opts_t *)opts)->mode = PS_SYNC;
}

int ps_opt_set(void *opts, const char *name, const char *v)
{
    ps_opts_t *o = opts;
    if (!o || !name) return err_set(ERR_INVAL, "ps: no option");
    if (!strcmp(name, "servers")) {
        if (s_int(v, 0, 4096, &o->servers)) return err_set(ERR_INVAL, "ps: bad server count");
    } else if (!strcmp(name, "ps-colocate")) {
        o->colocate = 1;
    } else if (!strcmp(name, "ps-mode")) {
        if (v && !strcmp(v, "sync")) o->mode = PS_SYNC;
        else if (v && !strcmp(v, "async")) o->mode = PS_ASYNC;
        else if (v && !strncmp(v, "ssp:", 4) && !s_int(v + 4, 0, 1000000, &o->ssp_k)) o->mode = PS_SSP;
        else return err_set(ERR_INVAL, "ps: bad mode");
    } else if (!strcmp(name, "ps-partition-kb")) {
        int kb;
        if (s_int(v, 1, 1 << 22, &kb)) return err_set(ERR_INVAL, "ps: bad partition size");
        o->partition_bytes = (size_t)kb * 1024;
    } else if (!strcmp(name, "ps-van")) {
        if (v && !strcmp(v, "auto")) o->van = PS_VAN_AUTO;
        else if (v && !strcmp(v, "tcp")) o->van = PS_VAN_TCP;
        else if (v && !strcmp(v, "ipc")) o->van = PS_VAN_IPC;
        else if (v && !strcmp(v, "cma")) o->van = PS_VAN_CMA;
        else return err_set(ERR_INVAL, "ps: bad van (auto, tcp, ipc or cma)");
    } else if (!strcmp(name, "ps-lane")) {
        if (v && !strcmp(v, "auto")) o->lane = PS_LANE_AUTO;
        else if (v && !strcmp(v, "on")) o->lane = PS_LANE_ON;
        else if (v && !strcmp(v, "off")) o->lane = PS_LANE_OFF;
        else return err_set(ERR_INVAL, "ps: bad lane (auto, on or off)");
    } else if (!strcmp(name, "ps-local-agg")) {
        o->local_agg = 1;
    } else if (!strcmp(name, "ps-window")) {
        if (s_int(v, 0, 1 << 20, &o->window)) return err_set(ERR_INVAL, "ps: bad window (partitions >= 0)");
    } else {
        return err_set(ERR_INVAL, "ps: unknown option '%s'", name);
    }
    return 0;
}

int ps_opts_check(const void *opts)
{
    const ps_opts_t *o = opts;
    if (o && o->servers && o->colocate) return err_set(ERR_INVAL, "--servers and --ps-colocate are exclusive");
    if (o && o->local_agg && o->mode != PS_SYNC)
        return err_set(ERR_INVAL, "--ps-local-agg needs --ps-mode sync: a machine's sum waits for all its workers, which "
                       "async and ssp:K exist to avoid");
    return 0;
}

int ps_extra_ranks(const void *opts, int world)
{
    (void)world;
    const ps_opts_t *o = opts;
    if (o && o->colocate) return 0;
    return o && o->servers ? o->servers : 1;
}

int ps_in_sync(const void *opts)
{
    const ps_opts_t *o = opts;
    return !o || o->mode == PS_SYNC;
}
