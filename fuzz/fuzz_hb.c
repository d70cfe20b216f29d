/* fuzz_hb.c: libFuzzer target for the PS server's reading of workers' hellos and heartbeats (ps/ps_hb_srv.c).
 *
 * A session of messages from 3 workers, each as the server's ROUTER delivers it (routing id, header
 * frame, payload frames), classified (ps_hb_of) and handed to ps_hb_step (heartbeat connection) or
 * ps_hello_step (a data connection's CHAL/PROOF), against a model of what each connection has proven.
 * Input: a mode byte (bit 0: the job has a secret; bits 1-2: the timeout, 0 / 1 / 6000 / 60000 ms),
 * then messages: an op byte (bits 0-1: routing id: the sender's heartbeat id, its data id, the next
 * worker's heartbeat id, 12 bytes of input; bit 2: the header frame is raw input (a length byte and
 * bytes) instead of fields; bit 3: the socket layer dropped frames (truncated); bits 4-5 == 3: another
 * job's id; bits 6-7 == 3: the sender says BYE first); the header fields (type, sender, aux, u16
 * count, nframes); a frame count byte, and per frame a length byte and bytes (255: a MAC over the
 * connection's last nonces by role byte % 4: ps-hb-client, ps-client, ps-hb-server, ps-server).
 * Oracle: a connection is authenticated only by a proof, right after a challenge, carrying the MAC of
 * its own client role (any well-formed proof without a secret); a beat is accepted exactly when it is
 * well formed and its connection is authenticated (or there is no secret), with its interval clamped
 * to [1, timeout]; an answer carries the server's MAC of its role; a worker gone is never answered;
 * every refusal has an error code and a text. */
#include "fuzz/fuzz.h"
#include "ps/ps_hb_srv.h"
#include "ps/ps_proto.h"
#include "core/err.h"

#define W 3
#define JOB 0x5eed5eed12345678ull
#define MAX_MSG 512

static const char *const s_roles[4] = {"ps-hb-client", "ps-client", "ps-hb-server", "ps-server"};

typedef struct { int chal, authed; unsigned char nc[AUTH_NONCE_BYTES], ns[AUTH_NONCE_BYTES]; } model_t;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    fuzz_init();
    (void)fuzz_auth();
    return 0;
}

static int s_same(const wire_hdr_t *a, const wire_hdr_t *b)
{
    return a->type == b->type && a->sender == b->sender && a->job == b->job && a->key == b->key &&
           a->clock == b->clock && a->offset == b->offset && a->count == b->count && a->dtype == b->dtype &&
           a->aux == b->aux && a->nframes == b->nframes;
}

static void s_check_refusal(const ps_hbv_t *v)
{
    FUZZ_ASSERT(v->code < 0 && v->why[0] && memchr(v->why, 0, sizeof v->why));
}

