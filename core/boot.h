/* boot.h: who am I and where are the others: rank/world/local rank from the init method and the
 * launcher's environment (torchrun, Slurm, OpenMPI conventions), and the rendezvous key-value store
 * (gloo style: set / get-with-wait / add, declared in core/store.h) that every later exchange is built on.
 * Configuration: core/boot_cfg.c; joining the store: core/boot.c; the store kinds: core/store_*.c. */
#ifndef SB_BOOT_H
#define SB_BOOT_H
#include <stddef.h>
#include <stdint.h>
#include "core/store.h"
#include "core/auth.h"

typedef struct boot_cfg {
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
    auth_t auth;                 /* the job secret (core/auth.h): from SYNCBENCH_JOB_SECRET(_FILE) here; a
                                    launcher may set it (and auth.require, for --require-auth) after init */
} boot_cfg_t;

/* timeout_ms <= 0 given to boot_cfg_init (or found in a cfg given to store_new) means this. */
#define BOOT_DEFAULT_TIMEOUT_MS 300000

/* Precedence (first found wins): rank/world args >= 0; RANK/WORLD_SIZE (torchrun); OMPI_COMM_WORLD_*
 * (OpenMPI: checked before Slurm because mpirun inside an sbatch script inherits SLURM_PROCID=0);
 * SLURM_PROCID/SLURM_NTASKS. The same order applies to the local rank/size. env:// always needs
 * MASTER_ADDR and MASTER_PORT, also under srun/mpirun. timeout_ms <= 0 picks 300 s.
 * job: SYNCBENCH_JOB (letters, digits, '.', '_', '-') else "<method>-<hash of host:port or path>".
 * auth: auth_secret_load (SYNCBENCH_JOB_SECRET, SYNCBENCH_JOB_SECRET_FILE, SYNCBENCH_REQUIRE_AUTH); a bad
 * secret or a secret file that is not 0600 and ours fails here with ERR_AUTH / ERR_INVAL.
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

/* Resolve an IPv4 address or host name to dotted text in ip (len >= 16); *is_local (when not NULL) says
 * whether it is one of this host's addresses (any 127/8 address counts). ERR_INVAL if it cannot be
 * resolved. */
int boot_resolve_ipv4(const char *host, char *ip, size_t len, int *is_local);

#endif
