"""gendocs_measured.py: the generated blocks of the hand-written docs (docs/measured.md, docs/usage.md), for
scripts/gen-docs: a block `<!-- gen: NAME ARG... -->` ... `<!-- /gen -->` is filled with what the function
NAME of BLOCKS makes from results/*.jsonl (ARGs: words, or key=value), so that the docs keep their prose
and no figure in them is typed by hand. Python 3 standard library only.
"""
import json
import os
import re
import statistics
import sys

OPEN = re.compile(r"^<!-- gen: ([a-z_]+)((?: [^>]*)?) -->$")   # an ARG may hold a '...' span (spaces, commas)
CLOSE = "<!-- /gen -->"
BLOCKS = {}


class BlockError(Exception):
    """A block's arguments or its results file are not what the block reads: fill() names the doc's line."""


def block(fn):
    BLOCKS[fn.__name__] = fn
    return fn


def load(results, name):
    path = os.path.join(results, name + ".jsonl")
    if not os.path.exists(path):
        return None
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as e:
                    sys.exit(f"gen-docs: {path}:{n}: not a JSON line ({e})")
    return out


def label(r):
    """A line's engine label as harness report names its row: "RUN:engine" for a run given --label RUN (the
    OpenMPI and torch peers have no engine label: their engine)."""
    lab = r.get("engine_label") or r.get("engine", "?")
    return f"{r['label']}:{lab}" if r.get("label") else lab


def fsize(b):
    b = int(b)
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"


