/* test_gpu.c: the device layer and the GPU paths. Without a GPU: CUDA_VISIBLE_DEVICES parsing, the
 * --gpus error text, NCCL_ALGO fixed once per process (and its labels), counting/selecting with every
 * device hidden, and the GPU constructors failing cleanly. With a GPU (skipped with the reason
 * otherwise): the reduce kernels against exact results, the bandwidth probe, copies and fills complete
 * before other streams read them, NCCL allreduce at world 1 (ring and tree algorithms, one process
 * each: NCCL_ALGO is fixed per process), NCCL's refusal of two ranks on one GPU, and the CUDA IPC tree
 * with 2, 3 and 5 ranks sharing the GPU(s).
 * Fork rule: the test process only counts devices (dev_count probes in a child); CUDA is initialized
 * only inside the forked ranks or in tests that fork nothing afterwards. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "allreduce-tree/tree_gpu.h"
#include "core/comm.h"
#include "core/dev.h"
#include "core/dtype.h"
#include "core/err.h"
#include "tests/lib/ranks.h"
#if SB_CUDA
#include "core/cuda/reduce.h"
#endif

#define SKIP_WITHOUT_GPU()                                                       \
    do {                                                                         \
        char why_[256];                                                          \
        if (dev_count(why_, sizeof why_) == 0) cr_skip_test("no CUDA device: %s", why_); \
    } while (0)

/* ---------- without a GPU ---------- */

Test(gpu, visible_devices_parsing)
{
    int ids[16];
    cr_assert_eq(dev_visible_parse(NULL, ids, 16), -1);
    cr_assert_eq(dev_visible_parse("", ids, 16), 0);
    cr_assert_eq(dev_visible_parse("NoDevFiles", ids, 16), 0);
    cr_assert_eq(dev_visible_parse("-1", ids, 16), 0);
    cr_assert_eq(dev_visible_parse("3", ids, 16), 1);
    cr_assert_eq(ids[0], 3);
    cr_assert_eq(dev_visible_parse("0,2,-1,1", ids, 16), 2, "an invalid entry ends the list");
    cr_assert(ids[0] == 0 && ids[1] == 2);
    cr_assert_eq(dev_visible_parse("1,x,2", ids, 16), 1);
    cr_assert_eq(dev_visible_parse("0,,1", ids, 16), 1, "an empty entry ends the list");
    cr_assert_eq(dev_visible_parse("GPU-8f6d0d5e-0000-1111-2222-333344445555,1", ids, 16), 2);
    cr_assert(ids[0] == -2 && ids[1] == 1);
    cr_assert_eq(dev_visible_parse("MIG-abc", ids, 16), 1);
    cr_assert_eq(dev_visible_parse("0,1,2,3", ids, 2), 2, "bounded by max");
    cr_assert_eq(dev_visible_parse("12a", ids, 16), 0);
}

Test(gpu, gpus_request_error_text)
{
    cr_assert_eq(dev_check_gpus_with(1, 1, "", "0"), 0);
    cr_assert_eq(dev_check_gpus_with(2, 4, "", NULL), 0);

    cr_assert_eq(dev_check_gpus_with(4, 1, "", "0"), ERR_NODEV);
    cr_assert_str_eq(err_detail(),
                     "asked for 4 GPUs but 1 is visible (CUDA_VISIBLE_DEVICES=0); use --procs N for CPU ranks, or --gpus 1");

    cr_assert_eq(dev_check_gpus_with(3, 2, "", NULL), ERR_NODEV);
    cr_assert(strstr(err_detail(), "but 2 are visible (CUDA_VISIBLE_DEVICES unset)"), "%s", err_detail());

    cr_assert_eq(dev_check_gpus_with(2, 0, "no CUDA-capable device is detected", NULL), ERR_NODEV);
    cr_assert(strstr(err_detail(), "asked for 2 GPUs but none is visible"), "%s", err_detail());
    cr_assert(strstr(err_detail(), "no CUDA-capable device is detected"), "%s", err_detail());
    cr_assert(strstr(err_detail(), "use --procs N for CPU ranks"), "%s", err_detail());

    cr_assert_eq(dev_check_gpus_with(1, 0, "", ""), ERR_NODEV);
    cr_assert(strstr(err_detail(), "asked for 1 GPU but none is visible"), "%s", err_detail());
    cr_assert(strstr(err_detail(), "CUDA_VISIBLE_DEVICES="), "%s", err_detail());

    cr_assert_eq(dev_check_gpus_with(0, 8, "", NULL), ERR_INVAL);
    cr_assert_eq(dev_check_gpus_with(-1, 8, "", NULL), ERR_INVAL);
}

