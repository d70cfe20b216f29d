/* test_netem.c: --net's emulated network (harness/launch/netem.c, harness/emulate/netspec.c): spec parsing (delay= refused with the
 * reason, lat= parsed), and, as root, lat='s delay measured as TCP round trips between two machines, namespace set-up (addresses, tbf on both veth ends, TCP between two
 * namespaces at about the shaped rate) and clean-up (nothing left in /var/run/netns). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness/launch/netem.h"

Test(netem, parse)
{
    h_netem_spec_t s;
    char err[512];
    cr_assert_eq(h_netem_parse("bw=1gbit", &s, err, sizeof err), 0, "%s", err);
    cr_assert(s.bits_per_s == 1e9 && !s.per_node && !strcmp(s.rate, "1000000000bit"));
    cr_assert_eq(h_netem_parse("bw=100mbit,per=node,nodes=3", &s, err, sizeof err), 0, "%s", err);
    cr_assert(s.bits_per_s == 1e8 && s.per_node && s.nodes == 3);
    cr_assert(s.queue_ms == 100, "default queue %g ms", s.queue_ms);
    cr_assert_eq(h_netem_parse("inter=10gbit,queue=5ms", &s, err, sizeof err), 0, "%s", err);
    cr_assert(s.queue_ms == 5 && s.per_node);
    cr_assert_eq(h_netem_parse("bw=1gbit,queue=2.5", &s, err, sizeof err), 0, "%s", err);
    cr_assert(s.queue_ms == 2.5 && !s.gso_off);
    cr_assert_eq(h_netem_parse("inter=10gbit,gso=off", &s, err, sizeof err), 0, "%s", err);
    cr_assert(s.gso_off);
    /* the bucket: 1 ms at the rate, floored at a 64 KiB GSO packet, or at 4 frames with gso=off */
    s.bits_per_s = 10e6; /* 1 ms is 1,250 bytes */
    cr_assert_float_eq(h_netem_burst(&s), 4 * 1514.0, 1e-9);
    s.gso_off = 0;
    cr_assert_float_eq(h_netem_burst(&s), 131072.0, 1e-9);
    s.bits_per_s = 8e9;
    cr_assert_float_eq(h_netem_burst(&s), 1e6, 1e-9);
    /* TCP's congestion control: pinned to the default unless cc= names another */
    cr_assert_str_eq(h_netem_spec_cc(&s), H_NETEM_CC_DEFAULT);
    cr_assert_eq(h_netem_parse("inter=25gbit,cc=cubic", &s, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(h_netem_spec_cc(&s), "cubic");
    cr_assert_eq(h_netem_parse("bw=1gbit,cc=No Such", &s, err, sizeof err), -1);
    cr_assert(strstr(err, "congestion control"), "%s", err);
    /* lat=: microseconds a hop, with or without "us" */
    cr_assert(s.lat_us == 0, "default lat %g", s.lat_us);
    cr_assert_eq(h_netem_parse("inter=10gbit,lat=20", &s, err, sizeof err), 0, "%s", err);
    cr_assert(s.lat_us == 20 && s.bits_per_s == 10e9);
    cr_assert_eq(h_netem_parse("inter=10gbit,queue=5,lat=2.5us", &s, err, sizeof err), 0, "%s", err);
    cr_assert(s.lat_us == 2.5 && s.queue_ms == 5);
    static const char *badlat[] = {"bw=1gbit,lat=", "bw=1gbit,lat=-1", "bw=1gbit,lat=5ms", "bw=1gbit,lat=x",
                                   "bw=1gbit,lat=200000", "bw=1gbit,lat=nan", NULL};
    for (int i = 0; badlat[i]; i++) {
        cr_assert_eq(h_netem_parse(badlat[i], &s, err, sizeof err), -1, "accepted '%s'", badlat[i]);
        cr_assert(strstr(err, "lat=") && strstr(err, "microseconds"), "unclear: %s", err);
    }
    cr_assert_eq(h_netem_parse("bw=1gbit,delay=1ms", &s, err, sizeof err), -1);
    cr_assert(strstr(err, "sch_netem"), "%s", err);
    static const char *bad[] = {"", "bw", "bw=", "bw=1", "bw=fast", "bw=-1gbit", "bw=1gbit,per=host", "per=node",
                                "bw=1gbit,nodes=0", "bw=1gbit,x=1", "bw=1gbit,queue=", "bw=1gbit,queue=0",
                                "bw=1gbit,queue=5s", "bw=1gbit,queue=-1ms", "bw=1gbit,gso=no", "bw=1gbit,cc=",
                                "bw=1gbit,cc=averyverylongname", "bw=1gbit,cc=cu/bic", NULL};
    for (int i = 0; bad[i]; i++) cr_assert_eq(h_netem_parse(bad[i], &s, err, sizeof err), -1, "accepted '%s'", bad[i]);
}

static int s_ns_exists(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, H_NETNS_DIR "/%s", name);
    return access(p, F_OK) == 0;
}

