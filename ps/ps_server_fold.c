/* ps_server_fold.c: the parameter server's sums: a push into a round's sum (pss_agg_push), and
 * allreduce and sync training pushes by descriptor (PS_F_CMA), folded straight from the worker's
 * memory once the handler has checked them: the round's first push of a whole f32
 * partition is read into the slot's sum itself; any other push is read in cache-sized chunks, each
 * added into the sum (or, for the round's last push, into the reply buffer) before the next is read.
 * The arithmetic per element is the eager path's (pss_agg_push, dt_add / dt_add_scale): results are
 * bit-identical; only the bytes' route through memory changes. */
#include "ps/ps_server_int.h"

/* A push of n elements at off into the round's sum: the round's first push of the whole partition is
 * copied (no clear), a first partial one clears the sum first, later ones accumulate. */
void pss_agg_push(slot_t *s, size_t off, const void *src, size_t n, dtype_t dt)
{
    if (s->fresh) {
        s->fresh = 0;
        if (off == 0 && n == s->len && dt == DT_F32) {
            memcpy(s->agg, src, n * sizeof(float));
            return;
        }
        memset(s->agg, 0, s->len * sizeof(float));
    }
    pss_accumulate(s->agg + off, src, n, dt);
}

/* agg[0..n) += src (n elements of dt). src points into a received frame, which ZeroMQ may place at
 * any byte offset: misaligned input is read through memcpy. */
void pss_accumulate(float *agg, const void *src, size_t n, dtype_t dt)
{
    if (dt == DT_F32) {
        if (((uintptr_t)src & (sizeof(float) - 1)) == 0) {
            dt_add(agg, agg, src, n, DT_F32);
            return;
        }
        float tmp[1024];
        for (size_t i = 0; i < n; i += 1024) {
            size_t m = n - i < 1024 ? n - i : 1024;
            memcpy(tmp, (const char *)src + i * sizeof(float), m * sizeof(float));
            dt_add(agg + i, agg + i, tmp, m, DT_F32);
        }
        return;
    }
    const unsigned char *p = src;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        agg[i] += dt == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
}

/* Grow the scratch buffer to at least bytes (counted in the engine's memory). */
int pss_scratch(ps_server_t *self, size_t bytes)
{
    if (bytes <= self->scratch_len) return 0;
    void *n = realloc(self->scratch, bytes);
    if (!n) return err_set(ERR_NOMEM, "out of memory for a push of %zu bytes", bytes);
    pss_mem(self, (long long)(bytes - self->scratch_len));
    self->scratch = n;
    self->scratch_len = bytes;
    return 0;
}

/* Worker w's push of bytes by descriptor d was read whole: its descriptors work (it reads our replies
 * itself from now on); the bytes count as received from it. */
static void s_read_done(ps_server_t *self, int w, const cma_desc_t *d, size_t bytes)
{
    self->wk[w].cma_pid = d->pid;
    self->wk[w].cma = 1;
    atomic_fetch_add_explicit(&self->received, bytes, memory_order_relaxed);
    tp_note_traffic(self->cfg.comm->tp, w, 0, bytes);
}

/* Read (and fold) the push whose checked descriptor is self->defer into slot s; last: it is the round's
 * last contribution (the caller's s_ar_last with PS_F_COMMIT). A read that fails leaves no trace of the
 * push (got, committed and out_done untouched; a first push leaves the sum as empty as it found it),
 * except that a later push cut short midway has added part of itself into the sum, which cannot be
 * taken back: the round is marked broken (s->broken) and refused from then on. */
