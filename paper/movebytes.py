"""movebytes.py: the paper's chapter "How the two styles move bytes": a worked example at P = 4 from
`harness explain` (its step-by-step text and its PNG diagrams, drawn at build time from the engines' own
schedule code), the measured traffic matrices of results/traffic.jsonl beside the schedule and the cost
formulas, and the engine memory of the training runs beside their RSS. Every number is computed here
from the harness's output or the results files. Python 3 standard library only."""
import json
import os
import subprocess
import sys

P = 4
# the worked example: (key, title, explain arguments, traffic.jsonl impl)
CASES = (
    ("ring", "ring", ["--engine", "ring"], "host"),
    ("tree", "double binary tree", ["--engine", "tree"], "host"),
    ("ps1", "parameter server, 1 dedicated server", ["--engine", "ps", "--servers", "1"], "ps-sync-servers1"),
    ("ps2", "parameter server, 2 dedicated servers", ["--engine", "ps", "--servers", "2"], "ps-sync-servers2"),
)


def mib(b):
    if b and b < 1024:
        return "%d B" % b
    return "%.3g MiB" % (b / 2**20) if b else "0"


def kib(b):
    return "%d" % round(b / 1024)


def table(head, rows, left=1):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join([" --- "] * left + [" ---: "] * (len(head) - left)) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def explain(harness, case, size, figdir):
    """`harness explain` for one case: its text and its schedule matrix (bytes per link of one allreduce)."""
    cmd = [harness, "explain", "--procs", str(P), "--sizes", str(int(size))] + case[2]
    if figdir:
        os.makedirs(figdir, exist_ok=True)
        cmd += ["--plots", figdir]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("gen.py: %s failed (exit %d):\n%s" % (" ".join(cmd), p.returncode, p.stderr))
    mat = []
    for line in p.stdout.splitlines():
        if line.startswith("traffic_bytes:"):
            mat = [float(x) for x in line.split()[1:]]
    return p.stdout, mat


def stats(mat):
    """(busiest link, busiest NIC in + out, mean NIC, busiest rank) of a square matrix (row = sender)."""
    n = int(round(len(mat) ** 0.5))
    link = max(mat) if mat else 0
    nic = [sum(mat[i * n + j] + mat[j * n + i] for j in range(n) if j != i) for i in range(n)]
    return link, max(nic), sum(nic) / n, nic.index(max(nic))


def jsonl(path):
    """The JSON objects of a results file, one a line (malformed lines skipped); [] when it is missing."""
    out = []
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for t in f:
                try:
                    o = json.loads(t)
                except ValueError:
                    continue
                if isinstance(o, dict):
                    out.append(o)
    return out


def measured(results_dir):
    """results/traffic.jsonl's bench lines with a traffic matrix at P = 4: {impl: latest line}."""
    p = os.path.join(results_dir, "traffic.jsonl")
    out = {}
    for o in jsonl(p):
        if o.get("mode") == "bench" and o.get("world") == P and o.get("traffic_bytes"):
            out[o.get("engine") if o.get("engine") in ("ring", "tree") else o.get("impl")] = o
    return out, p


def formula(key, M, S=1):
    """The cost formula for one allreduce of M bytes at P workers: (text, busiest link, busiest NIC)."""
    if key == "ring":
        v = 2.0 * (P - 1) / P * M
        return "every link 2(P−1)/P·M; every NIC 4(P−1)/P·M", v, 2 * v
    if key == "tree":
        return ("every tree edge M/2 up and M/2 down (2(P−1)·M over all links, as the ring); a rank inside one tree "
                "and a leaf of the other: 3M + M = 4M"), M, 4.0 * M
    return ("worker → server M/S, server → worker M/S; a server's NIC N·M/S in and N·M/S out (S = %d: %s each way)" % (
        S, mib(P * M / S))), M / S, 2.0 * P * M / S


