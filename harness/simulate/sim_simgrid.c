/* sim_simgrid.c: sim.h with SimGrid (built when pkg-config finds simgrid). The platform is written as
 * SimGrid XML (one host a rank, a router a machine, one router for the switch, split-direction links:
 * the C API builds no platform), loaded in a child process, and each rank is an actor that runs its
 * steps: a worker computes (time passing, its straggler factor applied), and starts each bucket's part of
 * the plan (sim_int.h) once the bucket is ready and its bucket before is done, group by group (a group's
 * sends wait for the receives of the group before); a server rank replays its part of every bucket. A
 * group's transfers between one pair go as one communication (one connection carries them one after
 * another, so their total is what arrives when the last does). Network options, each set rather than
 * inherited: latency factor 1 and bandwidth factor 1 (LV08's 13.01 and 0.97 are fits to other networks;
 * the payload share of a frame is pl->framing, applied to the links' rates), no cross-traffic (the
 * reverse direction is a link of its own). */
#include "harness/simulate/sim_int.h"
#include "core/err.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <simgrid/cond.h>
#include <simgrid/mutex.h>
#include <simgrid/semaphore.h>

/* what the child's actors read (set before the fork) */
static struct {
    const h_sim_plan_t *p;
    const h_sim_work_t *w;
    const h_sim_platform_t *pl;
    double *end;              /* steps x world: when each rank finished each step; < 0: out of memory */
    int *held;                /* dataflow: per rank and piece (world x the buckets' pieces), the receives of the piece
                               * the rank holds, counted over the run (a stream's pieces one by one) */
    size_t npc;               /* the buckets' pieces in all */
    char *need;               /* per rank and piece: 1 where the rank sends the piece on by itself (a transfer of it
                               * alone, or the first of a stream), so a stream into it holds it as it comes */
    struct s_flow **flow;     /* world: each rank's step under way (NULL between steps), to wake its waiters */
    int *pushed;              /* owners answering ahead (h_sim_plan_t.stale): per piece and worker, its pushes in */
    int *atleast;             /* per piece and count c <= H_SIM_MAX_STEPS: the workers with at least c pushes in */
    int *pushers;             /* per piece: the workers that push it */
    int *cred;                /* steps x world: the receives fan-out bundles into other ranks credited to each rank */
    int *nrecv;               /* per rank and piece: its receives of the piece a step (a stream counting each piece,
                               * a credited receive too) */
    int *sdone;               /* per stream (s_ftx_t.sid): the steps whose stream its sender has held at its receiver */
    double *held_t;           /* per rank and piece: when its last receive of it was held */
    char *sjoin;              /* per stream and step: 1 where it joined the stream before it on its connection */
    uint64_t joined;          /* the streams that joined one before them */
} g;

/* the mailbox of connection conn from src to dst (a dataflow schedule's steps are connections of their own) */
static void s_mb(char *buf, size_t len, int src, int dst, int conn) { snprintf(buf, len, "%d>%d:%d", src, dst, conn); }

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

/* Rank r's part of one bucket, as the engines run it: a group's sends go once the receives of the group
 * before are in (what it sends is what it received, reduced) and its merged steps' latencies have passed,
 * without waiting for its earlier sends to be taken (the transport's slots), at most S_SEND_GROUPS groups
 * of sends in flight; returns when all of its sends and receives are done. 0 or -1 (out of memory).
 * A connection carries its sends one after another, as a TCP stream does: a send to a peer goes no earlier
 * than its send before to that peer has left at the route's pace (its bytes over the route's slowest link),
 * so that its bytes follow the earlier one's, each message paying its latency once. Posted at once instead,
 * SimGrid shares the path between the two and finishes the earlier one late, and a ring whose neighbours
 * fall out of step then ran at half its links' rate (the hierarchical ring after an unevenly cut bucket). */
#define S_SEND_GROUPS 2
typedef struct {
    s_comms_t recv, sends[S_SEND_GROUPS];
    double *free_at;              /* per peer: when this rank's sends so far to it have left at the route's pace */
} s_rank_t;

/* The bytes a second of the route from rank a to rank b on its slowest link (the platform's rates, sim_int.h). */
static double s_route_Bps(int a, int b)
{
    const h_sim_platform_t *pl = g.pl;
    int ma = h_sim_machine(pl, g.p->workers, a), mb = h_sim_machine(pl, g.p->workers, b);
    double r = h_sim_gpu_Bps(pl);
    if (ma == mb) return r;
    r = fmin(r, h_sim_nic_Bps(pl));
    return pl->rack > 0 && h_sim_rack(pl, ma) != h_sim_rack(pl, mb) ? fmin(r, h_sim_up_Bps(pl)) : r;
}

