/* sim_simgrid.c: sim.h with SimGrid (built when pkg-config finds simgrid). The platform is written as
 * SimGrid XML (one host a rank, a router a machine, one router for the switch, split-direction links:
 * the C API builds no platform), loaded in a child process, and each rank is an actor that replays its
 * part of the schedule step by step (s_actor: a step's sends wait for the receives of the step before). A step's transfers between one pair go as one
 * communication (one connection carries them one after another, so their total is what arrives when the
 * last does). Network options, each set rather than inherited: latency factor 1 and bandwidth factor 1
 * (LV08's 13.01 and 0.97 are fits to other networks; the payload share of a frame is pl->framing,
 * applied to the links' rates), no cross-traffic (the reverse direction is a link of its own). */
#include "harness/simulate/sim.h"
#include "core/err.h"
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>

int h_sim_available(const char **why)
{
    if (why) *why = NULL;
    return 1;
}

/* One rank's part of one step: a peer it sends to or receives from, and the bytes (merged per pair). */
typedef struct {
    int step, peer, send;
    uint64_t bytes;
} s_entry_t;

static struct {
    const sched_t *s;
    s_entry_t *e;             /* all ranks' entries, rank by rank, each rank's by step */
    size_t *first;            /* world + 1: rank r's entries are e[first[r] .. first[r + 1]) */
    double *end;              /* per rank: when it finished */
} g;

static int s_cmp(const void *a, const void *b)
{
    const s_entry_t *x = a, *y = b;
    if (x->step != y->step) return x->step - y->step;
    if (x->send != y->send) return y->send - x->send;   /* sends first */
    return x->peer - y->peer;
}

/* The machine a rank is on: workers on GPU machines; dedicated servers as pl says. */
static int s_machine(const h_sim_platform_t *pl, const sched_t *s, int r)
{
    if (r < s->workers) return r / pl->gpus_per_node;
    int j = r - s->workers;
    return pl->server_nodes > 0 ? pl->nodes + j % pl->server_nodes : j % pl->nodes;
}

/* entries per rank (merged per step and pair), sorted by step; 0 or ERR_NOMEM */
static int s_entries(const sched_t *s)
{
    size_t n = 0, W = (size_t)s->world;
    for (size_t i = 0; i < s->nx; i++) n += s->x[i].src != s->x[i].dst ? 2 : 0;
    size_t *cnt = calloc(W + 1, sizeof *cnt);
    s_entry_t *e = malloc((n ? n : 1) * sizeof *e);
    if (!cnt || !e) {
        free(cnt), free(e);
        return err_set(ERR_NOMEM, "simulate: out of memory for %zu transfers", n);
    }
    for (size_t i = 0; i < s->nx; i++)
        if (s->x[i].src != s->x[i].dst) cnt[s->x[i].src]++, cnt[s->x[i].dst]++;
    size_t *first = calloc(W + 1, sizeof *first), *at = calloc(W, sizeof *at);
    if (!first || !at) {
        free(cnt), free(e), free(first), free(at);
        return err_set(ERR_NOMEM, "simulate: out of memory");
    }
    for (size_t r = 0; r < W; r++) first[r + 1] = first[r] + cnt[r], at[r] = first[r];
    for (int k = 0; k < s->nsteps; k++)
        for (size_t i = s->steps[k].first; i < s->steps[k].first + s->steps[k].n; i++) {
            const sched_xfer_t *x = &s->x[i];
            if (x->src == x->dst) continue;
            uint64_t b = sched_xfer_bytes(s, x);
            e[at[x->src]++] = (s_entry_t){.step = k, .peer = x->dst, .send = 1, .bytes = b};
            e[at[x->dst]++] = (s_entry_t){.step = k, .peer = x->src, .send = 0, .bytes = b};
        }
    /* sort each rank's entries and merge the same (step, direction, peer) */
    for (size_t r = 0; r < W; r++) {
        s_entry_t *a = e + first[r];
        size_t m = first[r + 1] - first[r], o = 0;
        qsort(a, m, sizeof *a, s_cmp);
        for (size_t i = 0; i < m; i++) {
            if (o && a[o - 1].step == a[i].step && a[o - 1].send == a[i].send && a[o - 1].peer == a[i].peer)
                a[o - 1].bytes += a[i].bytes;
            else a[o++] = a[i];
        }
        cnt[r] = o;
    }
    /* compact */
    size_t w = 0;
    for (size_t r = 0; r < W; r++) {
        memmove(e + w, e + first[r], cnt[r] * sizeof *e);
        first[r] = w;
        w += cnt[r];
    }
    first[W] = w;
    free(cnt), free(at);
    g.e = e;
    g.first = first;
    return 0;
}

static void s_mb(char *buf, size_t len, int src, int dst) { snprintf(buf, len, "%d>%d", src, dst); }

/* A growable array of communications. */
typedef struct {
    sg_comm_t *c;
    size_t n, cap;
} s_comms_t;

