/* fuzz_tcp.c: libFuzzer target for the TCP transport's hello and segment framing (core/tp_tcp.c, through
 * core/tp_tcp_int.h: the real accept / reply check / segment reader over an in-process socket pair).
 * Input: a mode byte (bit 0: we connected and read the peer's reply, else we accept its hello; bit 1:
 * the job has a secret), a chunk byte (bytes per write), a slot byte, then the stream. Oracle: what is
 * delivered is exactly the stream's complete segments (8-byte LE length + payload) up to the first one
 * longer than a slot, and without a secret the hello is accepted exactly when its fields are right. */
#include "fuzz/fuzz.h"
#include "core/tp_tcp_int.h"
#include "core/err.h"

#define HELLO_BYTES (20 + AUTH_NONCE_BYTES + AUTH_MAC_BYTES)
#define REPLY_BYTES (AUTH_NONCE_BYTES + AUTH_MAC_BYTES)

typedef struct { const uint8_t *s; size_t len, pos, slot, nseg; } expect_t;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    fuzz_init();
    (void)fuzz_auth();
    return 0;
}

/* The next complete, acceptable segment of the stream: 1 (*len, *payload), or 0. */
static int s_next(const expect_t *e, size_t *len, const uint8_t **payload)
{
    if (e->len - e->pos < 8) return 0;
    uint64_t n;
    memcpy(&n, e->s + e->pos, 8);
    if (n > e->slot || n > e->len - e->pos - 8) return 0;
    *len = (size_t)n;
    *payload = e->s + e->pos + 8;
    return 1;
}

static void s_on_seg(void *arg, const void *buf, size_t len)
{
    expect_t *e = arg;
    size_t want;
    const uint8_t *p;
    FUZZ_ASSERT(s_next(e, &want, &p));
    FUZZ_ASSERT(len == want && (len == 0 || !memcmp(buf, p, len)));
    e->pos += 8 + len;
    e->nseg++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size, 0};
    uint8_t mode = fuzz_u8(&in), chunk = fuzz_u8(&in), slotb = fuzz_u8(&in);
    size_t len;
    const uint8_t *stream = fuzz_bytes(&in, fuzz_left(&in), &len);
    size_t lead = (mode & 1) ? REPLY_BYTES : HELLO_BYTES;
    expect_t e = {stream, len, lead < len ? lead : len, 16u * (1u + slotb % 16u), 0};
    tp_tcp_fuzz_t cfg = {
        .slot = e.slot, .slots = 1 + slotb / 64, .chunk = chunk ? chunk : 4096, .connector = mode & 1,
        .auth = (mode & 2) ? fuzz_auth() : NULL, .on_seg = s_on_seg, .arg = &e,
    };
    int rc = tp_tcp_fuzz_feed(stream, len, &cfg);
    FUZZ_ASSERT(rc != ERR_NOMEM && rc != ERR_SYS);
    if (fuzz_verbose) fprintf(stderr, "tcp: mode %u: accepted %d, %zu segments, rc %d\n", mode, cfg.accepted, e.nseg, rc);
    if (!cfg.accepted) {
        FUZZ_ASSERT(e.nseg == 0);
    } else {
        size_t l;
        const uint8_t *p;
        FUZZ_ASSERT(len >= lead && !s_next(&e, &l, &p));   /* every complete segment was delivered */
    }
    if (!(mode & 1) && !(mode & 2) && len >= HELLO_BYTES) {
        uint32_t magic, from, to;
        uint64_t nonce, want = 0;
        memcpy(&magic, stream, 4);
        memcpy(&nonce, stream + 4, 8);
        memcpy(&from, stream + 12, 4);
        memcpy(&to, stream + 16, 4);
        for (const char *c = TP_TCP_FUZZ_PREFIX; *c; c++) want = want * 131 + (unsigned char)*c;
        int good = magic == TP_TCP_HELLO_MAGIC && nonce == want && from == 0 && to == 1;
        FUZZ_ASSERT(cfg.accepted == good);
    }
    return 0;
}
