/* flood.h: a hostile peer's bytes for the oversized-frame tests (test_tp.c, test_ps_trust.c): a raw
 * ZMTP 3.0 DEALER that announces one 1 GiB frame, the junk that streams after a giant header, and an
 * unfinished multi-frame message of 1 MiB "more" frames (test_auth.c, test_ps_trust.c). */
#ifndef SB_TEST_FLOOD_H
#define SB_TEST_FLOOD_H
#include <stddef.h>

/* The greeting (NULL mechanism), the READY command (Socket-Type DEALER) and the header of one 1 GiB
 * frame (a long frame, no more), into buf (128 bytes at least); returns the length. */
size_t flood_zmtp_preamble(unsigned char *buf);
/* The greeting announcing mech ("NULL" or "CURVE"); with "NULL" also the READY command (DEALER).
 * Returns the length written to buf (128 bytes at least). */
size_t flood_zmtp_greeting(unsigned char *buf, const char *mech);
/* Stream up to max_mib frames of 1 MiB each flagged "more" (one unfinished multi-frame message) on
 * fd, stopping at the first send that fails or blocks past the socket's SO_SNDTIMEO; returns bytes sent. */
size_t flood_more_frames(int fd, int max_mib);
/* Send up to max_mib MiB of zeros on fd, stopping at the first send that fails; returns the bytes sent. */
size_t flood_junk(int fd, int max_mib);

#endif
