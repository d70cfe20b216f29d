/* wire.c: the MessagePack header codec (msgpack-c) with strict validation of everything a peer sends.
 *
 * Layout: one MessagePack array of WIRE_NFIELDS integers, in this order:
 *   [magic, version, type, sender, job, key, clock, offset, count, dtype, aux, nframes]
 * (an array rather than a map: 40-70 bytes instead of ~120, and "missing field" is a short array).
 * Decoding is two passes over at most WIRE_HDR_MAX bytes: s_scan walks the raw bytes once to check the
 * framing (truncation, trailing bytes, invalid type bytes) and that no container claims more elements
 * than bytes remain, so msgpack_unpack, which preallocates every container it meets, can never be
 * asked for more than a few KiB; then msgpack_unpack builds the object in a small zone and every field
 * is checked for type and range. */
#include "ps/wire.h"
#include "core/err.h"
#include <msgpack.h>
#include <stdbool.h>
#include <string.h>

enum {
    F_MAGIC, F_VERSION, F_TYPE, F_SENDER, F_JOB, F_KEY, F_CLOCK, F_OFFSET, F_COUNT, F_DTYPE, F_AUX,
    F_NFRAMES, WIRE_NFIELDS
};
static const char *const s_field[WIRE_NFIELDS] = {
    "magic", "version", "type", "sender", "job", "key", "clock", "offset", "count", "dtype", "aux",
    "nframes",
};

const char *wire_type_name(uint32_t type)
{
    switch (type) {
    case WIRE_PUSH: return "push";
    case WIRE_PULL: return "pull";
    case WIRE_PARAMS: return "params";
    case WIRE_ACK: return "ack";
    case WIRE_INIT: return "init";
    case WIRE_ERROR: return "error";
    case WIRE_BYE: return "bye";
    case WIRE_DATA: return "data";
    case WIRE_HELLO: return "hello";
    case WIRE_SAVE: return "save";
    default: return "unknown";
    }
}

/* ---------------------------------------------------------------- encode */

typedef struct { unsigned char *p; size_t len, cap; } s_out_t;

static int s_write(void *data, const char *buf, size_t len)
{
    s_out_t *o = data;
    if (len > o->cap - o->len) return -1;
    memcpy(o->p + o->len, buf, len);
    o->len += len;
    return 0;
}

int wire_encode(const wire_hdr_t *h, void *buf, size_t cap)
{
    if (!h || (!buf && cap)) return err_set(ERR_INVAL, "wire_encode: NULL argument");
    if (h->type == 0 || h->type >= WIRE_TYPE_MAX)
        return err_set(ERR_INVAL, "wire_encode: unknown message type %u", h->type);
    if (h->dtype >= DT_COUNT) return err_set(ERR_INVAL, "wire_encode: unknown dtype %u", h->dtype);
    s_out_t o = {buf, 0, cap};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &o, s_write);
    int bad = 0;
    bad |= msgpack_pack_array(&pk, WIRE_NFIELDS);
    bad |= msgpack_pack_uint16(&pk, (uint16_t)WIRE_MAGIC);
    bad |= msgpack_pack_uint32(&pk, WIRE_VERSION);
    bad |= msgpack_pack_uint32(&pk, h->type);
    bad |= msgpack_pack_uint32(&pk, h->sender);
    bad |= msgpack_pack_uint64(&pk, h->job);
    bad |= msgpack_pack_uint64(&pk, h->key);
    bad |= msgpack_pack_uint64(&pk, h->clock);
    bad |= msgpack_pack_uint64(&pk, h->offset);
    bad |= msgpack_pack_uint64(&pk, h->count);
    bad |= msgpack_pack_uint32(&pk, h->dtype);
    bad |= msgpack_pack_int32(&pk, h->aux);
    bad |= msgpack_pack_uint32(&pk, h->nframes);
    if (bad) return err_set(ERR_RANGE, "wire_encode: header does not fit in %zu bytes", cap);
    return (int)o.len;
}

/* ---------------------------------------------------------------- decode */

static uint64_t s_be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

/* Walk one complete MessagePack object at p[0..len) without building it. Returns the bytes it spans,
 * or ERR_PROTO (with detail) if it is truncated, uses the reserved byte 0xc1, or has a container that
 * claims more elements than bytes remain. */
