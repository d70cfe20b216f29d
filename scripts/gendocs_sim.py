"""gendocs_sim.py: the generated blocks of docs/simulate.md (how long the simulator takes, how close its reductions
come to the full replay, what the check against the emulated cluster fitted and counted), for scripts/gen-docs beside
gendocs_measured.py's blocks, from results/sim-*.jsonl. Python 3 standard library only.
"""
import math
import re

from gendocs_measured import BlockError, block, load, missing, table

SCALING = "sim-train-scaling,sim-train-large-resnet50,sim-train-large-vgg16,sim-train-large-psfan,sim-train-large-pslayouts"


def _train(results, files):
    """{(engine label, model, GPUs): (line, file)} of the simulated training lines of files (comma-separated; a later
    file's line replaces an earlier one's), and the files that are missing."""
    out, gone = {}, []
    for name in [f for f in files.split(",") if f]:
        rs = load(results, name)
        if rs is None:
            gone.append(name)
            continue
        for r in rs:
            if r.get("kind") == "train":
                out[(r["engine_label"], r["model"], r["gpus"])] = (r, name)
    return out, gone


def _duration(s):
    if s < 120:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.0f} minutes"
    if s < 48 * 3600:
        return f"{s / 3600:.0f} hours"
    return f"{s / 86400:.1f} days"


@block
def sim_walls(results, files=SCALING, model="vgg16"):
    """A row per engine label: the largest GPU count the files simulated model at, how long that run took to simulate
    on this machine (sim_wall_s, one core) and its communications, and its file."""
    runs, gone = _train(results, files)
    if not runs:
        return missing(files.split(",")[0])
    top = {}
    for (lab, m, g), (r, name) in runs.items():
        if m == model and (lab not in top or g > top[lab][0]["gpus"]):
            top[lab] = (r, name)
    if not top:
        raise BlockError(f"no simulated training line of {model} in {files}")
    rows = [[f"`{lab}`", r["gpus"], f"{r['sim_wall_s']:,.1f}", f"{r['comms']:,}", f"`results/{name}.jsonl`"]
            for lab, (r, name) in sorted(top.items(), key=lambda kv: (-kv[1][0]["gpus"], -kv[1][0]["sim_wall_s"]))]
    note = f" ({', '.join(gone)}: not recorded)" if gone else ""
    return (f"\n{model}, the largest run recorded a layout{note} (seconds this machine took to simulate its steps):\n\n" +
            table(["engine", "GPUs", "simulated in (s)", "communications", "file"], rows,
                  [False, True, True, True, False]) + "\n")


@block
def sim_growth(results, label, model="vgg16", files=SCALING, to="1024"):
    """One sentence: how label's simulation time for model grew between its two largest recorded GPU counts (a
    doubling), and what the same factor a doubling gives at `to` GPUs."""
    runs, _ = _train(results, files)
    sel = sorted(((g, v) for (lab, m, g), v in runs.items() if lab == label and m == model), key=lambda x: x[0])
    if len(sel) < 2:
        return f"_{label}, {model}: fewer than two recorded runs in {files}._"
    (g1, (r1, f1)), (g2, (r2, f2)) = sel[-2], sel[-1]
    if g2 != 2 * g1:
        raise BlockError(f"{label}'s two largest {model} runs are at {g1} and {g2} GPUs, not a doubling")
    q = r2["sim_wall_s"] / r1["sim_wall_s"]
    est = r2["sim_wall_s"] * q ** math.log2(int(to) / g2)
    bd = lambda r: f"; bundled, at most {r['bundle']} transfers a communication" if r.get("bundle", 1) > 1 else ""
    took = (f"`{label}` with {model} took {r1['sim_wall_s']:,.1f} s to simulate at {g1} GPUs (`results/{f1}.jsonl`{bd(r1)}) "
            f"and {r2['sim_wall_s']:,.1f} s at {g2} (`results/{f2}.jsonl`{bd(r2)}")
    if f1 != f2 or r1["git_sha"] != r2["git_sha"]:
        # wall times of two recordings on a shared machine whose load differed between them: no growth factor
        return (took + f"; recorded apart, at git {r1['git_sha'][:7]} and {r2['git_sha'][:7]}): wall times of two recordings "
                "on a shared machine, whose load differed, so no growth factor is drawn from them.")
    return (took + f"): {q:.1f} times for twice the GPUs; at that factor a doubling, {int(to):,} GPUs would take about "
            f"{_duration(est)} on one core.")


