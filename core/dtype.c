/* dtype.c: element types, f32/f16/bf16 conversions and the reduction kernels on the allreduce hot path.
 *
 * Design: every kernel works in f32. f32 arrays go straight to small loops written for the
 * auto-vectorizer (restrict pointers, no branches; in-place calls get their own in-place loop so the
 * compiler never has to fall back to scalar code for a possible overlap). Half types (f16, bf16) are
 * processed in blocks of BLK elements: convert a block of each input to f32 on the stack (L1-resident),
 * run the f32 loop, convert the block back (one rounding per output element for dt_add). Every loop
 * exists twice: a portable build (-march=x86-64-v2, SSE4.2) and an AVX2+F16C build selected at run time
 * with __builtin_cpu_supports; the half<->f32 conversions use F16C (vcvtph2ps / vcvtps2ph) and AVX2
 * integer rounding for bf16 there, and exact scalar bit manipulation in the portable build. Both builds
 * give bit-identical results (NaN payloads aside). */
#include "core/dtype.h"
#include "core/err.h"
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SB_X86 1
#endif

enum { BLK = 1024 };   /* elements per half-type block: 4 KiB of f32 per operand */

/* ---------------------------------------------------------------- names */

size_t dt_size(dtype_t dt)
{
    switch (dt) {
    case DT_F32: return 4;
    case DT_F16: return 2;
    case DT_BF16: return 2;
    default: return 0;
    }
}

const char *dt_name(dtype_t dt)
{
    switch (dt) {
    case DT_F32: return "f32";
    case DT_F16: return "f16";
    case DT_BF16: return "bf16";
    default: return "?";
    }
}

int dt_parse(const char *s, dtype_t *out)
{
    if (!s || !out) return err_set(ERR_INVAL, "dt_parse: NULL argument");
    if (!strcmp(s, "f32") || !strcmp(s, "fp32") || !strcmp(s, "float32")) *out = DT_F32;
    else if (!strcmp(s, "f16") || !strcmp(s, "fp16") || !strcmp(s, "float16")) *out = DT_F16;
    else if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16")) *out = DT_BF16;
    else return err_set(ERR_INVAL, "unknown dtype '%s' (expected f32, f16 or bf16)", s);
    return 0;
}

const char *op_name(redop_t op)
{
    switch (op) {
    case OP_SUM: return "sum";
    case OP_AVG: return "avg";
    case OP_MOVE: return "move";
    default: return "?";
    }
}

int op_parse(const char *s, redop_t *out)
{
    if (!s || !out) return err_set(ERR_INVAL, "op_parse: NULL argument");
    if (!strcmp(s, "sum")) *out = OP_SUM;
    else if (!strcmp(s, "avg") || !strcmp(s, "mean")) *out = OP_AVG;
    else if (!strcmp(s, "move")) *out = OP_MOVE;
    else return err_set(ERR_INVAL, "unknown reduction op '%s' (expected sum, avg or move)", s);
    return 0;
}

/* ---------------------------------------------------------------- scalar conversions */

static inline uint32_t s_fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float s_bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t f32_to_f16(float f)
{
    uint32_t x = s_fbits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {                      /* Inf, or NaN made quiet with its top payload bits */
        if (ax == 0x7f800000u) return sign | 0x7c00u;
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 (halfway past 65504) rounds to Inf */
    if (ax < 0x38800000u) {                       /* below 2^-14: f16 subnormal or zero */
        uint32_t e = ax >> 23, shift = 126u - e;  /* result in units of 2^-24 = m >> shift */
        if (shift > 24) return sign;              /* < 2^-25: rounds to zero */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);              /* q == 0x400 is the smallest normal: still right */
    }
    uint32_t r = ax - (112u << 23);               /* rebias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);               /* round to nearest even on the 13 dropped bits */
    return (uint16_t)(sign | (r >> 13));
}

