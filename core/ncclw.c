/* ncclw.c: the NCCL algorithm choice of ncclw.h, fixed once per process, and the label that says what
 * runs (built with and without CUDA: the logic needs no GPU and is tested without one).
 *
 * NCCL reads NCCL_ALGO from the environment while it builds a communicator, on its own threads for a
 * non-blocking init, and those threads live on (proxy, bootstrap). Setting and unsetting the variable
 * around each init raced them (setenv/unsetenv may free the strings a concurrent getenv reads), and
 * ncclConfig_t (NCCL 2.28) has no per-communicator algorithm field. So the variable is written at most
 * once per process, before the process's first NCCL call (ncclw_new calls ncclw_algo_init first), and
 * never changed afterwards; a later communicator asking for another algorithm is refused. */
#include "core/ncclw.h"
#include "core/err.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static int  s_fixed;        /* NCCL_ALGO is settled for this process */
static int  s_user;         /* ... by the user's environment */
static char s_algo[64];     /* its value ("" = NCCL's own choice) */

int ncclw_algo_init(const char *algo)
{
    if (algo && !*algo) algo = NULL;
    if (algo && strlen(algo) >= sizeof s_algo) return err_set(ERR_INVAL, "ncclw: NCCL algorithm name '%.40s...' too long", algo);
    pthread_mutex_lock(&s_lock);
    int rc = 0;
    if (!s_fixed) {
        const char *user = getenv("NCCL_ALGO");
        if (user && *user) {
            s_user = 1;
            snprintf(s_algo, sizeof s_algo, "%s", user);
        } else if (algo) {
            if (setenv("NCCL_ALGO", algo, 1) != 0) rc = err_set(ERR_SYS, "setenv NCCL_ALGO");
            else snprintf(s_algo, sizeof s_algo, "%s", algo);
        }
        s_fixed = rc == 0;
    } else if (!s_user && !(algo ? strcasecmp(algo, s_algo) == 0 : s_algo[0] == '\0')) {
        rc = err_set(ERR_STATE,
                     "NCCL_ALGO is %s%s for this process (set before its first NCCL communicator and never changed: "
                     "NCCL's threads read it); %s%s needs its own process",
                     s_algo[0] ? "already " : "unset (NCCL's choice)", s_algo, algo ? "algorithm " : "NCCL's own choice",
                     algo ? algo : "");
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

void ncclw_algo_label(const char *algo, int world, char *out, size_t len)
{
    if (!out || !len) return;
    if (algo && !*algo) algo = NULL;
    pthread_mutex_lock(&s_lock);
    int fixed = s_fixed, user = s_user;
    char cur[sizeof s_algo];
    snprintf(cur, sizeof cur, "%s", s_algo);
    pthread_mutex_unlock(&s_lock);
    char base[128];
    if (fixed && user) snprintf(base, sizeof base, "nccl %s (NCCL_ALGO from the user)", cur);
    else if (fixed && cur[0]) snprintf(base, sizeof base, "nccl %s", cur);
    else if (algo) snprintf(base, sizeof base, "nccl %s", algo);
    else snprintf(base, sizeof base, "nccl (NCCL's choice)");
    /* One rank: NCCL takes its single-rank path (a local reduce-copy) whatever NCCL_ALGO says; a Tree
     * row and a Ring row measure the same thing there. */
    if (world == 1) snprintf(out, len, "%s, world 1: a local copy (no Ring or Tree runs)", base);
    else snprintf(out, len, "%s", base);
}
