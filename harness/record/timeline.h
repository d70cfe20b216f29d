/* timeline.h: `--timeline FILE` for train and bench: every rank records events (core/trace.h) from
 * start to end; at the end rank 0 gathers the ranks' events through the store and writes one Chrome
 * trace JSON file (chrome://tracing, ui.perfetto.dev) atomically, pid = rank, tid = thread. */
#ifndef SB_H_TIMELINE_H
#define SB_H_TIMELINE_H
#include <stddef.h>
#include "core/comm.h"
#include "harness/registry/engines.h"

typedef struct {
    const char *path;                 /* --timeline FILE (NULL: no timeline) */
    const char *tag;                  /* --timeline-tag TAG */
    const char *mode;                 /* the rank's mode (only train and bench record) */
    const char *engine;               /* the launch's engine (NULL: none) */
    int quiet, timeout_s;
    h_engset_t es;                    /* to tell servers from workers */
} h_timeline_cfg_t;

/* Collective (every rank): agree on rank 0's clock as the origin and start recording. No-op without
 * --timeline or outside train/bench. */
int h_timeline_begin(const h_timeline_cfg_t *o, comm_t *comm);
/* Collective: stop recording; ranks > 0 hand their events to rank 0, which writes the file (temp file
 * + rename: a failure leaves no partial file and says why). No-op when h_timeline_begin did nothing. */
int h_timeline_end(const h_timeline_cfg_t *o, comm_t *comm);
/* The file this launch writes: FILE, or with a tag (--timeline-tag, which the driver puts on the ranks'
 * command line when one run makes several launches) FILE with ".TAG" inserted before a ".json"
 * extension (else appended). */
void h_timeline_path(const char *file, const char *tag, char *out, size_t len);

#endif
