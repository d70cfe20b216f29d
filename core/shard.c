/* shard.c: checkpoint shard files (shard.h): writing one atomically, reading and verifying one, and
 * gathering a set of them back into flat vectors (whatever layout wrote them). */
#include "core/shard.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/afile.h"
#include "core/err.h"

#define MAGIC "SBSHARD1"
#define VERSION 1u

typedef struct {
    char     magic[8];
    uint32_t version, header_bytes;
    uint32_t index, nservers;
    uint64_t total;
    uint32_t nopt, optim_kind;
    uint64_t nranges;
} s_hdr_t;

int shard_write(const char *path, const shard_t *s, uint64_t *hash)
{
    if (!path || !s || s->nopt > SHARD_MAX_OPT || (s->nranges && (!s->ranges || !s->data)))
        return err_set(ERR_INVAL, "shard: bad arguments");
    size_t per = 1 + s->nopt, nparts = 2 + s->nranges * per;
    afile_part_t *parts = calloc(nparts, sizeof *parts);
    if (!parts) return err_set(ERR_NOMEM, "shard: %zu parts", nparts);
    s_hdr_t h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.version = VERSION;
    h.header_bytes = sizeof h;
    h.index = s->index;
    h.nservers = s->nservers;
    h.total = s->total;
    h.nopt = s->nopt;
    h.optim_kind = s->optim_kind;
    h.nranges = s->nranges;
    parts[0] = (afile_part_t){&h, sizeof h};
    parts[1] = (afile_part_t){s->ranges, s->nranges * sizeof *s->ranges};
    for (size_t r = 0; r < s->nranges; r++)
        for (size_t k = 0; k < per; k++) parts[2 + r * per + k] = (afile_part_t){s->data[r * per + k], s->ranges[r].len * sizeof(float)};
    int rc = afile_write(path, "checkpoint shard", parts, (int)nparts, 1, hash);
    free(parts);
    return rc;
}

void shard_free(shard_t *s)
{
    if (!s) return;
    free(s->data);
    free(s->buf);
    memset(s, 0, sizeof *s);
}

int shard_read(const char *path, shard_t *s)
{
    if (!path || !s) return err_set(ERR_INVAL, "shard: bad arguments");
    memset(s, 0, sizeof *s);
    FILE *f = NULL;
    off_t size = 0;
    CHECK(afile_open(path, "checkpoint shard", &f, &size));
    int rc = 0;
    if (size < (off_t)(sizeof(s_hdr_t) + sizeof(uint64_t)) || size > ((off_t)1 << 42))
        rc = err_set(ERR_CORRUPT, "checkpoint shard '%s': %lld bytes is not a shard", path, (long long)size);
    unsigned char *b = rc ? NULL : malloc((size_t)size);
    if (!rc && !b) rc = err_set(ERR_NOMEM, "checkpoint shard '%s': %lld bytes", path, (long long)size);
    if (!rc && fread(b, 1, (size_t)size, f) != (size_t)size)
        rc = err_set(ERR_IO, "checkpoint shard '%s': read failed", path);
    fclose(f);
    if (rc) {
        free(b);
        return rc;
    }
    s->buf = b;
    size_t body = (size_t)size - sizeof(uint64_t);
    s_hdr_t h;
    memcpy(&h, b, sizeof h);
    memcpy(&s->hash, b + body, sizeof s->hash);
    if (memcmp(h.magic, MAGIC, 8)) rc = err_set(ERR_CORRUPT, "checkpoint shard '%s': not a shard (bad magic)", path);
    else if (h.version != VERSION || h.header_bytes != sizeof h)
        rc = err_set(ERR_CORRUPT, "checkpoint shard '%s': version %u (header %u bytes); this build reads version %u", path,
                     h.version, h.header_bytes, VERSION);
    else if (h.nopt > SHARD_MAX_OPT || h.nranges > (body - sizeof h) / sizeof(shard_range_t) || h.total == 0 ||
             h.total > ((uint64_t)1 << 40) || h.index >= h.nservers)
        rc = err_set(ERR_CORRUPT, "checkpoint shard '%s': header out of range", path);
    if (rc) {
        shard_free(s);
        return rc;
    }
    s->index = h.index;
    s->nservers = h.nservers;
    s->total = h.total;
    s->nopt = h.nopt;
    s->optim_kind = h.optim_kind;
    s->nranges = (size_t)h.nranges;
    s->ranges = (shard_range_t *)(void *)(b + sizeof h); /* 8-aligned: the header is 48 bytes */
    size_t per = 1 + s->nopt, off = sizeof h + s->nranges * sizeof(shard_range_t), need = 0;
    for (size_t r = 0; r < s->nranges && !rc; r++) {
        const shard_range_t *g = &s->ranges[r];
        if (g->len == 0 || g->start >= s->total || g->len > s->total - g->start)
            rc = err_set(ERR_CORRUPT, "checkpoint shard '%s': range %zu [%llu, +%llu) outside the vector of %llu", path, r,
                         (unsigned long long)g->start, (unsigned long long)g->len, (unsigned long long)s->total);
        need += (size_t)g->len * per * sizeof(float);
    }
    if (!rc && off + need != body)
        rc = err_set(ERR_CORRUPT, "checkpoint shard '%s': %lld bytes does not match its ranges", path, (long long)size);
    /* the hash chains the parts as shard_write wrote them: header, range table, each range's vectors */
    uint64_t hh = rc ? 0 : afile_hash(b, sizeof h, 0);
    if (!rc) hh = afile_hash(b + sizeof h, s->nranges * sizeof(shard_range_t), hh);
    for (size_t r = 0, o = off; r < s->nranges && !rc; r++)
        for (size_t k = 0; k < per; k++, o += (size_t)s->ranges[r].len * sizeof(float))
            hh = afile_hash(b + o, (size_t)s->ranges[r].len * sizeof(float), hh);
    if (!rc && hh != s->hash) rc = err_set(ERR_CORRUPT, "checkpoint shard '%s': checksum mismatch: the file is corrupt", path);
    if (!rc && !(s->data = calloc(s->nranges * per + 1, sizeof *s->data))) rc = err_set(ERR_NOMEM, "checkpoint shard");
    for (size_t r = 0; r < s->nranges && !rc; r++)
        for (size_t k = 0; k < per; k++) {
            s->data[r * per + k] = (float *)(void *)(b + off);
            off += (size_t)s->ranges[r].len * sizeof(float);
        }
    if (rc) shard_free(s);
    return rc;
}

