/* sched.h: an engine's communication schedule for one allreduce, as data: the pieces the buffer is cut
 * into, then steps of transfers (source, destination, piece, and whether the receiver adds it to what it
 * holds or stores it). A step's transfers all leave with what their senders held when the step began:
 * a rank sends a step's pieces once its receives of the step before are in (or, in a dataflow schedule,
 * once it holds each piece). Engines declare theirs (engine_ops_t.schedule); `harness explain`
 * prints them, and every reader that counts bytes (traffic matrices, cost models, a simulator) can
 * read the same data instead of an engine's own functions. */
#ifndef SB_SCHED_H
#define SB_SCHED_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    SCHED_REDUCE = 0,     /* the receiver adds the piece to its own values of it */
    SCHED_STORE  = 1      /* the receiver replaces its values of the piece with it (a complete value) */
} sched_op_t;

typedef struct {
    int src, dst;         /* ranks; src == dst: a hand-over inside one process (no link) */
    int piece;            /* index into sched_t.pieces */
    sched_op_t op;
} sched_xfer_t;

typedef struct {
    size_t off, count;    /* elements [off, off + count) of the buffer */
    char   name[16];      /* "c0", "h1", "p3", "all" */
} sched_piece_t;

typedef struct {
    char   what[96];      /* "reduce-scatter 1 of 3", "push (workers -> servers)" */
    char   note[160];     /* what else happens in the step, without a transfer ("each server sums ..."), or "" */
    size_t first, n;      /* its transfers: x[first .. first + n) */
} sched_step_t;

/* Where the allreduce runs, as the engine would see it. */
typedef struct {
    int workers;          /* training ranks */
    int one_host_shm;     /* every rank on one host over shared memory (what the one-shot path needs) */
    int device;           /* -1: host buffers; >= 0: GPU buffers (engines schedule their host path only) */
    int segmented;        /* 0: one piece per chunk (half, partition), as explain draws it; 1: the segments
                           * the engine pipelines through its steps, as it runs them (a step's sends then wait
                           * only for the receives of the step before) */
    size_t seg_bytes;     /* segmented: the pipelining segment (--seg-kb); 0: the engine's default */
    double size_scale;    /* > 1: the allreduce an emulated run's engine ran on tensors shrunk by this factor
                           * (engine_cfg_t.size_scale), declared at full size: sizes the engine derives from its
                           * buffer (segments cut from the shrunk buffer) come out this much larger; 0 or 1: none */
    int gpus_per_node;    /* workers a machine, consecutive ranks (worker w on machine w / G; what comm_t.node_of
                           * says at run time); 0 or 1: every worker a machine of its own. Engines that reduce
                           * within a machine first (a hierarchical allreduce, a PS's local aggregation) read it */
} sched_env_t;

typedef struct {
    int    world;         /* ranks in all: workers, then dedicated servers */
    int    workers;
    char   algo[16];      /* what the engine runs at this size: "ring", "oneshot", "tree", "ps" */
    char   about[320];    /* one or two lines on the schedule and why this one runs at this size */
    size_t count, esz;    /* the allreduce: count elements of esz bytes */
    sched_piece_t *pieces;
    int    npieces;
    sched_step_t *steps;
    int    nsteps;
    sched_xfer_t *x;
    size_t nx;
    int    dataflow;      /* 0: lock-step (a rank sends a step once all its receives of the step before are in);
                           * 1: a rank forwards each piece once it holds it (its receives of that piece in earlier
                           * steps are in), one transfer at a time on each connection, in schedule order, and the
                           * next collective's transfers may start before this one's end (a PS's partitions) */
    int    owners;        /* 1: every piece is summed at one rank, its owner (a PS's server), from the pushes of the
                           * ranks that hold it (its transfers with SCHED_REDUCE), and the owner alone answers with
                           * the complete, updated piece (SCHED_STORE) once those pushes are in, whatever the other
                           * pieces do: a piece's replies follow its own pushes, and the optimizer runs at the
                           * owners, not on the workers; 0: the pieces are reduced along the steps (an allreduce) */
    int    stale;         /* owners: how far an owner's answer to a rank may run ahead of the pushes of the others, in
                           * rounds (collectives of the same pieces, a training run's steps): 0, none (every rank's
                           * push of this round is in: sync); k > 0, the others' pushes of k rounds before (SSP's
                           * bound); < 0, unbounded (async: the answer follows the rank's own push) */
    int    bad;           /* out of memory while building: sched_done reports it */
    int    cap_p, cap_s;
    size_t cap_x;
} sched_t;

/* Building (engines): start with the world and the allreduce; add pieces (their index is returned),
 * steps (printf-style title; later transfers join the latest step) and transfers; sched_done checks
 * that every transfer names ranks and a piece that exist and returns 0, ERR_NOMEM or ERR_INVAL (err_set). */
void sched_init(sched_t *s, int world, int workers, size_t count, size_t esz, const char *algo);
int  sched_piece(sched_t *s, size_t off, size_t count, const char *name);
void sched_step(sched_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sched_note(sched_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sched_xfer(sched_t *s, int src, int dst, int piece, sched_op_t op);
int  sched_done(sched_t *s);
void sched_free(sched_t *s);

/* Reading: the bytes one transfer carries; the world x world matrix of link bytes (row = sender; a
 * hand-over inside one process counts nothing), added to m, for all steps or, step >= 0, one. */
size_t sched_xfer_bytes(const sched_t *s, const sched_xfer_t *x);
void   sched_links(const sched_t *s, int step, uint64_t *m);

#endif
