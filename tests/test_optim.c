/* test_optim.c: SGD and Adam against hand-computed reference values (torch.optim semantics), partial
 * ranges matching the whole range, state accounting, and optim_parse's accepted and rejected input. */
#include "core/optim.h"
#include "core/err.h"
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static optim_t *make(optim_kind_t kind, float lr, float mom, float wd, float b1, float b2, float eps,
                     size_t n)
{
    optim_cfg_t c;
    optim_cfg_default(&c, kind);
    c.lr = lr;
    c.momentum = mom;
    c.weight_decay = wd;
    c.beta1 = b1;
    c.beta2 = b2;
    c.eps = eps;
    optim_t *o = NULL;
    cr_assert_eq(optim_new(&o, &c, n), 0, "%s", err_detail());
    return o;
}

/* One parameter through a sequence of gradients; expect the values after each step. */
static void run1(optim_t *o, float p0, const float *g, const double *want, int steps, float gs,
                 float lr, double tol)
{
    /* the parameter sits at element 2 of a 4-element optimizer, updated alone */
    float p = p0;
    for (int t = 0; t < steps; t++) {
        cr_assert_eq(optim_step(o, &p, &g[t], 2, 1, gs, lr, (uint64_t)t + 1), 0, "%s", err_detail());
        cr_assert(fabs(p - want[t]) <= tol, "step %d: got %.9g want %.9g", t + 1, (double)p, want[t]);
    }
}

Test(optim, sgd_momentum_weight_decay_reference)
{
    /* p=1, g=0.5, lr 0.1, momentum 0.9, wd 0.01. By hand:
     * 1: d = 0.5 + 0.01*1 = 0.51, buf = 0.51 (first step: buf = d), p = 1 - 0.051 = 0.949
     * 2: d = 0.5 + 0.00949 = 0.50949, buf = 0.459 + 0.50949 = 0.96849, p = 0.852151
     * 3: d = 0.50852151, buf = 0.871641 + 0.50852151 = 1.38016251, p = 0.714134749 */
    optim_t *o = make(OPT_SGD, 0.1f, 0.9f, 0.01f, 0, 0, 1, 4);
    const float g[3] = {0.5f, 0.5f, 0.5f};
    const double want[3] = {0.949, 0.852151, 0.714134749};
    run1(o, 1.0f, g, want, 3, 1.0f, 0.1f, 1e-6);
    float *bufs[OPTIM_MAX_BUFS];
    int nbuf;
    size_t count;
    cr_assert_eq(optim_state(o, bufs, &nbuf, &count), 0);
    cr_assert_eq(nbuf, 1);
    cr_assert_eq(count, 4);
    cr_assert(fabsf(bufs[0][2] - 1.38016251f) < 1e-6f);
    cr_assert_eq(bufs[0][0], 0.0f);                 /* untouched elements keep zero state */
    cr_assert_eq(optim_state_bytes(o), 4 * sizeof(float));
    optim_destroy(&o);
    cr_assert_null(o);
    optim_destroy(&o);                               /* safe twice */
}

Test(optim, sgd_grad_scale_and_plain)
{
    /* gs 2, lr 0.05, momentum 0.5: d = 2, -6, 0.5; buf = 2, -5, -2; p = -2.1, -1.85, -1.75 */
    optim_t *o = make(OPT_SGD, 0.05f, 0.5f, 0, 0, 0, 1, 4);
    const float g[3] = {1.0f, -3.0f, 0.25f};
    run1(o, -2.0f, g, (const double[]){-2.1, -1.85, -1.75}, 3, 2.0f, 0.05f, 1e-6);
    optim_destroy(&o);
    /* no momentum: no state; wd 0.1: p -= 0.05 * (g + 0.1 p): -2.04, -1.8798, -1.882901 */
    o = make(OPT_SGD, 0.05f, 0.0f, 0.1f, 0, 0, 1, 4);
    cr_assert_eq(optim_state_bytes(o), 0);
    int nbuf = -1;
    cr_assert_eq(optim_state(o, NULL, &nbuf, NULL), 0);
    cr_assert_eq(nbuf, 0);
    run1(o, -2.0f, g, (const double[]){-2.04, -1.8798, -1.882901}, 3, 1.0f, 0.05f, 1e-6);
    optim_destroy(&o);
}

