"""test_torch.py: syncbench.torch on jobs of local ranks (loopback, started as torchrun would by _spawn.py): DDP with
the syncbench comm hook on ring, tree and ps:colocate at 2 to 4 ranks (every bucket's gradient equal to gloo's
allreduce and to the local mean of the global batch, parameters bit-identical across ranks after the steps; in a
world of one every bucket's future done when the hook returns it, the gradients untouched), Horovod's API
(broadcasts, DistributedOptimizer against the local mean, allreduce's ops, dtypes, async handles and gradient; a
dedicated PS too), bad input refused, and a rank that dies named by the others' backward within the hook's timeout.
Skipped, saying why, when torch is not importable by this python.
Run: SYNCBENCH_LIB=build/libsyncbench.so.0 peers/.venv/bin/python -m unittest discover -s python/tests -p test_torch.py"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _spawn  # noqa: E402

try:
    import torch  # noqa: F401
    import torch.distributed as dist
    TORCH = None if dist.is_available() and dist.is_gloo_available() else "torch here has no gloo backend"
except ImportError as e:
    TORCH = ("torch is not importable by %s (%s): `make peers` installs it into peers/.venv "
             "(SYNCBENCH_TORCH_PYTHON names another python)" % (sys.executable, e))


def _report(out):
    return "\n".join("--- rank %d (exit %s)\n%s" % (r, rc, o[-3000:]) for r, (rc, o) in enumerate(out))


@unittest.skipIf(TORCH, TORCH)
class TorchJobs(unittest.TestCase):
    def job(self, world, scenario, spec, workers=None, timeout=180):
        return _spawn.run(world, "torch_worker.py", [scenario, spec], timeout=timeout,
                          env_extra={"EXPECT_WORKERS": str(workers or world)})

    def ok(self, world, scenario, spec, workers=None):
        out = self.job(world, scenario, spec, workers)
        self.assertTrue(all(rc == 0 for rc, _ in out), "%s %s on %d ranks:\n%s" % (scenario, spec, world, _report(out)))

    def test_ddp_hook_ring(self):
        self.ok(2, "ddp", "ring")
        self.ok(4, "ddp", "ring")

    def test_ddp_hook_world_of_one(self):
        for spec in ("ring", "tree", "ps:colocate"):
            self.ok(1, "ddp_solo", spec)

    def test_ddp_hook_tree(self):
        self.ok(3, "ddp", "tree")

    def test_ddp_hook_ps_colocated(self):
        self.ok(2, "ddp", "ps:colocate")

    def test_horovod_api(self):
        self.ok(2, "horovod", "ring")
        self.ok(3, "horovod", "ps", workers=2)  # 2 workers + the dedicated server

    def test_bad_input(self):
        self.ok(2, "bad_input", "ring")

    def test_dead_rank_named_in_backward(self):
        for spec in ("ring", "tree"):
            out = self.job(3, "dead_rank", spec)
            self.assertTrue(all(rc is not None for rc, _ in out), "%s: a rank hung:\n%s" % (spec, _report(out)))
            # both survivors fail within the timeout; at least one names the dead rank (the other may name its
            # neighbour, which gave up first)
            self.assertTrue(all(rc in (0, 3) for rc, _ in out[:2]), "%s:\n%s" % (spec, _report(out)))
            self.assertIn(0, [rc for rc, _ in out[:2]], "%s: no survivor named rank 2:\n%s" % (spec, _report(out)))

    def test_examples(self):
        """examples/ddp_train.py over gloo and over the hook print the same losses; the Horovod example runs."""
        ex = os.path.join(os.path.dirname(_spawn.PKG), "examples")
        losses = {}
        for comm in ("gloo", "syncbench"):
            out = _spawn.run(2, os.path.join(ex, "ddp_train.py"), ["--comm", comm, "--engine", "tree", "--epochs", "2",
                                                                   "--samples", "512"], timeout=180)
            self.assertTrue(all(rc == 0 for rc, _ in out), "ddp_train.py --comm %s:\n%s" % (comm, _report(out)))
            losses[comm] = [float(line.split()[3]) for line in out[0][1].splitlines() if line.startswith("epoch ")]
        self.assertEqual(len(losses["gloo"]), 2, _report(out))
        for lg, ls in zip(losses["gloo"], losses["syncbench"]):
            self.assertAlmostEqual(lg, ls, delta=1e-5 * abs(lg) + 1e-6, msg=str(losses))
        out = _spawn.run(2, os.path.join(ex, "horovod_train.py"), ["--engine", "ps:colocate", "--epochs", "1",
                                                                   "--samples", "256"], timeout=180)
        self.assertTrue(all(rc == 0 for rc, _ in out), "horovod_train.py:\n%s" % _report(out))
        self.assertIn("epoch 0 loss", out[0][1], _report(out))


if __name__ == "__main__":
    unittest.main()
