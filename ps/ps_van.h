/* ps_van.h: the parameter server's ZeroMQ plumbing (ps-lite's "van"): send one message as a header
 * frame plus zero-copy payload frames, receive one whole multi-frame message with a timeout, socket
 * setup with the project's defaults. Nothing here knows about membership, barriers or heartbeats. */
#ifndef SB_PS_VAN_H
#define SB_PS_VAN_H
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>
#include "ps/wire.h"

#define PS_VAN_MAX_FRAMES 8     /* identity + header + payload frames we keep; more is malformed */

/* One payload frame to send. zc: hand `data` to ZeroMQ without copying; ZeroMQ calls ffn(data, hint)
 * once it is done with it (ffn NULL: the caller keeps data alive and unchanged until then). */
typedef struct {
    const void *data;
    size_t len;
    int zc;
    zmq_free_fn *ffn;
    void *hint;
} ps_frame_t;

/* A received message: frames[0..n) as they came (for a ROUTER, frames[0] is the peer's routing id).
 * truncated: the sender sent more than PS_VAN_MAX_FRAMES frames (the rest were dropped). */
typedef struct {
    zmq_msg_t f[PS_VAN_MAX_FRAMES];
    int n;
    int truncated;
    size_t bytes;
    /* a frame whose bytes were fetched elsewhere (a cross-memory read): ps_van_data/size of frame
     * ext_frame give ext / ext_len instead (ext_frame -1: none) */
    int ext_frame;
    const void *ext;
    size_t ext_len;
} ps_vmsg_t;

/* Socket with LINGER 0, the send timeout, ZMQ_MAXMSGSIZE max_frame (a peer cannot make us allocate
 * more for one frame: the connection is dropped instead), and finite high-water marks: about 1 GiB of
 * max_frame messages per peer and direction, at least 1024 and at most 100000 messages. */
void *ps_van_socket(void *ctx, int type, int timeout_ms, int64_t max_frame);
/* Send [ident][header encoded from h][frames...] (ident NULL for a DEALER). Adds bytes to *sent.
 * Returns 0, ERR_TIMEOUT (send timed out), ERR_PEER (unroutable peer) or ERR_IO. */
int  ps_van_send(void *sock, const void *ident, size_t ident_len, const wire_hdr_t *h,
                 const ps_frame_t *frames, int nframes, uint64_t *sent);
/* Receive one whole message, waiting at most timeout_ms (0: don't wait). 0, ERR_TIMEOUT or ERR_IO. */
int  ps_van_recv(void *sock, ps_vmsg_t *m, int timeout_ms);
void ps_van_close_msg(ps_vmsg_t *m);
/* An empty message: no frames, no bytes, no externally read frame (before filling one). */
static inline void ps_van_msg_reset(ps_vmsg_t *m)
{
    m->n = 0;
    m->truncated = 0;
    m->bytes = 0;
    m->ext_frame = -1;
    m->ext = NULL;
    m->ext_len = 0;
}
static inline const void *ps_van_data(ps_vmsg_t *m, int i)
{
    return i == m->ext_frame ? m->ext : zmq_msg_data(&m->f[i]);
}
static inline size_t ps_van_size(ps_vmsg_t *m, int i) { return i == m->ext_frame ? m->ext_len : zmq_msg_size(&m->f[i]); }

#endif
