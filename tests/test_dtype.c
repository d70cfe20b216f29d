/* test_dtype.c: dtype names, f32/f16/bf16 conversions and the reduction kernels, checked against an
 * independent double-precision reference, for both kernel builds (portable and AVX2+F16C). */
#include "core/dtype.h"
#include "core/err.h"
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- reference */

/* Round x to a binary format with p significand bits and minimum normal exponent emin, nearest-even,
 * with overflow to Inf above maxv. Computed in double: exact for the ranges used here. */
static double ref_round(double x, int p, int emin, double maxv)
{
    if (isnan(x) || isinf(x) || x == 0) return x;
    int e;
    frexp(fabs(x), &e);
    int lead = e - 1 < emin ? emin : e - 1;
    double ulp = ldexp(1.0, lead - (p - 1));
    double r = nearbyint(x / ulp) * ulp;          /* default rounding mode: ties to even */
    if (fabs(r) > maxv) return copysign(INFINITY, x);
    return r;
}
static const double F16_MAX = 65504.0;
#define BF16_MAX ((2.0 - ldexp(1.0, -7)) * ldexp(1.0, 127))
static double ref_to_f16(double x) { return ref_round(x, 11, -14, F16_MAX); }
static double ref_to_bf16(double x) { return ref_round(x, 8, -126, BF16_MAX); }
static double ref_to_f32(double x) { return ref_round(x, 24, -126, FLT_MAX); }
static double ref_to(dtype_t dt, double x)
{
    return dt == DT_F16 ? ref_to_f16(x) : dt == DT_BF16 ? ref_to_bf16(x) : ref_to_f32(x);
}

static double dec_f16(uint16_t h)                 /* independent f16 decoder */
{
    int e = (h >> 10) & 31, m = h & 1023;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0) return s * ldexp(m, -24);
    if (e == 31) return m ? NAN : s * INFINITY;
    return s * ldexp(1024 + m, e - 25);
}
static double dec_bf16(uint16_t h)
{
    int e = (h >> 7) & 255, m = h & 127;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0) return s * ldexp(m, -133);
    if (e == 255) return m ? NAN : s * INFINITY;
    return s * ldexp(128 + m, e - 134);
}
static double get(dtype_t dt, const void *p, size_t i)
{
    if (dt == DT_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == DT_F16 ? dec_f16(h) : dec_bf16(h);
}
/* ulp of the type at magnitude |x| (for tolerances) */
static double ulp_of(dtype_t dt, double x)
{
    int p = dt == DT_F32 ? 24 : dt == DT_F16 ? 11 : 8, emin = dt == DT_F16 ? -14 : -126;
    int e;
    frexp(fabs(x), &e);
    int lead = e - 1 < emin ? emin : e - 1;
    return ldexp(1.0, lead - (p - 1));
}
static int same(double a, double b)               /* equal, same sign of zero, or both NaN */
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    s_rng ^= s_rng << 13; s_rng ^= s_rng >> 7; s_rng ^= s_rng << 17;
    return s_rng;
}
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* A random finite element of dt with magnitude below about 2^10 (f16 subnormals included). */
static void fill(dtype_t dt, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        if (dt == DT_F32) {
            uint32_t e = 100 + (uint32_t)(r % 37);          /* 2^-27 .. 2^9 */
            ((float *)p)[i] = bitsf((uint32_t)((r >> 8) & 0x807fffffu) | (e << 23));
        } else if (dt == DT_F16) {
            uint32_t e = (uint32_t)((r >> 40) % 25);         /* 0 (subnormal) .. 24 */
            ((uint16_t *)p)[i] = (uint16_t)((r & 0x83ffu) | (e << 10));
        } else {
            uint32_t e = 110 + (uint32_t)((r >> 40) % 27);
            ((uint16_t *)p)[i] = (uint16_t)((r & 0x807fu) | (e << 7));
        }
    }
}

static int isa_max(void) { int m = dt_set_isa(-1); return m; }

/* ---------------------------------------------------------------- names */

