"""gendocs_published.py: the generated blocks of docs/measured.md's "Reproducing published results": our emulated
runs beside the Horovod README's table (published figures as results/horovod-2017.txt recorded them), the BytePS
argument's ratios (measured, `harness model`, link arithmetic), and the cost model's extrapolations and checks
past 16 GPUs, for scripts/gen-docs. Python 3 standard library only.
"""
import re

from gendocs_measured import BlockError, block, fnum, load, missing, table
from gendocs_text import _sections, _text

HOROVOD_HEAD = re.compile(r"^# model\s+\| published: TF-PS TCP-CPU TCP-NCCL RDMA \|")
PUBLISHED = ("TensorFlow PS", "Horovod TCP/CPU", "Horovod TCP+NCCL", "Horovod RDMA+NCCL")


def _published(results, name):
    """{model: (TF PS, Horovod TCP/CPU, TCP+NCCL, RDMA+NCCL)} from scripts/horovod-table's output in NAME.txt."""
    lines = _text(results, name)
    if lines is None:
        return None
    for cmd, out in _sections(lines):
        if "scripts/horovod-table" not in cmd:
            continue
        h = next((i for i, l in enumerate(out) if HOROVOD_HEAD.match(l)), None)
        if h is None:
            break
        pub = {}
        for line in out[h + 1:]:
            if line.startswith("#") or not line.strip():
                break
            m = re.match(r"^\s+(\S+)\s+\|\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+\|", line)
            if not m:
                raise BlockError(f"results/{name}.txt: not a horovod-table row (MODEL | 4 published figures | ...): "
                                 f"{line.strip()!r}")
            pub[m.group(1)] = tuple(float(m.group(i)) for i in range(2, 6))
        if pub:
            return pub
    raise BlockError(f"results/{name}.txt has no scripts/horovod-table output under '# model | published: TF-PS "
                     "TCP-CPU TCP-NCCL RDMA |'")


def _layout(r):
    """horovod-table's names of our runs: the ring overlapped or after backward, the PS a server per machine or
    on K machines of their own."""
    if r["engine"] == "ring":
        return "ring" if r.get("overlap", True) else "ring-after-backward"
    return f"ps-K{r['server_nodes']}" if r.get("server_nodes") else "ps-per-node"


@block
def horovod(results, name="horovod-2017"):
    """Our 16-GPU speedups (results/NAME.jsonl) beside the published ones (scripts/horovod-table's output in
    results/NAME.txt), each against its reference: the overlapped ring against Horovod RDMA+NCCL, the ring after
    backward against Horovod TCP+NCCL, our PS layouts against TensorFlow's PS."""
    rs, pub = load(results, name), _published(results, name)
    if rs is None or pub is None:
        return missing(name)
    ours = {}
    for r in rs:
        if r.get("mode") == "train" and r.get("emulated") and r.get("world") == 16:
            ours[(r["model"], _layout(r))] = r
    ps = sorted({lay for _, lay in ours if lay.startswith("ps")}, key=lambda s: (s != "ps-per-node", s))
    pairs = [("ring", 3), ("ring-after-backward", 2)] + [(p, 0) for p in ps]

    def cell(m, lay, ref):
        r = ours.get((m, lay))
        if not r:
            return ""
        hb = " (hb)" if r.get("host_bound") else ""
        return f"{r['speedup']:.2f} ({100 * (r['speedup'] / pub[m][ref] - 1):+.0f}%){hb}"
    rows = []
    for m in sorted(pub):
        row = [m]
        for lay, ref in pairs:
            if lay in ("ring", "ring-after-backward") or lay == ps[0]:
                row.append(f"{pub[m][ref]:.1f}")
            row.append(cell(m, lay, ref))
        rows.append(row)
    head = []
    for lay, ref in pairs:
        if lay in ("ring", "ring-after-backward") or lay == ps[0]:
            head.append(PUBLISHED[ref])
        head.append({"ring": "ours: ring, overlapped", "ring-after-backward": "ours: ring after backward",
                     "ps-per-node": "ours: PS, a server per machine"}.get(lay, f"ours: PS, {lay[4:]} server machines"))
    return (f"\n`results/{name}.jsonl` beside the published figures in `results/{name}.txt` (speedup over one GPU at 16 "
            "GPUs; in brackets ours over the published column to its left, less 1):\n\n" + table(["model"] + head, rows) + "\n")


