/* ps_proto.c: the parameter server's shared protocol helpers: routing ids, heartbeat times, job hash,
 * partition layout.
 *
 * Layout: a tensor of `total` elements is cut into partitions of part_elems elements (the last one
 * shorter). Partitions are handed out greedily to the server holding the fewest bytes so far, ties to
 * the lowest index; with equal partitions (only the last may be short) that greedy rule is exactly
 * round robin, k % nservers, so the owner is computed in O(1): every server ends with the same number
 * of bytes give or take one partition, unlike plain key ranges (ps-lite), which put every small
 * tensor on server 0. */
#include "ps/ps_proto.h"
#include "core/hash.h"
#include <string.h>

void ps_routing_id(uint64_t job, int rank, unsigned char out[PS_ID_LEN])
{
    uint32_t r = (uint32_t)rank, tag = (uint32_t)(job ^ (job >> 32));
    out[0] = 'p'; out[1] = 's'; out[2] = 'w'; out[3] = 0;
    memcpy(out + 4, &r, 4);
    memcpy(out + 8, &tag, 4);
}

void ps_hb_routing_id(uint64_t job, int rank, unsigned char out[PS_ID_LEN])
{
    ps_routing_id(job, rank, out);
    out[2] = 'h';
}

void ps_hb_times(int timeout_ms, int *ival_ms, int *deadline_ms)
{
    int to = timeout_ms > 0 ? timeout_ms : 60000;
    int dead = to / 2 < PS_HB_DEADLINE_MS ? to / 2 : PS_HB_DEADLINE_MS;
    int ival = dead / PS_HB_MIN_BEATS < PS_HB_INTERVAL_MS ? dead / PS_HB_MIN_BEATS : PS_HB_INTERVAL_MS;
    if (ival < 10) ival = 10;
    if (dead < PS_HB_MIN_BEATS * ival) dead = PS_HB_MIN_BEATS * ival;
    *ival_ms = ival;
    *deadline_ms = dead;
}

uint64_t ps_job_hash(const char *job)
{
    return hash_str(job);
}

void ps_layout_init(ps_layout_t *l, size_t total, size_t esz, size_t part_bytes, int nservers)
{
    if (nservers < 1) nservers = 1;
    if (esz == 0) esz = 1;
    if (part_bytes == 0) part_bytes = PS_DEFAULT_PART_BYTES;
    size_t pe = part_bytes / esz;
    if (pe == 0) pe = 1;
    size_t spread = (total + (size_t)nservers - 1) / (size_t)nservers;
    if (spread > 0 && pe > spread) pe = spread;
    l->total = total;
    l->part_elems = pe;
    l->nparts = total ? (total + pe - 1) / pe : 0;
    l->nservers = nservers;
}

size_t ps_part_start(const ps_layout_t *l, size_t k) { return k * l->part_elems; }

size_t ps_part_len(const ps_layout_t *l, size_t k)
{
    size_t s = k * l->part_elems;
    if (k >= l->nparts || s >= l->total) return 0;
    size_t n = l->total - s;
    return n < l->part_elems ? n : l->part_elems;
}

int ps_part_owner(const ps_layout_t *l, size_t k) { return (int)(k % (size_t)l->nservers); }

void ps_part_range(const ps_layout_t *l, size_t off, size_t n, size_t *k0, size_t *k1)
{
    if (n == 0 || l->nparts == 0) {
        *k0 = *k1 = 0;
        return;
    }
    *k0 = off / l->part_elems;
    *k1 = (off + n - 1) / l->part_elems + 1;
    if (*k1 > l->nparts) *k1 = l->nparts;
}

void ps_auth_ctx(uint64_t job, int rank, unsigned char out[PS_AUTH_CTX_LEN])
{
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(job >> (8 * i));
    for (int i = 0; i < 4; i++) out[8 + i] = (unsigned char)((uint32_t)rank >> (8 * i));
}

/* a partition's values (at most part_bytes, at least one element) plus room for the small frames
 * (header, meta, optimizer config, error text) */
int64_t ps_max_frame(size_t part_bytes)
{
    if (!part_bytes) part_bytes = PS_DEFAULT_PART_BYTES;
    return (int64_t)part_bytes + 8 + 4096;
}
