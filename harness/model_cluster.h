/* model_cluster.h: `harness model --model NAME [--device D --nodes N --gpus-per-node G --net inter=RATE
 * ...] [FILE...]`: the cost model of the emulated GPU cluster (clustermodel.h) from the workload's
 * per-layer timing, its buckets and the cluster's links; every engine's predicted speedup from 1 to
 * 1024 GPUs, and predicted against measured for the emulated runs in FILE... Runs in one process. */
#ifndef SB_HARNESS_MODEL_CLUSTER_H
#define SB_HARNESS_MODEL_CLUSTER_H
#include "harness/harness.h"

int h_model_cluster(const h_opts_t *o);

#endif