def matrix_md(mat, per, servers):
    n = int(round(len(mat) ** 0.5))
    name = lambda r: "s%d" % (r - P) if r >= P else "%d" % r  # noqa: E731
    rows = [[name(i)] + [kib(mat[i * n + j] / per) if i != j else "·" for j in range(n)] for i in range(n)]
    return table(["KiB from \\ to"] + [name(j) for j in range(n)], rows)


def example(harness, results_dir, figs, figrel, summary):
    M_meas, path = measured(results_dir)
    size = next((float(o["bytes"]) for o in M_meas.values()), 1048576.0)
    out = ["The schedules below are printed by `harness explain --procs %d --sizes %d` from the code the engines run "
           "(so they cannot drift from it), for an allreduce of %s of f32. Each diagram is one step: an arrow per "
           "message, labelled with the chunk (ring `cK`), half (tree `h0`/`h1`) or partition (PS `pK`) it carries and "
           "the set of ranks whose inputs it sums ({0-3} is complete), and on the right what every rank holds after "
           "the step.\n" % (P, size, mib(size))]
    rows = []
    for case in CASES:
        key, title = case[0], case[1]
        d = os.path.join(figs, "explain", key) if figs else None
        text, sched = explain(harness, case, size, d)
        steps = [line for line in text.splitlines() if line.startswith("step ")]
        keep = [line for line in text.splitlines() if not line.startswith(("traffic_bytes:", "# diagrams", "# note"))
                and not line.startswith("  partition")]
        out.append("#### %s: %d steps\n\n```\n$ harness explain --procs %d --sizes %d %s\n%s\n```\n" % (
            title.capitalize(), len(steps), P, size, " ".join(case[2]), "\n".join(keep).strip()))
        if d:
            pngs = sorted((f for f in os.listdir(d) if f.endswith(".png")), key=lambda f: int(f[5:-4]))
            for f in pngs:
                out.append("![%s, diagram %s](%s/explain/%s/%s)\n" % (title, f[5:-4], figrel, key, f))
            if pngs:
                out.append("_Figures: `harness explain --procs %d %s --plots DIR`, one per step ([SVG](%s/explain/%s/step_1.svg) "
                           "beside each PNG)._\n" % (P, " ".join(case[2]), figrel, key))
        S = int(case[2][-1]) if key.startswith("ps") else 1
        ftext, flink, fnic = formula(key, size, S)
        slink, snic, smean, sbusy = stats(sched)
        o = M_meas.get(case[3] if key.startswith("ps") else key)
        if o:
            per = float(o.get("iters", 0)) + float(o.get("warmup", 0))
            mat = [float(x) for x in o["traffic_bytes"]]
            mlink, mnic, mmean, mbusy = stats([x / per for x in mat])
            out.append("Measured (`results/traffic.jsonl`, bench of %d allreduces, bytes per allreduce):\n" % per)
            out.append(matrix_md(mat, per, S))
            rows.append([title, ftext, mib(flink), mib(slink), mib(mlink), mib(fnic), mib(snic), mib(mnic),
                         "%.2f" % (mnic / mmean if mmean else 0)])
        else:
            rows.append([title, ftext, mib(flink), mib(slink), "not measured", mib(fnic), mib(snic), "not measured",
                         "%.2f (schedule)" % (snic / smean if smean else 0)])
    out.append("\n#### The cost formulas beside the bytes\n\nPer allreduce of M = %s at P = N = %d workers; a link is "
               "one direction between two ranks, a NIC is a rank's bytes in plus out. Formula, `explain`'s schedule "
               "and the measured matrix:\n" % (mib(size), P))
    out.append(table(["engine", "formula", "busiest link: formula", "schedule", "measured", "busiest NIC: formula",
                      "schedule", "measured", "NIC max/mean"], rows, 2))
    if not M_meas:
        out.append("\n_The traffic matrices are not measured: `%s` is missing. Run `scripts/record-results traffic`._\n" % path)
    else:
        r = {row[0]: row for row in rows}
        if "ring" in r and "parameter server, 1 dedicated server" in r:
            summary.append("Bytes at P=%d (`traffic`): the ring's busiest NIC carries %s per allreduce of %s (max/mean "
                           "%s); one PS server's carries %s (max/mean %s, the hub)." % (
                               P, r["ring"][7], mib(size), r["ring"][8], r["parameter server, 1 dedicated server"][7],
                               r["parameter server, 1 dedicated server"][8]))
    return "\n".join(out)