Test(optim, adam_reference)
{
    /* p=0, g = 1, -1, 2, 0.5, lr 0.1, betas (0.9, 0.999), eps 1e-8. By hand for the first two:
     * 1: m = 0.1, v = 0.001, m^ = 1, v^ = 1 -> p = -0.1 / (1 + 1e-8) = -0.099999999
     * 2: m = 0.09 - 0.1 = -0.01, v = 0.000999 + 0.001 = 0.001999, m^ = -0.01/0.19, v^ = 1
     *    -> p = -0.1 + 0.1 * 0.0526315789 = -0.0947368421; steps 3, 4 likewise (double precision). */
    optim_t *o = make(OPT_ADAM, 0.1f, 0, 0, 0.9f, 0.999f, 1e-8f, 4);
    const float g[4] = {1.0f, -1.0f, 2.0f, 0.5f};
    run1(o, 0.0f, g, (const double[]){-0.099999999, -0.0947368412, -0.144561055, -0.19617917}, 4, 1.0f,
         0.1f, 2e-6);
    float *bufs[OPTIM_MAX_BUFS];
    int nbuf;
    cr_assert_eq(optim_state(o, bufs, &nbuf, NULL), 0);
    cr_assert_eq(nbuf, 2);
    cr_assert_eq(optim_state_bytes(o), 2 * 4 * sizeof(float));
    /* m after 4 steps: ((0.1*0.9 - 0.1)*0.9 + 0.2)*0.9 + 0.05 = 0.2219 */
    cr_assert(fabsf(bufs[0][2] - 0.2219f) < 1e-6f, "m = %.9g", (double)bufs[0][2]);
    optim_destroy(&o);
}

Test(optim, adam_weight_decay_grad_scale)
{
    /* p=1.5, g = 0.3, -0.2, 0.4 scaled by 0.5, wd 0.1 (L2 added to the gradient), lr 0.01,
     * betas (0.8, 0.99), eps 1e-3; reference computed in double from torch.optim.Adam's formula */
    optim_t *o = make(OPT_ADAM, 0.01f, 0, 0.1f, 0.8f, 0.99f, 1e-3f, 4);
    const float g[3] = {0.3f, -0.2f, 0.4f};
    run1(o, 1.5f, g, (const double[]){1.49003322, 1.48258037, 1.47372183}, 3, 0.5f, 0.01f, 2e-6);
    optim_destroy(&o);
}

Test(optim, partial_ranges_match_whole_range)
{
    const size_t n = 1003;
    for (int kind = 0; kind < 2; kind++) {
        optim_t *a = make((optim_kind_t)kind, 0.01f, 0.9f, 1e-3f, 0.9f, 0.999f, 1e-8f, n);
        optim_t *b = make((optim_kind_t)kind, 0.01f, 0.9f, 1e-3f, 0.9f, 0.999f, 1e-8f, n);
        float *pa = malloc(n * 4), *pb = malloc(n * 4), *g = malloc(n * 4);
        srand(7);
        for (size_t i = 0; i < n; i++) pa[i] = pb[i] = (float)rand() / RAND_MAX - 0.5f;
        for (uint64_t t = 1; t <= 5; t++) {
            for (size_t i = 0; i < n; i++) g[i] = (float)rand() / RAND_MAX - 0.5f;
            cr_assert_eq(optim_step(a, pa, g, 0, n, 0.5f, 0.01f, t), 0);
            /* b: three uneven pieces (as PS shards would), each with its own pointers */
            const size_t cut[4] = {0, 300, 301, n};
            for (int k = 0; k < 3; k++)
                cr_assert_eq(optim_step(b, pb + cut[k], g + cut[k], cut[k], cut[k + 1] - cut[k], 0.5f,
                                        0.01f, t), 0);
        }
        cr_assert_eq(memcmp(pa, pb, n * 4), 0, "kind %d: pieces differ from the whole", kind);
        float *sa[OPTIM_MAX_BUFS], *sb[OPTIM_MAX_BUFS];
        int na, nb;
        optim_state(a, sa, &na, NULL);
        optim_state(b, sb, &nb, NULL);
        for (int k = 0; k < na; k++) cr_assert_eq(memcmp(sa[k], sb[k], n * 4), 0);
        /* and the update did something */
        cr_assert_neq(memcmp(pa, g, n * 4), 0);
        free(pa); free(pb); free(g);
        optim_destroy(&a);
        optim_destroy(&b);
    }
}

