/* test_wire.c: the MessagePack header codec: round trips, and every class of malformed input (short,
 * truncated, oversized, trailing bytes, wrong types, out-of-range values, hostile container sizes,
 * random garbage) rejected with ERR_PROTO and never a crash. */
#include "ps/wire.h"
#include "core/err.h"
#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdint.h>
#include <string.h>

#define NF 12
static const char *const FIELD[NF] = {"magic", "version", "type", "sender", "job", "key", "clock",
                                      "offset", "count", "dtype", "aux", "nframes"};

static wire_hdr_t sample(void)
{
    wire_hdr_t h = {.type = WIRE_PUSH, .sender = 3, .job = 0x1234567890abcdefull, .key = 42,
                    .clock = 7, .offset = 1000, .count = 4096, .dtype = DT_BF16, .aux = -5,
                    .nframes = 2};
    return h;
}

static void assert_same(const wire_hdr_t *a, const wire_hdr_t *b)
{
    cr_assert_eq(a->type, b->type);
    cr_assert_eq(a->sender, b->sender);
    cr_assert_eq(a->job, b->job);
    cr_assert_eq(a->key, b->key);
    cr_assert_eq(a->clock, b->clock);
    cr_assert_eq(a->offset, b->offset);
    cr_assert_eq(a->count, b->count);
    cr_assert_eq(a->dtype, b->dtype);
    cr_assert_eq(a->aux, b->aux);
    cr_assert_eq(a->nframes, b->nframes);
}

static int decode_fails(const void *buf, size_t len)
{
    wire_hdr_t out;
    memset(&out, 0x5a, sizeof out);
    wire_hdr_t before = out;
    int rc = wire_decode(buf, len, &out);
    if (rc != 0) cr_assert_eq(memcmp(&out, &before, sizeof out), 0, "output written on failure");
    return rc == ERR_PROTO;
}

/* ---------------------------------------------------------------- round trips */

Test(wire, round_trip_every_type_and_dtype)
{
    unsigned char buf[WIRE_HDR_MAX];
    for (uint32_t t = 1; t < WIRE_TYPE_MAX; t++)
        for (uint32_t d = 0; d < DT_COUNT; d++) {
            wire_hdr_t h = sample(), out;
            h.type = t;
            h.dtype = d;
            int n = wire_encode(&h, buf, sizeof buf);
            cr_assert_gt(n, 0, "%s", err_detail());
            cr_assert_eq(wire_decode(buf, (size_t)n, &out), 0, "%s", err_detail());
            assert_same(&h, &out);
        }
    cr_assert_str_eq(wire_type_name(WIRE_PARAMS), "params");
    cr_assert_str_eq(wire_type_name(99), "unknown");
}

Test(wire, round_trip_extremes)
{
    unsigned char buf[WIRE_HDR_MAX];
    wire_hdr_t cases[3] = {sample(), sample(), sample()};
    cases[0] = (wire_hdr_t){.type = WIRE_HELLO};                          /* all zero */
    cases[1].sender = UINT32_MAX; cases[1].job = UINT64_MAX; cases[1].key = UINT64_MAX;
    cases[1].clock = UINT64_MAX; cases[1].offset = UINT64_MAX; cases[1].count = UINT64_MAX;
    cases[1].aux = INT32_MIN; cases[1].nframes = UINT32_MAX;
    cases[2].aux = INT32_MAX;
    for (int i = 0; i < 3; i++) {
        wire_hdr_t out;
        int n = wire_encode(&cases[i], buf, sizeof buf);
        cr_assert_gt(n, 0);
        cr_assert_leq(n, WIRE_HDR_MAX);
        cr_assert_eq(wire_decode(buf, (size_t)n, &out), 0, "%s", err_detail());
        assert_same(&cases[i], &out);
    }
}

Test(wire, encode_rejects_invalid_and_small_buffers)
{
    unsigned char buf[WIRE_HDR_MAX];
    wire_hdr_t h = sample();
    h.type = 0;
    cr_assert_eq(wire_encode(&h, buf, sizeof buf), ERR_INVAL);
    h.type = WIRE_TYPE_MAX;
    cr_assert_eq(wire_encode(&h, buf, sizeof buf), ERR_INVAL);
    h = sample();
    h.dtype = DT_COUNT;
    cr_assert_eq(wire_encode(&h, buf, sizeof buf), ERR_INVAL);
    h = sample();
    int n = wire_encode(&h, buf, sizeof buf);
    cr_assert_gt(n, 0);
    for (int cap = 0; cap < n; cap++) {
        memset(buf, 0, sizeof buf);
        cr_assert_eq(wire_encode(&h, buf, (size_t)cap), ERR_RANGE, "cap %d", cap);
        for (size_t i = (size_t)cap; i < sizeof buf; i++) cr_assert_eq(buf[i], 0, "wrote past cap");
    }
    cr_assert_eq(wire_encode(&h, buf, (size_t)n), n);
}