static int s_bucket(s_rank_t *k, const h_sim_bplan_t *bp, int r)
{
    const h_sim_entry_t *e = bp->e + bp->first[r], *end = bp->e + bp->first[r + 1];
    char name[32];
    void *data = NULL;
    for (size_t grp = 0; e < end; grp++) {
        const h_sim_entry_t *q = e;
        while (q < end && q->grp == e->grp) q++;
        s_wait(&k->recv);                                /* the group before's receives */
        s_comms_t *sd = &k->sends[grp % S_SEND_GROUPS];
        s_wait(sd);                                      /* sends of S_SEND_GROUPS groups ago */
        double dl = bp->delay ? bp->delay[(size_t)e->grp * (size_t)g.p->world + (size_t)r] : 0;
        if (dl > 0 && e->send) sg_actor_sleep_for(dl);
        for (const h_sim_entry_t *p = e; p < q; p++) {
            int bad;
            if (p->send) {
                double now = simgrid_get_clock(), *fa = &k->free_at[p->peer];
                if (*fa > now) sg_actor_sleep_for(*fa - now), now = *fa;
                *fa = now + (double)p->bytes / s_route_Bps(r, p->peer);
                s_mb(name, sizeof name, r, p->peer, 0);
                bad = s_push(sd, sg_mailbox_put_async(sg_mailbox_by_name(name), (void *)&g, (long)p->bytes)) < 0;
            } else {
                s_mb(name, sizeof name, p->peer, r, 0);
                bad = s_push(&k->recv, sg_mailbox_get_async(sg_mailbox_by_name(name), &data)) < 0;
            }
            if (bad) return -1;
        }
        e = q;
    }
    s_wait(&k->recv);
    for (int i = 0; i < S_SEND_GROUPS; i++) s_wait(&k->sends[i]);
    return 0;
}

/* A dataflow schedule's step on rank r (sched_t.dataflow): every bucket's transfers of this rank, a send
 * once its bucket is released (a worker: its gradient ready; a server: at once) and this rank holds the
 * piece (its earlier receives of the piece are in), each connection (peer and transfer op) carrying one
 * transfer at a time in schedule order, as the transport does; the buckets overlap. Each connection is an
 * actor of its own (a blocking put or get at a time), woken through one condition; the rank's actor
 * releases the buckets and returns when all are done. 0 or -1 (out of memory). */
typedef struct {
    int b, piece, peer, conn, req, send, npc;
    const int *mp;                /* npc > 1 (a stream): its pieces, numbered in the bucket */
    const uint64_t *mpb;          /* npc > 1: their bytes */
    size_t sid;                   /* npc > 1: the stream, numbered over the buckets (g.sdone) */
    const h_sim_member_t *bm;     /* nbm > 0 (a fan-out bundle): the transfers it carries */
    int nbm;
    double lat_s, hop_s;          /* npc > 1: h_sim_entry_t's */
    int step;                     /* its step (g.held counts over the run) */
    uint64_t bytes;
} s_ftx_t;

#define S_JOIN_MAX 64 /* streams in one communication at most */
typedef struct s_conn s_conn_t;
typedef struct s_flow {
    sg_mutex_t mu;
    sg_cond_t done;               /* the rank's actor: every transfer of the step is done */
    const s_ftx_t *t;
    const ssize_t *nxt;
    char *released;
    size_t left;
    int rank;
    s_conn_t *conns;
    ssize_t *wait_piece;          /* per piece: the first connection waiting for it (wnext links the rest) */
    ssize_t wait_rel;             /* the connections waiting for their bucket's release */
    sg_sem_t cpu;                 /* the rank's cores for its reductions (sim.h server_Bps), taken in arrival order;
                                   * NULL: reductions cost nothing */
    const size_t *poff;           /* per bucket: its first piece in the rank's numbering (every rank's the same) */
    const int *nrecv;             /* per piece: the receives of it a step (a stream counting each piece) */
    int step, nsteps, ncred;      /* the steps it replays, and the receives bundles into other ranks credit it in them */
    int users;                    /* other ranks' actors inside s_hold_at with it */
} s_flow_t;

/* A connection's actor; a send waits on its own condition, registered where it waits (a piece, or the
 * release), so that a receive or a release wakes only the connections it concerns. */
struct s_conn {
    s_flow_t *st;
    ssize_t first, wnext;
    sg_cond_t cv;
};

static void s_wake(s_flow_t *st, ssize_t *list)
{
    for (ssize_t k = *list; k >= 0;) {
        ssize_t n = st->conns[k].wnext;
        st->conns[k].wnext = -1;
        sg_cond_notify_one(st->conns[k].cv);
        k = n;
    }
    *list = -1;
}

/* Rank r holds one more receive of its piece pi (the run's numbering): count it, and wake what waits for it
 * on that rank (its step under way; a rank between steps counts it for the next: every rank of an allreduce
 * finishes a step only once every rank's inputs of it are in, so a count is never taken for another step's). */
/* A fan-out bundle of step `step` (>= 0) is in: the receiver also counts it among the step's credited receives,
 * without which its step does not end. Actors switch only at SimGrid calls, so the count and the flow's users are
 * taken before the lock; the flow is not torn down while it has users. */