@block
def sim_speed(results, name="sim-speed", model="vgg16"):
    """A row per engine label of results/NAME (one recording): the seconds this machine took to simulate model's steps
    at each GPU count, its communications, and the factor from each count to the next (twice the GPUs)."""
    runs, _ = _train(results, name)
    if not runs:
        return missing(name)
    sel = {(lab, g): r for (lab, m, g), (r, _) in runs.items() if m == model}
    gpus = sorted({g for (_, g) in sel})
    labs = sorted({lab for (lab, _) in sel}, key=lambda lab: max(sel[(lab, g)]["sim_wall_s"] for g in gpus if (lab, g) in sel))
    rows = []
    for lab in labs:
        cells, prev = [], None
        for g in gpus:
            r = sel.get((lab, g))
            if r is None:
                cells.append("")
                prev = None
                continue
            grow = f", x{r['sim_wall_s'] / prev:.1f}" if prev and prev > 0 else ""
            cells.append(f"{r['sim_wall_s']:,.1f} s ({r['comms']:,}{grow})")
            prev = r["sim_wall_s"]
        rows.append([f"`{lab}`"] + cells)
    return (f"\n{model}, `results/{name}.jsonl` (one recording; seconds to simulate three steps on one core, the run's "
            "communications and the factor over half the GPUs):\n\n" +
            table(["engine"] + [f"{g} GPUs" for g in gpus], rows) + "\n")


def _flag(r, flag):
    m = re.search(re.escape(flag) + r" (\d+)", r.get("cmdline", ""))
    return int(m.group(1)) if m else None


def run_key(r):
    """A simulated run's configuration, to pair a reduced replay with its full one: layout, model, GPUs, machines,
    latency, fabric, stragglers, and the PS partition size if given (two runs apart in any of these are two)."""
    return (r["engine_label"], r["model"], r["gpus"], r.get("gpus_per_node", 0), r["lat_us"], r.get("fabric", "star"),
            r.get("spread", "none"), r.get("spread_param", 0), _flag(r, "--ps-partition-kb") or 0)


def run_extras(r):
    """What sets a run apart from the plain case in words (machines other than of 4, a fabric other than the star,
    stragglers), for a table's cell; empty for the plain case."""
    w = []
    if r.get("gpus_per_node", 4) != 4:
        w.append(f"machines of {r['gpus_per_node']}")
    if r.get("fabric", "star") != "star":
        w.append(r["fabric"])
    if r.get("spread", "none") != "none":
        w.append(f"stragglers {r['spread']}:{r.get('spread_param', 0):g}")
    return ", ".join(w)


def _refused(r, flag):
    """A run that asked --sim-bundles Q (Q >= 2) for merged server machines and was replayed with them apart (the
    JSON line's pool below its Q: no dedicated server machines, or their servers' shares unequal), so it is no
    measure of the merging."""
    v = _flag(r, flag)
    return flag == "--sim-bundles" and v is not None and v >= 2 and r.get("pool", v) < 2


