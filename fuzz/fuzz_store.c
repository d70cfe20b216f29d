/* fuzz_store.c: libFuzzer target for the store protocol (core/store_zmq.c): the server's request
 * validation and handlers, fed a sequence of requests without sockets (core/store_zmq_int.h).
 * Input: a mode byte (bit 0: the job has a secret), then requests: a frame count byte, and per frame a
 * length byte (255: a u16 LE length follows) and its bytes; frame 0 is the sender's routing id. */
#include "fuzz/fuzz.h"
#include "core/store_zmq_int.h"

#define WORLD 4
#define JOB "fuzzjob"
#define MAX_REQ 1024

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
    struct server *s = NULL;
    if (store_zmq_srv_new(&s, WORLD, JOB, (mode & 1) ? fuzz_auth() : NULL) < 0) return 0;
    for (int r = 0; r < MAX_REQ && fuzz_left(&in); r++) {
        int nf = fuzz_u8(&in) % 8;
        const void *frames[8];
        size_t lens[8];
        for (int i = 0; i < nf; i++) {
            size_t want = fuzz_u8(&in);
            if (want == 255) want = fuzz_u16(&in);
            frames[i] = fuzz_bytes(&in, want, &lens[i]);
        }
        store_zmq_srv_feed(s, frames, lens, nf);
        FUZZ_ASSERT(store_zmq_srv_joined(s) >= 0 && store_zmq_srv_joined(s) <= WORLD);
    }
    if (fuzz_verbose) fprintf(stderr, "store: mode %u: %d joined, %zu keys\n", mode, store_zmq_srv_joined(s), store_zmq_srv_keys(s));
    store_zmq_srv_destroy(&s);
    FUZZ_ASSERT(!s);
    return 0;
}
