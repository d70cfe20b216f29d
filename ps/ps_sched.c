/* ps_sched.c: the parameter server's schedule as data (core/sched.h), sync mode: the buffer's
 * partitions (ps_layout_init, partition k on server k mod S); every worker pushes every partition to its
 * server, which sums it, then answers every worker with the complete partition. Dedicated servers are
 * ranks P .. P + S - 1; colocated, server s is a thread inside worker s (its own worker's push and pull
 * stay inside the process). */
#include "ps/ps.h"
#include "ps/ps_proto.h"
#include "core/sched.h"
#include <stdio.h>

int ps_sched(const void *opts, const sched_env_t *env, size_t count, size_t esz, sched_t *s)
{
    const ps_opts_t *po = opts;
    int P = env->workers, coloc = po && po->colocate;
    int S = coloc ? P : po && po->servers ? po->servers : 1;
    ps_layout_t lay;
    ps_layout_init(&lay, count, esz, po ? po->partition_bytes : 0, S);
    sched_init(s, coloc ? P : P + S, P, count, esz, "ps");
    snprintf(s->about, sizeof s->about,
             "parameter server: %zu partitions of up to %zu elements, partition k on server k mod %d; server s is rank %s",
             lay.nparts, lay.part_elems, S, coloc ? "s (a thread inside worker s: its own worker's traffic stays inside)" : "P + s");
    char name[16];
    for (size_t k = 0; k < lay.nparts; k++) {
        snprintf(name, sizeof name, "p%u", (unsigned)(k % 100000000u));
        sched_piece(s, ps_part_start(&lay, k), ps_part_len(&lay, k), name);
    }
    sched_step(s, "push (every worker sends every partition to its server)");
    for (size_t k = 0; k < lay.nparts; k++) {
        int sr = coloc ? ps_part_owner(&lay, k) : P + ps_part_owner(&lay, k);
        for (int w = 0; w < P; w++) sched_xfer(s, w, sr, (int)k, SCHED_REDUCE);
    }
    sched_step(s, "pull (each server answers every worker with its complete partitions)");
    sched_note(s, "each server sums a partition once every worker's push of it is in, then answers");
    for (size_t k = 0; k < lay.nparts; k++) {
        int sr = coloc ? ps_part_owner(&lay, k) : P + ps_part_owner(&lay, k);
        for (int w = 0; w < P; w++)
            if (w != sr) sched_xfer(s, sr, w, (int)k, SCHED_STORE);
    }
    return sched_done(s);
}
