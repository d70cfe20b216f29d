/* test_cluster.c: the emulated GPU cluster: rank placement, shaped rates, automatic shrink, the
 * host-bound verdict (and the harness naming the host on a machine made busy), the cluster cost
 * model on hand-computed cases, and a 2-machine x 2-GPU run over shaped links (root only) whose
 * step time matches its schedule. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "harness/emulate/cluster.h"
#include "harness/registry/engines.h"
#include "harness/model/cluster_cost.h"
#include "harness/model/cluster_int.h"
#include "tests/lib/ranks.h"
#include "tests/lib/mconf.h"

Test(cluster, placement_of_workers_and_servers)
{
    h_cluster_t c = {.nodes = 2, .gpus_per_node = 2};
    /* workers 0..3 on machines 0,0,1,1; two servers on GPU machines 0 and 1 (TensorFlow's placement) */
    int want[6] = {0, 0, 1, 1, 0, 1};
    for (int r = 0; r < 6; r++) cr_expect_eq(h_cluster_machine_of(&c, r, 4), want[r], "rank %d", r);
    cr_expect_eq(h_cluster_machines(&c, 1), 2);
    /* BytePS layout: servers on CPU machines 2 and 3 */
    c.server_nodes = 2;
    int want2[7] = {0, 0, 1, 1, 2, 3, 2};
    for (int r = 0; r < 7; r++) cr_expect_eq(h_cluster_machine_of(&c, r, 4), want2[r], "rank %d", r);
    cr_expect_eq(h_cluster_machines(&c, 1), 4);
    cr_expect_eq(h_cluster_machines(&c, 0), 2, "no servers: no server machines");
}

Test(cluster, shaped_rate_and_auto_shrink)
{
    h_cluster_t c = {.nodes = 4, .gpus_per_node = 4, .inter_bps = 25e9, .shrink = 32, .dilate = 2};
    cr_expect_float_eq(h_cluster_shaped_bps(&c), 25e9 / 64, 1);
    c.dilate = 1;
    /* VGG-16: 553 MB a worker, 16 workers: NICs <= 1 Gbit/s needs 32; memory 5 x 553 MB x 16 / 32 fits 8 GB */
    h_shrink_need_t n = {.model_bytes = 553430176, .nranks = 16, .mem_budget = 8e9, .max_link_bps = 1e9};
    cr_expect_eq(h_cluster_auto_shrink(&c, &n), 32);
    /* a small memory budget asks for more */
    n.mem_budget = 0.5e9;
    cr_expect_eq(h_cluster_auto_shrink(&c, &n), 128);
    n.mem_budget = 8e9;
    /* dilation slows the links too: less shrink needed for the same rate */
    c.dilate = 4;
    cr_expect_eq(h_cluster_auto_shrink(&c, &n), 8);
    c.dilate = 1;
    /* the host-work rule: VGG-16 at 489 ms of compute, 48 KB/ms: 553 MB / 24 ms -> 32, the link's answer */
    n.compute_host_ms = 489, n.max_bytes_per_ms = 48e3;
    cr_expect_eq(h_cluster_auto_shrink(&c, &n), 32);
    /* BERT-large, 1341 MB at 373 ms: 75 -> 128, whatever the link */
    n.model_bytes = 1340697832, n.compute_host_ms = 373;
    cr_expect_eq(h_cluster_auto_shrink(&c, &n), 128);
    c.inter_bps = 0;
    cr_expect_eq(h_cluster_auto_shrink(&c, &n), 128, "one machine, no NIC: the host-work rule alone");
    /* it stops at the partition floor's shrink, and is off where compute is negligible */
    n.compute_host_ms = 20;
    cr_expect_eq(h_cluster_auto_shrink(&c, &n), H_SHRINK_HOST_MAX);
    n.compute_host_ms = 0.6, n.nranks = 1;
    cr_expect_eq(h_cluster_auto_shrink(&c, &n), 1, "no NIC, negligible compute, one rank's buffers fit: no shrink");
}

Test(cluster, host_bound_verdict)
{
    double b;
    cr_expect_eq(h_cluster_host_bound(0.5, 0.3, 1.0, 2, 0.3, &b), 0);
    cr_expect_float_eq(b, 0.25, 1e-12);
    cr_expect_eq(h_cluster_host_bound(1.6, 0.5, 1.0, 2, 0.8, &b), 1, "ranks at 80% of the cores");
    cr_expect_eq(h_cluster_host_bound(0.95, 0.95, 1.0, 2, 0.5, &b), 1, "one rank on a CPU all the time");
    cr_expect_eq(h_cluster_host_bound(0.2, 0.1, 1.0, 2, 0.9, &b), 1, "the machine busy with other work");
    cr_expect_eq(h_cluster_host_bound(0.2, 0.1, 1.0, 2, -1, &b), 0, "unknown machine load");
    unsigned long long busy, total;
    cr_assert_eq(h_host_cpu_sample(&busy, &total), 0);
    cr_expect(total > 0 && busy <= total);
}

