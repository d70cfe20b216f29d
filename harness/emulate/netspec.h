/* netspec.h: the emulated network as a --net spec describes it (`bw=RATE[,per=rank|node][,nodes=K]
 * [,queue=MS][,gso=off][,cc=NAME][,lat=US]`, or `inter=RATE` for the emulated cluster's NICs): rate, grouping,
 * shaper queue, congestion control. Parsed here; launch/netem.h builds the namespaces from it, and the
 * cost models read the rate and protocol from it. */
#ifndef SB_HARNESS_EMULATE_NETSPEC_H
#define SB_HARNESS_EMULATE_NETSPEC_H
#include <stddef.h>

typedef struct {
    double bits_per_s;       /* bw= */
    char   rate[32];         /* the rate as tc takes it ("1000000000bit") */
    int    per_node;         /* per=node */
    int    nodes;            /* nodes=K (per=node), default 2 */
    double eff;              /* eff=E (0 < E <= 1, default 1): the share of the line rate the emulated cluster's
                              * transport protocol reaches (inter= only; the shaper runs at E x the rate) */
    double queue_ms;         /* queue=MS (default 100): how long a packet may wait in a shaper (tbf latency), the
                              * emulated switch port's buffer in time, so the same at any --shrink */
    int    gso_off;          /* gso=off: veths send one MTU segment per packet (gso_max_segs 1), so the token bucket
                              * can be 1 ms at the rate however slow (default on: 64 KiB GSO packets, a 128 KiB floor) */
    char   cc[16];           /* cc=NAME: TCP congestion control in every namespace; "" = H_NETEM_CC_DEFAULT */
    double lat_us;           /* lat=US (default 0): the per-hop latency as `harness simulate --lat` counts it (4 hops
                              * GPU->machine->switch->machine->GPU across machines): a packet leaving an emulated
                              * NIC is held H_NETEM_LAT_HOPS x lat_us (launch/netdelay.c); the launcher multiplies it
                              * by --dilate as it divides the rates */
} h_netem_spec_t;

#define H_NETEM_QUEUE_MS 100.0 /* queue= when not given */
/* lat=: the hops a transfer across machines pays in `harness simulate` (GPU->machine, machine->switch,
 * switch->machine, machine->GPU), all applied on the sending NIC's egress: a constant delay anywhere on a
 * FIFO path shifts every departure equally, so one place is the same as four. Transfers inside a machine
 * (shared memory) get none: the emulation does not delay them, as it does not shape them. */
#define H_NETEM_LAT_HOPS 4
#define H_NETEM_LAT_MAX_US 100000.0
/* cc= when not given: the congestion control every emulated result in results/ ran with. It sets how TCP
 * flows share a shaped NIC, and with it what a parameter server loses to its slowest flow (emulation-cc),
 * so it is pinned rather than inherited from the host. */
#define H_NETEM_CC_DEFAULT "bbr"
/* The congestion control a spec asks for (its cc=, else the default). */
const char *h_netem_spec_cc(const h_netem_spec_t *spec);

/* Parse a --net spec; 0, or -1 with the reason in err. */
int h_netem_parse(const char *spec, h_netem_spec_t *out, char *err, size_t errlen);

/* The tbf burst (bytes, on the wire) every shaped link gets: 1 ms at the rate, at least a whole 64 KiB GSO
 * packet (128 KiB), which tbf would otherwise segment in software; with gso=off at least 4 full frames. */
double h_netem_burst(const h_netem_spec_t *spec);

#endif
