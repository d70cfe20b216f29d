/* flood.h: a hostile peer's bytes for the oversized-frame tests (test_tp.c, test_ps_trust.c): a raw
 * ZMTP 3.0 DEALER that announces one 1 GiB frame, and the junk that streams after a giant header. */
#ifndef SB_TEST_FLOOD_H
#define SB_TEST_FLOOD_H
#include <stddef.h>

/* The greeting (NULL mechanism), the READY command (Socket-Type DEALER) and the header of one 1 GiB
 * frame (a long frame, no more), into buf (128 bytes at least); returns the length. */
size_t flood_zmtp_preamble(unsigned char *buf);
/* Send up to max_mib MiB of zeros on fd, stopping at the first send that fails; returns the bytes sent. */
size_t flood_junk(int fd, int max_mib);

#endif
