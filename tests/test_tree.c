/* test_tree.c: the tree allreduce: double binary tree shape properties for P = 1..64, the host
 * collective's exact results on forked ranks (P in {1,2,3,5,6,7,8,13}, counts 0, 1, P-1, a few
 * hundred and ~1M, f32/f16/bf16, sum/avg, out-of-place and in-place, default and tiny segments), and
 * the engine vtable (create, allreduce, stats, destroy; impls gpu / nccl / staged host on device buffers,
 * skipped without a GPU). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "allreduce-tree/tree.h"
#include "core/boot.h"
#include "core/comm.h"
#include "core/dev.h"
#include "core/dtype.h"
#include "core/err.h"
#include "tests/lib/ranks.h"

/* ---------- shape ---------- */

static int s_ceil_log2(int p)
{
    int k = 0;
    while ((1 << k) < p) k++;
    return k;
}

/* Checks one tree of world P; fills interior[r] += 1 for interior ranks. */
static void s_check_tree(int P, int t, int *interior)
{
    int root = -1, nroots = 0;
    int *seen = calloc((size_t)P, sizeof(int));
    int *stack = calloc((size_t)P + 1, sizeof(int));
    int *depth = calloc((size_t)P, sizeof(int));
    cr_assert(seen && stack && depth);
    for (int r = 0; r < P; r++) {
        int p, c[2];
        tree_shape(P, t, r, &p, c);
        if (p < 0) { root = r; nroots++; }
        else {
            cr_assert(p >= 0 && p < P && p != r, "P=%d t=%d: rank %d has parent %d", P, t, r, p);
            int pp, pc[2];
            tree_shape(P, t, p, &pp, pc);
            cr_assert(pc[0] == r || pc[1] == r, "P=%d t=%d: parent %d of %d does not list it", P, t, p, r);
        }
        for (int k = 0; k < 2; k++) {
            if (c[k] < 0) continue;
            cr_assert(c[k] < P && c[k] != r, "P=%d t=%d: rank %d has child %d", P, t, r, c[k]);
            cr_assert(c[k] != c[1 - k], "P=%d t=%d: rank %d lists child %d twice", P, t, r, c[k]);
            int cp, cc[2];
            tree_shape(P, t, c[k], &cp, cc);
            cr_assert_eq(cp, r, "P=%d t=%d: child %d of %d has parent %d", P, t, c[k], r, cp);
        }
        if (c[0] >= 0 || c[1] >= 0) interior[r]++;
    }
    cr_assert_eq(nroots, 1, "P=%d t=%d: %d roots", P, t, nroots);
    /* walk from the root: every rank exactly once */
    int top = 0, visited = 0, maxd = 0;
    stack[top++] = root;
    while (top > 0) {
        int r = stack[--top];
        cr_assert(!seen[r], "P=%d t=%d: rank %d reached twice", P, t, r);
        seen[r] = 1;
        visited++;
        if (depth[r] > maxd) maxd = depth[r];
        int p, c[2];
        tree_shape(P, t, r, &p, c);
        for (int k = 0; k < 2; k++)
            if (c[k] >= 0) {
                cr_assert(top < P, "P=%d t=%d: more than P nodes", P, t);
                depth[c[k]] = depth[r] + 1;
                stack[top++] = c[k];
            }
    }
    cr_assert_eq(visited, P, "P=%d t=%d: %d of %d ranks reachable from the root", P, t, visited, P);
    /* depth in edges <= ceil(log2 P): within the spec's ceil(log2 P) + 1 however depth is counted */
    cr_assert(maxd <= s_ceil_log2(P), "P=%d t=%d: depth %d > ceil(log2 P) = %d", P, t, maxd, s_ceil_log2(P));
    free(seen);
    free(stack);
    free(depth);
}

