/* explain_draw.c: the step diagrams of `harness explain --plots DIR` (explain_draw.h).
 *
 * The SVG is written here, by hand: it is plain text (circles, lines, text), needs no library and is
 * what the tests and the labs read. The PNG is that same SVG rasterised by rsvg-convert (Debian
 * package librsvg2-bin, GNOME's SVG renderer over cairo), run as a program: one drawing, two formats
 * that cannot disagree, no link-time dependency (the harness builds and explains without it, SVG
 * only), and no drawing code written twice as a cairo or gnuplot version would need. */
#include "harness/modes/explain_draw.h"
#include "core/err.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_RSVG_TIMEOUT_MS 30000

void h_xd_step(h_xdraw_t *d, const char *title)
{
    d->nedge = 0;
    d->note[0] = 0;
    for (int r = 0; r < H_XD_RANKS; r++) d->hold[r][0] = 0;
    snprintf(d->title, sizeof d->title, "%s", title);
}

void h_xd_edge(h_xdraw_t *d, int from, int to, const char *label)
{
    if (!d->dir) return;
    for (int e = 0; e < d->nedge; e++)   /* one arrow per pair: a second message adds to its label */
        if (d->from[e] == from && d->to[e] == to) {
            size_t n = strlen(d->label[e]);
            if (n + strlen(label) + 2 < sizeof d->label[e]) snprintf(d->label[e] + n, sizeof d->label[e] - n, ",%s", label);
            else if (n + 4 < sizeof d->label[e] && strcmp(d->label[e] + n - 3, "...")) strcat(d->label[e], ",...");
            return;
        }
    if (d->nedge >= H_XD_EDGES) return;
    d->from[d->nedge] = from;
    d->to[d->nedge] = to;
    snprintf(d->label[d->nedge++], sizeof d->label[0], "%s", label);
}

void h_xd_hold(h_xdraw_t *d, int r, const char *text)
{
    if (r >= 0 && r < H_XD_RANKS) snprintf(d->hold[r], sizeof d->hold[r], "%s", text);
}

void h_xd_note(h_xdraw_t *d, const char *text) { snprintf(d->note, sizeof d->note, "%s", text); }

/* text with &, <, > escaped */
static void s_xml(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '&') fputs("&amp;", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else fputc(*s, f);
    }
}

/* The holdings text of one rank cut into lines of at most width characters, at spaces; returns the
 * number of lines, each copied into lines[i]. */
static int s_wrap(const char *s, int width, char lines[][64], int max)
{
    int n = 0;
    while (*s && n < max) {
        int len = (int)strlen(s), cut = len;
        if (len > width) {
            cut = width;
            while (cut > 0 && s[cut] != ' ') cut--;
            if (cut == 0) cut = width;
        }
        snprintf(lines[n++], 64, "%.*s", cut < 63 ? cut : 63, s);
        s += cut;
        while (*s == ' ') s++;
    }
    return n;
}

