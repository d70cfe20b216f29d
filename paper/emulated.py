"""emulated.py: the paper's sections on the emulated GPU cluster and the reproduced published table,
computed from the emulated runs' JSON lines (results/horovod-2017, byteps-crossover,
emulation-invariance, emulation-host-work, emulation-repeat, emulation-queue, emulation-gso, emulated-scaling, emulated-model),
and the GPU check's table (results/device-check.txt). Python 3 standard library only."""
import json
import os
import re
import shutil
import subprocess

import movebytes  # paper/movebytes.py: jsonl()

# Horovod README (Sep 2017), 16 Pascal GPUs, 4 servers, 25 GbE: speedup over one GPU.
PUBLISHED = {
    "inception3": {"tf-ps": 10.0, "tcp-cpu": 15.4, "tcp-nccl": 14.8, "rdma-nccl": 15.0},
    "resnet101": {"tf-ps": 8.0, "tcp-cpu": 11.2, "tcp-nccl": 14.1, "rdma-nccl": 14.6},
    "vgg16": {"tf-ps": 0.6, "tcp-cpu": 4.7, "tcp-nccl": 10.0, "rdma-nccl": 13.7},
}
NAMES = {"inception3": "Inception V3", "resnet101": "ResNet-101", "vgg16": "VGG-16", "resnet50": "ResNet-50",
         "bert-large": "BERT-large", "bert-base": "BERT-base", "gpt2": "GPT-2"}


def lines(results_dir, name):
    return [o for o in movebytes.jsonl(os.path.join(results_dir, name + ".jsonl"))
            if o.get("emulated") and o.get("mode") == "train"]


def layout(o):
    if o["engine"] != "ps":
        return o["engine"] + ("" if o.get("overlap", True) else " (after backward)")
    if "colocated" in o.get("impl", ""):
        return "ps colocated"
    k = o.get("server_nodes", 0)
    if k:
        return "ps %d server%s on %d CPU machine%s" % (o["servers"], "s" if o["servers"] > 1 else "", k, "s" if k > 1 else "")
    return "ps %d server%s on the GPU machines" % (o["servers"], "s" if o["servers"] > 1 else "")


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join([" --- "] * len(head)) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def flag(o):
    return " (host-bound)" if o.get("host_bound") else ""


def horovod(results_dir, summary):
    L = [o for o in lines(results_dir, "horovod-2017") if o.get("world") == 16]
    if not L:
        return "_Not measured: run `scripts/record-results horovod_2017`._"
    by = {(o["model"], layout(o)): o for o in L}
    rows = []
    for m, pub in PUBLISHED.items():
        r = by.get((m, "ring")), by.get((m, "ring (after backward)")), by.get((m, "ps 4 servers on the GPU machines"))
        cell = lambda o, ref: "-" if not o else "%.2f (%+.0f%%)%s" % (o["speedup"], (o["speedup"] / ref - 1) * 100, flag(o))
        rows.append([NAMES[m], "%.1f" % pub["tcp-nccl"], "%.1f" % pub["rdma-nccl"], cell(r[0], pub["rdma-nccl"]),
                     cell(r[1], pub["tcp-nccl"]), "%.1f" % pub["tf-ps"], cell(r[2], pub["tf-ps"])])
    ok = [abs(by[(m, "ring")]["speedup"] / PUBLISHED[m]["rdma-nccl"] - 1) <= 0.15 for m in PUBLISHED if (m, "ring") in by]
    if ok:
        summary.append("On the emulated 16-GPU cluster of the Horovod README (Pascal, 4 x 4, 25 Gbit/s), ring allreduce "
                       "with DDP-style overlap lands within 15%% of Horovod's published NCCL speedups for %d of %d models "
                       "(horovod-2017)." % (sum(ok), len(ok)))
    return table(["model", "Horovod TCP+NCCL", "Horovod RDMA+NCCL", "ours: ring, overlapped (vs RDMA)",
                  "ours: ring after backward (vs TCP)", "TensorFlow PS", "ours: PS, a server per machine (vs TF)"], rows)


def _checks(results_dir):
    """The cost model's check lines (results/emulated-model.jsonl, "kind":"check"): one per configuration,
    the same from each `harness model` command of the recording, so the first of each is kept."""
    path = os.path.join(results_dir, "emulated-model.jsonl")
    out = {}
    for o in (movebytes.jsonl(path) if os.path.exists(path) else []):
        if o.get("kind") != "check":
            continue
        k = (o["model"], o["device"], o["engine"], o["gpus"], o["nodes"], o["gpus_per_node"], o["net_bps"],
             o.get("local_batch"), o.get("overlap"), o.get("shrink"), o.get("dilate"), o.get("host_bound", False))
        out.setdefault(k, o)
    return out


