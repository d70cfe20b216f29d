"""syncbench: syncbench's ring, tree and parameter-server engines from Python (docs/api.md; PyTorch: docs/torch.md), over
libsyncbench.so through ctypes. The top level works on numpy arrays in place, with Horovod's names:

    import numpy as np, syncbench
    syncbench.init(engine="ring")          # from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT)
    x = np.ones(1 << 20, np.float32)
    syncbench.allreduce(x, op="sum")       # in place, returns x
    syncbench.broadcast(x, root=0)
    syncbench.shutdown()

Engines: "ring", "tree", "ps" (one dedicated server: start one process more), "ps:servers=2",
"ps:colocate", "ps:colocate,mode=ssp:2", "...,check" (verify count/dtype/op across workers). PyTorch:
syncbench.torch (a DDP comm hook and Horovod's API)."""
from . import _core, _lib
from ._core import barrier, engine, init, initialized, is_server, local_rank, local_size, rank, shutdown, size
from ._lib import InvalidError, MismatchError, PeerError, SyncbenchError, SyncbenchTimeout

__all__ = ["init", "shutdown", "rank", "size", "local_rank", "local_size", "allreduce", "allreduce_async",
           "broadcast", "barrier", "version", "SyncbenchError", "SyncbenchTimeout", "PeerError",
           "MismatchError", "InvalidError", "is_server", "engine", "initialized"]
__version__ = "0.1.0"


def version():
    """The loaded library's version string ("0.1.0 (git sha)")."""
    return _lib.load().syncbench_version_string().decode()


_np = None
_np_codes = {}


def _np_buffer(array, what, dtype=None):
    """(pointer, count, dtype code) of a numpy array we may reduce in place; TypeError/ValueError otherwise."""
    global _np
    np = _np
    if np is not None and dtype is None and type(array) is np.ndarray:
        # the common case in few lookups: a float32/float16 array whose interface says contiguous and writable
        code = _np_codes.get(array.dtype)
        if code is not None:
            ai = array.__array_interface__
            if ai["strides"] is None and not ai["data"][1]:
                return ai["data"][0], array.size, code
    try:
        import numpy as np
    except ImportError:
        raise ImportError("syncbench.%s needs numpy (pip install numpy; Debian: python3-numpy)" % what) from None
    if _np is None:
        _np_codes.update({np.dtype(np.float32): _lib.F32, np.dtype(np.float16): _lib.F16})
        _np = np
    if not isinstance(array, np.ndarray):
        raise TypeError("syncbench.%s takes a numpy array (in place); got %s (for torch tensors use syncbench.torch)"
                        % (what, type(array).__name__))
    if dtype in ("bf16", "bfloat16"):
        if array.dtype != np.uint16:
            raise TypeError("syncbench.%s: dtype='bf16' wants the bfloat16 bits in a uint16 array, got %s"
                            % (what, array.dtype))
        code = _lib.BF16
    elif dtype is not None:
        raise ValueError("syncbench.%s: dtype may only be 'bf16' (numpy has no bfloat16), got %r" % (what, dtype))
    elif array.dtype == np.float32:
        code = _lib.F32
    elif array.dtype == np.float16:
        code = _lib.F16
    else:
        raise TypeError("syncbench.%s reduces float32 and float16 arrays (and bfloat16 bits in uint16 with "
                        "dtype='bf16'), not %s" % (what, array.dtype))
    if not array.flags.c_contiguous:
        raise ValueError("syncbench.%s works in place on contiguous arrays: pass np.ascontiguousarray(a) and use "
                         "the result" % what)
    if not array.flags.writeable:
        raise ValueError("syncbench.%s reduces in place: the array is read-only" % what)
    return array.ctypes.data, array.size, code


def allreduce(array, op="sum", timeout=None, dtype=None):
    """Reduce array over every worker in place (op "sum" or "avg") and return it. timeout in seconds."""
    ptr, n, code = _np_buffer(array, "allreduce", dtype)
    _core.allreduce_ptr(ptr, n, code, _core.op_code(op), timeout)
    return array


def allreduce_async(array, op="sum", timeout=None, dtype=None):
    """Start an in-place allreduce; returns a request whose wait() returns the array when it is done. The
    array must not be touched until then."""
    ptr, n, code = _np_buffer(array, "allreduce_async", dtype)
    from . import _core
    return _core.allreduce_async_ptr(ptr, n, code, _core.op_code(op), timeout, array, array)


def broadcast(array, root=0, timeout=None):
    """root's array ends up in array on every worker, bit for bit (any dtype, contiguous); returns it."""
    try:
        import numpy as np
    except ImportError:
        raise ImportError("syncbench.broadcast needs numpy") from None
    if not isinstance(array, np.ndarray):
        raise TypeError("syncbench.broadcast takes a numpy array, got %s" % type(array).__name__)
    if not array.flags.c_contiguous or not array.flags.writeable:
        raise ValueError("syncbench.broadcast works in place on a contiguous, writeable array")
    from . import _core
    _core.broadcast_ptr(array.ctypes.data, array.nbytes, root, timeout)
    return array
