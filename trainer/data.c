/* data.c: the synthetic teacher task, the MNIST IDX and CIFAR-10 binary loaders, and batch gathering.
 * Synthetic rows are stored as f32 (gathering is a memcpy per row); image sets keep their bytes and
 * gathering maps each byte through a 256-entry table (no per-element division or function call). */
#include "trainer/data.h"
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/err.h"
#include "trainer/rng.h"

struct dataset {
    char    name[16];
    size_t  n, dim, classes;
    float  *xf;         /* synthetic: n x dim f32 */
    uint8_t *xb;        /* images: n x dim bytes */
    int32_t *y;
    float   lut[256];
};

#define TEACHER_HIDDEN 64

size_t dataset_size(const dataset_t *self) { return self->n; }
size_t dataset_dim(const dataset_t *self) { return self->dim; }
size_t dataset_classes(const dataset_t *self) { return self->classes; }
const char *dataset_name(const dataset_t *self) { return self->name; }
size_t dataset_bytes(const dataset_t *self)
{
    return self->n * self->dim * (self->xf ? sizeof(float) : 1) + self->n * sizeof(int32_t);
}

void dataset_destroy(dataset_t **self_p)
{
    if (!self_p || !*self_p) return;
    free((*self_p)->xf);
    free((*self_p)->xb);
    free((*self_p)->y);
    free(*self_p);
    *self_p = NULL;
}

int dataset_synthetic(dataset_t **self_p, size_t n, size_t dim, size_t classes, uint64_t seed)
{
    if (!self_p || n == 0 || dim == 0 || classes < 2)
        return err_set(ERR_INVAL, "synthetic data: need n > 0, dim > 0, classes >= 2");
    dataset_t *d = calloc(1, sizeof *d);
    size_t H = TEACHER_HIDDEN;
    float *w1 = malloc(H * dim * sizeof(float)), *w2 = malloc(classes * H * sizeof(float));
    float *h = malloc(n * H * sizeof(float)), *z = malloc(n * classes * sizeof(float));
    if (d) {
        d->xf = malloc(n * dim * sizeof(float));
        d->y = malloc(n * sizeof(int32_t));
    }
    int rc = 0;
    if (!d || !d->xf || !d->y || !w1 || !w2 || !h || !z) {
        rc = err_set(ERR_NOMEM, "synthetic data: cannot allocate %zu x %zu", n, dim);
        goto out;
    }
    snprintf(d->name, sizeof d->name, "synthetic");
    d->n = n; d->dim = dim; d->classes = classes;
    /* teacher: z = W2 tanh(W1 x / sqrt(dim)), W ~ N(0, 1); label = argmax z; inputs x ~ N(0, 1) */
    rng_t r;
    rng_seed(&r, seed, 0x7465616368ull /* "teach" */);
    float s1 = 1.0f / sqrtf((float)dim);
    for (size_t i = 0; i < H * dim; i++) w1[i] = rng_normal(&r) * s1;
    for (size_t i = 0; i < classes * H; i++) w2[i] = rng_normal(&r);
    rng_seed(&r, seed, 0x64617461ull /* "data" */);
    for (size_t i = 0; i < n * dim; i++) d->xf[i] = rng_normal(&r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)H, (int)dim, 1.0f, d->xf, (int)dim, w1,
                (int)dim, 0.0f, h, (int)H);
    for (size_t i = 0; i < n * H; i++) h[i] = tanhf(h[i]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)classes, (int)H, 1.0f, h, (int)H, w2,
                (int)H, 0.0f, z, (int)classes);
    for (size_t i = 0; i < n; i++) {
        const float *zi = z + i * classes;
        size_t am = 0;
        for (size_t j = 1; j < classes; j++)
            if (zi[j] > zi[am]) am = j;
        d->y[i] = (int32_t)am;
    }
out:
    free(w1); free(w2); free(h); free(z);
    if (rc) dataset_destroy(&d);
    *self_p = d;
    return rc;
}

/* ---- files ---- */

static int s_read_file(const char *path, uint8_t **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_IO, "data file '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return err_set(ERR_IO, "data file '%s': not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) {
        fclose(f);
        return err_set(ERR_NOMEM, "data file '%s': cannot allocate %zu bytes", path, n);
    }
    if (n && fread(b, 1, n, f) != n) {
        int e = ferror(f) ? errno : 0;
        fclose(f);
        free(b);
        return err_set(ERR_IO, "data file '%s': short read%s%s", path, e ? ": " : "", e ? strerror(e) : "");
    }
    fclose(f);
    *buf = b;
    *len = n;
    return 0;
}

