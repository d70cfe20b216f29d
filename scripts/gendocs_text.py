"""gendocs_text.py: the generated blocks read from the text outputs results/NAME.txt records (scripts/ps-flows,
scripts/machine-bytes, `harness model` and `harness simulate` without --json, scripts/device-check), for
scripts/gen-docs beside gendocs_measured.py's JSON-line blocks. Each parser checks the header it reads and
stops with a clear error naming the file when a tool's output changes. Python 3 standard library only.
"""
import os
import re

from gendocs_measured import BlockError, block, flagval, fnum, fsize, missing, parse_size, table


def _text(results, name):
    path = os.path.join(results, name + ".txt")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def _sections(lines):
    """[(command, [its output lines])] for the `$ COMMAND` lines of a recording."""
    out = []
    for line in lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


def _norm(line):
    return " ".join(line.lstrip("#").split())


def _rows(name, lines, head, n, extra=0):
    """The rows under the header line whose words are head (the unit lines under it skipped): each row's n
    first fields and at most extra more (flags such as hb). A header found with rows of another width, or
    no row under it, is an error: the tool's output changed."""
    out = []
    for i, line in enumerate(lines):
        if line.startswith("#") and _norm(line) == head:
            j = i + 1
            while j < len(lines) and lines[j].startswith("#") and not _norm(lines[j]).startswith(("syncbench", "mean")):
                j += 1
            got = []
            while j < len(lines) and lines[j].strip() and not lines[j].startswith(("#", "$")):
                f = lines[j].split()
                if not n <= len(f) <= n + extra:
                    raise BlockError(f"results/{name}.txt: a row under '{head}' has {len(f)} fields, not {n}: "
                                     f"{lines[j].strip()!r} (has the tool's output changed?)")
                got.append(f)
                j += 1
            if not got:
                raise BlockError(f"results/{name}.txt: no row under '{head}'")
            out.append(got)
    return out


def _num(name, v):
    try:
        return float(v.rstrip("%"))
    except ValueError:
        raise BlockError(f"results/{name}.txt: {v!r} is not a number where one was expected") from None




# ---- scripts/ps-flows -------------------------------------------------------------------------------

PSFLOWS = "step skew flow end part wait p90 wait last push tail"


@block
def psflows(results, name):
    """scripts/ps-flows' lines of a recording (a PS timeline: medians over the steps, ms), one row a launch."""
    lines = _text(results, name)
    if lines is None:
        return missing(name)
    rows = []
    for cmd, out in _sections(lines):
        if "scripts/ps-flows" not in cmd:
            continue
        got = _rows(name, out, PSFLOWS, 8)
        if len(got) != 1 or len(got[0]) != 1:
            raise BlockError(f"results/{name}.txt: `{cmd}` printed no single ps-flows row under '{PSFLOWS}'")
        f = got[0][0]
        rows.append([f[0]] + [f"{_num(name, v):,.1f}" for v in f[1:]])   # as ps-flows printed them
    if not rows:
        raise BlockError(f"results/{name}.txt holds no scripts/ps-flows output")
    rows.sort(key=lambda r: r[0])
    return (f"\n`results/{name}.txt`, scripts/ps-flows (ms, medians over a launch's steps; a row a launch):\n\n" +
            table(["timeline", "step", "workers' start skew", "a worker's flows end apart", "a partition waits for its "
                   "last push", "p90 of that wait", "last push in", "replies after it"], rows) + "\n")


# ---- harness model, predicted against the emulated runs ---------------------------------------------

MODELCHK = "engine model device GPUs launches measured predicted err%"


