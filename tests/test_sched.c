/* test_sched.c: the engines' declared schedules (engine_ops_t.schedule, core/sched.h): each is a correct
 * allreduce (replayed on sets of contributions, every worker ends holding every worker's input of every
 * element, each exactly once), moves the bytes its algorithm should, follows the engine's own choice of
 * algorithm by size, and a malformed schedule is refused. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/sched.h"
#include "core/err.h"
#include "ring/ring.h"
#include "allreduce-tree/tree.h"
#include "ps/ps.h"

/* Replay s on per-element contribution counts: cnt[rank][element][worker] (workers <= 16, a few elements
 * per piece is enough: every element of a piece moves together). Returns 0 when every worker ends with
 * exactly one of every worker's input in every element; else -1 with why. */
static int s_replay(const sched_t *s, char *why, size_t len)
{
    int W = s->world, P = s->workers;
    size_t n = s->count;
    uint8_t *c = calloc((size_t)W * n * (size_t)P, 1), *snap = malloc((size_t)W * n * (size_t)P);
    cr_assert(c && snap);
#define C(buf, r, e, w) (buf)[(((size_t)(r) * n) + (e)) * (size_t)P + (size_t)(w)]
    for (int r = 0; r < P; r++)
        for (size_t e = 0; e < n; e++) C(c, r, e, r) = 1;
    for (int k = 0; k < s->nsteps; k++) {
        memcpy(snap, c, (size_t)W * n * (size_t)P);   /* a step's sends leave with what was held when it began */
        const sched_step_t *st = &s->steps[k];
        for (size_t i = st->first; i < st->first + st->n; i++) {
            const sched_xfer_t *x = &s->x[i];
            const sched_piece_t *p = &s->pieces[x->piece];
            if (x->src == x->dst) continue;   /* a hand-over inside one process adds nothing new */
            for (size_t e = p->off; e < p->off + p->count; e++)
                for (int w = 0; w < P; w++)
                    C(c, x->dst, e, w) = x->op == SCHED_REDUCE ? (uint8_t)(C(c, x->dst, e, w) + C(snap, x->src, e, w))
                                                              : C(snap, x->src, e, w);
        }
    }
    int rc = 0;
    for (int r = 0; r < P && !rc; r++)
        for (size_t e = 0; e < n && !rc; e++)
            for (int w = 0; w < P && !rc; w++)
                if (C(c, r, e, w) != 1) {
                    snprintf(why, len, "rank %d element %zu holds worker %d's input %d times", r, e, w, C(c, r, e, w));
                    rc = -1;
                }
#undef C
    free(c);
    free(snap);
    return rc;
}

typedef int (*s_sched_fn)(const void *, const sched_env_t *, size_t, size_t, sched_t *);

static int g_segmented;
static size_t g_seg_bytes;
static int g_gpn;   /* sched_env_t.gpus_per_node */

static void s_correct(const char *name, s_sched_fn fn, const void *opts, int P, size_t count, const char *algo)
{
    sched_env_t env = {.workers = P, .one_host_shm = 1, .device = -1, .segmented = g_segmented, .seg_bytes = g_seg_bytes,
                       .gpus_per_node = g_gpn};
    sched_t s;
    cr_assert_eq(fn(opts, &env, count, 4, &s), 0, "%s P=%d n=%zu: %s", name, P, count, err_detail());
    if (algo) cr_expect_str_eq(s.algo, algo, "%s P=%d n=%zu", name, P, count);
    char why[256];
    cr_expect_eq(s_replay(&s, why, sizeof why), 0, "%s P=%d n=%zu (%s): %s", name, P, count, s.algo, why);
    sched_free(&s);
}

Test(sched, every_engine_schedule_is_an_allreduce)
{
    ring_opts_t ring;
    ring_opts_init(&ring);
    ps_opts_t ps = {.servers = 2, .partition_bytes = 64};
    ps_opts_t coloc = {.colocate = 1, .partition_bytes = 64};
    for (int P = 2; P <= 12; P++) {
        for (size_t n = 1; n <= 61; n += 20) {
            s_correct("ring", ring_sched, &ring, P, n, "oneshot");   /* small: the one-shot */
            s_correct("tree", tree_sched, NULL, P, n, "tree");
            s_correct("ps", ps_sched, &ps, P, n, "ps");
            s_correct("ps colocated", ps_sched, &coloc, P, n, "ps");
        }
        ring_opts_t r = ring;
        r.algo = RING_ALGO_RING;
        s_correct("ring (forced)", ring_sched, &r, P, 37, "ring");
        r.algo = RING_ALGO_ONESHOT;
        r.oneshot_max = 64;   /* a forced one-shot of several board-sized rounds */
        s_correct("ring (oneshot, rounds)", ring_sched, &r, P, 37, "oneshot");
    }
}

