"""_core.py: the process's one syncbench job (communicator + engine over the C API), the collectives on raw
buffers (pointer, count, dtype) that the numpy and torch front ends share, requests, and a completion
thread that finishes callbacks (DDP's futures) in the order the collectives complete."""
import atexit
import ctypes
import os
import queue
import sys
import threading
import time

from . import _lib
from ._lib import SyncbenchError, check

OPS = {"sum": _lib.SUM, "avg": _lib.AVG, "average": _lib.AVG, "mean": _lib.AVG}


class _Job:
    def __init__(self, comm, eng, spec, timeout_ms):
        self.comm, self.eng, self.spec, self.timeout_ms = comm, eng, spec, timeout_ms
        self.allreduce = _lib.load().sb_allreduce  # bound once: the blocking allreduce's few lookups a call
        self.lock = threading.Lock()
        self.completer = None


_job = None
_job_lock = threading.Lock()


def job():
    """The running job, or SyncbenchError (STATE) when init() was not called."""
    j = _job
    if j is None:
        raise SyncbenchError(_lib.ERR_STATE, "syncbench is not initialised: call syncbench.init() first")
    return j


def initialized():
    return _job is not None


def init(engine=None, timeout=None, rank=None, world=None, init_method=None, transport=None, serve=True):
    """Join the job and create the engine (see syncbench.init). Idempotent for the same engine."""
    global _job
    lib = _lib.load()
    spec = engine or os.environ.get("SYNCBENCH_ENGINE") or "ring"
    if not isinstance(spec, str):
        raise TypeError("engine must be a string such as 'ring', 'tree', 'ps:servers=2', got %r" % (spec,))
    with _job_lock:
        if _job is not None:
            if _job.spec != spec:
                raise SyncbenchError(_lib.ERR_STATE, "syncbench is already initialised with engine %r (asked: %r): "
                                     "call shutdown() first" % (_job.spec, spec))
            return
        if (rank is None) != (world is None):
            raise ValueError("give both rank and world, or neither (then torchrun's RANK and WORLD_SIZE)")
        if world is not None and not (isinstance(world, int) and isinstance(rank, int) and 0 <= rank < world):
            raise ValueError("rank %r is not in [0, world %r)" % (rank, world))
        tmo = _lib.ms(timeout)
        cfg = _lib.CommCfg(rank if rank is not None else -1, world if world is not None else -1,
                           init_method.encode() if init_method else None, tmo,
                           transport.encode() if transport else None)
        comm = ctypes.c_void_p()
        check(lib.sb_comm_new(ctypes.byref(comm), ctypes.byref(cfg)), "syncbench.init: joining the job")
        eng = ctypes.c_void_p()
        rc = lib.sb_engine_new(ctypes.byref(eng), comm, spec.encode(), tmo)
        if rc < 0:
            err = _lib.error(rc, "syncbench.init: engine %r" % spec)
            lib.sb_comm_free(ctypes.byref(comm))
            raise err
        _job = _Job(comm, eng, spec, tmo)
    if lib.sb_engine_is_server(eng) and serve:
        # a dedicated parameter server: serve until every worker is done, then end this process
        rc = lib.sb_engine_serve(eng)
        err = _lib.error(rc, "syncbench: serving") if rc < 0 else None
        shutdown()
        if err:
            raise err
        sys.exit(0)


def shutdown():
    """Leave the job (waits for collectives in flight, bounded). Safe to call twice."""
    global _job
    with _job_lock:
        j, _job = _job, None
    if j is None:
        return
    if j.completer is not None:
        j.completer.stop()
    lib = _lib.load()
    lib.sb_engine_free(ctypes.byref(j.eng))
    lib.sb_comm_free(ctypes.byref(j.comm))


atexit.register(shutdown)


def rank():
    return check(_lib.load().sb_engine_rank(job().eng))


def size():
    return check(_lib.load().sb_engine_size(job().eng))


def local_rank():
    return check(_lib.load().sb_comm_local_rank(job().comm))


def local_size():
    return check(_lib.load().sb_comm_local_world(job().comm))


def solo():
    """True in a world of one (one worker, no server rank): every collective is the identity."""
    return _lib.load().sb_comm_world(job().comm) == 1


def is_server():
    return bool(_lib.load().sb_engine_is_server(job().eng))


def engine():
    return job().spec


