/* explain.c: `harness explain` (explain.h): the allreduce schedule of one engine for a small world as
 * text, step by step: who sends which chunk or partition to whom, what is reduced where, and what each
 * rank holds after the step (the set of ranks whose inputs a value sums: {0-3} is complete). Every
 * step comes from the engines' own schedule functions, so the text cannot drift from the code. */
#include "harness/modes/explain.h"
#include "harness/modes/explain_draw.h"
#include "harness/record/traffic.h"
#include "allreduce-tree/tree.h"
#include "core/err.h"
#include "ps/ps.h"
#include "ps/ps_proto.h"
#include "ring/ring.h"
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

/* --plots DIR: one diagram per step (explain_draw.h); every step's link bytes, from L's growth */
_Static_assert(H_EXPLAIN_MAX <= H_XD_RANKS, "a diagram holds every rank explain allows");
static h_xdraw_t g_d;
static struct {
    FILE *out;
    const uint64_t *L;
    uint64_t prev[H_EXPLAIN_MAX * H_EXPLAIN_MAX];
    int W, rc;
} g_x;

static void s_edge(int from, int to, const char *label) { h_xd_edge(&g_d, from, to, label); }

static void s_step_begin(const char *fmt, int a, int b)
{
    char t[128];
    snprintf(t, sizeof t, fmt, a, b);
    h_xd_step(&g_d, t);
}

static void s_bytes(double b, char *out, size_t len);

/* "busiest link X, mean Y over N links (max/mean R); busiest NIC rank k X in+out, mean Y (max/mean R)"
 * of the W x W matrix m over steps */
static void s_stats(const uint64_t *m, int W, double steps, char *buf, size_t len)
{
    double d[H_EXPLAIN_MAX * H_EXPLAIN_MAX];
    h_traffic_stats_t st;
    for (int i = 0; i < W * W; i++) d[i] = (double)m[i];
    if (h_traffic_stats(d, (size_t)W * (size_t)W, steps, &st) < 0) {
        snprintf(buf, len, "-");
        return;
    }
    if (!st.links) {
        snprintf(buf, len, "no message");
        return;
    }
    char a[32], b[32], c[32], e[32];
    s_bytes(st.link_max, a, sizeof a);
    s_bytes(st.link_mean, b, sizeof b);
    s_bytes(st.nic_max, c, sizeof c);
    s_bytes(st.nic_mean, e, sizeof e);
    snprintf(buf, len, "busiest link %s, mean %s over %zu links (max/mean %.2f); busiest NIC rank %d %s in+out, "
             "mean %s (max/mean %.2f)", a, b, st.links, h_traffic_ratio(st.link_max, st.link_mean), st.nic_busiest, c,
             e, h_traffic_ratio(st.nic_max, st.nic_mean));
}

/* The step's link bytes (L now minus L at the previous step) as text, then its diagram. */
static void s_step_end(void)
{
    uint64_t m[H_EXPLAIN_MAX * H_EXPLAIN_MAX];
    char buf[320];
    for (int i = 0; i < g_x.W * g_x.W; i++) {
        m[i] = g_x.L[i] - g_x.prev[i];
        g_x.prev[i] = g_x.L[i];
    }
    s_stats(m, g_x.W, 1, buf, sizeof buf);
    fprintf(g_x.out, "  links this step: %s\n", buf);
    h_xd_note(&g_d, buf);
    int rc = h_xd_step_end(&g_d, g_x.out);
    if (rc < 0 && g_x.rc == 0) g_x.rc = rc;
}

typedef uint32_t s_set_t;   /* ranks whose inputs a value holds (bit r) */

/* "{0-3}" / "{0,2}" / "-" */
static const char *s_set(s_set_t m, char *buf, size_t len)
{
    size_t o = 0;
    if (!m) return "-";
    buf[o++] = '{';
    for (int r = 0; r < 32 && o + 8 < len; r++) {
        if (!(m >> r & 1)) continue;
        int e = r;
        while (e + 1 < 32 && (m >> (e + 1) & 1)) e++;
        o += (size_t)snprintf(buf + o, len - o, "%s%d", o > 1 ? "," : "", r);
        if (e > r) o += (size_t)snprintf(buf + o, len - o, "%s%d", e > r + 1 ? "-" : ",", e);
        r = e;
    }
    snprintf(buf + o, len - o, "}");
    return buf;
}

