/* sim_int.h: what the SimGrid replay (sim_simgrid.c) takes from the plan (sim_plan.c): every bucket's
 * schedule cut into each rank's entries, step by step or in merged groups, with the delays that keep the
 * merged steps' latencies, and the links' bytes a step. */
#ifndef SB_HARNESS_SIM_INT_H
#define SB_HARNESS_SIM_INT_H
#include "harness/simulate/sim.h"
#include <stdio.h>

/* A transfer a fan-out bundle carries: its sender and receiver, its piece, and the receives of the piece its
 * sender holds before it may go (h_sim_entry_t.req). */
typedef struct {
    int src, rank, piece, req;
} h_sim_member_t;

/* One rank's part of one group of a bucket's steps: a peer it sends to or receives from, and the bytes
 * (merged per pair, direction and group). */
typedef struct {
    int grp, peer, send;
    int piece;                    /* dataflow schedules: the piece (entries are then per transfer, in order) */
    int conn;                     /* dataflow schedules: the connection, by the transfer's op (reductions towards an
                                   * owner and complete values back travel FIFOs of their own, as a PS's pushes and
                                   * pulls do); 0 otherwise */
    int req;                      /* dataflow sends: the receives of its piece this rank holds before it may go */
    int npc;                      /* dataflow: the pieces this communication carries (1; > 1: a stream, a connection's
                                   * run of pieces, listed in h_sim_bplan_t.mp from mp0 with their bytes in mpb; -1: a
                                   * receive that a fan-out bundle into another rank of the source's class credits, no
                                   * communication of its own) */
    int nbm;                      /* dataflow: a fan-out bundle (> 0): the transfers it carries, listed in
                                   * h_sim_bplan_t.bm from bm0 (their receivers are credited when it is in) */
    uint32_t bm0;
    uint32_t mp0;
    double hop_s;                 /* a stream: its route's latency */
    double lat_s;                 /* a stream: the latencies of its pieces after the first, which a connection carrying
                                   * them one at a time pays (its pieces are held that much after the flow carried them) */
    uint64_t bytes;
} h_sim_entry_t;

typedef struct {
    h_sim_entry_t *e;             /* all ranks' entries, rank by rank, each rank's by group, sends first */
    size_t *first;                /* world + 1: rank r's entries are e[first[r] .. first[r + 1]) */
    double *delay;                /* per group and rank (delay[g * world + r]): the latencies of the chain of
                                   * transfers the rank's last send of the group waits for in a step-by-step
                                   * replay, its group's steps after the first; it waits them before the
                                   * group's sends. NULL when nothing is merged */
    int ngroups;
    int dataflow, npieces;        /* the schedule's sched_t.dataflow, and its pieces */
    int *mp;                      /* the pieces of every stream (h_sim_entry_t.npc > 1); NULL: none */
    uint64_t *mpb;                /* their bytes, beside mp */
    uint32_t nmp;                 /* mp's entries */
    h_sim_member_t *bm;           /* the transfers of every fan-out bundle (h_sim_entry_t.nbm > 0); NULL: none */
} h_sim_bplan_t;

typedef struct {
    int world, workers, nb, machines;
    h_sim_bplan_t *b;             /* nb */
    uint64_t comms_step;          /* communications a step */
    uint64_t nic_max_bytes;       /* the busiest NIC direction a step */
    double busy_max_s;            /* the busiest link's bytes a step at its payload rate */
    int busy_is_nic;              /* h_sim_result_t.link_is_nic */
    int merge;                    /* the most steps in one group */
    int dataflow;                 /* the schedules are dataflow ones (sched_t.dataflow) */
    int streams;                  /* dataflow: the longest stream middle (pieces in one communication; 1: none) */
    int bundle;                   /* dataflow: the most transfers in one fan-out bundle (1: none) */
    int pool;                     /* the platform's dedicated server machines merged this many to one (h_sim_platform_t.pool,
                                   * the fan-out reduction; 0: none); machines counts them merged */
    int pool_unequal;             /* h_sim_result_t.pool_unequal */
    int machines_apart;           /* the machines, none merged */
    int stale;                    /* the schedules' sched_t.stale (owners answering ahead of the others' pushes) */
    uint64_t actors;              /* the replay's actors: a rank's, and in a dataflow replay one a connection and
                                   * direction (its memory grows with them: h_sim_result_t.rss_mb) */
} h_sim_plan_t;

/* A dataflow rank's connections: one a peer, direction and op, the ops past H_SIM_FLOW_CONNS - 1 sharing the last;
 * h_sim_conn_key numbers entry e's among its rank's W x H_SIM_FLOW_CONNS x 2 (the replay's actor for it). */
#define H_SIM_FLOW_CONNS 4
static inline size_t h_sim_conn_key(const h_sim_entry_t *e)
{
    int c = e->conn < H_SIM_FLOW_CONNS ? e->conn : H_SIM_FLOW_CONNS - 1;
    return ((size_t)e->peer * H_SIM_FLOW_CONNS + (size_t)c) * 2 + !e->send;
}

/* The machine rank r is on: workers w on GPU machine w / G; dedicated servers (r >= workers) on machines
 * of their own (server j on nodes + j mod K) or, without server machines, on GPU machine j mod N. */
int h_sim_machine(const h_sim_platform_t *pl, int workers, int r);
/* The rack machine m is in (0 on a star) and the racks in all, of a plan's machines. */
static inline int h_sim_rack(const h_sim_platform_t *pl, int m) { return pl->rack > 0 ? m / pl->rack : 0; }
/* The links' payload rates in bytes a second (the platform's, h_sim_xml): a GPU's link inside a machine, a NIC,
 * and a fat tree's leaf uplink (R x NIC / O; 0 on a star). */
static inline double h_sim_gpu_Bps(const h_sim_platform_t *pl) { return pl->intra_bps * pl->framing / 8; }
static inline double h_sim_nic_Bps(const h_sim_platform_t *pl) { return pl->inter_bps * pl->framing / 8; }
static inline double h_sim_up_Bps(const h_sim_platform_t *pl)
{
    return pl->rack > 0 ? h_sim_nic_Bps(pl) * pl->rack / pl->oversub : 0;
}
/* Cut w's schedules for pl: 0, ERR_INVAL (bad work, ranks that do not fit) or ERR_NOMEM (err_set). */
int h_sim_plan(const h_sim_platform_t *pl, const h_sim_work_t *w, h_sim_plan_t *p);
void h_sim_plan_free(h_sim_plan_t *p);
/* Why a replay's child ended without a result, in words, into out: its wait status, and for a kill the likely
 * cause (the out-of-memory killer) with the memory it had reached (MiB, 0: unknown), its actors and the memory
 * available when it started (MiB, 0: unknown). */
void h_sim_fail_words(char *out, size_t len, int status, double rss_mb, uint64_t actors, double avail_mb);
/* The replay of plan p on pl in a child process (sim_simgrid.c): writes 'R' and res's bytes (its step times), or
 * '!' and a message, to fd, and exits. */
void h_sim_child(int fd, const h_sim_platform_t *pl, const h_sim_plan_t *p, const h_sim_work_t *w, h_sim_result_t *res);
/* The platform of plan p on pl as SimGrid XML into f: hosts r0.. (ranks), routers m0.. (machines, pl->pool's
 * server machines merged) and sw, links u/d (a host to its machine and back) and nu/nd (a machine to the switch and
 * back); a fat tree (pl->rack > 0) puts leaf routers l0.. with uplinks lu/ld between the machines and sw. */
void h_sim_xml(FILE *f, const h_sim_platform_t *pl, const h_sim_plan_t *p);

#endif
