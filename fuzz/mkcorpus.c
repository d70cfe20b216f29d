/* mkcorpus.c: writes the generated seeds of the fuzz corpora (fuzz/corpus/NAME/seed-*) with the project's
 * own writers (wire_encode, ckpt_write, auth_respond) plus a few edge cases; `make fuzz-corpus` runs it.
 * Regression inputs (fuzz/corpus/NAME/regress-*) are committed by hand and left alone. */
#include "fuzz/fuzz.h"
#include "ps/wire.h"
#include "ps/ps_proto.h"
#include "trainer/ckpt.h"
#include "core/tp_tcp_int.h"
#include "core/tp_hb.h"
#include <errno.h>
#include <sys/stat.h>

static const char *g_root;

typedef struct { uint8_t b[16384]; size_t n; } buf_t;

static void b_put(buf_t *b, const void *p, size_t n)
{
    if (b->n + n > sizeof b->b) abort();
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void b_u8(buf_t *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u32(buf_t *b, uint32_t v) { uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)}; b_put(b, p, 4); }
static void b_be32(buf_t *b, uint32_t v) { uint8_t p[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v}; b_put(b, p, 4); }
static void b_u64(buf_t *b, uint64_t v) { b_u32(b, (uint32_t)v); b_u32(b, (uint32_t)(v >> 32)); }
static void b_str(buf_t *b, const char *s) { b_put(b, s, strlen(s)); }

static void s_save(const char *target, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_root, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) { perror(path); exit(1); }
    snprintf(path, sizeof path, "%s/%s/seed-%s", g_root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) { perror(path); exit(1); }
}
static void s_saveb(const char *target, const char *name, const buf_t *b) { s_save(target, name, b->b, b->n); }

/* ---- wire */
static void s_wire(void)
{
    uint8_t enc[WIRE_HDR_MAX];
    for (uint32_t t = 1; t < WIRE_TYPE_MAX; t++) {
        wire_hdr_t h = {.type = t, .sender = t, .job = 0x1234567890ull, .key = t * 3, .clock = 7, .offset = 1024,
                        .count = 256, .dtype = t % 3, .aux = t == WIRE_ERROR ? -5 : 0, .nframes = t == WIRE_PUSH};
        int n = wire_encode(&h, enc, sizeof enc);
        if (n < 0) abort();
        char name[32];
        snprintf(name, sizeof name, "%s", wire_type_name(t));
        s_save("wire", name, enc, (size_t)n);
        if (t == WIRE_PUSH) {
            s_save("wire", "truncated", enc, (size_t)n - 1);
            enc[n] = 0xc0;
            s_save("wire", "trailing", enc, (size_t)n + 1);
        }
    }
    wire_hdr_t big = {.type = WIRE_DATA, .sender = UINT32_MAX, .job = UINT64_MAX, .key = UINT64_MAX, .clock = UINT64_MAX,
                      .offset = UINT64_MAX, .count = UINT64_MAX, .dtype = 0, .aux = INT32_MIN, .nframes = UINT32_MAX};
    int n = wire_encode(&big, enc, sizeof enc);
    s_save("wire", "maxima", enc, (size_t)n);
    s_save("wire", "map", "\x8c", 1);
    s_save("wire", "huge-array", "\xdd\xff\xff\xff\xff\x01", 6);
    s_save("wire", "bad-byte", "\x9c\xc1", 2);
}