static void s_hold_at(int r, size_t pi, int step)
{
    g.held[(size_t)r * g.npc + pi]++;
    g.held_t[(size_t)r * g.npc + pi] = simgrid_get_clock();
    if (step >= 0) g.cred[(size_t)step * (size_t)g.p->world + (size_t)r]++;
    s_flow_t *o = g.flow[r];
    if (!o) return;
    o->users++;
    sg_mutex_lock(o->mu);
    s_wake(o, &o->wait_piece[pi]);
    if (step >= 0) sg_cond_notify_all(o->done);
    sg_mutex_unlock(o->mu);
    o->users--;
}

static void s_hold(int r, size_t pi) { s_hold_at(r, pi, -1); }

/* the receives bundles credited to rank st over its steps, against the count it waits for */
static int s_credited(const s_flow_t *st)
{
    int n = 0;
    for (int k = st->step; k < st->step + st->nsteps; k++) n += g.cred[(size_t)k * (size_t)g.p->world + (size_t)st->rank];
    return n >= st->ncred;
}

/* whether rank st may send x: its bucket released, and the receives of its piece before it held (a fan-out
 * bundle: of the first piece it carries from this rank, cut-through as the engine sends each piece once it is
 * held, rather than idling the NIC until its last; *wait: the piece it waits for); an owner's answer ahead of the pushes
 * (sched_t.stale): the asking rank's own push of this step in, and (SSP) every rank's push of the step stale
 * steps before */
static int s_may_send(const s_flow_t *st, const s_ftx_t *x, size_t *wait)
{
    *wait = (size_t)x->piece;
    if (!st->released[x->b]) return 0;
    for (int j = 0; j < x->nbm; j++) { /* cut-through: the first of its pieces this rank sends (s_pieces_in: the rest) */
        size_t pi = st->poff[x->b] + (size_t)x->bm[j].piece;
        if (x->bm[j].src != st->rank) continue;
        return g.held[(size_t)st->rank * g.npc + pi] < x->step * st->nrecv[pi] + x->bm[j].req ? (*wait = pi, 0) : 1;
    }
    if (x->nbm) return 1;
    if (g.p->stale && x->conn == SCHED_STORE && st->rank >= g.p->workers) {
        const int *c = g.pushed + (size_t)x->piece * (size_t)g.p->workers;
        int need = x->step + 1 - g.p->stale;
        return c[x->peer] >= x->step + 1 &&
               (g.p->stale < 0 || need <= 0 || g.atleast[(size_t)x->piece * (H_SIM_MAX_STEPS + 1) + (size_t)need] >= g.pushers[x->piece]);
    }
    return g.held[(size_t)st->rank * g.npc + (size_t)x->piece] >= x->step * st->nrecv[x->piece] + x->req;
}

/* A fan-out bundle that is in credits its receivers only once every piece it carries is held at its sender (it went
 * at its first, s_may_send): a piece cannot arrive before it exists. Where one is not yet (seldom: the pieces of a
 * bundle are held within a transfer's time of each other), wait in steps of a hop's latency. */
static void s_pieces_in(const s_flow_t *st, const s_ftx_t *x)
{
    for (int j = 0; j < x->nbm; j++) {
        const h_sim_member_t *m = &x->bm[j];
        size_t pi = st->poff[x->b] + (size_t)m->piece, at = (size_t)m->src * g.npc + pi;
        while (g.held[at] < x->step * g.nrecv[at] + m->req) sg_actor_sleep_for(g.pl->lat_s > 0 ? g.pl->lat_s : 1e-6);
    }
}

/* A stream (x->npc > 1): one communication of a connection's run of pieces, with the nj - 1 streams after it on the
 * connection that joined it (s_conn_actor). The receiver holds each piece it sends on by itself once the flow has
 * carried the bytes up to its end (read from the flow's bytes to go: first at the earliest they can be there, the
 * route's latency and the bytes at its rate, then when the rate seen between two reads says; once it is in, from
 * its end at its mean rate) and the latencies of the pieces before it have passed (a connection carrying them one at
 * a time pays one each). A run's other pieces are held with its last: when its bytes are carried so, and no earlier
 * than this rank held the last piece's inputs plus a hop and that piece at the flow's rate (a run ends no earlier
 * than its inputs); the last run's no earlier than the communication's end plus a hop. Then the run's receive is
 * done (g.sdone). */
