#!/usr/bin/env python3
"""gen.py: fills paper/syncbench.md.in with tables and sentences computed from results/*.jsonl.

Every number in the paper comes from here, at build time, out of the JSON lines the harness (and the
OpenMPI peer) wrote; where an experiment's file is missing the paper says "not measured". The
template holds the prose and @@NAME@@ placeholders; an unknown placeholder is an error.

usage: gen.py --harness PATH --results DIR --template FILE --out FILE [--figs DIR] [--reports DIR]
The tables' rows (engine labels, medians of repeated runs, scaling efficiency, model predictions)
come from `harness report FILE --format json`; the lines themselves only give metadata (host, commit,
commands) and fields the report does not tabulate (losses, memory per rank). Python 3 standard
library only; HTML is made from the Markdown by paper/Makefile (pandoc or python3-markdown).
"""
import argparse
import glob
import math
import os
import re
import statistics
import sys

sys.dont_write_bytecode = True   # no __pycache__ beside the sources
from results import Result, num  # noqa: E402  (paper/results.py)
import emulated  # noqa: E402  (paper/emulated.py)
import movebytes  # noqa: E402  (paper/movebytes.py)
import footing  # noqa: E402  (paper/footing.py)

NOT_MEASURED = "_Not measured: no such lines in results/._"


# ---- formatting ---------------------------------------------------------------------------------