@block
def model_check(results, name, by="--net"):
    """The `harness model` runs of a recording: each one's predicted against measured step (a column of
    errors a run, named by its command's by flag) and its summary line."""
    lines = _text(results, name)
    if lines is None:
        return missing(name)
    runs = [(c, o) for c, o in _sections(lines) if re.search(r"harness model ", c) and "predicted against" in "\n".join(o)]
    if not runs:
        raise BlockError(f"results/{name}.txt holds no `harness model` run with its 'predicted against' table")
    cols, cells, order, notes = [], {}, [], []
    for cmd, out in runs:
        col = flagval(cmd, by)
        cols.append(col)
        got = _rows(name, out, MODELCHK, 8, extra=1)
        if len(got) != 1:
            raise BlockError(f"results/{name}.txt: `{cmd}` has {len(got)} tables under '{MODELCHK}', not one")
        for f in got[0]:
            k = (f[0], f[2], f[3], "hb" if f[8:] == ["hb"] else "")
            if k not in order:
                order.append(k)
            cells[k + (col,)] = f"{_num(name, f[5]):,.1f} / {_num(name, f[6]):,.1f} ({_num(name, f[7]):+.1f}%)"
        summ = [l for l in out if _norm(l).startswith("mean |err|")]
        m = re.fullmatch(r"mean \|err\| ([\d.]+)% over (\d+) configurations \((\d+) launches\); (\d+) within 10%.*",
                         _norm(summ[-1])) if summ else None
        if not m:
            raise BlockError(f"results/{name}.txt: `{cmd}` has no 'mean |err| ...' line in the form harness model prints")
        notes.append(f"`{by} {col}`: mean |error| {m.group(1)}% over {m.group(2)} configurations ({m.group(3)} "
                     f"launches), {m.group(4)} within 10%")
    rows = [[f"`{k[0]}`", k[1], k[2], k[3]] + [cells.get(k + (c,), "") for c in cols] for k in order]
    return (f"\n`results/{name}.txt`, `harness model` (ms a step, measured / predicted (error); hb: a host-bound "
            "launch, listed, not counted):\n\n" +
            table(["layout", "device", "GPUs", "hb"] + [f"{by} {c}" for c in cols], rows,
                  [False, False, True, False] + [True] * len(cols)) + "\n" + "; ".join(notes) + ".\n")


# ---- scripts/machine-bytes and harness simulate ------------------------------------------------------

MACHBYTES = ("engine step(ms) speedup GPU mach out GPU mach in srv mach out srv mach in within mach "
             "(MB, mean) (MB, mean) (MB, mean) (MB, mean) (MB, all)")
SIMHEAD = "size(B) algo time(us) algbw busbw NIC max(B) comms sim(s)"


def _two_line(lines):
    """lines with each two-line header (a header and its units line) joined into one, for _rows."""
    out = []
    for line in lines:
        if out and out[-1].startswith("#") and line.startswith("#") and _norm(line).startswith("(MB"):
            out[-1] = out[-1] + " " + line.lstrip("#")
        else:
            out.append(line)
    return out


@block
def machine_bytes(results, name):
    """scripts/machine-bytes' table of a recording (a layout's bytes to and from other machines a step, from the
    engines' traffic matrices), one row a layout (its launches alike: the first)."""
    lines = _text(results, name)
    if lines is None:
        return missing(name)
    rows, seen = [], set()
    for cmd, out in _sections(lines):
        if "scripts/machine-bytes" not in cmd:
            continue
        for got in _rows(name, _two_line(out), MACHBYTES, 8):
            for f in got:
                if f[0] not in seen:
                    seen.add(f[0])
                    rows.append([f"`{f[0]}`"] + f[3:])
    if not rows:
        raise BlockError(f"results/{name}.txt holds no scripts/machine-bytes table")
    return (f"\n`results/{name}.txt`, scripts/machine-bytes (MB a step: a GPU machine's and a server machine's mean, "
            "and within machines all together):\n\n" +
            table(["layout", "GPU machine out", "GPU machine in", "server machine out", "server machine in",
                   "within machines"], rows) + "\n")