static int s_scan(const unsigned char *p, size_t len)
{
    size_t pos = 0;
    uint64_t pending = 1;                          /* objects still to read */
    while (pending) {
        if (pos >= len) return err_set(ERR_PROTO, "wire: header truncated at byte %zu", pos);
        unsigned char b = p[pos++];
        pending--;
        uint64_t skip = 0, items = 0;              /* payload bytes to skip; children to read */
        int lenbytes = 0;                          /* str/bin/ext: size of the length prefix */
        int ext = 0;
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
            /* fixint, nil, bool */
        } else if (b <= 0x8f) items = 2u * (b & 0x0fu);
        else if (b <= 0x9f) items = b & 0x0fu;
        else if (b <= 0xbf) skip = b & 0x1fu;
        else switch (b) {
            case 0xc4: lenbytes = 1; break;             /* bin 8/16/32 */
            case 0xc5: lenbytes = 2; break;
            case 0xc6: lenbytes = 4; break;
            case 0xc7: lenbytes = 1; ext = 1; break;    /* ext 8/16/32 */
            case 0xc8: lenbytes = 2; ext = 1; break;
            case 0xc9: lenbytes = 4; ext = 1; break;
            case 0xca: skip = 4; break;                 /* float 32/64 */
            case 0xcb: skip = 8; break;
            case 0xcc: case 0xd0: skip = 1; break;      /* (u)int 8/16/32/64 */
            case 0xcd: case 0xd1: skip = 2; break;
            case 0xce: case 0xd2: skip = 4; break;
            case 0xcf: case 0xd3: skip = 8; break;
            case 0xd4: skip = 2; break;                 /* fixext 1/2/4/8/16 (+ type byte) */
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xd9: lenbytes = 1; break;             /* str 8/16/32 */
            case 0xda: lenbytes = 2; break;
            case 0xdb: lenbytes = 4; break;
            case 0xdc: case 0xdd: case 0xde: case 0xdf: { /* array 16/32, map 16/32 */
                int nb = (b == 0xdc || b == 0xde) ? 2 : 4;
                if (len - pos < (size_t)nb)
                    return err_set(ERR_PROTO, "wire: header truncated at byte %zu", len);
                uint64_t n = s_be(p + pos, nb);
                pos += (size_t)nb;
                items = (b >= 0xde) ? 2 * n : n;
                break;
            }
            default:
                return err_set(ERR_PROTO, "wire: invalid MessagePack byte 0x%02x at %zu", b, pos - 1);
            }
        if (lenbytes) {
            if (len - pos < (size_t)lenbytes)
                return err_set(ERR_PROTO, "wire: header truncated at byte %zu", len);
            skip = s_be(p + pos, lenbytes) + (uint64_t)ext;
            pos += (size_t)lenbytes;
        }
        if (skip > len - pos) return err_set(ERR_PROTO, "wire: header truncated at byte %zu", len);
        pos += (size_t)skip;
        /* every child takes at least one byte: a claim beyond what is left is a lie (or truncation) */
        if (items > len - pos || pending + items > len)
            return err_set(ERR_PROTO, "wire: container at byte %zu claims %llu items in %zu bytes",
                           pos, (unsigned long long)items, len - pos);
        pending += items;
    }
    return (int)pos;
}

static const char *s_otype(msgpack_object_type t)
{
    switch (t) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return "uint";
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "negative int";
    case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: return "float";
    case MSGPACK_OBJECT_STR: return "str";
    case MSGPACK_OBJECT_ARRAY: return "array";
    case MSGPACK_OBJECT_MAP: return "map";
    case MSGPACK_OBJECT_BIN: return "bin";
    case MSGPACK_OBJECT_EXT: return "ext";
    default: return "?";
    }
}

/* An unsigned field in [0, max]. */
static int s_uint(const msgpack_object *o, int f, uint64_t max, uint64_t *out)
{
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return err_set(ERR_PROTO, "wire: field %s is negative (%lld)", s_field[f], (long long)o->via.i64);
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return err_set(ERR_PROTO, "wire: field %s has type %s, expected an unsigned integer", s_field[f],
                       s_otype(o->type));
    if (o->via.u64 > max)
        return err_set(ERR_PROTO, "wire: field %s = %llu is out of range (max %llu)", s_field[f],
                       (unsigned long long)o->via.u64, (unsigned long long)max);
    *out = o->via.u64;
    return 0;
}

