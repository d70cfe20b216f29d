/* ps_van.c: ZeroMQ plumbing for the parameter server: multi-frame sends with zero-copy payloads and
 * whole-message receives bounded by a timeout (zmq_poll), never blocking forever. */
#include "ps/ps_van.h"
#include "core/err.h"
#include <errno.h>
#include <string.h>

void *ps_van_socket(void *ctx, int type, int timeout_ms, int64_t max_frame)
{
    void *s = zmq_socket(ctx, type);
    if (!s) return NULL;
    int64_t per = (int64_t)1 << 30, n = max_frame > 0 ? per / max_frame : 100000;
    int zero = 0, hwm = (int)(n < 1024 ? 1024 : n > 100000 ? 100000 : n), to = timeout_ms > 0 ? timeout_ms : -1, one = 1;
    if (max_frame > 0) zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_frame, sizeof max_frame);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &to, sizeof to);
    if (type == ZMQ_ROUTER) zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    return s;
}

static int s_errno_code(void)
{
    int e = zmq_errno();
    if (e == EAGAIN) return ERR_TIMEOUT;
    if (e == EHOSTUNREACH) return ERR_PEER;
    return ERR_IO;
}

int ps_van_send(void *sock, const void *ident, size_t ident_len, const wire_hdr_t *h,
                const ps_frame_t *frames, int nframes, uint64_t *sent)
{
    unsigned char hdr[WIRE_HDR_MAX];
    int hl = wire_encode(h, hdr, sizeof hdr);
    if (hl < 0) return hl;
    uint64_t bytes = 0;
    /* Prepare every frame first so a failure leaves nothing half-sent that we own. */
    if (ident) {
        if (zmq_send(sock, ident, ident_len, ZMQ_SNDMORE) < 0) {
            int rc = s_errno_code();
            /* zero-copy buffers were not handed over: release them as ZeroMQ would have */
            for (int i = 0; i < nframes; i++)
                if (frames[i].zc && frames[i].ffn) frames[i].ffn((void *)frames[i].data, frames[i].hint);
            return err_set(rc, "ps van: send failed: %s", zmq_strerror(zmq_errno()));
        }
    }
    if (zmq_send(sock, hdr, (size_t)hl, nframes > 0 ? ZMQ_SNDMORE : 0) < 0) {
        int rc = s_errno_code();
        for (int i = 0; i < nframes; i++)
            if (frames[i].zc && frames[i].ffn) frames[i].ffn((void *)frames[i].data, frames[i].hint);
        return err_set(rc, "ps van: send failed: %s", zmq_strerror(zmq_errno()));
    }
    bytes += (uint64_t)hl;
    int rc = 0;
    for (int i = 0; i < nframes; i++) {
        const ps_frame_t *f = &frames[i];
        int more = i + 1 < nframes ? ZMQ_SNDMORE : 0;
        zmq_msg_t m;
        if (f->zc && f->len > 0) {
            if (zmq_msg_init_data(&m, (void *)f->data, f->len, f->ffn, f->hint) != 0) {
                if (f->ffn) f->ffn((void *)f->data, f->hint);
                rc = ERR_NOMEM;
                zmq_msg_init(&m);
            }
        } else {
            if (zmq_msg_init_size(&m, f->len) != 0) {
                rc = ERR_NOMEM;
                zmq_msg_init(&m);
            } else if (f->len) {
                memcpy(zmq_msg_data(&m), f->data, f->len);
            }
            if (f->zc && f->ffn) f->ffn((void *)f->data, f->hint); /* zero-length zc frame: done */
        }
        /* Later parts of a message already started never block (ZeroMQ sends messages atomically). */
        if (zmq_msg_send(&m, sock, more) < 0) {
            zmq_msg_close(&m);
            if (!rc) rc = s_errno_code();
            continue;
        }
        bytes += f->len;
    }
    if (sent) *sent += bytes;
    if (rc < 0) return err_set(rc, "ps van: send of a payload frame failed");
    return 0;
}

int ps_van_recv(void *sock, ps_vmsg_t *m, int timeout_ms)
{
    ps_van_msg_reset(m);
    if (timeout_ms != 0) { /* 0: the first frame's non-blocking receive says whether one is there */
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        int pr = zmq_poll(&it, 1, timeout_ms < 0 ? -1 : timeout_ms);
        if (pr < 0) return zmq_errno() == EINTR ? ERR_TIMEOUT : ERR_IO;
        if (pr == 0) return ERR_TIMEOUT;
    }
    for (;;) {
        zmq_msg_t tmp, *dst = m->n < PS_VAN_MAX_FRAMES ? &m->f[m->n] : &tmp;
        zmq_msg_init(dst);
        if (zmq_msg_recv(dst, sock, m->n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(dst);
            if (m->n == 0 && zmq_errno() == EAGAIN) return ERR_TIMEOUT;
            ps_van_close_msg(m);
            return ERR_IO;
        }
        m->bytes += zmq_msg_size(dst);
        int more = zmq_msg_more(dst);
        if (dst == &tmp) {
            zmq_msg_close(&tmp);
            m->truncated = 1;
        } else {
            m->n++;
        }
        if (!more) break;
    }
    return 0;
}

void ps_van_close_msg(ps_vmsg_t *m)
{
    for (int i = 0; i < m->n; i++) zmq_msg_close(&m->f[i]);
    m->n = 0;
}