/* In a fresh process with every device hidden: no device, a reason, clean failures. */
static int s_hidden_rank(int rank, int world, void *arg)
{
    (void)rank; (void)world; (void)arg;
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    char why[256] = "x", desc[256] = "";
    int bad = 0;
    if (dev_count(why, sizeof why) != 0) { fprintf(stderr, "dev_count with no visible device\n"); bad++; }
    if (!why[0]) { fprintf(stderr, "dev_count gave no reason\n"); bad++; }
    int rc = dev_select(0, desc, sizeof desc);
    if (rc != ERR_NODEV || !strstr(err_detail(), "no CUDA device")) {
        fprintf(stderr, "dev_select: %d %s\n", rc, err_detail());
        bad++;
    }
    if (dev_current() != -1) bad++;
    if (dev_select_of(1, 2, NULL, 0) != ERR_NODEV) bad++;
    rc = dev_check_gpus(2);
    if (rc != ERR_NODEV || !strstr(err_detail(), "asked for 2 GPUs but none is visible") ||
        !strstr(err_detail(), "CUDA_VISIBLE_DEVICES=)") || !strstr(err_detail(), "--procs")) {
        fprintf(stderr, "dev_check_gpus: %d %s\n", rc, err_detail());
        bad++;
    }
    ncclw_t *rn = (ncclw_t *)1;
    rc = ncclw_new(&rn, NULL, 0, "Ring", 1000);
    if ((rc != ERR_NODEV && rc != ERR_UNSUP) || rn != NULL) {
        fprintf(stderr, "ncclw_new(Ring) without device: %d %s\n", rc, err_detail());
        bad++;
    }
    tree_gpu_t *tg = (tree_gpu_t *)1;
    rc = tree_gpu_new(&tg, NULL, 0, 0, 1000);
    if ((rc != ERR_NODEV && rc != ERR_UNSUP) || tg != NULL) {
        fprintf(stderr, "tree_gpu_new without device: %d %s\n", rc, err_detail());
        bad++;
    }
    ncclw_t *tn = (ncclw_t *)1;
    rc = ncclw_new(&tn, NULL, 0, "Tree", 1000);
    if ((rc != ERR_NODEV && rc != ERR_UNSUP) || tn != NULL) bad++;
    ncclw_destroy(&rn);   /* safe on NULL, twice */
    ncclw_destroy(&rn);
    tree_gpu_destroy(&tg);
    dev_mem_t m;
    dev_mem_stats(&m);
    if (m.device != -1 || m.dev_cur != 0 || m.dev_used != 0) bad++;
    void *p = (void *)1;
    if (dev_malloc(&p, 16) == 0 || p != NULL) bad++;
    return bad;
}

