/* peers.h: the peers our engines are measured against, in the harness: peer engines of the registry
 * (registry/engines.c: MPI_Allreduce as --engine mpi, started through mpirun) and PyTorch DDP / gloo run from
 * peers/torch_ddp.py (peers.c), added to a run by --peers and marked as peers in reports. */
#ifndef SB_HARNESS_PEERS_H
#define SB_HARNESS_PEERS_H
#include "harness/cli/opts.h"
#include "harness/launch/launch.h"

/* peers.c: start the launch's ranks through `mpirun -np N --oversubscribe ...` (as root, with
 * --allow-run-as-root), with the rendezvous environment h_launch gives (MASTER_ADDR/PORT, job id,
 * timeout); ranks take their rank from OMPI_COMM_WORLD_*. 0, ERR_PEER (a rank failed: mpirun's exit
 * code in the detail), ERR_NODEV when mpirun is missing, ERR_INTERRUPT on a signal. */
int h_launch_mpirun(const h_launch_cfg_t *cfg, int argc, char **argv);

/* The checkout holding this program (BUILD/harness is one level below it) into out; 0 or -1. */
int h_repo_root(char *out, size_t len);
/* peers.c: PyTorch as a peer: the python that can import torch (peers/.venv's, else python3), and
 * the script; 0 with both filled, or ERR_NODEV with why in err_detail. */
int h_torch_peer_find(char *python, size_t plen, char *script, size_t slen);
/* Run peers/torch_ddp.py for mode ("bench" or "train") at world ranks with o's settings, appending
 * to o->json. 0; ERR_NODEV when torch is not there (said once on stderr, then skipped); ERR_PEER when
 * the script failed. */
int h_torch_peer_run(const h_opts_t *o, const char *mode, int world);

#endif