static double s_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

Test(netem, setup_shaping_cleanup, .timeout = 60)
{
    if (geteuid() != 0) cr_skip_test("needs root (network namespaces, veth, tc)");
    if (!h_netem_have("ip") || !h_netem_have("tc")) cr_skip_test("ip / tc (iproute2) not installed");
    h_netem_spec_t spec;
    char err[512];
    cr_assert_eq(h_netem_parse("bw=100mbit,queue=20ms,gso=off", &spec, err, sizeof err), 0);
    h_netem_t *net = NULL;
    cr_assert_eq(h_netem_new(&net, &spec, 3, err, sizeof err), 0, "%s", err);
    char names[4][64];
    for (int r = 0; r < 3; r++) {
        snprintf(names[r], sizeof names[r], "%s", h_netem_ns(net, r));
        cr_assert(s_ns_exists(names[r]), "%s missing", names[r]);
    }
    snprintf(names[3], sizeof names[3], "%s", h_netem_bridge_ns(net));
    cr_assert(s_ns_exists(names[3]));
    cr_assert_str_eq(h_netem_addr(net, 0), "10.231.0.1");
    cr_assert_str_eq(h_netem_addr(net, 2), "10.231.0.3");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "tc -n %s qdisc show dev eth0 | grep -q 'tbf.*rate 100Mbit'", names[1]);
    cr_assert_eq(system(cmd), 0, "no tbf in %s", names[1]);
    snprintf(cmd, sizeof cmd, "tc -n %s qdisc show dev eth0 | grep -q 'lat 20ms'", names[1]);
    cr_assert_eq(system(cmd), 0, "the tbf in %s does not hold packets for queue=20ms", names[1]);
    snprintf(cmd, sizeof cmd, "ip -n %s -d link show eth0 | grep -q 'gso_max_segs 1 '", names[1]);
    cr_assert_eq(system(cmd), 0, "gso=off: eth0 in %s still sends GSO packets", names[1]);

    /* TCP from rank 1's namespace to rank 0's: 2.5 MB at 100 Mbit/s takes >= ~0.2 s (unshaped veth:
     * a few ms) */
    int ready[2];
    cr_assert_eq(pipe(ready), 0);
    const size_t total = 2500000;
    pid_t srv = fork();
    if (srv == 0) {
        if (h_netem_enter(net, 0) < 0) _exit(2);
        int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(29501)};
        inet_pton(AF_INET, "10.231.0.1", &a.sin_addr);
        if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0) _exit(3);
        if (write(ready[1], "x", 1) != 1) _exit(4);
        int c = accept(l, NULL, NULL);
        static char buf[65536];
        size_t got = 0;
        ssize_t n;
        while ((n = read(c, buf, sizeof buf)) > 0) got += (size_t)n;
        _exit(got == total ? 0 : 5);
    }
    char x;
    cr_assert_eq(read(ready[0], &x, 1), 1);
    pid_t cli = fork();
    if (cli == 0) {
        if (h_netem_enter(net, 1) < 0) _exit(2);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(29501)};
        inet_pton(AF_INET, "10.231.0.1", &a.sin_addr);
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) _exit(3);
        static char buf[65536];
        size_t sent = 0;
        while (sent < total) {
            size_t k = total - sent < sizeof buf ? total - sent : sizeof buf;
            ssize_t n = write(s, buf, k);
            if (n <= 0) _exit(4);
            sent += (size_t)n;
        }
        close(s);
        _exit(0);
    }
    double t0 = s_now();
    int st;
    cr_assert_eq(waitpid(cli, &st, 0), cli);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client exit %d", WEXITSTATUS(st));
    cr_assert_eq(waitpid(srv, &st, 0), srv);
    double dt = s_now() - t0;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server exit %d", WEXITSTATUS(st));
    double mbit = total * 8 / dt / 1e6;
    cr_assert(mbit > 60 && mbit < 125, "throughput %.1f Mbit/s through a 100 Mbit/s link", mbit);

    h_netem_destroy(&net);
    cr_assert_null(net);
    h_netem_destroy(&net);    /* safe twice */
    for (int i = 0; i < 4; i++) cr_assert(!s_ns_exists(names[i]), "%s left behind", names[i]);
}

