"""optimizer.py: Horovod's DistributedOptimizer on syncbench's engines: the wrapped optimizer (still an instance
of its own class, so LR schedulers and isinstance work) submits each parameter's gradient as an asynchronous
in-place allreduce the moment autograd has accumulated it, and step() first waits for them (synchronize)."""
import contextlib

import torch

from .. import _core, _lib


def DistributedOptimizer(optimizer, named_parameters=None, compression=None, backward_passes_per_step=1, op="avg",
                         gradient_predivide_factor=1.0, timeout=None):
    """optimizer, with its gradients averaged (op "avg", Horovod's Average) or summed ("sum") over the workers
    before every step. named_parameters (model.named_parameters()) names the tensors in errors; every parameter
    of the optimizer must be among them. backward_passes_per_step: gradients accumulate locally over that many
    backward passes before the allreduce. compression: syncbench.torch.Compression.none or .fp16.
    gradient_predivide_factor f: the average split as a 1/f scale before the sum and f/size after it.
    Every worker must produce its gradients in the same order (the same model and graph): the engine reduces
    collectives in call order (add ",check" to the engine to have differing sizes refused)."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("DistributedOptimizer wraps a torch.optim.Optimizer, got %s" % type(optimizer).__name__)
    if not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
        raise ValueError("backward_passes_per_step must be an int >= 1, got %r" % (backward_passes_per_step,))
    if gradient_predivide_factor <= 0:
        raise ValueError("gradient_predivide_factor must be > 0, got %r" % (gradient_predivide_factor,))
    opc = _core.op_code(op)
    _lib.ms(timeout)
    _core.job()  # init() first: sizes and ranks are needed now
    base = type(optimizer)
    cls = type(base.__name__, (base,), {k: v for k, v in _Distributed.__dict__.items()
                                        if k not in ("__dict__", "__weakref__")})
    cls._sb_base = base
    obj = cls.__new__(cls)
    obj.__dict__.update(optimizer.__dict__)  # the same param_groups, state, defaults and hooks
    obj._sb_setup(named_parameters, compression, backward_passes_per_step, opc, gradient_predivide_factor, timeout)
    return obj


class _Distributed:
    def _sb_setup(self, named_parameters, compression, bpps, opc, predivide, timeout):
        from . import Compression
        params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            if named and not (isinstance(named[0], tuple) and len(named[0]) == 2):
                raise ValueError("named_parameters must be (name, parameter) pairs: pass model.named_parameters()")
            names = [n for n, _ in named]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError("named_parameters names %s more than once" % ", ".join(dup))
            self._sb_names = {id(p): n for n, p in named}
            missing = sum(1 for p in params if id(p) not in self._sb_names)
            if missing:
                raise ValueError("named_parameters lacks %d of the optimizer's %d parameters: pass the named "
                                 "parameters of the model the optimizer was built on" % (missing, len(params)))
        else:
            self._sb_names = {id(p): "param.%d" % i for i, p in enumerate(params)}
        size = _core.size()
        self._sb_compression = compression or Compression.none
        self._sb_bpps, self._sb_timeout = bpps, timeout
        if opc == _lib.AVG and predivide != 1.0:
            self._sb_op, self._sb_pre, self._sb_post = _lib.SUM, 1.0 / predivide, predivide / size
        else:
            self._sb_op, self._sb_pre, self._sb_post = opc, 1.0, 1.0
        self._sb_params = [p for p in params if p.requires_grad]
        self._sb_passes = {id(p): 0 for p in self._sb_params}
        self._sb_handles = {}  # id(param) -> Handle, in submission order
        self._sb_skip = False
        self._sb_hooks = [p.register_post_accumulate_grad_hook(self._sb_ready) for p in self._sb_params]

    def _sb_submit(self, p):
        from . import _submit
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        self._sb_handles[id(p)] = _submit(p.grad, p.grad, self._sb_op, self._sb_compression, self._sb_pre,
                                          self._sb_post, self._sb_timeout,
                                          "DistributedOptimizer (%s)" % self._sb_names[id(p)])

    def _sb_ready(self, p):
        k = id(p)
        if k in self._sb_handles:
            raise RuntimeError("the gradient of %s was computed more than backward_passes_per_step (%d) times "
                               "before step() or synchronize()" % (self._sb_names[k], self._sb_bpps))
        self._sb_passes[k] += 1
        if self._sb_passes[k] == self._sb_bpps:
            self._sb_submit(p)

    def synchronize(self):
        """Wait for every gradient's allreduce (submitting, in parameter order, those autograd did not reach:
        a zero gradient where there is none), so the gradients are the workers' average."""
        for p in self._sb_params:
            if id(p) not in self._sb_handles:
                self._sb_submit(p)
        handles, self._sb_handles = self._sb_handles, {}
        for k in self._sb_passes:
            self._sb_passes[k] = 0
        err = None
        for h in handles.values():  # wait for all of them, even after one failed: no buffer left in flight
            try:
                h.wait()
            except Exception as e:
                err = err or e
        if err is not None:
            raise err

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() without synchronize(), after the user called it (e.g. to clip the averaged gradients)."""
        self._sb_skip = True
        try:
            yield
        finally:
            self._sb_skip = False

    def step(self, closure=None):
        if not self._sb_skip:
            self.synchronize()
        return self._sb_base.step(self, closure) if closure is not None else self._sb_base.step(self)

    def zero_grad(self, set_to_none=True):
        if self._sb_handles:
            raise RuntimeError("zero_grad() was called after backward() but before step() or synchronize(): the "
                               "gradients' allreduces are still in flight")
        return self._sb_base.zero_grad(self, set_to_none)
