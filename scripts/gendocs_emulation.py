"""gendocs_emulation.py: the generated blocks of docs/emulation.md read from the cost model's recorded calibration
(the `harness model fit` JSON that results/model-fit-check.txt prints), for scripts/gen-docs beside
gendocs_measured.py's blocks. Python 3 standard library only.
"""
import json

from gendocs_measured import BlockError, block, missing, table
from gendocs_text import _sections, _text


def _calibration(results, name):
    """The calibration object that `cat calibration.json` printed in results/NAME.txt, or None where not recorded."""
    lines = _text(results, name)
    if lines is None:
        return None
    for cmd, out in _sections(lines):
        if cmd.startswith("cat ") and cmd.endswith("calibration.json"):
            try:
                obj = json.loads("\n".join(out).strip())
            except ValueError as e:
                raise BlockError(f"results/{name}.txt: `{cmd}` printed no JSON object ({e})") from None
            if obj.get("kind") != "calibration" or "constants" not in obj or "files" not in obj:
                raise BlockError(f"results/{name}.txt: `{cmd}` printed no calibration (kind, files, constants)")
            return obj
    raise BlockError(f"results/{name}.txt holds no `cat .../calibration.json` section")


def _where(c):
    if c["kind"] == "alpha":
        return "a message in series (ring and tree lines)"
    if c["kind"] == "incast":
        return f"one server fed by {c['fmin']} to {c['fmax']} ranks"
    mach = f"{c['nodes']} x {c['gpus_per_node']}"
    if c["kind"] == "layout":
        return f"`{c['layout']}` on {mach}"
    if c["kind"] == "servers":
        return f"servers on K machines of their own, {mach}, K {c['kmin']} to {c['kmax']}"
    return c["kind"]


def _value(c):
    if c["kind"] == "alpha":
        return f"{1e6 * c['value']:.2f} us (least squares {1e6 * c['fitted']:+.2f})"
    if c["kind"] == "incast":
        return f"c = {c['value']:.4f}"
    if c["kind"] == "servers":
        return f"{c['value']:.3f} {c['slope']:+.4f} (K - 1)"
    return f"{c['value']:.3f}"


@block
def calibration(results, name="model-fit-check"):
    """`harness model fit`'s calibration as results/NAME.txt recorded it: how many bench lines of how many files made
    how many constants, and a row a constant (what it is for, the partition's wire time it holds at, its value, its
    lines)."""
    obj = _calibration(results, name)
    if obj is None:
        return missing(name)
    used = [f for f in obj["files"] if f.get("used")]
    cs = obj["constants"]
    rows = [[c["kind"], _where(c), f"{1e3 * c['part_wire_s']:.2f}" if "part_wire_s" in c else "–", _value(c), c["lines"]]
            for c in cs]
    return (f"\n`results/{name}.txt` (`harness model fit`, TCP {obj.get('cc', '?')}): {len(cs)} constants from "
            f"{sum(f['used'] for f in used)} bench lines of {len(used)} files. Slowdowns are measured / modelled time; "
            "a prediction takes the constant whose partition wire time is nearest its own:\n\n" +
            table(["constant", "of", "partition on the wire (ms)", "value", "lines"], rows,
                  [False, False, True, True, True]) + "\n")