def parse_size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s)
    if not m:
        sys.exit(f"gen-docs: not a size: {s}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def fnum(x, sig=3):
    """x to sig significant figures, thousands separated (no exponent)."""
    if x is None:
        return "–"
    if x == 0:
        return "0"
    import math
    d = max(0, sig - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:,.{d}f}"


def table(head, rows, right=None):
    right = right if right is not None else [i > 0 for i in range(len(head))]
    out = "| " + " | ".join(head) + " |\n|" + "".join("---:|" if r else "---|" for r in right) + "\n"
    return out + "".join("| " + " | ".join(str(c) for c in row) + " |\n" for row in rows)


def median_by(rs, key, val):
    """{key(r): median of val(r)} over the lines rs (lines where val is None left out)."""
    acc = {}
    for r in rs:
        v = val(r)
        if v is not None:
            acc.setdefault(key(r), []).append(v)
    return {k: statistics.median(v) for k, v in acc.items()}


def conds(text):
    """where=-style conditions, FIELD:VALUE separated by commas, as a dict; a VALUE holding commas is quoted
    ('...'): where=net:'inter=25gbit,cc=bbr',world:4."""
    out, cur, quoted = {}, "", False
    for ch in text + ",":
        if ch == "'":
            quoted = not quoted
        if ch == "," and not quoted:
            if cur:
                k, sep, v = cur.partition(":")
                if not sep or not k:
                    raise BlockError(f"condition {cur!r} is not FIELD:VALUE (in {text!r})")
                out[k] = v[1:-1] if len(v) >= 2 and v[0] == v[-1] == "'" else v
                if "'" in out[k]:
                    raise BlockError(f"condition {cur!r}: quote the whole VALUE, FIELD:'...' (in {text!r})")
            cur = ""
        else:
            cur += ch
    if quoted:
        raise BlockError(f"unbalanced quote in {text!r}")
    return out


def hosts(rs, key):
    """{key(r): (lines, host-bound lines)} over the lines rs."""
    hb = {}
    for r in rs:
        n, h = hb.get(key(r), (0, 0))
        hb[key(r)] = (n + 1, h + bool(r.get("host_bound")))
    return hb


def hb_mark(hb, k):
    n, h = hb.get(k, (0, 0))
    return "" if not h else " (hb)" if h == n else f" (hb {h}/{n})"


def hb_note(rows):
    return "; hb: host-bound" if any("(hb" in str(c) for row in rows for c in row) else ""


def select(rs, where):
    """The lines whose fields equal where's (a dict, or conds()' text; 'label' is the engine label)."""
    if isinstance(where, str):
        where = conds(where)
    out = []
    for r in rs:
        ok = True
        for k, v in where.items():
            have = label(r) if k == "label" else r.get(k)
            if str(have).lower() != v.lower() and not (isinstance(have, (int, float)) and not isinstance(have, bool)
                                                        and _is_num(v) and float(v) == have):
                ok = False
                break
        if ok:
            out.append(r)
    return out


def flagval(cmd, flag):
    """A command line's value of flag: the word after it, "on" where it takes none, "off" where it is absent."""
    w = cmd.split()
    if flag not in w:
        return "off"
    i = w.index(flag)
    return w[i + 1] if i + 1 < len(w) and not w[i + 1].startswith("--") else "on"


def field(r, k):
    """A line's field k as a table cell; k = --FLAG: that flag's value on the line's command (flagval)."""
    return flagval(r.get("cmdline", ""), k) if k.startswith("--") else _s(r.get(k))


def _is_num(v):
    try:
        float(v)
        return True
    except ValueError:
        return False


def _s(v):
    """A field as a table cell: '–' where the line has none."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return "–" if v is None or v == "" else str(v)


def nat(k):
    """A sort key that orders numbers in text as numbers (shrink 16 before 128; lat=5 before lat=20)."""
    def parts(x):
        return tuple((0, float(p), "") if p[:1].isdigit() else (1, 0.0, p) for p in re.findall(r"\d+(?:\.\d+)?|\D+", x))
    return tuple((0, float(x), ()) if _is_num(str(x)) else (1, 0.0, parts(str(x))) for x in k)


def missing(name):
    return f"_{name}: not recorded._\n"


# ---- bench ------------------------------------------------------------------------------------------

def _mode_lines(results, name, mode, where):
    """results/NAME's lines of one mode (bench, simulate...), those that where selects; None: not recorded."""
    rs = load(results, name)
    if rs is None:
        return None
    rs = [r for r in rs if r.get("mode") == mode]
    return select(rs, where) if where else rs


@block
def bench(results, name, sizes=None, by="", metric="time_us", where="", pivot="size", min_world="1", mode="bench"):
    """Median over a point's runs of metric (time_us or busbw_gbs), a row per engine label (and the fields of
    by, comma-separated) and world, a column per size (sizes: comma-separated, 4K 16M...; default: all); pivot=world:
    a row per engine and size, a column per world (worlds from min_world). mode=simulate: `harness simulate`'s
    lines. A point whose runs were all host-bound is marked (hb), some of them (hb k/n)."""
    min_world = int(min_world)
    rs = _mode_lines(results, name, mode, where)
    if rs is None:
        return missing(name)
    keys = [k for k in by.split(",") if k]
    want = [parse_size(s) for s in sizes.split(",")] if sizes else sorted({r["bytes"] for r in rs})
    key = lambda r: (label(r),) + tuple(field(r, k) for k in keys) + (r["world"], r["bytes"])
    med, hb = median_by(rs, key, lambda r: r.get(metric)), hosts(rs, key)
    cell = lambda k: fnum(med[k]) + hb_mark(hb, k) if k in med else ""
    unit = {"time_us": "us, median of the runs", "busbw_gbs": "busbw GB/s, median of the runs"}.get(metric, metric)
    rows = []
    if pivot == "world":   # a row per engine and size, a column per world
        worlds = sorted({k[-2] for k in med if k[-2] >= min_world})
        for k in sorted({k[:-2] for k in med}):
            for b in want:
                cells = [cell(k + (w, b)) for w in worlds]
                if any(cells):
                    rows.append(["`%s`" % k[0]] + list(k[1:]) + [fsize(b)] + cells)
        return (f"\n`results/{name}.jsonl` ({unit}{hb_note(rows)}):\n\n" +
                table(["engine"] + keys + ["size"] + [f"P = {w}" for w in worlds], rows,
                      [False] * (2 + len(keys)) + [True] * len(worlds)) + "\n")
    for k in sorted({k[:-1] for k in med if k[-2] >= min_world}, key=lambda k: (k[-1], k[:-1])):
        cells = [cell(k + (b,)) for b in want]
        if any(cells):
            rows.append(["`%s`" % k[0]] + list(k[1:-1]) + [k[-1]] + cells)
    return (f"\n`results/{name}.jsonl` ({unit}{hb_note(rows)}):\n\n" +
            table(["engine"] + keys + ["P"] + [fsize(b) for b in want], rows, [False] * (1 + len(keys)) + [True] * (1 + len(want))) +
            "\n")


@block
def bench_ratio(results, name, num, den, by_world="1", sizes=None, where="", num_where="", den_where="", what=None,
                mode="bench"):
    """One sentence: the range over sizes (and per world) of time(num) / time(den), the medians of each point's
    runs; num and den are engine labels (num_where/den_where: more fields, k:v comma-separated)."""
    rs = _mode_lines(results, name, mode, where)
    if rs is None:
        return missing(name)
    want = {parse_size(s) for s in sizes.split(",")} if sizes else None

    def side(lab, extra):
        sel = select(rs, dict([("label", lab)] + list(conds(extra).items())))
        return median_by(sel, lambda r: (r["world"], r["bytes"]), lambda r: r.get("time_us"))

    a, b = side(num, num_where), side(den, den_where)
    common = sorted(k for k in a if k in b and (want is None or k[1] in want))
    if not common:
        return f"_{name}: no common points of {num} and {den}._"
    worlds = sorted({w for w, _ in common}) if by_world == "1" else [None]
    parts = []
    for w in worlds:
        q = [(a[k] / b[k], k[1]) for k in common if w is None or k[0] == w]
        lo, hi = min(q), max(q)
        rng = f"{lo[0]:.2f}x" if abs(hi[0] - lo[0]) < 0.005 else f"{lo[0]:.2f}x-{hi[0]:.2f}x"
        parts.append(rng + (f" at P = {w}" if w is not None else ""))
    return (what.replace("_", " ") if what else f"{num} / {den}, time") + ": " + ", ".join(parts) + f" (`results/{name}.jsonl`, medians)."


@block
def ceiling(results, name, sizes="16M"):
    """Each engine against its own transport's ceiling (its --op move twin: same engine, transport, world and size):
    the medians of sum and move, and efficiency = ceiling time / time."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    rs = [r for r in rs if r.get("mode") == "bench"]
    want = [parse_size(x) for x in sizes.split(",")]
    med = median_by(rs, lambda r: (label(r), _s(r.get("transport")), r["world"], r["bytes"], r.get("op")),
                    lambda r: r.get("time_us"))
    rows = []
    for k in sorted({k[:4] for k in med if k[3] in want}, key=lambda k: (k[3], k[0], k[1], k[2])):
        if k + ("sum",) in med and k + ("move",) in med:
            t, c = med[k + ("sum",)], med[k + ("move",)]
            rows.append(["`%s`" % k[0], k[1], k[2], fsize(k[3]), fnum(t), fnum(c), f"{c / t:.2f}"])
    return (f"\n`results/{name}.jsonl` (us, medians of the runs; efficiency = ceiling time / time):\n\n" +
            table(["engine", "transport", "P", "size", "allreduce (us)", "ceiling, --op move (us)", "efficiency"], rows,
                  [False, False, True, False, True, True, True]) + "\n")


@block
def pslite(results, name, quoted="pslite-quoted"):
    """Our PS's push-then-pull time (medians of the runs, a column per transport) beside ps-lite's quoted times
    (results/QUOTED.tsv: workers, servers, bytes, pslite_us), and ps-lite's time over ours."""
    rs = load(results, name)
    path = os.path.join(results, quoted + ".tsv")
    if rs is None or not os.path.exists(path):
        return missing(name)
    q = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            w, srv, b, us = line.split("\t")[:4]
            q[(int(w), int(srv), int(b))] = float(us)
    rs = [r for r in rs if r.get("mode") == "bench"]
    med = median_by(rs, lambda r: (r["world"], r.get("servers", 0), r["bytes"], _s(r.get("transport"))),
                    lambda r: r.get("time_us"))
    tr = sorted({k[3] for k in med})
    rows = []
    for k in sorted(q):
        cells = [f"{fnum(med[k + (t,)])} ({q[k] / med[k + (t,)]:.2f}x)" if k + (t,) in med else "" for t in tr]
        rows.append([k[0], k[1], fsize(k[2]), fnum(q[k])] + cells)
    return (f"\n`results/{name}.jsonl` beside `results/{quoted}.tsv` (us; in brackets ps-lite's time over ours):\n\n" +
            table(["W", "S", "size", "ps-lite, loopback TCP"] + [f"ours, {t}" for t in tr], rows) + "\n")


# ---- train ------------------------------------------------------------------------------------------

@block
def train(results, name, metric="samples_per_s", by="", where=""):
    """Median over a configuration's runs of metric, a row per engine label (and by's fields), a column per world."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    rs = [r for r in rs if r.get("mode") == "train"]
    if where:
        rs = select(rs, where)
    keys = [k for k in by.split(",") if k]
    med = median_by(rs, lambda r: (label(r),) + tuple(field(r, k) for k in keys) + (r["world"],), lambda r: r.get(metric))
    worlds = sorted({k[-1] for k in med})
    rows = []
    for k in sorted({k[:-1] for k in med}):
        rows.append(["`%s`" % k[0]] + list(k[1:]) + [fnum(med[k + (w,)], 4) if k + (w,) in med else "" for w in worlds])
    return (f"\n`results/{name}.jsonl` ({metric}, median of the runs):\n\n" +
            table(["engine"] + keys + [f"P = {w}" for w in worlds], rows, [False] * (1 + len(keys)) + [True] * len(worlds)) +
            "\n")


# ---- emulated clusters ------------------------------------------------------------------------------

@block
def emulated(results, name, metric="speedup", by="model", where="", extra="", col="world"):
    """Emulated training runs (and their repeats: extra, comma-separated file names): the median over a
    configuration's launches of metric (speedup, emu_step_ms...), a row per by's fields and engine label, a
    column per emulated GPU count (col: per that field instead); a cell whose launches were all host-bound is
    marked (hb), some of them (hb k/n)."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    files = [name] + [x for x in extra.split(",") if x]
    for x in files[1:]:
        rs += load(results, x) or []
    rs = [r for r in rs if r.get("mode") == "train" and r.get("emulated")]
    if where:
        rs = select(rs, where)
    keys = [k for k in by.split(",") if k]
    key = lambda r: tuple(field(r, k) for k in keys) + (label(r), r["world"] if col == "world" else field(r, col))
    med, hb = median_by(rs, key, lambda r: r.get(metric)), hosts(rs, key)
    worlds = sorted({k[-1] for k in med}, key=lambda w: nat((w,)))
    rows = []
    sig = 4 if metric.endswith("_ms") else 3
    for k in sorted({k[:-1] for k in med}, key=nat):
        cells = []
        for w in worlds:
            if k + (w,) not in med:
                cells.append("")
                continue
            cells.append(fnum(med[k + (w,)], sig) + hb_mark(hb, k + (w,)))
        rows.append(list(k[:-1]) + ["`%s`" % k[-1]] + cells)
    src = ", ".join(f"`results/{x}.jsonl`" for x in files)
    what = {"speedup": "speedup over one device", "emu_step_ms": "ms a step", "scaling_efficiency": "scaling efficiency"}
    return (f"\n{src} ({what.get(metric, metric)}, median of each configuration's launches; hb: host-bound):\n\n" +
            table(keys + ["engine"] + [f"{w} GPUs" if col == "world" else f"{col} {w}" for w in worlds], rows,
                  [False] * (1 + len(keys)) + [True] * len(worlds)) + "\n")


@block
def emulated_spread(results, name, metric="emu_step_ms", by="model,nodes,gpus_per_node"):
    """How far one launch lands: per configuration (by's fields and engine label) its launches' metric, min to
    max, and (max - min) / median."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    rs = [r for r in rs if r.get("mode") == "train" and r.get("emulated")]
    keys = [k for k in by.split(",") if k]
    acc = {}
    for r in rs:
        acc.setdefault(tuple(field(r, k) for k in keys) + (label(r),), []).append(r[metric])
    rows = []
    for k in sorted(acc, key=nat):
        v = acc[k]
        rows.append(list(k[:-1]) + ["`%s`" % k[-1], len(v), f"{fnum(min(v), 4)} to {fnum(max(v), 4)}",
                                    f"{100 * (max(v) - min(v)) / statistics.median(v):.1f}%"])
    return (f"\n`results/{name}.jsonl` ({metric} of each launch):\n\n" +
            table(keys + ["engine", "launches", "min to max", "(max - min) / median"], rows,
                  [False] * (len(keys) + 1) + [True] * 3) + "\n")


@block
def memory(results, name):
    """Memory balance of training runs: per engine label and world (the first run of each) the memory the engine
    holds on its ranks (mem_engine_bytes: the largest and the smallest rank, and max/mean) and the peak RSS's
    max/mean (mem_imbalance)."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    seen, rows = {}, []
    for r in rs:
        if r.get("mode") == "train" and r.get("mem_engine_bytes"):
            seen.setdefault((label(r), r["world"]), r)
    for (lab, w), r in sorted(seen.items()):
        m = r["mem_engine_bytes"]
        rows.append([f"`{lab}`", w, len(m), f"{max(m) / (1 << 20):.1f}", f"{min(m) / (1 << 20):.1f}",
                     f"{r['mem_engine_imbalance']:.2f}", f"{r['mem_imbalance']:.2f}"])
    return (f"\n`results/{name}.jsonl` (MiB the engine holds on a rank: buffers, shards, optimizer state; "
            "max/mean over the ranks, servers included):\n\n" +
            table(["engine", "P", "ranks", "largest rank (MiB)", "smallest rank (MiB)", "engine memory max/mean",
                   "peak RSS max/mean"], rows) + "\n")


@block
def gemm_vs_trainer(results, name):
    """The trainer's compute (a train line's compute_samples_per_s) against `harness gemm`'s bare GEMMs of the same
    shapes (a gemm line's samples_per_s), a row per process count (gemm's procs = train's world)."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    g = {r["procs"]: r for r in rs if r.get("mode") == "gemm"}
    t = {r["world"]: r for r in rs if r.get("mode") == "train"}
    rows = [[p, g[p]["model"], fnum(g[p]["samples_per_s"], 4), fnum(t[p]["compute_samples_per_s"], 4),
             f"{100 * t[p]['compute_samples_per_s'] / g[p]['samples_per_s']:.0f}%"] for p in sorted(g) if p in t]
    if not rows:
        raise BlockError(f"results/{name}.jsonl has no gemm and train lines of the same process count")
    return (f"\n`results/{name}.jsonl` (samples/s; one run each, not alternated):\n\n" +
            table(["processes", "model", "bare cblas_sgemm", "trainer's compute", "trainer / bare"], rows,
                  [True, False, True, True, True]) + "\n")


@block
def hostbound(results, name, mode="train"):
    """One sentence: how many of a file's lines (of mode) carry the host-bound flag, and on those how busy the
    whole machine was (system_busy) against the runs' own ranks (host_busy, where recorded)."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    rs = [r for r in rs if r.get("mode") == mode]
    hb = [r for r in rs if r.get("host_bound")]
    if not rs:
        raise BlockError(f"results/{name}.jsonl has no {mode} line")
    out = f"{len(hb)} of the {len(rs)} lines carry the host-bound flag"
    rng = lambda v: f"{100 * min(v):.0f}%" if round(100 * min(v)) == round(100 * max(v)) else f"{100 * min(v):.0f}-{100 * max(v):.0f}%"
    sb = [r["system_busy"] for r in hb if r.get("system_busy") is not None]
    own = [r["host_busy"] for r in hb if r.get("host_busy") is not None]
    if sb:
        out += f": on those the whole machine was {rng(sb)} busy"
        out += f" while the runs' own ranks used {rng(own)} of it" if own else ""
    return out + f" (`results/{name}.jsonl`)."


@block
def net_model(results, name, within="15"):
    """`harness model`'s alpha-beta-gamma fit (its "what":"fit" line) and its predictions against the bench
    lines ("what":"bench"): the fitted constants, the mean |error| and how many points fall within `within` %,
    and a table of the errors' range a layout and P (over the sizes)."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    fit = [r for r in rs if r.get("mode") == "model" and r.get("what") == "fit"]
    pts = [r for r in rs if r.get("mode") == "model" and r.get("what") == "bench" and r.get("err_pct") is not None]
    if len(fit) != 1 or not pts:
        raise BlockError(f"results/{name}.jsonl: want one \"what\":\"fit\" line and bench lines, got {len(fit)} and {len(pts)}")
    f, w = fit[0], float(within)
    err = [abs(r["err_pct"]) for r in pts]
    acc = {}
    for r in pts:
        acc.setdefault((r["impl"] if r.get("engine") == "ps" else r.get("engine", "?"), r["world"]), []).append(r)
    worlds = sorted({k[1] for k in acc})
    rows = []
    for impl in sorted({k[0] for k in acc}):
        cells = []
        for wd in worlds:
            v = sorted(acc.get((impl, wd), []), key=lambda r: r["err_pct"])
            cells.append(f"{v[0]['err_pct']:+.1f}% to {v[-1]['err_pct']:+.1f}%" if v else "")
        rows.append([f"`{impl}`"] + cells)
    return (f"\nFitted by a probe on the {f.get('net') or 'local'} network (`results/{name}.jsonl`): alpha "
            f"{f['alpha_us']:.2f} us, beta {f['beta_ns_per_byte']:.4g} ns/B ({1 / f['beta_ns_per_byte']:.3f} GB/s), gamma "
            f"{f['gamma_ns_per_byte']:.4g} ns/B, the shaper's burst {f['burst_bytes']:,} B. Against {len(pts)} bench points "
            f"({fsize(min(r['bytes'] for r in pts))} to {fsize(max(r['bytes'] for r in pts))}): mean |error| "
            f"{statistics.mean(err):.1f}%, {sum(e <= w for e in err)} within {within}%; the errors (predicted against "
            "measured) a layout and P, smallest to largest over the sizes:\n\n" +
            table(["layout"] + [f"P = {wd}" for wd in worlds], rows) + "\n")


@block
def model_errors(results, name, sample=""):
    """`harness model`'s "kind":"error" lines of a file (sample: in, out, out-launches; default all): a row per
    sample and group."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    err = [r for r in rs if r.get("mode") == "model" and r.get("kind") == "error" and (not sample or r.get("sample") == sample)]
    rows = [[r["sample"], r["group"], r["count"], f"{r['median_abs_err_pct']:.1f}%", f"{r['p90_abs_err_pct']:.1f}%",
             f"{r['worst_err_pct']:+.1f}%", r["within_10pct"]] for r in err]
    return (f"\n`results/{name}.jsonl` (`harness model`'s errors, predicted against measured step):\n\n" +
            table(["sample", "group", "configurations", "median abs. error", "p90", "worst", "within 10%"], rows,
                  [False, False, True, True, True, True, True]) + "\n")


# ---- filling a document -----------------------------------------------------------------------------

def _args(text, where):
    pos, kw = [], {}
    if text.count("'") % 2:
        raise BlockError(f"unbalanced quote in {text.strip()!r}")
    for a in re.findall(r"(?:[^ ']|'[^']*')+", text):
        if "=" in a:
            k, v = a.split("=", 1)
            kw[k] = v
        else:
            pos.append(a)
    return pos, kw


def fill(text, results, path):
    """text with every generated block refilled from results; an unknown block, a bad argument or an unclosed
    block is an error naming path:line."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        m = OPEN.match(line)
        if not m and line.startswith("<!-- gen:"):
            sys.exit(f"gen-docs: {path}:{i + 1}: not a block opening (<!-- gen: NAME ARG... -->): {line}")
        if not m:
            i += 1
            continue
        name, fn = m.group(1), BLOCKS.get(m.group(1))
        if fn is None:
            sys.exit(f"gen-docs: {path}:{i + 1}: no block named {name} (scripts/gendocs_measured.py has "
                     f"{', '.join(sorted(BLOCKS))})")
        j = i + 1
        while j < len(lines) and lines[j] != CLOSE:
            if OPEN.match(lines[j]):
                break
            j += 1
        if j == len(lines) or lines[j] != CLOSE:
            sys.exit(f"gen-docs: {path}:{i + 1}: block {name} has no {CLOSE} before the next block or the end")
        try:
            pos, kw = _args(m.group(2) or "", f"{path}:{i + 1}")
            body = fn(results, *pos, **kw)
        except (TypeError, BlockError) as e:
            sys.exit(f"gen-docs: {path}:{i + 1}: block {name}: {e}")
        out.extend(body.strip("\n").split("\n"))
        out.append(CLOSE)
        i = j + 1
    return "\n".join(out)
