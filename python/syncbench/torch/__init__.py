"""syncbench.torch: PyTorch training on syncbench's engines (docs/torch.md). Two ways in:

DDP, one line added (DDP still needs its process group, e.g. gloo, for its set-up broadcasts):

    model = DistributedDataParallel(model)
    model.register_comm_hook(None, syncbench.torch.allreduce_hook(engine="ring"))

Horovod's API by its names (`import syncbench.torch as hvd`): init, shutdown, rank, size, local_rank,
local_size, allreduce(_), allreduce_async(_), synchronize, poll, broadcast(_), broadcast_async(_),
broadcast_object, broadcast_parameters, broadcast_optimizer_state, DistributedOptimizer, Average, Sum,
Compression. Tensors: CPU, float32 / float16 / bfloat16 for reductions (any dtype for broadcasts), dense and
contiguous; anything else is a TypeError / ValueError. A failed collective raises SyncbenchTimeout or PeerError
(syncbench's exceptions) naming the rank."""
import pickle

import torch

from .. import _core
from .._lib import InvalidError, MismatchError, PeerError, SyncbenchError, SyncbenchTimeout
from ._tensor import check_bytes, check_tensor
from .hook import allreduce_hook
from .optimizer import DistributedOptimizer

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size", "allreduce",
           "allreduce_", "allreduce_async", "allreduce_async_", "synchronize", "poll", "broadcast", "broadcast_",
           "broadcast_async", "broadcast_async_", "broadcast_object", "broadcast_parameters",
           "broadcast_optimizer_state", "DistributedOptimizer", "allreduce_hook", "Average", "Sum", "Adasum",
           "Compression", "SyncbenchError", "SyncbenchTimeout", "PeerError", "MismatchError", "InvalidError"]

# Horovod's reduction ops
Average, Sum, Adasum = "avg", "sum", "adasum"


def init(engine=None, timeout=None, **kwargs):
    """Join the job (torchrun's or harness's environment, or rank=, world=, init_method=) on engine ("ring",
    "tree", "ps", "ps:colocate", ...; default $SYNCBENCH_ENGINE, else "ring"). On a dedicated PS server rank it
    serves until the workers are done and ends the process. timeout: seconds, each collective's default."""
    _core.init(engine=engine, timeout=timeout, **kwargs)


shutdown, rank, size, local_rank, local_size = _core.shutdown, _core.rank, _core.size, _core.local_rank, _core.local_size
is_initialized = _core.initialized


class Compression:
    """Horovod's gradient compression: Compression.none, or Compression.fp16 (float32 reduced as float16)."""

    class none:
        @staticmethod
        def compress(t):
            return t, None

        @staticmethod
        def decompress(t, ctx):
            return t

    class fp16:
        @staticmethod
        def compress(t):
            return (t.to(torch.float16), t.dtype) if t.dtype in (torch.float32, torch.float64) else (t, None)

        @staticmethod
        def decompress(t, ctx):
            return t.to(ctx) if ctx is not None else t


def _op(average, op):
    if average is None and (op == Sum or op == Average):  # the common case at once
        return _core.OPS[op]
    if average is not None and op is not None:
        raise ValueError("give op or the older average, not both")
    if op is None:
        op = Sum if average is False else Average
    if op == Adasum:
        raise ValueError("syncbench.torch has no Adasum: op may be Average or Sum")
    return _core.op_code(op)


class Handle:
    """An allreduce in flight (Horovod's handle): synchronize(h) waits and returns the output tensor, poll(h)
    says whether it is done."""

    def __init__(self, request, finish):
        self._request, self._finish, self._out = request, finish, None

    def done(self):
        return self._out is not None or self._request is None or self._request.test()

    def wait(self, timeout=None):
        if self._out is None:
            if self._request is not None:
                self._request.wait(timeout)
            self._out = self._finish()
        return self._out


def _submit(tensor, out, op, compression, prescale, postscale, timeout, what):
    """Start the allreduce of tensor into out (out may be tensor: in place); returns its Handle."""
    if not isinstance(out, torch.Tensor):
        raise TypeError("syncbench.torch.%s takes a torch.Tensor, got %s" % (what, type(out).__name__))
    wire, ctx = compression.compress(out)
    if wire.data_ptr() != out.data_ptr() and not wire.is_contiguous():
        wire = wire.contiguous()
    ptr, n, code = check_tensor(wire, what)
    if prescale != 1.0:
        wire.mul_(prescale)
    req = _core.allreduce_async_ptr(ptr, n, code, op, timeout, wire, wire)

    def finish():
        res = compression.decompress(wire, ctx)
        if res.data_ptr() != out.data_ptr():
            out.copy_(res)
        if postscale != 1.0:
            out.mul_(postscale)
        return out
    return Handle(req, finish)


