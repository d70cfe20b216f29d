/* shard.h: a checkpoint shard file: some contiguous ranges of one flat f32 vector (the parameters a
 * parameter server owns, partition by partition) with the optimizer buffers over the same ranges
 * (momentum, Adam's moments) and each range's optimizer step count. "SBSHARD1", a fixed header, the
 * range table, the values range by range, a 64-bit hash of everything before it; written whole or not
 * at all (core/afile.h). Any set of shards whose ranges cover the vector exactly once can be gathered
 * back into flat vectors, whatever layout wrote them: re-sharding is reading ranges. */
#ifndef SB_SHARD_H
#define SB_SHARD_H
#include <stddef.h>
#include <stdint.h>

#define SHARD_MAX_OPT 4

typedef struct {
    uint64_t start, len;     /* elements [start, start + len) of the flat vector */
    uint64_t applied;        /* optimizer steps applied to this range */
} shard_range_t;

typedef struct {
    uint32_t index, nservers;   /* the writer (server index) and how many wrote shards */
    uint64_t total;             /* elements of the whole vector */
    uint32_t nopt;              /* optimizer buffers per range */
    uint32_t optim_kind;        /* optim_kind_t of the writer */
    size_t   nranges;
    shard_range_t *ranges;
    /* data[r * (1 + nopt) + 0]: range r's parameters; [.. + 1 + k]: its optimizer buffer k (len floats each) */
    float  **data;
    void    *buf;               /* read: the file's bytes (ranges and data point into it) */
    uint64_t hash;              /* the file's stored hash (afile_hash of everything before it) */
} shard_t;

/* Write s (ranges and data are read) to path atomically; *hash gets the hash stored at its end. */
int  shard_write(const char *path, const shard_t *s, uint64_t *hash);
/* Read and verify one shard (magic, version, sizes, ranges inside the vector, checksum): ERR_IO (missing),
 * ERR_INVAL (not a regular file), ERR_CORRUPT, each naming path. Free with shard_free. */
int  shard_read(const char *path, shard_t *s);
void shard_free(shard_t *s);

/* Gather n shards (paths[i], whose stored hashes must equal want_hash[i] when want_hash is non-NULL) into
 * flat vectors of total elements: params (total floats) and opt[0..nopt) (total floats each), all
 * caller-allocated. The shards must agree on total, nopt and their server count, and their ranges must cover
 * [0, total) exactly once; *applied gets the largest step count of the ranges (in sync training they are
 * all equal; asynchronous servers count updates per pushed segment).
 * Errors name the file. */
int  shard_gather(const char *const *paths, const uint64_t *want_hash, int n, uint64_t total, int nopt,
                  float *params, float **opt, uint64_t *applied);

#endif