Test(tree_shape, double_binary_tree_properties)
{
    for (int P = 1; P <= 64; P++) {
        int *interior = calloc((size_t)P, sizeof(int));
        cr_assert(interior);
        s_check_tree(P, 0, interior);
        s_check_tree(P, 1, interior);
        int leaf_both = 0;
        for (int r = 0; r < P; r++) {
            cr_assert(interior[r] <= 1, "P=%d: rank %d is interior in both trees", P, r);
            leaf_both += interior[r] == 0;
        }
        /* every rank but (for odd P >= 3) one is interior in exactly one tree: the load is balanced */
        if (P >= 2) cr_assert_eq(leaf_both, P % 2, "P=%d: %d ranks are leaves in both trees", P, leaf_both);
        free(interior);
    }
}

Test(tree_shape, out_of_range_gives_no_edges)
{
    int p, c[2];
    tree_shape(1, 0, 0, &p, c);
    cr_assert(p == -1 && c[0] == -1 && c[1] == -1);
    tree_shape(8, 0, 8, &p, c);
    cr_assert(p == -1 && c[0] == -1 && c[1] == -1);
    tree_shape(8, 2, 3, &p, c);
    cr_assert(p == -1 && c[0] == -1 && c[1] == -1);
    tree_shape(2, 0, 1, &p, c);
    cr_assert(p == 0 && c[0] == -1 && c[1] == -1);
    tree_shape(2, 1, 0, &p, c);
    cr_assert(p == 1 && c[0] == -1 && c[1] == -1);
}

Test(tree_shape, default_segment)
{
    for (int P = 2; P <= 16; P++) {
        size_t prev = 0;
        for (size_t b = 4096; b <= ((size_t)1 << 30); b *= 2) {
            size_t g = tree_seg_default(P, b);
            cr_assert(g >= 16384 && g <= 262144, "P=%d bytes=%zu: segment %zu", P, b, g);
            cr_assert(g >= prev, "P=%d: segment shrinks at %zu bytes", P, b);
            prev = g;
        }
        cr_assert_eq(prev, 262144);
    }
}

/* ---------- collective ---------- */

/* Inputs with a known exact result: x_r(i) = k(i) + d_r(i) with k(i) in {0, +-1, +-2, +-4, 8} and
 * sum_r d_r(i) = 0, |d_r| small: every partial sum is a small integer (exact in f16 and bf16), the sum
 * is P*k(i) and the average k(i) (a power of two or 0: exact after the 1/P scale). */
static const float K_TAB[8] = {0, 1, 2, 4, -1, -2, -4, 8};

static uint32_t s_hash(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return (uint32_t)x;
}
static float s_k(size_t i) { return K_TAB[s_hash(i * 2 + 1) & 7]; }
static float s_d(size_t i, int r) { return (float)((int)(s_hash(i * 131 + (uint64_t)r * 7919 + 17) % 5) - 2); }

static float s_x(size_t i, int r, int P)
{
    if (r < P - 1) return s_k(i) + s_d(i, r);
    float s = 0;
    for (int q = 0; q < P - 1; q++) s += s_d(i, q);
    return s_k(i) - s;
}

static float s_get(const void *buf, size_t i, dtype_t dt)
{
    switch (dt) {
    case DT_F32: return ((const float *)buf)[i];
    case DT_F16: return f16_to_f32(((const uint16_t *)buf)[i]);
    default: return bf16_to_f32(((const uint16_t *)buf)[i]);
    }
}

typedef struct {
    size_t counts[8];
    int ncounts;
    size_t seg_bytes;        /* 0 = default */
    comm_opts_t opts;        /* transport, slots per channel */
} coll_arg_t;

static int s_open(comm_t **comm, const comm_opts_t *opts)
{
    boot_cfg_t cfg;
    int rc = boot_cfg_init(&cfg, "env://", -1, -1, 20000);
    if (rc == 0) rc = comm_new(comm, &cfg, opts);
    if (rc < 0) {
        char b[512];
        fprintf(stderr, "comm: %s\n", err_trace(rc, b, sizeof b));
    }
    return rc;
}