float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 0x1p-24f;            /* exact: zero or subnormal */
        return s_bitsf(s_fbits(v) | sign);
    }
    if (e == 31) return s_bitsf(sign | 0x7f800000u | (m << 13));
    return s_bitsf(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t f32_to_bf16(float f)
{
    uint32_t x = s_fbits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);             /* RNE; overflow carries into Inf correctly */
    return (uint16_t)(x >> 16);
}

float bf16_to_f32(uint16_t h) { return s_bitsf((uint32_t)h << 16); }

/* ---------------------------------------------------------------- kernel tables */

typedef struct {
    void (*add)(float *restrict d, const float *restrict a, const float *restrict b, size_t n);
    void (*add_ip)(float *restrict d, const float *restrict b, size_t n);          /* d += b */
    void (*add_scale)(float *restrict d, const float *restrict a, const float *restrict b, size_t n,
                      float s);
    void (*add_scale_ip)(float *restrict d, const float *restrict b, size_t n, float s);
    void (*scale)(float *restrict d, size_t n, float s);
    void (*scale_to)(float *restrict d, const float *restrict a, size_t n, float s);
    int  (*nonfinite_f32)(const float *restrict a, size_t n);
    int  (*nonfinite_u16)(const uint16_t *restrict a, size_t n, uint16_t expmask);
    void (*h2f)(float *restrict d, const uint16_t *restrict s, size_t n);
    void (*f2h)(uint16_t *restrict d, const float *restrict s, size_t n);
    void (*b2f)(float *restrict d, const uint16_t *restrict s, size_t n);
    void (*f2b)(uint16_t *restrict d, const float *restrict s, size_t n);
} s_kern_t;

/* The f32 loops, instantiated once per target. */
#define SB_F32_LOOPS(SFX, ATTR)                                                                     \
    ATTR static void s_add##SFX(float *restrict d, const float *restrict a, const float *restrict b,  \
                                size_t n)                                                           \
    { for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i]; }                                          \
    ATTR static void s_add_ip##SFX(float *restrict d, const float *restrict b, size_t n)            \
    { for (size_t i = 0; i < n; i++) d[i] += b[i]; }                                                \
    ATTR static void s_add_scale##SFX(float *restrict d, const float *restrict a,                   \
                                      const float *restrict b, size_t n, float s)                   \
    { for (size_t i = 0; i < n; i++) d[i] = (a[i] + b[i]) * s; }                                    \
    ATTR static void s_add_scale_ip##SFX(float *restrict d, const float *restrict b, size_t n,      \
                                         float s)                                                   \
    { for (size_t i = 0; i < n; i++) d[i] = (d[i] + b[i]) * s; }                                    \
    ATTR static void s_scale##SFX(float *restrict d, size_t n, float s)                             \
    { for (size_t i = 0; i < n; i++) d[i] *= s; }                                                   \
    ATTR static void s_scale_to##SFX(float *restrict d, const float *restrict a, size_t n, float s) \
    { for (size_t i = 0; i < n; i++) d[i] = a[i] * s; }                                             \
    ATTR static int s_nonfinite_f32##SFX(const float *restrict a, size_t n)                         \
    {                                                                                               \
        for (size_t i = 0; i < n; i += 4096) {                                                      \
            size_t m = n - i < 4096 ? n - i : 4096;                                                 \
            int bad = 0;                                                                            \
            for (size_t j = 0; j < m; j++) bad |= !(fabsf(a[i + j]) <= FLT_MAX);                    \
            if (bad) return 1;                                                                      \
        }                                                                                           \
        return 0;                                                                                   \
    }                                                                                               \
    ATTR static int s_nonfinite_u16##SFX(const uint16_t *restrict a, size_t n, uint16_t em)         \
    {                                                                                               \
        for (size_t i = 0; i < n; i += 4096) {                                                      \
            size_t m = n - i < 4096 ? n - i : 4096;                                                 \
            int bad = 0;                                                                            \
            for (size_t j = 0; j < m; j++) bad |= (a[i + j] & em) == em;                            \
            if (bad) return 1;                                                                      \
        }                                                                                           \
        return 0;                                                                                   \
    }

