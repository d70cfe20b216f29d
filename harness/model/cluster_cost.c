/* cluster_cost.c: the busiest NIC's bytes of an engine configuration from what its declared schedule
 * says (cluster_cost.h; model/cluster.c reads the schedule), and the overlapped step.
 *
 * Ranks are numbered machine by machine (rank r on machine r / G), as the launcher places them; extra
 * ranks (servers) where the layout puts them. A NIC direction's bytes are its machine's transfers to
 * (from) other machines; traffic within a machine is free.
 *  - an allreduce (no owners): the busiest direction over all steps paces the collective, and every step
 *    that moves bytes is a message in series (the ring: 2(P-1)/P n each way and 2(P-1) messages; the
 *    tree: its binary trees' edges that cross machines, n/2 up and n/2 down each). One collective at a
 *    time, bucket after bucket.
 *  - owners (a PS: core/sched.h's sched_t.owners): the pushes (the schedule's SCHED_REDUCE transfers) and
 *    the replies (SCHED_STORE) are two phases, each a message in series per step that moves bytes (a push
 *    and a pull; with machine-local aggregation also the local reduce and broadcast). With loss scaling
 *    (AMP) the engine sends the pulls only after the step's last push (the optimizer needs every worker's
 *    overflow flag): a step is the pushes, bucket by bucket as backward produces them, then the replies
 *    for the whole model. Pipelined (f32 gradients, no loss scaling): a bucket's replies follow its own
 *    pushes, partition by partition. Where pushes and replies travel opposite directions of every NIC
 *    (servers on machines of their own: worker out / server in, then back) the replies run one partition
 *    behind the pushes; where a NIC direction carries pushes and replies at once (servers on the GPU
 *    machines, colocated) a partition costs both phases' bytes on that direction. Pipelined, the
 *    directions of the machines that host owners are slowed by the layout's measured slowdown, else by
 *    the incast law for the remote ranks that push into them. */
#include "harness/model/cluster_cost.h"
#include <math.h>
#include <stdlib.h>

/* The slowdown of the owners' machines' directions (1: none) */
static double s_slow(const h_cl_engine_t *e)
{
    if (!e->pipelined) return 1;
    return e->slow > 0 ? e->slow : h_cl_incast_factor(e->incast, e->fan_in, e->fan_machines, e->incast_fmax);
}

static double s_max2(const double v[2], double slow) { return fmax(v[0], v[1] * slow); }

double h_cl_reply_bytes(const h_cl_net_t *net, const h_cl_engine_t *e, double n)
{
    (void)net;
    return e->owners ? s_max2(e->reply, s_slow(e)) * n : 0;
}

double h_cl_ps_duplex_bytes(const h_cl_net_t *net, const h_cl_engine_t *e, double n)
{
    (void)net;
    return e->owners ? s_max2(e->both, s_slow(e)) * n : 0;
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
    if (e->owners) { /* one phase: the pushes (servers of their own machines: there even on one GPU machine) */
        *messages = e->msgs;
        *nic_bytes = s_max2(e->push, s_slow(e)) * n;
        return;
    }
    if (P > 1) *messages = e->msgs;
    if (N > 1) *nic_bytes = e->nic_per_byte * n;
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
    if (e->owners && e->pipelined) {
        /* pushes bucket by bucket; a bucket's replies follow its pushes. Opposite directions (servers on
         * machines of their own): a second pipeline one partition behind; shared directions: each partition
         * carries both phases' bytes on the busiest direction. */
        double push = 0, reply = 0;
        for (int b = 0; b < nb; b++) {
            /* a bucket travels as partitions: the unit whose replies can follow its pushes */
            for (double left = bytes[b]; left > 0;) {
                double c = e->part_bytes > 0 && left > e->part_bytes ? e->part_bytes : left, msgs, one;
                left -= c;
                h_cl_traffic(net, e, c, &one, &msgs);
                double back = h_cl_reply_bytes(net, e, c), both = h_cl_ps_duplex_bytes(net, e, c);
                if (both > fmax(one, back) * 1.000001) {
                    push = fmax(push, ready[b]) + msgs * net->alpha + both * net->beta;
                    reply = push;
                } else {
                    push = fmax(push, ready[b]) + msgs * net->alpha + one * net->beta;
                    reply = fmax(reply, push) + msgs * net->alpha + back * net->beta;
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
    /* owners (a PS in sync mode), not pipelined: a bucket's pushes travel as it is submitted, but the servers
     * answer only once the step's last push is in (the optimizer waits for every worker's overflow flag), so
     * the replies of the whole model follow */
    if (e->owners) step += e->msgs * net->alpha + h_cl_reply_bytes(net, e, total) * net->beta;
    if (exposed) *exposed = step - compute_s;
    return step;
}
