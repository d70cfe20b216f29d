"""footing.py: the paper's "Same footing" section (issue: fair and fast): each engine against its own
transport's ceiling (results/same-footing.jsonl, op move = the same messages with nothing reduced), the
engines on like transports, the small-message comparison with OpenMPI (results/small_messages.jsonl),
and our parameter server on ps-lite's workload beside ps-lite's quoted figures (results/ps-vs-pslite.jsonl,
results/pslite-quoted.tsv). Every number is computed here from those files. Python 3 standard library."""
import os
import statistics
from collections import defaultdict

from movebytes import jsonl as _lines, table as _table  # the paper's one JSON-lines reader and table writer


def _size(b):
    b = int(b)
    return "%d MiB" % (b >> 20) if b >= 1 << 20 else "%d KiB" % (b >> 10)


def ceilings(results):
    """Median time of each (engine, transport, world, bytes) for op sum and op move."""
    t = defaultdict(list)
    for o in _lines(os.path.join(results, "same-footing.jsonl")):
        if o.get("mode") != "bench":
            continue
        k = (o.get("engine"), o.get("engine_label") or o.get("engine"), o.get("transport", "?"), o["world"], int(o["bytes"]))
        t[k + (o.get("op", "sum"),)].append(o["time_us"])
    rows = {}
    for k, v in t.items():
        if k[-1] != "sum":
            continue
        mv = t.get(k[:-1] + ("move",))
        rows[k[:-1]] = (statistics.median(v), statistics.median(mv) if mv else None, len(v))
    return rows


def footing_section(results, summary):
    rows = ceilings(results)
    if not rows:
        return "_Not measured yet: `scripts/record-results same_footing` writes results/same-footing.jsonl._\n"
    out = ["Each engine beside its own transport's ceiling: the same run with op move, which sends every "
           "message the schedule sends and reduces nothing (`harness bench --op move`). Efficiency = ceiling "
           "time / time: what the pattern's reduction and protocol cost beyond moving the bytes on that "
           "transport. Medians over the rounds (alternating).\n"]
    body = []
    for (eng, label, tp, world, b), (ts, tm, n) in sorted(rows.items(), key=lambda kv: (kv[0][3], kv[0][4], kv[0][0], kv[0][2])):
        if b not in (65536, 1 << 20, 16 << 20):
            continue
        body.append([label, tp, world, _size(b), "%.1f" % ts, "%.1f" % tm if tm else "-", "%.2f" % (tm / ts) if tm else "-"])
    out.append(_table(["engine", "transport", "P", "size", "time (us)", "ceiling (us)", "efficiency"], body))
    # like for like at 16 MiB, the largest P: the ring over ZeroMQ against the PS over tcp, and each over its best
    P = max(k[3] for k in rows)
    big = 16 << 20

    def t_of(eng, tp):
        for (e, _l, t, w, b), v in rows.items():
            if e == eng and t == tp and w == P and b == big:
                return v[0]
        return None
    ring_shm, ring_zmq = t_of("ring", "shm"), t_of("ring", "zmq")
    ps_lane, ps_zcma = t_of("ps", "shm-lane+cma"), t_of("ps", "zmq-ipc+cma")
    ps_cma = ps_lane or ps_zcma  # the PS's fastest local transport: the shared-memory lane where it ran
    ps_ipc, ps_tcp = t_of("ps", "zmq-ipc"), t_of("ps", "zmq-tcp")
    lines = []
    if ring_zmq and ps_tcp:
        lines.append("over ZeroMQ/TCP both (like for like): the PS with one server takes %.2fx the ring's time" % (ps_tcp / ring_zmq))
    if ring_shm and ps_cma:
        lines.append("each over its fastest local transport (ring: shared memory, PS: %s + cross-memory reads): %.2fx" % (
            "its shared-memory lane" if ps_lane else "ipc", ps_cma / ring_shm))
    if ring_shm and ring_zmq:
        lines.append("the ring's own transport effect: ZeroMQ/TCP takes %.2fx its shared-memory time" % (ring_zmq / ring_shm))
    if ps_tcp and ps_cma:
        lines.append("the PS's: loopback TCP takes %.2fx its %s + cross-memory time (ZeroMQ ipc + cross-memory %.2fx, "
                     "plain ipc %.2fx)" % (ps_tcp / ps_cma, "lane" if ps_lane else "ipc",
                                           (ps_zcma / ps_cma) if ps_zcma else float("nan"),
                                           (ps_ipc / ps_cma) if ps_ipc else float("nan")))
    if lines:
        out.append("\nAt 16 MiB and P = %d:\n\n" % P + "\n".join("- " + s for s in lines) + "\n")
        summary.append("Same footing (16 MiB, P = %d): %s." % (P, "; ".join(lines[:2])))
    return "\n".join(out)