Test(clustermodel, traffic_hand_computed)
{
    h_cl_net_t net = {.nodes = 2, .gpus_per_node = 2, .beta = 1e-9, .alpha = 1e-5};
    double b, m;
    h_cl_engine_t ring = t_layout("ring", 2, 2);
    h_cl_traffic(&net, &ring, 1e6, &b, &m);
    cr_expect_float_eq(b, 1.5e6, 1e-6, "ring: 2(P-1)/P n = 1.5 n at P = 4");
    cr_expect_float_eq(m, 6, 1e-12);
    cr_expect_float_eq(h_cl_collective(&net, &ring, 1e6), 6e-5 + 1.5e-3, 1e-12);
    cr_expect_eq(ring.owners, 0, "an allreduce has no owners");
    h_cl_engine_t ps1 = t_layout("ps-1server", 2, 2);
    cr_expect_eq(ps1.owners, 1, "the PS's servers own its partitions");
    h_cl_traffic(&net, &ps1, 1e6, &b, &m);
    cr_expect_float_eq(b, 4e6, 1e-6, "one server machine takes all 4 workers' n");
    cr_expect_float_eq(m, 2, 1e-12, "a push and a pull");
    h_cl_engine_t ps4 = t_servers(4, 2, 2);
    h_cl_traffic(&net, &ps4, 1e6, &b, &m);
    cr_expect_float_eq(b, 2e6, 1e-6, "four server machines: a GPU machine's G n is the bound");
    h_cl_engine_t tf = t_layout("ps-per-node", 2, 2);
    h_cl_traffic(&net, &tf, 1e6, &b, &m);
    /* one phase: machine 0 holds half; its 2 workers push 0.5 n out, the 2 remote workers push 0.5 n in */
    cr_expect_float_eq(b, 1e6, 1e-6);
    h_cl_engine_t col = t_layout("ps-colocated", 2, 2);
    h_cl_traffic(&net, &col, 1e6, &b, &m);
    cr_expect_float_eq(b, 1e6, 1e-6, "colocated, one phase: G n (P - G) / P");
    /* machine-local aggregation: only a machine's leader pushes, n to the N server machines; the local reduce
     * and broadcast are two more messages in series */
    h_cl_engine_t agg = t_layout("ps-K=N-localagg", 2, 2);
    h_cl_traffic(&net, &agg, 1e6, &b, &m);
    cr_expect_float_eq(b, 1e6, 1e-6, "localagg: a leader's n out, a server machine's 2 x n / 2 in");
    cr_expect_float_eq(m, 4, 1e-12);
    cr_expect_eq(agg.fan_in, 2, "the leaders push, not the workers");
    h_cl_engine_t cagg = t_layout("ps-colocated-localagg", 2, 2);
    cr_expect_float_eq(h_cl_ps_duplex_bytes(&net, &cagg, 1e6), 1e6, 1e-6, "n / 2 pushed and n / 2 replied out");
    net.nodes = 1;
    net.gpus_per_node = 4;
    h_cl_engine_t tree = t_layout("tree", 1, 4);
    h_cl_traffic(&net, &tree, 1e6, &b, &m);
    cr_expect_float_eq(b, 0, 1e-12, "one machine: nothing crosses a NIC");
}

/* The allreduce engines' NIC bytes and messages come from their declared schedules through the registry:
 * the ring's are its closed form; the tree's on 2 machines of 2 (tree 0: 1 -> 2 -> 0 <- ... 3 -> 2, tree 1:
 * 0 -> 1 -> 3, 2 -> 1, as `harness explain --engine tree --procs 4` draws them: four edges cross, each n/2
 * up and n/2 down) are 2 n each way and its 2 x 2 steps that move bytes; one machine: none. */
