/* amp.c: dynamic loss scaling (apex semantics) and the f32 -> f16/bf16 gradient cast for the wire. */
#include "trainer/amp.h"
#include <float.h>

void amp_init(amp_t *self, dtype_t grad_dtype)
{
    self->enabled = grad_dtype != DT_F32;
    self->scale = self->enabled ? 65536.0f : 1.0f;
    self->growth = 2.0f;
    self->backoff = 0.5f;
    self->growth_interval = 2000;
    self->good_steps = 0;
    self->overflows = 0;
}

void amp_update(amp_t *self, int overflow)
{
    if (overflow) self->overflows++;
    if (!self->enabled) return;
    if (overflow) {
        float s = self->scale * self->backoff;
        self->scale = s >= FLT_MIN ? s : FLT_MIN;
        self->good_steps = 0;
        return;
    }
    if (++self->good_steps >= self->growth_interval) {
        float s = self->scale * self->growth;
        if (s <= FLT_MAX) self->scale = s;
        self->good_steps = 0;
    }
}

int amp_to_wire(void *dst, dtype_t dt, const float *src, size_t count)
{
    dt_convert(dst, dt, src, DT_F32, count);
    return dt_has_nonfinite(dst, count, dt);
}
