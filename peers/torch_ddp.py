#!/usr/bin/env python3
"""torch_ddp.py: PyTorch as a peer of syncbench: DistributedDataParallel over gloo training the same
workload as `harness train`, and torch.distributed.all_reduce timed like `harness bench`, writing
JSON lines with the harness's field names (engine "torch-ddp-gloo" for train, "torch-gloo" for bench,
plus "peer": true) so `harness report` shows them beside our engines.

    peers/.venv/bin/python peers/torch_ddp.py train --procs 4 --steps 30 --json results/x.jsonl
    peers/.venv/bin/python peers/torch_ddp.py bench --procs 4 --sizes 4K:64M --json results/x.jsonl

`harness bench|train|run --peers` runs it in the same rounds as our engines (`make peers` installs
torch into peers/.venv). Ranks are local processes (torch.multiprocessing), one torch thread each,
rendezvous on 127.0.0.1.

Identical to `harness train`: the model shapes (MLP 784-1024-1024-10: Linear layers with ReLU between
them, cross-entropy loss, f32), the global batch split over the ranks (DistributedSampler semantics,
shuffled per epoch from --seed), SGD with torch.optim semantics and our --optim values (default
lr 0.05, momentum 0.9), the warm-up steps (not timed) and timed steps, gradient buckets of
--bucket-mb MiB (bucket_cap_mb), averaged gradients, one compute thread per rank, and how results are
summed (samples/s summed over ranks, each rank's timed samples over its timed wall time; step p50 and
p99 of the slowest rank).
Not identical: the data values and the initial weights (a synthetic teacher task of the same shape,
16384 samples, inputs N(0, 1) and labels from a random tanh teacher as ours, but drawn with torch's
generator, so values differ; parameters use torch's default init, not ours), so losses are comparable
in trend only. DDP's first bucket is 1 MiB (torch's fixed first-bucket size) and it reduces buckets in
its own order. gloo has no average: bench's --op avg is a sum then a division, inside the timing.
torch's all_reduce is in place: each timed iteration first copies the input (outside the timing),
where our bench reduces out of place. Per-rank compute, communication and wait times are not
separable inside DDP's backward, so only step times are reported. Memory is each rank's peak RSS.
"""
import argparse
import datetime
import json
import math
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import time


def parse_size(s):
    s = s.strip()
    mult = 1
    if s[-1:] in "bB":
        s = s[:-1]
    if s[-1:] in "kK":
        mult, s = 1024, s[:-1]
    elif s[-1:] in "mM":
        mult, s = 1024 ** 2, s[:-1]
    elif s[-1:] in "gG":
        mult, s = 1024 ** 3, s[:-1]
    return int(float(s) * mult)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["bench", "train"])
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--timeout", type=int, default=60, help="seconds for each collective")
    p.add_argument("--json", default=None)
    p.add_argument("--quiet", action="store_true")
    # bench
    p.add_argument("--sizes", default="4K:64M")
    p.add_argument("--factor", type=float, default=2.0)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    p.add_argument("--op", default="sum", choices=["sum", "avg"])
    # train
    p.add_argument("--model", default="mlp:784-1024-1024-10")
    p.add_argument("--data", default="synthetic", choices=["synthetic"])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--optim", default="sgd")
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--no-overlap", action="store_true",
                   help="reduce all gradients after backward (no DDP hooks), as harness --no-overlap")
    a = p.parse_args(argv)
    lo, _, hi = a.sizes.partition(":")
    a.size_min = parse_size(lo)
    a.size_max = parse_size(hi) if hi else a.size_min
    if a.procs < 1 or a.size_min > a.size_max or a.factor <= 1:
        p.error("bad --procs, --sizes or --factor")
    if a.steps < 1 or a.warmup_steps < 0:
        p.error("--steps must be >= 1 and --warmup-steps >= 0")
    if a.warmup_steps >= a.steps:  # the warm-up is part of --steps and leaves one timed step (as syncbench's)
        a.warmup_steps = a.steps - 1
    return a