/* ---------------------------------------------------------------- framing errors */

Test(wire, short_truncated_trailing_oversized)
{
    unsigned char buf[WIRE_HDR_MAX + 8];
    wire_hdr_t h = sample();
    h.job = UINT64_MAX;                            /* the longest fields, so truncation hits them */
    int n = wire_encode(&h, buf, WIRE_HDR_MAX);
    cr_assert_gt(n, 0);
    cr_assert(decode_fails(NULL, 0));
    cr_assert(decode_fails(buf, 0));
    for (int len = 1; len < n; len++) cr_assert(decode_fails(buf, (size_t)len), "truncated to %d", len);
    const unsigned char extra[] = {0x00, 0xc0, 0x91, 0xff};
    for (size_t i = 0; i < sizeof extra; i++) {
        buf[n] = extra[i];
        cr_assert(decode_fails(buf, (size_t)n + 1));
        cr_assert(strstr(err_detail(), "trailing"), "%s", err_detail());
    }
    unsigned char big[WIRE_HDR_MAX + 1];
    memcpy(big, buf, (size_t)n);
    memset(big + n, 0, sizeof big - (size_t)n);
    cr_assert(decode_fails(big, sizeof big));
    cr_assert(strstr(err_detail(), "limit"), "%s", err_detail());
}

/* ---------------------------------------------------------------- hand-built messages */

typedef enum { V_OK, V_NIL, V_BOOL, V_STR, V_FLOAT, V_NEG, V_ARRAY, V_MAP, V_BIN, V_EXT, V_BIG, V_NKINDS }
    vkind_t;

/* Pack a header array with nfields entries; field `bad` (if >= 0) gets kind k; vals overrides values. */
static size_t build(unsigned char *out, size_t cap, int nfields, int bad, vkind_t k, const int64_t *vals)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, (size_t)nfields);
    const int64_t def[NF] = {WIRE_MAGIC, WIRE_VERSION, WIRE_PUSH, 1, 9, 2, 3, 0, 16, DT_F32, 0, 1};
    for (int f = 0; f < nfields; f++) {
        int64_t v = f < NF ? (vals ? vals[f] : def[f]) : 0;
        vkind_t kk = f == bad ? k : V_OK;
        switch (kk) {
        case V_OK: if (v < 0) msgpack_pack_int64(&pk, v); else msgpack_pack_uint64(&pk, (uint64_t)v); break;
        case V_NIL: msgpack_pack_nil(&pk); break;
        case V_BOOL: msgpack_pack_true(&pk); break;
        case V_STR: msgpack_pack_str_with_body(&pk, "12", 2); break;
        case V_FLOAT: msgpack_pack_double(&pk, 1.0); break;
        case V_NEG: msgpack_pack_int64(&pk, -1); break;
        case V_ARRAY: msgpack_pack_array(&pk, 1); msgpack_pack_uint8(&pk, 1); break;
        case V_MAP: msgpack_pack_map(&pk, 1); msgpack_pack_uint8(&pk, 1); msgpack_pack_uint8(&pk, 1); break;
        case V_BIN: msgpack_pack_bin_with_body(&pk, "\x01", 1); break;
        case V_EXT: msgpack_pack_ext_with_body(&pk, "\x01", 1, 5); break;
        case V_BIG: msgpack_pack_uint64(&pk, UINT64_MAX); break;
        default: break;
        }
    }
    cr_assert_leq(sb.size, cap);
    memcpy(out, sb.data, sb.size);
    size_t n = sb.size;
    msgpack_sbuffer_destroy(&sb);
    return n;
}

Test(wire, hand_built_valid_message_decodes)
{
    unsigned char buf[WIRE_HDR_MAX];
    size_t n = build(buf, sizeof buf, NF, -1, V_OK, NULL);
    wire_hdr_t out;
    cr_assert_eq(wire_decode(buf, n, &out), 0, "%s", err_detail());
    cr_assert_eq(out.count, 16);
    cr_assert_eq(out.nframes, 1);
}