Test(dtype, names_and_parse)
{
    cr_assert_eq(dt_size(DT_F32), 4);
    cr_assert_eq(dt_size(DT_F16), 2);
    cr_assert_eq(dt_size(DT_BF16), 2);
    cr_assert_eq(dt_size(DT_COUNT), 0);
    cr_assert_str_eq(dt_name(DT_BF16), "bf16");
    dtype_t dt;
    cr_assert_eq(dt_parse("f16", &dt), 0);
    cr_assert_eq(dt, DT_F16);
    cr_assert_eq(dt_parse("bf16", &dt), 0);
    cr_assert_eq(dt, DT_BF16);
    cr_assert_eq(dt_parse("f64", &dt), ERR_INVAL);
    cr_assert(strstr(err_detail(), "f64"));
    redop_t op;
    cr_assert_eq(op_parse("avg", &op), 0);
    cr_assert_eq(op, OP_AVG);
    cr_assert_eq(op_parse("max", &op), ERR_INVAL);
    cr_assert_str_eq(op_name(OP_SUM), "sum");
}

/* ---------------------------------------------------------------- scalar conversions */

Test(dtype, f16_decode_exhaustive)
{
    for (uint32_t h = 0; h < 65536; h++) {
        double want = dec_f16((uint16_t)h);
        float got = f16_to_f32((uint16_t)h);
        cr_assert(same(got, want), "f16 0x%04x: got %a want %a", h, got, want);
        /* every f16 round-trips exactly (NaN stays NaN) */
        uint16_t back = f32_to_f16(got);
        if (isnan(want)) cr_assert((back & 0x7c00) == 0x7c00 && (back & 0x3ff), "NaN 0x%04x", h);
        else cr_assert_eq(back, h, "round trip 0x%04x -> 0x%04x", h, back);
    }
}

Test(dtype, bf16_decode_exhaustive)
{
    for (uint32_t h = 0; h < 65536; h++) {
        double want = dec_bf16((uint16_t)h);
        float got = bf16_to_f32((uint16_t)h);
        cr_assert(same(got, want), "bf16 0x%04x", h);
        uint16_t back = f32_to_bf16(got);
        if (isnan(want)) cr_assert((back & 0x7f80) == 0x7f80 && (back & 0x7f), "NaN 0x%04x", h);
        else cr_assert_eq(back, h);
    }
}

static void check_encode(float f)
{
    double w16 = ref_to_f16(f), w16b = ref_to_bf16(f);
    double g16 = dec_f16(f32_to_f16(f)), gb = dec_bf16(f32_to_bf16(f));
    cr_assert(same(g16, w16), "f16(%a): got %a want %a", f, g16, w16);
    cr_assert(same(gb, w16b), "bf16(%a): got %a want %a", f, gb, w16b);
}

