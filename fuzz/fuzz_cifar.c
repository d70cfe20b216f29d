/* fuzz_cifar.c: libFuzzer target for the CIFAR-10 binary batch reader (trainer/data.c): the input is
 * one batch file, opened by path (an in-memory file). A set it accepts must gather its records. */
#include "fuzz/fuzz.h"
#include "trainer/data.h"
#include "core/err.h"

#define REC 3073

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    fuzz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dataset_t *d = NULL;
    int rc = dataset_open(&d, fuzz_memfile(0, data, size));
    if (rc < 0) {
        FUZZ_ASSERT(!d);
        FUZZ_ASSERT(rc == ERR_CORRUPT || rc == ERR_IO || rc == ERR_INVAL || rc == ERR_NOMEM);
        return 0;
    }
    FUZZ_ASSERT(d && !strcmp(dataset_name(d), "cifar10") && dataset_classes(d) == 10 && dataset_dim(d) == 3072);
    size_t n = dataset_size(d);
    FUZZ_ASSERT(n > 0 && size == n * REC);
    static float x[3072];
    for (size_t i = 0; i < n; i++) {
        int32_t y;
        dataset_gather(d, &i, 1, x, &y);
        FUZZ_ASSERT(y == data[i * REC] && y <= 9);
        FUZZ_ASSERT((x[3071] > x[0]) == (data[i * REC + 3072] > data[i * REC + 1]));
    }
    dataset_destroy(&d);
    return 0;
}