/* NCCL_ALGO once per process, and the labels: no GPU needed (both builds). This test's own process. */
Test(gpu, nccl_algo_fixed_once_per_process)
{
    unsetenv("NCCL_ALGO");
    char l[160];
    ncclw_algo_label("Tree", 2, l, sizeof l);
    cr_assert_str_eq(l, "nccl Tree");
    cr_assert_eq(ncclw_algo_init("Tree"), 0, "%s", err_detail());
    cr_assert_str_eq(getenv("NCCL_ALGO"), "Tree");
    cr_assert_eq(ncclw_algo_init("tree"), 0, "the same algorithm again (NCCL's names are case-blind)");
    cr_assert_eq(ncclw_algo_init("Ring"), ERR_STATE);
    cr_assert(strstr(err_detail(), "already Tree") && strstr(err_detail(), "its own process"), "%s", err_detail());
    cr_assert_eq(ncclw_algo_init(NULL), ERR_STATE, "NCCL's own choice is another choice");
    cr_assert_str_eq(getenv("NCCL_ALGO"), "Tree", "never changed once set");
    ncclw_algo_label("Tree", 4, l, sizeof l);
    cr_assert_str_eq(l, "nccl Tree");
    ncclw_algo_label("Tree", 1, l, sizeof l);
    cr_assert(strstr(l, "nccl Tree") && strstr(l, "world 1: a local copy"), "%s", l);
}

static int s_user_algo_rank(int rank, int world, void *arg)
{
    (void)rank; (void)world; (void)arg;
    setenv("NCCL_ALGO", "Ring,Tree", 1);
    int bad = ncclw_algo_init("Tree") != 0;       /* the user's value wins, every request is served by it */
    bad += ncclw_algo_init("Ring") != 0;
    bad += strcmp(getenv("NCCL_ALGO"), "Ring,Tree") != 0;
    char l[160];
    ncclw_algo_label("Tree", 2, l, sizeof l);
    bad += strcmp(l, "nccl Ring,Tree (NCCL_ALGO from the user)") != 0;
    if (bad) fprintf(stderr, "user's NCCL_ALGO: label '%s'\n", l);
    return bad ? 1 : 0;
}

Test(gpu, nccl_algo_from_the_user_wins, .timeout = 30)
{
    cr_assert_eq(run_ranks(1, s_user_algo_rank, NULL, 20000), 0);
}

Test(gpu, no_visible_device_fails_cleanly, .timeout = 60)
{
    cr_assert_eq(run_ranks(1, s_hidden_rank, NULL, 50000), 0);
}

Test(gpu, count_is_consistent)
{
    char why[256] = "";
    int n = dev_count(why, sizeof why);
    cr_assert_geq(n, 0);
    if (n == 0) cr_assert_neq(why[0], '\0', "no device must come with a reason");
    cr_assert_eq(dev_count(NULL, 0), n, "cached");
    cr_assert_eq(dev_check_gpus(n + 1), ERR_NODEV);
    cr_assert(strstr(err_detail(), "--procs"), "%s", err_detail());
    /* more GPUs than visible: refused before touching CUDA (this process must stay fork-safe) */
    cr_assert_eq(dev_select_of(0, n + 1, NULL, 0), ERR_NODEV);
    cr_assert(n == 0 ? strstr(err_detail(), "no CUDA device") != NULL : strstr(err_detail(), "asked for") != NULL,
              "%s", err_detail());
}

#if !SB_CUDA
Test(gpu, built_without_cuda)
{
    char why[256];
    cr_assert_eq(dev_count(why, sizeof why), 0);
    cr_assert_str_eq(why, "built without CUDA");
    ncclw_t *rn = NULL;
    cr_assert_eq(ncclw_new(&rn, NULL, 0, "Ring", 1000), ERR_UNSUP);
    cr_assert_str_eq(err_detail(), "built without CUDA/NCCL");
    tree_gpu_t *tg = NULL;
    cr_assert_eq(tree_gpu_new(&tg, NULL, 0, 0, 1000), ERR_UNSUP);
    cr_assert_str_eq(err_detail(), "built without CUDA/NCCL");
}
#endif

/* ---------- with a GPU ---------- */

/* Exact in f32, f16 and bf16: small integers and halves. */
static float s_val(int r, size_t i) { return (float)((int)((i * 5 + (size_t)r * 3) % 13) - 6) + 0.5f * (float)(r % 2); }

