"""profile.py: syncbench-profile: a PyTorch model's gradient profile in workloads/'s format (workloads/README.md), so
`harness train|model|simulate --model FILE.tsv` emulates that model: every trainable tensor in backward order with
its element count and its module's forward and backward FLOPs per sample, counted by torch.utils.flop_counter on
one forward and backward pass on random input (CPU, train mode).

    syncbench-profile resnet50 --input 3x224x224 -o resnet50.tsv          # a torchvision model, by its name
    syncbench-profile mypkg.models:make_net --input 3x32x32 -o net.tsv     # an importable nn.Module factory
    syncbench-profile path/to/file.py:Net --input 128:int --name mynet -o mynet.tsv

Attribution (as workloads/README.md describes): a module's own FLOPs (those of the ops it runs itself, not its
children's) go to its first tensor in backward order (the last it registers); a module with no trainable tensor
gives its own to the nearest ancestor that has one. Forward ops belong to the innermost module running; backward
ops to the module whose forward made the autograd node that runs them. The totals are FlopCounterMode's (2 FLOPs
per multiply-add; matrix multiplies, convolutions, attention)."""
import argparse
import importlib
import importlib.util
import math
import os
import re
import sys

NAME_OK = re.compile(r"^[A-Za-z0-9._+-]{1,31}$")  # what trainer/workload.c takes as the header's model name


class ProfileError(Exception):
    """Bad input to the profiler (a model that cannot be made, a bad shape), with the message to print."""


def _torch():
    try:
        import torch
        import torch.nn  # noqa: F401
        from torch.utils import flop_counter  # noqa: F401
    except ImportError as e:
        raise ProfileError("syncbench-profile needs torch, which %s cannot import (%s): `make peers` installs it "
                           "into peers/.venv (then peers/.venv/bin/syncbench-profile, or `harness profile`)"
                           % (sys.executable, e))
    return torch


def parse_input(spec):
    """"3x224x224" -> ((3, 224, 224), "float"); "128:int" -> ((128,), "int")."""
    shape, _, kind = spec.partition(":")
    kind = kind or "float"
    if kind not in ("float", "int"):
        raise ProfileError("--input %s: the element kind after ':' is float or int" % spec)
    try:
        dims = tuple(int(d) for d in shape.lower().split("x"))
    except ValueError:
        raise ProfileError("--input %s: a shape is sizes joined by x (3x224x224), then :float or :int" % spec)
    if not dims or any(d < 1 for d in dims):
        raise ProfileError("--input %s: every size must be >= 1" % spec)
    return dims, kind


def make_model(spec):
    """The nn.Module that spec names: "pkg.mod:fn" or "file.py:fn" (called with no arguments),
    "torchvision:NAME" or a bare torchvision model name (random weights), "transformers:CLASS" (default config).
    Returns (model, source) where source says what it was made from."""
    kind, sep, rest = spec.partition(":")
    if sep and kind == "transformers":   # asked first: without it the model cannot be made, whatever torch says
        try:
            import transformers
        except ImportError as e:
            raise ProfileError("model %r: Hugging Face transformers is not importable by %s (%s): `make peers` installs "
                               "it (pinned in peers/requirements.txt, beside torch) into peers/.venv, whose python "
                               "`harness profile` runs" % (spec, sys.executable, e))
    torch = _torch()
    if (sep and kind == "torchvision") or not sep:
        name = rest if sep else spec
        try:
            import torchvision
        except ImportError as e:
            raise ProfileError("model %r: not a factory (pkg.module:function) and torchvision is not importable (%s)"
                               % (spec, e))
        names = torchvision.models.list_models()
        if name not in names:
            raise ProfileError("model %r: torchvision has no such model (it has %s); a factory is pkg.module:function"
                               % (name, ", ".join(sorted(n for n in names if "_" not in n)[:40]) + ", ..."))
        return torchvision.models.get_model(name, weights=None), "torchvision.models.%s" % name
    if kind == "transformers":
        cls = getattr(transformers, rest, None)
        if cls is None or not hasattr(cls, "config_class"):
            raise ProfileError("model %r: transformers has no model class %r" % (spec, rest))
        return cls(cls.config_class()), "transformers.%s(%s defaults)" % (rest, cls.config_class.__name__)
    mod_name, fn_name = kind, rest
    if not fn_name:
        raise ProfileError("model %r: a factory is pkg.module:function (or file.py:function)" % spec)
    try:
        if mod_name.endswith(".py"):
            if not os.path.isfile(mod_name):
                raise ProfileError("model %r: no file %s" % (spec, mod_name))
            s = importlib.util.spec_from_file_location(os.path.basename(mod_name)[:-3], mod_name)
            mod = importlib.util.module_from_spec(s)
            sys.path.insert(0, os.path.dirname(os.path.abspath(mod_name)))
            s.loader.exec_module(mod)
        else:
            sys.path.insert(0, os.getcwd())
            mod = importlib.import_module(mod_name)
    except ProfileError:
        raise
    except Exception as e:
        raise ProfileError("model %r: importing %s failed: %s: %s" % (spec, mod_name, type(e).__name__, e))
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise ProfileError("model %r: %s has no callable %r" % (spec, mod_name, fn_name))
    try:
        model = fn()
    except Exception as e:
        raise ProfileError("model %r: %s() raised %s: %s" % (spec, fn_name, type(e).__name__, e))
    if not isinstance(model, torch.nn.Module):
        raise ProfileError("model %r: %s() returned a %s, not a torch.nn.Module" % (spec, fn_name, type(model).__name__))
    return model, "%s:%s" % (mod_name, fn_name)


