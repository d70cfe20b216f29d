"""_tensor.py: what syncbench.torch may hand the engines: CPU tensors of float32, float16 or bfloat16, dense,
contiguous, reduced in place through their data pointer (no copies); a clear TypeError / ValueError otherwise."""
import torch

from .. import _lib

DTYPES = {torch.float32: _lib.F32, torch.float16: _lib.F16, torch.bfloat16: _lib.BF16}


def check_tensor(t, what):
    """The tensor's (pointer, element count, dtype code); TypeError / ValueError naming what is wrong."""
    code = DTYPES.get(t.dtype) if isinstance(t, torch.Tensor) else None
    if code is not None and t.is_cpu and t.layout is torch.strided and t.is_contiguous():
        return t.data_ptr(), t.numel(), code  # the common case in few lookups (see _core.allreduce_ptr)
    if not isinstance(t, torch.Tensor):
        raise TypeError("syncbench.torch.%s takes a torch.Tensor, got %s" % (what, type(t).__name__))
    if t.device.type != "cpu":
        raise TypeError("syncbench.torch.%s reduces CPU tensors; this one is on %s (move it with .cpu(), or use "
                        "NCCL for device tensors)" % (what, t.device))
    if t.layout != torch.strided:
        raise TypeError("syncbench.torch.%s reduces dense tensors, not %s" % (what, t.layout))
    code = DTYPES.get(t.dtype)
    if code is None:
        raise TypeError("syncbench.torch.%s reduces float32, float16 and bfloat16 tensors, not %s"
                        % (what, t.dtype))
    if not t.is_contiguous():
        raise ValueError("syncbench.torch.%s works in place on contiguous tensors: pass t.contiguous() and use "
                         "the result" % what)
    return t.data_ptr(), t.numel(), code


def check_bytes(t, what):
    """(pointer, byte count) of a contiguous CPU tensor of any dtype (for the bit-exact broadcast)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("syncbench.torch.%s takes a torch.Tensor, got %s" % (what, type(t).__name__))
    if t.device.type != "cpu":
        raise TypeError("syncbench.torch.%s works on CPU tensors; this one is on %s" % (what, t.device))
    if t.layout != torch.strided or not t.is_contiguous():
        raise ValueError("syncbench.torch.%s works in place on dense, contiguous tensors" % what)
    return t.data_ptr(), t.numel() * t.element_size()
