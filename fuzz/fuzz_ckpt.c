/* fuzz_ckpt.c: libFuzzer target for the checkpoint reader (trainer/ckpt.c ckpt_read) over an in-memory
 * file. Input: one mode byte, then the file. Mode bit 0 rewrites the trailing checksum to match the
 * contents (as ckpt_write chains it), so mutations reach past the checksum check; what is accepted must
 * be a consistent checkpoint, what is refused must leave nothing allocated. */
#include "fuzz/fuzz.h"
#include "trainer/ckpt.h"
#include "core/err.h"

#define HDR_BYTES 336          /* sizeof the on-disk header (ckpt.c s_hdr_t; checked against header_bytes) */
#define HDR_COUNT 320          /* offset of count (u64) */
#define HDR_NOPT 328           /* offset of nopt (u32) */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    fuzz_init();
    return 0;
}

/* The checksum ckpt_write would have stored for this header and payload (when the size fits it). */
static void s_fix_hash(uint8_t *d, size_t size)
{
    if (size < HDR_BYTES + 8) return;
    uint64_t count;
    uint32_t nopt;
    memcpy(&count, d + HDR_COUNT, 8);
    memcpy(&nopt, d + HDR_NOPT, 4);
    uint64_t h = ckpt_hash(d, HDR_BYTES, 0);
    size_t off = HDR_BYTES, end = size - 8;
    if (count && count <= (end - off) / 4)
        for (uint32_t k = 0; k <= nopt && k <= CKPT_MAX_OPT && off + count * 4 <= end; k++) {
            h = ckpt_hash(d + off, count * 4, h);
            off += count * 4;
        }
    memcpy(d + end, &h, 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t n = size - 1;
    uint8_t *file = malloc(n ? n : 1);
    if (!file) return 0;
    memcpy(file, data + 1, n);
    if (data[0] & 1) s_fix_hash(file, n);
    const char *path = fuzz_memfile(0, file, n);
    ckpt_t c;
    memset(&c, 0x5a, sizeof c);
    int rc = ckpt_read(path, &c);
    if (fuzz_verbose) fprintf(stderr, "ckpt: mode %u: rc %d\n", data[0], rc);
    if (rc == 0) {
        uint32_t hb;
        memcpy(&hb, file + 12, 4);
        FUZZ_ASSERT(hb == HDR_BYTES);
        FUZZ_ASSERT(c.count > 0 && c.params && c.nopt >= 0 && c.nopt <= CKPT_MAX_OPT);
        FUZZ_ASSERT(n == HDR_BYTES + (size_t)(1 + c.nopt) * c.count * sizeof(float) + 8);
        FUZZ_ASSERT(memchr(c.model, 0, sizeof c.model) && memchr(c.data, 0, sizeof c.data));
        for (int k = 0; k < c.nopt; k++) FUZZ_ASSERT(c.opt[k]);
        FUZZ_ASSERT(!memcmp(c.params, file + HDR_BYTES, c.count * sizeof(float)));
        ckpt_free(&c);
    } else {
        FUZZ_ASSERT(rc == ERR_CORRUPT || rc == ERR_IO || rc == ERR_NOMEM);
        FUZZ_ASSERT(!c.params);
        for (int k = 0; k < CKPT_MAX_OPT; k++) FUZZ_ASSERT(!c.opt[k]);
    }
    free(file);
    return 0;
}