double h_sim_comm_left(sg_comm_t c);
static void s_stream(s_flow_t *st, ssize_t me, const s_ftx_t *const *xs, int nj, const char *name)
{
    const s_ftx_t *x = xs[0];
    int n = 0;
    uint64_t bytes = 0;
    for (int j = 0; j < nj; j++) n += xs[j]->npc, bytes += xs[j]->bytes;
    size_t *pis = malloc((size_t)n * sizeof *pis);
    double *pb = malloc((size_t)n * sizeof *pb);
    if (!pis || !pb) abort(); /* a few kB; the child has no way to carry on */
    for (int j = 0, q = 0; j < nj; j++)
        for (int k = 0; k < xs[j]->npc; k++, q++)
            pis[q] = st->poff[xs[j]->b] + (size_t)xs[j]->mp[k], pb[q] = (double)xs[j]->mpb[k];
    sg_comm_t cm = sg_mailbox_put_async(sg_mailbox_by_name(name), (void *)&g, (long)bytes);
    double t0 = simgrid_get_clock(), tot = (double)bytes, nominal = s_route_Bps(st->rank, x->peer);
    double B = 0, pt = -1, pd = 0, rate = 0, end = 0, R = nominal; /* bytes up to piece q's end; the read before */
    const char *need = g.need + (size_t)x->peer * g.npc;
    int in = 0;
    for (int j = 0, q = 0, q0 = 0; j < nj; q0 += xs[j]->npc, j++) {
        const s_ftx_t *y = xs[j];
        for (q = q0; q < q0 + y->npc; q++) {
            B += pb[q];
            int last = q + 1 == q0 + y->npc;
            if (!need[pis[q]] && !last) continue;    /* nothing there sends it on by itself: held with its run's last */
            if (!in && j + 1 == nj && last) sg_comm_wait(cm), in = 1;
            double at = t0 + x->hop_s + B / nominal;
            for (int reads = 0; !in; reads++) {
                if (at > simgrid_get_clock()) sg_actor_sleep_until(at);
                if ((in = sg_comm_test(cm))) break;
                double now = simgrid_get_clock(), d = tot - h_sim_comm_left(cm);
                if (d >= B * (1 - 1e-12) || reads >= 64) {
                    at = rate > 0 && d > B ? now - (d - B) / rate : now;
                    break;
                }
                if (pt >= 0 && d > pd && now > pt) rate = (d - pd) / (now - pt);
                pt = now, pd = d;
                at = now + (B - d) / (rate > 0 ? rate : nominal);
            }
            if (in && end == 0) end = simgrid_get_clock(), R = end - t0 > x->hop_s ? tot / (end - t0 - x->hop_s) : nominal;
            if (in) at = j + 1 == nj && last ? end + x->lat_s : end - (tot - B) / R;
            at += (j + 1 == nj && last ? 0 : q * x->hop_s);
            if (last) {                               /* its inputs, held here */
                size_t pl = pis[q];
                sg_mutex_lock(st->mu);
                while (g.held[(size_t)st->rank * g.npc + pl] < y->step * st->nrecv[pl] + y->req) {
                    st->conns[me].wnext = st->wait_piece[pl];
                    st->wait_piece[pl] = me;
                    sg_cond_wait(st->conns[me].cv, st->mu);
                }
                double in_t = y->req ? g.held_t[(size_t)st->rank * g.npc + pl] : t0; /* when they were */
                sg_mutex_unlock(st->mu);
                at = fmax(at, in_t + x->hop_s + pb[q] / (in ? R : rate > 0 ? rate : nominal));
            }
            if (at > simgrid_get_clock()) sg_actor_sleep_until(at);
            if (!last) {
                s_hold(x->peer, pis[q]);
                continue;
            }
            g.sdone[y->sid]++;
            for (int i = q0; i <= q; i++)
                if (!need[pis[i]] || i == q) s_hold(x->peer, pis[i]);
        }
    }
    free(pis), free(pb);
}