SB_F32_LOOPS(_gen, )

static void s_h2f_gen(float *restrict d, const uint16_t *restrict s, size_t n)
{ for (size_t i = 0; i < n; i++) d[i] = f16_to_f32(s[i]); }
static void s_f2h_gen(uint16_t *restrict d, const float *restrict s, size_t n)
{ for (size_t i = 0; i < n; i++) d[i] = f32_to_f16(s[i]); }
static void s_b2f_gen(float *restrict d, const uint16_t *restrict s, size_t n)
{ for (size_t i = 0; i < n; i++) d[i] = bf16_to_f32(s[i]); }
static void s_f2b_gen(uint16_t *restrict d, const float *restrict s, size_t n)
{ for (size_t i = 0; i < n; i++) d[i] = f32_to_bf16(s[i]); }

static const s_kern_t s_kern_gen = {
    s_add_gen, s_add_ip_gen, s_add_scale_gen, s_add_scale_ip_gen, s_scale_gen, s_scale_to_gen,
    s_nonfinite_f32_gen, s_nonfinite_u16_gen, s_h2f_gen, s_f2h_gen, s_b2f_gen, s_f2b_gen,
};

#ifdef SB_X86
#define SB_AVX2 __attribute__((target("avx2,f16c")))
SB_F32_LOOPS(_avx2, SB_AVX2)

SB_AVX2 static void s_h2f_avx2(float *restrict d, const uint16_t *restrict s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    if (i < n) {                                   /* tail through a padded vector */
        uint16_t t[8] = {0};
        float o[8];
        memcpy(t, s + i, (n - i) * 2);
        _mm256_storeu_ps(o, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t)));
        memcpy(d + i, o, (n - i) * 4);
    }
}

SB_AVX2 static void s_f2h_avx2(uint16_t *restrict d, const float *restrict s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        float t[8] = {0};
        uint16_t o[8];
        memcpy(t, s + i, (n - i) * 4);
        _mm_storeu_si128((__m128i *)o, _mm256_cvtps_ph(_mm256_loadu_ps(t), _MM_FROUND_TO_NEAREST_INT));
        memcpy(d + i, o, (n - i) * 2);
    }
}

SB_AVX2 static inline __m256 s_b2f8(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

SB_AVX2 static inline __m128i s_f2b8(__m256 v)
{
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i qnan = _mm256_set1_epi32(0x40);
    __m256i x = _mm256_castps_si256(v);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(x, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, qnan), nan);
    /* every lane holds a value <= 0xffff, so the unsigned-saturating pack is exact */
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

SB_AVX2 static void s_b2f_avx2(float *restrict d, const uint16_t *restrict s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, s_b2f8(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = bf16_to_f32(s[i]);
}

SB_AVX2 static void s_f2b_avx2(uint16_t *restrict d, const float *restrict s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), s_f2b8(_mm256_loadu_ps(s + i)));
    if (i < n) {
        float t[8] = {0};
        uint16_t o[8];
        memcpy(t, s + i, (n - i) * 4);
        _mm_storeu_si128((__m128i *)o, s_f2b8(_mm256_loadu_ps(t)));
        memcpy(d + i, o, (n - i) * 2);
    }
}

static const s_kern_t s_kern_avx2 = {
    s_add_avx2, s_add_ip_avx2, s_add_scale_avx2, s_add_scale_ip_avx2, s_scale_avx2, s_scale_to_avx2,
    s_nonfinite_f32_avx2, s_nonfinite_u16_avx2, s_h2f_avx2, s_f2h_avx2, s_b2f_avx2, s_f2b_avx2,
};
#endif

/* ---------------------------------------------------------------- dispatch */

static atomic_int s_isa = -1;     /* -1: not chosen yet */

static int s_best_isa(void)
{
#ifdef SB_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return 1;
#endif
    return 0;
}

