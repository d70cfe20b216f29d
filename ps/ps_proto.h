/* ps_proto.h: the parameter server's protocol, shared by its workers (ps.c), its servers
 * (ps_server.c) and the tests: header flags, the fixed step-meta frame, worker routing ids, the job
 * id hash, and the partition layout (how a tensor is cut into partitions and which server owns each).
 *
 * Messages (header frame = ps/wire.h, then `nframes` payload frames):
 *   PUSH   worker->server  key, clock, offset (in the partition), count, dtype   [meta][values]
 *          (AR) with PS_F_COMMIT: the push completes this worker's round and commits it, as a
 *          commit-PULL right behind it would (one message instead of two per partition).
 *   PULL   worker->server  key, clock (version wanted), dtype, aux flags          [meta]
 *          with PS_F_COMMIT: "my pushes for clock-1 are all sent" (+ PS_F_OVERFLOW: my step had
 *          non-finite gradients). A pull without COMMIT just asks for a version (attach).
 *   INIT   worker0->server key, clock = version 0, offset = partition start, count, aux = grad dtype
 *                                                                            [meta][optim_cfg][values]
 *   PARAMS server->worker  key, clock = version, count, dtype, aux flags        [values]
 *   ERROR  server->worker  key, clock of the request, aux = error code          [text]
 *   BYE    worker->server  (no payload)
 *   HELLO  worker->server  aux PS_HELLO_KEEPALIVE: a keep-alive (no payload; a lane's wake-up);
 *          aux PS_HELLO_CHAL: [the worker's nonce] -> server answers HELLO [its nonce | its MAC];
 *          aux PS_HELLO_PROOF: [the worker's MAC]. With a job secret (core/auth.h) a worker's messages
 *          are accepted only after its proof: MACs over both nonces and ps_auth_ctx (job id, rank).
 *          aux PS_HELLO_LANE: [the name of a shared-memory lane, ps_lane.h] -> HELLO PS_HELLO_LANE (no
 *          payload) once the server mapped it, or ERROR. A keep-alive HELLO from a server is a wake-up.
 *          aux PS_HELLO_HEARTBEAT: a worker's heartbeat (no payload; count = its interval in ms), sent only
 *          on its heartbeat connection (routing id ps_hb_routing_id, ps_hb.h), which runs the CHAL/PROOF
 *          hello of its own (roles "ps-hb-server" / "ps-hb-client") and carries nothing else.
 * Every meta carries the tensor's total element count, so a server can check any key against the
 * layout both sides compute from it. */
#ifndef SB_PS_PROTO_H
#define SB_PS_PROTO_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"

/* header aux flags */
#define PS_F_COMMIT   0x01   /* PULL: commits this worker's pushes for clock-1 */
#define PS_F_OVERFLOW 0x02   /* PULL(commit): the worker saw non-finite gradients this step */
#define PS_F_AR       0x04   /* PUSH/PULL/PARAMS: raw allreduce key space (no optimizer) */
#define PS_F_AVG      0x08   /* PULL(commit, AR): average instead of sum */
#define PS_F_STALE    0x10   /* PARAMS: the pull waited on the staleness bound (SSP) */
#define PS_F_SKIPPED  0x20   /* PARAMS: the update of this clock was skipped (non-finite gradients) */
#define PS_F_MOVE     0x40   /* PUSH(AR): move the bytes, reduce nothing (the transport ceiling, OP_MOVE) */
#define PS_F_CMA      0x80   /* PUSH: the payload frame is a cma_desc_t (core/cma.h): read it from the worker;
                              * PUSH/PULL: reply by descriptor; PARAMS: the payload is a descriptor */
#define PS_F_ALL      0xff

/* The fixed meta frame (host byte order: every rank of a job runs the same build). */
typedef struct {
    uint64_t total;      /* elements of the whole tensor (params arena or allreduce buffer) */
    uint64_t step;       /* the trainer's step number (informational) */
    float    lr;         /* learning rate for this step */
    float    inv_scale;  /* AMP: 1 / loss scale */
} ps_meta_t;

/* HELLO kinds (header aux) */
#define PS_HELLO_KEEPALIVE 0
#define PS_HELLO_CHAL      1
#define PS_HELLO_PROOF     2
#define PS_HELLO_LANE      3  /* worker: [name of its lane mapping]; server: accepted (no payload) or ERROR */
#define PS_HELLO_HEARTBEAT 4  /* worker, on its heartbeat connection: alive (count: its interval, ms) */
#define PS_AUTH_CTX_LEN    12
/* The context every PS hello MAC covers: the job id (u64 LE) and the worker's claimed rank (u32 LE). */
void ps_auth_ctx(uint64_t job, int rank, unsigned char out[PS_AUTH_CTX_LEN]);
/* The largest frame a PS socket accepts (ZMQ_MAXMSGSIZE) for partitions of part_bytes. */
int64_t ps_max_frame(size_t part_bytes);

#define PS_ID_LEN 12     /* routing id of a worker's DEALER: "psw" + 1 pad + u32 rank + u32 tag */

/* The routing id worker `rank` uses for job `job`. */
void     ps_routing_id(uint64_t job, int rank, unsigned char out[PS_ID_LEN]);
/* The routing id of worker `rank`'s heartbeat connection ("psh" instead of "psw"). */
void     ps_hb_routing_id(uint64_t job, int rank, unsigned char out[PS_ID_LEN]);
/* Heartbeats for a job of timeout_ms (<= 0: 60 s): a worker beats every *ival_ms (PS_HB_INTERVAL_MS, less
 * when the deadline is short), a server declares a worker it waits on gone after *deadline_ms without
 * one (PS_HB_DEADLINE_MS, at most half the timeout, and never under PS_HB_MIN_BEATS intervals). */
#define PS_HB_INTERVAL_MS 1000
#define PS_HB_DEADLINE_MS 10000
#define PS_HB_MIN_BEATS   5
void     ps_hb_times(int timeout_ms, int *ival_ms, int *deadline_ms);
/* FNV-1a 64 of a job name. */
uint64_t ps_job_hash(const char *job);
/* The job id in every header of engine instance `gen` (1 for the first PS engine a process creates):
 * messages of another job or of an earlier engine instance are foreign. */
static inline uint64_t ps_job_id(const char *job, unsigned gen) { return ps_job_hash(job) + gen; }

/* Layout of a tensor of `total` elements of `esz` bytes over `nservers` servers: partitions of
 * part_bytes (at most ceil(total / nservers) elements, so small tensors still spread), each owned by
 * the server with the fewest bytes so far (ties: lowest index): bytes balanced, not key ranges. */
typedef struct {
    size_t total, part_elems, nparts;
    int nservers;
} ps_layout_t;

void   ps_layout_init(ps_layout_t *l, size_t total, size_t esz, size_t part_bytes, int nservers);
size_t ps_part_start(const ps_layout_t *l, size_t k);
size_t ps_part_len(const ps_layout_t *l, size_t k);
/* Owner of partition k (k < nparts). */
int    ps_part_owner(const ps_layout_t *l, size_t k);
/* Partitions [k0, k1) overlapping the element range [off, off+n). */
void   ps_part_range(const ps_layout_t *l, size_t off, size_t n, size_t *k0, size_t *k1);

#define PS_DEFAULT_PART_BYTES ((size_t)4 << 20)

#endif
