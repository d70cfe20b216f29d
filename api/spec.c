/* spec.c: the public API's own table of engines (ring, tree, ps: no harness registry, so the arrows
 * still point down) and the parser of an engine spec, "NAME[:OPT[=VALUE],...]", into the engine's
 * option blob through the engine's own option table. */
#include "api/api_int.h"
#include "allreduce-tree/tree.h"
#include "core/err.h"
#include "ps/ps.h"
#include "ring/ring.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const engine_ops_t *const s_engines[] = {&ring_engine, &tree_engine, &ps_engine};
#define S_N (sizeof s_engines / sizeof s_engines[0])

const char *api_engine_names(void) { return "ring, tree, ps"; }

void api_spec_free(api_spec_t *s)
{
    if (!s) return;
    free(s->opts);
    memset(s, 0, sizeof *s);
}

/* The option of e called key, or "<engine>-key" (ps-colocate as colocate); NULL when none. */
static const engine_opt_t *s_find_opt(const engine_ops_t *e, const char *key)
{
    char pref[96];
    snprintf(pref, sizeof pref, "%s-%s", e->name, key);
    for (const engine_opt_t *o = e->options; o && o->name; o++)
        if (!strcmp(o->name, key) || !strcmp(o->name, pref)) return o;
    return NULL;
}

/* "check, servers=S, colocate, ..." for an error message */
static void s_opt_names(const engine_ops_t *e, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "check");
    size_t pl = strlen(e->name);
    for (const engine_opt_t *o = e->options; o && o->name && off < len; o++) {
        const char *n = !strncmp(o->name, e->name, pl) && o->name[pl] == '-' ? o->name + pl + 1 : o->name;
        off += (size_t)snprintf(buf + off, len - off, ", %s%s%s", n, o->has_value ? "=" : "",
                                o->has_value ? (o->metavar ? o->metavar : "V") : "");
    }
}

int api_spec_parse(const char *spec, api_spec_t *out)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) return err_set(ERR_INVAL, "no engine given (engines: %s)", api_engine_names());
    if (strlen(spec) >= 512) return err_set(ERR_RANGE, "engine spec longer than 511 characters");
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    char *opts = strchr(buf, ':');
    if (opts) *opts++ = '\0';
    for (size_t i = 0; i < S_N && !out->ops; i++)
        if (!strcmp(buf, s_engines[i]->name)) out->ops = s_engines[i];
    if (!out->ops)
        return err_set(ERR_INVAL, "unknown engine '%s' in spec '%s' (engines: %s)", buf, spec, api_engine_names());
    const engine_ops_t *e = out->ops;
    if (e->opts_size) {
        out->opts = calloc(1, e->opts_size);
        if (!out->opts) return err_set(ERR_NOMEM, "engine options");
        if (e->opts_init) e->opts_init(out->opts);
    }
    char names[512];
    while (opts && *opts) {
        /* items are separated by ',' ; a value may itself hold ':' (mode=ssp:2) */
        char *next = strchr(opts, ',');
        if (next) *next++ = '\0';
        char *val = strchr(opts, '=');
        if (val) *val++ = '\0';
        if (!*opts) {
            api_spec_free(out);
            return err_set(ERR_INVAL, "engine spec '%s' has an empty option", spec);
        }
        if (!strcmp(opts, "check")) {
            if (val) {
                api_spec_free(out);
                return err_set(ERR_INVAL, "engine spec '%s': check takes no value", spec);
            }
            out->check = 1;
        } else {
            const engine_opt_t *o = s_find_opt(e, opts);
            int rc = 0;
            if (!o) {
                s_opt_names(e, names, sizeof names);
                rc = err_set(ERR_INVAL, "engine %s has no option '%s' (options: %s)", e->name, opts, names);
            } else if (o->has_value && (!val || !*val))
                rc = err_set(ERR_INVAL, "engine spec '%s': %s needs a value (%s)", spec, opts, o->want ? o->want : "a value");
            else if (!o->has_value && val)
                rc = err_set(ERR_INVAL, "engine spec '%s': %s is a switch and takes no value", spec, opts);
            else if (!e->opt_set || e->opt_set(out->opts, o->name, val) < 0)
                rc = err_set(ERR_INVAL, "engine spec '%s': bad %s=%s (want %s)", spec, opts, val ? val : "",
                             o->want ? o->want : "a valid value");
            if (rc < 0) {
                api_spec_free(out);
                return rc;
            }
        }
        opts = next;
    }
    if (e->opts_check && e->opts_check(out->opts) < 0) {
        char d[512];
        snprintf(d, sizeof d, "%s", err_detail());
        api_spec_free(out);
        return err_set(ERR_INVAL, "engine spec '%s': %s", spec, d);
    }
    return 0;
}