Test(dtype, encode_edge_cases)
{
    const float v[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, -65504.0f, 65519.99f, 65520.0f, 65536.0f,
                       1e6f, -1e6f, FLT_MAX, -FLT_MAX, 0x1p-14f, 0x1p-24f, -0x1p-24f, 0x1p-25f,
                       0x1.000002p-25f, 0x1.8p-24f, 0x1.8p-23f, 0x1p-26f, 0x1p-149f, 0x1p-126f,
                       0x1.ffep-15f, 1.0009765625f, 1.00048828125f, 1.00146484375f, 3.14159265f,
                       INFINITY, -INFINITY, 0x1.fffffep127f, 0x1.ff8p127f, 0x1.ff7fffp127f};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) check_encode(v[i]);

    /* the specific edges, spelled out */
    cr_assert_eq(f32_to_f16(65504.0f), 0x7bff);
    cr_assert_eq(f32_to_f16(65519.0f), 0x7bff);           /* below the halfway point */
    cr_assert_eq(f32_to_f16(65520.0f), 0x7c00);           /* tie with odd max: rounds to Inf */
    cr_assert_eq(f32_to_f16(-1e9f), 0xfc00);
    cr_assert_eq(f32_to_f16(-0.0f), 0x8000);
    cr_assert_eq(f32_to_f16(0x1p-24f), 0x0001);           /* smallest subnormal */
    cr_assert_eq(f32_to_f16(0x1p-25f), 0x0000);           /* tie to even: 0 */
    cr_assert_eq(f32_to_f16(0x1.000002p-25f), 0x0001);    /* just above the tie */
    cr_assert_eq(f32_to_f16(0x1.8p-24f), 0x0002);         /* 1.5 -> 2 (even) */
    cr_assert_eq(f32_to_f16(0x1.4p-23f), 0x0002);         /* 2.5 -> 2 (even) */
    cr_assert_eq(f32_to_f16(1.00048828125f), 0x3c00);     /* 1 + half ulp: tie to even 1.0 */
    cr_assert_eq(f32_to_f16(1.00146484375f), 0x3c02);     /* 1 + 1.5 ulp: tie to even 1+2ulp */
    cr_assert_eq(f32_to_f16(0x1.ffcp-15f), 0x0400);       /* largest subnormal rounds up to min normal */
    cr_assert_eq(f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(f32_to_bf16(bitsf(0x3f808000u)), 0x3f80); /* tie, even stays */
    cr_assert_eq(f32_to_bf16(bitsf(0x3f818000u)), 0x3f82); /* tie, odd rounds up */
    cr_assert_eq(f32_to_bf16(bitsf(0x3f808001u)), 0x3f81);
    cr_assert_eq(f32_to_bf16(FLT_MAX), 0x7f80);           /* overflow to Inf */
    cr_assert_eq(f32_to_bf16(-INFINITY), 0xff80);
    cr_assert_eq(f32_to_bf16(bitsf(0x00000001u)), 0x0000); /* tiny f32 subnormal */
    cr_assert_eq(f32_to_bf16(bitsf(0x00018000u)), 0x0002);

    /* NaN stays NaN (quiet, sign kept), including a signalling NaN whose payload is in low bits */
    const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u, 0xff800001u};
    for (size_t i = 0; i < 5; i++) {
        uint16_t h = f32_to_f16(bitsf(nans[i])), b = f32_to_bf16(bitsf(nans[i]));
        cr_assert(isnan(dec_f16(h)) && isnan(dec_bf16(b)), "NaN 0x%08x -> 0x%04x 0x%04x", nans[i], h, b);
        cr_assert_eq(h >> 15, nans[i] >> 31);
        cr_assert_eq(b >> 15, nans[i] >> 31);
        cr_assert(isnan(f16_to_f32(h)) && isnan(bf16_to_f32(b)));
    }
}

Test(dtype, encode_ties_and_random)
{
    /* every f16 midpoint (ties) and its f32 neighbours, over the whole finite range */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = dec_f16((uint16_t)h), hi = h + 1 < 0x7c00 ? dec_f16((uint16_t)(h + 1)) : 65536.0;
        float mid = (float)((lo + hi) / 2);                 /* exact in f32 */
        check_encode(mid);
        check_encode(-mid);
        check_encode(nextafterf(mid, 0));
        check_encode(nextafterf(mid, INFINITY));
    }
    /* bf16 ties: every exponent, a few mantissas */
    for (uint32_t e = 0; e < 255; e++)
        for (uint32_t m = 0; m < 128; m += 5) {
            uint32_t b = (e << 23) | (m << 16) | 0x8000u;
            check_encode(bitsf(b));
            check_encode(bitsf(b | 0x80000000u));
            check_encode(bitsf(b + 1));
            check_encode(bitsf(b - 1));
        }
    for (int i = 0; i < 300000; i++) {                    /* random bit patterns, all classes */
        float f = bitsf((uint32_t)rnd());
        check_encode(f);
    }
}

/* ---------------------------------------------------------------- array conversion */

