/* auth.h: the job secret and the challenge-response that proves knowledge of it (libsodium:
 * randombytes_buf, HMAC-SHA-512/256, BLAKE2b). Every endpoint of a job (the store's hello, the TCP and
 * ZeroMQ transports' hellos, the PS hello) runs the same pattern over its own byte stream or messages:
 *   initiator: auth_challenge(na)                         -> sends na (plus who it claims to be)
 *   responder: auth_challenge(nb); auth_respond(R, na, nb) -> sends nb and its MAC
 *   initiator: auth_verify(R, na, nb, mac); auth_respond(I, na, nb) -> sends its MAC
 *   responder: auth_verify(I, na, nb, mac)
 * with two distinct role labels R and I (so a MAC is never reflected back) and a context naming the
 * job, the endpoint and the ranks involved. Fresh nonces on both sides make a replayed transcript fail.
 * A job without a secret (a->set == 0) runs unauthenticated: auth_respond writes zeros, auth_verify
 * accepts anything, and auth_require() prints one warning per process, or refuses when a->require. */
#ifndef SB_AUTH_H
#define SB_AUTH_H
#include <stddef.h>

#define AUTH_SECRET_BYTES 32           /* 256-bit job secret */
#define AUTH_NONCE_BYTES 32
#define AUTH_MAC_BYTES 32              /* HMAC-SHA-512/256 */
#define AUTH_HEX_LEN (2 * AUTH_SECRET_BYTES + 1)

typedef struct auth {
    int set;                           /* 1: the job has a secret */
    int require;                       /* refuse to run without one (--require-auth / SYNCBENCH_REQUIRE_AUTH=1) */
    unsigned char key[AUTH_SECRET_BYTES];
} auth_t;

/* A fresh secret from the system's random source (a->set = 1; a->require unchanged). */
int  auth_secret_generate(auth_t *a);
/* Parse a hex secret: 32..128 hex digits (128..512 bits; whitespace around it ignored). 64 digits are
 * the key itself, other lengths are hashed to 32 bytes. ERR_INVAL naming what (never the value). */
int  auth_from_hex(auth_t *a, const char *hex, const char *what);
/* The secret as 64 hex digits plus NUL (len >= AUTH_HEX_LEN), e.g. for SYNCBENCH_JOB_SECRET in a
 * child's environment. ERR_STATE when a has no secret. */
int  auth_hex(const auth_t *a, char *out, size_t len);
/* Fill a from the environment: SYNCBENCH_JOB_SECRET (hex), else SYNCBENCH_JOB_SECRET_FILE (a regular
 * file of hex, owned by this user, mode 0600 or stricter: anything else is refused with ERR_AUTH and
 * the fix), else no secret (a->set = 0, which is not an error here: see auth_require). require_auth
 * (or SYNCBENCH_REQUIRE_AUTH=1 in the environment) sets a->require. */
int  auth_secret_load(auth_t *a, int require_auth);
/* Called by every endpoint before it talks: 0 when a has a secret; without one, ERR_AUTH when
 * a->require, else 0 after a one-line warning (once per process). what names the endpoint. */
int  auth_require(const auth_t *a, const char *what);

/* A fresh random nonce. */
void auth_challenge(unsigned char nonce[AUTH_NONCE_BYTES]);
/* mac = HMAC(key, label || role || na || nb || ctx). na, nb: AUTH_NONCE_BYTES each (NULL = zeros).
 * Zeros when a is NULL or has no secret. */
void auth_respond(const auth_t *a, const char *role, const unsigned char *na, const unsigned char *nb,
                  const void *ctx, size_t ctxlen, unsigned char mac[AUTH_MAC_BYTES]);
/* 0 when mac is what auth_respond gives (constant-time compare), ERR_AUTH otherwise (no err_set:
 * the caller says who failed). Always 0 when a is NULL or has no secret. */
int  auth_verify(const auth_t *a, const char *role, const unsigned char *na, const unsigned char *nb,
                 const void *ctx, size_t ctxlen, const unsigned char mac[AUTH_MAC_BYTES]);

/* The tag that stands for a job id in file and shared-memory names: 16 hex digits of an unkeyed
 * BLAKE2b of the id (never the secret), so ids stay out of /dev/shm and directory listings. */
void auth_job_tag(const char *job, char *out, size_t len);
/* Forget the secret (zeroed). */
void auth_wipe(auth_t *a);

#endif
