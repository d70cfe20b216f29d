/* mlp_kernels.h: the GPU trainer's small kernels (bias + ReLU, ReLU backward, softmax cross-entropy
 * forward/backward, bias-gradient column sums), callable from C (trainer/model_gpu_cuda.c). Device
 * pointers on the current device; streams are cudaStream_t as void *. Built only with CUDA. */
#ifndef SB_TRAINER_MLP_KERNELS_H
#define SB_TRAINER_MLP_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[i][j] = relu ? max(0, y[i][j] + b[j]) : y[i][j] + b[j]; y is n x d row-major. */
int mlpk_bias_act(float *y, const float *b, size_t n, size_t d, int relu, void *stream);
/* dh[i] = a[i] > 0 ? dh[i] : 0 for i < count. */
int mlpk_relu_bwd(float *dh, const float *a, size_t count, void *stream);
/* Per row i of logits (n x C): dz = (softmax - onehot(labels[i])) * g, loss_i[i] = logsumexp - z[y]
 * (shifted by the row max, as trainer/model.c), correct_i[i] = (first argmax == y). Labels must be
 * in [0, C) (the caller checks). */
int mlpk_softmax_xent(const float *logits, const int32_t *labels, float *dz, float *loss_i, int32_t *correct_i,
                      size_t n, size_t C, float g, void *stream);
/* gb[j] = sum over i < n of dz[i][j] (rows in order), dz n x out row-major. */
int mlpk_bias_grad(float *gb, const float *dz, size_t n, size_t out, void *stream);

#ifdef __cplusplus
}
#endif
#endif