Test(dtype, convert_arrays_match_scalar)
{
    const size_t n = 4103;
    float *f = malloc(n * 4), *f2 = malloc(n * 4);
    uint16_t *h = malloc(n * 2), *b = malloc(n * 2), *x = malloc(n * 2);
    for (size_t i = 0; i < n; i++) f[i] = bitsf((uint32_t)rnd());
    f[0] = NAN; f[1] = INFINITY; f[2] = -0.0f; f[3] = 0x1p-24f; f[4] = 65520.0f;
    for (int isa = 0; isa <= isa_max(); isa++) {
        cr_assert_eq(dt_set_isa(isa), isa);
        for (size_t off = 0; off < 3; off++) {
            size_t m = n - off;
            dt_convert(h, DT_F16, f + off, DT_F32, m);
            dt_convert(b, DT_BF16, f + off, DT_F32, m);
            for (size_t i = 0; i < m; i++) {
                cr_assert(same(dec_f16(h[i]), ref_to_f16(f[off + i])), "isa %d f16 at %zu", isa, i);
                cr_assert(same(dec_bf16(b[i]), ref_to_bf16(f[off + i])), "isa %d bf16 at %zu", isa, i);
            }
            dt_convert(f2, DT_F32, h, DT_F16, m);
            for (size_t i = 0; i < m; i++) cr_assert(same(f2[i], dec_f16(h[i])));
            dt_convert(f2, DT_F32, b, DT_BF16, m);
            for (size_t i = 0; i < m; i++) cr_assert(same(f2[i], dec_bf16(b[i])));
            dt_convert(x, DT_BF16, h, DT_F16, m);          /* half -> half through f32 */
            for (size_t i = 0; i < m; i++) cr_assert(same(dec_bf16(x[i]), ref_to_bf16(dec_f16(h[i]))));
            dt_convert(x, DT_F16, b, DT_BF16, m);
            for (size_t i = 0; i < m; i++) cr_assert(same(dec_f16(x[i]), ref_to_f16(dec_bf16(b[i]))));
            dt_convert(f2, DT_F32, f + off, DT_F32, m);    /* same dtype: a copy */
            cr_assert_eq(memcmp(f2, f + off, m * 4), 0);
        }
    }
    dt_set_isa(-1);
    free(f); free(f2); free(h); free(b); free(x);
}

/* ---------------------------------------------------------------- kernels */

static const size_t COUNTS[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 1023, 1024, 1025, 4097, 1000003};
#define NCOUNTS (sizeof COUNTS / sizeof COUNTS[0])
#define PAD 16

/* A buffer of n elements at element offset `off`, with a sentinel tail. */
typedef struct { unsigned char *raw; void *p; size_t esz, n; } buf_t;
static buf_t balloc(dtype_t dt, size_t n, size_t off)
{
    buf_t b = {0};
    b.esz = dt_size(dt);
    b.n = n;
    b.raw = malloc((n + off + PAD) * b.esz + 64);
    memset(b.raw, 0xA5, (n + off + PAD) * b.esz + 64);
    b.p = b.raw + 32 + off * b.esz;                   /* 32-byte base + off elements: misaligned */
    return b;
}
static void bcheck_tail(const buf_t *b)
{
    const unsigned char *t = (const unsigned char *)b->p + b->n * b->esz;
    for (size_t i = 0; i < PAD * b->esz; i++) cr_assert_eq(t[i], 0xA5, "write past the end");
}

/* Compare dst against want[] (exact or within a tolerance per element). */
static void expect(dtype_t dt, const void *dst, const double *want, const double *tol, size_t n,
                   const char *what, int isa)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double g = get(dt, dst, i);
        int ok = tol ? (fabs(g - want[i]) <= tol[i] || same(g, want[i])) : same(g, want[i]);
        if (!ok && !bad++) first = i;
    }
    cr_assert_eq(bad, 0, "%s %s isa %d n %zu: %zu wrong, first at %zu: got %a want %a", what,
                 dt_name(dt), isa, n, bad, first, get(dt, dst, first), want[first]);
}