int shard_gather(const char *const *paths, const uint64_t *want_hash, int n, uint64_t total, int nopt,
                 float *params, float **opt, uint64_t *applied)
{
    if (n < 1 || !paths || !params || nopt < 0 || nopt > SHARD_MAX_OPT || (nopt && !opt))
        return err_set(ERR_INVAL, "shard_gather: bad arguments");
    uint8_t *seen = calloc((size_t)(total + 7) / 8, 1);
    uint8_t *idx = calloc((size_t)n, 1);
    if (!seen || !idx) {
        free(seen);
        free(idx);
        return err_set(ERR_NOMEM, "shard_gather: %llu elements", (unsigned long long)total);
    }
    int rc = 0, have_applied = 0;
    uint64_t covered = 0;
    for (int i = 0; i < n && !rc; i++) {
        shard_t s;
        CHECK_GOTO(rc, shard_read(paths[i], &s), out);
        if (want_hash && s.hash != want_hash[i])
            rc = err_set(ERR_CORRUPT, "checkpoint shard '%s': not the one the manifest names (checksum %016llx, the "
                         "manifest has %016llx): a shard of another checkpoint?", paths[i], (unsigned long long)s.hash,
                         (unsigned long long)want_hash[i]);
        else if (s.total != total || (int)s.nopt != nopt || (int)s.nservers != n || idx[s.index])
            rc = err_set(ERR_CORRUPT, "checkpoint shard '%s': server %u of %u, %llu elements, %u optimizer buffers; the "
                         "checkpoint has %d shards of %llu elements with %d buffers", paths[i], s.index, s.nservers,
                         (unsigned long long)s.total, s.nopt, n, (unsigned long long)total, nopt);
        if (!rc) idx[s.index] = 1;
        size_t per = 1 + s.nopt;
        for (size_t r = 0; r < s.nranges && !rc; r++) {
            const shard_range_t *g = &s.ranges[r];
            for (uint64_t e = g->start; e < g->start + g->len && !rc; e++) {
                if (seen[e / 8] & (1u << (e % 8)))
                    rc = err_set(ERR_CORRUPT, "checkpoint shard '%s': element %llu is in two shards", paths[i],
                                 (unsigned long long)e);
                seen[e / 8] |= (uint8_t)(1u << (e % 8));
            }
            if (rc) break;
            if (!have_applied || g->applied > *applied) *applied = g->applied;
            have_applied = 1;
            covered += g->len;
            memcpy(params + g->start, s.data[r * per], (size_t)g->len * sizeof(float));
            for (int k = 0; k < nopt; k++) memcpy(opt[k] + g->start, s.data[r * per + 1 + k], (size_t)g->len * sizeof(float));
        }
        shard_free(&s);
    }
    if (!rc && covered != total)
        rc = err_set(ERR_CORRUPT, "checkpoint shards %s...: they hold %llu of %llu elements", paths[0],
                     (unsigned long long)covered, (unsigned long long)total);
out:
    free(seen);
    free(idx);
    return rc;
}
