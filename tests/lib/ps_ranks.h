/* ps_ranks.h: helpers shared by the parameter-server tests (test_ps.c, test_ps_failure.c, test_ps_trust.c). */
#ifndef SB_TEST_PS_RANKS_H
#define SB_TEST_PS_RANKS_H
#include <stddef.h>
#include <stdint.h>
#include "core/comm.h"
#include "core/engine.h"
#include "ps/ps.h"
#include "ps/wire.h"

#define PS_TEST_TO 15000 /* ms: every blocking call of the PS tests */

typedef struct {
    int nworkers, colocate, mode, ssp_k, timeout_ms;
    size_t part_bytes;
    int van;                 /* PS_VAN_* (0: auto) */
    int lane;                /* PS_LANE_* (0: auto) */
    int window;              /* --ps-window (0: none) */
    int local_agg;           /* --ps-local-agg */
} ps_topo_t;

/* "[rank R] what: <err_trace>" on stderr (clears the error trace) */
void ps_test_report(const char *what, int rc);
/* Join the job from the rank environment (env://): 0 or the error, reported. */
int ps_test_open(comm_t **comm, int timeout_ms);
/* Server 0's tcp endpoint (the first line of what it published: "TCP\nIPC\nPID ..."), malloc'd. */
int ps_test_server_ep(comm_t *comm, void **val, size_t *len);
/* the engine config of t; its PS options live in *po (which must outlive the config) */
engine_cfg_t ps_test_cfg(const ps_topo_t *t, int world, ps_opts_t *po);
/* Dedicated server rank: create, serve, destroy; 0 when it served and rejected expect_rejected messages. */
int ps_test_serve(comm_t *comm, const ps_topo_t *t, uint64_t expect_rejected);
/* A server rank's whole part: ps_test_serve, then leave the job (*comm destroyed); returns what the
 * rank function returns. */
int ps_test_server_rank(comm_t **comm, const ps_topo_t *t, uint64_t expect_rejected);
/* The parameters every test model starts from. */
void ps_test_init_params(float *p, size_t n);
/* Those n parameters written into p, as a parameter set with f32 gradients and SGD's defaults. */
param_set_t ps_test_sgd_params(float *p, size_t n);
/* A worker's engine of topology t in a job of world ranks: created into *e and attached to ps; 0 or
 * the error, not reported (*e may be set even then: destroy it). */
int ps_test_worker(engine_t **e, comm_t *comm, const ps_topo_t *t, int world, const param_set_t *ps);
/* One step of n gradients 0.01 * (rank + 1) at step t: 0 or the error (its detail kept in
 * ps_test_last_detail, then reported). */
int ps_test_plain_step(engine_t *e, float *g, size_t n, uint64_t t, int rank);
extern char ps_test_last_detail[512];

/* Raw wire messages on a ZeroMQ socket, past the engine: send header h and nfr payload frames
 * (0, or ERR_IO: a frame that cannot leave within 2 s); receive one reply (waits up to 5 s): its header in h, its first payload frame (up to
 * cap bytes) in out (may be NULL); returns its type, or -1. */
int ps_test_raw_send(void *sock, const wire_hdr_t *h, const void *const *fr, const size_t *len, int nfr);
int ps_test_raw_recv(void *sock, wire_hdr_t *h, void *out, size_t cap);

#endif
