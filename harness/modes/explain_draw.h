/* explain_draw.h: the diagrams of `harness explain --plots DIR`: one figure per schedule step (ranks on
 * a circle, an arrow per message labelled with what it carries, and a table of what every rank holds
 * after the step), written as DIR/step_K.svg and rasterised to DIR/step_K.png by rsvg-convert. */
#ifndef SB_H_EXPLAIN_DRAW_H
#define SB_H_EXPLAIN_DRAW_H
#include <stdio.h>

#define H_XD_RANKS 16
#define H_XD_EDGES 256

typedef struct {
    const char *dir;                 /* NULL: no diagrams (every call below does nothing) */
    int world, nworkers;             /* ranks >= nworkers are dedicated servers (drawn apart) */
    int nsteps, npng;                /* figures written so far: SVG, and PNG beside them */
    int nedge, from[H_XD_EDGES], to[H_XD_EDGES];
    char label[H_XD_EDGES][48], title[128], note[160];
    char hold[H_XD_RANKS][256];      /* what each rank holds after the step ("" : not shown) */
    int no_png;                      /* 1 once rsvg-convert was found missing or failed (said once) */
} h_xdraw_t;

/* Start the figure of one step: title, no arrows, no holdings. */
void h_xd_step(h_xdraw_t *d, const char *title);
/* One message of the step: from -> to, labelled (what it carries). */
void h_xd_edge(h_xdraw_t *d, int from, int to, const char *label);
/* What rank r holds after the step (one line of text; long lines are wrapped in the figure). */
void h_xd_hold(h_xdraw_t *d, int r, const char *text);
/* A line under the figure (the step's link bytes). */
void h_xd_note(h_xdraw_t *d, const char *text);
/* Write DIR/step_K.svg, then DIR/step_K.png with rsvg-convert (found on PATH, or SYNCBENCH_RSVG; set
 * empty: none). A missing or failing rsvg-convert is said once on `msg` and leaves the SVGs only.
 * 0, or ERR_IO when the SVG cannot be written. */
int h_xd_step_end(h_xdraw_t *d, FILE *msg);

#endif