@block
def reduction_range(results, name, flag, at="", least="", full=""):
    """One sentence: the largest |step time difference| between the runs given flag (at its values `at`,
    comma-separated, or at `least` and above) and the same configuration's run with flag 0 (every piece replayed),
    a figure per us a hop, each with the configuration where it is largest. full=FILE:FLAG takes the full replays
    from results/FILE instead, its runs with FLAG 0."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    rs = [r for r in rs if r.get("kind") == "train" and _flag(r, flag) is not None]
    want = ({int(x) for x in at.split(",")} if at else None)
    lo = int(least) if least else None
    if (want is None) == (lo is None):
        raise BlockError("give one of at=V[,V...] or least=V")
    key = run_key
    if full:
        fname, _, fflag = full.partition(":")
        fr = load(results, fname)
        if fr is None:
            return missing(fname)
        full = {key(r): r for r in fr if r.get("kind") == "train" and _flag(r, fflag) == 0}
        against, cite = f"`{fflag} 0` (the full replay, `results/{fname}.jsonl`)", f"`results/{name}.jsonl`"
    else:
        full = {key(r): r for r in rs if _flag(r, flag) == 0}
        against, cite = f"`{flag} 0` (the full replay)", f"`results/{name}.jsonl`"
    worst = {}
    n = apart = none = 0
    for r in rs:
        v = _flag(r, flag)
        if v == 0 or (want is not None and v not in want) or (lo is not None and v < lo) or key(r) not in full:
            continue
        if _refused(r, flag):
            apart += 1
            none += not r.get("server_nodes")
            continue
        n += 1
        d = (r["step_ms"] - full[key(r)]["step_ms"]) / full[key(r)]["step_ms"]
        if r["lat_us"] not in worst or abs(d) > abs(worst[r["lat_us"]][0]):
            worst[r["lat_us"]] = (d, r)
    if not worst:
        raise BlockError(f"results/{name}.jsonl has no {flag} run beside a {flag} 0 one")
    vals = at.replace(",", ", ") if at else f"{least} and above"
    parts = [f"{100 * abs(d):.2f}% at {lat:g} us a hop ({r['engine_label']}, {r['model']}, {r['gpus']} GPUs"
             f"{', ' + run_extras(r) if run_extras(r) else ''})" for lat, (d, r) in sorted(worst.items())]
    why = ", ".join(w for w in (f"{none} with no server machines to merge" if none else "",
                                 f"{apart - none} whose servers' shares are unequal" if apart > none else "") if w)
    left = f"; {apart} more asked it and were replayed unmerged ({why})" if apart else ""
    return (f"`{flag}` {vals} against {against}: the largest step time difference is " + ", ".join(parts) +
            f", over {n} configurations{left} ({cite}).")


def _summaries(results, name):
    rs = load(results, name)
    if rs is None:
        return None
    return {r.get("subset", "all"): r for r in rs if r.get("kind") == "check-summary"}


@block
def sim_check_fitted(results, name="sim-check"):
    """One sentence: the constants the check fitted from its files' bench lines (per-hop latency, shared memory, the
    servers' rate with its quartiles and points)."""
    s = _summaries(results, name)
    if s is None:
        return missing(name)
    if "all" not in s:
        raise BlockError(f"results/{name}.jsonl has no check-summary line of subset all")
    a = s["all"]
    out = (f"Fitted from the files' bench lines (`results/{name}.jsonl`, git {a['git_sha'][:7]}): {a['lat_us_fitted']:.2f} us "
           f"a hop, shared memory {a['shm_bps_fitted'] / 1e9:.3g} Gbit/s")
    if a.get("server_Bps_fitted"):
        out += (f", a server core {a['server_Bps_fitted'] / 1e6:.1f} MB/s (quartiles {a['server_Bps_q1'] / 1e6:.1f} to "
                f"{a['server_Bps_q3'] / 1e6:.1f}, {a['server_points']} bench points)")
    return out + "."


@block
def sim_check_subsets(results, name="sim-check"):
    """One sentence: how many of the check's configurations ran without lat= and how many with it, and the latter's
    |error| median and worst."""
    s = _summaries(results, name)
    if s is None:
        return missing(name)
    if "without lat=" not in s or "with lat=" not in s:
        raise BlockError(f"results/{name}.jsonl has no check-summary lines of subsets 'without lat=' and 'with lat='")
    w, o = s["with lat="], s["without lat="]
    return (f"Of the check's configurations (`results/{name}.jsonl`), {o['configs']} ran without `lat=` and {w['configs']} "
            f"with it; those with it: |error| median {100 * w['error_median']:.1f}%, worst {100 * w['error_worst']:.1f}%.")


