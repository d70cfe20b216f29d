/* fuzz_wire.c: libFuzzer target for the PS wire decoder (ps/wire.c): wire_decode on any bytes; a header
 * it accepts must re-encode and decode to the same fields, and wire_check_payload must agree with it. */
#include "fuzz/fuzz.h"
#include "ps/wire.h"
#include "core/dtype.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    fuzz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wire_hdr_t h, h2;
    memset(&h, 0xa5, sizeof h);
    wire_hdr_t before = h;
    int rc = wire_decode(data, size, &h);
    if (rc < 0) {
        FUZZ_ASSERT(!memcmp(&h, &before, sizeof h));   /* out is written only for a valid header */
        return 0;
    }
    FUZZ_ASSERT(rc == 0 && size <= WIRE_HDR_MAX);
    FUZZ_ASSERT(h.type > 0 && h.type < WIRE_TYPE_MAX && h.dtype < DT_COUNT);
    unsigned char buf[WIRE_HDR_MAX];
    int n = wire_encode(&h, buf, sizeof buf);
    FUZZ_ASSERT(n > 0);
    FUZZ_ASSERT(wire_decode(buf, (size_t)n, &h2) == 0);
    FUZZ_ASSERT(!memcmp(&h, &h2, sizeof h));
    FUZZ_ASSERT(wire_encode(&h, buf, (size_t)n - 1) < 0);   /* does not fit one byte shorter */
    size_t esz = dt_size((dtype_t)h.dtype);
    int ok = wire_check_payload(&h, (size_t)h.count * esz, SIZE_MAX);
    FUZZ_ASSERT(ok == 0 || h.count > SIZE_MAX / esz);
    if (h.count > 0) FUZZ_ASSERT(wire_check_payload(&h, (size_t)h.count * esz, (size_t)h.count - 1) < 0);
    FUZZ_ASSERT(wire_check_payload(&h, (size_t)h.count * esz + 1, SIZE_MAX) < 0);
    (void)wire_type_name(h.type);
    return 0;
}
