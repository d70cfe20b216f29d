"""test_numpy.py: the syncbench package on numpy arrays, on jobs of local ranks (loopback): every engine at 2
and 3 workers (exact small-integer sums in f32, f16, bf16, avg, async, bit-exact broadcast, barrier), bad
input refused with the right exception, a timeout and a dead peer named, a mismatch caught by "check".
Run: python3 -m unittest discover -s python/tests (SYNCBENCH_LIB may point at the library)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _spawn  # noqa: E402

try:
    import numpy  # noqa: F401
    NUMPY = None
except ImportError as e:
    NUMPY = "numpy is not importable by %s (%s): install python3-numpy (scripts/install-deps does)" % (sys.executable, e)


def _report(out):
    return "\n".join("--- rank %d (exit %s)\n%s" % (r, rc, o[-3000:]) for r, (rc, o) in enumerate(out))


@unittest.skipIf(NUMPY, NUMPY)
class NumpyJobs(unittest.TestCase):
    def job(self, world, scenario, spec, workers=None, timeout=120):
        out = _spawn.run(world, "np_worker.py", [scenario, spec], timeout=timeout,
                         env_extra={"EXPECT_WORKERS": str(workers or world)})
        return out

    def ok(self, world, scenario, spec, workers=None):
        out = self.job(world, scenario, spec, workers)
        self.assertTrue(all(rc == 0 for rc, _ in out), "%s %s on %d ranks:\n%s" % (scenario, spec, world, _report(out)))

    def test_ring(self):
        self.ok(2, "sums", "ring")
        self.ok(3, "sums", "ring:algo=ring")

    def test_tree(self):
        self.ok(2, "sums", "tree")
        self.ok(3, "sums", "tree")

    def test_ps_dedicated(self):
        self.ok(3, "sums", "ps", workers=2)              # 2 workers + the default server
        self.ok(4, "sums", "ps:servers=1", workers=3)

    def test_ps_colocated(self):
        self.ok(2, "sums", "ps:colocate")
        self.ok(3, "sums", "ps:colocate,partition-kb=64")

    def test_checked(self):
        self.ok(3, "sums", "ring:check")
        self.ok(3, "mismatch", "tree:check")

    def test_bad_input(self):
        self.ok(2, "bad_input", "ring")

    def test_bad_engine(self):
        self.ok(1, "bad_engine", "rong")
        self.ok(1, "bad_engine", "ps:colocat")

    def test_timeout_names_the_late_rank(self):
        self.ok(2, "timeout", "ring")
        self.ok(2, "timeout", "tree")

    def test_dead_peer_named(self):
        for spec in ("ring", "tree", "ps:colocate"):
            out = self.job(3, "dead_peer", spec)
            self.assertTrue(all(rc is not None for rc, _ in out), "%s: a rank hung:\n%s" % (spec, _report(out)))
            self.assertEqual(out[2][0], 0, _report(out))
            # both survivors fail cleanly; at least one names the dead rank (the other may name its neighbour,
            # which gave up first)
            self.assertTrue(all(rc in (0, 3) for rc, _ in out[:2]), "%s:\n%s" % (spec, _report(out)))
            self.assertIn(0, [rc for rc, _ in out[:2]], "%s: no survivor named rank 2:\n%s" % (spec, _report(out)))


if __name__ == "__main__":
    unittest.main()