@block
def sim_check_families(results, name="sim-check", lat="with"):
    """One sentence: the check's errors (simulated against emulated) on the runs with lat= (lat=without: those
    without), the allreduces (ring, tree) apart from the PS layouts: each family's range and count."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    pts = [r for r in rs if r.get("kind") == "check" and (r["lat_us"] > 0) == (lat == "with")]
    if not pts:
        raise BlockError(f"results/{name}.jsonl has no check line {lat} lat=")
    fam = {"the ring and the tree": [], "the PS layouts": []}
    for r in pts:
        fam["the PS layouts" if r["engine"] == "ps" else "the ring and the tree"].append(r["error"])
    parts = [f"{k} {100 * min(v):+.1f}% to {100 * max(v):+.1f}% ({len(v)} configurations)" for k, v in fam.items() if v]
    return (f"The simulator against the emulated runs {lat} `lat=` (`results/{name}.jsonl`, simulated against emulated): " +
            ", ".join(parts) + ".")


@block
def reduction_table(results, name, flag):
    """A row per engine label and model of results/NAME: for each value of flag, the step time's difference to the
    flag 0 run of the same configuration (the full replay) and the seconds the run took to simulate."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    rs = [r for r in rs if r.get("kind") == "train" and _flag(r, flag) is not None]
    key = run_key
    full = {key(r): r for r in rs if _flag(r, flag) == 0}
    if not full:
        raise BlockError(f"results/{name}.jsonl has no {flag} 0 run")
    vals = sorted({_flag(r, flag) for r in rs})
    cell = {(key(r), _flag(r, flag)): r for r in rs}
    rows = []
    for k in sorted(full):
        f = full[k]
        cells = []
        for v in vals:
            r = cell.get((k, v))
            if r is None:
                cells.append("")
            elif v == 0:
                cells.append(f"{r['step_ms']:.2f} ms ({r['sim_wall_s']:.1f} s)")
            elif _refused(r, flag):
                cells.append(f"apart ({r['sim_wall_s']:.1f} s)")
            else:
                cells.append(f"{100 * (r['step_ms'] - f['step_ms']) / f['step_ms']:+.2f}% ({r['sim_wall_s']:.1f} s)")
        ex = run_extras(f)
        rows.append([f"`{k[0]}`", k[1] + (f", partitions of {k[-1]:,} KiB" if k[-1] else "") + (f", {ex}" if ex else ""), k[2]] +
                    cells)
    apart = any(_refused(r, flag) for r in rs)
    return (f"\n`results/{name}.jsonl`: the full replay's step time (`{flag} 0`), then each `{flag}` value's difference to "
            "it, and in brackets the seconds this machine took to simulate the run" +
            ("; \"apart\": merging asked for and refused, the server machines replayed apart (their shares unequal)"
             if apart else "") + ":\n\n" +
            table(["engine", "model", "GPUs"] + [f"`{flag} {v}`" for v in vals], rows,
                  [False, False] + [True] * (1 + len(vals))) + "\n")


@block
def sim_train_table(results, name):
    """A row per engine label and model of results/NAME's simulated training lines: at each GPU count the scaling
    efficiency, the step time and the seconds the run took to simulate."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    rs = [r for r in rs if r.get("kind") == "train"]
    if not rs:
        raise BlockError(f"results/{name}.jsonl has no simulated training line")
    gpus = sorted({r["gpus"] for r in rs})
    by = {(r["engine_label"], r["model"], r["gpus"]): r for r in rs}
    rows = []
    for lab, model in sorted({(r["engine_label"], r["model"]) for r in rs}):
        cells = []
        for g in gpus:
            r = by.get((lab, model, g))
            cells.append(f"{100 * r['efficiency']:.1f}% ({r['step_ms']:.1f} ms, {r['sim_wall_s']:.1f} s)" if r else "")
        rows.append([f"`{lab}`", model] + cells)
    return (f"\n`results/{name}.jsonl`: scaling efficiency, and in brackets the step time and the seconds this machine "
            "took to simulate the run:\n\n" + table(["engine", "model"] + [f"{g} GPUs" for g in gpus], rows,
                                                    [False, False] + [True] * len(gpus)) + "\n")
