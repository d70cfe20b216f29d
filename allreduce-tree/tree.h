/* tree.h: the tree allreduce engine: a pipelined double binary tree on the host path and a
 * GPU-direct tree (CUDA IPC) within a node. */
#ifndef SB_TREE_H
#define SB_TREE_H
#include "core/engine.h"

extern const engine_ops_t tree_engine;

/* Double binary tree shape: for tree t (0 or 1) give rank r's parent (-1 for the root) and up to two
 * children (-1 when absent). Each rank is interior in at most one tree. */
void tree_shape(int world, int t, int rank, int *parent, int child[2]);
int  tree_allreduce_host(comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt,
                         redop_t op, size_t seg_bytes, int timeout_ms);

#endif
