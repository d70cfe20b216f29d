/* host.h: the host cost model's mode, `harness model`: probes this setup for the cost model's alpha, beta and gamma, predicts each
 * engine's allreduce (and train step) beside measured results, extrapolates to P = 1024. */
#ifndef SB_HARNESS_MODEL_HOST_H
#define SB_HARNESS_MODEL_HOST_H
#include "core/comm.h"
#include "harness/record/result.h"

typedef struct {
    int timeout_s;                    /* --timeout */
    const char *net;                  /* --net: the emulated network the probe ran in (NULL: none) */
    int nfiles;                       /* the measured results files to predict */
    char **files;
    h_out_t out;
} h_model_cfg_t;

/* Runs on every rank of the probe world (>= 2 ranks: ranks 0 and 1 ping-pong over the transport; the
 * others only wait). Rank 0 reads the measured results files, prints the tables and, with --json,
 * appends "mode":"model" lines (one "what":"fit" line, then one per prediction). Returns 0 or a
 * negative error code. */
int h_model(const h_model_cfg_t *o, comm_t *comm);

#endif