/* The median of 200 one-byte TCP round trips (us) from rank 1's machine to rank 0's. */
static double s_rtt_us(h_netem_t *net)
{
    int ready[2], res[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(res), 0);
    enum { N = 200 };
    pid_t srv = fork();
    if (srv == 0) {
        if (h_netem_enter(net, 0) < 0) _exit(2);
        int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(29502)};
        inet_pton(AF_INET, h_netem_addr(net, 0), &a.sin_addr);
        if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0) _exit(3);
        if (write(ready[1], "x", 1) != 1) _exit(4);
        int c = accept(l, NULL, NULL);
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        char b;
        while (read(c, &b, 1) == 1)
            if (write(c, &b, 1) != 1) _exit(5);
        _exit(0);
    }
    char x;
    cr_assert_eq(read(ready[0], &x, 1), 1);
    pid_t cli = fork();
    if (cli == 0) {
        if (h_netem_enter(net, 1) < 0) _exit(2);
        int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(29502)};
        inet_pton(AF_INET, h_netem_addr(net, 0), &a.sin_addr);
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) _exit(3);
        static double t[N];
        for (int i = 0; i < N; i++) {
            char b = 'p';
            double t0 = s_now();
            if (write(s, &b, 1) != 1 || read(s, &b, 1) != 1) _exit(4);
            t[i] = (s_now() - t0) * 1e6;
        }
        close(s);
        for (int i = 1; i < N; i++) /* insertion sort: the median */
            for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { double y = t[j]; t[j] = t[j - 1]; t[j - 1] = y; }
        _exit(write(res[1], &t[N / 2], sizeof t[0]) == sizeof t[0] ? 0 : 5);
    }
    int st;
    cr_assert_eq(waitpid(cli, &st, 0), cli);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ping client exit %d", WEXITSTATUS(st));
    cr_assert_eq(waitpid(srv, &st, 0), srv);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ping server exit %d", WEXITSTATUS(st));
    double med = 0;
    cr_assert_eq(read(res[0], &med, sizeof med), (ssize_t)sizeof med);
    close(ready[0]), close(ready[1]), close(res[0]), close(res[1]);
    return med;
}

/* lat=US: a round trip between two machines pays 2 x H_NETEM_LAT_HOPS x US more than without it (each
 * direction leaves one NIC), the tbf is still there, and nothing is left behind (helper or namespace). */
Test(netem, latency_measured, .timeout = 60)
{
    if (geteuid() != 0) cr_skip_test("needs root (network namespaces, veth, tc)");
    if (!h_netem_have("ip") || !h_netem_have("tc")) cr_skip_test("ip / tc (iproute2) not installed");
    if (!h_netem_have("iptables")) cr_skip_test("iptables not installed: lat= needs it");
    h_netem_spec_t spec;
    char err[512], names[2][64], cmd[256];
    h_netem_t *net = NULL;
    cr_assert_eq(h_netem_parse("bw=1gbit,per=node,nodes=2", &spec, err, sizeof err), 0);
    cr_assert_eq(h_netem_new(&net, &spec, 2, err, sizeof err), 0, "%s", err);
    double base = s_rtt_us(net);
    h_netem_destroy(&net);
    cr_assert_eq(h_netem_parse("bw=1gbit,per=node,nodes=2,lat=250", &spec, err, sizeof err), 0);
    cr_assert_eq(h_netem_new(&net, &spec, 2, err, sizeof err), 0, "%s", err);
    for (int r = 0; r < 2; r++) snprintf(names[r], sizeof names[r], "%s", h_netem_ns(net, r));
    snprintf(cmd, sizeof cmd, "tc -n %s qdisc show dev eth0 | grep -q 'tbf.*rate 1Gbit'", names[1]);
    cr_assert_eq(system(cmd), 0, "no tbf in %s beside the delay", names[1]);
    snprintf(cmd, sizeof cmd, "ip netns exec %s iptables -S OUTPUT | grep -q -- '-o eth0 -j NFQUEUE'", names[1]);
    cr_assert_eq(system(cmd), 0, "no NFQUEUE rule on eth0 in %s", names[1]);
    double with = s_rtt_us(net), want = 2.0 * H_NETEM_LAT_HOPS * 250;
    h_netem_destroy(&net);
    fprintf(stderr, "test_netem: median TCP round trip %.0f us without lat=, %.0f us with lat=250 (+%.0f, expected +%.0f)\n",
            base, with, with - base, want);
    cr_assert(with - base > 0.9 * want && with - base < 1.5 * want, "lat=250: the round trip grew %.0f us (%.0f -> %.0f), "
              "expected %.0f", with - base, base, with, want);
    for (int r = 0; r < 2; r++) cr_assert(!s_ns_exists(names[r]), "%s left behind", names[r]);
}

/* The namespace's congestion control as its own processes see it. */
static void s_ns_cc_of(h_netem_t *net, int rank, char *out, size_t len)
{
    int fd[2];
    snprintf(out, len, "?");
    cr_assert_eq(pipe(fd), 0);
    pid_t c = fork();
    if (c == 0) {
        if (h_netem_enter(net, rank) < 0) _exit(2);
        FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
        char b[32] = "";
        if (!f || !fgets(b, sizeof b, f)) _exit(3);
        _exit(write(fd[1], b, strlen(b)) > 0 ? 0 : 4);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], out, len - 1);
    close(fd[0]);
    int st;
    waitpid(c, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0 && n > 0, "reading rank %d's congestion control", rank);
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0';
}