def memory(results_dir, summary):
    """Engine memory (what each engine allocates) beside RSS, ps with one server against ring, at P = 4
    (else the largest P both have) of the first results file whose training lines carry both."""
    for name in ("train-ps-ring", "train-scaling"):
        p = os.path.join(results_dir, name + ".jsonl")
        L = [o for o in jsonl(p) if o.get("mode") == "train" and not o.get("emulated") and o.get("mem_engine_bytes")]
        by = {}
        for o in L:
            if o.get("engine") == "ring" or o.get("impl") == "ps-sync-servers1":
                by[(o["engine"], o["world"])] = o
        worlds = sorted({w for (e, w) in by if ("ring", w) in by and ("ps", w) in by})
        if not worlds:
            continue
        w = P if P in worlds else worlds[-1]
        ps, ring = by[("ps", w)], by[("ring", w)]
        grad = 4.0 * float(ps.get("params", 0))
        rows = []
        for o, lab in ((ps, "ps, 1 server"), (ring, "ring")):
            em = [float(x) for x in o["mem_engine_bytes"]]
            rss = [float(x) for x in o.get("mem_peak_bytes") or []]
            for r, e in enumerate(em):
                who = "server" if r >= w else "worker %d" % r
                rows.append([lab, who, mib(e), "%.2f" % (e / grad) if grad else "–",
                             mib(rss[r]) if r < len(rss) else "–"])
        eimb = lambda o: max(map(float, o["mem_engine_bytes"])) / (sum(map(float, o["mem_engine_bytes"])) / len(o["mem_engine_bytes"]))  # noqa: E731
        rimb = lambda o: max(map(float, o["mem_peak_bytes"])) / (sum(map(float, o["mem_peak_bytes"])) / len(o["mem_peak_bytes"]))  # noqa: E731
        out = ["From `results/%s.jsonl`, training at P = %d (%s parameters, %s of f32 gradients; optimizer `%s`):\n" % (
            name, w, ps.get("params"), mib(grad), ps.get("optim")), table(
            ["engine", "rank", "engine memory", "÷ parameter bytes", "peak RSS"], rows, 2)]
        srv = max(map(float, ps["mem_engine_bytes"]))
        out.append("\nEngine memory max/mean over ranks: ps %.2f against P + 1 = %d if one rank held everything: the "
                   "server holds the parameters and the optimizer state (%.2f× the parameter bytes), each worker %s; "
                   "ring %.2f (every rank holds the same %.2f×). Process RSS max/mean: ps %.2f, ring %.2f: the "
                   "runtime, the model's activations and the data every process holds hide the imbalance at this "
                   "model size.\n" % (eimb(ps), w + 1, srv / grad if grad else 0, mib(min(map(float, ps["mem_engine_bytes"]))),
                                      eimb(ring), float(ring["mem_engine_bytes"][0]) / grad if grad else 0, rimb(ps), rimb(ring)))
        summary.append("Engine memory at P=%d (`%s`): one PS server holds %s, each worker %s (max/mean %.2f); ring ranks "
                       "hold %s each (max/mean %.2f)." % (w, name, mib(max(map(float, ps["mem_engine_bytes"]))),
                                                         mib(min(map(float, ps["mem_engine_bytes"]))), eimb(ps),
                                                         mib(float(ring["mem_engine_bytes"][0])), eimb(ring)))
        return "\n".join(out)
    return "_Not measured: no training line with `mem_engine_bytes` for both ps (1 server) and ring._\n"


def section(harness, results_dir, figs, figrel, summary):
    return {"BYTES_EXAMPLE": example(harness, results_dir, figs, figrel, summary),
            "BYTES_MEMORY": memory(results_dir, summary)}