def _tensor_arg(t, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError("syncbench.torch.%s takes a torch.Tensor, got %s" % (what, type(t).__name__))
    return t


class _Allreduce(torch.autograd.Function):
    """allreduce with a gradient: the backward allreduces the gradient with the same op (as Horovod's)."""

    @staticmethod
    def forward(ctx, tensor, op, timeout):
        ctx.op, ctx.timeout = op, timeout
        out = tensor.detach().clone(memory_format=torch.contiguous_format)
        _submit(tensor, out, op, Compression.none, 1.0, 1.0, timeout, "allreduce").wait()
        return out

    @staticmethod
    def backward(ctx, grad):
        g = grad.detach().clone(memory_format=torch.contiguous_format)
        _submit(grad, g, ctx.op, Compression.none, 1.0, 1.0, ctx.timeout, "allreduce (backward)").wait()
        return g, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, timeout=None):
    """A new tensor: tensor reduced over every worker (op Average, Horovod's default, or Sum). Differentiable."""
    _tensor_arg(tensor, "allreduce")
    opc = _op(average, op)
    if (tensor.requires_grad and torch.is_grad_enabled() and compression is Compression.none
            and prescale_factor == 1.0 and postscale_factor == 1.0):
        check_tensor(tensor.detach().contiguous(), "allreduce")
        return _Allreduce.apply(tensor, opc, timeout)
    out = tensor.detach().clone(memory_format=torch.contiguous_format)
    return _submit(tensor, out, opc, compression, prescale_factor, postscale_factor, timeout, "allreduce").wait()


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, timeout=None):
    """tensor reduced in place over every worker; returns it."""
    if prescale_factor == 1.0 and postscale_factor == 1.0:  # the blocking call: on this thread when nothing is queued
        ptr, n, code = check_tensor(tensor, "allreduce_")  # its storage, read through the pointer (no detach needed)
        _core.allreduce_ptr(ptr, n, code, _op(average, op), timeout)
        return tensor
    return allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, timeout).wait()


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    timeout=None):
    """Start allreduce(tensor) into a new tensor; synchronize(handle) returns it."""
    _tensor_arg(tensor, "allreduce_async")
    out = tensor.detach().clone(memory_format=torch.contiguous_format)
    return _submit(tensor, out, _op(average, op), Compression.none, prescale_factor, postscale_factor, timeout,
                   "allreduce_async")


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     timeout=None):
    """Start an in-place allreduce of tensor (leave it alone until synchronize(handle) returns it)."""
    _tensor_arg(tensor, "allreduce_async_")
    return _submit(tensor, tensor.detach() if tensor.requires_grad else tensor, _op(average, op), Compression.none,
                   prescale_factor, postscale_factor, timeout, "allreduce_async_")


def synchronize(handle, timeout=None):
    """Wait for an allreduce_async(_)'s handle; returns its output tensor (raising the collective's error)."""
    if not isinstance(handle, Handle):
        raise TypeError("synchronize takes a handle from allreduce_async(_), got %s" % type(handle).__name__)
    return handle.wait(timeout)


def poll(handle):
    """True when the handle's collective is done (synchronize then returns at once)."""
    return handle.done()


def broadcast_(tensor, root_rank=0, name=None, timeout=None):
    """root_rank's tensor into tensor on every worker, bit for bit (any dtype); returns tensor."""
    _tensor_arg(tensor, "broadcast_")
    t = tensor.detach() if tensor.requires_grad else tensor
    ptr, nbytes = check_bytes(t, "broadcast_")
    _core.broadcast_ptr(ptr, nbytes, root_rank, timeout)
    return tensor


def broadcast(tensor, root_rank=0, name=None, timeout=None):
    """A new tensor holding root_rank's tensor on every worker."""
    _tensor_arg(tensor, "broadcast")
    return broadcast_(tensor.detach().clone(memory_format=torch.contiguous_format), root_rank, name, timeout)


def broadcast_async_(tensor, root_rank=0, name=None, timeout=None):
    """Horovod's spelling; the C API's broadcast is blocking, so this one is done when it returns."""
    broadcast_(tensor, root_rank, name, timeout)
    return Handle(None, lambda: tensor)


def broadcast_async(tensor, root_rank=0, name=None, timeout=None):
    out = broadcast(tensor, root_rank, name, timeout)
    return Handle(None, lambda: out)


def broadcast_object(obj, root_rank=0, name=None, timeout=None):
    """root_rank's obj on every worker (pickled; the job's own ranks only, authenticated by the job secret)."""
    r = rank()
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if r == root_rank else b""
    n = torch.tensor([len(data)], dtype=torch.int64)
    broadcast_(n, root_rank, timeout=timeout)
    buf = torch.zeros(int(n.item()), dtype=torch.uint8)
    if r == root_rank:
        buf.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    if buf.numel():
        broadcast_(buf, root_rank, timeout=timeout)
    return obj if r == root_rank else pickle.loads(buf.numpy().tobytes())


def broadcast_parameters(params, root_rank=0, timeout=None):
    """Every tensor of params (a state_dict, or (name, tensor) pairs such as model.named_parameters()) set to
    root_rank's, in place; a dict goes in sorted key order so every rank walks it alike."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = list(params)
        if items and not (isinstance(items[0], tuple) and len(items[0]) == 2):
            raise ValueError("broadcast_parameters takes a state_dict or (name, tensor) pairs "
                             "(model.named_parameters()), got a list of %s" % type(items[0]).__name__)
    for name, p in items:
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise TypeError("broadcast_parameters: %r is a %s, not a tensor" % (name, type(p).__name__))
        broadcast_(p, root_rank, timeout=timeout)


def broadcast_optimizer_state(optimizer, root_rank=0, timeout=None):
    """The optimizer's state and hyper-parameters set to root_rank's (its state_dict, broadcast as an object)."""
    state = broadcast_object(optimizer.state_dict(), root_rank, timeout=timeout)
    if rank() != root_rank:
        optimizer.load_state_dict(state)
