/* ckpt_set.c: checkpoints whose state is not all in the workers' hands (ckpt.h ckpt_save_set / ckpt_load):
 * the workers' file, the engine's shard files (written by its servers, engine_ops_t.state_save) and a
 * manifest written last that names them all with their sizes and hashes. The manifest: "SBCKMF01", a
 * fixed header (the engine, its layout, the workers' file), one entry per shard, a 64-bit hash. */
#include "trainer/ckpt.h"
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/afile.h"
#include "core/engine.h"
#include "core/err.h"
#include "core/log.h"
#include "core/optim.h"
#include "core/shard.h"

#define MAGIC "SBCKMF01"
#define VERSION 1u
#define MAX_SHARDS 4096

typedef struct {
    char     name[256];          /* file name, in the manifest's directory */
    uint64_t bytes, hash;
} s_ent_t;

typedef struct {
    char     magic[8];
    uint32_t version, header_bytes;
    char     engine[32];
    char     layout[256];
    s_ent_t  workers;
    uint64_t count;              /* parameters */
    uint32_t nopt, nshards;
} s_hdr_t;

static const char *s_base(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

/* dir of the manifest + name */
static void s_join(const char *manifest, const char *name, char *out, size_t len)
{
    char d[4096];
    snprintf(d, sizeof d, "%s", manifest);
    snprintf(out, len, "%s/%s", strchr(manifest, '/') ? dirname(d) : ".", name);
}

/* Read and verify the manifest at path: header and entries (malloc'd, *ents). ERR_CORRUPT naming path. */
static int s_read_manifest(const char *path, s_hdr_t *h, s_ent_t **ents)
{
    *ents = NULL;
    FILE *f = NULL;
    off_t size = 0;
    CHECK(afile_open(path, "checkpoint manifest", &f, &size));
    int rc = 0;
    unsigned char *b = NULL;
    if (size < (off_t)(sizeof *h + 8) || size > (off_t)(sizeof *h + MAX_SHARDS * sizeof(s_ent_t) + 8))
        rc = err_set(ERR_CORRUPT, "checkpoint manifest '%s': %lld bytes is not a manifest", path, (long long)size);
    else if (!(b = malloc((size_t)size))) rc = err_set(ERR_NOMEM, "checkpoint manifest");
    else if (fread(b, 1, (size_t)size, f) != (size_t)size) rc = err_set(ERR_IO, "checkpoint manifest '%s': read failed", path);
    fclose(f);
    uint64_t stored = 0;
    if (!rc) {
        memcpy(h, b, sizeof *h);
        memcpy(&stored, b + size - 8, 8);
        if (memcmp(h->magic, MAGIC, 8) || h->version != VERSION || h->header_bytes != sizeof *h)
            rc = err_set(ERR_CORRUPT, "checkpoint manifest '%s': not a version %u manifest", path, VERSION);
        else if (afile_hash(b + sizeof *h, (size_t)size - 8 - sizeof *h, afile_hash(b, sizeof *h, 0)) != stored)
            rc = err_set(ERR_CORRUPT, "checkpoint manifest '%s': checksum mismatch: the file is corrupt", path);
        else if (h->nshards == 0 || h->nshards > MAX_SHARDS || h->nopt > CKPT_MAX_OPT || h->count == 0 ||
                 (uint64_t)size != sizeof *h + (uint64_t)h->nshards * sizeof(s_ent_t) + 8)
            rc = err_set(ERR_CORRUPT, "checkpoint manifest '%s': %lld bytes does not match its header", path, (long long)size);
    }
    if (!rc && !(*ents = malloc(h->nshards * sizeof **ents))) rc = err_set(ERR_NOMEM, "checkpoint manifest");
    if (!rc) {
        memcpy(*ents, b + sizeof *h, h->nshards * sizeof **ents);
        h->engine[sizeof h->engine - 1] = h->layout[sizeof h->layout - 1] = h->workers.name[sizeof h->workers.name - 1] = 0;
        for (uint32_t i = 0; i < h->nshards; i++) (*ents)[i].name[sizeof (*ents)[i].name - 1] = 0;
        for (uint32_t i = 0; i <= h->nshards && !rc; i++) {
            const char *n = i < h->nshards ? (*ents)[i].name : h->workers.name;
            if (!*n || strchr(n, '/') || !strcmp(n, "..") || !strcmp(n, "."))
                rc = err_set(ERR_CORRUPT, "checkpoint manifest '%s': bad file name '%s'", path, n);
        }
    }
    free(b);
    if (rc) {
        free(*ents);
        *ents = NULL;
    }
    return rc;
}

/* Remove what an earlier manifest named and the new one does not (best effort, after the new one is in). */
static void s_remove_old(const char *path, const s_hdr_t *oh, const s_ent_t *oe, const s_hdr_t *nh, const s_ent_t *ne)
{
    for (uint32_t i = 0; i <= oh->nshards; i++) {
        const char *n = i < oh->nshards ? oe[i].name : oh->workers.name;
        int keep = !strcmp(n, nh->workers.name);
        for (uint32_t j = 0; j < nh->nshards && !keep; j++) keep = !strcmp(n, ne[j].name);
        if (keep) continue;
        char full[4096];
        s_join(path, n, full, sizeof full);
        if (unlink(full) != 0) LOG_D("checkpoint: could not remove the previous checkpoint's %s", full);
    }
}

int ckpt_save_set(const char *path, const ckpt_t *c, const engine_ops_t *ops, engine_t *engine)
{
    if (!path || !*path || !c || !ops || !ops->state_save || !engine) return err_set(ERR_INVAL, "checkpoint: bad arguments");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char base[1024];
    /* a tag of its own for every save: the step, the time and the process */
    if ((size_t)snprintf(base, sizeof base, "%s.%llu-%08llx%04x", path, (unsigned long long)c->step,
                         (unsigned long long)(((uint64_t)ts.tv_sec * 1000000007ull + (uint64_t)ts.tv_nsec) & 0xffffffffu),
                         (unsigned)getpid() & 0xffffu) >= sizeof base - 16 ||
        strlen(s_base(base)) + 16 > sizeof(((s_ent_t *)0)->name))
        return err_set(ERR_INVAL, "checkpoint '%s': path too long", path);
    s_hdr_t h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.version = VERSION;
    h.header_bytes = sizeof h;
    snprintf(h.engine, sizeof h.engine, "%s", ops->name ? ops->name : "?");
    h.count = c->count;
    char wpath[1100];
    snprintf(wpath, sizeof wpath, "%s.w", base);
    memcpy(h.workers.name, s_base(wpath), strlen(s_base(wpath)) + 1); /* fits: checked with the tag */
    CHECK(ckpt_write_hash(wpath, c, &h.workers.hash));
    struct stat st;
    h.workers.bytes = stat(wpath, &st) == 0 ? (uint64_t)st.st_size : 0;
    engine_saved_t sv;
    memset(&sv, 0, sizeof sv);
    int rc = ops->state_save(engine, base, &sv);
    s_ent_t *ents = NULL;
    if (!rc && (sv.nfiles < 1 || sv.nfiles > MAX_SHARDS))
        rc = err_set(ERR_STATE, "checkpoint: engine %s saved %d files", h.engine, sv.nfiles);
    if (!rc && !(ents = calloc((size_t)sv.nfiles, sizeof *ents))) rc = err_set(ERR_NOMEM, "checkpoint manifest");
    for (int i = 0; !rc && i < sv.nfiles; i++) {
        const char *n = s_base(sv.files[i].path);
        if (strlen(n) >= sizeof ents[i].name) rc = err_set(ERR_INVAL, "checkpoint: file name %s too long", n);
        else memcpy(ents[i].name, n, strlen(n) + 1);
        ents[i].bytes = sv.files[i].bytes;
        ents[i].hash = sv.files[i].hash;
    }
    if (!rc) {
        snprintf(h.layout, sizeof h.layout, "%s", sv.layout);
        h.nshards = (uint32_t)sv.nfiles;
        shard_t s0;
        /* the optimizer buffers the shards hold (the manifest says it, so a reader knows before reading) */
        char full[4096];
        s_join(path, ents[0].name, full, sizeof full);
        rc = shard_read(full, &s0);
        if (!rc) {
            h.nopt = s0.nopt;
            shard_free(&s0);
        }
    }
    /* the previous checkpoint's manifest, to remove its files once the new one is in */
    s_hdr_t oh;
    s_ent_t *oe = NULL;
    int have_old = 0;
    if (!rc && access(path, F_OK) == 0) {
        have_old = s_read_manifest(path, &oh, &oe) == 0;
        if (!have_old) err_clear();
    }
    if (!rc) {
        afile_part_t parts[2] = {{&h, sizeof h}, {ents, (size_t)h.nshards * sizeof *ents}};
        rc = afile_write(path, "checkpoint manifest", parts, 2, 1, NULL);
    }
    if (rc) {
        /* nothing of this save is named by a manifest: remove what it wrote; the previous checkpoint stands */
        unlink(wpath);
        for (int i = 0; i < sv.nfiles; i++) unlink(sv.files[i].path);
    } else if (have_old) {
        s_remove_old(path, &oh, oe, &h, ents);
    }
    free(oe);
    free(ents);
    free(sv.files);
    return rc;
}

int ckpt_load(const char *path, ckpt_t *c)
{
    if (!path || !c) return err_set(ERR_INVAL, "checkpoint: bad arguments");
    memset(c, 0, sizeof *c);
    FILE *f = NULL;
    char magic[8] = {0};
    CHECK(afile_open(path, "checkpoint", &f, NULL));
    size_t got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    if (got != sizeof magic || memcmp(magic, MAGIC, 8)) return ckpt_read(path, c);
    s_hdr_t h;
    s_ent_t *ents = NULL;
    CHECK(s_read_manifest(path, &h, &ents));
    char full[4096];
    s_join(path, h.workers.name, full, sizeof full);
    int rc = ckpt_read(full, c);
    if (!rc && c->file_hash != h.workers.hash)
        rc = err_set(ERR_CORRUPT, "checkpoint '%s': the workers' file %s is not the one the manifest names (another "
                     "checkpoint's?)", path, full);
    if (!rc && (c->count != h.count || c->nopt != 0))
        rc = err_set(ERR_CORRUPT, "checkpoint '%s': the workers' file %s holds %zu parameters, the manifest %llu", path,
                     full, c->count, (unsigned long long)h.count);
    char (*paths)[4096] = rc ? NULL : calloc(h.nshards, sizeof *paths);
    const char **pp = rc ? NULL : calloc(h.nshards, sizeof *pp);
    uint64_t *want = rc ? NULL : calloc(h.nshards, sizeof *want);
    if (!rc && (!paths || !pp || !want)) rc = err_set(ERR_NOMEM, "checkpoint: %u shards", h.nshards);
    size_t bytes = c->count * sizeof(float);
    if (!rc && !(c->srv_params = malloc(bytes))) rc = err_set(ERR_NOMEM, "checkpoint: %zu bytes", bytes);
    for (uint32_t k = 0; !rc && k < h.nopt; k++)
        if (!(c->opt[k] = malloc(bytes))) rc = err_set(ERR_NOMEM, "checkpoint: %zu bytes", bytes);
    for (uint32_t i = 0; !rc && i < h.nshards; i++) {
        s_join(path, ents[i].name, paths[i], sizeof paths[i]);
        pp[i] = paths[i];
        want[i] = ents[i].hash;
    }
    if (!rc) rc = shard_gather(pp, want, (int)h.nshards, h.count, (int)h.nopt, c->srv_params, c->opt, &c->srv_applied);
    if (!rc) {
        c->nopt = (int)h.nopt;
        snprintf(c->layout, sizeof c->layout, "%s", h.layout);
        snprintf(c->engine, sizeof c->engine, "%s", h.engine);
    }
    free(paths);
    free(pp);
    free(want);
    free(ents);
    if (rc) ckpt_free(c);
    return rc;
}

int ckpt_check_nopt(const void *cfg, int nopt, const char *engine)
{
    optim_t *o = NULL;
    int nbuf = CKPT_MAX_OPT;
    CHECK(optim_new(&o, (const optim_cfg_t *)cfg, 1));
    int rc = optim_state(o, NULL, &nbuf, NULL);
    optim_destroy(&o);
    if (!rc && nbuf != nopt)
        rc = err_set(ERR_MISMATCH, "resume: the checkpoint holds %d optimizer buffers, engine '%s' with this optimizer has "
                     "%d (same --optim as when it was saved?)", nopt, engine, nbuf);
    return rc;
}