/* the segments the engines pipeline (a few elements each here, so every chunk has several, some empty):
 * still an allreduce, and the same bytes on every link as the unsegmented schedule */
Test(sched, segmented_schedules_are_the_same_allreduce)
{
    g_segmented = 1;
    g_seg_bytes = 8;   /* 2 f32 elements a segment */
    ring_opts_t ring;
    ring_opts_init(&ring);
    ring.algo = RING_ALGO_RING;
    for (int P = 2; P <= 9; P++)
        for (size_t n = 1; n <= 41; n += 10) {
            s_correct("ring segmented", ring_sched, &ring, P, n, "ring");
            s_correct("tree segmented", tree_sched, NULL, P, n, "tree");
        }
    g_segmented = 0;
    for (int e = 0; e < 2; e++) {
        s_sched_fn fn = e ? tree_sched : ring_sched;
        sched_env_t a = {.workers = 6, .device = -1}, b = a;
        b.segmented = 1;
        b.seg_bytes = 64;
        sched_t x, y;
        cr_assert_eq(fn(e ? NULL : &ring, &a, 1000, 4, &x), 0);
        cr_assert_eq(fn(e ? NULL : &ring, &b, 1000, 4, &y), 0);
        cr_expect_gt(y.nsteps, x.nsteps, "segments add steps");
        uint64_t mx[36] = {0}, my[36] = {0};
        sched_links(&x, -1, mx);
        sched_links(&y, -1, my);
        for (int i = 0; i < 36; i++) cr_expect_eq(mx[i], my[i], "%s link %d", e ? "tree" : "ring", i);
        sched_free(&x);
        sched_free(&y);
    }
}

/* The ring's choice follows the engine's: auto takes the one-shot up to its limit on one host, the ring
 * past it, and never the one-shot off shared memory or on GPU buffers. */
Test(sched, ring_chooses_as_the_engine_does)
{
    ring_opts_t o;
    ring_opts_init(&o);
    size_t lim = ring_oneshot_auto_max(&o, 4);
    sched_env_t env = {.workers = 4, .one_host_shm = 1, .device = -1};
    sched_t s;
    cr_assert_eq(ring_sched(&o, &env, lim / 4, 4, &s), 0);
    cr_expect_str_eq(s.algo, "oneshot");
    cr_expect_eq(s.nsteps, 1);
    sched_free(&s);
    cr_assert_eq(ring_sched(&o, &env, lim / 4 + 1, 4, &s), 0);
    cr_expect_str_eq(s.algo, "ring");
    cr_expect_eq(s.nsteps, 6);
    sched_free(&s);
    env.one_host_shm = 0;
    cr_assert_eq(ring_sched(&o, &env, 16, 4, &s), 0);
    cr_expect_str_eq(s.algo, "ring", "no one-shot across hosts");
    sched_free(&s);
    env.one_host_shm = 1;
    env.device = 0;
    cr_assert_eq(ring_sched(&o, &env, 16, 4, &s), 0);
    cr_expect_str_eq(s.algo, "ring", "the schedule of a GPU run is not the host one-shot's");
    sched_free(&s);
}

/* Bytes: the ring sends 2 (P - 1) / P of the buffer per rank to its right neighbour only; the PS's
 * server receives every worker's whole buffer and sends it back. */
Test(sched, link_bytes)
{
    ring_opts_t o;
    ring_opts_init(&o);
    o.algo = RING_ALGO_RING;
    sched_env_t env = {.workers = 4, .one_host_shm = 1, .device = -1};
    sched_t s;
    cr_assert_eq(ring_sched(&o, &env, 1024, 4, &s), 0);
    uint64_t m[64] = {0};
    sched_links(&s, -1, m);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) cr_expect_eq(m[i * 4 + j], j == (i + 1) % 4 ? 2u * 3 * 1024 : 0u, "%d->%d", i, j);
    uint64_t one[64] = {0};
    sched_links(&s, 0, one);
    cr_expect_eq(one[0 * 4 + 1], 1024u, "one step: one chunk of 1 KiB");
    sched_free(&s);
    ps_opts_t ps = {.servers = 1};
    cr_assert_eq(ps_sched(&ps, &env, 1024, 4, &s), 0);
    cr_expect_eq(s.world, 5);
    memset(m, 0, sizeof m);
    sched_links(&s, -1, m);
    for (int w = 0; w < 4; w++) {
        cr_expect_eq(m[w * 5 + 4], 4096u);
        cr_expect_eq(m[4 * 5 + w], 4096u);
    }
    sched_free(&s);
}

