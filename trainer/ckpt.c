/* ckpt.c: the checkpoint file: "SBCKPT01", a fixed little-endian header, the parameters, the
 * optimizer buffers, then a 64-bit hash of everything before it, written whole or not at all
 * (core/afile.h: PATH.tmp.<pid>, fsync, rename over PATH, fsync of the directory). */
#include "trainer/ckpt.h"
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/afile.h"
#include "core/err.h"

#define MAGIC "SBCKPT01"
#define VERSION 2u   /* 2: the header's last word holds the learning rate (1: padding, no rate recorded) */

/* on-disk header (all fields naturally aligned, little-endian on the machines we run) */
typedef struct {
    char     magic[8];
    uint32_t version, header_bytes;
    char     model[128];
    char     data[64];
    uint64_t step, applied, epoch, offset, seed;
    uint32_t world, drop_last;
    uint64_t global_batch;
    uint64_t rng[4];
    float    amp_scale;
    uint32_t amp_good;
    uint64_t amp_overflows;
    uint32_t optim_kind, grad_dtype;
    uint64_t count;
    uint32_t nopt;
    float    lr;       /* version 2; version 1 wrote 0 padding here */
} s_hdr_t;

uint64_t ckpt_hash(const void *buf, size_t len, uint64_t seed) { return afile_hash(buf, len, seed); }

int ckpt_write_hash(const char *path, const ckpt_t *c, uint64_t *hash)
{
    if (!path || !*path || !c || (c->count && !c->params) || c->nopt < 0 || c->nopt > CKPT_MAX_OPT)
        return err_set(ERR_INVAL, "checkpoint: bad arguments");
    s_hdr_t h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.version = VERSION;
    h.header_bytes = sizeof h;
    snprintf(h.model, sizeof h.model, "%s", c->model);
    snprintf(h.data, sizeof h.data, "%s", c->data);
    h.step = c->step; h.applied = c->applied; h.epoch = c->epoch; h.offset = c->offset; h.seed = c->seed;
    h.world = c->world; h.drop_last = c->drop_last; h.global_batch = c->global_batch;
    memcpy(h.rng, c->rng, sizeof h.rng);
    h.amp_scale = c->amp_scale; h.amp_good = c->amp_good; h.amp_overflows = c->amp_overflows;
    h.optim_kind = c->optim_kind; h.grad_dtype = c->grad_dtype;
    h.count = c->count;
    h.nopt = (uint32_t)c->nopt;
    h.lr = c->lr;
    afile_part_t parts[2 + CKPT_MAX_OPT] = {{&h, sizeof h}, {c->params, c->count * sizeof(float)}};
    for (int k = 0; k < c->nopt; k++) parts[2 + k] = (afile_part_t){c->opt[k], c->count * sizeof(float)};
    return afile_write(path, "checkpoint", parts, 2 + c->nopt, 1, hash);
}

int ckpt_write(const char *path, const ckpt_t *c) { return ckpt_write_hash(path, c, NULL); }

void ckpt_free(ckpt_t *c)
{
    if (!c) return;
    free(c->params);
    c->params = NULL;
    free(c->srv_params);
    c->srv_params = NULL;
    for (int k = 0; k < CKPT_MAX_OPT; k++) {
        free(c->opt[k]);
        c->opt[k] = NULL;
    }
}

static int s_read_all(FILE *f, void *buf, size_t len, uint64_t *hash, const char *path, const char *what)
{
    if (len && fread(buf, 1, len, f) != len)
        return err_set(ferror(f) ? ERR_IO : ERR_CORRUPT, "checkpoint '%s': truncated in %s", path, what);
    if (hash) *hash = ckpt_hash(buf, len, *hash);
    return 0;
}

int ckpt_read(const char *path, ckpt_t *c)
{
    if (!path || !c) return err_set(ERR_INVAL, "checkpoint: bad arguments");
    memset(c, 0, sizeof *c);
    FILE *f = NULL;
    off_t size = 0;
    CHECK(afile_open(path, "checkpoint", &f, &size));
    s_hdr_t h;
    uint64_t hash = 0, stored = 0;
    int rc = s_read_all(f, &h, sizeof h, &hash, path, "the header");
    if (!rc && memcmp(h.magic, MAGIC, 8))
        rc = err_set(ERR_CORRUPT, "checkpoint '%s': not a syncbench checkpoint (bad magic)", path);
    if (!rc && (h.version < 1 || h.version > VERSION || h.header_bytes != sizeof h))
        rc = err_set(ERR_CORRUPT, "checkpoint '%s': version %u (header %u bytes); this build reads versions 1 to %u",
                     path, h.version, h.header_bytes, VERSION);
    if (!rc && (h.nopt > CKPT_MAX_OPT || h.count == 0 || h.count > ((uint64_t)1 << 40) ||
                (uint64_t)size != sizeof h + (1 + h.nopt) * h.count * sizeof(float) + sizeof(uint64_t)))
        rc = err_set(ERR_CORRUPT, "checkpoint '%s': %lld bytes does not match its header (%llu params, %u optimizer buffers)",
                     path, (long long)size, (unsigned long long)h.count, h.nopt);
    if (!rc) {
        h.model[sizeof h.model - 1] = 0;
        h.data[sizeof h.data - 1] = 0;
        memcpy(c->model, h.model, sizeof c->model);
        memcpy(c->data, h.data, sizeof c->data);
        c->step = h.step; c->applied = h.applied; c->epoch = h.epoch; c->offset = h.offset; c->seed = h.seed;
        c->world = h.world; c->drop_last = h.drop_last; c->global_batch = h.global_batch;
        memcpy(c->rng, h.rng, sizeof c->rng);
        c->amp_scale = h.amp_scale; c->amp_good = h.amp_good; c->amp_overflows = h.amp_overflows;
        c->optim_kind = h.optim_kind; c->grad_dtype = h.grad_dtype;
        c->count = (size_t)h.count;
        c->nopt = (int)h.nopt;
        c->has_lr = h.version >= 2;
        c->lr = c->has_lr ? h.lr : 0.0f;
        size_t bytes = c->count * sizeof(float);
        if (!(c->params = malloc(bytes))) rc = err_set(ERR_NOMEM, "checkpoint: %zu bytes", bytes);
        for (int k = 0; !rc && k < c->nopt; k++)
            if (!(c->opt[k] = malloc(bytes))) rc = err_set(ERR_NOMEM, "checkpoint: %zu bytes", bytes);
        if (!rc) rc = s_read_all(f, c->params, bytes, &hash, path, "the parameters");
        for (int k = 0; !rc && k < c->nopt; k++) rc = s_read_all(f, c->opt[k], bytes, &hash, path, "the optimizer state");
        if (!rc) rc = s_read_all(f, &stored, sizeof stored, NULL, path, "the checksum");
        c->file_hash = stored;
        if (!rc && stored != hash)
            rc = err_set(ERR_CORRUPT, "checkpoint '%s': checksum mismatch (stored %016llx, computed %016llx): the file is corrupt",
                         path, (unsigned long long)stored, (unsigned long long)hash);
    }
    fclose(f);
    if (rc) ckpt_free(c);
    return rc;
}

int ckpt_check_path(const char *path)
{
    if (!path || !*path) return err_set(ERR_INVAL, "checkpoint: no path");
    return afile_check_dest("--save", path);
}