static int s_push(s_comms_t *a, sg_comm_t c)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        sg_comm_t *p = realloc(a->c, cap * sizeof *p);
        if (!p) return -1;
        a->c = p, a->cap = cap;
    }
    a->c[a->n++] = c;
    return 0;
}

static void s_wait(s_comms_t *a)
{
    if (a->n) sg_comm_wait_all(a->c, a->n);
    a->n = 0;
}

/* Rank r replays its entries step by step, as the engines run: a step's sends go once the receives of its
 * previous step are in (what it sends is what it received, reduced), without waiting for its earlier
 * sends to be taken (the transport's slots), at most S_SEND_GROUPS steps of sends in flight. */
#define S_SEND_GROUPS 2
static void s_actor(int argc, char **argv)
{
    (void)argc;
    int r = atoi(argv[1]);
    const s_entry_t *e = g.e + g.first[r], *end = g.e + g.first[r + 1];
    char name[32];
    /* every mailbox this rank receives on: eager, data flows when sent (a TCP connection's buffers) */
    for (const s_entry_t *p = e; p < end; p++)
        if (!p->send) {
            s_mb(name, sizeof name, p->peer, r);
            sg_mailbox_set_receiver(name);
        }
    s_comms_t recv = {0}, sends[S_SEND_GROUPS] = {{0}};
    void *data = NULL;
    int bad = 0;
    for (size_t grp = 0; e < end && !bad; grp++) {
        const s_entry_t *q = e;
        while (q < end && q->step == e->step) q++;
        s_wait(&recv);                                   /* the step before's receives */
        s_comms_t *sd = &sends[grp % S_SEND_GROUPS];
        s_wait(sd);                                      /* sends of S_SEND_GROUPS steps ago */
        for (const s_entry_t *p = e; p < q && !bad; p++) {
            if (p->send) {
                s_mb(name, sizeof name, r, p->peer);
                bad = s_push(sd, sg_mailbox_put_async(sg_mailbox_by_name(name), (void *)&g, (long)p->bytes)) < 0;
            } else {
                s_mb(name, sizeof name, p->peer, r);
                bad = s_push(&recv, sg_mailbox_get_async(sg_mailbox_by_name(name), &data)) < 0;
            }
        }
        e = q;
    }
    s_wait(&recv);
    for (int k = 0; k < S_SEND_GROUPS; k++) s_wait(&sends[k]);
    free(recv.c);
    for (int k = 0; k < S_SEND_GROUPS; k++) free(sends[k].c);
    g.end[r] = bad ? -1 : simgrid_get_clock();
}

/* The platform as SimGrid XML into f: hosts r0..; routers m0.. (machines) and sw; links u/d (a host to
 * its machine and back), nu/nd (a machine to the switch and back). */
static void s_xml(FILE *f, const h_sim_platform_t *pl, const sched_t *s, int machines)
{
    double intra = pl->intra_bps * pl->framing / 8, inter = pl->inter_bps * pl->framing / 8;
    fprintf(f, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
               "<platform version=\"4.1\">\n<zone id=\"world\" routing=\"DijkstraCache\">\n");
    for (int r = 0; r < s->world; r++) fprintf(f, "<host id=\"r%d\" speed=\"1Gf\"/>\n", r);
    for (int m = 0; m < machines; m++) fprintf(f, "<router id=\"m%d\"/>\n", m);
    fprintf(f, "<router id=\"sw\"/>\n");
    for (int r = 0; r < s->world; r++)
        fprintf(f, "<link id=\"u%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n"
                   "<link id=\"d%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", r, intra, pl->lat_s, r, intra, pl->lat_s);
    for (int m = 0; m < machines; m++)
        fprintf(f, "<link id=\"nu%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n"
                   "<link id=\"nd%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", m, inter, pl->lat_s, m, inter, pl->lat_s);
    for (int r = 0; r < s->world; r++) {
        int m = s_machine(pl, s, r);
        fprintf(f, "<route src=\"r%d\" dst=\"m%d\" symmetrical=\"NO\"><link_ctn id=\"u%d\"/></route>\n"
                   "<route src=\"m%d\" dst=\"r%d\" symmetrical=\"NO\"><link_ctn id=\"d%d\"/></route>\n", r, m, r, m, r, r);
    }
    for (int m = 0; m < machines; m++)
        fprintf(f, "<route src=\"m%d\" dst=\"sw\" symmetrical=\"NO\"><link_ctn id=\"nu%d\"/></route>\n"
                   "<route src=\"sw\" dst=\"m%d\" symmetrical=\"NO\"><link_ctn id=\"nd%d\"/></route>\n", m, m, m, m);
    fprintf(f, "</zone>\n</platform>\n");
}

