/* data.h: training sets for the trainer: a synthetic, learnable default generated from the seed (a
 * fixed random teacher MLP labels Gaussian inputs; 784 features, 10 classes unless asked otherwise),
 * MNIST IDX files and CIFAR-10 binary batches. Missing or malformed files give a clear error. */
#ifndef SB_TRAINER_DATA_H
#define SB_TRAINER_DATA_H
#include <stddef.h>
#include <stdint.h>

typedef struct dataset dataset_t;

/* Synthetic teacher task: n samples of dim features, classes labels, fully determined by seed. */
int dataset_synthetic(dataset_t **self_p, size_t n, size_t dim, size_t classes, uint64_t seed);
/* From a path:
 *  - a directory holding MNIST (train-images-idx3-ubyte + train-labels-idx1-ubyte, also with '.'
 *    instead of the last '-') or CIFAR-10 binary (data_batch_1.bin ... data_batch_5.bin);
 *  - an IDX images file (its labels file found by replacing "images-idx3" with "labels-idx1");
 *  - a CIFAR-10 binary batch file (records of 1 label byte + 3072 pixel bytes).
 * Pixels become (v / 255 - mean) / std (MNIST 0.1307 / 0.3081; CIFAR 0.5 / 0.25). */
int dataset_open(dataset_t **self_p, const char *path);
void dataset_destroy(dataset_t **self_p);

size_t      dataset_size(const dataset_t *self);
size_t      dataset_dim(const dataset_t *self);
size_t      dataset_classes(const dataset_t *self);
const char *dataset_name(const dataset_t *self);   /* "synthetic", "mnist", "cifar10" */
size_t      dataset_bytes(const dataset_t *self);  /* memory held */

/* Rows idx[0..n) into x (n x dim, row-major f32) and their labels into y. */
void dataset_gather(const dataset_t *self, const size_t *idx, size_t n, float *x, int32_t *y);

#endif