static void s_conn_actor(int argc, char **argv)
{
    (void)argc, (void)argv;
    s_conn_t *c = sg_actor_self_get_data();
    s_flow_t *st = c->st;
    ssize_t me = c - st->conns;
    char name[48];
    for (ssize_t h = c->first; h >= 0; h = st->nxt[h]) {
        const s_ftx_t *x = &st->t[h];
        int ndone = 1;                            /* the transfers it is: a stream and those that joined it */
        if (x->send) {
            sg_mutex_lock(st->mu);
            size_t wp;
            while (!s_may_send(st, x, &wp)) {
                ssize_t *list = !st->released[x->b] ? &st->wait_rel : &st->wait_piece[wp];
                c->wnext = *list;
                *list = me;
                sg_cond_wait(c->cv, st->mu);
            }
            sg_mutex_unlock(st->mu);
            s_mb(name, sizeof name, st->rank, x->peer, x->conn);
            if (x->npc > 1) { /* the streams after it whose buckets are released join it (sim.h h_sim_work_t.join) */
                const s_ftx_t *xs[S_JOIN_MAX];
                int nj = 1;
                xs[0] = x;
                for (ssize_t h2 = st->nxt[h]; g.w->join > 0 && nj < S_JOIN_MAX && h2 >= 0; h2 = st->nxt[h2]) {
                    const s_ftx_t *y = &st->t[h2];
                    if (!y->send || y->npc < 2 || y->step != x->step || !st->released[y->b]) break;
                    g.sjoin[y->sid * (size_t)g.w->steps + (size_t)y->step] = 1, xs[nj++] = y, h = h2;
                }
                g.joined += (uint64_t)(nj - 1), ndone = nj;
                s_stream(st, me, xs, nj, name);
            }
            else sg_mailbox_put(sg_mailbox_by_name(name), (void *)&g, (long)x->bytes);
        } else {
            s_mb(name, sizeof name, x->peer, st->rank, x->conn);
            if (x->npc < 2 || !g.sjoin[x->sid * (size_t)g.w->steps + (size_t)x->step]) /* joined: came with one before */
                sg_mailbox_get(sg_mailbox_by_name(name));
            if (x->nbm) s_pieces_in(st, x);
            if (x->npc > 1) { /* a stream: done once its sender has held its pieces here (s_stream) */
                size_t pl = st->poff[x->b] + (size_t)x->mp[x->npc - 1];
                sg_mutex_lock(st->mu);
                while (g.sdone[x->sid] < x->step + 1) {
                    c->wnext = st->wait_piece[pl];
                    st->wait_piece[pl] = me;
                    sg_cond_wait(c->cv, st->mu);
                }
                sg_mutex_unlock(st->mu);
            }
            /* every transfer it carries is held; the credited ones are counted for their ranks' steps, not the
             * one it came as (this rank's own receive, counted in st->left: credited too, it would end this
             * rank's step before the bundles into it still on their way) */
            for (int j = 0; j < x->nbm; j++) {
                const h_sim_member_t *m = &x->bm[j];
                size_t pi = st->poff[x->b] + (size_t)m->piece;
                int own = m->rank == st->rank && m->src == x->peer && pi == (size_t)x->piece;
                s_hold_at(m->rank, pi, own ? -1 : x->step);
            }
            /* the receiver takes a push from another machine in (ZeroMQ over TCP) and sums it before it holds
             * it; a push inside a machine goes through the PS's shared-memory van and is not charged */
            if (st->cpu && x->conn == SCHED_REDUCE &&
                h_sim_machine(g.pl, g.p->workers, x->peer) != h_sim_machine(g.pl, g.p->workers, st->rank)) {
                sg_sem_acquire(st->cpu);
                sg_actor_execute((double)x->bytes);
                sg_sem_release(st->cpu);
            }
        }
        sg_mutex_lock(st->mu);
        if (!x->send && x->npc <= 1 && !x->nbm) { /* a stream's pieces: held by its sender; a bundle's: above */
            g.held[(size_t)st->rank * g.npc + (size_t)x->piece]++;
            g.held_t[(size_t)st->rank * g.npc + (size_t)x->piece] = simgrid_get_clock();
            if (g.p->stale && x->conn == SCHED_REDUCE && st->rank >= g.p->workers && x->peer < g.p->workers) {
                int c = ++g.pushed[(size_t)x->piece * (size_t)g.p->workers + (size_t)x->peer]; /* its pushes so far */
                if (c <= H_SIM_MAX_STEPS) g.atleast[(size_t)x->piece * (H_SIM_MAX_STEPS + 1) + (size_t)c]++;
            }
            s_wake(st, &st->wait_piece[x->piece]);
        }
        if ((st->left -= (size_t)ndone) == 0) sg_cond_notify_all(st->done);
        sg_mutex_unlock(st->mu);
    }
}

