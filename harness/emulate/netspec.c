/* netspec.c: parsing a --net spec into the emulated network's description (netspec.h); nothing here
 * creates anything (launch/netem.c builds the namespaces from it). */
#include "harness/emulate/netspec.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int h_netem_parse(const char *spec, h_netem_spec_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->nodes = 2;
    out->eff = 1;
    out->queue_ms = H_NETEM_QUEUE_MS;
    char buf[256];
    if (!spec || strlen(spec) >= sizeof buf) {
        snprintf(err, errlen, "--net: expected bw=RATE[,per=rank|node][,nodes=K][,queue=MS][,gso=off][,cc=NAME][,lat=US]");
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    int have_bw = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) {
            snprintf(err, errlen, "--net: '%s' is not KEY=VALUE (bw=1gbit, per=rank|node, nodes=K)", t);
            return -1;
        }
        *eq = '\0';
        const char *k = t, *v = eq + 1;
        if (!strcmp(k, "bw") || !strcmp(k, "inter")) {
            if (!strcmp(k, "inter")) out->per_node = 1; /* one shaped NIC per emulated machine */
            char *end;
            double x = strtod(v, &end);
            double m = 0;
            if (!strcmp(end, "bit")) m = 1;
            else if (!strcmp(end, "kbit")) m = 1e3;
            else if (!strcmp(end, "mbit")) m = 1e6;
            else if (!strcmp(end, "gbit")) m = 1e9;
            if (end == v || !m || !(x > 0) || x * m < 8000 || x * m > 400e9) {
                snprintf(err, errlen, "--net: bw '%s': expected a rate like 100mbit or 1gbit (bit, kbit, mbit, gbit; 8kbit..400gbit)", v);
                return -1;
            }
            out->bits_per_s = x * m;
            snprintf(out->rate, sizeof out->rate, "%.0fbit", out->bits_per_s);
            have_bw = 1;
        } else if (!strcmp(k, "per")) {
            if (!strcmp(v, "rank")) out->per_node = 0;
            else if (!strcmp(v, "node")) out->per_node = 1;
            else { snprintf(err, errlen, "--net: per='%s': expected rank or node", v); return -1; }
        } else if (!strcmp(k, "nodes")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || end == v || n < 1 || n > 4096) { snprintf(err, errlen, "--net: nodes='%s': expected 1..4096", v); return -1; }
            out->nodes = (int)n;
        } else if (!strcmp(k, "eff")) {
            char *end;
            double e = strtod(v, &end);
            if (*end || end == v || !(e > 0) || e > 1) { snprintf(err, errlen, "--net: eff='%s': expected 0 < E <= 1", v); return -1; }
            out->eff = e;
        } else if (!strcmp(k, "queue")) {
            char *end;
            double q = strtod(v, &end);
            if (end == v || (*end && strcmp(end, "ms")) || !(q >= 0.1) || q > 10000) {
                snprintf(err, errlen, "--net: queue='%s': expected milliseconds a packet may wait in a shaper, 0.1..10000 (e.g. queue=5ms)", v);
                return -1;
            }
            out->queue_ms = q;
        } else if (!strcmp(k, "gso")) {
            if (!strcmp(v, "off")) out->gso_off = 1;
            else if (!strcmp(v, "on")) out->gso_off = 0;
            else { snprintf(err, errlen, "--net: gso='%s': expected on or off", v); return -1; }
        } else if (!strcmp(k, "cc")) {
            size_t n = strlen(v), ok = n > 0 && n < sizeof out->cc;
            for (size_t i = 0; ok && i < n; i++) ok = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '_';
            if (!ok) {
                snprintf(err, errlen, "--net: cc='%s': expected a TCP congestion control's name (cubic, bbr, reno; "
                         "this kernel's are in /proc/sys/net/ipv4/tcp_available_congestion_control)", v);
                return -1;
            }
            snprintf(out->cc, sizeof out->cc, "%s", v);
        } else if (!strcmp(k, "lat")) {
            char *end;
            double l = strtod(v, &end);
            if (end == v || (*end && strcmp(end, "us")) || !(l >= 0) || l > H_NETEM_LAT_MAX_US) {
                snprintf(err, errlen, "--net: lat='%s': expected a per-hop latency in microseconds, 0..%.0f (e.g. lat=20 or "
                         "lat=20us; a transfer across machines pays %d hops)", v, H_NETEM_LAT_MAX_US, H_NETEM_LAT_HOPS);
                return -1;
            }
            out->lat_us = l;
        } else if (!strcmp(k, "delay") || !strcmp(k, "loss") || !strcmp(k, "jitter")) {
            snprintf(err, errlen, "--net: %s= is not available (this kernel has no sch_netem): a constant per-hop delay is "
                     "lat=US; loss and jitter are not emulated", k);
            return -1;
        } else {
            snprintf(err, errlen, "--net: unknown key '%s' (bw or inter, per, nodes, eff, queue, gso, cc, lat)", k);
            return -1;
        }
    }
    if (!have_bw) {
        snprintf(err, errlen, "--net: bw= (or inter= with --nodes) is required (e.g. --net bw=1gbit)");
        return -1;
    }
    return 0;
}

double h_netem_burst(const h_netem_spec_t *spec)
{
    /* at least 128 KiB, else 1 ms at the rate: a 64 KiB GSO packet plus its headers must fit in the
     * bucket, or tbf segments it in software (measured: the ring lost 10-30% at 260-520 Mbit/s shaped,
     * where TCP's GSO packets reach 64 KiB and a 64 KiB bucket was smaller than them) */
    double burst = spec->bits_per_s / 8 / 1000, floor = spec->gso_off ? 4 * 1514 : 131072;
    return burst < floor ? floor : burst;
}

const char *h_netem_spec_cc(const h_netem_spec_t *spec) { return spec && spec->cc[0] ? spec->cc : H_NETEM_CC_DEFAULT; }