def _med(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def _sweep_model(checks, o):
    """The cost model's step (its check line) for a BytePS sweep run: n machines of one GPU at 25 Gbit/s,
    the ring or k server machines; None without one."""
    n = o["world"]
    eng = "ring" if o["engine"] == "ring" else ("ps-K=N" if o.get("server_nodes") == n else
                                                 "ps-1server" if o.get("server_nodes") == 1 else
                                                 "ps-K=%d" % o.get("server_nodes", 0))
    for hb in (False, True):
        c = checks.get((o["model"], o["device"], eng, n, n, 1, 25000000000, o.get("local_batch"),
                        o.get("overlap", True), o.get("shrink"), o.get("dilate"), hb))
        if c:
            return c["step_ms"]
    return None


def _byteps_points(results_dir):
    """The BytePS sweep (byteps-crossover, its repeat, and ps-incast-8x1's launches of n = 8, k = 1..5, which
    the model's check pools too): per n, the ring's launches and the PS's per k, each with the cost model's
    step for that configuration (its check line, or None)."""
    L = lines(results_dir, "byteps-crossover") + lines(results_dir, "byteps-crossover-repeat") + \
        lines(results_dir, "ps-incast-8x1")
    checks = _checks(results_dir)
    pts = {}
    for n in sorted({o["world"] for o in L}):
        ring = [o for o in L if o["world"] == n and o["engine"] == "ring"]
        groups = {}
        for o in L:
            if o["world"] == n and o["engine"] == "ps":
                groups.setdefault(o.get("server_nodes", 0), []).append(o)
        if ring and groups:
            pts[n] = {"ring": (ring, _sweep_model(checks, ring[0])),
                      "ps": [(k, groups[k], _sweep_model(checks, groups[k][0])) for k in sorted(groups)]}
    return L, pts


def byteps(results_dir, summary):
    L, pts = _byteps_points(results_dir)
    if not pts:
        return "_Not measured: run `scripts/record-results byteps_crossover`._"
    def launches(G):
        return " / ".join("%.1f%s" % (o["emu_step_ms"], " †" if o.get("host_bound") else "") for o in G)
    out, crossings = [], []
    for n, p in pts.items():
        ring, rm = p["ring"]
        r = _med([o["emu_step_ms"] for o in ring])
        bound = n * n / (2.0 * (n - 1))
        # the link arithmetic per step, in units of the ring's: ring 2(n-1)/n M; a PS whose servers answer
        # while pushes still arrive (full duplex, BytePS) max(M, nM/k)
        ring_u = 2.0 * (n - 1) / n
        rows = [["ring", "-", launches(ring), "%.1f" % r, "1.00", "%.1f" % rm if rm else "-", "1.00", "1.00"]]
        first = first_model = None
        for k, G, pm in p["ps"]:
            m = _med([o["emu_step_ms"] for o in G])
            rel = r / m
            if rel > 1 and first is None:
                first = k
            if pm and rm and rm / pm > 1 and first_model is None:
                first_model = k
            fd = ring_u / max(1.0, float(n) / k)
            rows.append(["ps", k, launches(G), "%.1f" % m, "%.2f" % rel, "%.1f" % pm if pm else "-",
                         "%.2f" % (rm / pm) if pm and rm else "-", "%.2f" % fd])
        out.append("**n = %d GPU machines**: the arithmetic's crossover for a full-duplex PS is k > n²/(2(n−1)) = %.2f; "
                   "measured (the median of the launches), our PS first beats the ring at k = %s; the cost model "
                   "predicts k = %s\n\n" % (n, bound, first if first is not None else "none of 1..n",
                                             first_model if first_model is not None else
                                             "none of 1..n" if rm else "(no model check in results/ yet)") +
                   table(["engine", "server machines k", "launches: step (ms, emulated)", "median",
                          "measured: ring / this", "model: step (ms)", "model: ring / this",
                          "arithmetic, full-duplex PS"], rows))
        crossings.append("n = %d: %s" % (n, "none for k up to n" if first is None else "k = %d" % first))
    out.append("_† host-bound: this machine, not the emulated cluster, bounded that launch. The model's steps are "
               "`harness model`'s check (results/emulated-model.jsonl); it predicts host-bound runs too but does not "
               "count them._")
    if crossings:
        # results schema 2 on: the sync PS answers each partition once every worker's pushes of it are in
        piped = all(o.get("schema", 1) >= 2 for o in L)
        how = ("ours answers each partition as soon as every worker's pushes of it are in, so pushes and replies share "
               "the links' two directions" if piped else
               "ours (before results schema 2) answered a step's pulls after its last push, which doubles its link time")
        summary.append("The BytePS condition (a PS beats allreduce once k > n²/(2(n−1)) server machines) needs servers "
                       "that answer while pushes still arrive; %s; the measured crossover is %s (byteps-crossover)."
                       % (how, "; ".join(crossings)))
    return "\n\n".join(out)


def byteps_host(results_dir, summary):
    """The n = 8 sweep where the host bound it, re-run at time dilation (byteps-n8-host), beside the undilated
    launches' median of the same k (byteps-crossover and its repeat) and the cost model's step."""
    H = lines(results_dir, "byteps-n8-host")
    if not H:
        return "_Not measured: run `scripts/record-results byteps_n8_host`._"
    base = [o for o in lines(results_dir, "byteps-crossover") + lines(results_dir, "byteps-crossover-repeat")
            if o["world"] == 8]
    checks = _checks(results_dir)
    def key(o):
        return (o["engine"], o.get("server_nodes", 0))
    groups = {}
    for o in H:
        groups.setdefault(key(o), []).append(o)
    ring = groups.get(("ring", 0))
    if not ring:
        return "_No ring run in results/byteps-n8-host.jsonl._"
    r = _med([o["emu_step_ms"] for o in ring])
    dil = ring[0].get("dilate", 1)
    rows, first = [], None
    for (eng, k), G in sorted(groups.items(), key=lambda kv: (kv[0][0] != "ring", kv[0][1])):
        m = _med([o["emu_step_ms"] for o in G])
        B = [o["emu_step_ms"] for o in base if key(o) == (eng, k)]
        b_hb = any(o.get("host_bound") for o in base if key(o) == (eng, k))
        pm = _sweep_model(checks, G[0])
        if eng == "ps" and r / m > 1 and first is None:
            first = k
        rows.append([eng, k if eng == "ps" else "-",
                     " / ".join("%.1f%s" % (o["emu_step_ms"], " †" if o.get("host_bound") else "") for o in G),
                     "%.1f" % m, "%.2f" % (r / m),
                     ("%.1f%s" % (_med(B), " †" if b_hb else "")) if B else "-",
                     ("%.1f (%+.1f%%)" % (pm, (pm - m) / m * 100)) if pm else "-"])
    summary.append("BytePS at n = 8 with the host relieved (time dilation %g): the PS first beats the ring at k = %s "
                   "(byteps-n8-host)." % (dil, first if first is not None else "none of 4..8"))
    return ("**n = 8 at time dilation %g** (`byteps-n8-host`): measured, our PS first beats the ring at k = %s.\n\n"
            % (dil, first if first is not None else "none of 4..8")) + \
        table(["engine", "server machines k", "launches at dilation %g: step (ms, emulated)" % dil, "median",
               "ring / this", "undilated median (table above)", "model: step (ms), its error"], rows) + \
        ("\n\n_† host-bound. The model's error here is listed by `harness model` (dil) and not counted in its "
         "check (section 4.11)._")


def invariance(results_dir, summary):
    L = lines(results_dir, "emulation-invariance")
    if not L:
        return "_Not measured: run `scripts/record-results emulation_invariance`._"
    rows = [[o["shrink"], o["dilate"], "%.2f%s" % (o["speedup"], flag(o)), "%.1f" % o["emu_step_ms"],
             "%.0f%%" % (100 * o.get("system_busy", 0))] for o in L]
    sp = [o["speedup"] for o in L if not o.get("host_bound")]
    if len(sp) >= 2:
        spread = (max(sp) - min(sp)) / min(sp) * 100
        ok = [o for o in L if not o.get("host_bound")]
        summary.append("Emulated figures do not depend on the emulation's knobs: VGG-16 on 16 GPUs gives speedups within "
                       "%.1f%% of each other across shrink %g..%g and dilation %g..%g (emulation-invariance)."
                       % (spread, min(o["shrink"] for o in ok), max(o["shrink"] for o in ok), min(o["dilate"] for o in ok),
                          max(o["dilate"] for o in ok)))
    return table(["shrink", "dilate", "speedup", "step (ms, emulated)", "machine CPU busy"], rows)


def invariance_ps(results_dir, summary):
    """The PS against the emulation's knobs (results/emulation-invariance-ps): per layout and (shrink, dilation),
    the launches, their median, and the median over the same layout's at shrink 32 without dilation."""
    L = lines(results_dir, "emulation-invariance-ps")
    if not L:
        return "_Not measured: run `scripts/record-results emulation_invariance_ps`._"
    groups = {}
    for o in L:
        groups.setdefault((o["world"], layout(o), o["model"], o["device"], o["shrink"], o["dilate"]), []).append(o)
    rows = []
    for key in sorted(groups, key=lambda k: (k[0], k[4], k[5])):
        G = groups[key]
        m = _med([o["emu_step_ms"] for o in G if not o.get("host_bound")] or [o["emu_step_ms"] for o in G])
        ref = groups.get(key[:4] + (32.0, 1.0))
        rm = _med([o["emu_step_ms"] for o in ref if not o.get("host_bound")] or [o["emu_step_ms"] for o in ref]) if ref else None
        rows.append([key[1], "%d (%s)" % (key[0], NAMES.get(key[2], key[2]) + (", compute negligible" if
                                                                                 key[3].startswith("throughput") else "")),
                     "%g" % key[4], "%g" % key[5],
                     " / ".join("%.1f%s" % (o["emu_step_ms"], " †" if o.get("host_bound") else "") for o in G),
                     "%.1f" % m, "%.3f" % (m / rm) if rm else "-"])
    return table(["layout", "GPUs (model)", "shrink", "dilate", "launches: step (ms, emulated)", "median",
                  "over shrink 32, dilate 1"], rows) + "\n\n_† host-bound (left out of the median where another launch was not)._"


def host_work(results_dir, summary):
    """The host's own work against the shrink (results/emulation-host-work): exposed time by layout and
    shrink, one row a configuration."""
    L = lines(results_dir, "emulation-host-work")
    if not L:
        return "_Not measured: run `scripts/record-results emulation_host_work`._"
    def where(o):
        n, g, k = o.get("nodes", 1), o.get("gpus_per_node", 1), o.get("server_nodes", 0)
        return "%d x %d%s" % (n, g, " + %d CPU" % k if k else "")
    keys, cells = [], {}
    for o in L:
        key = (NAMES.get(o["model"], o["model"]), where(o), o["net"].replace("inter=", ""), layout(o))
        if key not in cells:
            keys.append(key)
            cells[key] = []
        cells[key].append("%g: %.0f / %.0f" % (o["shrink"], o["emu_step_ms"], o["exposed_comm_ms"]))
    rows = [list(k) + ["; ".join(cells[k])] for k in keys]
    return table(["model", "machines", "NIC", "layout", "shrink: step / exposed (ms, emulated)"], rows)


def repeat(results_dir, summary):
    """Launch-to-launch spread of the same emulated run (results/emulation-repeat)."""
    L = lines(results_dir, "emulation-repeat")
    if not L:
        return "_Not measured: run `scripts/record-results emulation_repeat`._"
    keys, groups = [], {}
    for o in L:
        k, g = o.get("server_nodes", 0), "%d x %d" % (o["nodes"], o["gpus_per_node"])
        key = (NAMES.get(o["model"], o["model"]), g + (" + %d CPU" % k if k else ""), o["net"].replace("inter=", ""), layout(o))
        if key not in groups:
            keys.append(key)
            groups[key] = []
        groups[key].append(o["emu_step_ms"])
    rows = []
    for k in keys:
        t = sorted(groups[k])
        med = t[len(t) // 2] if len(t) % 2 else (t[len(t) // 2 - 1] + t[len(t) // 2]) / 2
        rows.append(list(k) + [len(t), "%.0f" % t[0], "%.0f" % med, "%.0f" % t[-1], "%.1f%%" % (100 * (t[-1] - t[0]) / med)])
    return table(["model", "machines", "NIC", "layout", "launches", "min ms", "median", "max", "(max - min) / median"], rows)


def _by_knob(L, knob):
    """Rows of (model, device, machines, NIC, layout) and one column per value of an emulation knob
    (knob(o) -> its value in result line o): each cell lists the configuration's launches (ms), the
    collective alone (bench lines) by its time. Returns (keys, cells, values) in the order first seen."""
    keys, cells, vals = [], {}, []
    for o in L:
        net = o.get("net", "")
        v = knob(o)
        rate = [kv.split("=", 1)[1] for kv in net.split(",") if kv.startswith(("inter=", "bw="))]
        rate = rate[0] if rate else "?"
        k = o.get("server_nodes", 0)
        if o.get("mode") == "bench":
            if o.get("bytes") is None or o.get("time_us") is None:
                continue
            where = ("%d x %d%s" % (o["nodes"], o.get("gpus_per_node", 1), " + %d CPU" % k if k else "")
                     if o.get("nodes") else "%d workers, a machine each" % o.get("world", 0))
            # --net bw=: every rank, servers too, in a namespace (a machine) of its own
            lay = layout(o) if o.get("nodes") or o["engine"] != "ps" else "ps %d server%s, a machine each" % (
                o.get("servers", 1), "s" if o.get("servers", 1) > 1 else "")
            key = ("collective alone, %.0f MiB a worker" % (o["bytes"] / 2**20), "-", where, rate, lay)
            val = o["time_us"] / 1e3
        elif o.get("emulated"):
            where = "%d x %d%s" % (o.get("nodes", 1), o.get("gpus_per_node", 1), " + %d CPU" % k if k else "")
            key = (NAMES.get(o["model"], o["model"]), o.get("device", ""), where, rate, layout(o))
            val = o["emu_step_ms"]
        else:
            continue
        if v not in vals:
            vals.append(v)
        if key not in cells:
            keys.append(key)
            cells[key] = {}
        cells[key].setdefault(v, []).append(val)
    return keys, cells, vals


def queue(results_dir, summary):
    """The emulated NIC's queue (tc tbf latency, --net queue=) against the PS's incast
    (results/emulation-queue): each configuration's launches at each queue, and the collective alone."""
    path = os.path.join(results_dir, "emulation-queue.jsonl")
    L = list(movebytes.jsonl(path)) if os.path.exists(path) else []
    if not L:
        return "_Not measured: run `scripts/record-results emulation_queue`._"
    def qof(o):
        for kv in o.get("net", "").split(","):
            if kv.startswith("queue="):
                return kv[len("queue="):]
        return "100ms"
    keys, cells, qs = _by_knob(L, qof)
    rows = [list(k) + [" / ".join("%.0f" % v for v in cells[k].get(q, [])) or "-" for q in qs] for k in keys]
    return table(["model", "device", "machines", "NIC", "layout"] + ["queue %s: ms" % q for q in qs], rows)


FLOWS_HEAD = ["step", "skew of the workers' starts", "a worker's flows: first to last end",
              "a partition: first to last push", "90th percentile", "last push in", "then to step end"]


def _flows(results_dir, name, keep):
    """scripts/ps-flows' rows in results/NAME.txt whose label keep(label) accepts: [label, 7 times]."""
    rows = []
    txt = os.path.join(results_dir, name + ".txt")
    for ln in open(txt) if os.path.exists(txt) else []:
        f = ln.split()
        if ln.startswith("  ") and len(f) == 8 and keep(f[0]):
            try:
                rows.append([f[0]] + ["%.1f" % float(x) for x in f[1:]])
            except ValueError:
                pass
    return rows


def window(results_dir, summary):
    """The PS's per-server push window (results/ps-window): each configuration's launches at each window,
    and the K = N flows without and with one."""
    path = os.path.join(results_dir, "ps-window.jsonl")
    L = list(movebytes.jsonl(path)) if os.path.exists(path) else []
    if not L:
        return "_Not measured: run `scripts/record-results ps_window`._"
    def wof(o):
        w = o.get("cmdline", "").split("--ps-window ")
        return int(w[1].split()[0]) if len(w) > 1 else 0
    keys, cells, ws = _by_knob(L, wof)
    ws = sorted(ws)
    rows = [list(k) + [" / ".join("%.0f" % v for v in cells[k].get(w, [])) or "-" for w in ws] for k in keys]
    out = [table(["model", "device", "machines", "NIC", "layout"] + ["W = %d: ms" % w if w else "no window: ms"
                                                                      for w in ws], rows)]
    flows = _flows(results_dir, "ps-window", lambda label: label.startswith("w"))
    if flows:
        out.append("K = N at 4 x 1, `scripts/ps-flows` on a timeline of each launch at W = 0 and 2 (ms, medians over "
                   "the steps):\n\n" + table(["window"] + FLOWS_HEAD, flows))
    return "\n\n".join(out)


def cc(results_dir, summary):
    """TCP's congestion control on the emulated NICs (results/emulation-cc): each configuration's launches
    under each, the flows' progress that scripts/ps-flows read from a K = N timeline, and the cost model
    fitted under each from the same file."""
    L = []
    for name in ("emulation-cc", "ps-layouts-cc"):  # the runs, then the collective alone at training's partition
        path = os.path.join(results_dir, name + ".jsonl")
        L += list(movebytes.jsonl(path)) if os.path.exists(path) else []
    if not L:
        return "_Not measured: run `scripts/record-results emulation_cc`._"
    def ccof(o):
        v = o.get("versions", "")
        return v.split("tcp ", 1)[1].split(",")[0].strip() if "tcp " in v else "?"
    keys, cells, ccs = _by_knob(L, ccof)
    rows = [list(k) + [" / ".join("%.0f" % v for v in cells[k].get(c, [])) or "-" for c in ccs] for k in keys]
    out = [table(["model", "device", "machines", "NIC", "layout"] + ["TCP %s: ms" % c for c in ccs], rows)]
    # scripts/ps-flows' lines and the model's check summaries, from the recording's text
    flows = _flows(results_dir, "emulation-cc", lambda label: label.split("/")[0] in ccs)
    checks, model_cc = [], None
    txt = os.path.join(results_dir, "emulation-cc.txt")
    for ln in open(txt) if os.path.exists(txt) else []:
        if ln.startswith("$ ") and " model " in ln and "cc=" in ln:
            model_cc = ln.split("cc=", 1)[1].split()[0]
        elif ln.startswith("# mean |err|") and model_cc:
            checks.append("%s: %s" % (model_cc, ln[2:].strip()))
    if flows:
        out.append("How evenly the flows progress in the K = N runs (`scripts/ps-flows` on their timelines, "
                   "ms, medians over the steps; one row a launch; 4x4: 16 GPUs on 4 machines, 4x1: VGG-16's bytes on "
                   "4 machines of one):\n\n" + table(["TCP / machines"] + FLOWS_HEAD, flows))
    if checks:
        out.append("The cost model with the incast slowdown fitted under each congestion control (from this file's "
                   "bench lines), against this file's runs: " + "; ".join(checks) + ".")
    return "\n\n".join(out)


def gso(results_dir, summary):
    """tbf's bucket against the shrink (results/emulation-gso): the step of one configuration at each shrink,
    with GSO packets (the default: a bucket of at least 128 KiB) and without (1 ms at the rate)."""
    L = lines(results_dir, "emulation-gso")
    if not L:
        return "_Not measured: run `scripts/record-results emulation_gso`._"
    cells, shrinks = {}, []
    for o in L:
        off = "gso=off" in o.get("net", "")
        if o["shrink"] not in shrinks:
            shrinks.append(o["shrink"])
        cells.setdefault((o["shrink"], off), []).append("%.0f%s" % (o["emu_step_ms"], " †" if o.get("host_bound") else ""))
    o = L[0]
    what = "%s, %d x %d + %d CPU, %s" % (NAMES.get(o["model"], o["model"]), o["nodes"], o["gpus_per_node"],
                                          o.get("server_nodes", 0), o["net"].split(",")[0].replace("inter=", ""))
    rows = [["%g" % sh, " / ".join(cells.get((sh, False), [])) or "-", " / ".join(cells.get((sh, True), [])) or "-"]
            for sh in sorted(shrinks)]
    return "%s, one PS server (ms a step, emulated; † host-bound):\n\n" % what + table(
        ["shrink", "GSO on (bucket >= 128 KiB)", "GSO off (bucket 1 ms)"], rows)


def device(results_dir, summary):
    """The GPU check on a lent GPU (results/device-check.txt, the table scripts/device-check prints)."""
    path = os.path.join(results_dir, "device-check.txt")
    if not os.path.exists(path):
        return "_Not measured: no GPU was lent (scripts/device-check)._"
    rows, head = [], ""
    for ln in open(path, encoding="utf-8"):
        ln = ln.rstrip("\n")
        if ln.startswith("syncbench device-check"):
            head = ln
            continue
        if ln.startswith("#") or ln.startswith("step ") or ln.startswith("failures:") or not ln.strip():
            continue
        m = re.match(r"^(.*?)\s+(PASS|FAIL|INFO|LOW|NOTRUN)\s+(\d+)(?:\s+(.*))?$", ln)
        if not m:
            continue
        name, result, note = m.group(1).strip(), m.group(2), m.group(4) or ""
        note = note.replace("# syncbench bench: ", "").replace("# syncbench train: ", "").replace("|", "/")
        if len(note) > 140:
            note = note[:137] + "..."
        rows.append([name, result, note])
    return "`%s`\n\n" % head + table(["step", "result", "what it measured"], rows)


def scaling(results_dir, summary):
    L = lines(results_dir, "emulated-scaling")
    if not L:
        return "_Not measured: run `scripts/record-results emulated_scaling`._"
    out = []
    for net in sorted({o["net"] for o in L}, reverse=True):
        for m in sorted({o["model"] for o in L}, key=lambda x: list(NAMES).index(x) if x in NAMES else 99):
            S = [o for o in L if o["net"] == net and o["model"] == m]
            lays = sorted({layout(o) for o in S})
            worlds = sorted({o["world"] for o in S})
            rows = []
            for l in lays:
                row = [l]
                for w in worlds:
                    hit = [o for o in S if layout(o) == l and o["world"] == w]
                    row.append("%.2f%s" % (hit[-1]["speedup"], "*" if hit[-1].get("host_bound") else "") if hit else "-")
                rows.append(row)
            d = S[0]
            out.append("**%s** on %s, %s, %d GPUs a machine, batch %d a GPU: speedup over one device\n\n"
                       % (NAMES.get(m, m), d["device"], net.replace("inter=", ""), 4, d["local_batch"]) +
                       table(["engine"] + ["%d GPU%s" % (w, "s" if w > 1 else "") for w in worlds], rows))
    out.append("_* host-bound: the machine, not the emulated cluster, bounded that run._")
    # what changes with the model and with the link: gradient bytes against compute, at the largest world
    top = max(o["world"] for o in L)
    for net in sorted({o["net"] for o in L}, reverse=True):
        parts = []
        for m in sorted({o["model"] for o in L}, key=lambda x: list(NAMES).index(x) if x in NAMES else 99):
            hit = [o for o in L if o["net"] == net and o["model"] == m and o["world"] == top and layout(o) == "ring"]
            ps1 = [o for o in L if o["net"] == net and o["model"] == m and o["world"] == top
                   and o["engine"] == "ps" and o.get("server_nodes") == 1]
            if hit:
                o = hit[-1]
                parts.append("%s (%.0f MB of gradients, %.0f ms of compute a step) %.1fx%s%s" % (
                    NAMES.get(m, m), o["params_full"] * 4 / 1e6, o["emu_compute_ms"], o["speedup"],
                    " (host-bound)" if o.get("host_bound") else "",
                    ", one PS server %.1fx" % ps1[-1]["speedup"] if ps1 else ""))
        if parts:
            out.append("At %s and %d GPUs the ring reaches: %s. The ring's link time grows with the gradient bytes "
                       "and shrinks with the link rate; it stays hidden behind backward while it is shorter than the "
                       "backward that follows each bucket, which is why the model's bytes per FLOP, more than its "
                       "size, decide its scaling." % (net.replace("inter=", ""), top, "; ".join(parts)))
    return "\n\n".join(out)


def model_check(results_dir, summary):
    """The cost model against the emulated runs: the first check table of results/emulated-model.txt
    (harness model prints one per model it is asked about; the checks are the same runs each time)."""
    p = os.path.join(results_dir, "emulated-model.txt")
    if not os.path.exists(p):
        return "_Not measured: run `scripts/record-results emulated_model`._"
    rows, inside = [], False
    with open(p) as f:
        for t in f:
            if t.startswith("# out of sample: predicted") or t.startswith("# predicted against the emulated runs"):
                if rows:
                    break
                inside = True
                continue
            if inside and (t.startswith("# mean") or t.startswith("# counted")):
                break
            w = t.split()
            if inside and len(w) == 8 and not t.startswith("#"):
                # engine model device GPUs launches measured(median) predicted err%
                try:
                    rows.append((w[0], w[1], w[2], int(w[3]), float(w[5]), float(w[6]), float(w[7]), int(w[4])))
                except ValueError:
                    pass
    if not rows:
        return "_No checks in results/emulated-model.txt._"
    eng = []
    for e in dict.fromkeys(r[0] for r in rows):
        R = [r for r in rows if r[0] == e]
        eng.append((e, len(R), sum(r[7] for r in R), sum(abs(r[6]) <= 10 for r in R),
                    "%.1f" % (sum(abs(r[6]) for r in R) / len(R)), "%+.1f" % max((r[6] for r in R), key=abs)))
    within = sum(abs(r[6]) <= 10 for r in rows)
    summary.append("cost model: %d of %d emulated configurations within 10%% (median of their launches)" % (within, len(rows)))
    out = ["Predicted out of sample, from constants fitted on collective-alone bench lines only, against every "
           "emulated configuration that was not host-bound (`results/emulated-model.txt`, `results/model-fit-check.txt`; "
           "a configuration launched more than once is compared by its launches' median): %d of %d within 10%%, "
           "mean |error| %.1f%%." % (within, len(rows), sum(abs(r[6]) for r in rows) / len(rows)),
           table(["layout", "configurations", "launches", "within 10%", "mean abs error %", "worst %"], eng)]
    miss = [r for r in rows if abs(r[6]) > 10]
    if miss:
        out.append("Missed by more than 10%%: %s." % "; ".join(
            "%s %s (%s) at %d GPUs %+.1f%% (%d launch%s)" % (r[0], NAMES.get(r[1], r[1]), r[2], r[3], r[6], r[7],
                                                         "es" if r[7] > 1 else "") for r in miss))
    return "\n\n".join(out)


def section(results_dir, summary):
    return {"EMU_HOROVOD": horovod(results_dir, summary), "EMU_BYTEPS": byteps(results_dir, summary),
            "EMU_BYTEPS_HOST": byteps_host(results_dir, summary),
            "EMU_INVARIANCE": invariance(results_dir, summary),
            "EMU_INVARIANCE_PS": invariance_ps(results_dir, summary), "EMU_SCALING": scaling(results_dir, summary),
            "EMU_MODEL_CHECK": model_check(results_dir, summary), "EMU_HOST_WORK": host_work(results_dir, summary),
            "EMU_REPEAT": repeat(results_dir, summary), "EMU_QUEUE": queue(results_dir, summary),
            "EMU_GSO": gso(results_dir, summary), "EMU_CC": cc(results_dir, summary),
            "EMU_WINDOW": window(results_dir, summary),
            "GPU_CHECK": device(results_dir, summary)}


def _plot(figs, figrel, name, title, xl, yl, series, settings=""):
    """One gnuplot figure figs/emulated/name.png from series [(title, [(x, y), ...])]; its markdown, or ""
    without gnuplot or a figures folder."""
    gp = shutil.which("gnuplot")
    if not figs or not gp or not series:
        return ""
    d = os.path.join(figs, "emulated")
    os.makedirs(d, exist_ok=True)
    dat = os.path.join(d, name + ".dat")
    with open(dat, "w") as f:
        for t, pts in series:
            f.write("# %s\n" % t)
            for x, y in pts:
                f.write("%g %g\n" % (x, y))
            f.write("\n\n")
    plots = ", ".join("'%s' index %d using 1:2 with linespoints title '%s'" % (dat, i, t.replace("'", ""))
                      for i, (t, _) in enumerate(series))
    script = ("set terminal pngcairo size 900,520\nset output '%s'\nset title '%s'\nset xlabel '%s'\nset ylabel '%s'\n"
              "set grid\nset key outside right top\n%s\nplot %s\n" % (os.path.join(d, name + ".png"), title, xl, yl,
                                                                          settings, plots))
    if subprocess.run([gp], input=script, text=True, capture_output=True).returncode != 0:
        return ""
    return "![%s](%s/emulated/%s.png)" % (title, figrel, name)


def figures(results_dir, figs, figrel):
    """The BytePS crossover and the cost model's extrapolation to 1024 GPUs as figures."""
    out = {}
    series = []
    for n, p in _byteps_points(results_dir)[1].items():
        ring, rm = p["ring"]
        r = _med([o["emu_step_ms"] for o in ring])
        series.append(("n=%d measured (median)" % n, [(k, r / _med([o["emu_step_ms"] for o in G])) for k, G, _ in p["ps"]]))
        if rm:
            series.append(("n=%d cost model" % n, [(k, rm / pm) for k, _, pm in p["ps"] if pm]))
        u = 2.0 * (n - 1) / n
        series.append(("n=%d full-duplex arithmetic" % n, [(k, u / max(1.0, float(n) / k)) for k in range(1, n + 1)]))
    out["EMU_BYTEPS_FIG"] = _plot(figs, figrel, "byteps", "PS against ring: ring step / PS step (above 1: the PS wins)",
                                  "CPU-only server machines k", "ring step / PS step", series,
                                  "set yrange [0:2]\nset arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2")
    M = []
    p = os.path.join(results_dir, "emulated-model.jsonl")
    if os.path.exists(p):
        with open(p) as f:
            for t in f:
                try:
                    o = json.loads(t)
                except ValueError:
                    continue
                if o.get("kind") == "cluster":
                    M.append(o)
    series = []
    for m in sorted({o["model"] for o in M}):
        for e in ("ring", "tree", "ps-K=N", "ps-per-node"):
            pts = [(o["gpus"], o["speedup"]) for o in M if o["model"] == m and o["engine"] == e]
            if pts:
                series.append(("%s %s" % (NAMES.get(m, m), e), pts))
    out["EMU_MODEL_FIG"] = _plot(figs, figrel, "model_1024", "cost model: predicted speedup, 4 GPUs a machine, 25 Gbit/s",
                                 "GPUs", "speedup over one device", series,
                                 "set logscale xy 2\nset key font ',7'")
    return out