static void s_bytes(double b, char *out, size_t len)
{
    if (b >= 1048576 && (uint64_t)b % 1048576 == 0) snprintf(out, len, "%.0f MiB", b / 1048576);
    else if (b >= 1024 && (uint64_t)b % 1024 == 0) snprintf(out, len, "%.0f KiB", b / 1024);
    else if (b >= 1048576) snprintf(out, len, "%.2f MiB", b / 1048576);
    else if (b >= 1024) snprintf(out, len, "%.2f KiB", b / 1024);
    else snprintf(out, len, "%.0f B", b);
}

static void s_ring(FILE *out, int P, size_t count, size_t esz, uint64_t *L)
{
    static s_set_t hold[H_EXPLAIN_MAX][H_EXPLAIN_MAX];   /* [rank][chunk] */
    char a[64], b[64];
    fprintf(out, "# the buffer is cut into %d chunks, one per rank:", P);
    for (int c = 0; c < P; c++) {
        s_bytes((double)(ring_chunk_len(count, P, c) * esz), a, sizeof a);
        fprintf(out, " c%d = [%zu, +%zu) %s;", c, ring_chunk_start(count, P, c), ring_chunk_len(count, P, c), a);
    }
    fprintf(out, "\n# before: every rank r holds its own input of every chunk, {r}\n");
    for (int r = 0; r < P; r++)
        for (int c = 0; c < P; c++) hold[r][c] = 1u << r;
    for (int step = 0; step < 2 * (P - 1); step++) {
        ring_step_t st[H_EXPLAIN_MAX];
        for (int r = 0; r < P; r++) ring_schedule(P, r, step, &st[r]);
        int ag = st[0].allgather, k = ag ? step - (P - 1) : step;
        fprintf(out, "\nstep %d: %s %d of %d\n", step + 1, ag ? "allgather" : "reduce-scatter", k + 1, P - 1);
        s_step_begin(ag ? "ring: allgather %d of %d" : "ring: reduce-scatter %d of %d", k + 1, P - 1);
        s_set_t sent[H_EXPLAIN_MAX];
        for (int r = 0; r < P; r++) sent[r] = hold[r][st[r].send_chunk];
        for (int r = 0; r < P; r++) {
            int c = st[r].send_chunk, to = st[r].to;
            size_t n = ring_chunk_len(count, P, c) * esz;
            L[r * P + to] += n;
            s_bytes((double)n, a, sizeof a);
            fprintf(out, "  rank %d -> rank %d: chunk c%d %s (%s)", r, to, c, s_set(sent[r], b, sizeof b), a);
            char el[96];
            snprintf(el, sizeof el, "c%d %s", c, b);
            s_edge(r, to, el);
            if (ag) fprintf(out, "; rank %d stores it: complete\n", to);
            else fprintf(out, "; rank %d adds its own c%d%s\n", to, c, k == P - 2 ? ": complete" : "");
        }
        for (int r = 0; r < P; r++) {
            int c = st[r].recv_chunk, from = st[r].from;
            hold[r][c] = ag ? sent[from] : hold[r][c] | sent[from];
        }
        fprintf(out, "  after:");
        for (int r = 0; r < P; r++) {
            char h[256];
            size_t n = 0;
            for (int c = 0; c < P && n < sizeof h; c++)
                n += (size_t)snprintf(h + n, sizeof h - n, "%sc%d%s", c ? " " : "", c, s_set(hold[r][c], b, sizeof b));
            fprintf(out, "%s rank %d %s", r ? ";" : "", r, h);
            h_xd_hold(&g_d, r, h);
        }
        fprintf(out, "\n");
        s_step_end();
    }
}