static int s_fields(const msgpack_object *root, wire_hdr_t *h)
{
    if (root->type != MSGPACK_OBJECT_ARRAY)
        return err_set(ERR_PROTO, "wire: header is a %s, expected an array of %d fields",
                       s_otype(root->type), WIRE_NFIELDS);
    if (root->via.array.size != WIRE_NFIELDS)
        return err_set(ERR_PROTO, "wire: header has %u fields, expected %d", root->via.array.size,
                       WIRE_NFIELDS);
    const msgpack_object *v = root->via.array.ptr;
    uint64_t u[WIRE_NFIELDS] = {0};
    for (int f = 0; f < WIRE_NFIELDS; f++) {
        if (f == F_AUX) continue;
        uint64_t max = (f == F_MAGIC) ? UINT16_MAX
                     : (f >= F_JOB && f <= F_COUNT) ? UINT64_MAX : UINT32_MAX;
        CHECK(s_uint(&v[f], f, max, &u[f]));
    }
    if (u[F_MAGIC] != WIRE_MAGIC)
        return err_set(ERR_PROTO, "wire: bad magic 0x%04llx (expected 0x%04x)",
                       (unsigned long long)u[F_MAGIC], WIRE_MAGIC);
    if (u[F_VERSION] != WIRE_VERSION)
        return err_set(ERR_PROTO, "wire: unsupported version %llu (expected %u)",
                       (unsigned long long)u[F_VERSION], WIRE_VERSION);
    if (u[F_TYPE] == 0 || u[F_TYPE] >= WIRE_TYPE_MAX)
        return err_set(ERR_PROTO, "wire: unknown message type %llu", (unsigned long long)u[F_TYPE]);
    if (u[F_DTYPE] >= DT_COUNT)
        return err_set(ERR_PROTO, "wire: unknown dtype %llu", (unsigned long long)u[F_DTYPE]);
    const msgpack_object *a = &v[F_AUX];
    int64_t aux;
    if (a->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (a->via.u64 > INT32_MAX)
            return err_set(ERR_PROTO, "wire: field aux = %llu is out of range",
                           (unsigned long long)a->via.u64);
        aux = (int64_t)a->via.u64;
    } else if (a->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        if (a->via.i64 < INT32_MIN)
            return err_set(ERR_PROTO, "wire: field aux = %lld is out of range", (long long)a->via.i64);
        aux = a->via.i64;
    } else {
        return err_set(ERR_PROTO, "wire: field aux has type %s, expected an integer", s_otype(a->type));
    }
    h->type = (uint32_t)u[F_TYPE];
    h->sender = (uint32_t)u[F_SENDER];
    h->job = u[F_JOB];
    h->key = u[F_KEY];
    h->clock = u[F_CLOCK];
    h->offset = u[F_OFFSET];
    h->count = u[F_COUNT];
    h->dtype = (uint32_t)u[F_DTYPE];
    h->aux = (int32_t)aux;
    h->nframes = (uint32_t)u[F_NFRAMES];
    return 0;
}

int wire_decode(const void *buf, size_t len, wire_hdr_t *out)
{
    if (!out) return err_set(ERR_INVAL, "wire_decode: NULL output");
    if (!buf || len == 0) return err_set(ERR_PROTO, "wire: empty header");
    if (len > WIRE_HDR_MAX)
        return err_set(ERR_PROTO, "wire: header of %zu bytes exceeds the %d-byte limit", len, WIRE_HDR_MAX);
    int used = s_scan(buf, len);
    if (used < 0) return used;
    if ((size_t)used != len)
        return err_set(ERR_PROTO, "wire: %zu trailing bytes after the header", len - (size_t)used);

    msgpack_zone zone;
    if (!msgpack_zone_init(&zone, 1024)) return err_set(ERR_NOMEM, "wire: msgpack zone");
    msgpack_object root;
    size_t off = 0;
    msgpack_unpack_return r = msgpack_unpack(buf, len, &off, &zone, &root);
    int rc;
    if (r == MSGPACK_UNPACK_SUCCESS && off == len) {
        wire_hdr_t h;
        rc = s_fields(&root, &h);
        if (rc == 0) *out = h;                     /* out is written only for a valid header */
    } else if (r == MSGPACK_UNPACK_EXTRA_BYTES || (r == MSGPACK_UNPACK_SUCCESS && off != len)) {
        rc = err_set(ERR_PROTO, "wire: %zu trailing bytes after the header", len - off);
    } else if (r == MSGPACK_UNPACK_CONTINUE) {
        rc = err_set(ERR_PROTO, "wire: header truncated at byte %zu", len);
    } else if (r == MSGPACK_UNPACK_NOMEM_ERROR) {
        rc = err_set(ERR_PROTO, "wire: header needs too much memory to decode");
    } else {
        rc = err_set(ERR_PROTO, "wire: malformed MessagePack (unpack returned %d)", (int)r);
    }
    msgpack_zone_destroy(&zone);
    return rc;
}

int wire_check_payload(const wire_hdr_t *h, size_t payload_bytes, size_t max_count)
{
    if (!h) return err_set(ERR_INVAL, "wire_check_payload: NULL header");
    size_t esz = dt_size((dtype_t)h->dtype);
    if (h->dtype >= DT_COUNT || !esz) return err_set(ERR_PROTO, "wire: unknown dtype %u", h->dtype);
    if (h->count > max_count)
        return err_set(ERR_PROTO, "wire: %s count %llu exceeds the expected maximum %zu",
                       wire_type_name(h->type), (unsigned long long)h->count, max_count);
    if (h->count > SIZE_MAX / esz)
        return err_set(ERR_PROTO, "wire: count %llu overflows", (unsigned long long)h->count);
    size_t want = (size_t)h->count * esz;
    if (payload_bytes != want)
        return err_set(ERR_PROTO, "wire: %s payload is %zu bytes, header says %llu x %s = %zu",
                       wire_type_name(h->type), payload_bytes, (unsigned long long)h->count,
                       dt_name((dtype_t)h->dtype), want);
    return 0;
}
