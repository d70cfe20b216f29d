/* modecfg.h: each mode's own configuration, built from the parsed command line: the only bridge between
 * h_opts_t and the modes, so a mode reads what it uses and nothing else. */
#ifndef SB_HARNESS_CLI_MODECFG_H
#define SB_HARNESS_CLI_MODECFG_H
#include "harness/cli/opts.h"
#include "harness/modes/modes.h"
#include "harness/modes/explain.h"
#include "harness/modes/gemm.h"
#include "harness/model/host.h"
#include "harness/model/cluster.h"
#include "harness/record/timeline.h"
#include "harness/simulate/simulate.h"

void h_out_of(const h_opts_t *o, h_out_t *out);
void h_engset_of(const h_opts_t *o, h_engset_t *es);
void h_emu_cfg_of(const h_opts_t *o, h_emu_cfg_t *c);
void h_bench_cfg_of(const h_opts_t *o, h_bench_cfg_t *c);
void h_train_cfg_of(const h_opts_t *o, h_train_cfg_t *c);
void h_run_cfg_of(const h_opts_t *o, h_run_cfg_t *c);
void h_explain_cfg_of(const h_opts_t *o, h_explain_cfg_t *c);
void h_gemm_cfg_of(const h_opts_t *o, h_gemm_cfg_t *c);
void h_model_cfg_of(const h_opts_t *o, h_model_cfg_t *c);
void h_model_cluster_cfg_of(const h_opts_t *o, h_model_cluster_cfg_t *c);
void h_model_fc_cfg_of(const h_opts_t *o, h_model_fc_cfg_t *c);
void h_timeline_cfg_of(const h_opts_t *o, h_timeline_cfg_t *c);
void h_simulate_cfg_of(const h_opts_t *o, h_simulate_cfg_t *c);

#endif