static void s_tree(FILE *out, int P, size_t count, size_t esz, uint64_t *L)
{
    size_t c0 = tree_split(count), cnt[2] = {c0, count - c0};
    char a[64], b[64];
    int D[2] = {0, 0}, depth[2][H_EXPLAIN_MAX], parent[2][H_EXPLAIN_MAX], child[2][H_EXPLAIN_MAX][2];
    for (int t = 0; t < 2; t++) {
        s_bytes((double)(cnt[t] * esz), a, sizeof a);
        fprintf(out, "# tree %d carries elements [%zu, +%zu) (%s):", t, t ? c0 : 0, cnt[t], a);
        for (int r = 0; r < P; r++) {
            tree_shape(P, t, r, &parent[t][r], child[t][r]);
            depth[t][r] = tree_depth(P, t, r);
            if (depth[t][r] > D[t]) D[t] = depth[t][r];
            fprintf(out, " %d", r);
            if (parent[t][r] < 0) fprintf(out, "(root)");
            else fprintf(out, "->%d", parent[t][r]);
        }
        fprintf(out, "  (child->parent, depth %d)\n", D[t]);
    }
    fprintf(out, "# before: every rank r holds its own input of both halves, {r}. A value sent at step k is used at step k+1.\n");
    s_set_t hold[2][H_EXPLAIN_MAX];
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < P; r++) hold[t][r] = 1u << r;
    int steps = 2 * (D[0] > D[1] ? D[0] : D[1]) + 1;
    for (int tau = 0; tau < steps; tau++) {
        fprintf(out, "\nstep %d\n", tau + 1);
        s_step_begin("tree: step %d of %d (h0 = tree 0's half, h1 = tree 1's)", tau + 1, steps);
        for (int t = 0; t < 2; t++) {
            if (!cnt[t]) continue;
            size_t n = cnt[t] * esz;
            s_bytes((double)n, a, sizeof a);
            for (int r = 0; r < P; r++) {
                int d = depth[t][r];
                if (tau == D[t] - d) { /* up: own + children's sums (received last step), to the parent */
                    for (int k = 0; k < 2; k++)
                        if (child[t][r][k] >= 0) hold[t][r] |= hold[t][child[t][r][k]];
                    if (parent[t][r] >= 0) {
                        L[r * P + parent[t][r]] += n;
                        char el[96];
                        snprintf(el, sizeof el, "up h%d %s", t, s_set(hold[t][r], b, sizeof b));
                        s_edge(r, parent[t][r], el);
                        fprintf(out, "  tree %d up:   rank %d reduces and sends %s (%s) to rank %d\n", t, r,
                                s_set(hold[t][r], b, sizeof b), a, parent[t][r]);
                    } else {
                        fprintf(out, "  tree %d root: rank %d reduces %s: complete\n", t, r, s_set(hold[t][r], b, sizeof b));
                    }
                }
                if (tau == D[t] + d) { /* down: the final half from the parent, on to the children */
                    if (parent[t][r] >= 0) hold[t][r] = hold[t][parent[t][r]];
                    for (int k = 0; k < 2; k++)
                        if (child[t][r][k] >= 0) {
                            L[r * P + child[t][r][k]] += n;
                            char el[96];
                            snprintf(el, sizeof el, "down h%d", t);
                            s_edge(r, child[t][r][k], el);
                            fprintf(out, "  tree %d down: rank %d sends the complete half %s (%s) to rank %d\n", t, r,
                                    s_set(hold[t][r], b, sizeof b), a, child[t][r][k]);
                        }
                }
            }
        }
        fprintf(out, "  after:");
        for (int r = 0; r < P; r++) {
            char h[160];
            snprintf(h, sizeof h, "h0%s h1%s", s_set(hold[0][r], a, sizeof a), s_set(hold[1][r], b, sizeof b));
            fprintf(out, "%s rank %d %s", r ? ";" : "", r, h);
            h_xd_hold(&g_d, r, h);
        }
        fprintf(out, "\n");
        s_step_end();
    }
}

/* The diagram's holdings after a PS step: every worker `wtext` (all partitions), each server its
 * partitions' `stext`, all of them from every worker. */
