"""results.py: the results files as paper/gen.py reads them: the rows `harness report --format json`
makes of each (engine labels, medians of repeated bench runs, scaling efficiency, model predictions)
and the lines themselves for metadata. Python 3 standard library only."""
import json
import os
import subprocess
import sys


# ---- reading -----------------------------------------------------------------------------------

def num(v, default=float("nan")):
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    return default


def harness_rows(harness, path):
    """The rows `harness report --format json` makes of one results file: bench points (medians of
    repeated runs), train configurations (the latest line of each, with its file:line) and model
    predictions, each with the report's engine label, so the paper's tables match the report's."""
    try:
        p = subprocess.run([harness, "report", path, "--format", "json"], capture_output=True, text=True)
    except OSError as e:
        sys.exit("gen.py: cannot run %s: %s" % (harness, e))
    if p.returncode != 0:
        sys.exit("gen.py: %s report %s --format json failed (exit %d):\n%s" % (harness, path, p.returncode, p.stderr))
    return json.loads(p.stdout)


class Result:
    """One results/<name>.jsonl (its rows from harness report, its lines for metadata) with its
    results/<name>.txt (when present)."""

    def __init__(self, path, harness):
        self.path = path
        self.name = os.path.basename(path)[: -len(".jsonl")]
        self.lines = []
        byno = {}
        with open(path, encoding="utf-8", errors="replace") as f:
            for no, text in enumerate(f, 1):
                try:
                    o = json.loads(text) if text.strip() else None
                except ValueError:
                    o = None
                if isinstance(o, dict):
                    self.lines.append(o)
                    byno[no] = o
        txt = path[: -len(".jsonl")] + ".txt"
        self.txt = None
        if os.path.exists(txt):
            with open(txt, encoding="utf-8", errors="replace") as f:
                self.txt = f.read()
        self.title = self.name
        if self.txt:
            first = self.txt.splitlines()[0] if self.txt.splitlines() else ""
            if first.startswith("# "):
                self.title = first[2:].split(" — recorded")[0].strip() or self.name
        doc = harness_rows(harness, path)
        self.bad = doc["malformed"]
        # bench: the report's point; train: the line the report chose, with the report's values
        bench = [dict(o, mode="bench", bytes=float(o["bytes"])) for o in doc["bench"]]
        train = [dict(byno.get(int(o["src"].rsplit(":", 1)[1]), {}), **o) for o in doc["train"]]
        self.superseded = sum(o["runs"] - 1 for o in bench + train if not is_net(o))
        self.bench = {(o["label"], o["world"], o["bytes"]): o for o in bench if not is_net(o) and num(o.get("time_us")) > 0}
        self.train = {(o["label"], o["world"]): o for o in train if not is_net(o)}
        self.net = [o for o in bench + train if is_net(o)]
        self.model = doc["model"]
        self.fits = [o for o in self.lines if o.get("mode") == "model" and o.get("what") == "fit"]
        self.gemm = [o for o in self.lines if o.get("mode") == "gemm"]

    def net_lines(self):
        return self.net


def is_net(o):
    v = o.get("net")
    return isinstance(v, str) and v not in ("", "none")
