/* boot.h: who am I and where are the others: rank/world/local rank from the init method and the
 * launcher's environment (torchrun, Slurm, OpenMPI conventions), and the rendezvous key-value store
 * (gloo style: set / get-with-wait / add) that every later exchange is built on. */
#ifndef SB_BOOT_H
#define SB_BOOT_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int  rank, world;            /* global */
    int  local_rank, local_world;/* within this node; local_world 0 and local_rank -1 if unknown
                                    (both known as 0 / 1 when world is 1) */
    char method[16];             /* "tcp", "env", "file" */
    char host[256];              /* tcp/env: master address */
    int  port;                   /* tcp/env: master port */
    char path[1024];             /* file: the shared path */
    char ifname[64];             /* --ifname / SYNCBENCH_SOCKET_IFNAME; "" = any */
    char job[64];                /* job id: isolates concurrent runs; from SYNCBENCH_JOB or the init method */
    int  timeout_ms;             /* every bootstrap step gives up after this */
    const char *source;          /* where rank/world came from: "args", "torchrun", "slurm", "openmpi" */
} boot_cfg_t;

/* Precedence (first found wins): rank/world args >= 0; RANK/WORLD_SIZE (torchrun); OMPI_COMM_WORLD_*
 * (OpenMPI: checked before Slurm because mpirun inside an sbatch script inherits SLURM_PROCID=0);
 * SLURM_PROCID/SLURM_NTASKS. The same order applies to the local rank/size. env:// always needs
 * MASTER_ADDR and MASTER_PORT, also under srun/mpirun. timeout_ms <= 0 picks 300 s.
 * job: SYNCBENCH_JOB (letters, digits, '.', '_', '-') else "<method>-<hash of host:port or path>".
 * ifname: copied from SYNCBENCH_SOCKET_IFNAME here; a caller that writes cfg->ifname after this call
 * (e.g. from --ifname) overrides it. Only IPv4 master addresses / host names are supported.
 *
 * Fill cfg from an init method ("tcp://HOST:PORT", "env://", "file:///path"; NULL = "env://") plus the
 * environment: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; when those
 * are absent, SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID(/SLURM_NTASKS_PER_NODE) or
 * OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE. rank/world passed >= 0 override the environment.
 * Validates (rank < world, world >= 1, port range, ...) with a clear err_set detail. */
int boot_cfg_init(boot_cfg_t *cfg, const char *init_method, int rank, int world, int timeout_ms);

/* The address this rank should listen on for peers: the IPv4 address of cfg->ifname when set (exact
 * name, else the first interface whose name starts with it), else the source address the kernel picks
 * towards the master (127.0.0.1 for a loopback master; for file:// the first up non-loopback
 * interface). ERR_NODEV names the interfaces that exist when ifname has no IPv4 address. */
int boot_local_addr(const boot_cfg_t *cfg, char *out, size_t len);

typedef struct store store_t;

/* Limits of the store: keys are NUL-terminated strings of 1..STORE_KEY_MAX bytes; values hold at most
 * STORE_VAL_MAX bytes. */
#define STORE_KEY_MAX 256
#define STORE_VAL_MAX (1 << 28)

/* Join the rendezvous. tcp/env: rank 0 hosts a ZeroMQ server on host:port (ERR_ADDRINUSE with a clear
 * detail if the port is taken), every rank connects and says hello with (rank, world); the server
 * rejects a world that disagrees (ERR_MISMATCH) or a rank already joined (ERR_DUP); an unreachable
 * master gives ERR_TIMEOUT after cfg->timeout_ms. file: the same checks through files created with
 * O_EXCL in the shared directory. Returns when every rank has joined; a timeout detail says either
 * "could not reach master HOST:PORT" or "only K of W ranks joined ... (missing: ...)".
 * file:// naming: every file is "<job>@..." in the directory (created if needed); the last rank to
 * leave removes them. Files left by a crashed run with the same job id make the next run fail with
 * ERR_DUP / ERR_MISMATCH naming them: remove them, use a fresh directory or another SYNCBENCH_JOB.
 * A store_t may be shared between threads, but calls are serialized: a waiting get holds up the
 * others on the same store_t. Not usable across fork(). */
int  store_new(store_t **self_p, const boot_cfg_t *cfg);
int  store_set(store_t *self, const char *key, const void *val, size_t len);
/* Wait until key exists (or timeout_ms; < 0 = cfg->timeout_ms), then return a malloc'd copy in *val
 * (caller frees; NUL-terminated one byte past *len for convenience). ERR_TIMEOUT if never set. */
int  store_get(store_t *self, const char *key, void **val, size_t *len, int timeout_ms);
/* Atomically add delta to the integer counter key (created at 0) and return the new value. Counters are
 * stored as decimal text, so store_get on the key reads e.g. "3"; add on a non-number is ERR_INVAL. */
int  store_add(store_t *self, const char *key, int64_t delta, int64_t *out);
/* Remove key (absent is fine). */
int  store_del(store_t *self, const char *key);
/* Leave: rank 0 keeps serving until every rank has left (bounded by the timeout). Safe twice. */
void store_destroy(store_t **self_p);

#endif
