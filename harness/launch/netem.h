/* netem.h: `--net bw=RATE[,per=rank|node][,nodes=K][,queue=MS][,gso=off][,cc=NAME]` (or `inter=RATE` for the emulated cluster of
 * --nodes, one shaped NIC per machine): an emulated network on one machine. The driver
 * creates one network namespace per rank (per=node: per group of ranks, K groups, default 2), each
 * joined by a veth pair to a bridge that lives in a namespace of its own (nothing is added to the
 * root namespace), addresses 10.231.X.Y/16, and a tc tbf at RATE on both ends of every veth (a
 * full-duplex link of RATE per rank). Ranks enter their namespace between fork and exec (the
 * launcher's child_setup hook) and talk TCP to rank 0's address; every namespace runs TCP congestion
 * control NAME (default H_NETEM_CC_DEFAULT), whatever this host's own default is. Needs root. This kernel has no
 * sch_netem, so tc cannot add delay: delay= is refused with that explanation. */
#ifndef SB_HARNESS_NETEM_H
#define SB_HARNESS_NETEM_H
#include <stddef.h>
#include "harness/launch/launch.h"
#include "harness/emulate/netspec.h"

typedef struct h_netem h_netem_t;

/* Create the namespaces, bridge, veths, addresses and shaping for nranks ranks. Removes namespaces
 * left by harness processes that no longer exist first. On failure everything created is removed and
 * err says why (not root, ip/tc missing, a command's own message). */
int  h_netem_new(h_netem_t **self_p, const h_netem_spec_t *spec, int nranks, char *err, size_t errlen);
/* The TCP congestion control the namespaces run: the spec's; when it was not given and this kernel lacks
 * the default, the host's own (h_netem_new warned). */
const char *h_netem_cc(const h_netem_t *self);
/* Remove every namespace (and with them the veths, bridge and qdiscs); safe twice and on NULL. */
void h_netem_destroy(h_netem_t **self_p);

/* The IPv4 address of rank r's namespace ("10.231.0.1"). */
const char *h_netem_addr(const h_netem_t *self, int rank);
/* Name of rank r's namespace ("sb-1234-0"). */
const char *h_netem_ns(const h_netem_t *self, int rank);
/* For the launcher's child_setup: enter rank local_rank's namespace (setns on a descriptor opened
 * beforehand: async-signal-safe). arg is the h_netem_t. Returns 0 or -1. */
int  h_netem_enter(void *arg, int local_rank);

/* Place ranks on namespaces explicitly (the emulated cluster: ranks of a machine share one, servers
 * may sit on machines of their own): rank r -> ns_of_rank[r], for the first nranks ranks; later
 * launches use it instead of contiguous groups. 0, or -1 on a bad index. */
int  h_netem_map(h_netem_t *self, const int *ns_of_rank, int nranks);
/* How many namespaces (emulated machines) there are. */
int  h_netem_namespaces(const h_netem_t *self);

/* Driver side, per launch of nlocal ranks (<= the nranks of h_netem_new): map ranks onto the
 * namespaces (per=node: contiguous groups), and point lc at them: master = rank 0's address and a
 * fixed port (the namespaces are fresh), child_setup = h_netem_enter. master_buf must outlive the
 * launch. */
void h_netem_launch_cfg(h_netem_t *self, h_launch_cfg_t *lc, int nlocal, char *master_buf, size_t len);
/* argv + "--transport tcp" (ranks in separate namespaces cannot share memory channels; the later
 * option wins). Returns a malloc'd NULL-terminated array (free it with free()), *ac its length. */
char **h_netem_argv(int argc, char **argv, int *ac);

/* Where `ip netns` keeps its namespaces; whether a program (ip, tc) is on PATH or in /usr/sbin, /sbin;
 * the namespace that holds the bridge. */
#define H_NETNS_DIR "/var/run/netns"
int h_netem_have(const char *prog);
const char *h_netem_bridge_ns(const h_netem_t *self);

#endif