int pss_fold_cma(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, slot_t *s, int last)
{
    const cma_desc_t d = self->defer;
    dtype_t dt = (dtype_t)h->dtype;
    size_t esz = dt_size(dt), n = (size_t)h->count, off = (size_t)h->offset, bytes = (size_t)d.len, done = 0;
    pid_t pid = (pid_t)d.pid;
    int whole = off == 0 && n == s->len && dt == DT_F32, fresh = s->fresh, rc = 0;
    int to_out = !s->move && last && whole && !fresh;
    self->deferred = 0;
    if (!s->move && fresh && whole) {
        /* the round's first push is the sum so far: its bytes go there, no scratch and no copy */
        rc = cma_read(pid, s->agg, d.addr, bytes);
        if (rc == 0) s->fresh = 0;
    } else {
        size_t cb = bytes < PSS_FOLD_CHUNK ? bytes : PSS_FOLD_CHUNK;
        rc = pss_scratch(self, cb);
        if (rc < 0) {
            pss_reject(self, w, ident, idlen, h, rc, "%s", err_detail());
            return 1;
        }
        float sc = pss_inv_div(self);
        do { /* at least once: an empty push still opens the round's sum, as pss_agg_push does */
            size_t m = bytes - done < cb ? bytes - done : cb, i = done / esz, k = m / esz;
            rc = cma_read(pid, self->scratch, d.addr + done, m);
            if (rc < 0) break;
            if (s->move) {
                /* the ceiling: the bytes arrive, nothing is summed */
            } else if (to_out && s->avg) {
                dt_add_scale((float *)s->out + i, s->agg + i, self->scratch, k, DT_F32, sc);
            } else if (to_out) {
                dt_add((float *)s->out + i, s->agg + i, self->scratch, k, DT_F32);
            } else {
                pss_agg_push(s, off + i, self->scratch, k, dt);
            }
            done += m;
        } while (done < bytes);
        if (rc == 0 && to_out) s->out_done = 1;
    }
    if (rc < 0) {
        if (fresh) s->fresh = 1; /* the sum held nothing of this round and is taken as holding nothing */
        else if (done && !s->move && !to_out) s->broken = w + 1;
        pss_reject(self, w, ident, idlen, h, rc, "cannot read worker %d's push: %s%s", pss_wrank(self, w), err_detail(),
                   s->broken == w + 1 ? " (cut short midway: this round of the key is lost)" : "");
        return 1;
    }
    s_read_done(self, w, &d, bytes);
    return 0;
}

int pss_fold_push(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, slot_t *s)
{
    const cma_desc_t d = self->defer;
    dtype_t dt = (dtype_t)h->dtype;
    size_t esz = dt_size(dt), n = (size_t)h->count, off = (size_t)h->offset, bytes = (size_t)d.len, done = 0;
    pid_t pid = (pid_t)d.pid;
    int rc = 0;
    self->deferred = 0;
    if (s->fresh && off == 0 && n == s->len && dt == DT_F32) {
        /* the round's first whole push is the sum so far: its bytes go there (a failed read leaves it fresh) */
        rc = cma_read(pid, s->agg, d.addr, bytes);
        if (rc == 0) s->fresh = 0, done = bytes;
    } else {
        size_t cb = bytes < PSS_FOLD_CHUNK ? bytes : PSS_FOLD_CHUNK;
        rc = pss_scratch(self, cb ? cb : 1);
        if (rc < 0) return pss_reject(self, w, ident, idlen, h, rc, "%s", err_detail()), 1;
        while (done < bytes) {
            size_t m = bytes - done < cb ? bytes - done : cb;
            rc = cma_read(pid, self->scratch, d.addr + done, m);
            if (rc < 0) break;
            pss_agg_push(s, off + done / esz, self->scratch, m / esz, dt);
            done += m;
        }
    }
    if (rc < 0 && done == 0) {
        pss_reject(self, w, ident, idlen, h, rc, "cannot read worker %d's push: %s", pss_wrank(self, w), err_detail());
        return 1;
    }
    if (rc < 0) {
        pss_fail(self, ERR_PEER, "cannot read worker rank %d's push midway (key %llu): %s", pss_wrank(self, w),
                 (unsigned long long)h->key, err_detail());
        return 1;
    }
    s_read_done(self, w, &d, bytes);
    return 0;
}