static int s_coll_rank(int rank, int world, void *argp)
{
    const coll_arg_t *a = argp;
    comm_t *comm = NULL;
    if (s_open(&comm, &a->opts) < 0) return 1;
    int bad = 0;
    for (int ci = 0; ci < a->ncounts && !bad; ci++) {
        size_t n = a->counts[ci];
        float *x = malloc((n ? n : 1) * sizeof(float));
        void *in = malloc((n ? n : 1) * 4), *orig = malloc((n ? n : 1) * 4), *out = malloc((n ? n : 1) * 4);
        if (!x || !in || !orig || !out) return 1;
        for (size_t i = 0; i < n; i++) x[i] = s_x(i, rank, world);
        for (int dt = 0; dt < DT_COUNT && !bad; dt++) {
            size_t esz = dt_size((dtype_t)dt);
            dt_convert(orig, (dtype_t)dt, x, DT_F32, n);
            for (int op = 0; op < 2 && !bad; op++)
                for (int inplace = 0; inplace < 2 && !bad; inplace++) {
                    memcpy(in, orig, n * esz);
                    memset(out, 0x7f, n * esz);
                    void *dst = inplace ? in : out;
                    int rc = tree_allreduce_host(comm, in, dst, n, (dtype_t)dt, (redop_t)op, a->seg_bytes, 20000);
                    if (rc < 0) {
                        char b[512];
                        fprintf(stderr, "rank %d P=%d n=%zu %s %s %s: %s\n", rank, world, n, dt_name((dtype_t)dt),
                                op_name((redop_t)op), inplace ? "in-place" : "out-of-place", err_trace(rc, b, sizeof b));
                        bad = 1;
                        break;
                    }
                    for (size_t i = 0; i < n; i++) {
                        float want = op == OP_SUM ? (float)world * s_k(i) : s_k(i);
                        float got = s_get(dst, i, (dtype_t)dt);
                        if (got != want) {
                            fprintf(stderr, "rank %d P=%d n=%zu %s %s %s seg=%zu: [%zu] = %g, want %g\n", rank, world, n,
                                    dt_name((dtype_t)dt), op_name((redop_t)op), inplace ? "in-place" : "out-of-place",
                                    a->seg_bytes, i, got, want);
                            bad = 1;
                            break;
                        }
                    }
                    if (!bad && !inplace && n && memcmp(in, orig, n * esz)) {
                        fprintf(stderr, "rank %d P=%d n=%zu: out-of-place call changed its input\n", rank, world, n);
                        bad = 1;
                    }
                }
        }
        free(x); free(in); free(orig); free(out);
    }
    if (comm_barrier(comm, 20000) < 0) bad = 1;
    comm_destroy(&comm);
    return bad;
}

static void s_coll_opts(int P, size_t big, size_t seg_bytes, const char *transport, int slots)
{
    coll_arg_t a = {.counts = {0, 1, (size_t)P - 1, 333, big}, .ncounts = 5, .seg_bytes = seg_bytes,
                    .opts = {.transport = transport, .shm_slots = slots}};
    cr_assert_eq(run_ranks(P, s_coll_rank, &a, 25000), 0, "P=%d (%s, %d slots): some ranks failed", P,
                 transport ? transport : "auto", slots);
}

static void s_coll(int P, size_t big, size_t seg_bytes) { s_coll_opts(P, big, seg_bytes, NULL, 0); }

#define BIG 1000003

Test(tree_allreduce, p1, .timeout = 30) { s_coll(1, BIG, 0); }
Test(tree_allreduce, p2, .timeout = 30) { s_coll(2, BIG, 0); }
Test(tree_allreduce, p3, .timeout = 30) { s_coll(3, BIG, 0); }
Test(tree_allreduce, p5, .timeout = 30) { s_coll(5, BIG, 0); }
Test(tree_allreduce, p6, .timeout = 30) { s_coll(6, BIG, 0); }
Test(tree_allreduce, p7, .timeout = 30) { s_coll(7, BIG, 0); }
Test(tree_allreduce, p8, .timeout = 30) { s_coll(8, BIG, 0); }
Test(tree_allreduce, p13, .timeout = 30) { s_coll(13, BIG, 0); }

