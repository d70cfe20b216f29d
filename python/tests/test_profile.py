"""test_profile.py: syncbench-profile (syncbench/profile.py): FLOPs of small models against hand-computed values
(a two-branch block whose siblings read one input, counted once each; a module's own matmul; a module without
tensors), ResNet-50 against workloads/resnet50.tsv (a ResNet-50 defined here, the standard architecture with
torchvision's names; and torchvision's own when it is importable) and transformers' BERT-base (when importable)
against workloads/bert-base.tsv: the same tensors in the same order, parameter
totals exact, FLOPs within 2%; the command line end to end, and `harness model --model FILE.tsv` naming the model
from the header; bad input refused with a message. Skipped, saying why, when torch is not importable.
Run: SYNCBENCH_LIB=build/libsyncbench.so.0 peers/.venv/bin/python -m unittest discover -s python/tests -p test_profile.py"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.path.dirname(PKG)
sys.path.insert(0, PKG)

try:
    import torch
    import torch.nn as nn
    TORCH = None
except ImportError as e:
    TORCH = ("torch is not importable by %s (%s): `make peers` installs it into peers/.venv "
             "(SYNCBENCH_TORCH_PYTHON names another python)" % (sys.executable, e))
try:
    import torchvision  # noqa: F401
    TV = None
except ImportError as e:
    TV = "torchvision is not importable by %s (%s): `make peers` installs it" % (sys.executable, e)

from syncbench import profile  # noqa: E402  (imports torch only when it counts)


def read_tsv(path):
    with open(path) as f:
        lines = f.read().splitlines()
    rows = [ln.split("\t") for ln in lines if ln and not ln.startswith("#")]
    return lines[0], [(r[0], int(r[1]), float(r[2]), float(r[3])) for r in rows]


if not TORCH:
    class Bottleneck(nn.Module):
        """ResNet-50's block (1x1, 3x3, 1x1 convolutions; stride on the 3x3), torchvision's names and order."""

        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + (self.downsample(x) if self.downsample is not None else x))

    class ResNet50(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            cin = 64
            for i, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
                layer = []
                for b in range(blocks):
                    layer.append(Bottleneck(cin, width, stride if b == 0 else 1))
                    cin = width * 4
                setattr(self, "layer%d" % (i + 1), nn.Sequential(*layer))
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(2048, classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    class TwoBranch(nn.Module):
        """pre, then branches a and b both reading pre's output (DDP-style sibling branches)."""

        def __init__(self):
            super().__init__()
            self.pre = nn.Linear(8, 8)
            self.a = nn.Linear(8, 8)
            self.b = nn.Linear(8, 8)

        def forward(self, x):
            h = self.pre(x)
            return self.a(h) + self.b(h)

    class Gram(nn.Module):
        """no tensors of its own: h @ h^T (lifted to its parent's first tensor)."""

        def forward(self, h):
            return h @ h.transpose(-1, -2)

    class OwnMatmul(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 6)
            self.gram = Gram()

        def forward(self, x):
            h = self.proj(x)                      # (B, 4, 6)
            s = h.transpose(-1, -2) @ h           # own op: (6x4)@(4x6)
            return self.gram(h).sum(-1) + s.sum(-1)[..., :4]


def make_resnet50():
    return ResNet50()


@unittest.skipIf(TORCH, TORCH)
class Counting(unittest.TestCase):
    def test_mlp_by_hand(self):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        p = profile.count(m, (8,), batch=2)
        # per sample: 2 FLOPs a multiply-add; backward: the weight's gradient, and the input's where it needs one
        # (not the first layer's: the data needs none)
        self.assertEqual(p["rows"], [("2.bias", 4, 128, 256), ("2.weight", 64, 0, 0),
                                     ("0.bias", 16, 256, 256), ("0.weight", 128, 0, 0)])

    def test_sibling_branches_counted_once_each(self):
        p = profile.count(TwoBranch(), (8,), batch=3)
        rows = {r[0]: r[2:] for r in p["rows"]}
        self.assertEqual([r[0] for r in p["rows"]], ["b.bias", "b.weight", "a.bias", "a.weight", "pre.bias",
                                                     "pre.weight"])
        self.assertEqual(rows["b.bias"], (128, 256))
        self.assertEqual(rows["a.bias"], (128, 256))
        self.assertEqual(rows["pre.bias"], (128, 128))
        self.assertFalse(p["notes"], p["notes"])

    def test_own_ops_and_a_module_without_tensors(self):
        p = profile.count(OwnMatmul(), (4, 8), batch=2)
        # proj: 4 rows x 8 x 6; own: 6x4 @ 4x6; gram: 4x6 @ 6x4; both go to proj.bias (the first tensor). Backward:
        # proj's weight gradient only (its input, the data, needs none); both operands of the two matmuls
        proj, own, gram = 2 * 4 * 8 * 6, 2 * 6 * 4 * 6, 2 * 4 * 6 * 4
        self.assertEqual(p["rows"][0], ("proj.bias", 6, proj + own + gram, proj + 2 * own + 2 * gram))
        self.assertTrue(any("nearest ancestor" in n for n in p["notes"]), p["notes"])

    def test_per_sample_independent_of_batch(self):
        a = profile.count(TwoBranch(), (8,), batch=1)["rows"]
        b = profile.count(TwoBranch(), (8,), batch=5)["rows"]
        self.assertEqual(a, b)