static void s_ps_holds(const ps_layout_t *lay, int P, int S, int coloc, const char *wtext, const char *stext)
{
    for (int sv = 0; sv < S; sv++) {
        char h[256];
        size_t n = (size_t)snprintf(h, sizeof h, "%s of", stext);
        for (size_t k = 0; k < lay->nparts && n + 16 < sizeof h; k++)
            if (ps_part_owner(lay, k) == sv) n += (size_t)snprintf(h + n, sizeof h - n, " p%zu", k);
        if (n + 16 >= sizeof h) snprintf(h + n, sizeof h - n, " ...");
        if (coloc) {   /* rank s is worker s and server s */
            char w[300];
            snprintf(w, sizeof w, "%s; server: %s", wtext, h);
            h_xd_hold(&g_d, sv, w);
        } else {
            h_xd_hold(&g_d, P + sv, h);
        }
    }
    for (int w = coloc ? S : 0; w < P; w++) h_xd_hold(&g_d, w, wtext);
}

static void s_ps(FILE *out, int P, int S, int coloc, size_t count, size_t esz, size_t part_bytes, uint64_t *L, int W)
{
    ps_layout_t lay;
    ps_layout_init(&lay, count, esz, part_bytes, S);
    char a[64], b[64];
    fprintf(out, "# %zu partitions of up to %zu elements, partition k on server k mod %d; server s is rank %s\n", lay.nparts,
            lay.part_elems, S, coloc ? "s (a thread inside worker s: its own worker's traffic stays inside)" : "P + s");
    s_set_t all = P >= 32 ? ~0u : (1u << P) - 1;
    fprintf(out, "\nstep 1: push (every worker sends every partition to its server)\n");
    s_step_begin("ps: push (workers -> servers)%.0d%.0d", 0, 0);
    for (size_t k = 0; k < lay.nparts; k++) {
        int s = ps_part_owner(&lay, k), sr = coloc ? s : P + s;
        size_t n = ps_part_len(&lay, k) * esz;
        s_bytes((double)n, a, sizeof a);
        fprintf(out, "  partition %zu [%zu, +%zu) %s: workers", k, ps_part_start(&lay, k), ps_part_len(&lay, k), a);
        for (int w = 0; w < P; w++) {
            if (w != sr) L[w * W + sr] += n;
            fprintf(out, " %d", w);
            char el[96];
            snprintf(el, sizeof el, "p%zu", k);
            if (w != sr) s_edge(w, sr, el);
        }
        fprintf(out, " -> rank %d (server %d)\n", sr, s);
    }
    fprintf(out, "  after: every server holds its partitions' inputs from every worker\n");
    s_ps_holds(&lay, P, S, coloc, "own input", "inputs");
    s_step_end();
    fprintf(out, "\nstep 2: reduce (each server sums its partitions once every worker's push is in)\n");
    for (int s = 0; s < S; s++)
        fprintf(out, "  rank %d (server %d) sums %s of its partitions\n", coloc ? s : P + s, s, s_set(all, b, sizeof b));
    fprintf(out, "\nstep 3: pull (each server answers every worker with its complete partitions)\n");
    s_step_begin("ps: pull (servers -> workers), after the reduce%.0d%.0d", 0, 0);
    for (size_t k = 0; k < lay.nparts; k++) {
        int s = ps_part_owner(&lay, k), sr = coloc ? s : P + s;
        size_t n = ps_part_len(&lay, k) * esz;
        for (int w = 0; w < P; w++)
            if (w != sr) {
                L[sr * W + w] += n;
                char el[96];
                snprintf(el, sizeof el, "p%zu", k);
                s_edge(sr, w, el);
            }
        s_bytes((double)n, a, sizeof a);
        fprintf(out, "  partition %zu %s: rank %d -> every worker\n", k, a, sr);
    }
    fprintf(out, "  after: every worker holds every partition %s\n", s_set(all, b, sizeof b));
    char every[80];
    snprintf(every, sizeof every, "every partition %s", s_set(all, b, sizeof b));
    s_ps_holds(&lay, P, S, coloc, every, "sums");
    s_step_end();
}