static int s_check(const char *what, const float *got, size_t count, int world, redop_t op, dtype_t dt, int rank)
{
    int bad = 0;
    for (size_t i = 0; i < count && bad < 5; i++) {
        float want = 0;
        for (int r = 0; r < world; r++) want += s_val(r, i);
        if (op == OP_AVG) want /= (float)world;
        float tol = op == OP_SUM ? 0 : (dt == DT_F32 ? 1e-6f : dt == DT_F16 ? 1e-3f : 8e-3f);
        if (!(fabsf(got[i] - want) <= tol * fmaxf(1.0f, fabsf(want)))) {
            fprintf(stderr, "rank %d %s P=%d count=%zu %s %s: [%zu] = %g, want %g\n", rank, what, world, count,
                    dt_name(dt), op_name(op), i, got[i], want);
            bad++;
        }
    }
    return bad;
}

typedef int (*s_coll_fn)(void *obj, const void *send, void *recv, size_t count, dtype_t dt, redop_t op, int tmo);

/* One collective on device buffers: fill, run, copy back, check. */
static int s_dev_case(const char *what, void *obj, s_coll_fn fn, int rank, int world, size_t count, dtype_t dt,
                      redop_t op, int inplace)
{
    size_t esz = dt_size(dt), n = count ? count : 1;
    float *f = malloc(n * sizeof(float));
    void *h = malloc(n * esz);
    void *dsend = NULL, *drecv = NULL;
    int bad = 0, rc;
    char b[512];
    for (size_t i = 0; i < count; i++) f[i] = s_val(rank, i);
    dt_convert(h, dt, f, DT_F32, count);
    if ((rc = dev_malloc(&dsend, n * esz)) < 0 || (!inplace && (rc = dev_malloc(&drecv, n * esz)) < 0)) goto err;
    if (inplace) drecv = dsend;
    if ((rc = dev_memcpy(dsend, h, count * esz)) < 0) goto err;
    if (!inplace && (rc = dev_memset(drecv, 0x7f, n * esz)) < 0) goto err;
    if ((rc = fn(obj, dsend, drecv, count, dt, op, 30000)) < 0) goto err;
    if ((rc = dev_memcpy(h, drecv, count * esz)) < 0) goto err;
    dt_convert(f, DT_F32, h, dt, count);
    bad = s_check(what, f, count, world, op, dt, rank);
    goto out;
err:
    fprintf(stderr, "rank %d %s count=%zu %s: %s\n", rank, what, count, dt_name(dt), err_trace(rc, b, sizeof b));
    bad = 1;
out:
    if (!inplace) dev_free(&drecv);
    dev_free(&dsend);
    free(f);
    free(h);
    return bad;
}

static int s_comm(comm_t **comm)
{
    boot_cfg_t bc;
    char b[512];
    int rc = boot_cfg_init(&bc, "env://", -1, -1, 30000);
    if (rc == 0) rc = comm_new(comm, &bc, NULL);
    if (rc < 0) fprintf(stderr, "setup: %s\n", err_trace(rc, b, sizeof b));
    return rc;
}