Test(clustermodel, allreduce_traffic_from_the_schedules)
{
    static const int NG[][2] = {{2, 2}, {4, 4}, {3, 1}, {8, 4}};
    for (size_t i = 0; i < sizeof NG / sizeof NG[0]; i++) {
        int N = NG[i][0], G = NG[i][1], P = N * G;
        h_cl_engine_t e = t_layout("ring", N, G);
        cr_expect_float_eq(e.nic_per_byte, 2.0 * (P - 1) / P, 1e-12, "ring %dx%d: %g", N, G, e.nic_per_byte);
        cr_expect_float_eq(e.msgs, 2.0 * (P - 1), 1e-12);
    }
    h_cl_engine_t t = t_layout("tree", 2, 2);
    cr_expect_float_eq(t.nic_per_byte, 2.0, 1e-12, "tree 2x2: %g", t.nic_per_byte);
    cr_expect_float_eq(t.msgs, 4, 1e-12);
    t = t_layout("tree", 1, 4);
    cr_expect_float_eq(t.nic_per_byte, 0, 1e-12, "one machine: nothing crosses a NIC");
    h_mc_conf_t bad = {.layout = NULL, .row = H_MC_OWN_ROW};
    snprintf(bad.label, sizeof bad.label, "nosuch");
    snprintf(bad.engine, sizeof bad.engine, "nosuch");
    cr_expect_neq(h_mc_traffic(&bad, 2, 2, &t, NULL), 0, "an engine the registry lacks");
    /* the PS's partition is the schedule's, the engine's default */
    cr_expect_float_eq(t_layout("ps-K=N", 4, 4).part_bytes, 4194304, 1e-9);
}

/* The closed forms the model had before it read the PS's schedule (a phase's busiest NIC direction: one
 * server machine or K of them, a server on every GPU machine, colocated), kept here to pin that the
 * schedule-derived bytes are the same on every layout the model had, N and G. */
static double s_closed_ps(int N, int G, int S, int K, int coloc, double n)
{
    int P = N * G;
    if (coloc) return N > 1 ? (double)G * n * (double)(P - G) / P : 0;
    if (K > 0) return fmax(G * n, n * ceil((double)S / K) / S * P);
    double worst = 0;
    for (int m = 0; m < N; m++) {
        int sm = 0;
        for (int s = 0; s < S; s++) sm += s % N == m;
        double h = (double)sm / S;
        worst = fmax(worst, fmax(G * n * (1 - h), h * n * (P - G)));
    }
    return N > 1 ? worst : 0;
}

/* ...and its closed form of both phases on one direction (pipelined, no slowdown) */
static double s_closed_duplex(int N, int G, int S, int K, int coloc, double n)
{
    int P = N * G;
    if (N <= 1) return 0;
    if (coloc) return G * n * (double)(P - G) / P * 2;
    if (K > 0) return s_closed_ps(N, G, S, K, coloc, n);
    double worst = 0;
    for (int m = 0; m < N; m++) {
        int sm = 0;
        for (int s = 0; s < S; s++) sm += s % N == m;
        double h = (double)sm / S;
        worst = fmax(worst, G * n * (1 - h) + h * n * (P - G));
    }
    return worst;
}

Test(clustermodel, ps_schedule_bytes_are_the_old_closed_forms)
{
    static const int NG[][2] = {{1, 4}, {2, 2}, {4, 1}, {4, 4}, {3, 2}, {8, 8}, {16, 4}};
    static const char *const layouts[] = {"ps-1server", "ps-per-node", "ps-K=N", "ps-colocated"};
    for (size_t i = 0; i < sizeof NG / sizeof NG[0]; i++)
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            int N = NG[i][0], G = NG[i][1], K = l == 0 ? 1 : l == 2 ? N : 0, coloc = l == 3;
            int S = l == 0 ? 1 : coloc ? 0 : N;
            h_cl_net_t net = {.nodes = N, .gpus_per_node = G, .beta = 1e-9};
            h_cl_engine_t e = t_layout(layouts[l], N, G);
            e.pipelined = 1;
            double nic, msgs, n = 1e6;
            h_cl_traffic(&net, &e, n, &nic, &msgs);
            double want = s_closed_ps(N, G, S, K, coloc, n), dup = s_closed_duplex(N, G, S, K, coloc, n);
            cr_expect_float_eq(nic, want, 1e-9 * want + 1e-6, "%s %dx%d: closed form %.0f, schedule %.0f", layouts[l], N,
                               G, want, nic);
            cr_expect_float_eq(h_cl_reply_bytes(&net, &e, n), want, 1e-9 * want + 1e-6, "%s %dx%d: replies", layouts[l], N, G);
            if (N > 1)
                cr_expect_float_eq(h_cl_ps_duplex_bytes(&net, &e, n), dup, 1e-9 * dup + 1e-6, "%s %dx%d: both phases %.0f, "
                                   "schedule %.0f", layouts[l], N, G, dup, h_cl_ps_duplex_bytes(&net, &e, n));
            cr_expect_float_eq(msgs, 2, 1e-12);
            /* the old law's f and machines: every worker into servers of their own, the P - G remote ones else */
            cr_expect_eq(e.fan_in, K > 0 ? N * G : N > 1 ? N * G - G : 0, "%s %dx%d: fan-in %d", layouts[l], N, G, e.fan_in);
            if (e.fan_in) cr_expect_eq(e.fan_machines, K > 0 ? N : N - 1);
        }
    /* servers on 1 < K < N machines of their own (the BytePS sweep) */
    for (int K = 2; K < 4; K++) {
        h_cl_net_t net = {.nodes = 4, .gpus_per_node = 2, .beta = 1e-9};
        h_cl_engine_t e = t_servers(K, 4, 2);
        double nic, msgs;
        h_cl_traffic(&net, &e, 1e6, &nic, &msgs);
        cr_expect_float_eq(nic, s_closed_ps(4, 2, K, K, 0, 1e6), 1e-3, "K = %d", K);
    }
}

