/* test_ceiling.c: op move, the engines' transport ceiling (`harness bench --op move`): every engine
 * that offers it moves exactly the bytes its sum moves (the same schedule, nothing reduced), over each
 * host algorithm (ring, one-shot, tree); an engine without it (MPI) says so instead of summing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/comm.h"
#include "core/err.h"
#include "ring/ring.h"
#include "allreduce-tree/tree.h"
#include "tests/lib/ranks.h"

#define TO 20000

typedef struct {
    const engine_ops_t *ops;
    int ring_algo;            /* ring: RING_ALGO_* */
    size_t count;
} ceil_case_t;

static int s_rank(int rank, int world, void *arg)
{
    (void)rank;
    (void)world;
    const ceil_case_t *c = arg;
    boot_cfg_t bc;
    comm_t *comm = NULL;
    char b[512];
    int rc = boot_cfg_init(&bc, "env://", -1, -1, TO);
    if (rc == 0) rc = comm_new(&comm, &bc, NULL);
    ring_opts_t ro;
    ring_opts_init(&ro);
    ro.algo = c->ring_algo;
    engine_cfg_t cfg = {.device = -1, .timeout_ms = TO, .opts = c->ops == &ring_engine ? &ro : NULL};
    engine_t *e = NULL;
    if (rc == 0) rc = c->ops->create(&e, comm, &cfg);
    float *in = calloc(c->count, sizeof(float)), *out = calloc(c->count, sizeof(float));
    engine_stats_t s0, s1, s2;
    int fail = rc < 0;
    if (!fail) {
        c->ops->stats(e, &s0);
        rc = c->ops->allreduce(e, in, out, c->count, DT_F32, OP_SUM, TO);
        c->ops->stats(e, &s1);
        if (rc == 0) rc = c->ops->allreduce(e, in, out, c->count, DT_F32, OP_MOVE, TO);
        c->ops->stats(e, &s2);
        fail = rc < 0;
    }
    if (fail) {
        fprintf(stderr, "%s: %s\n", c->ops->name, err_trace(rc, b, sizeof b));
    } else {
        uint64_t sum = s1.bytes_sent - s0.bytes_sent, move = s2.bytes_sent - s1.bytes_sent;
        if (sum == 0 || move != sum) {
            fprintf(stderr, "%s (%s): op move sent %llu bytes, op sum %llu\n", c->ops->name, s2.algo ? s2.algo : "-",
                    (unsigned long long)move, (unsigned long long)sum);
            fail = 1;
        }
    }
    free(in);
    free(out);
    if (e) c->ops->destroy(&e);
    comm_destroy(&comm);
    return fail;
}

Test(ceiling, ring_moves_what_it_sums, .timeout = 60)
{
    ceil_case_t c = {&ring_engine, RING_ALGO_RING, 100003};
    cr_assert_eq(run_ranks(3, s_rank, &c, 40000), 0);
}

Test(ceiling, oneshot_moves_what_it_sums, .timeout = 60)
{
    ceil_case_t c = {&ring_engine, RING_ALGO_ONESHOT, 4099};
    cr_assert_eq(run_ranks(4, s_rank, &c, 40000), 0);
}

Test(ceiling, tree_moves_what_it_sums, .timeout = 60)
{
    ceil_case_t c = {&tree_engine, 0, 100003};
    cr_assert_eq(run_ranks(4, s_rank, &c, 40000), 0);
}