@block
def simulate_txt(results, name, by="", sizes=None):
    """The `harness simulate` runs a recording printed without --json: a row a run (named by the flags of by,
    comma-separated, that its command gives) and size: time, the busiest NIC's bytes, communications."""
    lines = _text(results, name)
    if lines is None:
        return missing(name)
    flags = [f for f in by.split(",") if f]
    want = {parse_size(s) for s in sizes.split(",")} if sizes else None
    rows = []
    for cmd, out in _sections(lines):
        if not re.search(r"harness simulate ", cmd) or "--json" in cmd:
            continue
        for got in _rows(name, out, SIMHEAD, 8):
            for f in got:
                b = int(_num(name, f[0]))
                if want is None or b in want:
                    rows.append([flagval(cmd, "--engine")] + [flagval(cmd, x) for x in flags] +
                                [fsize(b), fnum(_num(name, f[2]) / 1000, 4), fsize(int(_num(name, f[5]))), f[6]])
    if not rows:
        raise BlockError(f"results/{name}.txt holds no `harness simulate` table")
    return (f"\n`results/{name}.txt`, `harness simulate`:\n\n" +
            table(["engine"] + flags + ["size", "time (ms)", "busiest NIC", "communications"], rows,
                  [False] * (1 + len(flags)) + [False, True, True, True]) + "\n")


@block
def checksums(results, name):
    """One sentence: whether every launch of a recording ended with the same parameters (the engines' "parameters
    after step N: checksum X" lines)."""
    lines = _text(results, name)
    if lines is None:
        return missing(name)
    sums = re.findall(r"parameters after step \d+: checksum ([0-9a-f]+)", "\n".join(lines))
    if not sums:
        raise BlockError(f"results/{name}.txt has no 'parameters after step N: checksum X' line")
    n = len(set(sums))
    return (f"Every one of the {len(sums)} launches ends with the same parameters (one checksum, `results/{name}.txt`)."
            if n == 1 else f"The {len(sums)} launches end with {n} different parameter checksums (`results/{name}.txt`).")


# ---- scripts/device-check ---------------------------------------------------------------------------

DEVROW = re.compile(r"^(\S.*?)\s+(PASS|FAIL|INFO|SKIP)\s+(\d+)(?:\s+(.*))?$")


@block
def device_check(results, name="device-check"):
    """scripts/device-check's table (results/NAME.txt: a '# device-check on ... (MACHINE) ...' line, the
    'syncbench device-check' line, the 'step result secs note' header, a row a step, 'failures: N'): a row a
    step, its result and the figures its note gives (the part after the note's last '; ')."""
    lines = _text(results, name)
    if lines is None:
        return missing(name)
    where = next((l for l in lines if l.startswith("# device-check on ")), None)
    m = re.match(r"# device-check on .*?\((.*?)\) — recorded (\S+?),? ", where or "")
    try:
        h = next(i for i, l in enumerate(lines) if l.split() == ["step", "result", "secs", "note"])
    except StopIteration:
        m = None
    if not m or not any(l.startswith("syncbench device-check ") for l in lines[:h]):
        raise BlockError(f"results/{name}.txt is not scripts/device-check's table as this block reads it ('# device-check "
                         "on ... (MACHINE) — recorded TIME', 'syncbench device-check ...', 'step result secs note')")
    rows, fails = [], None
    for line in lines[h + 1:]:
        if not line.strip():
            continue
        f = re.fullmatch(r"failures: (\d+)", line.strip())
        if f:
            fails = int(f.group(1))
            break
        r = DEVROW.match(line)
        if not r:
            raise BlockError(f"results/{name}.txt: not a step row (STEP RESULT SECS NOTE): {line.strip()!r}")
        note = (r.group(4) or "").strip()
        tail = note.rsplit("; ", 1)[-1]
        if tail.count(")") == tail.count("(") and re.search(r"\d", tail):   # the figures after the description
            note = tail
        rows.append([r.group(1), r.group(2), re.sub(r";(?=\S)", ", ", note).replace("|", "/")])
    if fails is None or not rows:
        raise BlockError(f"results/{name}.txt: no step rows ending in 'failures: N'")
    if fails != sum(r[1] == "FAIL" for r in rows):
        raise BlockError(f"results/{name}.txt: 'failures: {fails}' but {sum(r[1] == 'FAIL' for r in rows)} FAIL rows")
    return (f"\n`results/{name}.txt` (scripts/device-check on {m.group(1)}, {m.group(2)}; {len(rows)} steps, "
            f"{fails} failed):\n\n" + table(["step", "result", "note (its figures)"], rows, [False, False, False]) + "\n")