Test(clustermodel, ps_replies_follow_the_last_push)
{
    h_cl_net_t net = {.nodes = 2, .gpus_per_node = 1, .beta = 1e-3, .alpha = 0};
    h_cl_engine_t ps = t_layout("ps-1server", 2, 1);
    /* one server machine, 2 workers: a push phase moves 2 n into it. Pushes: 10 B at 10 ms (20 ms), 5 B
     * at 20 ms (10 ms) -> 40 ms; then the replies of all 15 B: 30 ms -> 70 ms */
    double ready[2] = {0.010, 0.020}, bytes[2] = {10, 5};
    cr_expect_float_eq(h_cl_step(&net, &ps, 2, ready, bytes, 0.030, NULL), 0.070, 1e-12);
}

Test(clustermodel, ps_pipelined_replies_follow_their_bucket)
{
    h_cl_net_t net = {.nodes = 2, .gpus_per_node = 1, .beta = 1e-3, .alpha = 0};
    /* servers on a machine of their own: pushes into it, replies out of it, opposite directions. Pushes:
     * 10 B at 10 ms -> 30 ms, 5 B at 30 ms -> 40 ms; replies: bucket 0 30 -> 50 ms, bucket 1 50 -> 60 ms */
    h_cl_engine_t ded = t_layout("ps-1server", 2, 1);
    ded.pipelined = 1;
    double ready[2] = {0.010, 0.020}, bytes[2] = {10, 5};
    cr_expect_float_eq(h_cl_step(&net, &ded, 2, ready, bytes, 0.030, NULL), 0.060, 1e-12);
    /* a server on each of the 2 GPU machines: each NIC direction carries its worker's half-push to the
     * other server (n/2) and its server's reply to the other worker (n/2) at once: n per bucket.
     * 10 B: 10 -> 20 ms; 5 B: 20 -> 25 ms */
    h_cl_engine_t per = t_layout("ps-per-node", 2, 1);
    per.pipelined = 1;
    cr_expect_float_eq(h_cl_ps_duplex_bytes(&net, &per, 10), 10, 1e-12);
    cr_expect_float_eq(h_cl_step(&net, &per, 2, ready, bytes, 0.010, NULL), 0.025, 1e-12);
}

Test(clustermodel, step_overlaps_backward)
{
    h_cl_net_t net = {.nodes = 2, .gpus_per_node = 1, .beta = 1e-3, .alpha = 0};
    h_cl_engine_t ring = t_layout("ring", 2, 1);
    /* P = 2: a bucket of n bytes costs n ms. Buckets ready at 10, 20, 30 ms (10, 5, 20 bytes), compute 30 ms:
     * 10 -> 20 ms, then 20 -> 25 ms, then 30 -> 50 ms */
    double ready[3] = {0.010, 0.020, 0.030}, bytes[3] = {10, 5, 20}, exposed;
    double step = h_cl_step(&net, &ring, 3, ready, bytes, 0.030, &exposed);
    cr_expect_float_eq(step, 0.050, 1e-12);
    cr_expect_float_eq(exposed, 0.020, 1e-12);
}

/* ---- end to end through the harness ---- */

static char g_harness[512];

