/* api_int.h: what the files of libsyncbench's public API (include/syncbench.h) share: the API's own
 * engine table and spec parser (spec.c), the thread-local error detail (comm.c), and the objects. */
#ifndef SB_API_INT_H
#define SB_API_INT_H
#include "include/syncbench.h"
#include "core/comm.h"
#include "core/engine.h"

/* A parsed engine spec ("ps:servers=2,colocate"): the engine, its option blob (opts_size bytes, owned)
 * and the API's own options. */
typedef struct {
    const engine_ops_t *ops;
    void *opts;
    int check;                 /* "check": workers verify count/dtype/op before every collective */
} api_spec_t;

/* Parse spec into out (0, or ERR_INVAL with an err_set detail naming the engines or options there are). */
int  api_spec_parse(const char *spec, api_spec_t *out);
void api_spec_free(api_spec_t *s);
/* "ring, tree, ps": the API's engines for messages. */
const char *api_engine_names(void);

/* Record code's detail (core's err_detail, else the code's text) as this thread's sb_last_error; returns
 * code (0 clears nothing). api_fail_text sets a given text. */
int  api_fail(int code);
int  api_fail_text(int code, const char *text);

struct sb_comm {
    comm_t *comm;
    int failed;                /* a collective failed on an engine of this communicator: leave without meeting */
    int has_engine;
};

#endif
