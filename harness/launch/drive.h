/* drive.h: the driver: the launches one command line makes (one per world size and engine), inside the
 * emulated network of --net when given, each rank told its mode and engine on its command line. */
#ifndef SB_HARNESS_DRIVE_H
#define SB_HARNESS_DRIVE_H
#include "harness/cli/opts.h"

/* The driver (launch/drive.c): one launch per (world size, engine) of mode_override (NULL: o->mode), inside
 * the emulated network of --net when given. 0; ERR_INVAL for a usage error (message in err_detail);
 * ERR_INTERRUPT when a signal stopped it (h_interrupt_signal()); another code when a launch failed
 * (each failure already reported on stderr, err_detail() empty) or could not start (err_detail). */
int  h_drive(h_opts_t *o, const char *mode_override);

#endif