Test(dtype, add_every_dtype_count_alignment, .timeout = 60)
{
    for (int isa = 0; isa <= isa_max(); isa++) {
        dt_set_isa(isa);
        for (int d = 0; d < DT_COUNT; d++) {
            dtype_t dt = (dtype_t)d;
            for (size_t c = 0; c < NCOUNTS; c++) {
                size_t n = COUNTS[c], off = c % 4;
                buf_t a = balloc(dt, n, off), b = balloc(dt, n, (off + 1) % 4), o = balloc(dt, n, 3 - off);
                fill(dt, a.p, n);
                fill(dt, b.p, n);
                double *want = malloc((n + 1) * sizeof *want), *tol = malloc((n + 1) * sizeof *tol);
                /* dst = a + b: correctly rounded (one rounding), exactly the reference */
                for (size_t i = 0; i < n; i++) want[i] = ref_to(dt, get(dt, a.p, i) + get(dt, b.p, i));
                dt_add(o.p, a.p, b.p, n, dt);
                expect(dt, o.p, want, NULL, n, "add", isa);
                bcheck_tail(&o);
                /* in place, both sides */
                memcpy(o.p, a.p, n * a.esz);
                dt_add(o.p, o.p, b.p, n, dt);
                expect(dt, o.p, want, NULL, n, "add dst=a", isa);
                memcpy(o.p, b.p, n * a.esz);
                dt_add(o.p, a.p, o.p, n, dt);
                expect(dt, o.p, want, NULL, n, "add dst=b", isa);
                /* dst = a = b */
                for (size_t i = 0; i < n; i++) want[i] = ref_to(dt, 2 * get(dt, a.p, i));
                memcpy(o.p, a.p, n * a.esz);
                dt_add(o.p, o.p, o.p, n, dt);
                expect(dt, o.p, want, NULL, n, "add dst=a=b", isa);
                bcheck_tail(&o);

                /* add_scale: two roundings in f32 then one to the type */
                const float s = 0.3f;
                for (size_t i = 0; i < n; i++) {
                    double x = get(dt, a.p, i), y = get(dt, b.p, i);
                    want[i] = (x + y) * s;
                    tol[i] = ulp_of(dt, want[i]) * (dt == DT_F32 ? 1.0 : 0.5) +
                             2 * ldexp(fabs(x) + fabs(y), -24) + ldexp(1.0, -149);
                }
                dt_add_scale(o.p, a.p, b.p, n, dt, s);
                expect(dt, o.p, want, tol, n, "add_scale", isa);
                memcpy(o.p, a.p, n * a.esz);
                dt_add_scale(o.p, o.p, b.p, n, dt, s);
                expect(dt, o.p, want, tol, n, "add_scale dst=a", isa);
                memcpy(o.p, b.p, n * a.esz);
                dt_add_scale(o.p, a.p, o.p, n, dt, s);
                expect(dt, o.p, want, tol, n, "add_scale dst=b", isa);
                for (size_t i = 0; i < n; i++) {
                    double x = get(dt, a.p, i);
                    want[i] = 2 * x * s;
                    tol[i] = ulp_of(dt, want[i]) * (dt == DT_F32 ? 1.0 : 0.5) +
                             4 * ldexp(fabs(x), -24) + ldexp(1.0, -149);
                }
                memcpy(o.p, a.p, n * a.esz);
                dt_add_scale(o.p, o.p, o.p, n, dt, s);
                expect(dt, o.p, want, tol, n, "add_scale dst=a=b", isa);
                bcheck_tail(&o);

                /* scale */
                for (size_t i = 0; i < n; i++) {
                    want[i] = ref_to(dt, get(dt, a.p, i) * (double)s);
                    tol[i] = ulp_of(dt, want[i]) + ldexp(fabs(want[i]), -23);
                }
                memcpy(o.p, a.p, n * a.esz);
                dt_scale(o.p, n, dt, s);
                expect(dt, o.p, want, tol, n, "scale", isa);
                bcheck_tail(&o);
                if (dt == DT_F32)                         /* f32 scale is one rounding: exact */
                    expect(dt, o.p, want, NULL, n, "scale exact", isa);
                free(want); free(tol);
                free(a.raw); free(b.raw); free(o.raw);
            }
        }
    }
    dt_set_isa(-1);
}

