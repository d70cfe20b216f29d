/* fuzz_zap.c: libFuzzer target for the ZAP handler that admits CURVE clients (core/zsec.c): every request
 * ZeroMQ's handshake hands it, through a REQ socket on the context's inproc ZAP endpoint. Input: a frame
 * count byte, then per frame a length byte and the bytes, a frame whose length byte is 255 being the job's
 * client key for the domain frame sent (so the fuzzer reaches the accepting path). Oracle: every request is
 * answered (the handler never stops serving), with 6 frames: "1.0", the request id, and "200" exactly when
 * the request is 7 frames, version "1.0", a domain of 1 to 31 bytes without NUL, mechanism "CURVE" and the
 * 32-byte client key derived from the job secret for that domain; "400" otherwise. */
#include "fuzz/fuzz.h"
#include <zmq.h>
#include "core/zsec.h"

static void *s_ctx, *s_req;
static zsec_t *s_zap;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    fuzz_init();
    log_set_level(LOG_ERROR); /* the refusals' warnings */
    s_ctx = zmq_ctx_new();
    if (!s_ctx || zsec_open(&s_zap, s_ctx, fuzz_auth(), "fuzz") < 0 || !s_zap) abort();
    s_req = zmq_socket(s_ctx, ZMQ_REQ);
    int tmo = 5000, zero = 0;
    zmq_setsockopt(s_req, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(s_req, ZMQ_SNDTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(s_req, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(s_req, "inproc://zeromq.zap.01") != 0) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size, 0};
    int n = 1 + fuzz_u8(&in) % 9;
    uint8_t fr[9][64];
    size_t fl[9];
    unsigned char pk[32], sk[32];
    for (int i = 0; i < n; i++) {
        uint8_t l = fuzz_u8(&in);
        if (l == 255 && i > 2) { /* the job's key for the domain frame */
            char dom[65];
            snprintf(dom, sizeof dom, "%.*s", (int)fl[2], (const char *)fr[2]);
            zsec_keypair(fuzz_auth(), dom, "client", pk, sk);
            memcpy(fr[i], pk, 32);
            fl[i] = 32;
            continue;
        }
        size_t got;
        const uint8_t *b = fuzz_bytes(&in, l % 64, &got);
        memcpy(fr[i], b, got);
        fl[i] = got;
    }
    for (int i = 0; i < n; i++) FUZZ_ASSERT(zmq_send(s_req, fr[i], fl[i], i + 1 < n ? ZMQ_SNDMORE : 0) == (int)fl[i]);
    /* the reply */
    uint8_t rep[8][64];
    size_t rl[8];
    int k = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        FUZZ_ASSERT(zmq_msg_recv(&m, s_req, 0) >= 0); /* answered within 5 s */
        more = zmq_msg_more(&m);
        if (k < 8) {
            rl[k] = zmq_msg_size(&m) < 64 ? zmq_msg_size(&m) : 64;
            memcpy(rep[k], zmq_msg_data(&m), rl[k]);
        }
        k++;
        zmq_msg_close(&m);
    }
    FUZZ_ASSERT(k == 6);
    FUZZ_ASSERT(rl[0] == 3 && !memcmp(rep[0], "1.0", 3));
    size_t idl = n > 1 ? fl[1] : 0;
    FUZZ_ASSERT(rl[1] == idl && (idl == 0 || !memcmp(rep[1], fr[1], idl)));
    int domain_ok = n > 2 && fl[2] > 0 && fl[2] < 32 && !memchr(fr[2], 0, fl[2]);
    int want = 0;
    if (n == 7 && domain_ok && fl[0] == 3 && !memcmp(fr[0], "1.0", 3) && fl[5] == 5 && !memcmp(fr[5], "CURVE", 5) &&
        fl[6] == 32) {
        char dom[32];
        snprintf(dom, sizeof dom, "%.*s", (int)fl[2], (const char *)fr[2]);
        zsec_keypair(fuzz_auth(), dom, "client", pk, sk);
        want = !memcmp(pk, fr[6], 32);
    }
    FUZZ_ASSERT(rl[2] == 3 && !memcmp(rep[2], want ? "200" : "400", 3));
    return 0;
}
