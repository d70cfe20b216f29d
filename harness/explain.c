/* explain.c: `harness explain` (explain.h): the allreduce schedule of one engine for a small world as
 * text, step by step: who sends which chunk or partition to whom, what is reduced where, and what each
 * rank holds after the step (the set of ranks whose inputs a value sums: {0-3} is complete). Every
 * step comes from the engines' own schedule functions, so the text cannot drift from the code. */
#include "harness/explain.h"
#include "allreduce-tree/tree.h"
#include "core/err.h"
#include "ps/ps.h"
#include "ps/ps_proto.h"
#include "ring/ring.h"
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

typedef uint32_t s_set_t;

/* --plots DIR: one plain SVG per step (ranks on a circle, an arrow per message), step_K.svg */
static struct {
    const char *dir;
    int world, nsteps, nedge, from[256], to[256];
    char label[256][96], title[128];
} g_d;

static void s_edge(int from, int to, const char *label)
{
    if (!g_d.dir || g_d.nedge >= 256) return;
    g_d.from[g_d.nedge] = from;
    g_d.to[g_d.nedge] = to;
    snprintf(g_d.label[g_d.nedge++], sizeof g_d.label[0], "%s", label);
}

static void s_step_begin(const char *fmt, int a, int b)
{
    g_d.nedge = 0;
    snprintf(g_d.title, sizeof g_d.title, fmt, a, b);
}

static void s_step_end(void)
{
    if (!g_d.dir) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/step_%d.svg", g_d.dir, ++g_d.nsteps);
    FILE *f = fopen(path, "w");
    if (!f) return;
    int W = g_d.world;
    double cx = 300, cy = 300, R = 210, x[H_EXPLAIN_MAX], y[H_EXPLAIN_MAX];
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='600' height='620' font-family='sans-serif'>\n"
               "<defs><marker id='a' markerWidth='10' markerHeight='8' refX='10' refY='4' orient='auto'>"
               "<path d='M0,0 L10,4 L0,8 z' fill='#b03000'/></marker></defs>\n"
               "<text x='300' y='24' text-anchor='middle' font-size='16'>%s</text>\n", g_d.title);
    for (int r = 0; r < W; r++) {
        x[r] = cx + R * sin(2 * M_PI * r / W);
        y[r] = cy + 20 - R * cos(2 * M_PI * r / W);
    }
    for (int e = 0; e < g_d.nedge; e++) {
        int a = g_d.from[e], b = g_d.to[e];
        double dx = x[b] - x[a], dy = y[b] - y[a], L = sqrt(dx * dx + dy * dy), ox = -dy / L * 6, oy = dx / L * 6;
        double x0 = x[a] + dx / L * 26 + ox, y0 = y[a] + dy / L * 26 + oy, x1 = x[b] - dx / L * 26 + ox, y1 = y[b] - dy / L * 26 + oy;
        fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#b03000' stroke-width='2' marker-end='url(#a)'/>\n",
                x0, y0, x1, y1);
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle' fill='#602000'>%s</text>\n",
                (x0 + x1) / 2 + ox * 2, (y0 + y1) / 2 + oy * 2, g_d.label[e]);
    }
    for (int r = 0; r < W; r++)
        fprintf(f, "<circle cx='%.1f' cy='%.1f' r='24' fill='#dde8f5' stroke='#203050'/>"
                   "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='14'>%d</text>\n", x[r], y[r], x[r], y[r] + 5, r);
    fprintf(f, "</svg>\n");
    fclose(f);
}   /* ranks whose inputs a value holds (bit r) */

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
            fprintf(out, "%s rank %d", r ? ";" : "", r);
            for (int c = 0; c < P; c++) fprintf(out, " c%d%s", c, s_set(hold[r][c], b, sizeof b));
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
        for (int r = 0; r < P; r++)
            fprintf(out, "%s rank %d h0%s h1%s", r ? ";" : "", r, s_set(hold[0][r], a, sizeof a), s_set(hold[1][r], b, sizeof b));
        fprintf(out, "\n");
        s_step_end();
    }
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
    s_step_end();
}

int h_explain(const h_opts_t *o, FILE *out, uint64_t *links, int *world)
{
    const char *eng = o->nengines ? o->engines[0] : "ring";
    int P = o->procs ? o->procs : 4, S = 0, coloc = 0;
    size_t part = 0;
    size_t esz = dt_size(o->dtype), count = o->size_max / (esz ? esz : 4);
    if (!esz || count == 0) return err_set(ERR_INVAL, "explain: --sizes must hold at least one %s element", dt_name(o->dtype));
    if (!strcmp(eng, "ps")) {
        const ps_opts_t *po = h_engine_opts(o, "ps");
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
    g_d.world = W;
    if (o->plots_dir) {
        if (mkdir(o->plots_dir, 0755) < 0 && errno != EEXIST)
            return err_set(ERR_INVAL, "explain: --plots %s: cannot create it: %s", o->plots_dir, strerror(errno));
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
    if (g_d.dir) fprintf(out, "# diagrams: step_1.svg .. step_%d.svg in %s/\n", g_d.nsteps, g_d.dir);
    if (links) memcpy(links, L, (size_t)W * (size_t)W * sizeof *L);
    if (world) *world = W;
    return 0;
}