Test(dtype, sum_n_one_to_eight_inputs, .timeout = 60)
{
    const size_t counts[] = {0, 1, 7, 9, 1025, 3001, 100003};
    for (int isa = 0; isa <= isa_max(); isa++) {
        dt_set_isa(isa);
        for (int d = 0; d < DT_COUNT; d++) {
            dtype_t dt = (dtype_t)d;
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                size_t n = counts[c];
                for (int k = 1; k <= 8; k++) {
                    buf_t in[8], o = balloc(dt, n, (size_t)k % 3);
                    const void *srcs[8];
                    for (int j = 0; j < k; j++) {
                        in[j] = balloc(dt, n, (size_t)j % 4);
                        fill(dt, in[j].p, n);
                        srcs[j] = in[j].p;
                    }
                    double *want = malloc((n + 1) * sizeof *want), *tol = malloc((n + 1) * sizeof *tol);
                    for (int sc = 0; sc < 2; sc++) {
                        float s = sc ? 0.125f : 1.0f;
                        for (size_t i = 0; i < n; i++) {
                            double acc = 0, mag = 0;
                            for (int j = 0; j < k; j++) {
                                acc += get(dt, srcs[j], i);
                                mag += fabs(get(dt, srcs[j], i));
                            }
                            want[i] = acc * s;
                            tol[i] = (dt == DT_F32 ? 0.0 : 0.5 * ulp_of(dt, want[i])) +
                                     (k + 1) * ldexp(mag * s, -24) + ldexp(1.0, -149);
                        }
                        dt_sum_n(o.p, srcs, k, n, dt, s);
                        expect(dt, o.p, want, tol, n, "sum_n", isa);
                        bcheck_tail(&o);
                        /* sum into the first input (dst aliases srcs[0]) */
                        buf_t keep = balloc(dt, n, 0);
                        memcpy(keep.p, in[0].p, n * keep.esz);
                        dt_sum_n(in[0].p, srcs, k, n, dt, s);
                        expect(dt, in[0].p, want, tol, n, "sum_n dst=src0", isa);
                        memcpy(in[0].p, keep.p, n * keep.esz);
                        free(keep.raw);
                    }
                    free(want); free(tol);
                    for (int j = 0; j < k; j++) free(in[j].raw);
                    free(o.raw);
                }
            }
        }
    }
    dt_set_isa(-1);
}

Test(dtype, sum_n_exact_two_inputs_matches_add)
{
    /* with two inputs and scale 1, sum_n is exactly dt_add (same rounding) */
    const size_t n = 5000;
    for (int d = 0; d < DT_COUNT; d++) {
        dtype_t dt = (dtype_t)d;
        buf_t a = balloc(dt, n, 1), b = balloc(dt, n, 2), o1 = balloc(dt, n, 0), o2 = balloc(dt, n, 3);
        fill(dt, a.p, n);
        fill(dt, b.p, n);
        const void *srcs[2] = {a.p, b.p};
        dt_sum_n(o1.p, srcs, 2, n, dt, 1.0f);
        dt_add(o2.p, a.p, b.p, n, dt);
        cr_assert_eq(memcmp(o1.p, o2.p, n * a.esz), 0, "%s", dt_name(dt));
        free(a.raw); free(b.raw); free(o1.raw); free(o2.raw);
    }
}

Test(dtype, specials_overflow_nan_inf)
{
    for (int isa = 0; isa <= isa_max(); isa++) {
        dt_set_isa(isa);
        /* f16: 60000 + 60000 overflows to Inf; Inf + -Inf = NaN; NaN propagates; x + -x = +0 */
        uint16_t a[9] = {f32_to_f16(60000.f), 0x7c00, 0x7c00, 0x7e00, f32_to_f16(1.5f), 0x8000,
                         0x0001, f32_to_f16(-60000.f), 0x0400};
        uint16_t b[9] = {f32_to_f16(60000.f), 0xfc00, f32_to_f16(1.f), f32_to_f16(2.f),
                         f32_to_f16(-1.5f), 0x8000, 0x0001, f32_to_f16(-60000.f), 0x8001};
        uint16_t o[9];
        dt_add(o, a, b, 9, DT_F16);
        cr_assert_eq(o[0], 0x7c00, "isa %d: overflow gave 0x%04x", isa, o[0]);
        cr_assert(isnan(dec_f16(o[1])));
        cr_assert_eq(o[2], 0x7c00);
        cr_assert(isnan(dec_f16(o[3])));
        cr_assert_eq(o[4], 0x0000);                       /* +0 */
        cr_assert_eq(o[5], 0x8000);                       /* -0 + -0 = -0 */
        cr_assert_eq(o[6], 0x0002);                       /* subnormal + subnormal, exact */
        cr_assert_eq(o[7], 0xfc00);
        cr_assert_eq(o[8], 0x03ff);                       /* min normal - min subnormal */
        cr_assert_eq(dt_has_nonfinite(o, 9, DT_F16), 1);
        cr_assert_eq(dt_has_nonfinite(o + 4, 3, DT_F16), 0);

        uint16_t bb[3] = {f32_to_bf16(3e38f), 0x7fc0, f32_to_bf16(1.0f)};
        uint16_t bo[3];
        dt_add(bo, bb, bb, 3, DT_BF16);
        cr_assert_eq(bo[0], 0x7f80);
        cr_assert(isnan(dec_bf16(bo[1])));
        cr_assert_eq(bo[2], 0x4000);

        float fa[3] = {FLT_MAX, INFINITY, NAN}, fo[3];
        dt_add(fo, fa, fa, 3, DT_F32);
        cr_assert(isinf(fo[0]) && isinf(fo[1]) && isnan(fo[2]));
        dt_scale(fa, 1, DT_F32, 2.0f);
        cr_assert(isinf(fa[0]));
    }
    dt_set_isa(-1);
}

