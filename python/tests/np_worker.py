"""np_worker.py: one rank of the numpy tests (test_numpy.py): runs the scenario named by argv[1] with the
engine argv[2] and exits 0 when every check passed (printing what failed otherwise)."""
import os
import sys
import time

import numpy as np

import syncbench

scenario, spec = sys.argv[1], sys.argv[2]
N = 100003


def sums():
    syncbench.init(engine=spec, timeout=30)  # a PS server rank serves here and exits
    r, P = syncbench.rank(), syncbench.size()
    assert P == int(os.environ["EXPECT_WORKERS"]), (P, os.environ["EXPECT_WORKERS"])
    i = np.arange(N)
    x = (r + 1 + i % 7).astype(np.float32)
    assert syncbench.allreduce(x, op="sum") is x
    want = P * (P + 1) / 2 + P * (i % 7)
    assert np.array_equal(x, want.astype(np.float32)), ("f32", x[:8], want[:8])
    h = (r + 1 + i % 5).astype(np.float16)
    syncbench.allreduce(h)
    assert np.array_equal(h, (P * (P + 1) / 2 + P * (i % 5)).astype(np.float16)), ("f16", h[:8])
    b = ((r + 1 + i % 3).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # bf16 bits of small ints
    syncbench.allreduce(b, dtype="bf16")
    got = (b.astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(got, (P * (P + 1) / 2 + P * (i % 3)).astype(np.float32)), ("bf16", got[:8])
    a = np.full(1000, 2.0 * P * (r + 1), np.float32)
    syncbench.allreduce(a, op="avg")
    assert np.allclose(a, P * (P + 1), rtol=1e-6), a[:4]
    reqs = [syncbench.allreduce_async(np.full(5000 + k, float(k + r), np.float32)) for k in range(3)]
    blob = np.frombuffer(bytes((j * 37 + 255) % 256 for j in range(1001)), np.uint8).copy()
    mine = blob.copy() if r == P - 1 else np.zeros_like(blob)
    syncbench.broadcast(mine, root=P - 1)
    assert np.array_equal(mine, blob), "broadcast"
    for k, q in enumerate(reqs):
        y = q.wait(timeout=30)
        assert y.size == 5000 + k and np.all(y == P * k + P * (P - 1) / 2), (k, y[:4])
    syncbench.barrier()
    syncbench.shutdown()


def bad_input():
    syncbench.init(engine=spec, timeout=30)
    checks = [
        (lambda: syncbench.allreduce(np.zeros(4, np.int64)), TypeError, "int64"),
        (lambda: syncbench.allreduce(np.zeros((4, 4), np.float32)[:, 1]), ValueError, "contiguous"),
        (lambda: syncbench.allreduce([1.0, 2.0]), TypeError, "numpy array"),
        (lambda: syncbench.allreduce(np.zeros(4, np.float32), op="max"), ValueError, "op"),
        (lambda: syncbench.broadcast(np.zeros(4, np.float32), root=99), syncbench.InvalidError, "root 99"),
        (lambda: syncbench.allreduce(np.zeros(4, np.float32), timeout=-1), ValueError, "timeout"),
    ]
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    checks.append((lambda: syncbench.allreduce(ro), ValueError, "read-only"))
    for f, exc, word in checks:
        try:
            f()
        except exc as e:
            assert word in str(e), (word, str(e))
        else:
            raise AssertionError("no %s for %s" % (exc.__name__, word))
    x = np.ones(10, np.float32)  # the engine still works after refused input
    syncbench.allreduce(x)
    assert np.all(x == syncbench.size())
    syncbench.shutdown()


def bad_engine():
    try:
        syncbench.init(engine=spec, timeout=10)
    except syncbench.InvalidError as e:
        print("refused:", e)
        assert "ring, tree, ps" in str(e) or "options" in str(e), str(e)
        return
    raise AssertionError("engine %r accepted" % spec)


def timeout():
    syncbench.init(engine=spec, timeout=5)
    if syncbench.rank() == 1:
        time.sleep(4)
    else:
        t = time.monotonic()
        try:
            syncbench.allreduce(np.zeros(1000, np.float32), timeout=1)
        except syncbench.SyncbenchTimeout as e:
            took = time.monotonic() - t
            assert took < 3, took
            assert "rank 1" in str(e), str(e)
            print("timed out as asked:", e)
        else:
            raise AssertionError("no timeout")
    syncbench.shutdown()


def dead_peer():
    syncbench.init(engine=spec, timeout=5)
    r, P = syncbench.rank(), syncbench.size()
    x = np.zeros(100000, np.float32)
    syncbench.allreduce(x)
    syncbench.barrier()
    if r == P - 1:
        os._exit(0)  # gone without a word
    try:
        for _ in range(3):
            syncbench.allreduce(x, timeout=4)
    except (syncbench.PeerError, syncbench.SyncbenchTimeout) as e:
        print("peer failure:", e)
        named = ("rank %d" % (P - 1)) in str(e)
    else:
        raise AssertionError("no error with a dead peer")
    try:
        syncbench.allreduce(x, timeout=4)
    except syncbench.SyncbenchError as e:
        assert e.code == -20 and "earlier" in str(e), str(e)
    syncbench.shutdown()
    sys.exit(0 if named else 3)


def mismatch():
    syncbench.init(engine=spec, timeout=10)
    r = syncbench.rank()
    try:
        syncbench.allreduce(np.zeros(10 + (r == 1), np.float32))
    except syncbench.MismatchError as e:
        assert "rank 1" in str(e) and "11" in str(e), str(e)
    else:
        raise AssertionError("no mismatch error")
    x = np.ones(16, np.float32)
    syncbench.allreduce(x)
    assert np.all(x == syncbench.size())
    syncbench.shutdown()


{"sums": sums, "bad_input": bad_input, "bad_engine": bad_engine, "timeout": timeout, "dead_peer": dead_peer,
 "mismatch": mismatch}[scenario]()
