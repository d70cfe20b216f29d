#!/usr/bin/env python3
"""torch_hook_compare.py: PyTorch DDP over gloo against the same DDP with syncbench's comm hook, side by side in
one job (the same processes, the same model, init and batches), and syncbench.torch's allreduce timed like
`harness bench`, writing JSON lines (mode "torch-step" / "torch-allreduce") that `summary` turns into tables.

    peers/.venv/bin/python peers/torch_hook_compare.py run --procs 4 --engine ring --json results/x.jsonl
    peers/.venv/bin/python peers/torch_hook_compare.py summary results/x.jsonl

`run` starts --procs local ranks (loopback) as torchrun would, or runs as one rank under torchrun (RANK set).
Each rank holds three copies of the model from one seed: "local" (no communication: the compute floor),
"gloo" (DistributedDataParallel, its default allreduce over gloo) and "hook" (the same DDP with
register_comm_hook(None, syncbench.torch.allreduce_hook(engine))). In every round each trains --steps timed
steps (after --warmup-steps) on the same batches, the order alternating (local gloo hook, hook gloo local, ...).
A step is zero_grad, forward, backward, optimizer step (SGD, momentum 0.9); its time is the slowest rank's.
Per config: step p50 and p99 over every timed step of every round, samples/s (global batch / p50), the exposed
communication a step (p50 minus local's p50, what the step waits for beyond its compute) and the final loss;
and the step-time ratio hook / gloo, of the p50s and per round. After the steps the gloo and hook models have
seen the same batches: their largest parameter difference is reported (float rounding only).
Then --bench-sizes: syncbench.torch.allreduce_ (in place, f32 sum) of each size, --iters back to back after
--warmup (one gloo barrier before the warm-up, none between iterations, as `harness bench` runs them), each
iteration the slowest rank's time, the median over iterations (as `harness bench` reports time_us); the
buffer is zeros (an in-place sum keeps them), then one untimed allreduce of rank + 1 counts wrong elements.
`summary FILE...` prints the step tables and, beside `harness bench` lines of the same engine, world and
size found in the files, the Python API's overhead over the engine alone.
One torch thread a rank; ranks unbound for the steps, then bound as harness bench binds its ranks (local rank i
on core i mod cores, every thread) for the allreduces. Models: mlp (784-1024-1024-10, as `harness train`) or
head:H (784-H-10: a classifier whose head is most of the bytes)."""
import argparse
import json
import os
import socket
import statistics
import sys
import time

from torchjob import launch_ranks, pct

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().rstrip("B")
    return int(float(s[:-1]) * mult[s[-1]]) if s[-1:] in mult else int(s)


def sizes(spec, factor):
    lo, _, hi = spec.partition(":")
    a, b = parse_size(lo), parse_size(hi or lo)
    out = []
    while a <= b:
        out.append(a)
        a = int(a * factor)
    return out


