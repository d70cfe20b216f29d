/* auth.c: the job secret (generated, loaded from SYNCBENCH_JOB_SECRET / SYNCBENCH_JOB_SECRET_FILE)
 * and the challenge-response MACs every endpoint uses (core/auth.h). All cryptography is libsodium's. */
#include "core/auth.h"
#include "core/err.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#define MAC_LABEL "syncbench-auth-v1"

static int s_init(void)
{
    if (sodium_init() < 0) return err_set(ERR_SYS, "libsodium could not initialise");
    return 0;
}

int auth_secret_generate(auth_t *a)
{
    if (!a) return err_set(ERR_INVAL, "auth_secret_generate: NULL");
    CHECK(s_init());
    randombytes_buf(a->key, sizeof a->key);
    a->set = 1;
    return 0;
}

int auth_from_hex(auth_t *a, const char *hex, const char *what)
{
    if (!a || !hex) return err_set(ERR_INVAL, "auth_from_hex: NULL");
    CHECK(s_init());
    while (*hex == ' ' || *hex == '\t' || *hex == '\n' || *hex == '\r') hex++;
    size_t n = strlen(hex);
    while (n && (hex[n - 1] == ' ' || hex[n - 1] == '\t' || hex[n - 1] == '\n' || hex[n - 1] == '\r')) n--;
    unsigned char raw[64];
    size_t got = 0;
    const char *end = NULL;
    if (n < 32 || n > 128 || n % 2 || sodium_hex2bin(raw, sizeof raw, hex, n, NULL, &got, &end) != 0 ||
        end != hex + n)
        return err_set(ERR_INVAL, "%s is not a job secret: it must be 32 to 128 hex digits (e.g. from "
                       "`openssl rand -hex 32`)", what);
    if (got == AUTH_SECRET_BYTES) memcpy(a->key, raw, AUTH_SECRET_BYTES);
    else crypto_generichash(a->key, AUTH_SECRET_BYTES, raw, got, NULL, 0);
    sodium_memzero(raw, sizeof raw);
    a->set = 1;
    return 0;
}

int auth_hex(const auth_t *a, char *out, size_t len)
{
    if (!a || !out || len < AUTH_HEX_LEN) return err_set(ERR_INVAL, "auth_hex: bad arguments");
    if (!a->set) return err_set(ERR_STATE, "auth_hex: the job has no secret");
    sodium_bin2hex(out, len, a->key, AUTH_SECRET_BYTES);
    return 0;
}

/* Read a secret file: a regular file owned by us, no access for group or others. */
static int s_load_file(auth_t *a, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return err_set(ERR_AUTH, "SYNCBENCH_JOB_SECRET_FILE %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return err_set(ERR_AUTH, "SYNCBENCH_JOB_SECRET_FILE %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        close(fd);
        return err_set(ERR_AUTH, "SYNCBENCH_JOB_SECRET_FILE %s is %s with mode %04o owned by uid %u: a secret file "
                       "must be a regular file owned by you (uid %u) with mode 0600 (chmod 600 %s)", path,
                       S_ISREG(st.st_mode) ? "a file" : "not a regular file", (unsigned)(st.st_mode & 07777),
                       (unsigned)st.st_uid, (unsigned)geteuid(), path);
    }
    char buf[300];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) return err_set(ERR_AUTH, "SYNCBENCH_JOB_SECRET_FILE %s: %s", path, strerror(errno));
    buf[n] = '\0';
    char what[1200];
    snprintf(what, sizeof what, "the content of SYNCBENCH_JOB_SECRET_FILE %s", path);
    int rc = auth_from_hex(a, buf, what);
    sodium_memzero(buf, sizeof buf);
    return rc;
}

