/* port.h: pick a free TCP port on loopback (the launcher's default master port, tests' rendezvous). */
#ifndef SB_PORT_H
#define SB_PORT_H

/* A TCP port the kernel reports free on 127.0.0.1 right now, or -1. Another process may take it
 * before the caller binds it; callers that bind report "port in use" as usual. */
int port_free_loopback(void);
#endif
