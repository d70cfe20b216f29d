/* fuzz_idx.c: libFuzzer target for the MNIST IDX reader (trainer/data.c): an images and a labels file
 * in a private directory, opened by directory or by the images file's name. Input: a mode byte, the
 * images file's length (u16 LE), the images file, the labels file. A set it accepts must gather. */
#include "fuzz/fuzz.h"
#include "trainer/data.h"
#include "core/err.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    fuzz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size, 0};
    uint8_t mode = fuzz_u8(&in);
    size_t il, ll;
    const uint8_t *img = fuzz_bytes(&in, fuzz_u16(&in), &il);
    const uint8_t *lab = fuzz_bytes(&in, fuzz_left(&in), &ll);
    const char *ipath = fuzz_dirfile("train-images-idx3-ubyte", img, il);
    fuzz_dirfile("train-labels-idx1-ubyte", (mode & 2) ? NULL : lab, ll);   /* mode 2: labels missing */
    dataset_t *d = NULL;
    int rc = dataset_open(&d, (mode & 1) ? ipath : fuzz_dir());
    if (rc < 0) {
        FUZZ_ASSERT(!d);
        FUZZ_ASSERT(rc == ERR_CORRUPT || rc == ERR_IO || rc == ERR_INVAL || rc == ERR_NOMEM);
        return 0;
    }
    FUZZ_ASSERT(d && !strcmp(dataset_name(d), "mnist") && dataset_classes(d) == 10);
    size_t n = dataset_size(d), dim = dataset_dim(d);
    FUZZ_ASSERT(n > 0 && dim > 0 && il == 16 + n * dim && ll == 8 + n);
    size_t idx[2] = {0, n - 1};
    float *x = malloc(2 * dim * sizeof(float));
    int32_t y[2];
    FUZZ_ASSERT(x);
    dataset_gather(d, idx, 2, x, y);
    FUZZ_ASSERT(y[0] == lab[8] && y[1] == lab[8 + n - 1] && y[1] >= 0 && y[1] <= 9);
    FUZZ_ASSERT((x[dim - 1] > x[0]) == (img[16 + dim - 1] > img[16]));
    free(x);
    dataset_destroy(&d);
    return 0;
}