int auth_secret_load(auth_t *a, int require_auth)
{
    if (!a) return err_set(ERR_INVAL, "auth_secret_load: NULL");
    memset(a, 0, sizeof *a);
    const char *req = getenv("SYNCBENCH_REQUIRE_AUTH");
    a->require = require_auth || (req && *req && strcmp(req, "0"));
    const char *hex = getenv("SYNCBENCH_JOB_SECRET"), *file = getenv("SYNCBENCH_JOB_SECRET_FILE");
    if (hex && *hex) return auth_from_hex(a, hex, "SYNCBENCH_JOB_SECRET");
    if (file && *file) return s_load_file(a, file);
    return 0;
}

int auth_require(const auth_t *a, const char *what)
{
    static atomic_int warned;
    if (a && a->set) return 0;
    if (a && a->require)
        return err_set(ERR_AUTH, "%s: this job has no secret and authentication is required: set "
                       "SYNCBENCH_JOB_SECRET (hex) or SYNCBENCH_JOB_SECRET_FILE (mode 0600), or start the ranks "
                       "with `harness MODE --procs N` (the launcher makes a secret for one node)", what);
    if (!atomic_exchange(&warned, 1))
        LOG_W("job has no secret: anyone who can reach its ports can join it (set SYNCBENCH_JOB_SECRET or "
              "SYNCBENCH_JOB_SECRET_FILE; --require-auth refuses to run without one)");
    return 0;
}

void auth_challenge(unsigned char nonce[AUTH_NONCE_BYTES])
{
    if (sodium_init() < 0) abort(); /* no random source: nothing safe to do */
    randombytes_buf(nonce, AUTH_NONCE_BYTES);
}

static void s_mac(const auth_t *a, const char *role, const unsigned char *na, const unsigned char *nb,
                  const void *ctx, size_t ctxlen, unsigned char mac[AUTH_MAC_BYTES])
{
    static const unsigned char zero[AUTH_NONCE_BYTES];
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)ctxlen >> (8 * i));
    crypto_auth_hmacsha512256_state st;
    crypto_auth_hmacsha512256_init(&st, a->key, AUTH_SECRET_BYTES);
    crypto_auth_hmacsha512256_update(&st, (const unsigned char *)MAC_LABEL, sizeof MAC_LABEL);
    crypto_auth_hmacsha512256_update(&st, (const unsigned char *)role, strlen(role) + 1);
    crypto_auth_hmacsha512256_update(&st, na ? na : zero, AUTH_NONCE_BYTES);
    crypto_auth_hmacsha512256_update(&st, nb ? nb : zero, AUTH_NONCE_BYTES);
    crypto_auth_hmacsha512256_update(&st, len, 8);
    if (ctxlen) crypto_auth_hmacsha512256_update(&st, ctx, ctxlen);
    crypto_auth_hmacsha512256_final(&st, mac);
    sodium_memzero(&st, sizeof st);
}

void auth_respond(const auth_t *a, const char *role, const unsigned char *na, const unsigned char *nb,
                  const void *ctx, size_t ctxlen, unsigned char mac[AUTH_MAC_BYTES])
{
    if (!a || !a->set) { memset(mac, 0, AUTH_MAC_BYTES); return; }
    s_mac(a, role, na, nb, ctx, ctxlen, mac);
}

int auth_verify(const auth_t *a, const char *role, const unsigned char *na, const unsigned char *nb,
                const void *ctx, size_t ctxlen, const unsigned char mac[AUTH_MAC_BYTES])
{
    if (!a || !a->set) return 0;
    unsigned char want[AUTH_MAC_BYTES];
    s_mac(a, role, na, nb, ctx, ctxlen, want);
    int ok = crypto_verify_32(want, mac) == 0;
    sodium_memzero(want, sizeof want);
    return ok ? 0 : ERR_AUTH;
}

void auth_job_tag(const char *job, char *out, size_t len)
{
    unsigned char h[8];
    const char *j = job ? job : "";
    crypto_generichash(h, sizeof h, (const unsigned char *)j, strlen(j), NULL, 0);
    char hex[17];
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    snprintf(out, len, "%s", hex);
}

void auth_wipe(auth_t *a)
{
    if (a) sodium_memzero(a, sizeof *a);
}
