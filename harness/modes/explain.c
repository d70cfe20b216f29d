/* explain.c: `harness explain` (explain.h): the allreduce schedule of one engine for a small world as
 * text, step by step: who sends which piece (chunk, half, partition) to whom, whether the receiver adds
 * it or stores it, and what each rank holds after the step (the set of ranks whose inputs a value sums:
 * {0-3} is complete). The steps are the engine's own declared schedule (engine_ops_t.schedule, read
 * through the registry), what it runs at this size, so the text cannot drift from the code; nothing
 * here knows one engine from another. */
#include "harness/modes/explain.h"
#include "harness/modes/explain_draw.h"
#include "harness/record/traffic.h"
#include "harness/registry/engines.h"
#include "core/sched.h"
#include "core/err.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
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

/* What rank r holds of every piece, as text: runs of consecutive pieces with the same set grouped
 * ("c0{0} c1{0,1}", "p0..p15{0-3}"); pieces it holds nothing of are left out ("-" when none). */
static void s_holds(const sched_t *s, const s_set_t *hold, int r, char *out, size_t len)
{
    size_t o = 0;
    char b[64];
    out[0] = '\0';
    for (int p = 0; p < s->npieces && o + 40 < len;) {
        s_set_t m = hold[(size_t)r * (size_t)s->npieces + (size_t)p];
        int q = p;
        while (s->npieces > 8 && q + 1 < s->npieces && hold[(size_t)r * (size_t)s->npieces + (size_t)q + 1] == m) q++;
        if (m) {
            if (q > p) o += (size_t)snprintf(out + o, len - o, "%s%s..%s%s", o ? " " : "", s->pieces[p].name,
                                             s->pieces[q].name, s_set(m, b, sizeof b));
            else o += (size_t)snprintf(out + o, len - o, "%s%s%s", o ? " " : "", s->pieces[p].name, s_set(m, b, sizeof b));
        }
        p = q + 1;
    }
    if (!o) snprintf(out, len, "-");
}

/* One step: its transfers as text (a run of transfers of one piece with one receiver, or with one
 * sender, on one line), its edges in the diagram, then the holdings it leaves. sent: scratch, nx sets. */
static void s_print_step(FILE *out, const sched_t *s, int k, s_set_t *hold, s_set_t *sent, uint64_t *L)
{
    const sched_step_t *st = &s->steps[k];
    char a[64], b[64];
    fprintf(out, "\nstep %d%s%s\n", k + 1, st->what[0] ? ": " : "", st->what);
    char title[160];
    if (st->what[0]) snprintf(title, sizeof title, "%s: %s", s->algo, st->what);
    else snprintf(title, sizeof title, "%s: step %d of %d", s->algo, k + 1, s->nsteps);
    h_xd_step(&g_d, title);
    if (st->note[0]) fprintf(out, "  (%s)\n", st->note);
    const sched_xfer_t *x = s->x + st->first;
    size_t np = (size_t)s->npieces;
    for (size_t i = 0; i < st->n; i++) sent[i] = hold[(size_t)x[i].src * np + (size_t)x[i].piece];
    for (size_t i = 0; i < st->n;) {
        size_t j = i;
        int by_dst = i + 1 < st->n && x[i + 1].dst == x[i].dst && x[i + 1].piece == x[i].piece && x[i + 1].op == x[i].op;
        int by_src = !by_dst && i + 1 < st->n && x[i + 1].src == x[i].src && x[i + 1].piece == x[i].piece &&
                     x[i + 1].op == x[i].op;
        while (j + 1 < st->n && x[j + 1].piece == x[i].piece && x[j + 1].op == x[i].op &&
               ((by_dst && x[j + 1].dst == x[i].dst) || (by_src && x[j + 1].src == x[i].src)))
            j++;
        const sched_piece_t *pc = &s->pieces[x[i].piece];
        s_bytes((double)sched_xfer_bytes(s, &x[i]), a, sizeof a);
        const char *verb = x[i].op == SCHED_REDUCE ? "added" : "stored";
        if (j == i && x[i].src == x[i].dst) {
            fprintf(out, "  rank %d: its own %s %s stays inside the process; %s\n", x[i].src, pc->name,
                    s_set(sent[i], b, sizeof b), verb);
        } else if (j == i) {
            fprintf(out, "  rank %d -> rank %d: %s %s (%s); %s\n", x[i].src, x[i].dst, pc->name, s_set(sent[i], b, sizeof b),
                    a, verb);
        } else {
            char who[256];
            size_t o = 0;
            for (size_t q = i; q <= j && o + 16 < sizeof who; q++)
                o += (size_t)snprintf(who + o, sizeof who - o, " %d", by_dst ? x[q].src : x[q].dst);
            if (by_dst) fprintf(out, "  ranks%s -> rank %d: %s [%zu, +%zu) %s each; %s\n", who, x[i].dst, pc->name, pc->off,
                                pc->count, a, verb);
            else fprintf(out, "  rank %d -> ranks%s: %s %s (%s each); %s\n", x[i].src, who, pc->name,
                         s_set(sent[i], b, sizeof b), a, verb);
        }
        for (size_t q = i; q <= j; q++) {
            if (x[q].src == x[q].dst) continue;
            L[(size_t)x[q].src * (size_t)s->world + (size_t)x[q].dst] += sched_xfer_bytes(s, &x[q]);
            char el[96];
            snprintf(el, sizeof el, "%s%s%s", pc->name, j == i ? " " : "", j == i ? s_set(sent[q], b, sizeof b) : "");
            s_edge(x[q].src, x[q].dst, el);
        }
        i = j + 1;
    }
    for (size_t i = 0; i < st->n; i++) {
        s_set_t *h = &hold[(size_t)x[i].dst * np + (size_t)x[i].piece];
        *h = x[i].op == SCHED_REDUCE ? *h | sent[i] : sent[i];
    }
    fprintf(out, "  after:");
    for (int r = 0; r < s->world; r++) {
        char h[512];
        s_holds(s, hold, r, h, sizeof h);
        fprintf(out, "%s rank %d %s", r ? ";" : "", r, h);
        h_xd_hold(&g_d, r, h);
    }
    fprintf(out, "\n");
    s_step_end();
}

