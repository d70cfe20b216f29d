/* tree.h: the tree allreduce engine: a pipelined double binary tree on the host path and a
 * GPU-direct tree (CUDA IPC) within a node. */
#ifndef SB_TREE_H
#define SB_TREE_H
#include "core/engine.h"

extern const engine_ops_t tree_engine;

/* Double binary tree shape: for tree t (0 or 1) give rank r's parent (-1 for the root) and up to two
 * children (-1 when absent). Each rank is interior in at most one tree. */
void tree_shape(int world, int t, int rank, int *parent, int child[2]);
/* Depth of rank in tree t (edges from the root; -1 if the shape had a cycle). */
int  tree_depth(int world, int t, int rank);
/* The split of count elements between the trees: [0, c0) goes up and down tree 0, [c0, count) tree 1.
 * (The schedule tree_allreduce_host runs and `harness explain` prints: in tree t, a rank at depth d
 * sends its reduced half up to its parent at step D - d and the final half down to its children at
 * step D + d, D the tree's depth; segments pipeline through the same steps one after another.) */
size_t tree_split(size_t count);
/* The host collective over comm's transport: out-of-place or in-place (sendbuf == recvbuf); sum or avg
 * (the root scales once by 1/P, every rank ends bit-identical); f32/f16/bf16 (f32 accumulation); any
 * count. seg_bytes (0 = tree_seg_default) and count must be the same on every rank; timeout_ms <= 0
 * means comm->timeout_ms. */
int  tree_allreduce_host(comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt,
                         redop_t op, size_t seg_bytes, int timeout_ms);
/* The segment tree_allreduce_host picks for a message of `bytes` over world ranks when seg_bytes is 0
 * (before the cap at the transport's slot size): for cost models. */
size_t tree_seg_default(int world, size_t bytes);
/* tree_sched.c: the engine's schedule entry (engine_ops_t.schedule): 2 D + 1 steps of the two trees. */
int tree_sched(const void *opts, const sched_env_t *env, size_t count, size_t esz, sched_t *out);

#endif