#if SB_CUDA
Test(gpu, reduce_kernels_exact, .timeout = 120)
{
    SKIP_WITHOUT_GPU();
    cr_assert_geq(dev_select(0, NULL, 0), 0, "%s", err_detail());
    size_t counts[] = {1, 7, 8, 9, 1000, 4099, (1u << 20) + 3};
    for (int dt = 0; dt < DT_COUNT; dt++)
        for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
            for (int mis = 0; mis < 2; mis++)
                for (int nsrc = 1; nsrc <= 3; nsrc++) {
                    size_t count = counts[ci], esz = dt_size((dtype_t)dt), n = count + 1;
                    float scale = nsrc == 2 ? 0.5f : 1.0f;
                    float *f = malloc(n * sizeof(float) * 3), *want = malloc(n * sizeof(float));
                    void *h = malloc(n * esz * 3);
                    void *d = NULL, *o = NULL;
                    cr_assert_eq(dev_malloc(&d, 3 * n * esz), 0);
                    cr_assert_eq(dev_malloc(&o, n * esz), 0);
                    for (int s = 0; s < 3; s++)
                        for (size_t i = 0; i < n; i++) f[s * n + i] = s_val(s, i);
                    for (size_t i = 0; i < count; i++) {
                        float a = 0;
                        for (int s = 0; s < nsrc; s++) a += f[s * n + mis + i];
                        want[i] = a * scale;
                    }
                    dt_convert(h, (dtype_t)dt, f, DT_F32, 3 * n);
                    cr_assert_eq(dev_memcpy(d, h, 3 * n * esz), 0);
                    const void *srcs[3];
                    for (int s = 0; s < 3; s++) srcs[s] = (char *)d + (s * n + (size_t)mis) * esz;
                    int rc = nsrc == 2 ? gpu_reduce(o, srcs[0], srcs[1], count, (dtype_t)dt, scale, NULL)
                                       : gpu_reduce_n(o, srcs, nsrc, count, (dtype_t)dt, scale, NULL);
                    cr_assert_eq(rc, 0, "%s", err_detail());
                    cr_assert_eq(dev_sync(), 0, "%s", err_detail());
                    cr_assert_eq(dev_memcpy(h, o, count * esz), 0);
                    dt_convert(f, DT_F32, h, (dtype_t)dt, count);
                    for (size_t i = 0; i < count; i++)
                        cr_assert_eq(f[i], want[i], "%s count %zu misaligned %d nsrc %d [%zu]: %g want %g",
                                     dt_name((dtype_t)dt), count, mis, nsrc, i, f[i], want[i]);
                    dev_free(&d);
                    dev_free(&o);
                    free(f); free(want); free(h);
                }
    dev_mem_t m;
    dev_mem_stats(&m);
    cr_assert_eq(m.dev_cur, 0, "every tracked allocation freed");
    cr_assert_gt(m.dev_peak, 0);
    cr_assert_gt(m.dev_total, 0);
    cr_assert_eq(gpu_reduce_n(NULL, NULL, 0, 1, DT_F32, 1, NULL), ERR_INVAL);
}

Test(gpu, reduce_bandwidth_probe, .timeout = 120)
{
    SKIP_WITHOUT_GPU();
    cr_assert_geq(dev_select(0, NULL, 0), 0, "%s", err_detail());
    gpu_bw_t bw;
    cr_assert_eq(gpu_reduce_bw_probe((size_t)64 << 20, 20, &bw), 0, "%s", err_detail());
    fprintf(stderr, "reduce %.1f GB/s, copy %.1f GB/s, ratio %.2f\n", bw.reduce_gbps, bw.copy_gbps, bw.ratio);
    cr_assert_gt(bw.reduce_gbps, 0);
    cr_assert_gt(bw.copy_gbps, 0);
}

/* dev.h's promise: dev_memcpy (pageable host source) and dev_memset are complete on return, so a
 * kernel queued right after on a non-blocking stream (as NCCL's, the IPC tree's and the model's are)
 * reads the new bytes. 256 MiB each time, so an unordered copy or fill would be overtaken. */