def args_of(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("cmd", choices=["run", "summary"])
    p.add_argument("files", nargs="*", help="summary: results files")
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--engine", default="ring")
    p.add_argument("--model", default="mlp")
    p.add_argument("--batch", type=int, default=64, help="samples a rank a step")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--bench-sizes", default="1M:64M", help="LO:HI, or none")
    p.add_argument("--factor", type=float, default=4.0)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--timeout", type=int, default=120, help="seconds for each collective")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    if a.cmd == "run" and not (1 <= a.procs <= 64):
        p.error("--procs must be 1..64")
    if a.cmd == "summary" and not a.files:
        p.error("summary takes results files")
    if a.steps < 1 or a.rounds < 1 or a.batch < 1 or a.iters < 1:
        p.error("--steps, --rounds, --batch and --iters must be >= 1")
    return a


def free_ports():
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s2:
                s2.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise SystemExit("torch_hook_compare: no two free ports in a row on 127.0.0.1")


def launch(a, argv):
    """Start --procs ranks of this script with torchrun's environment (torchjob.launch_ranks)."""
    budget = a.timeout * 4 + a.rounds * a.steps * 30 + 600
    return launch_ranks("torch_hook_compare", __file__, argv, a.procs, budget, free_ports(),
                        {"SYNCBENCH_JOB": "cmp-%d" % os.getpid()})


def build_model(spec, nn):
    if spec == "mlp":
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    if spec.startswith("head:"):
        h = int(spec[5:])
        return nn.Sequential(nn.Linear(784, h), nn.ReLU(), nn.Linear(h, 10))
    raise SystemExit("torch_hook_compare: --model mlp or head:H, not %r" % spec)


def rank_main(a):
    import datetime

    import torch
    import torch.distributed as dist
    import torch.nn as nn

    import syncbench
    import syncbench.torch as hvd
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.timeout))
    r, P = dist.get_rank(), dist.get_world_size()
    hvd.init(engine=a.engine, timeout=a.timeout)
    if hvd.size() != P:
        raise SystemExit("torch_hook_compare: engine %r has %d workers in a job of %d: use ps:colocate" %
                         (a.engine, hvd.size(), P))
    torch.manual_seed(a.seed)
    base = build_model(a.model, nn)
    models = {"local": build_model(a.model, nn)}
    models["local"].load_state_dict(base.state_dict())
    for name in ("gloo", "hook"):
        m = build_model(a.model, nn)
        m.load_state_dict(base.state_dict())
        models[name] = nn.parallel.DistributedDataParallel(m, bucket_cap_mb=a.bucket_mb)
    hook = hvd.allreduce_hook(engine=a.engine, timeout=a.timeout)
    models["hook"].register_comm_hook(None, hook)
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for k, m in models.items()}
    loss_fn = nn.CrossEntropyLoss()
    nparams = sum(p.numel() for p in base.parameters())

    def data(step):
        g = torch.Generator().manual_seed(a.seed * 1000003 + step * P + r)
        return torch.randn(a.batch, 784, generator=g), torch.randint(0, 10, (a.batch,), generator=g)

    times = {k: [] for k in models}
    per_round = {k: [] for k in models}
    last = {}
    step_no = {k: 0 for k in models}
    order = ["local", "gloo", "hook"]
    for rnd in range(a.rounds):
        for name in (order if rnd % 2 == 0 else order[::-1]):
            m, opt = models[name], opts[name]
            mine = []
            dist.barrier()
            for s in range(a.warmup_steps + a.steps):
                x, y = data(step_no[name])
                step_no[name] += 1
                t0 = time.perf_counter()
                opt.zero_grad()
                loss = loss_fn(m(x), y)
                loss.backward()
                opt.step()
                dt = time.perf_counter() - t0
                if s >= a.warmup_steps:
                    mine.append(dt)
                last[name] = loss.item()
            t = torch.tensor(mine, dtype=torch.float64)
            every = [torch.empty_like(t) for _ in range(P)]
            dist.all_gather(every, t)
            slowest = torch.stack(every).max(dim=0).values.tolist()
            times[name] += slowest
            per_round[name].append(statistics.median(slowest))
    # the gloo and hook models saw the same batches: they differ by rounding only
    diff = max((p.detach() - q.detach()).abs().max().item()
               for p, q in zip(models["gloo"].parameters(), models["hook"].parameters()))
    losses = torch.tensor([last[k] for k in order], dtype=torch.float64)
    dist.all_reduce(losses)
    losses /= P
    rows = []
    common = {"schema": 2, "engine_sb": a.engine, "world": P, "model": a.model, "params": nparams,
              "grad_bytes": nparams * 4, "local_batch": a.batch, "steps": a.steps, "warmup_steps": a.warmup_steps,
              "rounds": a.rounds, "bucket_mb": a.bucket_mb, "torch": torch.__version__,
              "syncbench": syncbench.version()}
    p50_local = statistics.median(times["local"])
    for k, name in enumerate(order):
        p50 = statistics.median(times[name])
        rows.append(dict(common, mode="torch-step", config=name,
                         label={"local": "local (no communication)", "gloo": "DDP gloo",
                                "hook": "DDP + syncbench hook (%s)" % a.engine}[name],
                         step_p50_ms=p50 * 1e3, step_p99_ms=pct(times[name], 0.99) * 1e3,
                         samples_s=P * a.batch / p50, exposed_comm_ms=(p50 - p50_local) * 1e3,
                         round_p50_ms=[v * 1e3 for v in per_round[name]], loss=losses[k].item(),
                         hook_bytes_per_step=(hook.bytes / max(1, step_no["hook"])) if name == "hook" else None))
    rows.append(dict(common, mode="torch-step", config="ratio", label="hook / gloo",
                     ratio_p50=statistics.median(times["hook"]) / statistics.median(times["gloo"]),
                     ratio_rounds=[h / g for h, g in zip(per_round["hook"], per_round["gloo"])],
                     max_param_diff=diff))
    # the Python API's allreduce alone, timed like harness bench, and bound like its ranks (--bind auto: local rank i
    # on core i mod cores, every thread of the process)
    if a.bench_sizes not in ("", "none"):
        bind_like_bench(int(os.environ.get("LOCAL_RANK", r)))
    for nbytes in sizes(a.bench_sizes, a.factor) if a.bench_sizes not in ("", "none") else []:
        n = nbytes // 4
        buf = torch.zeros(n)  # zeros stay zeros under the in-place sum: back-to-back iterations, no refill
        mine = []
        dist.barrier()
        for it in range(a.warmup + a.iters):
            t0 = time.perf_counter()
            hvd.allreduce_(buf, op=hvd.Sum)
            dt = time.perf_counter() - t0
            if it >= a.warmup:
                mine.append(dt)
        buf.fill_(float(r + 1))  # one more, untimed, on values that show a wrong sum
        hvd.allreduce_(buf, op=hvd.Sum)
        wrong = int((buf != P * (P + 1) / 2).sum().item())
        t = torch.tensor(mine + [float(wrong)], dtype=torch.float64)
        every = [torch.empty_like(t) for _ in range(P)]
        dist.all_gather(every, t)
        allt = torch.stack(every)
        slowest = allt[:, :-1].max(dim=0).values.tolist()
        rows.append(dict(common, mode="torch-allreduce", bytes=nbytes, count=n, dtype="f32", op="sum",
                         iters=a.iters, warmup=a.warmup, time_us=statistics.median(slowest) * 1e6,
                         wrong=int(allt[:, -1].sum().item())))
    if r == 0:
        stamp = {"host": socket.gethostname(), "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "loadavg": [float(x) for x in open("/proc/loadavg").read().split()[:3]], "cmdline": " ".join(sys.argv)}
        if a.json:
            with open(a.json, "a") as f:
                f.write("".join(json.dumps(dict(row, **stamp)) + "\n" for row in rows))
        print_tables(rows)
    hvd.shutdown()
    dist.destroy_process_group()


def bind_like_bench(local_rank):
    """Every thread of this process on core local_rank mod the cores this process may use, as harness bench binds
    its ranks by default (--bind auto: core)."""
    cores = sorted(os.sched_getaffinity(0))
    core = {cores[local_rank % len(cores)]}
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), core)
        except OSError:  # a thread that ended meanwhile
            pass


