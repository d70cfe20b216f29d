/* sched.c: building and reading communication schedules (sched.h). */
#include "core/sched.h"
#include "core/err.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sched_init(sched_t *s, int world, int workers, size_t count, size_t esz, const char *algo)
{
    memset(s, 0, sizeof *s);
    s->world = world;
    s->workers = workers;
    s->count = count;
    s->esz = esz;
    snprintf(s->algo, sizeof s->algo, "%s", algo ? algo : "");
}

/* Room for one more element of size sz in *arr (capacity *cap, n in use); 0 or -1 (s->bad set). */
static int s_grow(sched_t *s, void **arr, size_t *cap, size_t n, size_t sz)
{
    if (s->bad) return -1;
    if (n < *cap) return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, c * sz);
    if (!p) {
        s->bad = 1;
        return -1;
    }
    *arr = p;
    *cap = c;
    return 0;
}

int sched_piece(sched_t *s, size_t off, size_t count, const char *name)
{
    size_t cap = (size_t)s->cap_p;
    if (s_grow(s, (void **)&s->pieces, &cap, (size_t)s->npieces, sizeof *s->pieces) < 0) return -1;
    s->cap_p = (int)cap;
    sched_piece_t *p = &s->pieces[s->npieces];
    p->off = off;
    p->count = count;
    snprintf(p->name, sizeof p->name, "%s", name);
    return s->npieces++;
}

void sched_step(sched_t *s, const char *fmt, ...)
{
    size_t cap = (size_t)s->cap_s;
    if (s_grow(s, (void **)&s->steps, &cap, (size_t)s->nsteps, sizeof *s->steps) < 0) return;
    s->cap_s = (int)cap;
    sched_step_t *st = &s->steps[s->nsteps++];
    memset(st, 0, sizeof *st);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->what, sizeof st->what, fmt, ap);
    va_end(ap);
    st->first = s->nx;
}

void sched_note(sched_t *s, const char *fmt, ...)
{
    if (s->bad || !s->nsteps) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->steps[s->nsteps - 1].note, sizeof s->steps[0].note, fmt, ap);
    va_end(ap);
}

void sched_xfer(sched_t *s, int src, int dst, int piece, sched_op_t op)
{
    if (!s->nsteps) {
        s->bad = 2;   /* a transfer before any step */
        return;
    }
    if (s_grow(s, (void **)&s->x, &s->cap_x, s->nx, sizeof *s->x) < 0) return;
    s->x[s->nx++] = (sched_xfer_t){.src = src, .dst = dst, .piece = piece, .op = op};
    s->steps[s->nsteps - 1].n++;
}

int sched_done(sched_t *s)
{
    if (s->bad == 1) return err_set(ERR_NOMEM, "schedule: out of memory");
    if (s->bad) return err_set(ERR_INVAL, "schedule: a transfer before its first step");
    if (s->world < 1 || s->workers < 1 || s->workers > s->world)
        return err_set(ERR_INVAL, "schedule: %d workers in a world of %d", s->workers, s->world);
    for (size_t i = 0; i < s->nx; i++) {
        const sched_xfer_t *x = &s->x[i];
        if (x->src < 0 || x->src >= s->world || x->dst < 0 || x->dst >= s->world || x->piece < 0 ||
            x->piece >= s->npieces)
            return err_set(ERR_INVAL, "schedule: transfer %zu (%d -> %d, piece %d) outside the world of %d and %d pieces",
                           i, x->src, x->dst, x->piece, s->world, s->npieces);
    }
    for (int p = 0; p < s->npieces; p++)
        if (s->pieces[p].off + s->pieces[p].count > s->count)
            return err_set(ERR_INVAL, "schedule: piece %s past the buffer's %zu elements", s->pieces[p].name, s->count);
    return 0;
}

void sched_free(sched_t *s)
{
    free(s->pieces);
    free(s->steps);
    free(s->x);
    memset(s, 0, sizeof *s);
}

size_t sched_xfer_bytes(const sched_t *s, const sched_xfer_t *x)
{
    return s->pieces[x->piece].count * s->esz;
}

void sched_links(const sched_t *s, int step, uint64_t *m)
{
    for (int k = 0; k < s->nsteps; k++) {
        if (step >= 0 && k != step) continue;
        const sched_step_t *st = &s->steps[k];
        for (size_t i = st->first; i < st->first + st->n; i++) {
            const sched_xfer_t *x = &s->x[i];
            if (x->src != x->dst) m[(size_t)x->src * (size_t)s->world + (size_t)x->dst] += sched_xfer_bytes(s, x);
        }
    }
}
