/* ps_hb_srv.c: the server's reading of a worker's hello and heartbeats (ps_hb_srv.h), without sockets. */
#include "ps/ps_hb_srv.h"
#include "ps/ps_proto.h"
#include "core/err.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void s_refuse(ps_hbv_t *v, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void s_refuse(ps_hbv_t *v, int code, const char *fmt, ...)
{
    v->act = PS_HBV_REFUSE;
    v->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->why, sizeof v->why, fmt, ap);
    va_end(ap);
}

static void s_clear(ps_hbv_t *v)
{
    v->act = PS_HBV_DROP;
    v->code = 0;
    v->why[0] = 0;
    v->ival_ms = 0;
}

int ps_hb_of(uint64_t job, int nworkers, const void *ident, size_t idlen, const wire_hdr_t *h)
{
    if (!h || h->job != job || nworkers < 1 || h->sender >= (uint32_t)nworkers || idlen != PS_ID_LEN || !ident)
        return -1;
    unsigned char id[PS_ID_LEN];
    ps_hb_routing_id(job, (int)h->sender, id);
    return memcmp(ident, id, PS_ID_LEN) == 0 ? (int)h->sender : -1;
}

void ps_hello_step(const ps_hb_srv_t *c, int wi, int wrank, int hb, ps_hello_t *hs, const wire_hdr_t *h, int nfr,
                   const void *payload, size_t plen, ps_hbv_t *v)
{
    s_clear(v);
    const char *srole = hb ? "ps-hb-server" : "ps-server", *crole = hb ? "ps-hb-client" : "ps-client";
    unsigned char ctx[PS_AUTH_CTX_LEN];
    ps_auth_ctx(c->job, wi, ctx);
    if (h->aux != PS_HELLO_CHAL && h->aux != PS_HELLO_PROOF) {
        s_refuse(v, ERR_PROTO, "unknown hello kind %d", h->aux);
        return;
    }
    size_t want = h->aux == PS_HELLO_CHAL ? AUTH_NONCE_BYTES : AUTH_MAC_BYTES;
    if (h->nframes != 1 || nfr != 1 || !payload || plen != want) {
        s_refuse(v, ERR_PROTO, "hello of kind %d with a malformed payload", h->aux);
        return;
    }
    if (h->aux == PS_HELLO_CHAL) {
        memcpy(hs->nc, payload, AUTH_NONCE_BYTES);
        auth_challenge(hs->ns);
        hs->chal = 1;
        memcpy(v->out, hs->ns, AUTH_NONCE_BYTES);
        auth_respond(c->auth, srole, hs->nc, hs->ns, ctx, sizeof ctx, v->out + AUTH_NONCE_BYTES);
        v->act = PS_HBV_ANSWER;
        return;
    }
    int ok = hs->chal && auth_verify(c->auth, crole, hs->nc, hs->ns, ctx, sizeof ctx, payload) == 0;
    hs->chal = 0;
    if (!ok) {
        s_refuse(v, ERR_AUTH, "worker rank %d could not prove it knows the job secret%s: turned away", wrank,
                 hb ? " (its heartbeat connection)" : "");
        return;
    }
    hs->authed = 1;
    v->act = PS_HBV_AUTHED;
}

void ps_hb_step(const ps_hb_srv_t *c, int wi, int wrank, ps_hello_t *hs, int gone, const wire_hdr_t *h, int nfr,
                int truncated, const void *payload, size_t plen, ps_hbv_t *v)
{
    s_clear(v);
    if (gone) return;
    if (truncated || nfr < 0 || (uint32_t)nfr != h->nframes) {
        s_refuse(v, ERR_PROTO, "frame count %d does not match the header's %u", nfr, h->nframes);
        return;
    }
    if (h->type != WIRE_HELLO) {
        s_refuse(v, ERR_PROTO, "a %s on worker rank %d's heartbeat connection", wire_type_name(h->type), wrank);
        return;
    }
    if (h->aux == PS_HELLO_CHAL || h->aux == PS_HELLO_PROOF) {
        ps_hello_step(c, wi, wrank, 1, hs, h, nfr, payload, plen, v);
        return;
    }
    if (h->aux != PS_HELLO_HEARTBEAT || h->nframes != 0) {
        s_refuse(v, ERR_PROTO, "hello of kind %d on worker rank %d's heartbeat connection", h->aux, wrank);
        return;
    }
    if (c->auth && c->auth->set && !hs->authed) {
        s_refuse(v, ERR_AUTH, "a heartbeat claiming worker rank %d, which has not proven it knows the job secret: "
                 "turned away", wrank);
        return;
    }
    int to = c->timeout_ms > 0 ? c->timeout_ms : 60000;
    v->ival_ms = h->count < 1 ? 1 : h->count > (uint64_t)to ? to : (int)h->count;
    v->act = PS_HBV_BEAT;
}