def parse_optim(spec):
    """'sgd', 'sgd:lr=0.05,momentum=0.9' or 'adam:lr=1e-3' with our defaults."""
    kind, _, rest = spec.partition(":")
    cfg = {"kind": kind or "sgd"}
    if cfg["kind"] == "sgd":
        cfg.update(lr=0.05, momentum=0.9, weight_decay=0.0)
    elif cfg["kind"] == "adam":
        cfg.update(lr=1e-3, weight_decay=0.0)
    else:
        raise SystemExit("torch_ddp.py: unknown optimizer %r" % spec)
    for kv in filter(None, rest.split(",")):
        k, _, v = kv.partition("=")
        k = {"wd": "weight_decay"}.get(k, k)
        cfg[k] = float(v)
    return cfg


def meta(a):
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=5).stdout.strip()
        except Exception:
            return ""
    here = os.path.dirname(os.path.abspath(__file__))
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    import torch
    return {
        "host": socket.gethostname(),
        "git_sha": sh(["git", "-C", here, "rev-parse", "--short", "HEAD"]),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cmdline": " ".join([os.path.relpath(__file__)] + sys.argv[1:]),
        "cpu": "%s, %d cores" % (cpu, os.cpu_count() or 0),
        "versions": "torch %s, python %s" % (torch.__version__, platform.python_version()),
    }


def emit(a, line):
    if not a.json:
        return
    text = json.dumps(line) + "\n"
    if a.json == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    fd = os.open(a.json, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, text.encode())  # one write: whole lines, as the harness appends them
    finally:
        os.close(fd)


# ---------- bench: all_reduce timed like harness bench ----------