static uint32_t s_be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static void s_lut(dataset_t *d, float mean, float std)
{
    for (int v = 0; v < 256; v++) d->lut[v] = ((float)v / 255.0f - mean) / std;
}

static int s_is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
static int s_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int s_open_mnist(dataset_t **self_p, const char *img_path, const char *lab_path)
{
    uint8_t *ib = NULL, *lb = NULL;
    size_t il = 0, ll = 0;
    int rc = s_read_file(img_path, &ib, &il);
    if (rc) return rc;
    if ((rc = s_read_file(lab_path, &lb, &ll))) {
        free(ib);
        return rc;
    }
    dataset_t *d = NULL;
    if (il >= 2 && ib[0] == 0x1f && ib[1] == 0x8b) {
        rc = err_set(ERR_CORRUPT, "MNIST '%s' is gzip-compressed: gunzip it first", img_path);
        goto out;
    }
    if (il < 16 || s_be32(ib) != 0x00000803) {
        rc = err_set(ERR_CORRUPT, "MNIST images '%s': bad IDX header (want magic 0x00000803, 3-d unsigned bytes)", img_path);
        goto out;
    }
    if (ll < 8 || s_be32(lb) != 0x00000801) {
        rc = err_set(ERR_CORRUPT, "MNIST labels '%s': bad IDX header (want magic 0x00000801, 1-d unsigned bytes)", lab_path);
        goto out;
    }
    size_t n = s_be32(ib + 4), rows = s_be32(ib + 8), cols = s_be32(ib + 12);
    if (n == 0 || rows == 0 || cols == 0 || rows > 4096 || cols > 4096 || (il - 16) / (rows * cols) < n ||
        il - 16 != n * rows * cols) {
        rc = err_set(ERR_CORRUPT, "MNIST images '%s': header says %zu x %zu x %zu but the file holds %zu data bytes",
                     img_path, n, rows, cols, il - 16);
        goto out;
    }
    if (s_be32(lb + 4) != n || ll - 8 != n) {
        rc = err_set(ERR_CORRUPT, "MNIST labels '%s': %u labels in a %zu-byte file for %zu images", lab_path,
                     s_be32(lb + 4), ll, n);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (lb[8 + i] > 9) {
            rc = err_set(ERR_CORRUPT, "MNIST labels '%s': label %u at index %zu (want 0..9)", lab_path, lb[8 + i], i);
            goto out;
        }
    if (!(d = calloc(1, sizeof *d)) || !(d->y = malloc(n * sizeof(int32_t))) || !(d->xb = malloc(n * rows * cols))) {
        rc = err_set(ERR_NOMEM, "MNIST: cannot allocate %zu images", n);
        goto out;
    }
    snprintf(d->name, sizeof d->name, "mnist");
    d->n = n; d->dim = rows * cols; d->classes = 10;
    memcpy(d->xb, ib + 16, n * rows * cols);
    for (size_t i = 0; i < n; i++) d->y[i] = lb[8 + i];
    s_lut(d, 0.1307f, 0.3081f);
out:
    free(ib); free(lb);
    if (rc) dataset_destroy(&d);
    *self_p = d;
    return rc;
}

#define CIFAR_REC 3073
static int s_open_cifar(dataset_t **self_p, char **paths, int npaths)
{
    dataset_t *d = calloc(1, sizeof *d);
    if (!d) return ERR_NOMEM;
    snprintf(d->name, sizeof d->name, "cifar10");
    d->dim = 3072; d->classes = 10;
    s_lut(d, 0.5f, 0.25f);
    int rc = 0;
    for (int k = 0; k < npaths && !rc; k++) {
        uint8_t *b = NULL;
        size_t len = 0;
        if ((rc = s_read_file(paths[k], &b, &len))) break;
        if (len == 0 || len % CIFAR_REC) {
            rc = err_set(ERR_CORRUPT, "CIFAR-10 '%s': %zu bytes is not a whole number of %d-byte records "
                         "(want the binary version: 1 label byte + 3072 pixel bytes)", paths[k], len, CIFAR_REC);
            free(b);
            break;
        }
        size_t m = len / CIFAR_REC;
        uint8_t *xb = realloc(d->xb, (d->n + m) * 3072);
        int32_t *y = xb ? realloc(d->y, (d->n + m) * sizeof(int32_t)) : NULL;
        if (xb) d->xb = xb;
        if (y) d->y = y;
        if (!xb || !y) {
            rc = err_set(ERR_NOMEM, "CIFAR-10: cannot allocate %zu images", d->n + m);
            free(b);
            break;
        }
        for (size_t i = 0; i < m && !rc; i++) {
            const uint8_t *r = b + i * CIFAR_REC;
            if (r[0] > 9) {
                rc = err_set(ERR_CORRUPT, "CIFAR-10 '%s': label %u in record %zu (want 0..9)", paths[k], r[0], i);
                break;
            }
            d->y[d->n + i] = r[0];
            memcpy(d->xb + (d->n + i) * 3072, r + 1, 3072);
        }
        d->n += m;
        free(b);
    }
    if (rc) dataset_destroy(&d);
    *self_p = d;
    return rc;
}

int dataset_open(dataset_t **self_p, const char *path)
{
    if (!self_p || !path || !*path) return err_set(ERR_INVAL, "data: empty path");
    char a[4096], b[4096];
    if (s_is_dir(path)) {
        static const char *const img[] = {"train-images-idx3-ubyte", "train-images.idx3-ubyte"};
        static const char *const lab[] = {"train-labels-idx1-ubyte", "train-labels.idx1-ubyte"};
        for (int i = 0; i < 2; i++) {
            snprintf(a, sizeof a, "%s/%s", path, img[i]);
            snprintf(b, sizeof b, "%s/%s", path, lab[i]);
            if (s_exists(a)) return s_open_mnist(self_p, a, b);
        }
        char names[5][4096], *pp[5];
        int np = 0;
        for (int i = 1; i <= 5; i++) {
            snprintf(names[np], sizeof names[np], "%s/data_batch_%d.bin", path, i);
            if (s_exists(names[np])) { pp[np] = names[np]; np++; }
        }
        if (np) return s_open_cifar(self_p, pp, np);
        return err_set(ERR_IO, "data directory '%s': found neither MNIST (train-images-idx3-ubyte, "
                       "train-labels-idx1-ubyte) nor CIFAR-10 binary (data_batch_1.bin ...)", path);
    }
    if (!s_exists(path)) return err_set(ERR_IO, "data file '%s': %s", path, strerror(ENOENT));
    /* sniff: IDX magic, else CIFAR records */
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_IO, "data file '%s': %s", path, strerror(errno));
    uint8_t hdr[4] = {0};
    size_t got = fread(hdr, 1, 4, f);
    fclose(f);
    if (got == 4 && hdr[0] == 0 && hdr[1] == 0 && hdr[2] == 8) {
        if (hdr[3] != 3)
            return err_set(ERR_CORRUPT, "'%s' is an IDX file of %u dimensions; pass the images file (3-d)", path, hdr[3]);
        const char *k = strstr(path, "images-idx3");
        if (!k) k = strstr(path, "images.idx3");
        if (!k)
            return err_set(ERR_INVAL, "MNIST '%s': cannot derive the labels file name (expected 'images-idx3' in "
                           "the name); pass the directory instead", path);
        snprintf(b, sizeof b, "%.*slabels%cidx1%s", (int)(k - path), path, k[6], k + 11);
        return s_open_mnist(self_p, path, b);
    }
    if (got >= 2 && hdr[0] == 0x1f && hdr[1] == 0x8b)
        return err_set(ERR_CORRUPT, "data file '%s' is gzip-compressed: gunzip it first", path);
    char *one[1] = {(char *)path};
    return s_open_cifar(self_p, one, 1);
}

void dataset_gather(const dataset_t *self, const size_t *idx, size_t n, float *x, int32_t *y)
{
    size_t d = self->dim;
    for (size_t i = 0; i < n; i++) {
        size_t k = idx[i];
        y[i] = self->y[k];
        if (self->xf) {
            memcpy(x + i * d, self->xf + k * d, d * sizeof(float));
        } else {
            const uint8_t *restrict s = self->xb + k * d;
            float *restrict o = x + i * d;
            for (size_t j = 0; j < d; j++) o[j] = self->lut[s[j]];
        }
    }
}
