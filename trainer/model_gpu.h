/* model_gpu.h: the trainer's MLP on a GPU: the same shape, the same parameter and gradient arena
 * layout as trainer/model.h (W0, b0, W1, b1, ... in one contiguous f32 device arena each, so gradient
 * buckets are the same views at the same offsets), forward and backward through cuBLAS (cublasSgemm;
 * TF32 tensor cores on request) and trainer/mlp_kernels.h. Parameters are set from the host (the
 * trainer initialises them with mlp_init on the host and uploads them, so CPU and GPU runs start from
 * identical values). Batches go through pinned host staging (mlp_gpu_input) and are copied to the
 * device at the start of forward, on the model's stream.
 *
 * Synchronisation: the layer-done callback of backward runs after the model's stream has finished
 * that layer (so an engine may read the gradients from any stream and update the weights); forward
 * returns after the loss reached the host. Mixed precision: the GEMMs run in f32 (or TF32); the
 * trainer's f16/bf16 wire gradients and loss scaling work as on the CPU.
 * Without CUDA (make CUDA=0) mlp_gpu_new returns ERR_UNSUP "built without CUDA". */
#ifndef SB_TRAINER_MODEL_GPU_H
#define SB_TRAINER_MODEL_GPU_H
#include <stddef.h>
#include <stdint.h>
#include "trainer/model.h"

typedef struct mlp_gpu mlp_gpu_t;

/* On the calling thread's current device. tf32: let cuBLAS use TF32 tensor cores
 * (CUBLAS_TF32_TENSOR_OP_MATH). timeout_ms bounds every wait on the device (<= 0: 60 s). */
int   mlp_gpu_new(mlp_gpu_t **self_p, const mlp_shape_t *shape, size_t max_batch, int tf32, int timeout_ms);
void  mlp_gpu_destroy(mlp_gpu_t **self_p);
const mlp_shape_t *mlp_gpu_shape(const mlp_gpu_t *self);
float *mlp_gpu_params(mlp_gpu_t *self);     /* device arena */
float *mlp_gpu_grads(mlp_gpu_t *self);      /* device arena */
float *mlp_gpu_input(mlp_gpu_t *self);      /* pinned host staging: max_batch x dims[0] floats */
/* "cuBLAS f32" or "cuBLAS TF32" */
const char *mlp_gpu_desc(const mlp_gpu_t *self);
/* Copies between a host arena of count floats and the device arenas (wait for completion). */
int   mlp_gpu_set_params(mlp_gpu_t *self, const float *host);
int   mlp_gpu_get_params(mlp_gpu_t *self, float *host);
int   mlp_gpu_get_grads(mlp_gpu_t *self, float *host);
/* As mlp_forward, on the first n rows of mlp_gpu_input (labels on the host). */
int   mlp_gpu_forward(mlp_gpu_t *self, size_t n, const int32_t *labels, float loss_scale, double *loss,
                      size_t *correct);
/* As mlp_backward: writes every gradient; done(ctx, l) after layer l is finished on the device. */
int   mlp_gpu_backward(mlp_gpu_t *self, mlp_layer_done_fn done, void *ctx);

/* harness gemm --gpus: time the cuBLAS GEMMs of one training step of shape at batch b on the current
 * device (forward N,T; weight gradient T,N; input gradient N,N except layer 0), warmup then iters
 * times; the median iteration in *ms_p50, the fastest in *ms_min; layer_ms[l] = mean fwd, dW, dX. */
int   mlp_gpu_gemm_bench(const mlp_shape_t *shape, size_t b, int tf32, int warmup, int iters, double *ms_p50,
                         double *ms_min, double layer_ms[MLP_MAX_LAYERS][3]);

#endif