Test(optim, step_errors)
{
    optim_t *o = make(OPT_ADAM, 0.1f, 0, 0, 0.9f, 0.999f, 1e-8f, 10);
    float p[10] = {0}, g[10] = {0};
    cr_assert_eq(optim_step(o, p, g, 5, 6, 1, 0.1f, 1), ERR_RANGE);
    cr_assert_eq(optim_step(o, p, g, 11, 0, 1, 0.1f, 1), ERR_RANGE);
    cr_assert_eq(optim_step(o, p, g, SIZE_MAX, 2, 1, 0.1f, 1), ERR_RANGE);
    cr_assert_eq(optim_step(o, p, g, 0, 10, 1, 0.1f, 0), ERR_INVAL);  /* Adam steps are 1-based */
    cr_assert_eq(optim_step(o, p, g, 0, 10, 1, -1.0f, 1), ERR_INVAL);
    cr_assert_eq(optim_step(o, NULL, g, 0, 10, 1, 0.1f, 1), ERR_INVAL);
    cr_assert_eq(optim_step(o, p, g, 10, 0, 1, 0.1f, 1), 0);          /* empty range at the end */
    cr_assert_eq(optim_step(o, p, g, 0, 10, 1, 0.1f, 1), 0);
    optim_destroy(&o);
    optim_cfg_t c;
    optim_cfg_default(&c, OPT_SGD);
    c.momentum = 1.0f;
    cr_assert_eq(optim_new(&o, &c, 4), ERR_INVAL);
    cr_assert_null(o);
}

Test(optim, parse_accepts)
{
    optim_cfg_t c;
    cr_assert_eq(optim_parse("sgd", &c), 0);
    cr_assert_eq(c.kind, OPT_SGD);
    cr_assert_float_eq(c.lr, 0.05f, 1e-9);
    cr_assert_float_eq(c.momentum, 0.9f, 1e-9);
    cr_assert_eq(c.weight_decay, 0.0f);
    cr_assert_eq(optim_parse("sgd:lr=0.1,momentum=0.9,wd=1e-4", &c), 0, "%s", err_detail());
    cr_assert_float_eq(c.lr, 0.1f, 1e-9);
    cr_assert_float_eq(c.weight_decay, 1e-4f, 1e-12);
    cr_assert_eq(optim_parse("sgd:momentum=0", &c), 0);
    cr_assert_eq(c.momentum, 0.0f);
    cr_assert_float_eq(c.lr, 0.05f, 1e-9);
    cr_assert_eq(optim_parse("adam", &c), 0);
    cr_assert_eq(c.kind, OPT_ADAM);
    cr_assert_float_eq(c.lr, 1e-3f, 1e-12);
    cr_assert_float_eq(c.beta1, 0.9f, 1e-9);
    cr_assert_float_eq(c.beta2, 0.999f, 1e-9);
    cr_assert_float_eq(c.eps, 1e-8f, 1e-15);
    cr_assert_eq(optim_parse("adam:lr=1e-3,beta1=0.9,beta2=0.999,eps=1e-8", &c), 0, "%s", err_detail());
    cr_assert_eq(optim_parse("adam:lr=3e-4,beta2=0.95,weight_decay=0.01", &c), 0);
    cr_assert_float_eq(c.lr, 3e-4f, 1e-12);
    cr_assert_float_eq(c.beta2, 0.95f, 1e-9);
    cr_assert_float_eq(c.weight_decay, 0.01f, 1e-9);
}

Test(optim, parse_rejects)
{
    const char *bad[] = {"", "sgdx", "rmsprop", "SGD", "sgd:", "sgd:lr", "sgd:lr=", "sgd:=3", "sgd:lr=abc",
                         "sgd:lr=0.1x", "sgd:lr=0.1,", "sgd:lr=0.1,,wd=0", "sgd,lr=0.1", "sgd:beta1=0.9",
                         "adam:momentum=0.9", "sgd:momentum=1.5", "sgd:momentum=1", "sgd:lr=-1",
                         "adam:eps=0", "adam:beta1=1", "sgd:lr=1e99", "sgd:lr=nan", "sgd:lr=inf",
                         "sgd:wd=-0.1", "sgd:learning_rate=0.1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        optim_cfg_t c;
        memset(&c, 0x77, sizeof c);
        optim_cfg_t before = c;
        err_clear();
        cr_assert_eq(optim_parse(bad[i], &c), ERR_INVAL, "'%s' accepted", bad[i]);
        cr_assert_neq(err_detail()[0], '\0', "'%s': no detail", bad[i]);
        cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "'%s': cfg written on error", bad[i]);
    }
    optim_cfg_t c;
    optim_parse("sgd:learning_rate=0.1", &c);
    cr_assert(strstr(err_detail(), "learning_rate"), "%s", err_detail());
    optim_parse("sgd:lr=abc", &c);
    cr_assert(strstr(err_detail(), "not a number"), "%s", err_detail());
}
