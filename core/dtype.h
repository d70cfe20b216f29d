/* dtype.h: element types (f32, f16, bf16), conversions, and the vectorized reduction kernels every
 * engine uses; f16/bf16 are stored as uint16_t and accumulate in f32. */
#ifndef SB_DTYPE_H
#define SB_DTYPE_H
#include <stddef.h>
#include <stdint.h>

typedef enum { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2, DT_COUNT } dtype_t;
/* OP_MOVE: the engine moves every byte its schedule moves and reduces nothing (the result is undefined):
 * the engine's transport ceiling, for `harness bench --ceiling`; an engine that cannot says ERR_INVAL. */
typedef enum { OP_SUM = 0, OP_AVG = 1, OP_MOVE = 2 } redop_t;

size_t      dt_size(dtype_t dt);              /* bytes per element; 0 for an invalid dtype */
const char *dt_name(dtype_t dt);              /* "f32", "f16", "bf16" */
int         dt_parse(const char *s, dtype_t *out);   /* 0 or ERR_INVAL */
const char *op_name(redop_t op);              /* "sum", "avg", "move" */
int         op_parse(const char *s, redop_t *out);

/* Scalar conversions (round to nearest even; NaN/Inf preserved; f16 subnormals handled). */
uint16_t f32_to_f16(float f);
float    f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float    bf16_to_f32(uint16_t h);

/* Array conversions between any two dtypes (same dtype: memcpy). */
void dt_convert(void *dst, dtype_t dst_dt, const void *src, dtype_t src_dt, size_t count);

/* dst[i] = a[i] + b[i] (dst may alias a or b). f16/bf16: each sum computed in f32, rounded once. */
void dt_add(void *dst, const void *a, const void *b, size_t count, dtype_t dt);
/* dst[i] = (a[i] + b[i]) * scale: the last reduction step of an average. */
void dt_add_scale(void *dst, const void *a, const void *b, size_t count, dtype_t dt, float scale);
/* dst[i] *= scale. */
void dt_scale(void *dst, size_t count, dtype_t dt, float scale);
/* dst[i] = sum over k < nsrc of srcs[k][i] (then * scale if scale != 1): one pass over several inputs,
 * accumulating in f32 for half types (for shared-memory reductions that read every rank at once). */
void dt_sum_n(void *dst, const void *const *srcs, int nsrc, size_t count, dtype_t dt, float scale);
/* The same pass as dt_sum_n with no arithmetic (OP_MOVE, the ceiling): each source copied into dst in
 * turn (a source that is dst is skipped), so every source's bytes are read once. */
void dt_move_n(void *dst, const void *const *srcs, int nsrc, size_t count, dtype_t dt);
/* 1 if any element is Inf or NaN (AMP overflow check). */
int  dt_has_nonfinite(const void *buf, size_t count, dtype_t dt);

/* Which kernel build runs: 0 = portable (auto-vectorized for the build's -march), 1 = AVX2 + F16C.
 * Chosen once from the CPU (or SYNCBENCH_DT_ISA=0). dt_set_isa forces a level for tests and benchmarks
 * (-1 or a level the CPU lacks: the best available) and returns the level now in effect. */
int  dt_isa(void);
int  dt_set_isa(int level);

#endif
