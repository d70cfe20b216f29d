/* engine.c: the engine contract's small shared helpers (named counters in engine_stats_t). */
#include "core/engine.h"
#include <string.h>

uint64_t engine_counter(const engine_stats_t *st, const char *name)
{
    for (int i = 0; st && name && i < st->ncounters && i < ENGINE_MAX_COUNTERS; i++)
        if (st->counters[i].name && !strcmp(st->counters[i].name, name)) return st->counters[i].value;
    return 0;
}

void engine_counter_add(engine_stats_t *st, const char *name, uint64_t value)
{
    if (!st || st->ncounters < 0 || st->ncounters >= ENGINE_MAX_COUNTERS) return;
    st->counters[st->ncounters].name = name;
    st->counters[st->ncounters].value = value;
    st->ncounters++;
}
