/* comm.c: the public API's communicator (sb_comm_*: a core communicator from torchrun's environment or
 * explicit rank / world / master), its error reporting (sb_strerror, sb_last_error) and version. */
#include "api/api_int.h"
#include "core/err.h"
#include "sb_version.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_SAME(n) ((int)SB_ERR_##n == (int)ERR_##n)
_Static_assert(S_SAME(INVAL) && S_SAME(TIMEOUT) && S_SAME(PEER) && S_SAME(MISMATCH) && S_SAME(STATE) && S_SAME(AUTH) && S_SAME(ADDRINUSE) && S_SAME(UNSUP) && S_SAME(RANGE) && S_SAME(NOMEM) && S_SAME(IO) && S_SAME(PROTO) && S_SAME(SYS),
               "the public error codes are core/err.h's");
_Static_assert(SB_F32 == (int)DT_F32 && SB_F16 == (int)DT_F16 && SB_BF16 == (int)DT_BF16, "dtypes");
_Static_assert(SB_SUM == (int)OP_SUM && SB_AVG == (int)OP_AVG, "ops");

static _Thread_local char t_last[1024];

int api_fail_text(int code, const char *text)
{
    snprintf(t_last, sizeof t_last, "%s", text && *text ? text : err_str(code));
    err_clear();
    return code;
}

int api_fail(int code)
{
    if (code >= 0) return code;
    return api_fail_text(code, err_detail());
}

const char *sb_last_error(void) { return t_last; }
const char *sb_strerror(int code) { return err_str(code); }
int syncbench_version(void) { return SYNCBENCH_VERSION; }

const char *syncbench_version_string(void)
{
    static char v[96];
    if (!v[0])
        snprintf(v, sizeof v, "%d.%d.%d (%s)", SYNCBENCH_VERSION_MAJOR, SYNCBENCH_VERSION_MINOR,
                 SYNCBENCH_VERSION_PATCH, SB_GIT_SHA);
    return v;
}

/* env:// for the API: MASTER_ADDR and SYNCBENCH_MASTER_PORT, else MASTER_PORT + 1, as tcp://. */
static int s_env_method(char *out, size_t len)
{
    const char *a = getenv("MASTER_ADDR"), *sp = getenv("SYNCBENCH_MASTER_PORT"), *mp = getenv("MASTER_PORT");
    if (!a || !*a)
        return err_set(ERR_INVAL, "env:// needs MASTER_ADDR (rank 0's host) and MASTER_PORT or SYNCBENCH_MASTER_PORT "
                       "(torchrun sets both), or pass init_method tcp://HOST:PORT");
    long port;
    char *end;
    if (sp && *sp) {
        port = strtol(sp, &end, 10);
        if (*end || port < 1 || port > 65535) return err_set(ERR_RANGE, "SYNCBENCH_MASTER_PORT=%s is not a port", sp);
    } else if (mp && *mp) {
        port = strtol(mp, &end, 10);
        if (*end || port < 1 || port > 65534) return err_set(ERR_RANGE, "MASTER_PORT=%s is not a port below 65535", mp);
        port++; /* torchrun's (and torch.distributed's) own store listens on MASTER_PORT itself */
    } else {
        return err_set(ERR_INVAL, "env:// needs MASTER_PORT or SYNCBENCH_MASTER_PORT (unset): torchrun sets "
                       "MASTER_PORT; syncbench then listens on MASTER_PORT + 1");
    }
    snprintf(out, len, "tcp://%s:%ld", a, port);
    return 0;
}

int sb_comm_new(sb_comm_t **comm, const sb_comm_cfg_t *cfg)
{
    if (!comm) return api_fail_text(ERR_INVAL, "sb_comm_new: comm is NULL");
    *comm = NULL;
    int rank = -1, world = -1, tmo = 0;
    const char *method = NULL, *transport = NULL;
    if (cfg) {
        if (cfg->world > 0) { rank = cfg->rank; world = cfg->world; }
        else if (cfg->world < 0 && cfg->rank >= 0) rank = cfg->rank;
        method = cfg->init_method;
        tmo = cfg->timeout_ms;
        transport = cfg->transport;
    }
    if (cfg && cfg->world > 0 && (cfg->rank < 0 || cfg->rank >= cfg->world)) {
        char t[160];
        snprintf(t, sizeof t, "sb_comm_new: rank %d is not in [0, %d)", cfg->rank, cfg->world);
        return api_fail_text(ERR_RANGE, t);
    }
    char m[300];
    if (!method || !*method || !strcmp(method, "env://")) {
        if (s_env_method(m, sizeof m) < 0) return api_fail(ERR_INVAL);
        method = m;
    }
    boot_cfg_t bc;
    int rc = boot_cfg_init(&bc, method, rank, world, tmo);
    if (rc < 0) return api_fail(rc);
    /* the caller trains beside the communication thread: a waiting rank must not yield its core to that compute
     * (it would see its segment only once the compute thread's slice ends) but sleep, to be woken at once */
    comm_opts_t co = {.transport = transport && *transport ? transport : "auto", .shm_no_yield = 1};
    sb_comm_t *c = calloc(1, sizeof *c);
    if (!c) return api_fail_text(ERR_NOMEM, "sb_comm_new");
    rc = comm_new(&c->comm, &bc, &co);
    if (rc < 0) {
        free(c);
        return api_fail(rc);
    }
    *comm = c;
    return 0;
}

void sb_comm_free(sb_comm_t **comm)
{
    sb_comm_t *c = comm ? *comm : NULL;
    if (!c) return;
    if (c->failed) comm_abort(&c->comm);
    else comm_destroy(&c->comm);
    free(c);
    *comm = NULL;
}

int sb_comm_rank(const sb_comm_t *c) { return c ? c->comm->rank : api_fail_text(ERR_INVAL, "NULL communicator"); }
int sb_comm_world(const sb_comm_t *c) { return c ? c->comm->world : api_fail_text(ERR_INVAL, "NULL communicator"); }
int sb_comm_local_rank(const sb_comm_t *c)
{
    return c ? c->comm->local_rank : api_fail_text(ERR_INVAL, "NULL communicator");
}
int sb_comm_local_world(const sb_comm_t *c)
{
    return c ? c->comm->local_world : api_fail_text(ERR_INVAL, "NULL communicator");
}

int sb_comm_barrier(sb_comm_t *c, int timeout_ms)
{
    if (!c) return api_fail_text(ERR_INVAL, "sb_comm_barrier: NULL communicator");
    int rc = comm_barrier(c->comm, timeout_ms > 0 ? timeout_ms : c->comm->timeout_ms);
    if (rc < 0) c->failed = 1;
    return api_fail(rc);
}