def bench(rank, world, a):
    import torch
    import torch.distributed as dist
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    esz = torch.tensor([], dtype=dt).element_size()
    sizes, s = [], float(a.size_min)
    while s <= a.size_max * 1.0000001:
        sizes.append(int(s) // esz * esz)
        s *= a.factor
    if rank == 0 and not a.quiet:
        print("#\n# torch %s all_reduce over gloo, %d ranks, dtype %s, op %s, in place (input copied outside the timing)"
              % (torch.__version__, world, a.dtype, a.op))
        print("# %12s %12s %6s %6s %10s %9s %9s %8s" % ("size(B)", "count", "type", "redop", "time(us)", "algbw",
                                                       "busbw", "#wrong"))
        sys.stdout.flush()
    m = meta(a) if rank == 0 else None
    for nbytes in sizes:
        n = nbytes // esz
        i = torch.arange(n, dtype=torch.int64)
        x = (((i * 7 + rank * 13) % 9) - 4).to(dt)              # the harness's inputs: exact sums
        buf = torch.empty_like(x)
        def once():
            if a.op == "sum":
                dist.all_reduce(buf, op=dist.ReduceOp.SUM)
            else:
                dist.all_reduce(buf, op=dist.ReduceOp.SUM)
                buf.div_(world)
        for _ in range(a.warmup):
            buf.copy_(x)
            once()
        times = torch.zeros(a.iters, dtype=torch.float64)
        l0 = time.perf_counter()
        for it in range(a.iters):
            buf.copy_(x)
            t0 = time.perf_counter()
            once()
            times[it] = (time.perf_counter() - t0) * 1e6
        loop = (time.perf_counter() - l0) * 1e6 / a.iters  # this rank's timed loop / iterations
        exact = torch.zeros(n, dtype=torch.float64)
        for r in range(world):
            exact += (((i * 7 + r * 13) % 9) - 4).to(torch.float64)
        if a.op == "avg":
            exact /= world
        tol = 1e-6 if dt == torch.float32 else 1e-2
        wrong = int(((buf.to(torch.float64) - exact).abs() > tol * exact.abs().clamp(min=1.0)).sum())
        stats = torch.cat([times, torch.tensor([loop], dtype=torch.float64)])
        slow = stats.clone()
        dist.all_reduce(slow, op=dist.ReduceOp.MAX)               # per iteration, and the loop, the slowest rank
        tot = torch.tensor([float(wrong)], dtype=torch.float64)
        dist.all_reduce(tot, op=dist.ReduceOp.SUM)
        if rank != 0:
            continue
        t, loop = statistics.median(slow[:a.iters].tolist()), float(slow[a.iters])
        algbw = nbytes / (t * 1e-6) / 1e9 if t > 0 else 0.0
        busbw = algbw * 2 * (world - 1) / world  # as harness bench and nccl-tests: 0 on one rank (nothing crosses a link)
        nwrong = int(tot.item())
        if not a.quiet:
            print("  %12d %12d %6s %6s %10.1f %9.3f %9.3f %8d" % (nbytes, n, a.dtype, a.op, t, algbw, busbw, nwrong))
            sys.stdout.flush()
        emit(a, dict(mode="bench", engine="torch-gloo", impl="torch %s gloo" % torch.__version__, peer=True,
                     world=world, servers=0, colocate=0, transport="gloo-tcp", bytes=nbytes, count=n, dtype=a.dtype,
                     op=a.op, iters=a.iters, warmup=a.warmup, time_us=round(t, 3), loop_us=round(loop, 3), algbw_gbs=round(algbw, 6),
                     busbw_gbs=round(busbw, 6), wrong=nwrong, topology="", net="", **m))
    return 0


# ---------- train: DDP over gloo on the harness's workload ----------

def synthetic(n, dim, classes, seed):
    """A teacher task of our shape: x ~ N(0, 1), label = argmax W2 tanh(W1 x / sqrt(dim)), 64 hidden."""
    import torch
    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(64, dim, generator=g) / math.sqrt(dim)
    w2 = torch.randn(classes, 64, generator=g)
    x = torch.randn(n, dim, generator=g)
    y = (torch.tanh(x @ w1.T) @ w2.T).argmax(dim=1)
    return x, y


def train(rank, world, a):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data.distributed import DistributedSampler
    kind, _, dims = a.model.partition(":")
    if kind != "mlp":
        raise SystemExit("torch_ddp.py: only mlp:D0-D1-...-DN models")
    dims = [int(d) for d in dims.split("-")]
    if a.batch % world:
        raise SystemExit("torch_ddp.py: --batch %d is not a multiple of %d ranks" % (a.batch, world))
    lb = a.batch // world
    torch.manual_seed(a.seed)
    layers = []
    for k in range(len(dims) - 1):
        layers.append(nn.Linear(dims[k], dims[k + 1]))
        if k < len(dims) - 2:
            layers.append(nn.ReLU())
    net = nn.Sequential(*layers)
    nparams = sum(p.numel() for p in net.parameters())
    if a.no_overlap:
        model = net
        for p in net.parameters():                              # broadcast_parameters, as DDP does
            dist.broadcast(p.data, 0)
    else:
        model = DDP(net, bucket_cap_mb=a.bucket_mb)
    oc = parse_optim(a.optim)
    if oc["kind"] == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=oc["lr"], momentum=oc["momentum"],
                              weight_decay=oc["weight_decay"])
    else:
        opt = torch.optim.Adam(model.parameters(), lr=oc["lr"], weight_decay=oc["weight_decay"])
    x, y = synthetic(16384, dims[0], dims[-1], a.seed)
    sampler = DistributedSampler(range(len(x)), num_replicas=world, rank=rank, shuffle=True, seed=a.seed,
                                 drop_last=True)
    lossf = nn.CrossEntropyLoss()

    def batches():
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            idx = list(sampler)
            for s in range(0, len(idx) - lb + 1, lb):
                yield torch.tensor(idx[s:s + lb])
            epoch += 1

    it = batches()
    steps = []
    losses = []
    correct = 0
    t_start = None
    # --steps counts every optimizer step, the untimed warm-up included (as syncbench's train)
    total, timed = a.steps, a.steps - a.warmup_steps
    for step in range(total):
        if step == a.warmup_steps:
            dist.barrier()
            t_start = time.perf_counter()
        ix = next(it)
        t0 = time.perf_counter()
        xb, yb = x[ix], y[ix]
        opt.zero_grad(set_to_none=False)
        out = model(xb)
        loss = lossf(out, yb)
        loss.backward()
        if a.no_overlap:
            flat = torch.cat([p.grad.view(-1) for p in net.parameters()])
            dist.all_reduce(flat)
            flat.div_(world)
            off = 0
            for p in net.parameters():
                p.grad.copy_(flat[off:off + p.numel()].view_as(p.grad))
                off += p.numel()
        opt.step()
        dt = (time.perf_counter() - t0) * 1e3
        losses.append(float(loss.item()))
        if step >= a.warmup_steps:
            steps.append(dt)
        if step == total - 1:
            correct = int((out.argmax(dim=1) == yb).sum())
        if rank == 0 and not a.quiet:
            what = "warm-up %d/%d" % (step + 1, a.warmup_steps) if step < a.warmup_steps else \
                "step %d/%d" % (step + 1 - a.warmup_steps, timed)
            print("# torch-ddp-gloo %s: loss %.4f, step %.2f ms" % (what, losses[-1], dt), file=sys.stderr)
    secs = time.perf_counter() - t_start
    sps = lb * timed / secs if secs > 0 else 0.0
    # parameters identical on every rank (DDP's promise): checksums compared
    flat = torch.cat([p.detach().view(-1) for p in net.parameters()]).double()
    ck = torch.tensor([flat.sum().item(), (flat * flat).sum().item()], dtype=torch.float64)
    cks = [torch.zeros(2, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(cks, ck)
    in_sync = all(torch.equal(c, cks[0]) for c in cks)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    mine = torch.tensor([sps, statistics.median(steps), percentile(steps, 99), losses[0], losses[-1],
                         correct / lb, float(rss)], dtype=torch.float64)
    all_ = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(all_, mine)
    if rank != 0:
        return 0
    rows = [t.tolist() for t in all_]
    S = dict(sps=sum(r[0] for r in rows), p50=max(r[1] for r in rows), p99=max(r[2] for r in rows),
             lf=sum(r[3] for r in rows) / world, ll=sum(r[4] for r in rows) / world,
             acc=sum(r[5] for r in rows) / world)
    mem = [int(r[6]) for r in rows]
    imb = max(mem) / (sum(mem) / len(mem))
    if not a.quiet:
        print("#\n# torch %s DDP over gloo, %d workers, model %s (%.2fM params, bucket_cap_mb %g), batch %d (%d/worker),"
              " optim %s, 1 thread/rank" % (torch.__version__, world, a.model, nparams / 1e6, a.bucket_mb, a.batch, lb,
                                            a.optim))
        print("# %-15s %5s %11s %9s %9s %17s %10s %9s" % ("engine", "world", "samples/s", "step p50", "step p99",
                                                        "loss", "mem peak", "in sync"))
        print("  %-15s %5d %11.1f %9.2f %9.2f %8.4f -> %6.4f %10.1f %9s" % (
            "torch-ddp-gloo", world, S["sps"], S["p50"], S["p99"], S["lf"], S["ll"], max(mem) / 2 ** 20,
            "yes" if in_sync else "NO"))
        sys.stdout.flush()
    m = meta(a)
    emit(a, dict(mode="train", engine="torch-ddp-gloo", impl="torch %s gloo" % torch.__version__, peer=True,
                 world=world, ranks=world, servers=0, steps=a.steps, warmup_steps=a.warmup_steps,
                 timed_steps=a.steps - a.warmup_steps, batch=lb * world,
                 local_batch=lb, model=a.model,
                 params=nparams, data="synthetic", optim=a.optim, grad_dtype="f32", bucket_mb=a.bucket_mb,
                 overlap=not a.no_overlap, blas_threads=1, samples_per_s=round(S["sps"], 3),
                 samples_per_s_rank=[round(r[0], 3) for r in rows], step_ms_p50=round(S["p50"], 4),
                 step_ms_p99=round(S["p99"], 4), loss_first=round(S["lf"], 6), loss_last=round(S["ll"], 6),
                 acc_last=round(S["acc"], 4), skipped_steps=0, mem_peak_bytes=mem, mem_imbalance=round(imb, 4),
                 gpus=0, in_sync=in_sync, net="", straggler="", **m))
    return 0 if in_sync else 1


def percentile(xs, q):
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(math.ceil(q / 100.0 * len(s))) - 1))
    return s[k]


def worker(rank, world, port, a):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)                                    # one compute thread per rank, as ours
    torch.set_num_interop_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=a.timeout))
    try:
        rc = bench(rank, world, a) if a.mode == "bench" else train(rank, world, a)
    finally:
        dist.destroy_process_group()
    if rc:
        raise SystemExit(rc)


def main(argv):
    a = parse_args(argv)
    try:
        import torch.multiprocessing as mp
    except ImportError as e:
        print("torch_ddp.py: torch is not importable (%s): `make peers` installs it into peers/.venv" % e,
              file=sys.stderr)
        return 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        mp.spawn(worker, args=(a.procs, port, a), nprocs=a.procs, join=True)
    except mp.ProcessRaisedException as e:
        print("torch_ddp.py: a rank failed:\n%s" % e, file=sys.stderr)
        return 1
    except mp.ProcessExitedException as e:
        print("torch_ddp.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