Test(wire, wrong_type_for_every_field)
{
    unsigned char buf[WIRE_HDR_MAX];
    for (int f = 0; f < NF; f++)
        for (int k = V_NIL; k < V_NKINDS; k++) {
            if (k == V_BIG && f >= 4 && f <= 8) continue;  /* u64 fields: UINT64_MAX is legal */
            if (k == V_NEG && f == 10) continue;           /* aux is signed */
            size_t n = build(buf, sizeof buf, NF, f, (vkind_t)k, NULL);
            cr_assert(decode_fails(buf, n), "field %s kind %d accepted", FIELD[f], k);
            cr_assert(strstr(err_detail(), FIELD[f]) || strstr(err_detail(), "magic"),
                      "field %s kind %d: detail '%s'", FIELD[f], k, err_detail());
        }
}

Test(wire, missing_extra_fields_and_wrong_container)
{
    unsigned char buf[WIRE_HDR_MAX];
    for (int nf = 0; nf < 16; nf++) {
        if (nf == NF) continue;
        size_t n = build(buf, sizeof buf, nf, -1, V_OK, NULL);
        cr_assert(decode_fails(buf, n), "%d fields accepted", nf);
        cr_assert(strstr(err_detail(), "fields"), "%s", err_detail());
    }
    /* the same values as a map, a bare integer, a string */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, NF);
    for (int f = 0; f < NF; f++) {
        msgpack_pack_str_with_body(&pk, FIELD[f], strlen(FIELD[f]));
        msgpack_pack_uint32(&pk, f == 0 ? WIRE_MAGIC : 1);
    }
    cr_assert(decode_fails(sb.data, sb.size));
    msgpack_sbuffer_destroy(&sb);
    const unsigned char one[] = {0x01}, str[] = {0xa2, 'h', 'i'}, nil[] = {0xc0};
    cr_assert(decode_fails(one, 1));
    cr_assert(decode_fails(str, 3));
    cr_assert(decode_fails(nil, 1));
}

