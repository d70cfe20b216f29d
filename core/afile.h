/* afile.h: files written whole or not at all (checkpoints, the PS servers' shards, checkpoint manifests):
 * the bytes go to a temporary file in the same directory, which is fsync'd, renamed over the name, and the
 * directory fsync'd; a crash or a full disk leaves the old file (or none), never half a new one. Also the
 * checksum they carry and the one safe way to open such a file for reading (regular files only). Lives in
 * core/ because both the trainer (its checkpoint) and the engines (a PS server's shard) write them. */
#ifndef SB_AFILE_H
#define SB_AFILE_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct {
    const void *data;
    size_t      len;
} afile_part_t;

/* Fast 64-bit hash of a byte range (4 independent multiply-xor lanes; not cryptographic); chain ranges
 * by passing the previous result as seed. */
uint64_t afile_hash(const void *buf, size_t len, uint64_t seed);

/* Write parts[0..nparts) in order to path atomically, then (append_hash) the 8-byte chained hash of all of
 * them (seed 0, part by part). *hash_out (may be NULL) gets that hash. what names the file in errors
 * ("checkpoint", "shard"). ERR_NOSPC for a full disk, ERR_IO otherwise, with the reason; on failure the
 * temporary file is removed and path is untouched. */
int afile_write(const char *path, const char *what, const afile_part_t *parts, int nparts, int append_hash,
                uint64_t *hash_out);

/* Before long work: can a file written as afile_write does (a temporary file and a rename in its folder) go to
 * path? Its folder exists, is a folder and is writable (else ERR_IO), and path is a regular file if it exists
 * (else ERR_INVAL); the error names flag ("--save", "--timeline"), path and why. */
int afile_check_dest(const char *flag, const char *path);

/* Open path for reading without blocking on a FIFO; anything but a regular file is refused (ERR_INVAL),
 * a missing one is ERR_IO naming it. *size gets its length. */
int afile_open(const char *path, const char *what, FILE **f, off_t *size);

/* A fault injection hook for tests: when set, afile_write calls it before writing each part and fails the
 * write like a full disk (ENOSPC) when it returns non-zero. NULL (the default): no injection. */
extern int (*afile_fault_hook)(const char *path);

#endif