/* ---- jsonl */
static void s_jsonl(void)
{
    const char *lines[][2] = {
        {"result", "{\"mode\":\"bench\",\"engine\":\"ps\",\"world\":2,\"bytes\":4096,\"time_us\":119.248,"
                   "\"ok\":true,\"note\":null,\"ranks_us\":[1.5,2,-3e-2,0],\"git_sha\":\"92deaec50a70\"}\n"},
        {"escapes", "{\"mode\":\"train\",\"s\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u20ac\\ud83d\\ude00\",\"e\":[]}\n"},
        {"file", "{\"mode\":\"a\",\"x\":1}\n\n  \n{\"mode\":\"b\",\"x\":2}\r\n{\"x\":3}\n{\"mode\":\"c\"} trailing\n"},
        {"duplicate", "{\"mode\":\"a\",\"k\":1,\"k\":2}"},
        {"nested", "{\"mode\":\"a\",\"o\":{\"k\":1}}"},
        {"bad-escape", "{\"mode\":\"a\\x\"}"},
        {"surrogate", "{\"mode\":\"\\ud800\\u0041\"}"},
        {"numbers", "{\"a\":-0,\"b\":1e308,\"c\":1e309,\"d\":0.5e-400,\"e\":01,\"f\":-}"},
        {"empty", "{}"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) s_save("jsonl", lines[i][0], lines[i][1], strlen(lines[i][1]));
}

/* ---- ckpt */
static void s_ckpt(void)
{
    char path[] = "/tmp/sbfuzz-ckpt.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    float p[4] = {1, -2, 3.5f, 0}, m[4] = {0.1f, 0.2f, 0.3f, 0.4f}, v[4] = {1e-3f, 2e-3f, 0, 5};
    ckpt_t c = {.step = 20, .applied = 19, .epoch = 1, .offset = 64, .seed = 42, .world = 2, .drop_last = 1,
                .global_batch = 64, .rng = {1, 2, 3, 4}, .amp_scale = 65536.0f, .amp_good = 3, .amp_overflows = 1,
                .optim_kind = 1, .grad_dtype = 0, .count = 4, .params = p, .nopt = 2, .opt = {m, v}};
    snprintf(c.model, sizeof c.model, "mlp:2-2");
    snprintf(c.data, sizeof c.data, "synthetic");
    for (int nopt = 0; nopt <= 2; nopt += 2) {
        c.nopt = nopt;
        if (ckpt_write(path, &c) != 0) abort();
        FILE *f = fopen(path, "rb");
        buf_t b = {.n = 0};
        b_u8(&b, 1);                                /* mode: fix the checksum after mutations */
        b.n += fread(b.b + 1, 1, sizeof b.b - 1, f);
        fclose(f);
        s_saveb("ckpt", nopt ? "adam" : "sgd", &b);
        if (nopt) {
            b.b[0] = 0;
            s_saveb("ckpt", "adam-keep-checksum", &b);
            b.n -= 9;
            s_saveb("ckpt", "truncated", &b);
            b.b[1] = 'X';
            s_saveb("ckpt", "bad-magic", &b);
        }
    }
    unlink(path);
}

/* ---- idx (mode, u16 images length, images, labels) and cifar */
static void s_idx(void)
{
    for (int mode = 0; mode < 3; mode++) {
        buf_t b = {.n = 0}, img = {.n = 0};
        b_be32(&img, 0x803); b_be32(&img, 2); b_be32(&img, 3); b_be32(&img, 3);
        for (int i = 0; i < 18; i++) b_u8(&img, (uint8_t)(i * 14));
        b_u8(&b, (uint8_t)mode);
        b_u8(&b, (uint8_t)img.n); b_u8(&b, 0);
        b_put(&b, img.b, img.n);
        b_be32(&b, 0x801); b_be32(&b, 2); b_u8(&b, 7); b_u8(&b, 0);
        s_saveb("idx", mode == 0 ? "dir" : mode == 1 ? "file" : "no-labels", &b);
        if (mode == 0) {
            b.b[b.n - 1] = 10;
            s_saveb("idx", "bad-label", &b);
            b.b[3] = 0x1f; b.b[4] = 0x8b;
            s_saveb("idx", "gzip", &b);
        }
    }
    buf_t c = {.n = 0};
    b_u8(&c, 3);
    for (int i = 0; i < 3072; i++) b_u8(&c, (uint8_t)(i * 7));
    s_saveb("cifar", "one", &c);
    c.b[0] = 10;
    s_saveb("cifar", "bad-label", &c);
    s_save("cifar", "partial", c.b, 100);
    s_save("cifar", "idx-sniff", "\0\0\x08\x03\0\0\0\x01", 8);
    s_save("cifar", "gzip", "\x1f\x8b\x08\0", 4);
}

/* ---- store: mode byte, then requests of frames (u8 length, 255: u16 follows) */
static void s_frame(buf_t *b, const void *p, size_t n)
{
    if (n < 255) b_u8(b, (uint8_t)n);
    else { b_u8(b, 255); b_u8(b, (uint8_t)n); b_u8(b, (uint8_t)(n >> 8)); }
    b_put(b, p, n);
}
static void s_req(buf_t *b, const char *rid, char op, uint64_t seq, const char *key, const void *val, size_t vlen)
{
    uint8_t sq[8];
    for (int i = 0; i < 8; i++) sq[i] = (uint8_t)(seq >> (8 * i));
    b_u8(b, 5);
    s_frame(b, rid, strlen(rid));
    s_frame(b, &op, 1);
    s_frame(b, sq, 8);
    s_frame(b, key, strlen(key));
    s_frame(b, val, vlen);
}
static void s_hello_val(uint8_t out[8], int rank, int world)
{
    for (int i = 0; i < 4; i++) { out[i] = (uint8_t)(rank >> (8 * i)); out[4 + i] = (uint8_t)(world >> (8 * i)); }
}
static void s_store(void)
{
    uint8_t hv[8 + AUTH_MAC_BYTES], w0[4] = {0}, d5[8] = {5}, dm2[8] = {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    buf_t b = {.n = 0};
    b_u8(&b, 0);
    s_hello_val(hv, 0, 4);
    s_req(&b, "r0", 'H', 1, "fuzzjob", hv, 8);
    s_req(&b, "r0", 'S', 2, "tp/x/sock/0", "127.0.0.1:4000", 14);
    s_req(&b, "r0", 'G', 3, "tp/x/sock/0", w0, 4);
    s_req(&b, "r0", 'G', 4, "missing", w0, 4);
    s_req(&b, "r0", 'A', 5, "ctr", d5, 8);
    s_req(&b, "r0", 'A', 6, "ctr", dm2, 8);
    s_req(&b, "r0", 'D', 7, "tp/x/sock/0", "", 0);
    s_req(&b, "r0", 'J', 8, "", w0, 4);
    s_req(&b, "r0", 'L', 9, "", "", 0);
    s_saveb("store", "session", &b);

    b.n = 0;
    b_u8(&b, 0);
    s_hello_val(hv, 1, 4);
    s_req(&b, "r1", 'S', 1, "early", "v", 1);               /* before HELLO */
    s_req(&b, "r1", 'H', 2, "otherjob", hv, 8);             /* wrong job */
    s_hello_val(hv, 1, 3);
    s_req(&b, "r1", 'H', 3, "fuzzjob", hv, 8);              /* wrong world */
    s_hello_val(hv, 9, 4);
    s_req(&b, "r1", 'H', 4, "fuzzjob", hv, 8);              /* rank out of range */
    s_hello_val(hv, 1, 4);
    s_req(&b, "r1", 'H', 5, "fuzzjob", hv, 8);
    s_req(&b, "r2", 'H', 6, "fuzzjob", hv, 8);              /* the same rank again */
    s_req(&b, "r1", 'H', 7, "fuzzjob", hv, 8);              /* repeated hello */
    s_req(&b, "r1", 'Z', 8, "k", "", 0);                    /* unknown op */
    s_req(&b, "r1", 'A', 9, "notnum", d5, 4);               /* short delta */
    b_u8(&b, 7);                                            /* too many frames */
    for (int i = 0; i < 7; i++) s_frame(&b, "x", 1);
    b_u8(&b, 2);
    s_frame(&b, "r1", 2);
    s_frame(&b, "S", 1);
    s_saveb("store", "errors", &b);

    /* enough keys to grow the server's map (it grows at 2 entries per bucket, 64 buckets) */
    b.n = 0;
    b_u8(&b, 0);
    s_hello_val(hv, 3, 4);
    s_req(&b, "m", 'H', 1, "fuzzjob", hv, 8);
    for (int i = 0; i < 140; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        s_req(&b, "m", 'S', 2 + (uint64_t)i, key, "v", 1);
    }
    s_req(&b, "m", 'G', 200, "k7", w0, 4);
    s_saveb("store", "many-keys", &b);

    /* with the secret: challenge (client nonce), then HELLO with the MAC over both nonces (the server's
     * nonce is zeros under fuzz_init's random source) */
    b.n = 0;
    b_u8(&b, 1);
    uint8_t nc[AUTH_NONCE_BYTES], ns[AUTH_NONCE_BYTES] = {0};
    for (int i = 0; i < AUTH_NONCE_BYTES; i++) nc[i] = (uint8_t)(0x40 + i);
    s_req(&b, "a0", 'C', 1, "fuzzjob", nc, sizeof nc);
    s_hello_val(hv, 2, 4);
    uint8_t ctx[64 + 8];
    size_t jl = strlen("fuzzjob");
    memcpy(ctx, "fuzzjob", jl + 1);
    memcpy(ctx + jl + 1, hv, 8);
    auth_respond(fuzz_auth(), "store-client", nc, ns, ctx, jl + 9, hv + 8);
    s_req(&b, "a0", 'H', 2, "fuzzjob", hv, sizeof hv);
    s_req(&b, "a0", 'S', 3, "k", "v", 1);
    s_req(&b, "a1", 'H', 4, "fuzzjob", hv, 8);              /* no MAC */
    s_saveb("store", "auth", &b);
}

/* ---- tcp: mode, chunk, slot byte, then the stream */
static size_t s_ctx(int from, int to, uint8_t out[128])
{
    size_t n = strlen(TP_TCP_FUZZ_PREFIX);
    memcpy(out, TP_TCP_FUZZ_PREFIX, n + 1);
    uint32_t f = (uint32_t)from, t = (uint32_t)to;
    memcpy(out + n + 1, &f, 4);
    memcpy(out + n + 5, &t, 4);
    return n + 9;
}
static void s_segments(buf_t *b, int bad)
{
    static const size_t lens[] = {0, 5, 16, 1};
    for (size_t i = 0; i < 4; i++) {
        b_u64(b, lens[i]);
        for (size_t k = 0; k < lens[i]; k++) b_u8(b, (uint8_t)(i * 16 + k));
    }
    if (bad == 1) { b_u64(b, 17); b_str(b, "longer than slot!"); }
    if (bad == 2) { b_u64(b, 9); b_str(b, "cut"); }
}
static void s_tcp(void)
{
    uint64_t nonce = 0;
    for (const char *c = TP_TCP_FUZZ_PREFIX; *c; c++) nonce = nonce * 131 + (unsigned char)*c;
    uint8_t ctx[128], nc[AUTH_NONCE_BYTES], mac[AUTH_MAC_BYTES];
    for (int i = 0; i < AUTH_NONCE_BYTES; i++) nc[i] = (uint8_t)(0x80 + i);
    const struct { const char *name; uint8_t mode, chunk; int bad; } acc[] = {
        {"hello", 0, 0, 0}, {"hello-bytewise", 0, 1, 0}, {"hello-chunks", 0, 7, 2}, {"hello-long", 0, 0, 1},
        {"hello-auth", 2, 13, 0},
    };
    for (size_t i = 0; i < sizeof acc / sizeof acc[0]; i++) {
        buf_t b = {.n = 0};
        b_u8(&b, acc[i].mode); b_u8(&b, acc[i].chunk); b_u8(&b, 0);   /* slot byte 0: 16-byte slots */
        b_u32(&b, TP_TCP_HELLO_MAGIC); b_u64(&b, nonce); b_u32(&b, 0); b_u32(&b, 1);
        b_put(&b, nc, sizeof nc);
        auth_respond((acc[i].mode & 2) ? fuzz_auth() : NULL, "tcp-connect", nc, NULL, ctx, s_ctx(0, 1, ctx), mac);
        b_put(&b, mac, sizeof mac);
        s_segments(&b, acc[i].bad);
        s_saveb("tcp", acc[i].name, &b);
    }
    /* we connected to rank 2 with Nc = zeros: its reply Ns and MAC("tcp-accept", Nc, Ns) */
    uint8_t zero[AUTH_NONCE_BYTES] = {0}, ns[AUTH_NONCE_BYTES];
    for (int i = 0; i < AUTH_NONCE_BYTES; i++) ns[i] = (uint8_t)(0x20 + i);
    for (int mode = 1; mode <= 3; mode += 2) {
        buf_t b = {.n = 0};
        b_u8(&b, (uint8_t)mode); b_u8(&b, 5); b_u8(&b, 0);
        b_put(&b, ns, sizeof ns);
        auth_respond((mode & 2) ? fuzz_auth() : NULL, "tcp-accept", zero, ns, ctx, s_ctx(1, 2, ctx), mac);
        b_put(&b, mac, sizeof mac);
        s_segments(&b, 0);
        s_saveb("tcp", mode == 1 ? "reply" : "reply-auth", &b);
    }
    buf_t b = {.n = 0};
    b_u8(&b, 0); b_u8(&b, 0); b_u8(&b, 0);
    b_u32(&b, 0x12345678); b_u64(&b, nonce); b_u32(&b, 0); b_u32(&b, 1);
    b_put(&b, zero, sizeof zero); b_put(&b, zero, sizeof zero);
    s_saveb("tcp", "bad-magic", &b);
}

/* ---- zap: a frame count byte, then frames (u8 length and bytes; 255: the job's client key) */
static void z_frame(buf_t *b, const char *s) { b_u8(b, (uint8_t)strlen(s)); b_str(b, s); }
static void s_zap(void)
{
    buf_t b = {.n = 0};
    b_u8(&b, 7); /* a request ZeroMQ's CURVE handshake makes, with the job's key: accepted */
    z_frame(&b, "1.0"); z_frame(&b, "1"); z_frame(&b, "store"); z_frame(&b, "127.0.0.1"); z_frame(&b, "");
    z_frame(&b, "CURVE"); b_u8(&b, 255);
    s_saveb("zap", "job-key", &b);
    b.n = 0;
    b_u8(&b, 7); /* another client's key: refused */
    z_frame(&b, "1.0"); z_frame(&b, "2"); z_frame(&b, "ps"); z_frame(&b, "10.0.0.9"); z_frame(&b, "id");
    z_frame(&b, "CURVE"); z_frame(&b, "0123456789abcdef0123456789abcdef");
    s_saveb("zap", "other-key", &b);
    b.n = 0;
    b_u8(&b, 3); /* too few frames: answered, refused */
    z_frame(&b, "1.0"); z_frame(&b, "3"); z_frame(&b, "store");
    s_saveb("zap", "short", &b);
}

/* ---- hb: a mode byte, then messages (ps/ps_hb_srv.h, fuzz/fuzz_hb.c): op, type, sender, aux, u16 count,
 * nframes, a frame count, frames (u8 length and bytes; 255 and a role byte: a MAC over the last nonces) */
static void h_msg(buf_t *b, uint8_t op, uint8_t type, uint8_t sender, int8_t aux, uint16_t count, uint8_t nf)
{
    b_u8(b, op); b_u8(b, type); b_u8(b, sender); b_u8(b, (uint8_t)aux);
    b_u8(b, (uint8_t)count); b_u8(b, (uint8_t)(count >> 8)); b_u8(b, nf);
}
static void h_chal(buf_t *b, uint8_t op, uint8_t sender)
{
    h_msg(b, op, WIRE_HELLO, sender, 1, 0, 1);   /* PS_HELLO_CHAL */
    b_u8(b, 1); b_u8(b, 32);
    for (int i = 0; i < 32; i++) b_u8(b, (uint8_t)(0x40 + i));
}
static void h_proof(buf_t *b, uint8_t op, uint8_t sender, uint8_t role)
{
    h_msg(b, op, WIRE_HELLO, sender, 2, 0, 1);   /* PS_HELLO_PROOF */
    b_u8(b, 1); b_u8(b, 255); b_u8(b, role);
}
static void h_beat(buf_t *b, uint8_t op, uint8_t sender, uint16_t ival)
{
    h_msg(b, op, WIRE_HELLO, sender, 4, ival, 0);   /* PS_HELLO_HEARTBEAT */
    b_u8(b, 0);
}
static void s_hb(void)
{
    buf_t b = {.n = 0};
    b_u8(&b, 1 | 4);                                 /* a secret, timeout 6 s */
    for (uint8_t w = 0; w < 3; w++) { h_chal(&b, 0, w); h_proof(&b, 0, w, 0); h_beat(&b, 0, w, 1000); }
    h_beat(&b, 0, 1, 0xfffe);                        /* clamped to the timeout */
    h_beat(&b, 0xc0, 2, 1000);                       /* after its BYE: dropped */
    s_saveb("hb", "auth-session", &b);
    b.n = 0;
    b_u8(&b, 1);                                     /* a secret: wrong roles, a beat before any proof */
    h_beat(&b, 0, 0, 1000);
    h_chal(&b, 0, 0); h_proof(&b, 0, 0, 1);          /* the data connection's client MAC */
    h_chal(&b, 0, 0); h_proof(&b, 0, 0, 2);          /* the server's own MAC reflected */
    h_proof(&b, 0, 0, 0);                            /* a proof without a challenge */
    h_beat(&b, 0, 0, 1000);
    h_chal(&b, 1, 1); h_proof(&b, 1, 1, 1);          /* the data connection proven: not its heartbeats */
    h_beat(&b, 0, 1, 1000);
    s_saveb("hb", "wrong-roles", &b);
    b.n = 0;
    b_u8(&b, 2);                                     /* no secret, timeout 1 ms */
    h_beat(&b, 0, 0, 0); h_beat(&b, 0, 1, 500); h_beat(&b, 2, 0, 1000); h_beat(&b, 0x30, 0, 1000);
    h_msg(&b, 0, WIRE_PUSH, 0, 0, 16, 2); b_u8(&b, 2); b_u8(&b, 0); b_u8(&b, 4); b_str(&b, "abcd");
    h_msg(&b, 8, WIRE_HELLO, 1, 4, 1000, 0); b_u8(&b, 0);             /* truncated */
    h_msg(&b, 0, WIRE_HELLO, 2, 3, 0, 1); b_u8(&b, 1); b_u8(&b, 3); b_str(&b, "abc");
    h_msg(&b, 0, WIRE_HELLO, 2, 1, 0, 1); b_u8(&b, 1); b_u8(&b, 31);  /* a short nonce */
    for (int i = 0; i < 31; i++) b_u8(&b, 0);
    s_saveb("hb", "no-secret", &b);
    b.n = 0;
    b_u8(&b, 1);                                     /* raw header frames and routing ids */
    uint8_t enc[WIRE_HDR_MAX];
    wire_hdr_t h = {.type = WIRE_HELLO, .sender = 0, .job = 0x5eed5eed12345678ull, .count = 1000, .aux = 4};
    int n = wire_encode(&h, enc, sizeof enc);
    if (n < 0) abort();
    unsigned char id[12];
    ps_hb_routing_id(h.job, 0, id);
    b_u8(&b, 4 | 3); b_u8(&b, (uint8_t)n); b_put(&b, enc, (size_t)n); b_put(&b, id, sizeof id); b_u8(&b, 0);
    b_u8(&b, 4 | 0); b_u8(&b, (uint8_t)(n - 1)); b_put(&b, enc, (size_t)n - 1); b_u8(&b, 0);
    s_saveb("hb", "raw-header", &b);
}

/* ---- beat: mode, rank, world byte, then datagrams (length byte and bytes; 255: built from fields) */
static void s_beat_built(buf_t *b, uint8_t from, uint8_t to, uint64_t seq, uint8_t flip)
{
    b_u8(b, 255); b_u8(b, from); b_u8(b, to); b_u64(b, seq); b_u8(b, flip);
}
static void s_beat(void)
{
    static const struct { const char *name; uint8_t mode; } m[] = {{"open", 0}, {"auth", 1}, {"zmq-auth", 3}, {"other-key", 5}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        buf_t b = {.n = 0};
        b_u8(&b, m[i].mode); b_u8(&b, 1); b_u8(&b, 3);          /* rank 1 of 4 */
        s_beat_built(&b, 0, 1, 1, 0xff);
        s_beat_built(&b, 2, 1, 7, 0xff);
        s_beat_built(&b, 2, 1, 8, 0xb3);                          /* a bit of the sequence flipped */
        s_beat_built(&b, 1, 1, 9, 0xff);                          /* from itself */
        s_beat_built(&b, 0, 2, 9, 0xff);                          /* to another rank */
        uint8_t raw[TP_HB_BYTES];                                 /* the same beat as raw bytes */
        tp_hb_build(raw, tp_hb_nonce("sb.fuzz.beat"), "sb.fuzz.beat", (m[i].mode & 2) ? "zmq-beat" : "tcp-beat",
                    (m[i].mode & 1) ? fuzz_auth() : NULL, 3, 1, 12);
        b_u8(&b, TP_HB_BYTES); b_put(&b, raw, sizeof raw);
        b_u8(&b, TP_HB_BYTES - 1); b_put(&b, raw, sizeof raw - 1);  /* one byte short */
        s_saveb("beat", m[i].name, &b);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]); return 2; }
    g_root = argv[1];
    fuzz_init();
    if (mkdir(g_root, 0755) != 0 && errno != EEXIST) { perror(g_root); return 1; }
    s_wire();
    s_jsonl();
    s_ckpt();
    s_idx();
    s_store();
    s_tcp();
    s_zap();
    s_hb();
    s_beat();
    return 0;
}