static int s_key_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static int s_flow(int r, int step, int nsteps, double t0, double f, int worker)
{
    const h_sim_plan_t *p = g.p;
    int nb = p->nb, rc = 0;
    size_t nt = 0, npc = 0, nk = 0, ncr = 0;
    int ncred = 0;
    for (int b = 0; b < nb; b++) {
        npc += (size_t)p->b[b].npieces;
        for (size_t i = p->b[b].first[r]; i < p->b[b].first[r + 1]; i++) nt += p->b[b].e[i].npc > 0, ncr += p->b[b].e[i].npc < 0;
    }
    if (!nt && !ncr) return 0;
    /* the rank's connections: the keys its transfers use, sorted (a rank talks to a few of the world's ranks) */
    size_t *keys = malloc((nt ? nt : 1) * sizeof *keys);
    if (!keys) return -1;
    for (int b = 0; b < nb; b++)
        for (size_t i = p->b[b].first[r]; i < p->b[b].first[r + 1]; i++)
            if (p->b[b].e[i].npc > 0) keys[nk++] = h_sim_conn_key(&p->b[b].e[i]);
    qsort(keys, nk, sizeof *keys, s_key_cmp);
    size_t u = 0;
    for (size_t i = 0; i < nk; i++)
        if (!u || keys[u - 1] != keys[i]) keys[u++] = keys[i];
    nk = u ? u : 1;
    nt *= (size_t)nsteps;
    s_ftx_t *t = malloc((nt ? nt : 1) * sizeof *t);
    size_t *poff = calloc((size_t)nb + 1, sizeof *poff);
    int *nrecv = calloc(npc + 1, sizeof *nrecv);
    ssize_t *head = malloc(nk * sizeof *head), *tail = malloc(nk * sizeof *tail), *nxt = malloc(nt * sizeof *nxt);
    char *released = calloc((size_t)nb, 1);
    s_conn_t *conns = malloc(nk * sizeof *conns);
    ssize_t *wait_piece = malloc((npc + 1) * sizeof *wait_piece);
    if (!t || !poff || !nrecv || !head || !tail || !nxt || !released || !conns || !wait_piece) rc = -1;
    for (size_t k = 0; rc == 0 && k <= npc; k++) wait_piece[k] = -1;
    size_t n = 0;
    for (size_t k = 0; rc == 0 && k < nk; k++) head[k] = tail[k] = -1;
    for (int b = 0; rc == 0 && b < nb; b++) poff[b + 1] = poff[b] + (size_t)p->b[b].npieces;
    for (int sk = 0, b = 0; rc == 0 && sk < nsteps; b = (b + 1) % nb, sk += b == 0) {
        const h_sim_bplan_t *bp = &p->b[b];
        size_t soff = 0;                         /* the streams of the buckets before */
        for (int q = 0; q < b; q++) soff += p->b[q].nmp;
        for (size_t i = bp->first[r]; i < bp->first[r + 1]; i++) {
            const h_sim_entry_t *e = &bp->e[i];
            if (e->npc < 0) { /* a receive a bundle credits: counted, carried by no connection of this rank */
                if (sk == 0) nrecv[poff[b] + (size_t)e->piece]++;
                ncred++;
                continue;
            }
            int conn = e->conn < H_SIM_FLOW_CONNS ? e->conn : H_SIM_FLOW_CONNS - 1;
            size_t ck = h_sim_conn_key(e), pi = poff[b] + (size_t)e->piece;
            size_t key = (size_t)((const size_t *)bsearch(&ck, keys, nk, sizeof *keys, s_key_cmp) - keys);
            t[n] = (s_ftx_t){.b = b, .piece = (int)pi, .peer = e->peer, .conn = conn, .send = e->send, .bytes = e->bytes,
                             .req = e->send ? e->req : 0, .npc = e->npc, .mp = e->npc > 1 ? bp->mp + e->mp0 : NULL,
                             .mpb = e->npc > 1 ? bp->mpb + e->mp0 : NULL, .sid = soff + e->mp0,
                             .lat_s = e->lat_s, .hop_s = e->hop_s, .step = step + sk, .nbm = e->nbm,
                             .bm = e->nbm ? bp->bm + e->bm0 : NULL};
            for (int k = 0; !e->send && sk == 0 && k < e->npc; k++) nrecv[e->npc > 1 ? poff[b] + (size_t)bp->mp[e->mp0 + k] : pi]++;
            nxt[n] = -1; /* appended to its connection's queue */
            if (tail[key] >= 0) nxt[tail[key]] = (ssize_t)n;
            else head[key] = (ssize_t)n;
            tail[key] = (ssize_t)n++;
        }
    }
    s_flow_t st = {.t = t, .nxt = nxt, .released = released, .left = nt, .rank = r, .conns = conns,
                   .wait_piece = wait_piece, .wait_rel = -1, .poff = poff, .nrecv = nrecv, .step = step, .nsteps = nsteps,
                   .ncred = ncred};
    if (rc == 0) {
        g.flow[r] = &st;
        st.mu = sg_mutex_init();
        st.done = sg_cond_init();
        if (g.w->cpu_reduce && g.pl->server_Bps > 0) st.cpu = sg_sem_init(g.pl->server_cores > 0 ? g.pl->server_cores : 1);
        sg_host_t host = sg_host_self();
        for (size_t k = 0; k < nk; k++) {
            conns[k].cv = NULL;
            if (head[k] < 0) continue;
            conns[k] = (s_conn_t){.st = &st, .first = head[k], .wnext = -1, .cv = sg_cond_init()};
            char name[32];
            snprintf(name, sizeof name, "c%d.%zu", r, k);
            sg_actor_t a = sg_actor_init(name, host);
            sg_actor_set_stacksize(a, 64 << 10);
            sg_actor_set_data(a, &conns[k]);
            sg_actor_start(a, s_conn_actor, 0, NULL);
        }
        /* release the buckets at their times, then wait for the connections to drain */
        for (int b = 0; b < nb; b++) {
            double at = worker && g.w->ready_s ? t0 + g.w->ready_s[b] * f : t0, now = simgrid_get_clock();
            if (at > now) sg_actor_sleep_for(at - now);
            sg_mutex_lock(st.mu);
            released[b] = 1;
            s_wake(&st, &st.wait_rel);
            sg_mutex_unlock(st.mu);
        }
        sg_mutex_lock(st.mu);
        while (st.left || !s_credited(&st)) sg_cond_wait(st.done, st.mu);
        g.flow[r] = NULL;
        sg_mutex_unlock(st.mu);
        while (st.users) sg_actor_yield();
        for (size_t k = 0; k < nk; k++)
            if (head[k] >= 0) sg_cond_destroy(conns[k].cv);
        sg_cond_destroy(st.done);
        sg_mutex_destroy(st.mu);
        if (st.cpu) sg_sem_destroy(st.cpu);
        g.flow[r] = NULL;
    }
    free(t), free(poff), free(nrecv), free(head), free(tail), free(nxt), free(released), free(conns), free(wait_piece);
    free(keys);
    return rc;
}