static void s_svg(const h_xdraw_t *d, FILE *f)
{
    int W = d->world, P = d->nworkers, S = W - P, nl[H_XD_RANKS];
    char lines[H_XD_RANKS][6][64];
    int rows = 0;
    for (int r = 0; r < W; r++) rows += (nl[r] = d->hold[r][0] ? s_wrap(d->hold[r], 50, lines[r], 6) : 0);
    int height = 680, need = 120 + 24 * W + 17 * rows;
    if (need > height) height = need;
    double cx = 300, cy = 340, R = 220, x[H_XD_RANKS], y[H_XD_RANKS];
    for (int r = 0; r < W; r++) {
        if (r < P) {   /* workers on the circle (turned off the servers' axis); dedicated servers in the middle: the hub */
            double t = 2 * M_PI * r / P + (S > 1 ? M_PI / P : 0);
            x[r] = cx + R * sin(t);
            y[r] = cy - R * cos(t);
        } else {
            x[r] = cx + (S > 1 ? 90 * cos(M_PI * (r - P) / (S - 1) + M_PI) : 0);
            y[r] = cy + (S > 1 ? 90 * sin(M_PI * (r - P) / (S - 1) + M_PI) : 0);
        }
    }
    fprintf(f, "<?xml version='1.0' encoding='UTF-8'?>\n"
               "<svg xmlns='http://www.w3.org/2000/svg' width='1000' height='%d' viewBox='0 0 1000 %d' "
               "font-family='DejaVu Sans, sans-serif'>\n<rect width='1000' height='%d' fill='white'/>\n"
               "<defs><marker id='a' markerWidth='10' markerHeight='8' refX='10' refY='4' orient='auto'>"
               "<path d='M0,0 L10,4 L0,8 z' fill='#b03000'/></marker></defs>\n"
               "<text x='500' y='28' text-anchor='middle' font-size='18'>", height, height, height);
    s_xml(f, d->title);
    fprintf(f, "</text>\n");
    for (int e = 0; e < d->nedge; e++) {
        int a = d->from[e], b = d->to[e];
        double dx = x[b] - x[a], dy = y[b] - y[a], L = sqrt(dx * dx + dy * dy);
        if (L < 1) continue;
        double ox = -dy / L * 6, oy = dx / L * 6;   /* a pair's two directions side by side */
        double x0 = x[a] + dx / L * 27 + ox, y0 = y[a] + dy / L * 27 + oy, x1 = x[b] - dx / L * 27 + ox, y1 = y[b] - dy / L * 27 + oy;
        fprintf(f, "<line class='msg' x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#b03000' stroke-width='2' "
                   "marker-end='url(#a)'/>\n", x0, y0, x1, y1);
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='12' text-anchor='middle' fill='#602000'>", x0 + (x1 - x0) * 0.4 + ox * 3.5,
                y0 + (y1 - y0) * 0.4 + oy * 3.5 + 4);
        s_xml(f, d->label[e]);
        fprintf(f, "</text>\n");
    }
    for (int r = 0; r < W; r++)
        fprintf(f, "<circle class='rank' cx='%.1f' cy='%.1f' r='25' fill='%s' stroke='#203050'/>"
                   "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='14'>%s%d</text>\n", x[r], y[r],
                r < P ? "#dde8f5" : "#f5e6c8", x[r], y[r] + 5, r < P ? "" : "s", r < P ? r : r - P);
    if (S > 0) fprintf(f, "<text x='%.0f' y='%.0f' text-anchor='middle' font-size='13' fill='#604010'>s0%s: dedicated server%s "
                          "(rank%s %d%s%d)</text>\n", cx, cy + R + 62, S > 1 ? " .." : "", S > 1 ? "s" : "", S > 1 ? "s" : "", P,
                       S > 1 ? "-" : "", S > 1 ? W - 1 : P);
    if (rows) {
        double ty = 70;
        fprintf(f, "<text x='600' y='%.0f' font-size='14' font-weight='bold'>after this step, rank holds</text>\n", ty);
        for (int r = 0; r < W; r++) {
            if (!nl[r]) continue;
            ty += 24;
            fprintf(f, "<text class='hold' x='600' y='%.0f' font-size='13' font-family='DejaVu Sans Mono, monospace'>"
                       "<tspan font-weight='bold'>%s%d</tspan>", ty, r < P ? "rank " : "srv  ", r < P ? r : r - P);
            for (int i = 0; i < nl[r]; i++) {
                fprintf(f, "<tspan x='660' y='%.0f'>", ty + 17.0 * i);
                s_xml(f, lines[r][i]);
                fprintf(f, "</tspan>");
            }
            fprintf(f, "</text>\n");
            ty += 17.0 * (nl[r] - 1);
        }
    }
    if (d->note[0]) {
        fprintf(f, "<text x='20' y='%d' font-size='13' fill='#303030'>", height - 16);
        s_xml(f, d->note);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n");
}

/* rsvg-convert's path into out: SYNCBENCH_RSVG (empty: none), else found on PATH. 0 or -1. */
static int s_rsvg(char *out, size_t len)
{
    const char *env = getenv("SYNCBENCH_RSVG");
    if (env) {
        snprintf(out, len, "%s", env);
        return *env ? 0 : -1;
    }
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
        snprintf(out, len, "%s/rsvg-convert", p);
        if (access(out, X_OK) == 0) return 0;
    }
    return -1;
}

/* rsvg-convert -o png svg, at most S_RSVG_TIMEOUT_MS (then killed): its exit code, or -1. */
static int s_convert(const char *rsvg, const char *svg, const char *png)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0) _exit(127);
        execl(rsvg, rsvg, "-o", png, svg, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    for (int waited = 0;; waited += 5) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) return -1;
        if (waited >= S_RSVG_TIMEOUT_MS) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
            return -1;
        }
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int h_xd_step_end(h_xdraw_t *d, FILE *msg)
{
    if (!d->dir) return 0;
    char svg[PATH_MAX], png[PATH_MAX], rsvg[PATH_MAX];
    int k = ++d->nsteps;
    snprintf(svg, sizeof svg, "%s/step_%d.svg", d->dir, k);
    snprintf(png, sizeof png, "%s/step_%d.png", d->dir, k);
    FILE *f = fopen(svg, "w");
    if (!f) return err_set(ERR_IO, "explain: cannot write %s: %s", svg, strerror(errno));
    s_svg(d, f);
    if (fclose(f) != 0) return err_set(ERR_IO, "explain: cannot write %s: %s", svg, strerror(errno));
    if (d->no_png) return 0;
    if (s_rsvg(rsvg, sizeof rsvg) < 0) {
        d->no_png = 1;
        fprintf(msg, "# note: rsvg-convert was not found (Debian/Ubuntu package librsvg2-bin; or set SYNCBENCH_RSVG): "
                     "SVG diagrams only, no PNG\n");
        return 0;
    }
    int rc = s_convert(rsvg, svg, png);
    if (rc != 0) {
        d->no_png = 1;
        unlink(png);
        fprintf(msg, "# note: %s failed on %s (%s): SVG diagrams only, no PNG\n", rsvg, svg,
                rc < 0 ? "did not run or took over 30 s" : rc == 127 ? "cannot run it" : "non-zero exit");
        return 0;
    }
    d->npng++;
    return 0;
}
