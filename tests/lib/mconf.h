/* mconf.h: the cost model's engine configurations for tests (harness/model/conf.h): a registry layout's, or
 * dedicated servers on K machines of their own (one each), their traffic read from the declared schedule. */
#ifndef SB_TESTS_MCONF_H
#define SB_TESTS_MCONF_H
#include <criterion/criterion.h>
#include <stdio.h>
#include "harness/model/conf.h"

/* the traffic of layout label on N x G (the caller sets the calibration's fields) */
static inline h_cl_engine_t t_layout(const char *label, int N, int G)
{
    h_mc_conf_t c;
    h_cl_engine_t e;
    cr_assert_eq(h_mc_conf_find(label, &c), 0, "no layout %s", label);
    cr_assert_eq(h_mc_traffic(&c, N, G, &e, NULL), 0, "%s on %dx%d", label, N, G);
    return e;
}

/* one PS server on each of K machines of their own, on N x G */
static inline h_cl_engine_t t_servers(int K, int N, int G)
{
    h_mc_conf_t c = {.layout = NULL, .servers = K, .server_nodes = K, .row = H_MC_OWN_ROW + K};
    snprintf(c.label, sizeof c.label, "test-ps-K=%d", K);
    snprintf(c.engine, sizeof c.engine, "ps");
    snprintf(c.run_label, sizeof c.run_label, "ps-sync-servers%d", K);
    h_cl_engine_t e;
    cr_assert_eq(h_mc_traffic(&c, N, G, &e, NULL), 0, "K = %d on %dx%d", K, N, G);
    return e;
}
#endif