/* --ps-local-agg on machines of G workers: still an allreduce (dedicated or colocated servers, machines
 * that G does not divide), four steps, and each machine sends across machines (to other machines' ranks,
 * dedicated servers being machines of their own) and receives 1/G of what the plain PS's workers do. */
static uint64_t s_machine_bytes(const sched_t *s, int P, int G, int m, int out)
{
    uint64_t *mx = calloc((size_t)s->world * (size_t)s->world, sizeof *mx), b = 0;
    sched_links(s, -1, mx);
    for (int i = 0; i < s->world; i++)
        for (int j = 0; j < s->world; j++) {
            int mi = i < P ? i / G : -1 - i, mj = j < P ? j / G : -1 - j;
            if (mi != mj && (out ? mi : mj) == m) b += mx[(size_t)i * (size_t)s->world + (size_t)j];
        }
    free(mx);
    return b;
}

Test(sched, ps_local_agg)
{
    ps_opts_t ps = {.servers = 2, .partition_bytes = 64, .local_agg = 1};
    ps_opts_t coloc = {.colocate = 1, .partition_bytes = 64, .local_agg = 1};
    for (g_gpn = 2; g_gpn <= 4; g_gpn++)
        for (int P = 2; P <= 12; P++)
            for (size_t n = 1; n <= 61; n += 20) {
                s_correct("ps local-agg", ps_sched, &ps, P, n, "ps");
                s_correct("ps local-agg colocated", ps_sched, &coloc, P, n, "ps");
            }
    g_gpn = 0;
    int P = 8, G = 4;
    ps_opts_t plain = {.servers = 2};
    ps_opts_t lagg = {.servers = 2, .local_agg = 1};
    sched_env_t env = {.workers = P, .device = -1, .gpus_per_node = G};
    sched_t a, b;
    cr_assert_eq(ps_sched(&plain, &env, 1 << 20, 4, &a), 0);
    cr_assert_eq(ps_sched(&lagg, &env, 1 << 20, 4, &b), 0);
    cr_expect_eq(a.nsteps, 2);
    cr_expect_eq(b.nsteps, 4, "local reduce, push, pull, local broadcast");
    cr_expect(strstr(b.about, "machine-local aggregation"), "%s", b.about);
    for (int m = 0; m < P / G; m++)
        for (int out = 0; out < 2; out++) {
            uint64_t x = s_machine_bytes(&a, P, G, m, out), y = s_machine_bytes(&b, P, G, m, out);
            cr_expect_eq(x, (uint64_t)G * 4 << 20, "plain: machine %d %s", m, out ? "sends" : "receives");
            cr_expect_eq(y * (uint64_t)G, x, "machine %d %s %llu bytes with local aggregation, %llu without", m,
                         out ? "sends" : "receives", (unsigned long long)y, (unsigned long long)x);
        }
    sched_free(&a);
    sched_free(&b);
    /* the option without machines of several workers is the plain schedule */
    env.gpus_per_node = 1;
    cr_assert_eq(ps_sched(&lagg, &env, 1 << 20, 4, &b), 0);
    cr_expect_eq(b.nsteps, 2);
    sched_free(&b);
}

Test(sched, malformed_is_refused)
{
    sched_t s;
    sched_init(&s, 2, 2, 8, 4, "x");
    int p = sched_piece(&s, 0, 8, "all");
    sched_step(&s, "one");
    sched_xfer(&s, 0, 2, p, SCHED_REDUCE);   /* rank 2 is outside a world of 2 */
    cr_expect_eq(sched_done(&s), ERR_INVAL);
    cr_expect(strstr(err_detail(), "outside the world"), "%s", err_detail());
    sched_free(&s);
    sched_init(&s, 2, 2, 8, 4, "x");
    sched_piece(&s, 4, 8, "late");            /* past the buffer */
    cr_expect_eq(sched_done(&s), ERR_INVAL);
    sched_free(&s);
    sched_init(&s, 2, 2, 8, 4, "x");
    p = sched_piece(&s, 0, 8, "all");
    sched_xfer(&s, 0, 1, p, SCHED_STORE);     /* before any step */
    cr_expect_eq(sched_done(&s), ERR_INVAL);
    sched_free(&s);
}

/* --ring-hier on machines of G workers: the hierarchical schedule (chain reduce within each machine, the
 * leaders' ring, chain broadcast) is an allreduce for even and uneven machines, whole and segmented; with one
 * machine, one worker a machine, or GPU buffers it is the flat choice. */
