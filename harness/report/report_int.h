/* report_int.h: what the files of report/ share and nobody else needs: the rows' labels and configuration
 * keys (report_label.c). */
#ifndef SB_HARNESS_REPORT_INT_H
#define SB_HARNESS_REPORT_INT_H
#include <stddef.h>
#include "harness/record/jsonl.h"
#include "harness/report/report.h"

/* The label of a result line (h_engine_label, after its run's --label, with an emulated cluster's model,
 * device and link), safe in gnuplot strings and file names. */
void h_report_row_label(const h_jobj_t *o, char *out, size_t len);
/* The configuration key of a line: its configuration fields "k=v", sorted, joined by '\n' (malloc'd; NULL:
 * out of memory). */
char *h_report_cfg_key(const h_jobj_t *o);
/* Rows of one label whose configurations differ get "+k=v" suffixes for the keys that tell them apart. 0 or
 * ERR_NOMEM. */
int h_report_unique_labels(h_rdata_t *d);

#endif
