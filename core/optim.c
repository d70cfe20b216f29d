/* optim.c: SGD (momentum, weight decay) and Adam with torch.optim semantics, on any contiguous range of
 * the parameters, so a PS server updates its shard and an allreduce worker its whole arena with the
 * same code. State (momentum buffer, Adam moments) is f32, zero-initialised, one slot per parameter.
 *
 * SGD (torch.optim.SGD, dampening 0, no Nesterov):  g = s*grad + wd*p;  buf = momentum*buf + g;
 *   p -= lr*buf. With a zero-initialised buffer the first step gives buf = g, as in torch.
 * Adam (torch.optim.Adam, amsgrad off):  g = s*grad + wd*p;  m = b1*m + (1-b1)*g;
 *   v = b2*v + (1-b2)*g*g;  p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps).
 * Bias corrections are computed once per call in double; the element loops are plain f32 for the
 * auto-vectorizer. */
#include "core/optim.h"
#include "core/err.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct optim {
    optim_cfg_t cfg;
    size_t count;
    int nbuf;
    float *buf[2];       /* SGD: momentum; Adam: m, v */
};

void optim_cfg_default(optim_cfg_t *cfg, optim_kind_t kind)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->beta1 = 0.9f;
    cfg->beta2 = 0.999f;
    cfg->eps = 1e-8f;
    cfg->weight_decay = 0.0f;
    if (kind == OPT_ADAM) {
        cfg->lr = 1e-3f;
        cfg->momentum = 0.0f;
    } else {
        cfg->lr = 0.05f;
        cfg->momentum = 0.9f;
    }
}

static int s_check_cfg(const optim_cfg_t *c)
{
    if (c->kind != OPT_SGD && c->kind != OPT_ADAM)
        return err_set(ERR_INVAL, "optimizer: unknown kind %d", (int)c->kind);
    if (!(c->lr >= 0.0f) || !isfinite(c->lr))
        return err_set(ERR_INVAL, "optimizer: lr must be a finite number >= 0 (got %g)", (double)c->lr);
    if (!(c->weight_decay >= 0.0f) || !isfinite(c->weight_decay))
        return err_set(ERR_INVAL, "optimizer: wd must be a finite number >= 0 (got %g)",
                       (double)c->weight_decay);
    if (c->kind == OPT_SGD && !(c->momentum >= 0.0f && c->momentum < 1.0f))
        return err_set(ERR_INVAL, "optimizer: momentum must be in [0, 1) (got %g)", (double)c->momentum);
    if (c->kind == OPT_ADAM) {
        if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
            return err_set(ERR_INVAL, "optimizer: beta1 must be in [0, 1) (got %g)", (double)c->beta1);
        if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
            return err_set(ERR_INVAL, "optimizer: beta2 must be in [0, 1) (got %g)", (double)c->beta2);
        if (!(c->eps > 0.0f) || !isfinite(c->eps))
            return err_set(ERR_INVAL, "optimizer: eps must be a finite number > 0 (got %g)", (double)c->eps);
    }
    return 0;
}

int optim_new(optim_t **self_p, const optim_cfg_t *cfg, size_t count)
{
    if (!self_p || !cfg) return err_set(ERR_INVAL, "optim_new: NULL argument");
    *self_p = NULL;
    CHECK(s_check_cfg(cfg));
    optim_t *self = calloc(1, sizeof *self);
    if (!self) return err_set(ERR_NOMEM, "optim_new");
    self->cfg = *cfg;
    self->count = count;
    self->nbuf = cfg->kind == OPT_ADAM ? 2 : (cfg->momentum != 0.0f ? 1 : 0);
    for (int i = 0; i < self->nbuf; i++) {
        if (count > SIZE_MAX / sizeof(float)) { optim_destroy(&self); return err_set(ERR_NOMEM, "optim_new: %zu", count); }
        self->buf[i] = calloc(count ? count : 1, sizeof(float));
        if (!self->buf[i]) {
            optim_destroy(&self);
            return err_set(ERR_NOMEM, "optim_new: state for %zu parameters", count);
        }
    }
    *self_p = self;
    return 0;
}

void optim_destroy(optim_t **self_p)
{
    if (!self_p || !*self_p) return;
    optim_t *self = *self_p;
    for (int i = 0; i < 2; i++) free(self->buf[i]);
    free(self);
    *self_p = NULL;
}

static void s_sgd(float *restrict p, const float *restrict g, float *restrict buf, size_t n, float gs,
                  float wd, float mom, float lr)
{
    if (buf) {
        for (size_t i = 0; i < n; i++) {
            float d = g[i] * gs + wd * p[i];
            float b = mom * buf[i] + d;
            buf[i] = b;
            p[i] -= lr * b;
        }
    } else {
        for (size_t i = 0; i < n; i++) p[i] -= lr * (g[i] * gs + wd * p[i]);
    }
}

static void s_adam(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                   size_t n, float gs, float wd, float b1, float b2, float eps, float step_size,
                   float bc2_sqrt)
{
    const float c1 = 1.0f - b1, c2 = 1.0f - b2;
    for (size_t i = 0; i < n; i++) {
        float d = g[i] * gs + wd * p[i];
        float mi = b1 * m[i] + c1 * d;
        float vi = b2 * v[i] + c2 * d * d;
        m[i] = mi;
        v[i] = vi;
        p[i] -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);   /* torch's order of operations */
    }
}