def _checks(results, name):
    rs = load(results, name)
    return None if rs is None else [r for r in rs if r.get("mode") == "model" and r.get("kind") == "check"]


@block
def byteps(results, name="emulated-model", model="vgg16"):
    """The BytePS argument: n GPU machines of one GPU and k server machines, ring step / PS step (above 1 the PS
    wins), measured (`harness model`'s check lines: each configuration's median launch) beside the model's
    prediction and the link arithmetic for a PS whose replies overlap its pushes, 2(n-1)/n / max(1, n/k).
    Host-bound configurations are left out; dilated ones are marked."""
    ch = _checks(results, name)
    if ch is None:
        return missing(name)
    ch = [r for r in ch if r["model"] == model and r["gpus_per_node"] == 1 and not r.get("host_bound")
          and str(r.get("device", "")).startswith("throughput")]
    ring = {(r["nodes"], r["dilate"]): r for r in ch if r["engine"] == "ring"}
    rows = []
    for r in sorted((r for r in ch if r["engine"].startswith("ps-") and r.get("server_nodes")),
                    key=lambda r: (r["nodes"], r["server_nodes"], r["dilate"])):
        g = ring.get((r["nodes"], r["dilate"]))
        if not g:
            continue
        n, k = r["nodes"], r["server_nodes"]
        arith = (2 * (n - 1) / n) / max(1, n / k)
        rows.append([n, k, f"{r['dilate']:g}", f"{g['measured_ms'] / r['measured_ms']:.2f}",
                     f"{g['step_ms'] / r['step_ms']:.2f}", f"{arith:.2f}"])
    if not rows:
        raise BlockError(f"results/{name}.jsonl has no check lines of {model} on machines of one GPU with server machines")
    return (f"\n`results/{name}.jsonl` (ring step / PS step; dilate: the time dilation of the launches):\n\n" +
            table(["n", "k", "dilate", "measured", "model", "arithmetic"], rows) + "\n")


@block
def model_scale(results, name="emulated-model", gpus="16,64,256,1024", engines="ring,tree,ps-per-node,ps-K=N",
                gpus_per_node="4"):
    """`harness model`'s predicted speedup over one device (its "kind":"cluster" lines) a model and engine, at the
    GPU counts of gpus, on machines of gpus_per_node."""
    rs = load(results, name)
    if rs is None:
        return missing(name)
    want, engs = [int(g) for g in gpus.split(",")], engines.split(",")
    cl = {(r["model"], r["device"], r["engine"], r["gpus"]): r["speedup"] for r in rs
          if r.get("mode") == "model" and r.get("kind") == "cluster" and r["gpus_per_node"] == int(gpus_per_node)}
    rows = []
    for m, dev in sorted({(k[0], k[1]) for k in cl}):
        for e in engs:
            cells = [fnum(cl[(m, dev, e, g)]) if (m, dev, e, g) in cl else "" for g in want]
            if any(cells):
                rows.append([m, dev, f"`{e}`"] + cells)
    return (f"\n`results/{name}.jsonl` (predicted speedup over one device, machines of {gpus_per_node} GPUs):\n\n" +
            table(["model", "device", "engine"] + [f"{g} GPUs" for g in want], rows, [False] * 3 + [True] * len(want)) + "\n")


@block
def model_checked(results, name="emulated-model", min_gpus="32"):
    """`harness model`'s check lines from min_gpus GPUs on: each configuration's measured step (its launches'
    median) against the prediction; hb: host-bound."""
    ch = _checks(results, name)
    if ch is None:
        return missing(name)
    rows = [[f"`{r['engine']}`", r["model"], r["gpus"], f"{r['dilate']:g}", r["launches"], fnum(r["measured_ms"], 4),
             fnum(r["step_ms"], 4), f"{r['err_pct']:+.1f}%" + (" (hb)" if r.get("host_bound") else "")]
            for r in sorted(ch, key=lambda r: (r["model"], r["engine"], r["gpus"])) if r["gpus"] >= int(min_gpus)]
    return (f"\n`results/{name}.jsonl` (ms a step; error: predicted against measured; hb: host-bound):\n\n" +
            table(["engine", "model", "GPUs", "dilate", "launches", "measured", "predicted", "error"], rows,
                  [False, False, True, True, True, True, True, True]) + "\n")
