"""hook.py: a DistributedDataParallel communication hook that allreduces each of DDP's gradient buckets through
a syncbench engine (ring, tree, ps:colocate): the bucket is submitted as an asynchronous allreduce and the
torch.futures.Future it returns is completed by syncbench's completion thread when the engine is done, so the
autograd thread never waits on it (DDP waits on its futures at the end of backward, as with gloo). In a world
of one the bucket is its own average and sum: the hook returns it at once in a done future, with no call into
the library, no copy and no completion thread."""
import torch
import torch.distributed as dist

from .. import _core, _lib
from ._tensor import check_tensor


def allreduce_hook(engine=None, op="avg", timeout=None, **init_kwargs):
    """The hook for model.register_comm_hook(None, allreduce_hook("ring")): DDP's buckets go through engine
    (a spec as in syncbench.init: "ring", "tree", "ps:colocate", "...,check"). op "avg" (DDP's default
    semantics) or "sum"; timeout in seconds bounds each bucket's allreduce (default: the job's). The job is
    joined on the first bucket (from torchrun's environment, or init_kwargs such as rank=, world=,
    init_method=) unless syncbench.init / syncbench.torch.init ran before. A failed bucket (a dead rank, a
    timeout) raises in the training loop's backward with the library's message, which names the rank.
    The hook counts what DDP handed it: hook.buckets, hook.bytes (both since it was made)."""
    opc = _core.op_code(op)
    _lib.ms(timeout)  # a bad timeout is refused now, not in the first backward
    checked = []  # [solo] once the job is joined and checked

    def syncbench_allreduce_hook(state, bucket):
        if not checked:
            if not _core.initialized():
                _core.init(engine=engine, timeout=timeout, **init_kwargs)
            if engine is not None and _core.engine() != engine:
                raise _lib.SyncbenchError(_lib.ERR_STATE, "syncbench.torch.allreduce_hook(%r): the job already runs "
                                          "engine %r" % (engine, _core.engine()))
            if dist.is_available() and dist.is_initialized() and dist.get_world_size() != _core.size():
                raise ValueError("syncbench.torch.allreduce_hook: DDP's process group has %d ranks but the engine "
                                 "%r has %d workers (a dedicated PS server cannot be a DDP rank: use "
                                 "'ps:colocate' under DDP)" % (dist.get_world_size(), _core.engine(), _core.size()))
            checked.append(_core.solo())
        buf = bucket.buffer()
        ptr, n, code = check_tensor(buf, "allreduce_hook")
        if checked[0]:  # a world of one: nothing to send, the bucket is the result
            syncbench_allreduce_hook.buckets += 1
            syncbench_allreduce_hook.bytes += n * buf.element_size()
            fut = torch.futures.Future()
            fut.set_result(buf)
            return fut
        fut = torch.futures.Future()
        req = _core.allreduce_async_ptr(ptr, n, code, opc, timeout, buf, buf)
        syncbench_allreduce_hook.buckets += 1
        syncbench_allreduce_hook.bytes += n * buf.element_size()
        index = bucket.index()

        def done(err):
            if err is None:
                fut.set_result(buf)
            else:
                fut.set_exception(type(err)(getattr(err, "code", _lib.ERR_STATE),
                                            "syncbench %s, DDP bucket %d: %s" % (_core.engine(), index, err)))
        _core.completer().add(req, done)
        # set_exception alone reaches DDP as a result it cannot cast to a tensor; raised in a then() callback
        # it becomes the future's error, which DDP raises in backward with this message
        return fut.then(_unwrap)

    syncbench_allreduce_hook.buckets = 0
    syncbench_allreduce_hook.bytes = 0
    return syncbench_allreduce_hook


def _unwrap(fut):
    return fut.value()  # the bucket, or raises the collective's error