Test(gpu, copies_and_fills_complete_before_other_streams, .timeout = 120)
{
    SKIP_WITHOUT_GPU();
    cr_assert_geq(dev_select(0, NULL, 0), 0, "%s", err_detail());
    const size_t n = (size_t)64 << 20;
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    cr_assert(h && back);
    void *d = NULL, *o = NULL, *st = NULL;
    cr_assert_eq(dev_malloc(&d, n * sizeof(float)), 0, "%s", err_detail());
    cr_assert_eq(dev_malloc(&o, n * sizeof(float)), 0, "%s", err_detail());
    cr_assert_eq(dev_stream_new(&st), 0, "%s", err_detail());
    const void *srcs[1] = {d};
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < n; i++) h[i] = (float)((i + (size_t)round) & 0xffff);
        cr_assert_eq(dev_memset(d, 0, n * sizeof(float)), 0, "%s", err_detail());
        cr_assert_eq(dev_memcpy(d, h, n * sizeof(float)), 0, "%s", err_detail());
        cr_assert_eq(gpu_reduce_n(o, srcs, 1, n, DT_F32, 1.0f, st), 0, "%s", err_detail());
        cr_assert_eq(dev_stream_wait(st, 30000), 0, "%s", err_detail());
        cr_assert_eq(dev_memcpy(back, o, n * sizeof(float)), 0, "%s", err_detail());
        cr_assert_eq(memcmp(back, h, n * sizeof(float)), 0, "round %d: the copy was overtaken by another stream", round);
        cr_assert_eq(dev_memset(d, 0x3f, n * sizeof(float)), 0, "%s", err_detail());
        cr_assert_eq(gpu_reduce_n(o, srcs, 1, n, DT_F32, 1.0f, st), 0, "%s", err_detail());
        cr_assert_eq(dev_stream_wait(st, 30000), 0, "%s", err_detail());
        cr_assert_eq(dev_memcpy(back, o, n * sizeof(float)), 0, "%s", err_detail());
        const unsigned char *b = (const unsigned char *)back;
        size_t bad = 0;
        for (size_t i = 0; i < n * sizeof(float); i++) bad += b[i] != 0x3f;
        cr_assert_eq(bad, 0, "round %d: %zu bytes of the fill were overtaken by another stream", round, bad);
    }
    dev_stream_destroy(&st);
    dev_free(&d);
    dev_free(&o);
    free(h);
    free(back);
}
#endif

static int s_nccl_fn(void *obj, const void *s, void *r, size_t c, dtype_t dt, redop_t op, int tmo)
{
    return ncclw_allreduce(obj, s, r, c, dt, op, tmo);
}

/* One algorithm per process (NCCL_ALGO is set once, before the first NCCL call): a communicator with
 * the other algorithm in the same process is refused; at world 1 the label says "local copy". */
static int s_nccl_rank(int rank, int world, void *arg)
{
    const char *algo = arg, *other = strcmp(algo, "Ring") == 0 ? "Tree" : "Ring";
    int user = getenv("NCCL_ALGO") != NULL;
    comm_t *comm = NULL;
    char b[512];
    if (s_comm(&comm) < 0) return 1;
    int dev = dev_select(comm->local_rank, NULL, 0), bad = 0;
    if (dev < 0) { fprintf(stderr, "dev_select: %s\n", err_detail()); return 1; }
    ncclw_t *nc = NULL;
    int rc = ncclw_new(&nc, comm, dev, algo, 30000);
    if (rc < 0) {
        fprintf(stderr, "nccl new: %s\n", err_trace(rc, b, sizeof b));
        comm_destroy(&comm);
        return 1;
    }
    size_t counts[] = {0, 1, 4099, 1000003};
    for (size_t ci = 0; ci < 4; ci++)
        for (int dt = 0; dt < DT_COUNT; dt++)
            for (int op = 0; op < 2; op++)
                bad += s_dev_case(ncclw_algo(nc), nc, s_nccl_fn, rank, world, counts[ci], (dtype_t)dt, (redop_t)op,
                                  (int)(ci + (size_t)op) % 2);
    if (!user && (!strstr(ncclw_algo(nc), algo) || !strstr(ncclw_algo(nc), "local copy"))) {
        fprintf(stderr, "label '%s'\n", ncclw_algo(nc));
        bad++;
    }
    fprintf(stderr, "%s\n", ncclw_algo(nc));
    ncclw_t *nc2 = NULL;
    rc = ncclw_new(&nc2, comm, dev, other, 30000);
    if (!user && (rc != ERR_STATE || nc2)) {
        fprintf(stderr, "a %s communicator after %s: want ERR_STATE, got %d %s\n", other, algo, rc, err_detail());
        bad++;
    }
    ncclw_destroy(&nc2);
    ncclw_destroy(&nc);
    ncclw_destroy(&nc);
    comm_destroy(&comm);
    return bad ? 1 : 0;
}

Test(gpu, nccl_world1_ring, .timeout = 120)
{
    SKIP_WITHOUT_GPU();
    cr_assert_eq(run_ranks(1, s_nccl_rank, (void *)"Ring", 110000), 0);
}

