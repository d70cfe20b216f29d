/* cluster_cost.c: per-NIC traffic of ring, double binary tree and parameter server on machines of G
 * GPUs, and the overlapped step (cluster_cost.h).
 *
 * Ranks are numbered machine by machine (rank r on machine r / G), as the launcher places them.
 *  - ring: one flat ring over P = N G ranks; N of its edges cross machines, one leaving and one
 *    entering every NIC; each of its 2(P-1) lock-step steps moves n/P over every edge, so a NIC
 *    carries 2(P-1)/P n each way and the steps are paced by it.
 *  - ring and tree from the engine's declared schedule (core/sched.h, read through the registry by
 *    model/cluster.c): a NIC direction's bytes are its machine's transfers to (from) other machines over
 *    all steps, the busiest direction paces the collective, and every step is a message in series. The
 *    tree's two binary trees carry one half of the buffer up and down every edge, so every tree edge
 *    that crosses machines adds n/2 to the child's out and the parent's in for the reduce, and the
 *    reverse for the broadcast; pipelined, so the time is the busiest direction's bytes plus its steps.
 *  - ps: workers push n (split over the servers by bytes) and pull n. Dedicated servers on K
 *    machines of their own: a worker machine's NIC carries G n each way, a server machine's P n / K.
 *    Servers on the GPU machines (s on machine s mod N): in the push phase a machine's NIC sends its
 *    workers' pushes to the other machines' servers and receives the other machines' pushes to its
 *    servers; the reply phase mirrors it.
 *    Colocated (a server in every worker): each worker sends (P-1)/P n as a worker and as a server,
 *    the part bound for other machines crossing the NIC. With loss scaling (AMP) the engine sends the
 *    pulls only after the step's last push (the optimizer needs every worker's overflow flag): a step
 *    is the pushes, bucket by bucket as backward produces them, then the replies for the whole model.
 *    Pipelined (f32 gradients, no loss scaling): a bucket's replies follow its own pushes. With servers
 *    on machines of their own, pushes and replies travel opposite directions of every NIC (worker out /
 *    server in, then back), so the replies run one bucket behind the pushes; with servers on the GPU
 *    machines (per machine, colocated) a NIC direction carries its workers' pushes and its servers'
 *    replies at once, so a bucket costs both phases' bytes on that direction. */
#include "harness/model/cluster_cost.h"
#include <math.h>
#include <stdlib.h>


static void s_ps(const h_cl_net_t *net, const h_cl_engine_t *e, double n, double *nic, double *msgs)
{
    int N = net->nodes, G = net->gpus_per_node, P = N * G;
    *msgs = 2;
    if (e->colocate) {
        /* one direction of one phase: a machine's G workers push n/P to each of the P - G remote servers
         * (the replies, the other phase, carry as much the other way) */
        *nic = N > 1 ? (double)G * n * (double)(P - G) / P : 0;
        return;
    }
    int S = e->servers > 0 ? e->servers : 1;
    if (e->server_nodes > 0) {
        int K = e->server_nodes;
        /* servers spread over K machines; each machine holds ceil or floor of S/K of the bytes */
        double per_machine = n * ceil((double)S / K) / S * P;
        /* pipelined: a server machine's in-direction takes all P workers' pushes from N machines while
         * its out-direction sends replies (the incast slowdown: measured on this layout, else the law; with
         * K > 1 the workers' NICs each feed K of them, the fan-out term) */
        if (e->pipelined) per_machine *= e->slow > 0 ? e->slow : h_cl_incast_factor(e->incast, P, N, e->incast_fmax);
        *nic = fmax(G * n, per_machine);
        return;
    }
    /* server s on GPU machine s mod N: machine m holds the share h_m of the parameters */
    double worst = 0;
    for (int m = 0; m < N; m++) {
        int sm = 0;
        for (int s = 0; s < S; s++) sm += s % N == m;
        double h = (double)sm / S;
        /* push phase: out = its workers' pushes to remote servers, in = remote workers' pushes to its
         * servers (the reply phase mirrors both) */
        worst = fmax(worst, fmax(G * n * (1 - h), h * n * (P - G)));
    }
    *nic = N > 1 ? worst : 0;
}

