/* report_ceil.c: `harness report`'s ceiling table: each allreduce beside its own transport's ceiling,
 * the same engine and configuration run with op move (the same messages, nothing reduced; see
 * core/dtype.h OP_MOVE), so what the pattern costs and what the transport costs are read apart:
 * efficiency = ceiling time / time (1 = the reduction and protocol cost nothing beyond moving bytes). */
#include "harness/report/report.h"
#include "harness/record/jsonl.h"
#include <stdlib.h>
#include <string.h>

/* The row of the same configuration, world and size as b but with op move, or NULL. */
static const h_rbench_t *s_ceiling_of(const h_rdata_t *d, const h_rbench_t *b)
{
    const char *op = strstr(b->cfg, "op=");
    if (!op || (op != b->cfg && op[-1] != '\n') || !strncmp(op, "op=move\n", 8)) return NULL;
    const char *end = strchr(op, '\n');
    if (!end) return NULL;
    size_t pre = (size_t)(op - b->cfg), post = strlen(end);
    char *want = malloc(pre + 8 + post + 1);
    if (!want) return NULL;
    memcpy(want, b->cfg, pre);
    memcpy(want + pre, "op=move", 7);
    memcpy(want + pre + 7, end, post + 1);
    const h_rbench_t *hit = NULL;
    for (size_t i = 0; i < d->nb && !hit; i++) {
        const h_rbench_t *c = &d->b[i];
        if (c->world == b->world && c->bytes == b->bytes && !strcmp(c->cfg, want)) hit = c;
    }
    free(want);
    return hit;
}

size_t h_report_ceilings(FILE *out, const h_rdata_t *d, int lwid)
{
    size_t n = 0;
    for (size_t i = 0; i < d->nb; i++) {
        const h_rbench_t *b = &d->b[i], *c = s_ceiling_of(d, b);
        if (!c || !(b->time_us > 0) || !(c->time_us > 0)) continue;
        if (n++ == 0) {
            fprintf(out, "#\n# ceilings: each allreduce against its own transport (op move: the same messages, nothing "
                         "reduced); efficiency = ceiling time / time\n");
            fprintf(out, "# %-*s %5s %12s %-12s %10s %12s %10s\n", lwid, "engine", "world", "size(B)", "transport",
                    "time(us)", "ceiling(us)", "efficiency");
        }
        const char *tp = h_jstr((const h_jobj_t *)b->obj, "transport", "-");
        fprintf(out, "  %-*s %5d %12.0f %-12s %10.1f %12.1f %10.2f\n", lwid, b->label, b->world, b->bytes, tp, b->time_us,
                c->time_us, c->time_us / b->time_us);
    }
    return n;
}
