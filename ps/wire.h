/* wire.h: the wire codec: a MessagePack header frame (fixed schema, strictly validated) that is
 * followed on the transport by raw payload frames. Decoding never trusts the peer: a short,
 * oversized, truncated, wrong-type or unknown message is rejected with ERR_PROTO, never a crash. */
#ifndef SB_WIRE_H
#define SB_WIRE_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"

#define WIRE_MAGIC   0x5342u      /* "SB" */
#define WIRE_VERSION 1u
#define WIRE_HDR_MAX 256          /* an encoded header never exceeds this many bytes */

typedef enum {
    WIRE_PUSH = 1,     /* worker -> server: gradient partition */
    WIRE_PULL = 2,     /* worker -> server: ask for parameters of version >= clock */
    WIRE_PARAMS = 3,   /* server -> worker: parameter partition */
    WIRE_ACK = 4,      /* server -> worker: push accepted */
    WIRE_INIT = 5,     /* worker 0 -> server: initial parameters */
    WIRE_ERROR = 6,    /* either way: a rejected request; `aux` holds the error code */
    WIRE_BYE = 7,      /* worker -> server: leaving cleanly */
    WIRE_DATA = 8,     /* generic point-to-point payload (host transports) */
    WIRE_HELLO = 9,    /* first message of a connection */
    WIRE_SAVE = 10,    /* worker 0 -> server: write your checkpoint shard; server -> worker 0: written (ps_ckpt.h) */
    WIRE_TYPE_MAX = 11
} wire_type_t;

typedef struct {
    uint32_t type;       /* wire_type_t */
    uint32_t sender;     /* rank of the sender */
    uint64_t job;        /* job id: messages from another job are rejected */
    uint64_t key;        /* partition / tensor key */
    uint64_t clock;      /* clock or version */
    uint64_t offset;     /* element offset inside the key */
    uint64_t count;      /* elements in the payload */
    uint32_t dtype;      /* dtype_t of the payload */
    int32_t  aux;        /* type-specific (error code, flags) */
    uint32_t nframes;    /* payload frames that follow the header */
} wire_hdr_t;

/* Encode into buf (cap bytes). Returns bytes written, or ERR_RANGE if it does not fit, ERR_INVAL for
 * an invalid header (unknown type or dtype). */
int wire_encode(const wire_hdr_t *h, void *buf, size_t cap);
/* Decode and validate: exactly the expected schema (magic, version, every field present with the
 * right type and range), no trailing bytes. Returns 0 or ERR_PROTO (err_detail says why). */
int wire_decode(const void *buf, size_t len, wire_hdr_t *out);
/* Check a decoded header's payload against what the receiver expects: payload_bytes must equal
 * count * dt_size(dtype) and count must be <= max_count. 0 or ERR_PROTO. */
int wire_check_payload(const wire_hdr_t *h, size_t payload_bytes, size_t max_count);
const char *wire_type_name(uint32_t type);

#endif