Test(wire, out_of_range_values)
{
    unsigned char buf[WIRE_HDR_MAX];
    struct { int f; int64_t v; const char *why; } cases[] = {
        {0, 0x5343, "magic"}, {0, 0, "magic"}, {0, 0x10000 + 0x5342, "magic"},
        {1, 0, "version"}, {1, 2, "version"},
        {2, 0, "type"}, {2, WIRE_TYPE_MAX, "type"}, {2, 0x100000001ll, "type"},
        {3, 0x100000000ll, "sender"}, {3, -1, "sender"},
        {4, -7, "job"}, {8, -1, "count"},
        {9, DT_COUNT, "dtype"}, {9, 255, "dtype"}, {9, -1, "dtype"},
        {10, (int64_t)INT32_MAX + 1, "aux"}, {10, (int64_t)INT32_MIN - 1, "aux"},
        {11, 0x100000000ll, "nframes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t vals[NF] = {WIRE_MAGIC, WIRE_VERSION, WIRE_PUSH, 1, 9, 2, 3, 0, 16, DT_F32, 0, 1};
        vals[cases[i].f] = cases[i].v;
        size_t n = build(buf, sizeof buf, NF, -1, V_OK, vals);
        cr_assert(decode_fails(buf, n), "case %zu (%s = %lld) accepted", i, cases[i].why,
                  (long long)cases[i].v);
        cr_assert(strstr(err_detail(), cases[i].why), "case %zu: '%s'", i, err_detail());
    }
    /* aux at its limits is fine */
    int64_t vals[NF] = {WIRE_MAGIC, WIRE_VERSION, WIRE_ERROR, 1, 9, 2, 3, 0, 16, DT_F32, INT32_MIN, 0};
    size_t n = build(buf, sizeof buf, NF, -1, V_OK, vals);
    wire_hdr_t out;
    cr_assert_eq(wire_decode(buf, n, &out), 0, "%s", err_detail());
    cr_assert_eq(out.aux, INT32_MIN);
}

Test(wire, hostile_container_sizes, .timeout = 10)
{
    /* containers that claim billions of elements must be refused before anything is allocated */
    const unsigned char a32[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    const unsigned char m32[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01};
    const unsigned char s32[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 'x'};
    const unsigned char b32[] = {0xc6, 0x7f, 0xff, 0xff, 0xff};
    const unsigned char e32[] = {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01};
    const unsigned char bad[] = {0xc1};
    cr_assert(decode_fails(a32, sizeof a32));
    cr_assert(strstr(err_detail(), "claims"), "%s", err_detail());   /* refused by the pre-scan */
    cr_assert(decode_fails(m32, sizeof m32));
    cr_assert(decode_fails(s32, sizeof s32));
    cr_assert(decode_fails(b32, sizeof b32));
    cr_assert(decode_fails(e32, sizeof e32));
    cr_assert(decode_fails(bad, sizeof bad));
    /* nested inside a header-shaped array: [magic, version, array32(4G) ...] */
    unsigned char buf[64] = {0x9c, 0xcd, 0x53, 0x42, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff};
    cr_assert(decode_fails(buf, 10));
    cr_assert(decode_fails(buf, sizeof buf));
    /* deep nesting within the size limit */
    unsigned char deep[WIRE_HDR_MAX];
    memset(deep, 0x91, sizeof deep);
    deep[sizeof deep - 1] = 0x01;
    cr_assert(decode_fails(deep, sizeof deep));
}

/* ---------------------------------------------------------------- payload check */

Test(wire, check_payload)
{
    wire_hdr_t h = sample();                       /* 4096 x bf16 */
    cr_assert_eq(wire_check_payload(&h, 8192, 4096), 0);
    cr_assert_eq(wire_check_payload(&h, 8190, 4096), ERR_PROTO);
    cr_assert_eq(wire_check_payload(&h, 16384, 4096), ERR_PROTO);
    cr_assert_eq(wire_check_payload(&h, 8192, 4095), ERR_PROTO);
    cr_assert(strstr(err_detail(), "exceeds"), "%s", err_detail());
    h.dtype = DT_COUNT;
    cr_assert_eq(wire_check_payload(&h, 8192, 4096), ERR_PROTO);
    h = sample();
    h.dtype = DT_F32;
    h.count = 1ull << 62;                          /* count * 4 wraps to 0 in size_t */
    cr_assert_eq(wire_check_payload(&h, 0, SIZE_MAX), ERR_PROTO);
    h.count = 0;
    cr_assert_eq(wire_check_payload(&h, 0, 0), 0);
    cr_assert_eq(wire_check_payload(&h, 4, 10), ERR_PROTO);
}

/* ---------------------------------------------------------------- fuzz */

static uint64_t s_rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    s_rng ^= s_rng << 13; s_rng ^= s_rng >> 7; s_rng ^= s_rng << 17;
    return s_rng;
}

/* Any input: ERR_PROTO, or a header that re-encodes to a decodable equal header. */
static void fuzz_one(const unsigned char *buf, size_t len)
{
    wire_hdr_t out, again;
    int rc = wire_decode(buf, len, &out);
    cr_assert(rc == 0 || rc == ERR_PROTO, "rc %d", rc);
    if (rc == 0) {
        unsigned char enc[WIRE_HDR_MAX];
        int n = wire_encode(&out, enc, sizeof enc);
        cr_assert_gt(n, 0);
        cr_assert_eq(wire_decode(enc, (size_t)n, &again), 0);
        assert_same(&out, &again);
    }
}

Test(wire, fuzz_garbage_never_crashes, .timeout = 30)
{
    unsigned char buf[WIRE_HDR_MAX + 44];
    unsigned char good[WIRE_HDR_MAX];
    wire_hdr_t h = sample();
    int gn = wire_encode(&h, good, sizeof good);
    cr_assert_gt(gn, 0);
    for (int it = 0; it < 12000; it++) {
        size_t len;
        int mode = it % 3;
        if (mode == 0) {                               /* pure random bytes, random length */
            len = rnd() % sizeof buf;
            for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)rnd();
        } else if (mode == 1) {                        /* a valid header with a few bytes changed */
            len = (size_t)gn;
            memcpy(buf, good, len);
            int flips = 1 + (int)(rnd() % 4);
            for (int k = 0; k < flips; k++) buf[rnd() % len] = (unsigned char)rnd();
            if (rnd() % 4 == 0) len = rnd() % (len + 8);
        } else {                                       /* MessagePack-looking: type bytes mostly */
            len = 1 + rnd() % 80;
            static const unsigned char pref[] = {0x9c, 0xdc, 0xdd, 0xde, 0xdf, 0xc4, 0xc5, 0xc6, 0xc7,
                                                 0xc8, 0xc9, 0xd4, 0xd8, 0xd9, 0xda, 0xdb, 0xcf, 0xd3,
                                                 0xcb, 0x80, 0x90, 0xa0, 0xc1, 0xff};
            for (size_t i = 0; i < len; i++)
                buf[i] = rnd() % 2 ? pref[rnd() % sizeof pref] : (unsigned char)rnd();
            buf[0] = 0x9c;
        }
        fuzz_one(buf, len);
    }
}