def op_code(op):
    code = OPS.get(op) if isinstance(op, str) else None  # the common spellings at once
    if code is not None:
        return code
    try:
        return OPS[op.lower()] if isinstance(op, str) else {_lib.SUM: _lib.SUM, _lib.AVG: _lib.AVG}[op]
    except (KeyError, AttributeError):
        raise ValueError("op must be 'sum' or 'avg', got %r" % (op,)) from None


def allreduce_ptr(ptr, count, dtype, op, timeout):
    # few lookups a call: after a collective has streamed its buffers through the caches, each one costs a miss
    j = _job or job()
    rc = j.allreduce(j.eng, ptr, count, dtype, op, _lib.ms(timeout))
    if rc < 0:
        raise _lib.error(rc, "allreduce")


def broadcast_ptr(ptr, nbytes, root, timeout):
    if not isinstance(root, int):
        raise TypeError("root must be an int rank, got %r" % (root,))
    check(_lib.load().sb_broadcast(job().eng, ptr, nbytes, root, _lib.ms(timeout)), "broadcast")


def barrier(timeout=None):
    check(_lib.load().sb_barrier(job().eng, _lib.ms(timeout)), "barrier")


class Request:
    """An allreduce in flight: wait() returns when it is done (raising its error), keeping the buffer's owner
    alive meanwhile."""

    def __init__(self, req, keep, result):
        self._req, self._keep, self._result = req, keep, result
        self._done, self._error = False, None

    def test(self):
        return self._done or bool(_lib.load().sb_test(self._req))

    def wait(self, timeout=None):
        if not self._done:
            lib = _lib.load()
            rc = lib.sb_wait(self._req, _lib.ms(timeout))
            if not lib.sb_test(self._req):
                raise _lib.error(rc, "wait")  # still pending: may be waited on again
            lib.sb_req_free(ctypes.byref(self._req))
            self._done, self._keep, self._req = True, None, None
            if rc < 0:
                self._error = _lib.error(rc, "allreduce")
        if self._error is not None:
            raise self._error
        return self._result

    def __del__(self):
        # a request dropped unwaited: its buffer goes with it, so wait for it first (bounded)
        if getattr(self, "_req", None) is not None and _lib._lib is not None:
            try:
                _lib._lib.sb_wait(self._req, 0)
                _lib._lib.sb_req_free(ctypes.byref(self._req))
            except Exception:
                pass


def allreduce_async_ptr(ptr, count, dtype, op, timeout, keep, result=None):
    req = ctypes.c_void_p()
    j = job()
    check(_lib.load().sb_allreduce_async(j.eng, ptr, count, dtype, op, _lib.ms(timeout), ctypes.byref(req)),
          "allreduce_async")
    q = Request(req, keep, result)
    q.timeout_ms = _lib.ms(timeout) or j.timeout_ms or 300000  # what bounds the collective once it starts
    return q


class _Completer:
    """One thread that waits on requests in submission order and runs each one's callback (ok, error)."""

    def __init__(self):
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._run, name="syncbench-completer", daemon=True)
        self.t.start()

    def add(self, request, on_done):
        self.q.put((request, on_done))

    def _run(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            request, on_done = item
            # the collective is bounded by its own timeout once it starts, and starts when the one before it
            # (waited on here just before) is done: twice that and a margin is a library that stopped answering
            bound = time.monotonic() + 2 * request.timeout_ms / 1000.0 + 10
            err = None
            while True:
                try:
                    request.wait(timeout=1.0)
                    break
                except SyncbenchError as e:
                    if request.test():  # done, with the collective's own error (a dead rank, its timeout)
                        err = e
                        break
                    if time.monotonic() > bound:
                        err = _lib.SyncbenchTimeout(_lib.ERR_TIMEOUT, "allreduce: still pending %.0f s after it "
                                                    "was queued" % (2 * request.timeout_ms / 1000.0 + 10))
                        break
                except BaseException as e:
                    err = e
                    break
            try:
                on_done(err)  # a DDP future's result or exception
            except BaseException as e:
                print("syncbench: a completion callback failed: %r" % (e,), file=sys.stderr)

    def stop(self):
        self.q.put(None)
        self.t.join(timeout=60)


def completer():
    j = job()
    with j.lock:
        if j.completer is None:
            j.completer = _Completer()
        return j.completer
