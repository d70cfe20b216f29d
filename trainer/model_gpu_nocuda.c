/* model_gpu_nocuda.c: trainer/model_gpu.h in a host-only build (make CUDA=0): no GPU model; every
 * call that needs one is ERR_UNSUP "built without CUDA". */
#include "trainer/model_gpu.h"
#include "core/err.h"

static int s_unsup(void) { return err_set(ERR_UNSUP, "GPU trainer: built without CUDA (make CUDA=0 or no nvcc/NCCL found)"); }

int mlp_gpu_new(mlp_gpu_t **self_p, const mlp_shape_t *shape, size_t max_batch, int tf32, int timeout_ms)
{
    (void)shape; (void)max_batch; (void)tf32; (void)timeout_ms;
    if (self_p) *self_p = NULL;
    return s_unsup();
}
void mlp_gpu_destroy(mlp_gpu_t **self_p)
{
    if (self_p) *self_p = NULL;
}
const mlp_shape_t *mlp_gpu_shape(const mlp_gpu_t *self) { (void)self; return NULL; }
float *mlp_gpu_params(mlp_gpu_t *self) { (void)self; return NULL; }
float *mlp_gpu_grads(mlp_gpu_t *self) { (void)self; return NULL; }
float *mlp_gpu_input(mlp_gpu_t *self) { (void)self; return NULL; }
const char *mlp_gpu_desc(const mlp_gpu_t *self) { (void)self; return "none (built without CUDA)"; }
int mlp_gpu_set_params(mlp_gpu_t *self, const float *host) { (void)self; (void)host; return s_unsup(); }
int mlp_gpu_get_params(mlp_gpu_t *self, float *host) { (void)self; (void)host; return s_unsup(); }
int mlp_gpu_get_grads(mlp_gpu_t *self, float *host) { (void)self; (void)host; return s_unsup(); }
int mlp_gpu_forward(mlp_gpu_t *self, size_t n, const int32_t *labels, float loss_scale, double *loss, size_t *correct)
{
    (void)self; (void)n; (void)labels; (void)loss_scale; (void)loss; (void)correct;
    return s_unsup();
}
int mlp_gpu_backward(mlp_gpu_t *self, mlp_layer_done_fn done, void *ctx)
{
    (void)self; (void)done; (void)ctx;
    return s_unsup();
}
int mlp_gpu_gemm_bench(const mlp_shape_t *shape, size_t b, int tf32, int warmup, int iters, double *ms_p50,
                       double *ms_min, double layer_ms[MLP_MAX_LAYERS][3])
{
    (void)shape; (void)b; (void)tf32; (void)warmup; (void)iters; (void)ms_p50; (void)ms_min; (void)layer_ms;
    return s_unsup();
}
