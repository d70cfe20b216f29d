/* peers.h: the peers our engines are measured against, in the harness: peer engines of the registry
 * (engines.c: MPI_Allreduce as --engine mpi, started through mpirun) and PyTorch DDP / gloo run from
 * peers/torch_ddp.py (peers.c), added to a run by --peers and marked as peers in reports. */
#ifndef SB_HARNESS_PEERS_H
#define SB_HARNESS_PEERS_H
#include "harness/harness.h"
#include "harness/launch.h"

/* engines.c: the peer engines this build has (found by h_engine_find, not among h_engine_at) */
int h_peer_engine_count(void);
const engine_ops_t *h_peer_engine_at(int i);
/* 1 for a peer's results: a peer engine of the table, or a result engine name of a peer
 * ("mpi", "torch-*", "openmpi-*") whether or not this build has it */
int h_engine_is_peer(const char *name);
/* 1 when the engine's ranks must be MPI processes (the driver starts them through mpirun) */
int h_engine_via_mpirun(const char *name);
/* Why a known engine is not in this build ("this build has no MPI (...)"), or NULL. */
const char *h_engine_unbuilt(const char *name);

/* peers.c: start the launch's ranks through `mpirun -np N --oversubscribe ...` (as root, with
 * --allow-run-as-root), with the rendezvous environment h_launch gives (MASTER_ADDR/PORT, job id,
 * timeout); ranks take their rank from OMPI_COMM_WORLD_*. 0, ERR_PEER (a rank failed: mpirun's exit
 * code in the detail), ERR_NODEV when mpirun is missing, ERR_INTERRUPT on a signal. */
int h_launch_mpirun(const h_launch_cfg_t *cfg, int argc, char **argv);

/* peers.c: PyTorch as a peer: the python that can import torch (peers/.venv's, else python3), and
 * the script; 0 with both filled, or ERR_NODEV with why in err_detail. */
int h_torch_peer_find(char *python, size_t plen, char *script, size_t slen);
/* Run peers/torch_ddp.py for mode ("bench" or "train") at world ranks with o's settings, appending
 * to o->json. 0; ERR_NODEV when torch is not there (said once on stderr, then skipped); ERR_PEER when
 * the script failed. */
int h_torch_peer_run(const h_opts_t *o, const char *mode, int world);

#endif
