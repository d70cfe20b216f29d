/* workload.h: real models' gradient profiles (workloads/NAME.tsv: every trainable tensor in backward
 * order with its size and its module's forward/backward FLOPs per sample) and the emulated devices
 * that turn a profile into a step's timing: forward first, then backward layer by layer, each
 * gradient ready when its layer's backward time has passed (what DDP's and Horovod's buckets see). */
#ifndef SB_WORKLOAD_H
#define SB_WORKLOAD_H
#include <stddef.h>

typedef struct {
    char   name[96];
    size_t numel;
    double fwd_flops, bwd_flops;   /* per sample, of the module owning the tensor (0 for its other tensors) */
} wl_tensor_t;

typedef struct {
    char   name[32];
    char   source[256];            /* the profile's first line: where the facts come from */
    size_t ntensors;
    wl_tensor_t *t;                /* backward order */
    size_t params;                 /* sum of numel */
    double fwd_flops, bwd_flops;   /* per sample, sums over tensors */
} workload_t;

/* Names of the built-in profiles, comma separated ("resnet50, resnet101, ..."). */
const char *workload_names(void);
/* The i-th built-in profile's name (the registry's order), NULL past the last. */
const char *workload_at(size_t i);
/* 1 if name is a built-in profile or a path ending in .tsv. */
int workload_is_known(const char *name);
/* Load a built-in profile by name, or a profile file (a path ending in .tsv, same format). Errors
 * name the file and line. */
int  workload_load(workload_t **self_p, const char *name);
void workload_destroy(workload_t **self_p);

/* An emulated device: its throughput on this workload (samples/s of one device) and where it came
 * from. Presets carry published single-device throughputs; a workload a preset has no figure for gets
 * the preset's effective TFLOP/s (median over its published figures) divided by its FLOPs/sample. */
typedef struct {
    char   name[32];
    double samples_per_s;          /* one device on this workload */
    double tflops;                 /* effective (fwd + bwd FLOPs x samples/s) */
    int    derived;                /* 1: from the preset's effective TFLOP/s, not a published figure */
    double mem_gbps;               /* memory bandwidth (GB/s, spec sheet): the optimizer update's time; 0: not modelled */
    char   basis[320];             /* human explanation of the figure: the preset, the figure and its source */
} wl_device_t;

/* The device an emulated model runs on when none is given (--device's default). */
#define WL_DEVICE_DEFAULT "v100"
/* Names of the device presets, comma separated. */
const char *wl_device_names(void);
/* The i-th device preset's name, NULL past the last. */
const char *wl_device_at(size_t i);
/* spec: a preset name ("v100", "pascal", ...), "throughput=X" (samples/s) or "tflops=X", either
 * optionally followed by ",membw=GBPS" (memory bandwidth, for the optimizer update's time). */
int wl_device_resolve(const char *spec, const workload_t *wl, wl_device_t *out);

/* One step's compute schedule for a local batch on dev, times dilated by `dilate` (>= 1):
 * *fwd_s = forward time, ready[i] = when tensor i's gradient is ready (seconds from the step's start,
 * non-decreasing), *total_s = forward + backward. ready may be NULL. */
void wl_schedule(const workload_t *wl, const wl_device_t *dev, size_t local_batch, double dilate, double *fwd_s,
                 double *ready, double *total_s);

/* Seconds the device needs for the optimizer update of n parameters (memory-bound: bytes_per_param
 * read and written per parameter, e.g. 20 for SGD with momentum: parameter, gradient and momentum read,
 * parameter and momentum written), dilated; 0 when the device's bandwidth is unknown. */
double wl_update_s(const wl_device_t *dev, size_t n, double bytes_per_param, double dilate);

/* Element count of tensor i after dividing the model by shrink (>= 1): ceil(numel / shrink). */
size_t wl_shrunk_numel(const workload_t *wl, size_t i, double shrink);

/* Buckets in backward order, DDP's rule: tensors are appended to the open bucket, which closes once it
 * holds >= its cap (first bucket: first_cap bytes, then cap bytes; f32 elements, after shrink).
 * ends[b] = index one past the bucket's last tensor. Returns the bucket count (<= ntensors) or a
 * negative err.h code; ends must hold ntensors entries. */
int wl_buckets(const workload_t *wl, double shrink, size_t first_cap, size_t cap, size_t *ends);

#endif
