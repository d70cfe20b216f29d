/* hash.h: the project's one non-cryptographic hash, FNV-1a 64 (job ids, store buckets, PS job tags). */
#ifndef SB_HASH_H
#define SB_HASH_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HASH_FNV1A64_INIT 14695981039346656037ull

/* Continue an FNV-1a 64 hash h over n bytes at p (start with HASH_FNV1A64_INIT). */
static inline uint64_t hash_fnv1a64(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* FNV-1a 64 of a NUL-terminated string (NULL hashes as ""). */
static inline uint64_t hash_str(const char *s)
{
    return hash_fnv1a64(s ? s : "", s ? strlen(s) : 0, HASH_FNV1A64_INIT);
}
#endif
