/* fuzz_beat.c: libFuzzer target for the transport heartbeat's datagram check (core/tp_hb.c, tp_hb_parse:
 * what a rank's heartbeat thread runs on every datagram before it believes a peer alive).
 * Input: a mode byte (bit 0: the job has a secret; bit 1: the zmq role instead of tcp's; bit 2: beats
 * are built under another secret), the receiver's rank and world bytes, then datagrams: a length byte
 * and bytes, or length 255: a beat built by tp_hb_build from a from byte, a to byte, 8 sequence bytes
 * and a flip byte (a bit of the result flipped unless 0xff). Oracle: a datagram is accepted only when it
 * is 60 bytes with this run's magic and nonce, addressed to this rank from another rank of the world,
 * and (with a secret) carries the MAC tp_hb_build gives for its fields; a beat built with those
 * fields and the job's key is accepted with its sender and sequence number; with a secret, a built
 * beat with any bit flipped or another key is refused. */
#include "fuzz/fuzz.h"
#include "core/tp_hb.h"
#include "core/err.h"

#define PREFIX "sb.fuzz.beat"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    fuzz_init();
    (void)fuzz_auth();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size, 0};
    uint8_t mode = fuzz_u8(&in);
    int rank = fuzz_u8(&in), world = 1 + fuzz_u8(&in);
    const auth_t *auth = (mode & 1) ? fuzz_auth() : NULL;
    const char *role = (mode & 2) ? "zmq-beat" : "tcp-beat";
    auth_t other = {.set = 1};
    memset(other.key, 0x5a, sizeof other.key);
    const uint64_t nonce = tp_hb_nonce(PREFIX);
    while (fuzz_left(&in)) {
        uint8_t n = fuzz_u8(&in), b[256] = {0};
        size_t len = 0;
        int built = n == 255, good = 0, flipped = 0;
        uint64_t seq = 0;
        int from = 0;
        if (built) {
            from = fuzz_u8(&in);
            int to = fuzz_u8(&in);
            size_t got;
            const uint8_t *s = fuzz_bytes(&in, 8, &got);
            memcpy(&seq, s, got);
            uint8_t flip = fuzz_u8(&in);
            tp_hb_build(b, nonce, PREFIX, role, (mode & 4) ? &other : auth, from, to, seq);
            len = TP_HB_BYTES;
            if (flip != 0xff) b[(flip >> 3) % TP_HB_BYTES] ^= (uint8_t)(1u << (flip & 7)), flipped = 1;
            good = to == rank && from < world && from != rank && !flipped && !(auth && (mode & 4));
        } else {
            const uint8_t *s = fuzz_bytes(&in, n, &len);
            memcpy(b, s, len);
        }
        int f = -1;
        uint64_t sq = 0;
        int rc = tp_hb_parse(b, len, nonce, PREFIX, role, auth, rank, world, &f, &sq);
        FUZZ_ASSERT(rc == 0 || rc == ERR_PROTO || rc == ERR_AUTH);
        if (rc == 0) {
            uint32_t magic, fr, to;
            uint64_t nn, s;
            memcpy(&magic, b, 4);
            memcpy(&nn, b + 4, 8);
            memcpy(&fr, b + 12, 4);
            memcpy(&to, b + 16, 4);
            memcpy(&s, b + 20, 8);
            FUZZ_ASSERT(len == TP_HB_BYTES && magic == TP_HB_MAGIC && nn == nonce && to == (uint32_t)rank &&
                        fr < (uint32_t)world && fr != (uint32_t)rank && f == (int)fr && sq == s);
            if (auth) {
                uint8_t want[TP_HB_BYTES];
                tp_hb_build(want, nonce, PREFIX, role, auth, (int)fr, rank, s);
                FUZZ_ASSERT(!memcmp(want + 28, b + 28, AUTH_MAC_BYTES));
            }
        }
        if (good) FUZZ_ASSERT(rc == 0 && f == from && sq == seq);
        if (built && auth && (flipped || (mode & 4))) FUZZ_ASSERT(rc != 0);
        if (fuzz_verbose) fprintf(stderr, "beat: %zu bytes%s: rc %d from %d seq %llu\n", len, built ? " (built)" : "", rc,
                                  f, (unsigned long long)sq);
    }
    return 0;
}
