"""test_torch_models.py: peers/torch_models.py end to end, small: the transformer at 2 ranks, every config one
block of 2 steps: a row for each config (ddp0's exposed-time baseline among them), the losses of gloo's DDP, the hook over ring, tree and ps:colocate and
Horovod's API equal (the same weights and batches; float rounding only), the bytes a step the gradients' size,
the summary naming the issue's targets; a bad --configs refused. Skipped, saying why, without torch and
torchvision. Run: SYNCBENCH_LIB=build/libsyncbench.so.0 peers/.venv/bin/python -m unittest discover -s python/tests
-p test_torch_models.py"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "peers", "torch_models.py")

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
    SKIP = None
except ImportError as e:
    SKIP = "torch and torchvision are not importable by %s (%s): `make peers` installs them" % (sys.executable, e)


@unittest.skipIf(SKIP, SKIP)
class TorchModels(unittest.TestCase):
    def test_every_config_trains_alike(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "m.jsonl")
            r = subprocess.run([sys.executable, SCRIPT, "run", "--procs", "2", "--model", "transformer", "--batch", "4",
                                "--steps", "2", "--warmup-steps", "0", "--rounds", "1", "--timeout", "60", "--json",
                                out], capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            rows = [json.loads(x) for x in open(out)]
            by = {x["config"]: x for x in rows}
            self.assertEqual(sorted(by), sorted(["local", "ddp0", "gloo", "ring", "tree", "ps", "hvd"]))
            # ddp0: DDP with a hook that sends nothing; the DDP configs' exposed time beyond it, the others' not
            self.assertEqual(by["ddp0"]["allreduce_bytes_per_step"], 0)
            for c in ("gloo", "ring", "tree", "ps"):
                self.assertAlmostEqual(by[c]["exposed_beyond_ddp_ms"],
                                       by[c]["step_p50_ms"] - by["ddp0"]["step_p50_ms"], places=6, msg=c)
            for c in ("local", "ddp0", "hvd"):
                self.assertIsNone(by[c]["exposed_beyond_ddp_ms"], c)
            for c in ("ring", "tree", "ps", "hvd"):
                self.assertAlmostEqual(by[c]["loss"], by["gloo"]["loss"], places=4, msg=c)
                self.assertLess(abs(by[c]["param_sum_minus_gloo"]), 1e-2, c)
                self.assertEqual(by[c]["allreduce_bytes_per_step"], by["gloo"]["grad_bytes"], c)
            self.assertTrue(all(x["world"] == 2 and x["samples_s"] > 0 for x in rows))
            s = subprocess.run([sys.executable, SCRIPT, "summary", out], capture_output=True, text=True, timeout=60)
            self.assertEqual(s.returncode, 0, s.stderr)
            self.assertIn("transformer  P=2: ring/gloo samples/s", s.stdout)

    def test_bad_configs_refused(self):
        r = subprocess.run([sys.executable, SCRIPT, "run", "--configs", "local,gloo,nccl"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown nccl", r.stderr)


if __name__ == "__main__":
    unittest.main()