@unittest.skipIf(TORCH, TORCH)
class ResNet50Check(unittest.TestCase):
    """issue 34 §4: profiling ResNet-50 reproduces workloads/resnet50.tsv's tensors and totals, FLOPs within 2%."""

    def check(self, path):
        head, got = read_tsv(path)
        _, want = read_tsv(os.path.join(ROOT, "workloads", "resnet50.tsv"))
        self.assertEqual(len(got), len(want), "tensor count")
        self.assertEqual(sum(r[1] for r in got), sum(r[1] for r in want), "parameter count")
        self.assertEqual([r[:2] for r in got], [r[:2] for r in want], "tensors, element counts and backward order")
        for col, what in ((2, "forward"), (3, "backward")):
            g, w = sum(r[col] for r in got), sum(r[col] for r in want)
            self.assertLess(abs(g / w - 1), 0.02, "%s FLOPs %.4g against the profile's %.4g" % (what, g, w))
        self.assertTrue(head.startswith("# resnet50: 161 trainable tensors, 25557032 parameters;"), head)

    def run_cli(self, model, out):
        env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
        r = subprocess.run([sys.executable, "-m", "syncbench.profile", model, "--input", "3x224x224", "--name",
                            "resnet50", "-o", out], env=env, cwd=HERE, capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stderr

    def test_resnet50_defined_here(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r50.tsv")
            said = self.run_cli("test_profile:make_resnet50", out)
            self.check(out)
            self.assertIn("161 trainable tensors, 25557032 parameters", said)
            self.assertIn("convolution", said)

    @unittest.skipIf(TV, TV)
    def test_torchvision_resnet50(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r50.tsv")
            self.run_cli("resnet50", out)
            self.check(out)
            with open(out) as f:
                self.assertIn("source torchvision.models.resnet50, input 3x224x224", f.readline())


try:
    import transformers  # noqa: F401
    HF = None
except ImportError as e:
    HF = "transformers is not importable by %s (%s): `make peers` installs it into peers/.venv" % (sys.executable, e)


@unittest.skipIf(TORCH or HF, TORCH or HF)
class BertCheck(unittest.TestCase):
    def test_bert_base_matches_the_profile(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "bert.tsv")
            r = subprocess.run([sys.executable, "-m", "syncbench.profile", "transformers:BertForMaskedLM", "--input",
                                "128:int", "--name", "bert-base", "-o", out], capture_output=True, text=True,
                               timeout=600, env=dict(os.environ, PYTHONPATH=PKG))
            self.assertEqual(r.returncode, 0, r.stderr)
            _, got = read_tsv(out)
            _, want = read_tsv(os.path.join(ROOT, "workloads", "bert-base.tsv"))
            self.assertEqual([x[:2] for x in got], [x[:2] for x in want])
            for col in (2, 3):
                g, w = sum(x[col] for x in got), sum(x[col] for x in want)
                self.assertLess(abs(g / w - 1), 0.02, "column %d: %.4g against %.4g" % (col, g, w))


@unittest.skipIf(TORCH, TORCH)
class CommandLine(unittest.TestCase):
    def cli(self, *args):
        env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
        return subprocess.run([sys.executable, "-m", "syncbench.profile"] + list(args), env=env, cwd=HERE,
                              capture_output=True, text=True, timeout=300)

    def test_harness_profile_then_model_reads_the_name_from_the_header(self):
        lib = os.environ.get("SYNCBENCH_LIB")
        harness = os.path.join(os.path.dirname(lib), "harness") if lib else None
        if not harness or not os.access(harness, os.X_OK):
            self.skipTest("no harness beside SYNCBENCH_LIB (%s): build it (make)" % lib)
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "some-file-name.tsv")
            # `harness profile` runs syncbench-profile with the python it is told of
            r = subprocess.run([harness, "profile", "test_profile:TwoBranch", "--input", "8", "--name", "two-branch",
                                "-o", out], cwd=HERE, capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, SYNCBENCH_TORCH_PYTHON=sys.executable))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("6 trainable tensors, 216 parameters", r.stderr)
            h = subprocess.run([harness, "model", "--model", out, "--nodes", "2", "--gpus-per-node", "2"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(h.returncode, 0, h.stdout + h.stderr)
            self.assertIn("two-branch", h.stdout)
            self.assertNotIn("some-file-name", h.stdout)

    def test_bad_input_is_refused_with_a_message(self):
        cases = [
            (["nosuchmodule_x:make", "--input", "8"], "importing nosuchmodule_x failed"),
            (["test_profile:read_tsv", "--input", "8"], "raised TypeError"),
            (["test_profile:TORCH", "--input", "8"], "no callable 'TORCH'"),
            (["test_profile:Gram", "--input", "8"], "no trainable parameters"),
            (["test_profile:TwoBranch", "--input", "3x0"], "every size must be >= 1"),
            (["test_profile:TwoBranch", "--input", "3xq"], "a shape is sizes joined by x"),
            (["test_profile:TwoBranch", "--input", "5"], "forward on input 5 (batch 2) raised"),
            (["test_profile:TwoBranch", "--input", "8", "--name", "a b"], "--name 'a b'"),
            (["test_profile:TwoBranch", "--input", "8", "-o", "x.txt"], "ending in .tsv"),
            (["test_profile:TwoBranch", "--input", "8:int"], "needs --int-high"),
        ]
        if not TV:
            cases.append((["resnet5000", "--input", "8"], "torchvision has no such model"))
        for args, want in cases:
            r = self.cli(*args)
            self.assertEqual(r.returncode, 2, "%s: %s" % (args, r.stderr))
            self.assertIn(want, r.stderr, args)
            self.assertNotIn("Traceback", r.stderr, args)


if __name__ == "__main__":
    unittest.main()
