/* dev.c: the device-layer logic that needs no GPU (built with and without CUDA): CUDA_VISIBLE_DEVICES
 * parsing and the --gpus N check with its error text. The CUDA calls live in dev_cuda.c / dev_nocuda.c. */
#include "core/dev.h"
#include "core/err.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dev_visible_parse(const char *cvd, int *ids, int max)
{
    if (!cvd) return -1;
    if (strcmp(cvd, "NoDevFiles") == 0) return 0;
    int n = 0;
    const char *p = cvd;
    while (*p && n < max) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0) break;
        if ((len > 4 && strncmp(p, "GPU-", 4) == 0) || (len > 4 && strncmp(p, "MIG-", 4) == 0)) {
            ids[n++] = -2;
        } else {
            size_t i = 0;
            long v = 0;
            for (; i < len && isdigit((unsigned char)p[i]); i++) {
                v = v * 10 + (p[i] - '0');
                if (v > 1000000) break;
            }
            if (i != len || v > 1000000) break;   /* "-1", "x", "1a": the list ends here */
            ids[n++] = (int)v;
        }
        if (!end) break;
        p = end + 1;
    }
    return n;
}

int dev_check_gpus_with(int want, int have, const char *why, const char *cvd)
{
    if (want < 1) return err_set(ERR_INVAL, "--gpus %d: need at least 1 GPU (or use --procs N for CPU ranks)", want);
    if (want <= have) return 0;
    char vis[160];
    if (cvd) snprintf(vis, sizeof vis, "CUDA_VISIBLE_DEVICES=%s", cvd);
    else snprintf(vis, sizeof vis, "CUDA_VISIBLE_DEVICES unset");
    if (have <= 0)
        return err_set(ERR_NODEV, "asked for %d GPU%s but none is visible (%s; %s); use --procs N for CPU ranks",
                       want, want == 1 ? "" : "s", why && *why ? why : "no CUDA device", vis);
    return err_set(ERR_NODEV, "asked for %d GPUs but %d %s visible (%s); use --procs N for CPU ranks, or --gpus %d",
                   want, have, have == 1 ? "is" : "are", vis, have);
}

int dev_check_gpus(int want)
{
    char why[256] = "";
    int have = dev_count(why, sizeof why);
    return dev_check_gpus_with(want, have, why, getenv("CUDA_VISIBLE_DEVICES"));
}