/* One rank: every step, a worker's forward and backward (its buckets ready at their times, stretched by
 * its factor) with each bucket's collective as soon as it may start, then its update; a server's part of
 * every bucket. */
static void s_actor(int argc, char **argv)
{
    (void)argc;
    int r = atoi(argv[1]), W = g.p->world, worker = r < g.p->workers;
    char name[32];
    /* every mailbox this rank receives on: eager, data flows when sent (a TCP connection's buffers) */
    for (int b = 0; b < g.p->nb; b++) {
        const h_sim_bplan_t *bp = &g.p->b[b];
        for (size_t i = bp->first[r]; i < bp->first[r + 1]; i++)
            if (!bp->e[i].send && bp->e[i].npc > 0) {
                int conn = bp->e[i].conn < H_SIM_FLOW_CONNS ? bp->e[i].conn : H_SIM_FLOW_CONNS - 1;
                s_mb(name, sizeof name, bp->e[i].peer, r, conn);
                sg_mailbox_set_receiver(name);
            }
    }
    s_rank_t k;
    memset(&k, 0, sizeof k);
    double f = worker && g.w->factor ? g.w->factor[r] : 1;
    int bad = !g.p->dataflow && !(k.free_at = calloc((size_t)W, sizeof *k.free_at));
    if (bad) g.end[r] = -1;
    for (int st = 0; st < g.w->steps && !bad; st++) {
        double t0 = simgrid_get_clock();
        /* an owner answering ahead of the pushes replays every step at once: its answers to one rank do not wait
         * for the others' step to end */
        if (g.p->dataflow && (worker || !g.p->stale)) bad = s_flow(r, st, 1, t0, f, worker) < 0;
        else if (g.p->dataflow && st == 0) bad = s_flow(r, 0, g.w->steps, t0, f, worker) < 0;
        for (int b = 0; b < g.p->nb && !bad && !g.p->dataflow; b++) {
            if (worker && g.w->ready_s) {
                double ready = t0 + g.w->ready_s[b] * f, now = simgrid_get_clock();
                if (ready > now) sg_actor_sleep_for(ready - now);
            }
            bad = s_bucket(&k, &g.p->b[b], r) < 0;
        }
        if (worker) {
            double done = t0 + g.w->total_s * f, now = simgrid_get_clock();
            if (done > now) sg_actor_sleep_for(done - now);
            if (g.w->update_s > 0) sg_actor_sleep_for(g.w->update_s);
        }
        g.end[(size_t)st * W + r] = bad ? -1 : simgrid_get_clock();
    }
    free(k.recv.c), free(k.free_at);
    for (int i = 0; i < S_SEND_GROUPS; i++) free(k.sends[i].c);
}