int dt_isa(void)
{
    int v = atomic_load_explicit(&s_isa, memory_order_relaxed);
    if (v < 0) {
        const char *env = getenv("SYNCBENCH_DT_ISA");   /* "0" forces the portable kernels */
        int best = s_best_isa();
        v = (env && env[0] == '0') ? 0 : best;
        atomic_store_explicit(&s_isa, v, memory_order_relaxed);
    }
    return v;
}

int dt_set_isa(int level)
{
    int best = s_best_isa();
    int v = (level < 0 || level > best) ? best : level;
    atomic_store_explicit(&s_isa, v, memory_order_relaxed);
    return v;
}

static inline const s_kern_t *s_k(void)
{
#ifdef SB_X86
    if (dt_isa() == 1) return &s_kern_avx2;
#endif
    return &s_kern_gen;
}

static inline void s_to_f32(const s_kern_t *k, float *d, const void *s, dtype_t dt, size_t n)
{
    if (dt == DT_F16) k->h2f(d, s, n);
    else if (dt == DT_BF16) k->b2f(d, s, n);
    else memcpy(d, s, n * 4);
}

static inline void s_from_f32(const s_kern_t *k, void *d, const float *s, dtype_t dt, size_t n)
{
    if (dt == DT_F16) k->f2h(d, s, n);
    else if (dt == DT_BF16) k->f2b(d, s, n);
    else memcpy(d, s, n * 4);
}

static inline int s_half(dtype_t dt) { return dt == DT_F16 || dt == DT_BF16; }

/* ---------------------------------------------------------------- array conversion */

void dt_convert(void *dst, dtype_t dst_dt, const void *src, dtype_t src_dt, size_t count)
{
    size_t dsz = dt_size(dst_dt), ssz = dt_size(src_dt);
    if (!count || !dsz || !ssz) return;
    if (dst_dt == src_dt) {
        if (dst != src) memmove(dst, src, count * dsz);
        return;
    }
    const s_kern_t *k = s_k();
    if (src_dt == DT_F32) { s_from_f32(k, dst, src, dst_dt, count); return; }
    if (dst_dt == DT_F32) { s_to_f32(k, dst, src, src_dt, count); return; }
    float t[BLK];                                  /* half -> half through f32 (exact) */
    for (size_t i = 0; i < count; i += BLK) {
        size_t m = count - i < BLK ? count - i : BLK;
        s_to_f32(k, t, (const uint16_t *)src + i, src_dt, m);
        s_from_f32(k, (uint16_t *)dst + i, t, dst_dt, m);
    }
}

/* ---------------------------------------------------------------- reduction kernels */

/* f32 dst = (a + b) [* s], choosing the loop that matches the aliasing. */
static void s_add_f32(const s_kern_t *k, float *d, const float *a, const float *b, size_t n,
                      int scaled, float s)
{
    if (d == a && d == b) {                        /* a + a == 2a exactly */
        if (scaled) { k->scale(d, n, 2.0f); k->scale(d, n, s); }
        else k->scale(d, n, 2.0f);
        return;
    }
    if (d == a || d == b) {
        const float *o = d == a ? b : a;
        if (scaled) k->add_scale_ip(d, o, n, s);
        else k->add_ip(d, o, n);
        return;
    }
    if (scaled) k->add_scale(d, a, b, n, s);
    else k->add(d, a, b, n);
}

static void s_binop(void *dst, const void *a, const void *b, size_t count, dtype_t dt, int scaled,
                    float s)
{
    const s_kern_t *k = s_k();
    if (dt == DT_F32) { s_add_f32(k, dst, a, b, count, scaled, s); return; }
    if (!s_half(dt)) return;
    float ta[BLK], tb[BLK];
    for (size_t i = 0; i < count; i += BLK) {
        size_t m = count - i < BLK ? count - i : BLK;
        s_to_f32(k, ta, (const uint16_t *)a + i, dt, m);
        s_to_f32(k, tb, (const uint16_t *)b + i, dt, m);
        if (scaled) k->add_scale_ip(ta, tb, m, s);
        else k->add_ip(ta, tb, m);
        s_from_f32(k, (uint16_t *)dst + i, ta, dt, m);
    }
}

