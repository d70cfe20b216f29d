/* mpi.c: the MPI engine: every collective is one MPI_Allreduce on MPI_COMM_WORLD (OpenMPI's tuned
 * algorithms), behind the same step machinery as our ring and tree.
 *
 * Design: training uses core/arstep, as ring and tree do: submit() queues a bucket to the
 * communication thread, which runs MPI_Allreduce (sum, then scaled by 1/P for the average, the
 * ring's semantics) on it as soon as it arrives, overlapping the rest of backward; wait() runs the
 * shared optimizer (core/optim.h). Only one thread is inside MPI at a time (arstep serialises the
 * caller's direct collectives and its thread's), so MPI_THREAD_SERIALIZED is enough. f16 and bf16
 * are summed by a user-defined MPI_Op over 16-bit elements with core/dtype's kernels.
 *
 * MPI is initialised by the first create() of a process and finalised at exit (it can be initialised
 * once only). Our ranks must be MPI's: started by mpirun, whose OMPI_COMM_WORLD_* variables boot
 * reads, so rank r of the communicator is rank r of MPI_COMM_WORLD (checked).
 *
 * Timeouts: MPI_Allreduce takes no deadline, and MPI_Iallreduce would run OpenMPI's non-blocking
 * (libnbc) algorithms instead of the ones we compare against. So a watchdog thread aborts the whole
 * job (MPI_Abort, which mpirun turns into stopping every rank) when one collective has run longer
 * than the timeout, saying so on stderr; a rank that dies makes mpirun stop the others. */
#include "mpi/mpi.h"
#include "core/arstep.h"
#include "core/dtype.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MPI_CHUNK ((size_t)1 << 30) /* elements per MPI_Allreduce call: MPI counts are int */

struct engine {
    comm_t *comm;
    engine_cfg_t cfg;
    arstep_t *step;
    pthread_t watchdog;
    int wd_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wd_stop;
    double busy_since;        /* now_ms() when the running collective started; 0: none */
    int busy_timeout_ms;
    uint64_t bytes;           /* bytes reduced (the ring-equivalent traffic is reported from it) */
};

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static char s_lib[MPI_MAX_LIBRARY_VERSION_STRING];
static MPI_Op s_op16[2] = {MPI_OP_NULL, MPI_OP_NULL}; /* f16, bf16 sums */

static void s_lib_fill(void)
{
    int len = 0;
    if (MPI_Get_library_version(s_lib, &len) != MPI_SUCCESS) snprintf(s_lib, sizeof s_lib, "MPI (unknown version)");
    s_lib[strcspn(s_lib, ",\n")] = '\0';
}

const char *mpi_engine_library(void)
{
    pthread_once(&s_once, s_lib_fill);
    return s_lib;
}

static void s_sum_f16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    dt_add(inout, inout, in, (size_t)*len, DT_F16);
}
static void s_sum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    dt_add(inout, inout, in, (size_t)*len, DT_BF16);
}

static void s_finalize(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) return;
    for (int i = 0; i < 2; i++)
        if (s_op16[i] != MPI_OP_NULL) MPI_Op_free(&s_op16[i]);
    MPI_Finalize();
}

/* MPI_Init_thread once per process (finalised at exit); checks that MPI's world is ours. */
static int s_init(const comm_t *comm)
{
    int init = 0, fin = 0;
    MPI_Finalized(&fin);
    if (fin) return err_set(ERR_STATE, "mpi: MPI was finalised already in this process");
    MPI_Initialized(&init);
    if (!init) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return err_set(ERR_SYS, "mpi: MPI_Init_thread failed");
        atexit(s_finalize);
        if (provided < MPI_THREAD_SERIALIZED)
            return err_set(ERR_STATE, "mpi: the MPI library gives thread level %d, below MPI_THREAD_SERIALIZED", provided);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Op_create(s_sum_f16, 1, &s_op16[0]);
        MPI_Op_create(s_sum_bf16, 1, &s_op16[1]);
    }
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != comm->world || rank != comm->rank)
        return err_set(ERR_INVAL,
                       "mpi: this rank is rank %d of %d for MPI but rank %d of %d for the job: start the ranks with "
                       "mpirun (harness --engine mpi --procs N does)", rank, size, comm->rank, comm->world);
    return 0;
}

