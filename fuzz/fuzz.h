/* fuzz.h: helpers shared by the libFuzzer targets (fuzz/fuzz_*.c) and the seed-corpus writer
 * (fuzz/mkcorpus.c): the fixed job secret of the authenticated modes, a cursor over the fuzz input, an
 * in-memory file (memfd) for readers that take a path, and the oracle's abort. */
#ifndef SB_FUZZ_H
#define SB_FUZZ_H
#define _GNU_SOURCE 1
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sodium.h>
#include "core/auth.h"
#include "core/log.h"

/* The job secret of the authenticated modes (fixed, so seeds can carry valid MACs). */
#define FUZZ_SECRET_HEX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

static inline const auth_t *fuzz_auth(void)
{
    static auth_t a;
    if (!a.set && auth_from_hex(&a, FUZZ_SECRET_HEX, "fuzz secret") < 0) abort();
    return &a;
}

/* libsodium's random source replaced by zeros, so every nonce (auth_challenge) is zeros: runs are
 * reproducible and seeds can carry MACs over the server's "fresh" nonce. Fuzzing only. */
static const char *fuzz_rng_name(void) { return "fuzz-zeros"; }
static uint32_t fuzz_rng_random(void) { return 0; }
static void fuzz_rng_buf(void *buf, size_t n) { memset(buf, 0, n); }

/* Call first (LLVMFuzzerInitialize): deterministic nonces, quiet logs (every rejected input would
 * print a warning otherwise). */
static int fuzz_verbose;   /* FUZZ_VERBOSE=1: targets say what each input did (to check seeds) */
static inline void fuzz_init(void)
{
    fuzz_verbose = getenv("FUZZ_VERBOSE") != NULL;
    static randombytes_implementation impl = {
        .implementation_name = fuzz_rng_name, .random = fuzz_rng_random, .buf = fuzz_rng_buf,
    };
    if (randombytes_set_implementation(&impl) != 0 || sodium_init() < 0) abort();
    log_set_level(LOG_ERROR);
}

/* A property the code under test must keep was broken: report and crash (libFuzzer saves the input). */
#define FUZZ_ASSERT(cond)                                                                       \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "fuzz: %s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                            \
        }                                                                                       \
    } while (0)

/* A cursor over the input: reads past the end give zeros / empty. */
typedef struct { const uint8_t *p; size_t len, pos; } fuzz_in_t;

static inline size_t fuzz_left(const fuzz_in_t *in) { return in->len - in->pos; }
static inline uint8_t fuzz_u8(fuzz_in_t *in) { return in->pos < in->len ? in->p[in->pos++] : 0; }
static inline uint16_t fuzz_u16(fuzz_in_t *in)
{
    uint16_t lo = fuzz_u8(in);
    return (uint16_t)(lo | (uint16_t)fuzz_u8(in) << 8);
}
/* Up to n bytes at the cursor (*got: how many there were). */
static inline const uint8_t *fuzz_bytes(fuzz_in_t *in, size_t n, size_t *got)
{
    const uint8_t *p = in->p + in->pos;
    *got = n < fuzz_left(in) ? n : fuzz_left(in);
    in->pos += *got;
    return p;
}

/* An in-memory file holding exactly buf[0..len), reachable by path (/proc/self/fd/N): the same memfd
 * is reused (truncated and rewritten) by every call with the same slot. Returns the path. */
static inline const char *fuzz_memfile(int slot, const void *buf, size_t len)
{
    static int fds[4] = {-1, -1, -1, -1};
    static char paths[4][64];
    if (fds[slot] < 0) {
        fds[slot] = memfd_create("fuzz", MFD_CLOEXEC);
        if (fds[slot] < 0) { perror("memfd_create"); abort(); }
        snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d", fds[slot]);
    }
    if (ftruncate(fds[slot], 0) != 0) abort();
    if (len && pwrite(fds[slot], buf, len, 0) != (ssize_t)len) abort();
    return paths[slot];
}

/* A private temporary directory for readers that look files up by name (removed at exit with what
 * fuzz_dirfile wrote there). */
static char fuzz_dir_path[256];
static char fuzz_dir_files[8][320];
static int fuzz_dir_nfiles;
static inline void fuzz_dir_cleanup(void)
{
    for (int i = 0; i < fuzz_dir_nfiles; i++) unlink(fuzz_dir_files[i]);
    if (fuzz_dir_path[0]) rmdir(fuzz_dir_path);
}
static inline const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/sbfuzz.XXXXXX", base);
        if (!mkdtemp(fuzz_dir_path)) { perror("mkdtemp"); abort(); }
        atexit(fuzz_dir_cleanup);
    }
    return fuzz_dir_path;
}
/* Write (or with buf NULL: remove) file name in fuzz_dir(); returns its path. */
static inline const char *fuzz_dirfile(const char *name, const void *buf, size_t len)
{
    char path[320];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    int i = 0;
    while (i < fuzz_dir_nfiles && strcmp(fuzz_dir_files[i], path)) i++;
    if (i == fuzz_dir_nfiles) {
        if (i == 8) abort();
        snprintf(fuzz_dir_files[fuzz_dir_nfiles++], sizeof fuzz_dir_files[0], "%s", path);
    }
    if (!buf) { unlink(path); return fuzz_dir_files[i]; }
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(buf, 1, len, f) != len) || fclose(f) != 0) { perror(path); abort(); }
    return fuzz_dir_files[i];
}

#endif