/* Every emulated machine runs the spec's congestion control, whatever the host's default is; a name
 * the kernel lacks is refused with what it offers, and nothing is left behind. */
Test(netem, congestion_control_pinned, .timeout = 60)
{
    if (geteuid() != 0) cr_skip_test("needs root (network namespaces, veth, tc)");
    if (!h_netem_have("ip") || !h_netem_have("tc")) cr_skip_test("ip / tc (iproute2) not installed");
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_congestion_control", "r");
    char avail[256] = "";
    if (f) {
        if (!fgets(avail, sizeof avail, f)) avail[0] = '\0';
        fclose(f);
    }
    if (!strstr(avail, "reno") || !strstr(avail, H_NETEM_CC_DEFAULT))
        cr_skip_test("this kernel offers '%s': the test needs reno and the default " H_NETEM_CC_DEFAULT, avail);
    h_netem_spec_t spec;
    char err[512], got[32];
    h_netem_t *net = NULL;
    cr_assert_eq(h_netem_parse("bw=100mbit,cc=reno", &spec, err, sizeof err), 0);
    cr_assert_eq(h_netem_new(&net, &spec, 2, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(h_netem_cc(net), "reno");
    for (int r = 0; r < 2; r++) {
        s_ns_cc_of(net, r, got, sizeof got);
        cr_assert_str_eq(got, "reno", "rank %d's machine runs %s", r, got);
    }
    h_netem_destroy(&net);
    /* without cc=: the default (on a host whose own default differs, too: nothing is inherited) */
    cr_assert_eq(h_netem_parse("bw=100mbit", &spec, err, sizeof err), 0);
    cr_assert_eq(h_netem_new(&net, &spec, 2, err, sizeof err), 0, "%s", err);
    s_ns_cc_of(net, 1, got, sizeof got);
    cr_assert_str_eq(got, H_NETEM_CC_DEFAULT);
    cr_assert_str_eq(h_netem_cc(net), H_NETEM_CC_DEFAULT);
    char br[64];
    snprintf(br, sizeof br, "%s", h_netem_bridge_ns(net));
    h_netem_destroy(&net);
    cr_assert(!s_ns_exists(br));
    cr_assert_eq(h_netem_parse("bw=100mbit,cc=nosuchcc", &spec, err, sizeof err), 0);
    cr_assert_eq(h_netem_new(&net, &spec, 2, err, sizeof err), -1);
    cr_assert(strstr(err, "nosuchcc") && strstr(err, "offers"), "%s", err);
    cr_assert_null(net);
}

Test(netem, per_node_groups, .timeout = 30)
{
    if (geteuid() != 0) cr_skip_test("needs root (network namespaces, veth, tc)");
    if (!h_netem_have("ip") || !h_netem_have("tc")) cr_skip_test("ip / tc (iproute2) not installed");
    h_netem_spec_t spec;
    char err[512];
    cr_assert_eq(h_netem_parse("bw=1gbit,per=node,nodes=2", &spec, err, sizeof err), 0);
    h_netem_t *net = NULL;
    cr_assert_eq(h_netem_new(&net, &spec, 4, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(h_netem_ns(net, 0), h_netem_ns(net, 1));
    cr_assert_str_eq(h_netem_ns(net, 2), h_netem_ns(net, 3));
    cr_assert_str_neq(h_netem_ns(net, 1), h_netem_ns(net, 2));
    h_launch_cfg_t lc = {0};
    char m[64];
    h_netem_launch_cfg(net, &lc, 2, m, sizeof m);   /* a smaller world still spans both nodes */
    cr_assert_str_neq(h_netem_ns(net, 0), h_netem_ns(net, 1));
    cr_assert_str_eq(m, "10.231.0.1:29500");
    cr_assert(lc.child_setup == h_netem_enter && lc.child_arg == net);
    char n0[64];
    snprintf(n0, sizeof n0, "%s", h_netem_ns(net, 0));
    h_netem_destroy(&net);
    cr_assert(!s_ns_exists(n0));
}

Test(netem, not_root_message)
{
    if (geteuid() == 0) cr_skip_test("running as root: the not-root path is not reachable here");
    h_netem_spec_t spec;
    char err[512];
    cr_assert_eq(h_netem_parse("bw=1gbit", &spec, err, sizeof err), 0);
    h_netem_t *net = NULL;
    cr_assert_eq(h_netem_new(&net, &spec, 2, err, sizeof err), -1);
    cr_assert(strstr(err, "needs root"), "%s", err);
}