/* Tiny segments (the 64-byte floor: 16 f32 elements): hundreds of segments per tree, so every
 * channel's slots wrap many times with both trees sharing links in opposite directions. */
Test(tree_allreduce, many_segments_p2, .timeout = 30) { s_coll(2, 20011, 64); }
Test(tree_allreduce, many_segments_p5, .timeout = 30) { s_coll(5, 20011, 64); }
Test(tree_allreduce, many_segments_p8, .timeout = 30) { s_coll(8, 20011, 100); }

/* Two slots per channel, the transport's minimum: the schedule must not deadlock when a link carries
 * segments of both trees in the same step (see the design comment in tree.c). */
Test(tree_allreduce, two_slots_p2, .timeout = 30) { s_coll_opts(2, 20011, 64, "shm", 2); }
Test(tree_allreduce, two_slots_p6, .timeout = 30) { s_coll_opts(6, 20011, 64, "shm", 2); }
Test(tree_allreduce, two_slots_p7, .timeout = 30) { s_coll_opts(7, 100003, 0, "shm", 2); }

/* The ZeroMQ TCP backend (what ranks on other hosts use). */
Test(tree_allreduce, tcp_p3, .timeout = 30) { s_coll_opts(3, 100003, 0, "tcp", 0); }
Test(tree_allreduce, tcp_p6, .timeout = 30) { s_coll_opts(6, 20011, 256, "tcp", 0); }

/* ---------- engine ---------- */

static int s_engine_rank(int rank, int world, void *arg)
{
    (void)arg;
    comm_t *comm = NULL;
    if (s_open(&comm, NULL) < 0) return 1;
    engine_t *e = NULL;
    engine_cfg_t cfg = {.device = -1, .impl = NULL, .timeout_ms = 20000};
    int bad = 0;
    int rc = tree_engine.create(&e, comm, &cfg);
    if (rc < 0) { fprintf(stderr, "create: %s\n", err_str(rc)); bad = 1; goto out; }
    size_t n = 4099;
    float *buf = malloc(n * sizeof(float)), *res = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) buf[i] = (float)(rank + 1) * (float)(i % 7);
    rc = tree_engine.allreduce(e, buf, res, n, DT_F32, OP_SUM, 20000);
    if (rc < 0) { fprintf(stderr, "allreduce: %s\n", err_str(rc)); bad = 1; }
    float tri = (float)world * (float)(world + 1) / 2;
    for (size_t i = 0; i < n && !bad; i++)
        if (res[i] != tri * (float)(i % 7)) { fprintf(stderr, "[%zu] = %g\n", i, res[i]); bad = 1; }
    engine_stats_t st;
    tree_engine.stats(e, &st);
    if (!st.impl || strcmp(st.impl, "host")) { fprintf(stderr, "impl %s\n", st.impl ? st.impl : "(null)"); bad = 1; }
    if (world > 1 && (st.bytes_sent == 0 || st.bytes_received == 0)) { fprintf(stderr, "no bytes counted\n"); bad = 1; }
    free(buf);
    free(res);
    /* every rank done before any leaves (a leaving rank takes its transport endpoints along) */
    if (comm_barrier(comm, 20000) < 0) bad = 1;
    tree_engine.destroy(&e);
    if (e) bad = 1;
    tree_engine.destroy(&e);
out:
    comm_destroy(&comm);
    return bad;
}

Test(tree_engine, create_allreduce_stats_destroy, .timeout = 30)
{
    cr_assert_eq(run_ranks(3, s_engine_rank, NULL, 25000), 0);
}