def small_rows(path):
    """Rows of the small-message table from one results file, and the lowest OpenMPI / ring ratio for the
    engine row and for bare OpenMPI (None where not measured)."""
    t = defaultdict(list)
    algo = {}
    names = {"ring": "ring", "tree": "tree", "mpi": "OpenMPI engine", "openmpi": "OpenMPI bare"}
    for o in _lines(path):
        if o.get("mode") != "bench":
            continue
        name = names.get(o.get("engine"))
        if name == "ring" and "--ring-algo ring" in o.get("cmdline", ""):
            name = "ring (forced ring)"
        if not name:
            continue
        k = (o["world"], int(o["bytes"]), name)
        t[k].append(o["time_us"])
        if name == "ring" and o.get("algo"):
            algo[k[:2]] = o["algo"]
    rows, worst = [], {"OpenMPI engine": None, "OpenMPI bare": None}
    cols = ("ring", "ring (forced ring)", "tree", "OpenMPI engine", "OpenMPI bare")
    for P, b in sorted({k[:2] for k in t}):
        m = {n: statistics.median(t[(P, b, n)]) for n in cols if (P, b, n) in t}
        ratio = {}
        for w in worst:
            if w in m and "ring" in m:
                ratio[w] = m[w] / m["ring"]
                worst[w] = ratio[w] if worst[w] is None else min(worst[w], ratio[w])
        rows.append([P, _size(b), "%.1f (%s)" % (m["ring"], algo.get((P, b), "?")) if "ring" in m else "-"] +
                    ["%.1f" % m[n] if n in m else "-" for n in cols[1:]] +
                    ["%.2f" % ratio[w] if w in ratio else "-" for w in worst])
    head = ["P", "size", "ring", "ring (forced ring)", "tree", "OpenMPI (engine)", "OpenMPI (bare)",
            "engine / ring", "bare / ring"]
    return head, rows, worst, max((len(v) for v in t.values()), default=0)


def small_section(results, summary):
    path = os.path.join(results, "small_messages.jsonl")
    head, rows, worst, rounds = small_rows(path) if os.path.exists(path) else (None, [], {}, 0)
    if not rows:
        return "_Not measured yet: `scripts/record-results small_messages` writes results/small_messages.jsonl._\n"
    out = ("Small messages: time (us, median of %d alternating rounds) of `--engine ring` (its algorithm for the "
           "size in brackets: the one-shot allreduce through shared memory up to its threshold), the ring algorithm "
           "forced, the tree, OpenMPI's MPI_Allreduce through our engine contract (`--engine mpi`, behind the "
           "engines' communication thread) and bare (`peers/mpi_allreduce` under mpirun, timed as our bench times: "
           "the like-for-like row), and OpenMPI's time over the ring's.\n\n" % rounds + _table(head, rows))
    e, b = worst.get("OpenMPI engine"), worst.get("OpenMPI bare")
    if e is not None or b is not None:
        parts = []
        if b is not None:
            parts.append("bare OpenMPI takes %.2fx the ring's time at its closest point (%s)" %
                         (b, "the ring is at least as fast everywhere" if b >= 1 else "below 1: OpenMPI is faster there"))
        if e is not None:
            parts.append("OpenMPI through the engine contract at least %.2fx" % e)
        summary.append("Small messages (4-64 KiB, P = 2, 4, 8, `small_messages`): " + "; ".join(parts) + ".")
    return out


def pslite_rows(quoted_path, results_jsonl):
    quoted = {}
    if os.path.exists(quoted_path):
        with open(quoted_path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                w, s, b, us = line.split()
                quoted[(int(w), int(s), int(b))] = float(us)
    runs = defaultdict(list)
    for o in _lines(results_jsonl):
        if o.get("mode") == "bench" and o.get("engine") == "ps" and o.get("op", "sum") == "sum":
            runs[(o["world"], o.get("servers", 0), int(o["bytes"]), o.get("transport", "?"))].append(o["time_us"])
    return quoted, runs


def pslite_table(quoted_path, results_jsonl):
    """Markdown table and the lowest ratio per van."""
    quoted, runs = pslite_rows(quoted_path, results_jsonl)
    vans = sorted({k[3] for k in runs})
    worst = {}
    rows = []
    for (w, s, b), q in sorted(quoted.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        cells, ratios = [], []
        for v in vans:
            t = runs.get((w, s, b, v))
            if not t:
                cells.append("-")
                ratios.append("-")
                continue
            m = statistics.median(t)
            worst[v] = min(worst.get(v, q / m), q / m)
            cells.append("{:,.0f}".format(m))
            ratios.append("%.2f" % (q / m))
        rows.append([w, s, _size(b), "{:,.0f}".format(q)] + cells + ratios)
    head = ["workers", "servers", "size", "ps-lite (us)"] + ["ours, %s (us)" % v for v in vans] + ["ps-lite / ours, %s" % v for v in vans]
    return _table(head, rows), worst


def pslite_section(results, summary):
    jl = os.path.join(results, "ps-vs-pslite.jsonl")
    if not os.path.exists(jl):
        return "_Not measured yet: `scripts/record-results ps_vs_pslite` writes results/ps-vs-pslite.jsonl._\n"
    md, worst = pslite_table(os.path.join(results, "pslite-quoted.tsv"), jl)
    iters = sorted({o.get("iters") for o in _lines(jl) if o.get("mode") == "bench" and o.get("iters")})
    rounds = max((len(v) for v in pslite_rows(os.path.join(results, "pslite-quoted.tsv"), jl)[1].values()), default=0)
    out = ("Our parameter server on ps-lite's workload (W workers push an f32 vector cut into the same partitions and "
           "pull it back, sync; the slowest worker's time, median of %s iterations, then of %d rounds; the van each "
           "run used in the column heads), beside " % ("/".join(str(i) for i in iters) or "?", rounds) + 
           "ps-lite's figures measured on this kind of machine over loopback TCP (quoted with how they were "
           "obtained in results/pslite-quoted.tsv).\n\n" + md)
    for v, r in sorted(worst.items()):
        out += "\n- over %s: ps-lite takes at least %.2fx our time at every point%s\n" % (
            v, r, "" if r >= 2 else " (below the 2x target somewhere)")
        summary.append("PS on ps-lite's workload (`ps-vs-pslite`), over %s: ps-lite's quoted times are at least %.2fx ours "
                       "at every point (64 KiB-16 MiB, 1-2 servers, 2-4 workers)." % (v, r))
    return out


def section(results, summary):
    return {"FOOTING": footing_section(results, summary), "SMALLMSG": small_section(results, summary),
            "PSLITE": pslite_section(results, summary)}