double h_cl_ps_duplex_bytes(const h_cl_net_t *net, const h_cl_engine_t *e, double n)
{
    int N = net->nodes, G = net->gpus_per_node, P = N * G;
    if (N <= 1) return 0;
    /* the direction carrying a machine's workers' pushes and its servers' replies is slowed as a whole: by
     * the layout's slowdown measured on these machines (e->slow), else by the incast law for its servers'
     * P - G remote workers on N - 1 machines (measured on a server machine's NIC, where both directions
     * carry a phase's bytes: ps-incast) */
    double slow = e->slow > 0 ? e->slow : e->pipelined ? h_cl_incast_factor(e->incast, P - G, N - 1, e->incast_fmax) : 1;
    if (e->colocate) /* push out + reply out, the same per machine */
        return G * n * (double)(P - G) / P * 2 * slow;
    int S = e->servers > 0 ? e->servers : 1;
    if (e->server_nodes > 0) {
        double nic, msgs;
        s_ps(net, e, n, &nic, &msgs);
        return nic; /* workers: pushes out, replies in; servers: the reverse */
    }
    double worst = 0;
    for (int m = 0; m < N; m++) {
        int sm = 0;
        for (int s = 0; s < S; s++) sm += s % N == m;
        double h = (double)sm / S;
        /* out: its workers' pushes to remote servers + its servers' replies to remote workers (in mirrors) */
        worst = fmax(worst, (G * n * (1 - h) + h * n * (P - G)) * slow);
    }
    return worst;
}

double h_cl_incast_factor(double c, int f, int machines, int fmax)
{
    if (fmax > 0 && f > fmax) f = fmax; /* measured up to there; held beyond */
    return c > 0 && f > 1 && machines > 1 ? 1 + c * (f - 1) : 1;
}

double h_cl_incast_fit(int n, const int *f, const double *ratio)
{
    double sxy = 0, sxx = 0;
    for (int i = 0; i < n; i++) {
        double x = f[i] - 1;
        sxy += x * (ratio[i] - 1);
        sxx += x * x;
    }
    return sxx > 0 ? sxy / sxx : NAN;
}

void h_cl_traffic(const h_cl_net_t *net, const h_cl_engine_t *e, double n, double *nic_bytes, double *messages)
{
    int N = net->nodes > 0 ? net->nodes : 1, P = N * (net->gpus_per_node > 0 ? net->gpus_per_node : 1);
    *nic_bytes = 0;
    *messages = 0;
    if ((e->kind == H_PATTERN_RING || e->kind == H_PATTERN_TREE) && e->from_sched) {
        if (P > 1) *messages = e->msgs;
        if (N > 1) *nic_bytes = e->nic_per_byte * n;
    } else if (e->kind == H_PATTERN_RING) {
        /* the closed form: 2(P-1) lock-step steps of n/P over every edge, N of them crossing machines */
        if (P > 1) *messages = 2.0 * (P - 1);
        if (N > 1) *nic_bytes = 2.0 * (P - 1) / P * n;
    } else if (e->kind == H_PATTERN_TREE) {
        if (P > 1) *messages = NAN;
        if (N > 1) *nic_bytes = NAN; /* no closed form here: the tree's shape is its schedule's */
    } else {
        s_ps(net, e, n, nic_bytes, messages);
    }
}

double h_cl_collective(const h_cl_net_t *net, const h_cl_engine_t *e, double n)
{
    double bytes, msgs;
    h_cl_traffic(net, e, n, &bytes, &msgs);
    return msgs * net->alpha + bytes * net->beta;
}

double h_cl_step(const h_cl_net_t *net, const h_cl_engine_t *e, int nb, const double *ready, const double *bytes,
                 double compute_s, double *exposed)
{
    double end = 0, total = 0;
    if (e->kind == H_PATTERN_PS && e->pipelined) {
        /* pushes bucket by bucket; a bucket's replies follow its pushes. Opposite directions (servers on
         * machines of their own): a second pipeline one bucket behind; shared directions: each bucket
         * carries both phases' bytes on the busiest direction. */
        double push = 0, reply = 0;
        for (int b = 0; b < nb; b++) {
            /* a bucket travels as partitions: the unit whose replies can follow its pushes */
            for (double left = bytes[b]; left > 0;) {
                double c = e->part_bytes > 0 && left > e->part_bytes ? e->part_bytes : left, msgs, one;
                left -= c;
                h_cl_traffic(net, e, c, &one, &msgs);
                double both = h_cl_ps_duplex_bytes(net, e, c);
                if (both > one * 1.000001) {
                    push = fmax(push, ready[b]) + msgs * net->alpha + both * net->beta;
                    reply = push;
                } else {
                    push = fmax(push, ready[b]) + h_cl_collective(net, e, c);
                    reply = fmax(reply, push) + h_cl_collective(net, e, c);
                }
            }
        }
        double step = fmax(reply, compute_s);
        if (exposed) *exposed = step - compute_s;
        return step;
    }
    for (int b = 0; b < nb; b++) {
        end = fmax(end, ready[b]) + h_cl_collective(net, e, bytes[b]);
        total += bytes[b];
    }
    double step = fmax(end, compute_s);
    /* the parameter server in sync mode: a bucket's pushes travel as it is submitted, but the servers
     * answer the pulls only once the step's last push is in (the optimizer waits for every worker's
     * overflow flag), so the replies of the whole model follow: the same bytes the other way */
    if (e->kind == H_PATTERN_PS) step += h_cl_collective(net, e, total);
    if (exposed) *exposed = step - compute_s;
    return step;
}