Test(tree_engine, rejects_bad_impl)
{
    engine_t *e = NULL;
    comm_t fake = {.rank = 0, .world = 1};
    const char *impls[] = {"nccl", "gpu", "bogus"};
    for (int i = 0; i < 3; i++) {
        engine_cfg_t cfg = {.device = -1, .impl = impls[i]};
        cr_assert_eq(tree_engine.create(&e, &fake, &cfg), ERR_INVAL, "impl %s on host buffers", impls[i]);
        cr_assert_null(e);
    }
}

/* ---------- engine on device buffers (skips without a GPU) ---------- */

typedef struct {
    const char *impl;
} gpu_arg_t;

static int s_gpu_engine_rank(int rank, int world, void *argp)
{
    const gpu_arg_t *a = argp;
    comm_t *comm = NULL;
    if (s_open(&comm, NULL) < 0) return 1;
    int bad = 0, rc;
    char b[512];
    engine_t *e = NULL;
    void *d = NULL;
    size_t n = 1000003;
    float *h = malloc(n * sizeof(float));
    int dev = dev_select(comm->local_rank, NULL, 0);
    if (dev < 0 || !h) { fprintf(stderr, "dev_select: %s\n", err_detail()); bad = 1; goto out; }
    engine_cfg_t cfg = {.device = dev, .impl = a->impl, .timeout_ms = 30000};
    rc = tree_engine.create(&e, comm, &cfg);
    if (rc < 0) { fprintf(stderr, "create %s: %s\n", a->impl, err_trace(rc, b, sizeof b)); bad = 1; goto out; }
    if (dev_malloc(&d, n * sizeof(float)) < 0) { bad = 1; goto out; }
    for (int op = 0; op < 2 && !bad; op++) {
        for (size_t i = 0; i < n; i++) h[i] = s_x(i, rank, world);
        if (dev_memcpy(d, h, n * sizeof(float)) < 0) { bad = 1; break; }
        rc = tree_engine.allreduce(e, d, d, n, DT_F32, (redop_t)op, 30000);
        if (rc < 0) { fprintf(stderr, "%s allreduce: %s\n", a->impl, err_trace(rc, b, sizeof b)); bad = 1; break; }
        if (dev_memcpy(h, d, n * sizeof(float)) < 0) { bad = 1; break; }
        for (size_t i = 0; i < n && !bad; i++) {
            float want = op == OP_SUM ? (float)world * s_k(i) : s_k(i);
            if (h[i] != want) { fprintf(stderr, "%s [%zu] = %g, want %g\n", a->impl, i, h[i], want); bad = 1; }
        }
    }
    engine_stats_t st;
    tree_engine.stats(e, &st);
    if (rank == 0) fprintf(stderr, "tree engine on device %d: %s\n", dev, st.impl);
    if (comm_barrier(comm, 30000) < 0) bad = 1;
out:
    dev_free(&d);
    tree_engine.destroy(&e);
    free(h);
    comm_destroy(&comm);
    return bad;
}

static void s_gpu_engine(const char *impl, int P)
{
    char why[256] = "";
    if (dev_count(why, sizeof why) == 0) cr_skip_test("no CUDA device: %s", why);
    gpu_arg_t a = {.impl = impl};
    cr_assert_eq(run_ranks(P, s_gpu_engine_rank, &a, 100000), 0, "tree engine impl %s, P=%d", impl, P);
}

/* Two ranks may share one GPU for the IPC tree and the staged host tree; NCCL needs a GPU per rank. */
Test(tree_engine_gpu, impl_gpu, .timeout = 120) { s_gpu_engine("gpu", 2); }
Test(tree_engine_gpu, impl_host_staged, .timeout = 120) { s_gpu_engine("host", 2); }
Test(tree_engine_gpu, impl_nccl, .timeout = 120)
{
    char why[256] = "";
    int n = dev_count(why, sizeof why);
    s_gpu_engine("nccl", n >= 2 ? 2 : 1);
}