/* One hello step's decision against the model m of that connection (hb: the heartbeat connection). */
static void s_check_hello(const ps_hb_srv_t *c, int wi, int hb, model_t *m, const ps_hello_t *hs,
                          const wire_hdr_t *h, int nfr, const uint8_t *pl, size_t plen, const ps_hbv_t *v)
{
    unsigned char ctx[PS_AUTH_CTX_LEN];
    ps_auth_ctx(c->job, wi, ctx);
    int secret = c->auth && c->auth->set;
    int formed = h->nframes == 1 && nfr == 1 && plen == 32;
    if (h->aux == PS_HELLO_CHAL && formed) {
        FUZZ_ASSERT(v->act == PS_HBV_ANSWER);
        memcpy(m->nc, pl, AUTH_NONCE_BYTES);
        memcpy(m->ns, v->out, AUTH_NONCE_BYTES);
        m->chal = 1;
        FUZZ_ASSERT(auth_verify(c->auth, hb ? "ps-hb-server" : "ps-server", m->nc, m->ns, ctx, sizeof ctx,
                                v->out + AUTH_NONCE_BYTES) == 0);
        unsigned char mac[AUTH_MAC_BYTES];
        auth_respond(c->auth, hb ? "ps-server" : "ps-hb-server", m->nc, m->ns, ctx, sizeof ctx, mac);
        if (secret) FUZZ_ASSERT(memcmp(mac, v->out + AUTH_NONCE_BYTES, AUTH_MAC_BYTES) != 0); /* never the other role's */
    } else if (h->aux == PS_HELLO_PROOF && formed) {
        unsigned char mac[AUTH_MAC_BYTES];
        auth_respond(c->auth, hb ? "ps-hb-client" : "ps-client", m->nc, m->ns, ctx, sizeof ctx, mac);
        int good = m->chal && (!secret || !memcmp(mac, pl, AUTH_MAC_BYTES));
        FUZZ_ASSERT(v->act == (good ? PS_HBV_AUTHED : PS_HBV_REFUSE));
        if (!good) FUZZ_ASSERT(v->code == ERR_AUTH);
        m->chal = 0;
        m->authed |= good;
    } else {
        FUZZ_ASSERT(v->act == PS_HBV_REFUSE && v->code == ERR_PROTO);
    }
    if (v->act == PS_HBV_REFUSE) s_check_refusal(v);
    FUZZ_ASSERT(hs->authed == m->authed && hs->chal == m->chal);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size, 0};
    uint8_t mode = fuzz_u8(&in);
    static const int tmo[4] = {0, 1, 6000, 60000};
    ps_hb_srv_t c = {.auth = (mode & 1) ? fuzz_auth() : NULL, .job = JOB, .timeout_ms = tmo[(mode >> 1) & 3]};
    int secret = (mode & 1) != 0, to = c.timeout_ms > 0 ? c.timeout_ms : 60000;
    ps_hello_t hb[W], dc[W];
    model_t mhb[W], mdc[W];
    int gone[W] = {0};
    memset(hb, 0, sizeof hb); memset(dc, 0, sizeof dc);
    memset(mhb, 0, sizeof mhb); memset(mdc, 0, sizeof mdc);
    int nbeat = 0, nauth = 0;
    for (int n = 0; n < MAX_MSG && fuzz_left(&in); n++) {
        uint8_t op = fuzz_u8(&in);
        /* the header frame, as the server decodes it */
        wire_hdr_t h;
        int hok;
        if (op & 4) {
            size_t hl;
            const uint8_t *hb_bytes = fuzz_bytes(&in, fuzz_u8(&in), &hl);
            hok = wire_decode(hb_bytes, hl, &h) == 0;
        } else {
            uint8_t t = fuzz_u8(&in), snd = fuzz_u8(&in), aux = fuzz_u8(&in);
            uint16_t cnt = fuzz_u16(&in);
            uint8_t nf = fuzz_u8(&in);
            wire_hdr_t e;
            memset(&e, 0, sizeof e);
            e.type = t % WIRE_TYPE_MAX ? t % WIRE_TYPE_MAX : WIRE_HELLO;
            e.sender = snd % (W + 1u);
            e.job = ((op >> 4) & 3) == 3 ? JOB + 1 : JOB;
            e.count = cnt == 0xffff ? UINT64_MAX : cnt;
            e.dtype = DT_F32;
            e.aux = (int8_t)aux;
            e.nframes = nf % 4;
            unsigned char enc[WIRE_HDR_MAX];
            int el = wire_encode(&e, enc, sizeof enc);
            FUZZ_ASSERT(el > 0);
            hok = wire_decode(enc, (size_t)el, &h) == 0;
            FUZZ_ASSERT(hok && s_same(&e, &h));
        }
        int snd = hok && h.sender < W ? (int)h.sender : 0;
        /* the routing id */
        unsigned char id[PS_ID_LEN];
        switch (op & 3) {
        case 0: ps_hb_routing_id(JOB, snd, id); break;
        case 1: ps_routing_id(JOB, snd, id); break;
        case 2: ps_hb_routing_id(JOB, (snd + 1) % W, id); break;
        default: {
            size_t got;
            const uint8_t *b = fuzz_bytes(&in, PS_ID_LEN, &got);
            memset(id, 0, sizeof id);
            memcpy(id, b, got);
        }
        }
        /* payload frames */
        int nfr = fuzz_u8(&in) % 4;
        uint8_t fr[4][256];
        size_t fl[4] = {0};
        for (int i = 0; i < nfr; i++) {
            uint8_t l = fuzz_u8(&in);
            if (l == 255) {
                uint8_t r = fuzz_u8(&in) % 4;
                const model_t *m = (op & 3) == 1 ? &mdc[snd] : &mhb[snd];
                unsigned char ctx[PS_AUTH_CTX_LEN];
                ps_auth_ctx(JOB, snd, ctx);
                auth_respond(c.auth, s_roles[r], m->nc, m->ns, ctx, sizeof ctx, fr[i]);
                fl[i] = AUTH_MAC_BYTES;
                continue;
            }
            const uint8_t *b = fuzz_bytes(&in, l, &fl[i]);
            memcpy(fr[i], b, fl[i]);
        }
        int trunc = (op & 8) != 0;
        if (!hok) continue; /* refused as malformed before anything looks at the connection */
        if (((op >> 6) & 3) == 3 && h.sender < W) gone[h.sender] = 1;
        int want = h.job == JOB && h.sender < W && (op & 3) == 0 ? (int)h.sender : -1;
        if ((op & 3) == 3) {
            unsigned char hid[PS_ID_LEN];
            if (h.job == JOB && h.sender < W) ps_hb_routing_id(JOB, (int)h.sender, hid);
            if (h.job == JOB && h.sender < W && !memcmp(id, hid, PS_ID_LEN)) want = (int)h.sender;
        }
        int wi = ps_hb_of(JOB, W, id, sizeof id, &h);
        FUZZ_ASSERT(wi == want);
        ps_hbv_t v;
        memset(&v, 0x5a, sizeof v);
        if (wi < 0) {
            /* a data connection's hello (what the server does after its own checks of the sender) */
            if ((op & 3) != 1 || h.job != JOB || h.sender >= W || trunc || (uint32_t)nfr != h.nframes ||
                h.type != WIRE_HELLO || (h.aux != PS_HELLO_CHAL && h.aux != PS_HELLO_PROOF) || gone[h.sender])
                continue;
            int w = (int)h.sender;
            ps_hello_step(&c, w, w, 0, &dc[w], &h, nfr, nfr ? fr[0] : NULL, fl[0], &v);
            s_check_hello(&c, w, 0, &mdc[w], &dc[w], &h, nfr, fr[0], fl[0], &v);
            continue;
        }
        ps_hb_step(&c, wi, wi, &hb[wi], gone[wi], &h, nfr, trunc, nfr ? fr[0] : NULL, fl[0], &v);
        if (gone[wi]) {
            FUZZ_ASSERT(v.act == PS_HBV_DROP);
            continue;
        }
        if (trunc || (uint32_t)nfr != h.nframes || h.type != WIRE_HELLO) {
            FUZZ_ASSERT(v.act == PS_HBV_REFUSE && v.code == ERR_PROTO);
            s_check_refusal(&v);
            continue;
        }
        if (h.aux == PS_HELLO_CHAL || h.aux == PS_HELLO_PROOF) {
            s_check_hello(&c, wi, 1, &mhb[wi], &hb[wi], &h, nfr, fr[0], fl[0], &v);
            nauth += v.act == PS_HBV_AUTHED;
            continue;
        }
        if (h.aux != PS_HELLO_HEARTBEAT || h.nframes != 0) {
            FUZZ_ASSERT(v.act == PS_HBV_REFUSE && v.code == ERR_PROTO);
            s_check_refusal(&v);
            continue;
        }
        if (secret && !mhb[wi].authed) {
            FUZZ_ASSERT(v.act == PS_HBV_REFUSE && v.code == ERR_AUTH);
            s_check_refusal(&v);
            continue;
        }
        FUZZ_ASSERT(v.act == PS_HBV_BEAT);
        uint64_t iv = h.count < 1 ? 1 : h.count > (uint64_t)to ? (uint64_t)to : h.count;
        FUZZ_ASSERT(v.ival_ms >= 1 && v.ival_ms <= to && (uint64_t)v.ival_ms == iv);
        nbeat++;
    }
    if (fuzz_verbose) fprintf(stderr, "hb: mode %u: %d proofs accepted, %d beats accepted\n", mode, nauth, nbeat);
    return 0;
}