int optim_step(optim_t *self, float *params, const float *grad, size_t offset, size_t count,
               float grad_scale, float lr, uint64_t step)
{
    if (!self) return err_set(ERR_INVAL, "optim_step: NULL optimizer");
    if (offset > self->count || count > self->count - offset)
        return err_set(ERR_RANGE, "optim_step: range [%zu, %zu+%zu) outside the %zu parameters", offset,
                       offset, count, self->count);
    if (!count) return 0;
    if (!params || !grad) return err_set(ERR_INVAL, "optim_step: NULL params or grad");
    if (!isfinite(lr) || lr < 0.0f) return err_set(ERR_INVAL, "optim_step: bad lr %g", (double)lr);
    const optim_cfg_t *c = &self->cfg;
    if (c->kind == OPT_SGD) {
        s_sgd(params, grad, self->nbuf ? self->buf[0] + offset : NULL, count, grad_scale,
              c->weight_decay, c->momentum, lr);
        return 0;
    }
    if (step == 0) return err_set(ERR_INVAL, "optim_step: Adam steps are 1-based (got step 0)");
    double bc1 = 1.0 - pow((double)c->beta1, (double)step);
    double bc2 = 1.0 - pow((double)c->beta2, (double)step);
    float step_size = (float)((double)lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    s_adam(params, grad, self->buf[0] + offset, self->buf[1] + offset, count, grad_scale,
           c->weight_decay, c->beta1, c->beta2, c->eps, step_size, bc2_sqrt);
    return 0;
}

size_t optim_state_bytes(const optim_t *self)
{
    return self ? (size_t)self->nbuf * self->count * sizeof(float) : 0;
}

int optim_state(optim_t *self, float **bufs, int *nbuf, size_t *count)
{
    if (!self || !nbuf) return err_set(ERR_INVAL, "optim_state: NULL argument");
    *nbuf = self->nbuf;
    if (count) *count = self->count;
    if (bufs)
        for (int i = 0; i < self->nbuf; i++) bufs[i] = self->buf[i];
    return 0;
}

/* ---------------------------------------------------------------- parsing */

static int s_num(const char *key, const char *val, size_t vlen, float *out)
{
    char tmp[64];
    if (vlen == 0) return err_set(ERR_INVAL, "optimizer: '%s' has no value", key);
    if (vlen >= sizeof tmp) return err_set(ERR_INVAL, "optimizer: value of '%s' is too long", key);
    memcpy(tmp, val, vlen);
    tmp[vlen] = '\0';
    char *end;
    errno = 0;
    double d = strtod(tmp, &end);
    if (end == tmp || *end != '\0')
        return err_set(ERR_INVAL, "optimizer: '%s=%s' is not a number", key, tmp);
    if (errno == ERANGE || !isfinite(d) || fabs(d) > 3.4e38)
        return err_set(ERR_INVAL, "optimizer: '%s=%s' is out of range", key, tmp);
    *out = (float)d;
    return 0;
}

int optim_parse(const char *s, optim_cfg_t *cfg)
{
    if (!s || !cfg) return err_set(ERR_INVAL, "optim_parse: NULL argument");
    const char *colon = strchr(s, ':');
    size_t nlen = colon ? (size_t)(colon - s) : strlen(s);
    optim_cfg_t c;
    if (nlen == 3 && !strncmp(s, "sgd", 3)) optim_cfg_default(&c, OPT_SGD);
    else if (nlen == 4 && !strncmp(s, "adam", 4)) optim_cfg_default(&c, OPT_ADAM);
    else return err_set(ERR_INVAL, "unknown optimizer '%.*s' (expected sgd or adam)", (int)nlen, s);
    if (colon) {
        const char *p = colon + 1;
        if (!*p) return err_set(ERR_INVAL, "optimizer '%s': empty option list after ':'", s);
        for (;;) {
            const char *comma = strchr(p, ',');
            size_t ilen = comma ? (size_t)(comma - p) : strlen(p);
            const char *eq = memchr(p, '=', ilen);
            if (!eq || eq == p)
                return err_set(ERR_INVAL, "optimizer '%s': expected key=value, got '%.*s'", s, (int)ilen, p);
            size_t klen = (size_t)(eq - p);
            char key[32];
            if (klen >= sizeof key)
                return err_set(ERR_INVAL, "optimizer '%s': unknown option '%.*s'", s, (int)klen, p);
            memcpy(key, p, klen);
            key[klen] = '\0';
            float *dst = NULL;
            if (!strcmp(key, "lr")) dst = &c.lr;
            else if (!strcmp(key, "wd") || !strcmp(key, "weight_decay")) dst = &c.weight_decay;
            else if (c.kind == OPT_SGD && !strcmp(key, "momentum")) dst = &c.momentum;
            else if (c.kind == OPT_ADAM && !strcmp(key, "beta1")) dst = &c.beta1;
            else if (c.kind == OPT_ADAM && !strcmp(key, "beta2")) dst = &c.beta2;
            else if (c.kind == OPT_ADAM && !strcmp(key, "eps")) dst = &c.eps;
            else
                return err_set(ERR_INVAL, "optimizer '%s': unknown option '%s' for %s (expected %s)", s,
                               key, c.kind == OPT_SGD ? "sgd" : "adam",
                               c.kind == OPT_SGD ? "lr, momentum, wd" : "lr, beta1, beta2, eps, wd");
            CHECK(s_num(key, eq + 1, ilen - klen - 1, dst));
            if (!comma) break;
            p = comma + 1;
            if (!*p) return err_set(ERR_INVAL, "optimizer '%s': trailing ','", s);
        }
    }
    CHECK(s_check_cfg(&c));
    *cfg = c;
    return 0;
}
