/* ps_sched.c: the parameter server's schedule as data (core/sched.h): the buffer's
 * partitions (ps_layout_init, partition k on server k mod S); every worker pushes every partition to its
 * server, which sums it, then answers every worker with the complete partition. Dedicated servers are
 * ranks P .. P + S - 1; colocated, server s is a thread inside worker s (its own worker's push and pull
 * stay inside the process). With --ps-local-agg on machines of G > 1 workers (sched_env_t.gpus_per_node:
 * worker w on machine w / G, its leader the machine's first rank): the machine's workers send every
 * partition to the leader, which sums; the leaders push; the servers answer the leaders; each leader hands
 * the result to its workers (ps_local.c). Colocated, server s is then inside machine s's leader. A dataflow
 * schedule: each partition moves on as soon as it can, as the engine's per-partition rounds do. The same
 * transfers in every mode; async and SSP change only when a server answers (sched_t.stale). */
#include "ps/ps.h"
#include "ps/ps_proto.h"
#include "core/sched.h"
#include <stdio.h>

int ps_sched(const void *opts, const sched_env_t *env, size_t count, size_t esz, sched_t *s)
{
    const ps_opts_t *po = opts;
    int P = env->workers, coloc = po && po->colocate;
    int G = po && po->local_agg && env->gpus_per_node > 1 ? env->gpus_per_node : 1, M = (P + G - 1) / G;
    int S = coloc ? (G > 1 ? M : P) : po && po->servers ? po->servers : 1;
    ps_layout_t lay;
    ps_layout_init(&lay, count, esz, po ? po->partition_bytes : 0, S);
    sched_init(s, coloc ? P : P + S, P, count, esz, "ps");
    s->dataflow = 1; /* a server answers a partition once its pushes are in, while the others still arrive */
    s->owners = 1;   /* partition k's owner is its server, which sums the pushes, updates and answers */
    /* when it answers (ps_server_apply.c): sync, once every worker's push of the round is in; SSP:k, once every
     * worker has pushed the round k before; async, at once (after the asking worker's own push) */
    s->stale = !po || po->mode == PS_SYNC ? 0 : po->mode == PS_ASYNC ? -1 : po->ssp_k;
    if (G > 1)
        snprintf(s->about, sizeof s->about,
                 "parameter server with machine-local aggregation: %d machines of %d workers; the workers of a machine "
                 "reduce at its first rank, which alone pushes and pulls each of %zu partitions (server k mod %d, rank %s), "
                 "then hands it to its workers", M, G, lay.nparts, S, coloc ? "m G: inside machine m's leader" : "P + s");
    else
        snprintf(s->about, sizeof s->about,
                 "parameter server: %zu partitions of up to %zu elements, partition k on server k mod %d; server s is rank %s",
                 lay.nparts, lay.part_elems, S,
                 coloc ? "s (a thread inside worker s: its own worker's traffic stays inside)" : "P + s");
    char name[16];
    for (size_t k = 0; k < lay.nparts; k++) {
        snprintf(name, sizeof name, "p%u", (unsigned)(k % 100000000u));
        sched_piece(s, ps_part_start(&lay, k), ps_part_len(&lay, k), name);
    }
    /* server s's rank; with local aggregation colocated servers live in the leaders (rank s G) */
#define S_SRV(k) (coloc ? ps_part_owner(&lay, k) * G : P + ps_part_owner(&lay, k))
    if (G > 1) {
        sched_step(s, "local reduce (every worker sends every partition to its machine's leader)");
        sched_note(s, "the leader sums its machine's partitions in rank order");
        for (size_t k = 0; k < lay.nparts; k++)
            for (int w = 0; w < P; w++)
                if (w % G) sched_xfer(s, w, w - w % G, (int)k, SCHED_REDUCE);
    }
    sched_step(s, G > 1 ? "push (each machine's leader sends every partition to its server)"
                        : "push (every worker sends every partition to its server)");
    for (size_t k = 0; k < lay.nparts; k++)
        for (int w = 0; w < P; w += G) sched_xfer(s, w, S_SRV(k), (int)k, SCHED_REDUCE);
    sched_step(s, G > 1 ? "pull (each server answers every machine's leader with its complete partitions)"
                        : "pull (each server answers every worker with its complete partitions)");
    sched_note(s, "each server sums a partition once every %s push of it is in, then answers", G > 1 ? "leader's" : "worker's");
    for (size_t k = 0; k < lay.nparts; k++)
        for (int w = 0; w < P; w += G)
            if (w != S_SRV(k)) sched_xfer(s, S_SRV(k), w, (int)k, SCHED_STORE);
    if (G > 1) {
        sched_step(s, "local broadcast (each leader hands every complete partition to its machine's workers)");
        for (size_t k = 0; k < lay.nparts; k++)
            for (int w = 0; w < P; w++)
                if (w % G) sched_xfer(s, w - w % G, w, (int)k, SCHED_STORE);
    }
#undef S_SRV
    return sched_done(s);
}