void dt_add(void *dst, const void *a, const void *b, size_t count, dtype_t dt)
{
    s_binop(dst, a, b, count, dt, 0, 1.0f);
}

void dt_add_scale(void *dst, const void *a, const void *b, size_t count, dtype_t dt, float scale)
{
    s_binop(dst, a, b, count, dt, 1, scale);
}

void dt_scale(void *dst, size_t count, dtype_t dt, float scale)
{
    const s_kern_t *k = s_k();
    if (dt == DT_F32) { k->scale(dst, count, scale); return; }
    if (!s_half(dt)) return;
    float t[BLK];
    for (size_t i = 0; i < count; i += BLK) {
        size_t m = count - i < BLK ? count - i : BLK;
        s_to_f32(k, t, (uint16_t *)dst + i, dt, m);
        k->scale(t, m, scale);
        s_from_f32(k, (uint16_t *)dst + i, t, dt, m);
    }
}

void dt_sum_n(void *dst, const void *const *srcs, int nsrc, size_t count, dtype_t dt, float scale)
{
    size_t esz = dt_size(dt);
    if (!esz || !count) return;
    if (nsrc <= 0) { memset(dst, 0, count * esz); return; }   /* the empty sum (+0 in every dtype) */
    const s_kern_t *k = s_k();
    if (dt == DT_F32 && nsrc <= 2) {               /* no accumulator needed */
        if (nsrc == 2) {
            s_add_f32(k, dst, srcs[0], srcs[1], count, scale != 1.0f, scale);
        } else if (scale != 1.0f) {
            if (dst == srcs[0]) k->scale(dst, count, scale);
            else k->scale_to(dst, srcs[0], count, scale);
        } else if (dst != srcs[0]) {
            memcpy(dst, srcs[0], count * 4);
        }
        return;
    }
    /* One pass over all inputs, a block at a time: acc = src0 + src1 + ... in f32, then scale, store.
     * dst may be one of the inputs: a block of dst is written only after all its inputs were read. */
    float acc[BLK], t[BLK];
    for (size_t i = 0; i < count; i += BLK) {
        size_t m = count - i < BLK ? count - i : BLK;
        if (dt == DT_F32) {
            const float *const *f = (const float *const *)srcs;
            k->add(acc, f[0] + i, f[1] + i, m);      /* nsrc >= 3 here */
            for (int j = 2; j < nsrc; j++) k->add_ip(acc, f[j] + i, m);
            if (scale != 1.0f) k->scale_to((float *)dst + i, acc, m, scale);
            else memcpy((float *)dst + i, acc, m * 4);
        } else {
            s_to_f32(k, acc, (const uint16_t *)srcs[0] + i, dt, m);
            for (int j = 1; j < nsrc; j++) {
                s_to_f32(k, t, (const uint16_t *)srcs[j] + i, dt, m);
                k->add_ip(acc, t, m);
            }
            if (scale != 1.0f) k->scale(acc, m, scale);
            s_from_f32(k, (uint16_t *)dst + i, acc, dt, m);
        }
    }
}

int dt_has_nonfinite(const void *buf, size_t count, dtype_t dt)
{
    if (!count) return 0;
    const s_kern_t *k = s_k();
    switch (dt) {
    case DT_F32: return k->nonfinite_f32(buf, count);
    case DT_F16: return k->nonfinite_u16(buf, count, 0x7c00u);
    case DT_BF16: return k->nonfinite_u16(buf, count, 0x7f80u);
    default: return 0;
    }
}

void dt_move_n(void *dst, const void *const *srcs, int nsrc, size_t count, dtype_t dt)
{
    size_t bytes = count * dt_size(dt);
    for (int k = 0; k < nsrc; k++)
        if (srcs[k] != dst && bytes) memmove(dst, srcs[k], bytes);
}