int h_explain(const h_explain_cfg_t *o, FILE *out, uint64_t *links, int *world)
{
    const char *eng = o->engine ? o->engine : h_engine_at(0)->name; /* the registry's default engine */
    int P = o->procs ? o->procs : 4;
    size_t esz = dt_size(o->dtype), count = o->bytes / (esz ? esz : 4);
    if (!esz || count == 0)
        return err_set(ERR_INVAL, "explain: --size (or the largest of --sizes) must hold at least one %s element", dt_name(o->dtype));
    if (P < 2 || P > H_EXPLAIN_MAX)
        return err_set(ERR_INVAL, "explain: a small world: 2 to %d ranks in all (have %d)", H_EXPLAIN_MAX, P);
    /* the world explain shows: P local ranks over shared memory, host buffers (what --procs P runs); with
     * --gpus-per-node G < P they are machines of G (shared memory within each only) */
    int G = o->gpus_per_node > 0 ? o->gpus_per_node : 0;
    sched_env_t env = {.workers = P, .one_host_shm = !G || G >= P, .device = -1, .gpus_per_node = G};
    sched_t s;
    int rc = h_engine_schedule(&o->es, eng, &env, count, esz, &s);
    if (rc < 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", err_detail());
        return err_set(ERR_INVAL, "explain: %s", why);
    }
    int W = s.world;
    if (W > H_EXPLAIN_MAX) {
        sched_free(&s);
        return err_set(ERR_INVAL, "explain: a small world: 2 to %d ranks in all (have %d)", H_EXPLAIN_MAX, W);
    }
    size_t np = (size_t)(s.npieces ? s.npieces : 1), maxn = 1;
    for (int k = 0; k < s.nsteps; k++) maxn = s.steps[k].n > maxn ? s.steps[k].n : maxn;
    s_set_t *hold = calloc((size_t)W * np, sizeof *hold), *sent = calloc(maxn, sizeof *sent);
    if (!hold || !sent) {
        free(hold), free(sent), sched_free(&s);
        return err_set(ERR_NOMEM, "explain: out of memory");
    }
    uint64_t L[H_EXPLAIN_MAX * H_EXPLAIN_MAX] = {0};
    char a[64];
    memset(&g_d, 0, sizeof g_d);
    memset(&g_x, 0, sizeof g_x);
    g_d.world = W;
    g_d.nworkers = P;
    g_x.out = out;
    g_x.L = L;
    g_x.W = W;
    if (o->plots_dir) {   /* created with its parents, as mkdir -p */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/", o->plots_dir);
        for (char *p = dir + 1; *p; p++) {
            if (*p != '/') continue;
            *p = 0;
            if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                free(hold), free(sent), sched_free(&s);
                return err_set(ERR_INVAL, "explain: --plots %s: cannot create %s: %s", o->plots_dir, dir, strerror(errno));
            }
            *p = '/';
        }
        g_d.dir = o->plots_dir;
    }
    s_bytes((double)(count * esz), a, sizeof a);
    char mach[64] = "";
    if (G) snprintf(mach, sizeof mach, " on %d machine%s of %d", (P + G - 1) / G, (P + G - 1) / G == 1 ? "" : "s", G);
    fprintf(out, "# harness explain: %s allreduce of %s (%zu %s elements), %d workers%s%s; the engine runs %s here\n", eng,
            a, count, dt_name(o->dtype), P, mach, W > P ? " + dedicated servers" : "", s.algo);
    fprintf(out, "# %s\n# pieces:", s.about);
    for (int p = 0; p < s.npieces; p++) {
        s_bytes((double)(s.pieces[p].count * esz), a, sizeof a);
        fprintf(out, " %s = [%zu, +%zu) %s;", s.pieces[p].name, s.pieces[p].off, s.pieces[p].count, a);
    }
    fprintf(out, "\n# before: every worker r holds its own input of every piece, {r}%s\n",
            W > P ? "; the servers hold nothing yet" : "");
    for (int r = 0; r < P; r++)
        for (size_t p = 0; p < np; p++) hold[(size_t)r * np + p] = 1u << r;
    for (int k = 0; k < s.nsteps; k++) s_print_step(out, &s, k, hold, sent, L);
    free(hold), free(sent);
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
    sched_free(&s);
    if (g_x.rc < 0) return g_x.rc;
    if (links) memcpy(links, L, (size_t)W * (size_t)W * sizeof *L);
    if (world) *world = W;
    return 0;
}
