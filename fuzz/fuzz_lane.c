/* fuzz_lane.c: libFuzzer target for the PS shared-memory lane's receiver (ps/ps_lane.c): any bytes
 * published as a slot are either rejected (ERR_PROTO, the slot consumed, the lane still usable) or taken
 * as a message whose frames lie inside the slot; and a message carrying the input as its payload comes
 * back frame for frame, held back while a ZeroMQ message sent before it is missing. One lane pair for
 * the whole run. */
#include "fuzz/fuzz.h"
#include "ps/ps_lane.h"
#include "core/err.h"

static ps_lane_t *s_w, *s_s; /* the worker's end (producer of requests) and the server's */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    fuzz_init();
    char name[PS_LANE_NAME_MAX];
    if (ps_lane_create(&s_w, name) < 0 || ps_lane_open(&s_s, name, strlen(name)) < 0) {
        fprintf(stderr, "fuzz_lane: cannot set up a lane: %s\n", err_detail());
        abort();
    }
    ps_lane_unlink(s_w);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned char ident[5] = {0, 1, 2, 3, 4};
    size_t n = size < PS_LANE_SLOT_BYTES ? size : PS_LANE_SLOT_BYTES;
    int idlen = size && (data[0] & 1) ? (int)sizeof ident : 0;
    /* 1. the raw bytes as a slot */
    ps_lane_send_raw(s_w, data, n, 1);
    ps_vmsg_t m;
    int rc = ps_lane_recv(s_s, &m, ident, (size_t)idlen, UINT64_MAX);
    FUZZ_ASSERT(rc == 1 || rc == ERR_PROTO);
    FUZZ_ASSERT(ps_lane_ok(s_s)); /* one bad slot is refused; only a jumping counter breaks the ring */
    if (rc == 1) {
        FUZZ_ASSERT(m.n >= 1 + (idlen ? 1 : 0) && m.n <= PS_VAN_MAX_FRAMES && m.bytes <= PS_LANE_SLOT_BYTES);
        size_t tot = 0;
        for (int i = idlen ? 1 : 0; i < m.n; i++) tot += zmq_msg_size(&m.f[i]);
        FUZZ_ASSERT(tot <= m.bytes);
        ps_van_close_msg(&m);
    }
    FUZZ_ASSERT(ps_lane_recv(s_s, &m, NULL, 0, UINT64_MAX) == 0); /* nothing else was published */
    /* 2. a real message carrying the input as its payload: it must come back as sent */
    wire_hdr_t h;
    memset(&h, 0, sizeof h);
    h.type = WIRE_PUSH;
    h.count = size;
    ps_frame_t fr = {data, size, 0, NULL, NULL};
    uint64_t bytes = 0;
    int wake = 0;
    if (ps_lane_send(s_w, &h, &fr, 1, 7, &bytes, &wake) == 1) {
        FUZZ_ASSERT(ps_lane_recv(s_s, &m, NULL, 0, 6) == 0); /* a ZeroMQ message sent before it is missing */
        FUZZ_ASSERT(ps_lane_recv(s_s, &m, NULL, 0, 7) == 1);
        wire_hdr_t back;
        FUZZ_ASSERT(m.n == 2 && wire_decode(zmq_msg_data(&m.f[0]), zmq_msg_size(&m.f[0]), &back) == 0);
        FUZZ_ASSERT(back.type == WIRE_PUSH && back.count == size);
        FUZZ_ASSERT(zmq_msg_size(&m.f[1]) == size && (!size || !memcmp(zmq_msg_data(&m.f[1]), data, size)));
        ps_van_close_msg(&m);
    } else {
        FUZZ_ASSERT(size > PS_LANE_SLOT_BYTES - 64); /* only a message too long for a slot falls back */
    }
    return 0;
}