static void s_hier_correct(int P, int G, size_t count, int segmented, size_t seg_bytes, const char *algo)
{
    ring_opts_t o;
    ring_opts_init(&o);
    cr_assert_eq(ring_opt_set(&o, "ring-hier", NULL), 0);
    sched_env_t env = {.workers = P, .one_host_shm = 0, .device = -1, .segmented = segmented, .seg_bytes = seg_bytes,
                       .gpus_per_node = G};
    sched_t s;
    cr_assert_eq(ring_sched(&o, &env, count, 4, &s), 0, "hier P=%d G=%d n=%zu: %s", P, G, count, err_detail());
    cr_expect_str_eq(s.algo, algo, "P=%d G=%d n=%zu", P, G, count);
    char why[256];
    cr_expect_eq(s_replay(&s, why, sizeof why), 0, "hier P=%d G=%d n=%zu seg %d: %s", P, G, count, segmented, why);
    sched_free(&s);
}

Test(sched, hier_schedule_is_an_allreduce)
{
    for (int P = 2; P <= 12; P++)
        for (int G = 1; G <= 5; G++)
            for (size_t n = 1; n <= 41; n += 20) {
                const char *algo = G > 1 && P > G ? "hier" : "ring";
                s_hier_correct(P, G, n, 0, 0, algo);
                s_hier_correct(P, G, n, 1, 8, algo);   /* 2 elements a segment: many, some of a chunk empty */
            }
    /* the flat choice where there is nothing to gain: one machine on one host (the one-shot at this size),
     * GPU buffers */
    ring_opts_t o;
    ring_opts_init(&o);
    o.hier = 1;
    sched_env_t env = {.workers = 4, .one_host_shm = 1, .device = -1, .gpus_per_node = 4};
    sched_t s;
    cr_assert_eq(ring_sched(&o, &env, 16, 4, &s), 0);
    cr_expect_str_eq(s.algo, "oneshot", "one machine: the flat choice");
    sched_free(&s);
    env = (sched_env_t){.workers = 8, .device = 0, .gpus_per_node = 4};
    cr_assert_eq(ring_sched(&o, &env, 4096, 4, &s), 0);
    cr_expect_str_eq(s.algo, "ring", "GPU buffers: not the host hierarchy");
    sched_free(&s);
    o.hier = 0;
    env = (sched_env_t){.workers = 8, .device = -1, .gpus_per_node = 4};
    cr_assert_eq(ring_sched(&o, &env, 4096, 4, &s), 0);
    cr_expect_str_eq(s.algo, "ring", "without --ring-hier: the flat ring");
    sched_free(&s);
}

/* Bytes: each machine's leader sends 2 (M - 1) / M of the buffer across machines, to the next leader only;
 * no other worker sends across machines; inside a machine every worker but the leader sends the buffer once
 * towards the leader (the reduce) and every worker but the last once away from it (the broadcast). The same
 * bytes whole and segmented. */
Test(sched, hier_link_bytes)
{
    ring_opts_t o;
    ring_opts_init(&o);
    o.hier = 1;
    const size_t count = 1200, B = count * 4;
    const int shapes[][2] = {{8, 4}, {12, 4}, {6, 2}, {16, 8}, {10, 4}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        for (int segd = 0; segd < 2; segd++) {
            int P = shapes[t][0], G = shapes[t][1], M = (P + G - 1) / G;
            sched_env_t env = {.workers = P, .device = -1, .gpus_per_node = G, .segmented = segd, .seg_bytes = 256};
            sched_t s;
            cr_assert_eq(ring_sched(&o, &env, count, 4, &s), 0);
            cr_assert_str_eq(s.algo, "hier");
            uint64_t *m = calloc((size_t)P * (size_t)P, sizeof *m);
            sched_links(&s, -1, m);
            for (int i = 0; i < P; i++) {
                int mi = i / G, last = (mi + 1) * G - 1 < P - 1 ? (mi + 1) * G - 1 : P - 1;
                uint64_t across = 0;
                for (int j = 0; j < P; j++) {
                    uint64_t b = m[(size_t)i * (size_t)P + (size_t)j], want = 0;
                    if (j / G != mi) {
                        across += b;
                        if (i % G == 0 && j == ((mi + 1) % M) * G) want = 2u * (uint64_t)(M - 1) * B / (uint64_t)M;
                    } else if (j == i - 1 && i % G) {
                        want = B;   /* the reduce, towards the leader */
                    } else if (j == i + 1 && i < last) {
                        want = B;   /* the broadcast, away from it */
                    }
                    cr_expect_eq(b, want, "P=%d G=%d seg %d: %d -> %d carries %llu, want %llu", P, G, segd, i, j,
                                 (unsigned long long)b, (unsigned long long)want);
                }
                if (i % G) cr_expect_eq(across, 0u, "P=%d G=%d: worker %d is no leader and sends nothing across", P, G, i);
            }
            free(m);
            sched_free(&s);
        }
}