/* two tensors: a 4 MB one ready a third into backward, a small one at its end; 300 FLOPs a sample */
static void s_profile(char *path, size_t len)
{
    snprintf(path, len, "/tmp/sb-cluster-%d.tsv", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("# twolayer: 2 tensors, hand-made\nbig.weight\t1000000\t50\t100\nsmall.weight\t1000\t50\t100\n", f);
    fclose(f);
}

static double s_field(const char *out, const char *key)
{
    const char *p = strstr(out, key);
    return p ? atof(p + strlen(key)) : NAN;
}

Test(cluster_run, host_made_busy_is_named, .timeout = 120)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
    char prof[64], cmd[2048], out[1 << 16];
    s_profile(prof, sizeof prof);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    pid_t burn[64];
    int nb = cores > 0 && cores < 64 ? (int)cores : 2;
    for (int i = 0; i < nb; i++)
        if ((burn[i] = fork()) == 0) {
            alarm(100); /* never outlive the test */
            for (volatile unsigned long x = 0;; x++) {}
        }
    char json[] = "/tmp/sb-hostq-XXXXXX";
    int jfd = mkstemp(json);
    cr_assert(jfd >= 0);
    close(jfd);
    snprintf(cmd, sizeof cmd, "%s train --model %s --device throughput=400 --nodes 1 --gpus-per-node 2 --engine ring "
             "--batch 16 --steps 7 --warmup-steps 1 --quiet --json %s", g_harness, prof, json);
    int rc = run_cmd(cmd, out, sizeof out);
    for (int i = 0; i < nb; i++) {
        kill(burn[i], SIGKILL);
        waitpid(burn[i], NULL, 0);
    }
    unlink(prof);
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "host-bound:") != NULL, "a machine kept busy by %d burners is named as the bound:\n%s", nb, out);
    /* the ranks' threads queued behind the burners for a CPU, and the line says how long (host_wait: their run
     * delay over wall time; the "# host queue" line only from 10%, which ranks that sleep out their emulated
     * compute need not reach) */
    char line[1 << 14] = "";
    FILE *f = fopen(json, "r");
    cr_assert(f);
    cr_assert(fgets(line, sizeof line, f));
    fclose(f);
    unlink(json);
    const char *w = strstr(line, "\"host_wait\": ");
    cr_expect(w && strtod(w + strlen("\"host_wait\": "), NULL) > 0, "no positive host_wait beside %d burners: %s", nb, line);
}

Test(cluster_run, two_machines_shaped_links_match_the_schedule, .timeout = 180)
{
    if (geteuid() != 0) cr_skip_test("shaped links need root (network namespaces and tc)");
    if (system("command -v tc >/dev/null 2>&1 && command -v ip >/dev/null 2>&1") != 0)
        cr_skip_test("shaped links need ip and tc (iproute2)");
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
    char prof[64], cmd[2048], out[1 << 16], json[64];
    s_profile(prof, sizeof prof);
    snprintf(json, sizeof json, "/tmp/sb-cluster-%d.jsonl", (int)getpid());
    unlink(json);
    /* 8 samples a GPU at 40/s: 200 ms of compute, the big gradient ready at 100 ms. The NICs at 200 Mbit/s:
     * the ring (P = 4, 2 machines) moves 1.5 x 4 MB through each, about 0.25 s */
    snprintf(cmd, sizeof cmd, "%s train --model %s --device throughput=40 --nodes 2 --gpus-per-node 2 --net inter=200mbit "
             "--shrink 1 --bucket-mb 1 --engine ring --batch 32 --steps 5 --warmup-steps 1 --quiet --json %s",
             g_harness, prof, json);
    int rc = run_cmd(cmd, out, sizeof out);
    unlink(prof);
    cr_assert_eq(rc, 0, "%s", out);
    FILE *f = fopen(json, "r");
    cr_assert_not_null(f, "%s", out);
    char line[16384] = "";
    cr_assert(fgets(line, sizeof line, f));
    fclose(f);
    unlink(json);
    double step = s_field(line, "\"emu_step_ms\": "), comp = s_field(line, "\"emu_compute_ms\": ");
    cr_expect_float_eq(comp, 200.0, 1e-6, "compute from the device: %s", line);
    /* the schedule: the big bucket ready at 100 ms, the small one at 200 ms; TCP/IP headers ~3-6% on the wire */
    h_cl_net_t net = {.nodes = 2, .gpus_per_node = 2, .beta = 8.0 / 200e6 * 1.05, .alpha = 0};
    h_cl_engine_t ring = t_layout("ring", 2, 2);
    double ready[2] = {0.100, 0.200}, bytes[2] = {4e6, 4e3};
    double want = h_cl_step(&net, &ring, 2, ready, bytes, 0.200, NULL) * 1e3;
    cr_expect(step > want * 0.85 && step < want * 1.25, "step %.1f ms, the schedule says %.1f ms:\n%s", step, want, out);
}