def print_tables(rows, bench=()):
    steps = [x for x in rows if x["mode"] == "torch-step" and x["config"] != "ratio"]
    if steps:
        print("%-34s %6s %-10s %10s %10s %10s %12s %8s" % ("config", "world", "model", "p50 ms", "p99 ms",
                                                         "samples/s", "exposed ms", "loss"))
        for x in steps:
            print("%-34s %6d %-10s %10.2f %10.2f %10.1f %12.2f %8.4f" % (
                x["label"], x["world"], x["model"], x["step_p50_ms"], x["step_p99_ms"], x["samples_s"],
                x["exposed_comm_ms"], x["loss"]))
    for x in rows:
        if x["mode"] == "torch-step" and x["config"] == "ratio":
            print("step time hook (%s) / gloo, world %d, %s: %.3f (rounds: %s); largest |gloo - hook| parameter "
                  "difference %.3g" % (x["engine_sb"], x["world"], x["model"], x["ratio_p50"],
                                       " ".join("%.3f" % v for v in x["ratio_rounds"]), x["max_param_diff"]))
    ar = [x for x in rows if x["mode"] == "torch-allreduce"]
    if ar:
        print("%-12s %6s %12s %14s %16s %10s %6s" % ("engine", "world", "bytes", "python us", "harness bench us",
                                                  "overhead", "wrong"))
        print("(harness bench: its --in-place lines where the files have them, as the Python API reduces in place)")
        for x in ar:
            same = [b for b in bench if b.get("engine") == x["engine_sb"].split(":")[0]
                    and b.get("world") == x["world"] and b.get("bytes") == x["bytes"] and b.get("dtype") == "f32"
                    and b.get("op") == "sum" and not b.get("peer")]
            # the Python API reduces in place: harness bench --in-place's lines where recorded, else out-of-place's
            hb = [b["time_us"] for b in same if b.get("in_place")] or [b["time_us"] for b in same]
            ref = statistics.median(hb) if hb else None
            print("%-12s %6d %12d %14.1f %16s %10s %6d" % (
                x["engine_sb"], x["world"], x["bytes"], x["time_us"], "%.1f" % ref if ref else "-",
                "%+.1f%%" % (100 * (x["time_us"] / ref - 1)) if ref else "-", x["wrong"]))


def summary(a):
    rows, bench = [], []
    for path in a.files:
        with open(path) as f:
            for no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    o = json.loads(line)
                except ValueError as e:
                    raise SystemExit("torch_hook_compare: %s:%d: not JSON (%s)" % (path, no, e))
                if o.get("mode") in ("torch-step", "torch-allreduce"):
                    rows.append(o)
                elif o.get("mode") == "bench" and not o.get("emulated"):
                    bench.append(o)
    if not rows:
        raise SystemExit("torch_hook_compare: no torch-step or torch-allreduce lines in %s" % " ".join(a.files))
    print_tables(rows, bench)


def main(argv):
    a = args_of(argv)
    if a.cmd == "summary":
        return summary(a)
    if "RANK" not in os.environ:
        return launch(a, argv)
    return rank_main(a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