int h_explain(const h_explain_cfg_t *o, FILE *out, uint64_t *links, int *world)
{
    const char *eng = o->engine ? o->engine : "ring";
    int P = o->procs ? o->procs : 4, S = 0, coloc = 0;
    size_t part = 0;
    size_t esz = dt_size(o->dtype), count = o->bytes / (esz ? esz : 4);
    if (!esz || count == 0)
        return err_set(ERR_INVAL, "explain: --size (or the largest of --sizes) must hold at least one %s element", dt_name(o->dtype));
    if (!strcmp(eng, "ps")) {
        const ps_opts_t *po = h_engine_opts(&o->es, "ps");
        coloc = po && po->colocate;
        S = coloc ? P : po && po->servers ? po->servers : 1;
        part = po ? po->partition_bytes : 0;
    } else if (strcmp(eng, "ring") && strcmp(eng, "tree")) {
        return err_set(ERR_INVAL, "explain: --engine ring, tree or ps (not %s)", eng);
    }
    int W = P + (S && !coloc ? S : 0);
    if (P < 2 || W > H_EXPLAIN_MAX)
        return err_set(ERR_INVAL, "explain: a small world: 2 to %d ranks in all (have %d)", H_EXPLAIN_MAX, W);
    uint64_t L[H_EXPLAIN_MAX * H_EXPLAIN_MAX] = {0};
    char a[64];
    memset(&g_d, 0, sizeof g_d);
    memset(&g_x, 0, sizeof g_x);
    g_d.world = W;
    g_d.nworkers = coloc ? W : P;
    g_x.out = out;
    g_x.L = L;
    g_x.W = W;
    if (o->plots_dir) {   /* created with its parents, as mkdir -p */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/", o->plots_dir);
        for (char *p = dir + 1; *p; p++) {
            if (*p != '/') continue;
            *p = 0;
            if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return err_set(ERR_INVAL, "explain: --plots %s: cannot create %s: %s", o->plots_dir, dir, strerror(errno));
            *p = '/';
        }
        g_d.dir = o->plots_dir;
    }
    s_bytes((double)(count * esz), a, sizeof a);
    fprintf(out, "# harness explain: %s allreduce of %s (%zu %s elements), %d workers%s%s\n", eng, a, count,
            dt_name(o->dtype), P, S && !coloc ? " + dedicated servers" : "", coloc ? " with a server thread in each" : "");
    if (!strcmp(eng, "ring")) s_ring(out, P, count, esz, L);
    else if (!strcmp(eng, "tree")) s_tree(out, P, count, esz, L);
    else s_ps(out, P, S, coloc, count, esz, part, L, W);
    fprintf(out, "\n# bytes per link for one allreduce (row = sender, column = receiver)\n#      ");
    for (int j = 0; j < W; j++) fprintf(out, " %10d", j);
    fprintf(out, "\n");
    for (int i = 0; i < W; i++) {
        fprintf(out, "# %4d ", i);
        for (int j = 0; j < W; j++) fprintf(out, " %10llu", (unsigned long long)L[i * W + j]);
        fprintf(out, "\n");
    }
    fprintf(out, "traffic_bytes:");
    for (int i = 0; i < W * W; i++) fprintf(out, " %llu", (unsigned long long)L[i]);
    fprintf(out, "\n");
    char st[320];
    s_stats(L, W, 1, st, sizeof st);
    fprintf(out, "# links, one allreduce: %s\n", st);
    if (g_d.dir)
        fprintf(out, "# diagrams: step_1.svg .. step_%d.svg%s in %s/\n", g_d.nsteps,
                g_d.npng == g_d.nsteps ? " and step_1.png .. (the same, rasterised)" : "", g_d.dir);
    if (g_x.rc < 0) return g_x.rc;
    if (links) memcpy(links, L, (size_t)W * (size_t)W * sizeof *L);
    if (world) *world = W;
    return 0;
}
