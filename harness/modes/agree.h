/* agree.h: every rank (workers and servers) agrees on the options that must match before a mode runs:
 * each posts its "name=value" lines in the store, rank 0 compares every rank's with its own and the
 * others compare theirs with rank 0's, so a mismatch fails every rank at once, naming the option and
 * the ranks that differ. */
#ifndef SB_H_AGREE_H
#define SB_H_AGREE_H
#include "core/comm.h"

#define H_AGREE_MAX 96

typedef struct {
    int n;
    char name[H_AGREE_MAX][24];
    char val[H_AGREE_MAX][160];
} h_agree_t;

/* Add one option (its command-line name, its value as text). */
void h_agree_add(h_agree_t *a, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* 0 when every rank posted the same lines; ERR_MISMATCH naming the first differing option and the
 * ranks; ERR_TIMEOUT when a rank posted nothing within timeout_ms. what names the mode ("train"). */
int h_agree(comm_t *comm, const char *what, const h_agree_t *a, int timeout_ms);

#endif
