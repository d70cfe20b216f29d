/* amp.h: mixed precision as apex amp / torch GradScaler do it: master weights stay f32, the loss is
 * multiplied by a dynamic scale before backward (so small f16 gradients survive), gradients go over
 * the wire in f16 or bf16, and the optimizer unscales them (inv_scale). An overflow (Inf/NaN after the
 * cast or the reduction) skips the step and halves the scale; 2000 clean steps in a row double it.
 * With f32 gradients the scaler is disabled: scale 1, nothing skipped for scale reasons. */
#ifndef SB_TRAINER_AMP_H
#define SB_TRAINER_AMP_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"

typedef struct {
    int      enabled;
    float    scale;            /* current loss scale */
    float    growth, backoff;  /* 2, 0.5 */
    uint32_t growth_interval;  /* 2000 */
    uint32_t good_steps;       /* clean steps since the last change */
    uint64_t overflows;        /* steps skipped so far */
} amp_t;

/* Enabled for f16/bf16 wire gradients: scale 2^16 (apex/GradScaler's initial scale). */
void amp_init(amp_t *self, dtype_t grad_dtype);
static inline float amp_inv_scale(const amp_t *self) { return 1.0f / self->scale; }
/* Record the outcome of a step: overflow -> halve (skip happened); clean -> count, double after
 * growth_interval clean steps. */
void amp_update(amp_t *self, int overflow);
/* Cast a range of f32 gradients to the wire dtype; returns 1 if the result holds Inf/NaN. */
int  amp_to_wire(void *dst, dtype_t dt, const float *src, size_t count);

#endif