/* The child: simulate, write the result (or a message starting with '!') to fd, exit. */
static void s_child(int fd, const h_sim_platform_t *pl, const sched_t *s, int machines, h_sim_result_t *res)
{
    char path[] = "/tmp/sb-sim-XXXXXX.xml";
    int x = mkstemps(path, 4);
    FILE *f = x >= 0 ? fdopen(x, "w") : NULL;
    if (!f) {
        dprintf(fd, "!cannot write the platform file: %s", strerror(errno));
        _exit(1);
    }
    s_xml(f, pl, s, machines);
    if (fclose(f) != 0) {
        dprintf(fd, "!cannot write the platform file %s: %s", path, strerror(errno));
        unlink(path);
        _exit(1);
    }
    char *args[] = {"simulate", "--cfg=network/latency-factor:1", "--cfg=network/bandwidth-factor:1",
                    "--cfg=network/crosstraffic:0", "--log=root.thres:critical", NULL};
    int ac = 5;
    simgrid_init(&ac, args);
    simgrid_load_platform(path);
    unlink(path);
    for (int r = 0; r < s->world; r++) {
        char host[32], num[16];
        snprintf(host, sizeof host, "r%d", r);
        snprintf(num, sizeof num, "%d", r);
        char *a[] = {"rank", num, NULL};
        sg_actor_create(host, sg_host_by_name(host), s_actor, 2, a);
    }
    simgrid_run();
    res->time_s = 0;
    for (int r = 0; r < s->world; r++) {
        if (g.end[r] < 0) {
            dprintf(fd, "!rank %d ran out of memory replaying its schedule", r);
            _exit(1);
        }
        res->time_s = g.end[r] > res->time_s ? g.end[r] : res->time_s;
    }
    ssize_t w = write(fd, res, sizeof *res);
    _exit(w == (ssize_t)sizeof *res ? 0 : 1);
}

int h_sim_collective(const h_sim_platform_t *pl, const sched_t *s, h_sim_result_t *out)
{
    memset(out, 0, sizeof *out);
    if (pl->nodes < 1 || pl->gpus_per_node < 1 || s->workers > pl->nodes * pl->gpus_per_node)
        return err_set(ERR_INVAL, "simulate: %d workers do not fit %d machines of %d GPUs", s->workers, pl->nodes,
                       pl->gpus_per_node);
    if (!(pl->inter_bps > 0) || !(pl->intra_bps > 0) || pl->lat_s < 0 || !(pl->framing > 0))
        return err_set(ERR_INVAL, "simulate: link rates must be > 0 and the latency >= 0");
    int machines = pl->nodes + (s->world > s->workers && pl->server_nodes > 0 ? pl->server_nodes : 0);
    out->machines = machines;
    /* the busiest NIC direction, from the schedule itself */
    uint64_t *nic = calloc((size_t)machines * 2, sizeof *nic);
    if (!nic) return err_set(ERR_NOMEM, "simulate: out of memory");
    for (size_t i = 0; i < s->nx; i++) {
        int a = s_machine(pl, s, s->x[i].src), b = s_machine(pl, s, s->x[i].dst);
        if (a == b) continue;
        nic[2 * a] += sched_xfer_bytes(s, &s->x[i]);
        nic[2 * b + 1] += sched_xfer_bytes(s, &s->x[i]);
    }
    for (int m = 0; m < 2 * machines; m++) out->nic_max_bytes = nic[m] > out->nic_max_bytes ? nic[m] : out->nic_max_bytes;
    free(nic);
    g.s = s;
    CHECK(s_entries(s));
    out->comms = g.first[s->world] / 2;
    g.end = calloc((size_t)s->world, sizeof *g.end);
    int p[2];
    if (!g.end || pipe(p) < 0) {
        free(g.e), free(g.first), free(g.end);
        return err_set(ERR_NOMEM, "simulate: %s", g.end ? strerror(errno) : "out of memory");
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        s_child(p[1], pl, s, machines, out);
    }
    close(p[1]);
    int rc = 0;
    if (pid < 0) rc = err_set(ERR_IO, "simulate: fork: %s", strerror(errno));
    char buf[sizeof *out + 512];
    size_t got = 0;
    int tmo_ms = (pl->timeout_s > 0 ? pl->timeout_s : 600) * 1000;
    while (rc == 0) {
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        clock_gettime(CLOCK_MONOTONIC, &t1);
        int left = tmo_ms - (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        int pr = left > 0 ? poll(&pf, 1, left) : 0;
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) {
            kill(pid, SIGKILL);
            rc = err_set(ERR_TIMEOUT, "simulate: gave up after %d s (--timeout); the simulation was stopped", tmo_ms / 1000);
            break;
        }
        ssize_t n = read(p[0], buf + got, sizeof buf - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(p[0]);
    int st = 0;
    if (pid > 0) waitpid(pid, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(g.e), free(g.first), free(g.end);
    memset(&g, 0, sizeof g);
    if (rc < 0) return rc;
    buf[got] = '\0';
    if (got && buf[0] == '!') return err_set(ERR_IO, "simulate: %s", buf + 1);
    if (got != sizeof *out || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return err_set(ERR_IO, "simulate: the simulation failed (%s %d)", WIFSIGNALED(st) ? "signal" : "exit",
                       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    h_sim_result_t child;
    memcpy(&child, buf, sizeof child);
    out->time_s = child.time_s;
    out->wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return 0;
}
