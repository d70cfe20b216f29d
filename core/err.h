/* err.h: the project's error codes (one X-macro table, all negative), err_str(), and CHECK(),
 * which returns a failing code upward and records file:line so a failure prints a short chain. */
#ifndef SB_ERR_H
#define SB_ERR_H

#define SB_ERRORS(X)                                                         \
    X(ERR_INVAL,      -1,  "invalid argument")                              \
    X(ERR_NOMEM,      -2,  "out of memory")                                 \
    X(ERR_TIMEOUT,    -3,  "timed out")                                     \
    X(ERR_IO,         -4,  "I/O error")                                     \
    X(ERR_PROTO,      -5,  "malformed or unexpected message")               \
    X(ERR_PEER,       -6,  "peer failed or went away")                      \
    X(ERR_SYS,        -7,  "system call failed")                            \
    X(ERR_UNSUP,      -8,  "not supported")                                 \
    X(ERR_MISMATCH,   -9,  "ranks disagree")                                \
    X(ERR_RANGE,      -10, "value out of range")                            \
    X(ERR_ADDRINUSE,  -11, "address already in use")                        \
    X(ERR_CUDA,       -12, "CUDA error")                                    \
    X(ERR_NCCL,       -13, "NCCL error")                                    \
    X(ERR_WRONG,      -14, "wrong result")                                  \
    X(ERR_INTERRUPT,  -15, "interrupted")                                   \
    X(ERR_NODEV,      -16, "no such device")                                \
    X(ERR_DUP,        -17, "duplicate")                                     \
    X(ERR_NOSPC,      -18, "no space left on device")                       \
    X(ERR_CORRUPT,    -19, "corrupt file")                                  \
    X(ERR_STATE,      -20, "call out of order")                             \
    X(ERR_AUTH,       -21, "authentication failed")

enum {
#define SB_ERR_ENUM(name, code, text) name = code,
    SB_ERRORS(SB_ERR_ENUM)
#undef SB_ERR_ENUM
};

/* Text for a code: "ok" for 0, the table's text for a known negative code. */
const char *err_str(int code);

/* Record where an error passed through (thread-local ring; printed by err_trace). */
void err_note(int code, const char *file, int line, const char *expr);
/* Last detail message set with err_set (thread-local); "" if none. */
const char *err_detail(void);
/* Set a human detail for the current error (printf-style); returns code, for `return err_set(...)`. */
int err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Render "text: detail (at a.c:1 <- b.c:2 ...)" into buf and clear the trace. */
const char *err_trace(int code, char *buf, unsigned long len);
/* Whether err_trace writes the "(at a.c:1 <- ...)" part (default 1; the harness: only with --verbose). */
void err_show_locations(int on);
void err_clear(void);

#define CHECK(expr)                                                          \
    do {                                                                     \
        int sb_rc_ = (expr);                                                 \
        if (sb_rc_ < 0) {                                                    \
            err_note(sb_rc_, __FILE__, __LINE__, #expr);                     \
            return sb_rc_;                                                   \
        }                                                                    \
    } while (0)

/* Like CHECK, but jumps to a cleanup label with rc set. */
#define CHECK_GOTO(rc, expr, label)                                          \
    do {                                                                     \
        (rc) = (expr);                                                       \
        if ((rc) < 0) {                                                      \
            err_note((rc), __FILE__, __LINE__, #expr);                       \
            goto label;                                                      \
        }                                                                    \
    } while (0)

#endif
