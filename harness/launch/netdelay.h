/* netdelay.h: --net's lat=, a constant delay on every emulated NIC's egress without sch_netem (which this
 * kernel lacks, as it lacks nftables' queue): an iptables rule queues each packet leaving eth0 to NFQUEUE 0 of its namespace, and one
 * helper process holds it there for the delay and then accepts it, in order. */
#ifndef SB_HARNESS_LAUNCH_NETDELAY_H
#define SB_HARNESS_LAUNCH_NETDELAY_H
#include <stddef.h>
#include <sys/types.h>

/* Fork the helper: it binds NFQUEUE 0 in each of the nns namespaces (open fds in nsfd) and holds every
 * packet queued there delay_us microseconds. Returns once every queue is bound (so packets queued after it
 * are never dropped for want of a listener): 0 with the helper's pid in *pid, or -1 with the reason. */
int h_netdelay_start(pid_t *pid, int nns, const int *nsfd, double delay_us, char *err, size_t errlen);

/* End the helper (SIGTERM, then wait for it); a pid <= 0 is ignored. */
void h_netdelay_stop(pid_t pid);

#endif