static void *s_watchdog(void *arg)
{
    engine_t *self = arg;
    pthread_mutex_lock(&self->mu);
    while (!self->wd_stop) {
        if (self->busy_since > 0 && now_ms() - self->busy_since > self->busy_timeout_ms) {
            fprintf(stderr, "[rank %d] mpi: MPI_Allreduce did not finish within %d ms: aborting the job\n",
                    self->comm->rank, self->busy_timeout_ms);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&self->cv, &self->mu, &ts);
    }
    pthread_mutex_unlock(&self->mu);
    return NULL;
}

static int s_mpi_fn(void *ctx, const void *send, void *recv, size_t count, dtype_t dt, redop_t op, int timeout_ms)
{
    engine_t *self = ctx;
    const size_t esz = dt_size(dt);
    if (!esz) return err_set(ERR_INVAL, "mpi: bad dtype %d", (int)dt);
    if (op != OP_SUM && op != OP_AVG) return err_set(ERR_INVAL, "mpi: bad op %d", (int)op);
    MPI_Datatype mt = dt == DT_F32 ? MPI_FLOAT : MPI_UINT16_T;
    MPI_Op mo = dt == DT_F32 ? MPI_SUM : s_op16[dt == DT_F16 ? 0 : 1];
    pthread_mutex_lock(&self->mu);
    self->busy_since = now_ms();
    self->busy_timeout_ms = timeout_ms > 0 ? timeout_ms : self->cfg.timeout_ms;
    pthread_mutex_unlock(&self->mu);
    int rc = MPI_SUCCESS;
    for (size_t off = 0; off < count && rc == MPI_SUCCESS; off += MPI_CHUNK) {
        size_t n = count - off < MPI_CHUNK ? count - off : MPI_CHUNK;
        const char *s = (const char *)send + off * esz;
        char *r = (char *)recv + off * esz;
        rc = MPI_Allreduce(s == r ? MPI_IN_PLACE : s, r, (int)n, mt, mo, MPI_COMM_WORLD);
    }
    pthread_mutex_lock(&self->mu);
    self->busy_since = 0;
    self->bytes += count * esz;
    pthread_mutex_unlock(&self->mu);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        return err_set(ERR_PEER, "mpi: MPI_Allreduce failed: %s", msg);
    }
    if (op == OP_AVG && count) dt_scale(recv, count, dt, 1.0f / (float)self->comm->world);
    return 0;
}

static void s_destroy(engine_t **self_p);

static int s_create(engine_t **self_p, comm_t *comm, const engine_cfg_t *cfg)
{
    if (cfg->device >= 0) return err_set(ERR_INVAL, "mpi: host buffers only (this OpenMPI is not CUDA-aware); no --gpus");
    if (cfg->impl && strcmp(cfg->impl, "host")) return err_set(ERR_INVAL, "mpi: unknown implementation '%s' (host)", cfg->impl);
    CHECK(s_init(comm));
    engine_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->comm = comm;
    self->cfg = *cfg;
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = comm->timeout_ms;
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cv, NULL);
    int rc = 0;
    if (pthread_create(&self->watchdog, NULL, s_watchdog, self) != 0) rc = err_set(ERR_SYS, "mpi: cannot start the watchdog");
    else self->wd_started = 1;
    if (rc == 0) rc = arstep_new(&self->step, comm, &self->cfg, s_mpi_fn, self);
    if (rc < 0) {
        s_destroy(&self);
        return rc;
    }
    *self_p = self;
    return 0;
}

ARSTEP_FORWARDERS(step)
ARSTEP_FORWARD_ALLREDUCE(step)

static void s_stats(engine_t *self, engine_stats_t *out)
{
    arstep_stats(self->step, out);
    /* MPI's own traffic is not visible to us: report what a ring moves for the same bytes */
    const int P = self->comm->world;
    pthread_mutex_lock(&self->mu);
    uint64_t b = P > 1 ? self->bytes * 2 * (uint64_t)(P - 1) / (uint64_t)P : 0;
    pthread_mutex_unlock(&self->mu);
    out->bytes_sent += b;
    out->bytes_received += b;
    out->impl = mpi_engine_library();
}

static void s_destroy(engine_t **self_p)
{
    engine_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    arstep_destroy(&self->step);
    if (self->wd_started) {
        pthread_mutex_lock(&self->mu);
        self->wd_stop = 1;
        pthread_cond_broadcast(&self->cv);
        pthread_mutex_unlock(&self->mu);
        pthread_join(self->watchdog, NULL);
    }
    pthread_mutex_destroy(&self->mu);
    pthread_cond_destroy(&self->cv);
    free(self);
    *self_p = NULL;
}

const engine_ops_t mpi_engine = {
    .name = "mpi",
    .impls = "host",
    ARSTEP_ENGINE_OPS,
};