def fbytes(b):
    b = float(b)
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return "%d %s" % (b // k, unit)
    return "%d B" % b


def fsig(x, sig=3):
    if x is None or isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return "–"
    if x == 0:
        return "0"
    d = max(0, sig - 1 - int(math.floor(math.log10(abs(x)))))
    return "%.*f" % (d, x)


def ftime_us(us):
    if us is None or math.isnan(us):
        return "–"
    if us >= 1e6:
        return fsig(us / 1e6) + " s"
    if us >= 1e3:
        return fsig(us / 1e3) + " ms"
    return fsig(us) + " us"


def ratio_phrase(a, ta, b, tb, what="faster"):
    """'**b** is 2.31x faster than **a** (..)' from times (lower is better): the faster one first."""
    if not (ta > 0 and tb > 0):
        return "%s and %s cannot be compared" % (a, b)
    if 0.97 <= tb / ta <= 1.03:
        return "**%s** and **%s** take about the same time (%s against %s)" % (a, b, ftime_us(ta), ftime_us(tb))
    if ta < tb:
        return "**%s** is %s× %s than **%s** (%s against %s)" % (a, fsig(tb / ta), what, b, ftime_us(ta), ftime_us(tb))
    return "**%s** is %s× %s than **%s** (%s against %s)" % (b, fsig(ta / tb), what, a, ftime_us(tb), ftime_us(ta))


def table(head, rows, align=None):
    if not rows:
        return ""
    align = align or ["l"] + ["r"] * (len(head) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join(sep) + " |"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out) + "\n"


def cores_of(lines):
    """Core count from the topology metadata ('1 package, 2 cores, 2 PUs, ...'); None if unknown."""
    for o in lines:
        t = o.get("topology") or o.get("topo") or ""
        m = re.search(r"(\d+) cores?", str(t))
        if m:
            return int(m.group(1))
    return None


# ---- the paper's parts --------------------------------------------------------------------------

class Paper:
    def __init__(self, results, figs, reports, figrel):
        self.R = results
        self.figs = figs
        self.figrel = figrel
        self.reports = reports
        self.all_lines = [o for r in results for o in r.lines]
        self.cores = cores_of(self.all_lines)
        self.summary = []

    def fig(self, r, name, caption):
        if not self.figs:
            return ""
        p = os.path.join(self.figs, r.name, name + ".png")
        if not os.path.exists(p):
            return ""
        rel = "%s/%s/%s.png" % (self.figrel, r.name, name)
        svg = "%s/%s/%s.svg" % (self.figrel, r.name, name)
        return "\n![%s](%s)\n\n_Figure: %s (`%s`; [SVG](%s))._\n" % (caption, rel, caption, r.name + ".jsonl", svg)

    def over(self, world, servers=0):
        return self.cores is not None and world + servers > self.cores

    # -- setup --
    def setup(self):
        if not self.all_lines:
            return "_No results: results/ holds no `.jsonl` file. Run `scripts/record-results`._\n"
        out = []
        rows = []
        for r in self.R:
            modes = sorted({str(o.get("mode", "?")) for o in r.lines})
            hosts = sorted({str(o.get("host")) for o in r.lines if o.get("host")})
            shas = sorted({str(o.get("git_sha")) for o in r.lines if o.get("git_sha")})
            ts = sorted(str(o.get("timestamp")) for o in r.lines if o.get("timestamp"))
            tr = sorted({str(o.get("transport")) for o in r.lines if o.get("transport")})
            span = (ts[0] if ts[0] == ts[-1] else "%s … %s" % (ts[0], ts[-1])) if ts else "–"
            rows.append(["`%s`" % r.name, len(r.lines), ", ".join(modes) or "–", ", ".join(hosts) or "–",
                         ", ".join(shas) or "–", ", ".join(tr) or "–", span])
        out.append(table(["results file", "lines", "modes", "host", "git sha", "transport", "recorded (UTC)"], rows,
                         ["l", "r", "l", "l", "l", "l", "l"]))
        for key, what in (("cpu", "CPU"), ("topology", "Topology"), ("topo", None), ("versions", "Libraries")):
            vals = sorted({str(o.get(key)) for o in self.all_lines if o.get(key)})
            if key == "topo":
                continue
            if key == "topology":
                vals = sorted(set(vals) | {str(o.get("topo")) for o in self.all_lines if o.get("topo")})
            if vals:
                out.append("- %s: %s" % (what, "; ".join("`%s`" % v for v in vals)))
        models = sorted({(str(o.get("model")), int(num(o.get("params"), 0))) for o in self.all_lines
                         if o.get("mode") == "train" and o.get("model")})
        if models:
            out.append("- Model trained: %s" % "; ".join("`%s`, %d parameters (%s MiB of f32 gradients per step)" % (
                m, p, fsig(p * 4 / 2**20)) for m, p in models))
        for key, what in (("data", "Data"), ("optim", "Optimizer"), ("batch", "Global batch"),
                          ("grad_dtype", "Gradient dtype"), ("steps", "Timed steps"), ("warmup_steps", "Warm-up steps"),
                          ("blas_threads", "BLAS threads per rank")):
            vals = sorted({str(o.get(key)) for o in self.all_lines if o.get("mode") == "train" and key in o})
            if vals:
                out.append("- %s (training runs): %s" % (what, ", ".join("`%s`" % v for v in vals)))
        it = sorted({"%s/%s" % (o.get("iters"), o.get("warmup")) for o in self.all_lines if o.get("mode") == "bench"})
        if it:
            out.append("- Bench iterations / warm-up: %s" % ", ".join("`%s`" % v for v in it))
        dt = sorted({"%s %s" % (o.get("dtype"), o.get("op")) for o in self.all_lines if o.get("mode") == "bench"})
        if dt:
            out.append("- Bench element type and reduction: %s" % ", ".join("`%s`" % v for v in dt))
        bad = sum(r.bad for r in self.R)
        sup = sum(r.superseded for r in self.R)
        if bad or sup:
            out.append("- Lines skipped as malformed: %d; repeated runs of the same engine, world and size (bench: "
                       "their median, as `harness report` takes it; train: the latest): %d." % (bad, sup))
        return "\n".join(out) + "\n"

    # -- bench --
    def bench_file(self, r):
        b = r.bench
        labels = sorted({k[0] for k in b})
        worlds = sorted({k[1] for k in b})
        sizes = sorted({k[2] for k in b})
        pick = [s for s in sizes if s in (sizes[0], sizes[-1]) or s in (65536.0, 1048576.0, 16777216.0)]
        out = ["#### %s\n" % r.title, "From `results/%s.jsonl`: %s, P ∈ {%s}, %d sizes from %s to %s.\n" % (
            r.name, ", ".join("`%s`" % l for l in labels), ", ".join(map(str, worlds)), len(sizes),
            fbytes(sizes[0]), fbytes(sizes[-1]))]
        rows_t, rows_b = [], []
        wrong = 0
        for l in labels:
            for w in worlds:
                if not any(k[0] == l and k[1] == w for k in b):
                    continue
                mark = " †" if self.over(w, int(num(next(o for k, o in b.items() if k[0] == l and k[1] == w).get("servers"), 0))) else ""
                rt = ["`%s`" % l, "%d%s" % (w, mark)]
                rb = list(rt)
                peak, peak_s = -1, 0
                for s in sizes:
                    o = b.get((l, w, s))
                    if o is None:
                        continue
                    wrong += int(num(o.get("wrong"), 0))
                    bw = num(o.get("busbw_gbs"))
                    if bw > peak:
                        peak, peak_s = bw, s
                for s in pick:
                    o = b.get((l, w, s))
                    rt.append(ftime_us(num(o.get("time_us"))) if o else "–")
                    rb.append(fsig(num(o.get("busbw_gbs"))) if o else "–")
                rb.append("%s @ %s" % (fsig(peak), fbytes(peak_s)) if peak >= 0 else "–")
                rows_t.append(rt)
                rows_b.append(rb)
        out.append("Time per allreduce (median over iterations of the slowest rank):\n")
        out.append(table(["engine", "P"] + [fbytes(s) for s in pick], rows_t))
        out.append("\nBus bandwidth, GB/s (busbw = algbw · 2(P−1)/P):\n")
        out.append(table(["engine", "P"] + [fbytes(s) for s in pick] + ["peak"], rows_b))
        if any(self.over(w) for w in worlds):
            out.append("\n† more ranks than the %d cores the metadata reports: ranks share cores.\n" % self.cores)
        out.append("\n%s\n" % ("Every result was checked: `#wrong` is 0 in every line." if wrong == 0 else
                                "**Warning: %d wrong elements were reported; those results are not correct.**" % wrong))
        # comparisons against the reference (ring when present)
        ref = "ring" if "ring" in labels else labels[0]
        others = [l for l in labels if l != ref]
        if others:
            out.append("\nAgainst `%s` (computed from the lines above):\n" % ref)
            for w in worlds:
                for l in others:
                    common = [s for s in sizes if (ref, w, s) in b and (l, w, s) in b]
                    if not common:
                        continue
                    ta = {s: num(b[(ref, w, s)].get("time_us")) for s in common}
                    tb = {s: num(b[(l, w, s)].get("time_us")) for s in common}
                    lo, hi = common[0], common[-1]
                    wins = [s for s in common if tb[s] < ta[s]]
                    if not wins:
                        wtxt = "`%s` is faster at none of the %d sizes" % (l, len(common))
                    elif len(wins) == len(common):
                        wtxt = "`%s` is faster at all %d sizes" % (l, len(common))
                    else:
                        wtxt = "`%s` is faster at %d of %d sizes (%s)" % (l, len(wins), len(common), size_ranges(wins, common))
                    out.append("- P=%d: at %s %s; at %s %s; %s.\n" % (
                        w, fbytes(hi), ratio_phrase(ref, ta[hi], l, tb[hi]), fbytes(lo),
                        ratio_phrase(ref, ta[lo], l, tb[lo]), wtxt))
            # headline for the summary: largest world, largest size
            w = worlds[-1]
            for l in others:
                for s in (sizes[-1], sizes[0]):
                    if (ref, w, s) in b and (l, w, s) in b:
                        self.summary.append("Allreduce of %s at P=%d (`%s`): %s." % (
                            fbytes(s), w, r.name,
                            ratio_phrase(ref, num(b[(ref, w, s)].get("time_us")), l, num(b[(l, w, s)].get("time_us")))))
        out.append(self.fig(r, "bench_busbw", "bus bandwidth against message size, %s" % r.name))
        return "\n".join(out)

    def bench(self, names_first=()):
        files = [r for r in self.R if r.bench]
        if not files:
            return NOT_MEASURED + "\n"
        order = {n: i for i, n in enumerate(names_first)}
        files.sort(key=lambda r: (order.get(r.name, len(order)), r.name))
        return "\n".join(self.bench_file(r) for r in files)

    # -- train --
    @staticmethod
    def losses(o):
        """'first → last', or '–' where there is none: an emulated model computes no loss (its lines carry
        none; older ones wrote 0)."""
        lf, ll = num(o.get("loss_first")), num(o.get("loss_last"))
        if o.get("emulated") or math.isnan(lf) or math.isnan(ll):
            return "–"
        return "%s → %s" % (fsig(lf, 4), fsig(ll, 4))

    def train_rows(self, t):
        rows = []
        for (l, w), o in sorted(t.items()):
            srv = int(num(o.get("servers"), 0))
            mark = " †" if self.over(w, srv) else ""
            rows.append(["`%s`" % l, "%d%s" % (w, mark), srv, fsig(num(o.get("samples_per_s")), 4),
                         fsig(num(o.get("step_ms_p50"))), fsig(num(o.get("step_ms_p99"))),
                         fsig(num(o.get("compute_ms_p50"))), fsig(num(o.get("comm_ms_p50"))),
                         fsig(num(o.get("wait_ms_p50"))),
                         self.losses(o)])
        return table(["engine", "P", "servers", "samples/s", "step p50 (ms)", "step p99 (ms)", "compute p50 (ms)",
                      "comm p50 (ms)", "wait p50 (ms)", "loss first → last"], rows)

    def train(self):
        files = [r for r in self.R if r.train and not r.gemm]
        if not files:
            return NOT_MEASURED + "\n"
        out = []
        for r in files:
            t = r.train
            out.append("#### Throughput: %s\n\nFrom `results/%s.jsonl`.\n" % (r.title, r.name))
            out.append(self.train_rows(t))
            if any(self.over(w, int(num(o.get("servers"), 0))) for (l, w), o in t.items()):
                out.append("\n† workers plus servers exceed the %d cores the metadata reports.\n" % self.cores)
            worlds = sorted({w for (_, w) in t})
            for w in worlds:
                at = sorted(((num(o.get("samples_per_s")), l) for (l, ww), o in t.items() if ww == w), reverse=True)
                if len(at) < 2:
                    continue
                best = at[0]
                parts = ", ".join("`%s` %s" % (l, fsig(s, 4)) for s, l in at)
                rest = "; ".join("%s× the throughput of `%s`" % (fsig(best[0] / s), l) for s, l in at[1:] if s > 0)
                out.append("- P=%d, samples/s: %s. `%s` is fastest: %s.\n" % (w, parts, best[1], rest))
                if w == worlds[-1]:
                    self.summary.append("Training at P=%d (`%s`): `%s` is fastest (%s samples/s); %s." % (
                        w, r.name, best[1], fsig(best[0], 4), rest))
            out.append(self.fig(r, "train_step", "training step time against workers, %s" % r.name))
        return "\n".join(out)

    def memory(self):
        files = [r for r in self.R if not r.gemm and any(isinstance(o.get("mem_peak_bytes"), list) for o in r.train.values())]
        if not files:
            return NOT_MEASURED + "\n"
        out = []
        for r in files:
            rows = []
            notes = []
            for (l, w), o in sorted(r.train.items()):
                mem = [num(x) for x in o.get("mem_peak_bytes") or []]
                if not mem:
                    continue
                wk = mem[:w]
                sv = mem[w:]
                mean = sum(mem) / len(mem)
                imax = max(range(len(mem)), key=lambda i: mem[i])
                wimb = max(wk) / (sum(wk) / len(wk)) if wk and sum(wk) > 0 else float("nan")
                who = "server %d" % (imax - w) if imax >= w else "worker %d" % imax
                rows.append(["`%s`" % l, w, len(sv), fsig(num(o.get("mem_imbalance"), max(mem) / mean if mean else float("nan"))),
                             fsig(wimb), fsig(max(mem) / 2**20), fsig(min(mem) / 2**20),
                             fsig(max(sv) / 2**20) if sv else "–", who])
                if sv:
                    wmean = sum(wk) / len(wk) if wk else float("nan")
                    if max(sv) > wmean * 1.05:
                        notes.append("`%s` P=%d: the busiest server holds %s× the mean worker's peak memory: the "
                                     "aggregation point is the heavy rank, as DataParallel's gather device is." % (
                                         l, w, fsig(max(sv) / wmean)))
                    else:
                        notes.append("`%s` P=%d: the server's peak is %s× the mean worker's: here the server is not the "
                                     "heavy rank (it holds parameters and optimizer state for its shard, not "
                                     "activations); the max/mean over all ranks reflects a lighter server." % (
                                         l, w, fsig(max(sv) / wmean)))
            out.append("#### Memory: %s\n\nFrom `results/%s.jsonl`; peak memory per rank as the harness measured it.\n" % (r.title, r.name))
            out.append(table(["engine", "P", "servers", "max/mean (all ranks)", "max/mean (workers)", "max (MiB)",
                              "min (MiB)", "server max (MiB)", "heaviest rank"], rows))
            for n in notes:
                out.append("- %s\n" % n)
            big = max(w for (_, w) in r.train)
            # engine memory (what each engine allocates: parameters, gradients, optimizer state, buffers) is the
            # balance the design decides; process RSS is dominated by the shared model and runtime
            imbs = sorted((num(o.get("mem_engine_imbalance")), num(o.get("mem_imbalance")), l)
                          for (l, w), o in r.train.items() if w == big)
            if len(imbs) > 1:
                self.summary.append("Memory balance at P=%d (`%s`, max/mean over all ranks): engine memory %s; "
                                    "process RSS, for comparison: %s." % (
                    big, r.name, ", ".join("`%s` %s" % (l, fsig(e)) for e, _, l in imbs),
                    ", ".join("`%s` %s" % (l, fsig(m)) for _, m, l in imbs)))
            out.append(self.fig(r, "train_memory", "peak memory per rank, largest P of each engine, %s" % r.name))
        return "\n".join(out)

    def scaling(self):
        out = []
        for r in self.R:
            if r.gemm:
                continue
            t = r.train
            labels = sorted({l for (l, _) in t})
            multi = [l for l in labels if len({w for (ll, w) in t if ll == l}) > 1]
            if not multi:
                continue
            worlds = sorted({w for (l, w) in t if l in multi})
            rows = []
            approx = False
            for l in multi:
                ws = sorted(w for (ll, w) in t if ll == l)
                base = ws[0]
                s0 = num(t[(l, base)].get("samples_per_s"))
                row = ["`%s`" % l, base]
                for w in worlds:
                    if (l, w) not in t or not s0 > 0:
                        row.append("–")
                        continue
                    # the report's efficiency: (sps(P)/P) / (sps(base)/base)
                    row.append("%s (%s)" % (fsig(num(t[(l, w)].get("samples_per_s")), 4), fsig(num(t[(l, w)].get("scaling_eff")))))
                approx |= base > 1
                rows.append(row)
                if ws[-1] > base:
                    e = num(t[(l, ws[-1])].get("scaling_eff"))
                    if r.name == "train-scaling" or not any(x.name == "train-scaling" for x in self.R):
                        self.summary.append("Scaling efficiency of `%s` at P=%d (against P=%d, `%s`): %s." % (
                            l, ws[-1], base, r.name, fsig(e)))
            out.append("#### Scaling: %s\n\nFrom `results/%s.jsonl`: samples/s (scaling efficiency) per world size P.\n" % (r.title, r.name))
            out.append(table(["engine", "base P"] + ["P=%d%s" % (w, " †" if self.over(w) else "") for w in worlds], rows))
            if approx:
                out.append("\nWhere base P > 1 there is no single-worker run: efficiency is relative to the smallest "
                           "world, (sps(P)/P) / (sps(base)/base).\n")
            if any(self.over(w) for w in worlds):
                out.append("\n† more workers than the %d cores: efficiency there measures sharing cores, not the "
                           "engine alone.\n" % self.cores)
            out.append(self.fig(r, "train_scaling", "scaling efficiency, %s" % r.name))
        return "\n".join(out) if out else NOT_MEASURED + "\n"

    def gemm(self):
        out = []
        for r in self.R:
            if not r.gemm:
                continue
            g = r.gemm[-1]
            rows = [["bare sgemm (`harness gemm`)", g.get("procs", "–"), g.get("blas_threads", "–"),
                     fsig(num(g.get("samples_per_s")), 4), fsig(num(g.get("gflops"))), fsig(num(g.get("step_ms_p50")))]]
            t1 = [o for (l, w), o in r.train.items() if w == 1]
            for o in t1:
                rows.append(["trainer `%s`, P=1" % o["label"], 1, o.get("blas_threads", "–"),
                             "%s (compute only: %s)" % (fsig(num(o.get("samples_per_s")), 4),
                                                        fsig(num(o.get("compute_samples_per_s")), 4)),
                             "–", fsig(num(o.get("step_ms_p50")))])
            out.append("From `results/%s.jsonl` (%s).\n" % (r.name, r.title))
            out.append(table(["what", "procs", "BLAS threads", "samples/s", "GFLOP/s", "step p50 (ms)"], rows))
            gs = num(g.get("samples_per_s"))
            for o in t1:
                cs = num(o.get("compute_samples_per_s"))
                if gs > 0 and cs > 0:
                    out.append("\nThe trainer's compute runs at %s%% of the bare GEMM rate (%s against %s samples/s).\n" % (
                        fsig(100 * cs / gs), fsig(cs, 4), fsig(gs, 4)))
        return "\n".join(out) if out else NOT_MEASURED + "\n"

    # -- cost model --
    def model(self):
        lines = [o for r in self.R for o in r.model]
        fits = [o for r in self.R for o in r.fits]
        if not lines and not fits:
            return NOT_MEASURED + "\n"
        out = []
        if fits:
            rows = [[o.get("probe", "–"), fsig(num(o.get("alpha_us"))), fsig(num(o.get("beta_ns_per_byte"))),
                     fsig(1 / num(o.get("beta_ns_per_byte"))) if num(o.get("beta_ns_per_byte")) > 0 else "–",
                     fsig(num(o.get("gamma_ns_per_byte"))), o.get("git_sha", "–")] for o in fits]
            out.append("Fitted parameters (probe between ranks 0 and 1):\n")
            out.append(table(["probe", "α (us)", "β (ns/B)", "1/β (GB/s)", "γ (ns/B)", "git sha"], rows))
        meas = [o for o in lines if o.get("what") != "fit" and num(o.get("meas_us")) > 0 and num(o.get("pred_us")) >= 0]
        if meas:
            groups = {}
            for o in meas:
                groups.setdefault((str(o.get("what")), o["label"]), []).append(o)
            rows = []
            tot_in = 0
            for (what, l), g in sorted(groups.items()):
                errs = [100 * (num(o["pred_us"]) - num(o["meas_us"])) / num(o["meas_us"]) for o in g]
                within = sum(1 for e in errs if abs(e) <= 15)
                tot_in += within
                rows.append([what, "`%s`" % l, len(g), ",".join(str(x) for x in sorted({int(num(o.get("world"), 0)) for o in g})),
                             fsig(statistics.mean(abs(e) for e in errs)), "%+.1f" % statistics.median(errs),
                             "%d of %d" % (within, len(g))])
            out.append("\nPredicted against measured, err = (pred − meas)/meas:\n")
            out.append(table(["what", "engine", "points", "P", "mean abs err (%)", "median err (%)", "within ±15%"], rows))
            allerr = [abs(num(o["pred_us"]) - num(o["meas_us"])) / num(o["meas_us"]) * 100 for o in meas]
            med = statistics.median(100 * (num(o["pred_us"]) - num(o["meas_us"])) / num(o["meas_us"]) for o in meas)
            if statistics.mean(allerr) <= 15:
                verdict = "the model explains these measurements to within the usual ±15%"
            else:
                verdict = ("the model does **not** explain these measurements (the median prediction is %s than "
                           "measured), so its extrapolation below should not be read as a forecast for this machine" % (
                               "%s%% less time" % fsig(-med) if med < 0 else "%s%% more time" % fsig(med)))
            out.append("\nOver all %d measured points the mean absolute error is %s%%, %d within ±15%%: %s.\n" % (
                len(meas), fsig(statistics.mean(allerr)), tot_in, verdict))
            self.summary.append("Alpha-beta model against measurement: mean |err| %s%% over %d points (%d within ±15%%)." % (
                fsig(statistics.mean(allerr)), len(meas), tot_in))
        extra = [o for o in lines if o.get("what") != "fit" and not num(o.get("meas_us")) > 0 and num(o.get("pred_us")) >= 0]
        if extra:
            by = {}
            for o in extra:
                by.setdefault((str(o.get("what")), o["label"], num(o.get("bytes"), 0)), {})[int(num(o.get("world"), 0))] = num(o["pred_us"])
            worlds = sorted({w for d in by.values() for w in d})
            rows = [[what, "`%s`" % l, fbytes(b)] + [ftime_us(d[w]) if w in d else "–" for w in worlds]
                    for (what, l, b), d in sorted(by.items())]
            out.append("\nExtrapolation (predicted only, nothing measured):\n")
            out.append(table(["what", "engine", "size"] + ["P=%d" % w for w in worlds], rows))
        for r in self.R:
            if r.model or r.fits:
                out.append(self.fig(r, "model_pred", "cost model, predicted against measured, %s" % r.name))
                out.append(self.fig(r, "model_extrapolation", "cost model extrapolated in P, %s" % r.name))
        return "\n".join(out)

    # -- emulated network --
    def net(self):
        lines = [o for r in self.R for o in r.net_lines()]
        if not lines:
            return NOT_MEASURED + "\n"
        out = []
        specs = sorted({str(o["net"]) for o in lines})
        for spec in specs:
            bench = {}
            train = {}
            for o in lines:
                if o["net"] != spec:
                    continue
                if o.get("mode") == "bench" and num(o.get("time_us")) > 0:
                    bench[(o["label"], int(num(o.get("world"), 0)), num(o.get("bytes")))] = o
                elif o.get("mode") == "train":
                    train[(o["label"], int(num(o.get("world"), 0)))] = o
            out.append("#### `--net %s`\n" % spec)
            if bench:
                sizes = sorted({k[2] for k in bench})
                pick = [s for s in sizes if s in (sizes[0], sizes[-1]) or s in (1048576.0, 16777216.0)]
                rows = []
                for l, w in sorted({(k[0], k[1]) for k in bench}):
                    rows.append(["`%s`" % l, w] + ["%s (%s GB/s)" % (ftime_us(num(bench[(l, w, s)]["time_us"])),
                                                                      fsig(num(bench[(l, w, s)].get("busbw_gbs"))))
                                                   if (l, w, s) in bench else "–" for s in pick])
                out.append("Allreduce time (busbw):\n")
                out.append(table(["engine", "P"] + [fbytes(s) for s in pick], rows))
            if train:
                out.append("\nTraining:\n")
                out.append(self.train_rows(train))
        return "\n".join(out)

    # -- threats (the numbers behind them) --
    def runs_per_config(self, mode):
        """'N runs' (or 'A to B runs') per configuration of mode, counted from the result lines."""
        keys = ("mode", "engine", "impl", "world", "servers", "transport", "bytes", "size", "dtype", "model",
                "steps", "iters", "net", "straggler", "grad_dtype", "batch")
        count = {}
        for o in self.all_lines:
            if o.get("mode") != mode:
                continue
            k = tuple(str(o.get(x)) for x in keys)
            count[k] = count.get(k, 0) + 1
        if not count:
            return ""
        lo, hi = min(count.values()), max(count.values())
        n = "one run" if hi == 1 else "%d runs" % hi if lo == hi else "%d to %d runs" % (lo, hi)
        return "%s: %s per configuration" % (mode, n)

    def threats(self):
        out = []
        if self.cores is not None:
            maxw = max([int(num(o.get("world"), 0)) + int(num(o.get("servers"), 0)) for o in self.all_lines
                        if o.get("mode") in ("bench", "train")] or [0])
            out.append("- The metadata reports **%d cores**; the largest run used %d processes%s." % (
                self.cores, maxw, ", so ranks shared cores: results above %d ranks measure time-sharing as much as "
                "the algorithm" % self.cores if maxw > self.cores else ""))
        tr = sorted({str(o.get("transport")) for o in self.all_lines if o.get("transport")})
        hosts = sorted({str(o.get("host")) for o in self.all_lines if o.get("host")})
        if tr:
            out.append("- Transports measured: %s; all on %s host%s%s." % (
                ", ".join("`%s`" % t for t in tr), len(hosts), "" if len(hosts) == 1 else "s",
                " (`%s`)" % hosts[0] if len(hosts) == 1 else ""))
        shas = sorted({str(o.get("git_sha")) for o in self.all_lines if o.get("git_sha")})
        if len(shas) > 1:
            out.append("- The results come from %d different commits (%s): files may not be comparable line for line." % (
                len(shas), ", ".join("`%s`" % s for s in shas)))
        dirty = [s for s in shas if s.endswith("-dirty")]
        if dirty:
            out.append("- Recorded from a working tree with uncommitted changes: %s." % ", ".join("`%s`" % s for s in dirty))
        it = sorted({int(num(o.get("iters"), 0)) for o in self.all_lines if o.get("mode") == "bench"})
        st = sorted({int(num(o.get("steps"), 0)) for o in self.all_lines if o.get("mode") == "train"})
        if it or st:
            runs = "; ".join(x for x in (self.runs_per_config("bench"), self.runs_per_config("train")) if x)
            out.append("- Sample sizes: %s%s%s; %s (counted from the results), so differences of a few percent are within "
                       "run-to-run noise." % ("bench iterations %s" % ", ".join(map(str, it)) if it else "",
                                              "; " if it and st else "",
                                              "training steps %s" % ", ".join(map(str, st)) if st else "",
                                              runs))
        missing = [n for n in EXPECTED if not any(r.name == n for r in self.R)]
        if missing:
            out.append("- Not recorded in this build: %s." % ", ".join("`%s`" % n for n in missing))
        return "\n".join(out) + "\n" if out else "_No metadata to judge from._\n"

    # -- reproduce --
    def reproduce(self):
        if not self.R:
            return "No results are recorded yet: `scripts/record-results` measures them all.\n"
        out = []
        for r in self.R:
            cmds = []
            head = ""
            if r.txt:
                ls = r.txt.splitlines()
                head = ls[0][2:] if ls and ls[0].startswith("# ") else ""
                cmds = [l[2:] for l in ls if l.startswith("$ ")]
            if not cmds:
                seen = []
                for o in r.lines:
                    c = o.get("cmdline")
                    if c and c not in seen:
                        seen.append(c)
                cmds = seen
            out.append("`results/%s.jsonl`%s%s:\n" % (r.name, " — " + head if head else "",
                                                    "" if r.txt else " (no .txt beside it; commands from the lines' metadata)"))
            if cmds:
                out.append("```\n" + "\n".join(cmds) + "\n```\n")
            else:
                out.append("_No command recorded._\n")
        return "\n".join(out)

    def reports_appendix(self):
        if not self.reports:
            return "_Not generated._\n"
        out = []
        for r in self.R:
            p = os.path.join(self.reports, r.name + ".txt")
            if os.path.exists(p):
                with open(p, encoding="utf-8", errors="replace") as f:
                    txt = f.read().rstrip()
                out.append("`harness report results/%s.jsonl`:\n\n```\n%s\n```\n" % (r.name, txt))
        return "\n".join(out) if out else "_No report output._\n"

    def others(self):
        known = set(EXPECTED)
        extra = [r for r in self.R if r.name not in known]
        if not extra:
            return ""
        return "Results files beyond those `scripts/record-results` writes (included in the tables above): %s.\n" % (
            ", ".join("`%s`" % r.name for r in extra))

    def inventory(self):
        rows = []
        for n in EXPECTED:
            r = next((x for x in self.R if x.name == n), None)
            rows.append(["`%s`" % n, EXPECTED[n], "%d lines" % len(r.lines) if r else "not measured"])
        return table(["results file", "experiment", "status"], rows, ["l", "l", "l"]) + "\n" + self.others()


# what scripts/record-results writes, in the paper's order
EXPECTED = {
    "bench-tree-ring": "double binary tree against ring",
    "bench-ps-ring": "parameter server against ring and tree (bench)",
    "ring-vs-openmpi-shm": "host ring against OpenMPI (shared memory)",
    "ring-vs-openmpi-tcp": "host ring against OpenMPI (TCP loopback)",
    "train-ps-ring": "training: ps against ring and tree",
    "train-scaling": "training scaling 1..8 workers",
    "gemm-vs-trainer": "the trainer's compute against bare sgemm",
    "traffic": "traffic matrices at P = 4: how the two styles move bytes",
    "small_messages": "small messages: ring (one-shot) against OpenMPI, 4-64 KiB",
    "same-footing": "engines against their own transport ceilings, and on like transports",
    "ps-vs-pslite": "the parameter server on ps-lite's workload",
    "ps-on-gpu-machines": "parameter servers on the GPU machines, emulated",
}


def size_ranges(wins, common):
    """Describe a subset of sizes as contiguous ranges within the ordered list of all sizes."""
    idx = [common.index(s) for s in wins]
    out, start = [], idx[0]
    for a, b in zip(idx, idx[1:] + [None]):
        if b != a + 1:
            out.append(fbytes(common[start]) if start == a else "%s–%s" % (fbytes(common[start]), fbytes(common[a])))
            if b is not None:
                start = b
    return ", ".join(out)


# ---- main ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harness", required=True, help="the built harness program (build/harness)")
    ap.add_argument("--results", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--figs", help="folder of harness report figures, one subfolder per results file")
    ap.add_argument("--reports", help="folder of harness report outputs, <name>.txt per results file")
    a = ap.parse_args()

    paths = sorted(glob.glob(os.path.join(a.results, "*.jsonl")))
    results = [Result(p, a.harness) for p in paths]
    order = list(EXPECTED)
    results.sort(key=lambda r: (order.index(r.name) if r.name in order else len(order), r.name))
    figrel = os.path.relpath(a.figs, os.path.dirname(os.path.abspath(a.out))) if a.figs else ""
    P = Paper(results, a.figs, a.reports, figrel)

    parts = {
        "INVENTORY": P.inventory,
        "SETUP": P.setup,
        "BENCH": lambda: P.bench(order),
        "TRAIN": P.train,
        "MEMORY": P.memory,
        "SCALING": P.scaling,
        "GEMM": P.gemm,
        "MODEL": P.model,
        "NET": P.net,
        "THREATS": P.threats,
        "REPRODUCE": P.reproduce,
        "REPORTS": P.reports_appendix,
    }
    with open(a.template, encoding="utf-8") as f:
        tpl = f.read()
    done = dict(emulated.section(a.results, P.summary))
    done.update(emulated.figures(a.results, a.figs, figrel))
    done.update(movebytes.section(a.harness, a.results, a.figs, figrel, P.summary))
    done.update(footing.section(a.results, P.summary))
    # summary last: the other parts add to it
    for k in parts:
        if "@@%s@@" % k in tpl:
            done[k] = parts[k]().rstrip("\n")
    shas = sorted({str(o.get("git_sha")) for o in P.all_lines if o.get("git_sha")})
    P.summary = list(dict.fromkeys(P.summary))  # one line per finding, even if two parts found it
    done["SUMMARY"] = ("\n".join("- %s" % s for s in P.summary) if P.summary else
                       "_No comparison can be made yet: the results needed are not measured._")
    done["GENERATED"] = "built from %d results file%s (%d lines) in `results/`, recorded at git %s" % (
        len(results), "" if len(results) == 1 else "s", len(P.all_lines),
        ", ".join("`%s`" % s for s in shas) if shas else "(unknown)")

    def sub(m):
        k = m.group(1)
        if k not in done:
            sys.exit("gen.py: %s: unknown placeholder @@%s@@" % (a.template, k))
        return done[k]

    md = re.sub(r"@@([A-Z_]+)@@", sub, tpl)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