Test(gpu, nccl_world1_tree, .timeout = 120)
{
    SKIP_WITHOUT_GPU();
    cr_assert_eq(run_ranks(1, s_nccl_rank, (void *)"Tree", 110000), 0);
}

/* Two ranks: with one GPU NCCL must be refused up front (same error on both), with two it must work. */
static int s_nccl_two_rank(int rank, int world, void *arg)
{
    (void)arg;
    comm_t *comm = NULL;
    if (s_comm(&comm) < 0) return 1;
    int n = dev_count(NULL, 0);
    int dev = dev_select(comm->local_rank, NULL, 0), bad = 0;
    if (dev < 0) return 1;
    ncclw_t *nc = NULL;
    int rc = ncclw_new(&nc, comm, dev, "Ring", 30000);
    if (n == 1) {
        if (rc != ERR_UNSUP || !strstr(err_detail(), "two ranks on one GPU")) {
            fprintf(stderr, "rank %d: want ERR_UNSUP for a shared GPU, got %d %s\n", rank, rc, err_detail());
            bad++;
        }
    } else if (rc < 0) {
        bad++;
    } else {
        bad += s_dev_case("nccl P=2", nc, s_nccl_fn, rank, world, 100003, DT_F32, OP_SUM, 0);
    }
    ncclw_destroy(&nc);
    comm_destroy(&comm);
    return bad ? 1 : 0;
}

Test(gpu, nccl_two_ranks, .timeout = 120)
{
    SKIP_WITHOUT_GPU();
    cr_assert_eq(run_ranks(2, s_nccl_two_rank, NULL, 110000), 0);
}

static int s_tree_fn(void *obj, const void *s, void *r, size_t c, dtype_t dt, redop_t op, int tmo)
{
    return tree_gpu_allreduce(obj, s, r, c, dt, op, tmo);
}

static int s_tree_rank(int rank, int world, void *arg)
{
    size_t seg = *(size_t *)arg;
    comm_t *comm = NULL;
    char b[512];
    if (s_comm(&comm) < 0) return 1;
    int dev = dev_select(comm->local_rank, NULL, 0), bad = 0;
    if (dev < 0) { fprintf(stderr, "dev_select: %s\n", err_detail()); return 1; }
    tree_gpu_t *tg = NULL;
    int rc = tree_gpu_new(&tg, comm, dev, seg, 30000);
    if (rc < 0) {
        fprintf(stderr, "rank %d tree_gpu_new: %s\n", rank, err_trace(rc, b, sizeof b));
        comm_destroy(&comm);
        return 1;
    }
    if (rank == 0) fprintf(stderr, "%s\n", tree_gpu_impl(tg));
    /* 100003 f32 with 16 KiB segments: 25 segments through 4 slots, then smaller counts (seq continues) */
    size_t counts[] = {100003, 0, 1, (size_t)world - 1, 4099, 1000003};
    for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
        for (int dt = 0; dt < DT_COUNT; dt++)
            for (int op = 0; op < 2; op++) {
                if (counts[ci] == 1000003 && dt != DT_F32) continue;
                bad += s_dev_case("gpu tree", tg, s_tree_fn, rank, world, counts[ci], (dtype_t)dt, (redop_t)op,
                                  (int)(ci + (size_t)dt + (size_t)op) % 2);
            }
    tree_gpu_destroy(&tg);
    tree_gpu_destroy(&tg);
    comm_destroy(&comm);
    return bad ? 1 : 0;
}

#define TREE_GPU_TEST(P, SEG)                                                          \
    Test(gpu, ipc_tree_p##P##_seg##SEG, .timeout = 240) {                              \
        SKIP_WITHOUT_GPU();                                                            \
        size_t seg = (size_t)(SEG) << 10;                                              \
        cr_assert_eq(run_ranks(P, s_tree_rank, &seg, 230000), 0, "gpu tree P=%d", P);  \
    }
TREE_GPU_TEST(1, 16)
TREE_GPU_TEST(2, 16)
TREE_GPU_TEST(3, 16)
TREE_GPU_TEST(5, 64)
TREE_GPU_TEST(3, 0)