Test(dtype, has_nonfinite_every_position)
{
    const size_t n = 9001;
    for (int isa = 0; isa <= isa_max(); isa++) {
        dt_set_isa(isa);
        for (int d = 0; d < DT_COUNT; d++) {
            dtype_t dt = (dtype_t)d;
            buf_t b = balloc(dt, n, 1);
            fill(dt, b.p, n);
            cr_assert_eq(dt_has_nonfinite(b.p, n, dt), 0);
            cr_assert_eq(dt_has_nonfinite(b.p, 0, dt), 0);
            const size_t pos[] = {0, 1, 7, 4095, 4096, 8191, n - 1};
            for (size_t j = 0; j < sizeof pos / sizeof pos[0]; j++)
                for (int kind = 0; kind < 3; kind++) {    /* +Inf, -Inf, NaN */
                    unsigned char save[4];
                    unsigned char *e = (unsigned char *)b.p + pos[j] * b.esz;
                    memcpy(save, e, b.esz);
                    if (dt == DT_F32) {
                        float v = kind == 0 ? INFINITY : kind == 1 ? -INFINITY : NAN;
                        memcpy(e, &v, 4);
                    } else {
                        uint16_t inf = dt == DT_F16 ? 0x7c00 : 0x7f80;
                        uint16_t v = kind == 0 ? inf : kind == 1 ? (uint16_t)(inf | 0x8000) : (uint16_t)(inf | 1);
                        memcpy(e, &v, 2);
                    }
                    cr_assert_eq(dt_has_nonfinite(b.p, n, dt), 1, "%s pos %zu kind %d", dt_name(dt), pos[j], kind);
                    cr_assert_eq(dt_has_nonfinite(b.p, pos[j], dt), 0);
                    memcpy(e, save, b.esz);
                }
            /* the largest finite values are finite */
            float fm = FLT_MAX;
            uint16_t hm = dt == DT_F16 ? 0x7bff : 0x7f7f;
            if (dt == DT_F32) memcpy(b.p, &fm, 4); else memcpy(b.p, &hm, 2);
            cr_assert_eq(dt_has_nonfinite(b.p, n, dt), 0);
            free(b.raw);
        }
    }
    dt_set_isa(-1);
}

Test(dtype, isa_levels_bit_identical)
{
    /* the portable and AVX2+F16C kernels produce the same bits on finite data */
    if (isa_max() < 1) cr_skip_test("CPU lacks AVX2+F16C: only the portable kernels exist");
    const size_t n = 20011;
    for (int d = 0; d < DT_COUNT; d++) {
        dtype_t dt = (dtype_t)d;
        size_t esz = dt_size(dt);
        unsigned char *a = malloc(n * esz), *b = malloc(n * esz), *o0 = malloc(n * esz), *o1 = malloc(n * esz);
        fill(dt, a, n);
        fill(dt, b, n);
        const void *srcs[3] = {a, b, a};
        for (int op = 0; op < 4; op++) {
            unsigned char *o[2] = {o0, o1};
            for (int isa = 0; isa < 2; isa++) {
                dt_set_isa(isa);
                memcpy(o[isa], a, n * esz);
                if (op == 0) dt_add(o[isa], a, b, n, dt);
                else if (op == 1) dt_add_scale(o[isa], a, b, n, dt, 0.7f);
                else if (op == 2) dt_scale(o[isa], n, dt, 1.3f);
                else dt_sum_n(o[isa], srcs, 3, n, dt, 0.25f);
            }
            cr_assert_eq(memcmp(o0, o1, n * esz), 0, "%s op %d", dt_name(dt), op);
        }
        free(a); free(b); free(o0); free(o1);
    }
    dt_set_isa(-1);
    (void)fbits;
}