void h_sim_child(int fd, const h_sim_platform_t *pl, const h_sim_plan_t *p, const h_sim_work_t *w, h_sim_result_t *res)
{
    g.p = p, g.w = w, g.pl = pl;
    g.end = calloc((size_t)w->steps * (size_t)p->world, sizeof *g.end);
    char path[] = "/tmp/sb-sim-XXXXXX.xml";
    int x = mkstemps(path, 4);
    FILE *f = x >= 0 ? fdopen(x, "w") : NULL;
    if (!f) {
        dprintf(fd, "!cannot write the platform file: %s", strerror(errno));
        _exit(1);
    }
    h_sim_xml(f, pl, p);
    if (fclose(f) != 0) {
        dprintf(fd, "!cannot write the platform file %s: %s", path, strerror(errno));
        unlink(path);
        _exit(1);
    }
    /* no guard page under each actor's stack: a PS's connections are tens of thousands of actors, and
     * two mappings each would pass Linux's vm.max_map_count */
    char *args[] = {"simulate", "--cfg=network/latency-factor:1", "--cfg=network/bandwidth-factor:1",
                    "--cfg=network/crosstraffic:0", "--cfg=contexts/guard-size:0", "--log=root.thres:critical", NULL};
    int ac = 6;
    g.npc = 0;
    for (int b = 0; b < p->nb; b++) g.npc += (size_t)p->b[b].npieces;
    g.held = calloc((size_t)p->world * (g.npc + 1), sizeof *g.held);
    g.need = calloc((size_t)p->world * (g.npc + 1), 1);
    g.flow = calloc((size_t)p->world, sizeof *g.flow);
    g.cred = calloc((size_t)p->world * (size_t)g.w->steps, sizeof *g.cred);
    g.nrecv = calloc((size_t)p->world * (g.npc + 1), sizeof *g.nrecv);
    size_t nstreams = 0;
    for (int b = 0; b < p->nb; b++) nstreams += p->b[b].nmp;
    g.sdone = calloc(nstreams + 1, sizeof *g.sdone);
    g.held_t = calloc((size_t)p->world * (g.npc + 1), sizeof *g.held_t);
    g.sjoin = calloc((nstreams + 1) * (size_t)w->steps, 1);
    for (size_t b = 0, off = 0; g.need && g.nrecv && b < (size_t)p->nb; off += (size_t)p->b[b].npieces, b++)
        for (int r = 0; r < p->world; r++)
            for (size_t i = p->b[b].first[r]; i < p->b[b].first[r + 1]; i++) {
                const h_sim_entry_t *e = &p->b[b].e[i];
                int *nr = g.nrecv + (size_t)r * g.npc + off;
                if (!e->send) {
                    if (e->npc > 1)
                        for (int k = 0; k < e->npc; k++) nr[p->b[b].mp[e->mp0 + (uint32_t)k]]++;
                    else nr[e->piece]++;
                    continue;
                }
                g.need[(size_t)r * g.npc + off + (size_t)e->piece] = 1;
                for (int j = 0; j < e->nbm; j++) { /* a bundle's pieces: sent on by their own senders */
                    const h_sim_member_t *m = &p->b[b].bm[e->bm0 + (uint32_t)j];
                    g.need[(size_t)m->src * g.npc + off + (size_t)m->piece] = 1;
                }
            }
    if (p->stale) {
        g.pushed = calloc(g.npc * (size_t)p->workers + 1, sizeof *g.pushed);
        g.atleast = calloc(g.npc * (H_SIM_MAX_STEPS + 1) + 1, sizeof *g.atleast);
        g.pushers = calloc(g.npc + 1, sizeof *g.pushers);
        for (size_t b = 0, off = 0; g.pushers && b < (size_t)p->nb; off += (size_t)p->b[b].npieces, b++)
            for (int r = 0; r < p->workers; r++)
                for (size_t i = p->b[b].first[r]; i < p->b[b].first[r + 1]; i++)
                    if (p->b[b].e[i].send && p->b[b].e[i].conn == SCHED_REDUCE && p->b[b].e[i].peer >= p->workers)
                        g.pushers[off + (size_t)p->b[b].e[i].piece]++;
        if (!g.pushed || !g.atleast || !g.pushers) {
            dprintf(fd, "!out of memory for the replay's counters");
            _exit(1);
        }
    }
    if (!g.end || !g.held || !g.need || !g.flow || !g.cred || !g.nrecv || !g.sdone || !g.held_t || !g.sjoin) {
        dprintf(fd, "!out of memory for the replay's counters");
        _exit(1);
    }
    simgrid_init(&ac, args);
    simgrid_load_platform(path);
    unlink(path);
    for (int r = 0; r < p->world; r++) {
        char host[32], num[16];
        snprintf(host, sizeof host, "r%d", r);
        snprintf(num, sizeof num, "%d", r);
        char *a[] = {"rank", num, NULL};
        sg_actor_create(host, sg_host_by_name(host), s_actor, 2, a);
    }
    simgrid_run();
    /* a step ends when its last worker's does; servers finish a step's sends before its workers' receives */
    double before = 0, sum = 0;
    for (int st = 0; st < g.w->steps; st++) {
        double last = 0;
        for (int r = 0; r < p->world; r++) {
            double e = g.end[(size_t)st * p->world + r];
            if (e < 0) {
                dprintf(fd, "!rank %d could not replay its schedule (out of memory, or pieces that never arrive)", r);
                _exit(1);
            }
            if (r < p->workers && e > last) last = e;
        }
        res->step_s[st] = last - before;
        sum += last - before;
        before = last;
    }
    res->steps = g.w->steps;
    res->joined = g.joined;
    res->time_s = sum / g.w->steps;
    if (p->stale) { /* workers that do not wait for each other: the step of the rate they train at together */
        double rate = 0;
        for (int r = 0; r < p->workers; r++) {
            double e = g.end[(size_t)(g.w->steps - 1) * p->world + r];
            if (e > 0) rate += g.w->steps / e;
        }
        if (rate > 0) res->time_s = p->workers / rate;
    }
    char out[1 + sizeof *res];
    out[0] = 'R'; /* a result, not a message ('!') */
    memcpy(out + 1, res, sizeof *res);
    ssize_t wr = write(fd, out, sizeof out);
    _exit(wr == (ssize_t)sizeof out ? 0 : 1);
}