def _tensors(obj, torch):
    """Every tensor in obj (a tensor, a tuple/list/dict of them, a transformers ModelOutput), depth first."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o, torch)]
    return []


class _Attribution:
    """Which module each counted op belongs to. Forward: the innermost module running (forward pre-hooks and
    hooks keep a stack). Backward: every autograd node a module's forward created (and no child's) belongs to
    it; node pre-hooks and hooks say which node runs, so an op in backward is its node's module's. (The
    counter's own module tracker marks a module done in backward only when its inputs' gradients are complete,
    so a branch that reads a block's input stays "running" while its sibling branches run: their FLOPs counted
    twice, the block's negative.)"""

    def __init__(self, torch, model):
        self.torch, self.stack, self.current, self.backward = torch, [], None, False
        self.fwd, self.bwd = {}, {}  # id(module) -> FLOPs
        self.outside_f = self.outside_b = 0
        self.owner = {}  # autograd node -> module
        self.hooks = []
        self.probe = torch.zeros((), requires_grad=True)
        for m in model.modules():
            self.hooks.append(m.register_forward_pre_hook(self._pre))
            self.hooks.append(m.register_forward_hook(self._post))

    def _seq(self):
        return (self.probe * 1).grad_fn._sequence_nr()  # the autograd sequence number now

    def _pre(self, m, args):
        self.stack.append((m, self._seq()))

    def _post(self, m, args, out):
        mod, start = self.stack.pop()
        todo = [t.grad_fn for t in _tensors(out, self.torch) if t.grad_fn is not None]
        seen = set()
        while todo:
            n = todo.pop()
            if n is None or n in seen or not hasattr(n, "_sequence_nr") or type(n).__name__ == "AccumulateGrad":
                continue
            seen.add(n)
            if n._sequence_nr() <= start:
                continue  # made before this module ran
            if n not in self.owner:  # a child's nodes are its own (its hook ran first)
                self.owner[n] = mod
                n.register_prehook(lambda grad_outputs, mod=mod: self._running(mod))
                n.register_hook(lambda grad_inputs, grad_outputs: self._running(None))
            todo.extend(f for f, _ in n.next_functions)

    def _running(self, mod):
        self.current = mod

    def add(self, flops):
        if self.backward:
            m = self.current
            if m is None:
                self.outside_b += flops
            else:
                self.bwd[id(m)] = self.bwd.get(id(m), 0) + flops
        elif self.stack:
            m = self.stack[-1][0]
            self.fwd[id(m)] = self.fwd.get(id(m), 0) + flops
        else:
            self.outside_f += flops

    def close(self):
        for h in self.hooks:
            h.remove()


def _attributing_mode(attr):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            f = flop_registry.get(func._overloadpacket)
            if f is not None:
                attr.add(f(*args, **kwargs, out_val=out))
            return out
    return Mode()


def count(model, input_shape, input_kind="float", batch=2, int_high=None, seed=0):
    """One forward and backward pass of model (train mode, CPU) under torch.utils.flop_counter. Returns a dict:
    rows [(name, numel, fwd, bwd)] in backward order (FLOPs per sample), the counter's totals by op, notes."""
    torch = _torch()
    from torch.utils.flop_counter import FlopCounterMode
    if batch < 1:
        raise ProfileError("--batch must be >= 1")
    torch.manual_seed(seed)
    model.train()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ProfileError("the model has no trainable parameters")
    for n, p in named:
        if p.device.type != "cpu":
            raise ProfileError("parameter %s is on %s: syncbench-profile counts on the CPU" % (n, p.device))
    rows = [n for n, _ in reversed(named)]  # backward order
    row_of = {id(p): i for i, (_, p) in enumerate(reversed(named))}
    numel = [p.numel() for _, p in reversed(named)]
    if input_kind == "int":
        if int_high is None:
            embs = [m.num_embeddings for m in model.modules() if isinstance(m, torch.nn.Embedding)]
            if not embs:
                raise ProfileError("--input ...:int needs --int-high N (the model has no nn.Embedding to take it from)")
            int_high = min(embs)
        x = torch.randint(0, int_high, (batch,) + tuple(input_shape))
    else:
        x = torch.randn((batch,) + tuple(input_shape))
    try:
        fc = FlopCounterMode(display=False, depth=None)
    except TypeError:  # older torch: no depth=None
        fc = FlopCounterMode(display=False)
    attr = _Attribution(torch, model)
    try:
        with fc, _attributing_mode(attr):
            try:
                out = model(x)
            except Exception as e:
                raise ProfileError("the model's forward on input %s (batch %d) raised %s: %s"
                                   % ("x".join(map(str, input_shape)), batch, type(e).__name__, e))
            fwd_ops = dict(fc.get_flop_counts().get("Global", {}))
            outs = [t for t in _tensors(out, torch) if t.is_floating_point() and t.requires_grad]
            if not outs:
                raise ProfileError("the model's output holds no floating-point tensor that needs a gradient")
            loss = sum(o.float().sum() for o in outs)
            attr.backward = True
            loss.backward()
            all_ops = dict(fc.get_flop_counts().get("Global", {}))
    finally:
        attr.close()
    ops_f = {str(op).split(".")[-1]: c / batch for op, c in fwd_ops.items() if c}
    ops_b = {str(op).split(".")[-1]: (c - fwd_ops.get(op, 0)) / batch for op, c in all_ops.items()
             if c - fwd_ops.get(op, 0)}
    mods = list(model.named_modules(remove_duplicate=True))
    first = {}  # id(module) -> the row of its first tensor in backward order
    for _, m in mods:
        idx = [row_of[id(p)] for p in m.parameters() if id(p) in row_of]
        if idx:
            first[id(m)] = min(idx)
    parent = {}
    for _, m in mods:
        for _, c in m.named_children():
            parent.setdefault(id(c), m)
    F = [0.0] * len(rows)
    B = [0.0] * len(rows)
    lifted = 0
    root = type(model).__name__
    for mname, m in mods:
        f, b = attr.fwd.get(id(m), 0), attr.bwd.get(id(m), 0)
        if not (f or b):
            continue
        home = m
        while id(home) not in first and id(home) in parent:
            home = parent[id(home)]
        if id(home) not in first:
            raise ProfileError("module %s does %.4g FLOPs a sample but neither it nor any module above it has a "
                               "trainable tensor" % (mname or root, (f + b) / batch))
        lifted += home is not m
        F[first[id(home)]] += f
        B[first[id(home)]] += b
    notes = []
    if lifted:
        notes.append("%d module(s) without trainable tensors gave their FLOPs to the nearest ancestor's first tensor"
                     % lifted)
    if attr.outside_f or attr.outside_b:
        notes.append("not in any row: forward %.4g, backward %.4g FLOPs a sample ran outside the model's modules"
                     % (attr.outside_f / batch, attr.outside_b / batch))
    counted_f, counted_b = sum(fwd_ops.values()), sum(all_ops.values()) - sum(fwd_ops.values())
    if not (math.isclose(sum(F) + attr.outside_f, counted_f, rel_tol=1e-9, abs_tol=1)
            and math.isclose(sum(B) + attr.outside_b, counted_b, rel_tol=1e-9, abs_tol=1)):
        raise ProfileError("the attribution holds forward %.6g, backward %.6g FLOPs but FlopCounterMode counted %.6g, "
                           "%.6g: a bug in syncbench-profile" % (sum(F) + attr.outside_f, sum(B) + attr.outside_b,
                                                                 counted_f, counted_b))
    return {"rows": [(rows[i], numel[i], F[i] / batch, B[i] / batch) for i in range(len(rows))],
            "ops_fwd": ops_f, "ops_bwd": ops_b, "notes": notes, "batch": batch}


def _num(v):
    r = round(v)
    return "%d" % r if abs(v - r) < 1e-6 * max(1.0, abs(v)) else "%.17g" % v


def render(name, source, input_desc, prof):
    """The profile's text, workloads/NAME.tsv's format."""
    rows = prof["rows"]
    f = sum(r[2] for r in rows)
    b = sum(r[3] for r in rows)
    out = ["# %s: %d trainable tensors, %d parameters; source %s, input %s; whole-model FLOPs per sample: "
           "forward %.4g, backward %.4g" % (name, len(rows), sum(r[1] for r in rows), source, input_desc, f, b),
           "# tensor (backward order)\tnumel\tforward_flops_per_sample\tbackward_flops_per_sample (FLOPs of the "
           "module that owns the tensor, given to its first tensor in backward order)"]
    out += ["%s\t%d\t%s\t%s" % (r[0], r[1], _num(r[2]), _num(r[3])) for r in rows]
    return "\n".join(out) + "\n"


def default_name(spec):
    """resnet50 -> resnet50, torchvision:vgg16 -> vgg16, pkg.mod:make_net -> make_net (as the header can hold it)."""
    return re.sub(r"[^A-Za-z0-9._+-]", "-", spec.rpartition(":")[2])[:31] or "model"


def args_of(argv):
    p = argparse.ArgumentParser(prog="syncbench-profile", description=__doc__.split("\n")[0].split(": ", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[4:]))
    p.add_argument("model", help="pkg.module:function or file.py:function (an nn.Module factory, called with no "
                                 "arguments), a torchvision model name (torchvision:NAME or NAME), "
                                 "transformers:CLASS (its default config)")
    p.add_argument("--input", required=True, help="one sample's shape, e.g. 3x224x224 (float) or 128:int (token ids)")
    p.add_argument("--batch", type=int, default=2, help="samples in the counted pass (FLOPs are divided by it; default 2)")
    p.add_argument("--int-high", type=int, default=None,
                   help="token ids are drawn from [0, N) (default: the smallest nn.Embedding's size)")
    p.add_argument("--name", default=None, help="the model's name in the header (harness reports it; default: from "
                                                "MODEL); 1-31 of A-Z a-z 0-9 . _ + -")
    p.add_argument("-o", "--output", default=None, help="FILE.tsv to write (default: standard output)")
    a = p.parse_args(argv)
    if a.output and not a.output.endswith(".tsv"):
        p.error("-o %s: harness takes a profile by a path ending in .tsv" % a.output)
    a.name = a.name or default_name(a.model)
    if not NAME_OK.match(a.name):
        p.error("--name %r: 1 to 31 characters of A-Z a-z 0-9 . _ + - (the header's name, as harness reads it)" % a.name)
    return a


def main(argv=None):
    a = args_of(sys.argv[1:] if argv is None else argv)
    try:
        shape, kind = parse_input(a.input)
        model, source = make_model(a.model)
        prof = count(model, shape, kind, a.batch, a.int_high)
    except ProfileError as e:
        print("syncbench-profile: %s" % e, file=sys.stderr)
        return 2
    desc = ("sequence %d" % shape[0] if kind == "int" and len(shape) == 1 else "x".join(map(str, shape)) +
            (" (int)" if kind == "int" else ""))
    text = render(a.name, source, desc, prof)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    rows = prof["rows"]
    f, b = sum(r[2] for r in rows), sum(r[3] for r in rows)
    err = sys.stderr
    print("syncbench-profile: %s (%s), input %s, counted at batch %d on CPU in train mode:" % (a.name, source, desc,
                                                                                                 a.batch), file=err)
    print("  %d trainable tensors, %d parameters (%.1f MB of f32 gradients a step), in backward order" %
          (len(rows), sum(r[1] for r in rows), 4e-6 * sum(r[1] for r in rows)), file=err)
    for what, ops, tot in (("forward", prof["ops_fwd"], f), ("backward", prof["ops_bwd"], b)):
        print("  %s %.4g FLOPs a sample (2 per multiply-add) from %s" % (what, tot, ", ".join(
            "%s %.4g" % kv for kv in sorted(ops.items(), key=lambda kv: -kv[1])) or "no counted op"), file=err)
    print("  counted: what torch.utils.flop_counter counts (matrix multiplies, convolutions, attention); not "
          "normalisation, activations, the loss or the optimizer", file=err)
    for n in prof["notes"]:
        print("  note: %s" % n, file=err)
    if a.output:
        print("  wrote %s: harness train|model|simulate --model %s" % (a.output, a.output), file=err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
