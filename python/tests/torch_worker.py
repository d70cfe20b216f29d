"""torch_worker.py: one rank of the torch tests (test_torch.py): runs the scenario argv[1] on the engine argv[2]
and exits 0 when every check passed (the failed check's message otherwise). The reference for every gradient
is computed here too: the local model's gradient of the global batch's mean loss (every rank knows the whole
batch, drawn from a fixed seed), and gloo's allreduce of this rank's own gradients."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import syncbench.torch as hvd
from syncbench.torch import allreduce_hook

scenario, spec = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
B, STEPS = 8, 4


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))


def batch(step, P):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(P * B, 20, generator=g), torch.randint(0, 5, (P * B,), generator=g)


def close(a, b, what, rtol=1e-5, atol=1e-6):
    err = (a - b).abs().max().item()
    assert torch.allclose(a, b, rtol=rtol, atol=atol), "%s: max |diff| %.3g" % (what, err)
    return err


def ddp():
    """DDP with the hook: its gradients equal gloo's allreduce and the local mean, the ranks stay identical."""
    dist.init_process_group("gloo")
    r, P = dist.get_rank(), dist.get_world_size()
    model = nn.parallel.DistributedDataParallel(make_model(7), bucket_cap_mb=0.005)  # several buckets
    hook = allreduce_hook(engine=spec, timeout=30)
    model.register_comm_hook(None, hook)
    ref, twin = make_model(7), make_model(7)  # the global batch's mean; this rank's part through gloo
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    worst = [0.0, 0.0]
    for step in range(STEPS):
        x, y = batch(step, P)
        xs, ys = x[r * B:(r + 1) * B], y[r * B:(r + 1) * B]
        opt.zero_grad()
        loss_fn(model(xs), ys).backward()
        twin.load_state_dict(model.module.state_dict())
        twin.zero_grad()
        loss_fn(twin(xs), ys).backward()
        ropt.zero_grad()
        loss_fn(ref(x), y).backward()
        for (n, p), t, q in zip(model.module.named_parameters(), twin.parameters(), ref.parameters()):
            g = t.grad.clone()
            dist.all_reduce(g)
            g /= P
            worst[0] = max(worst[0], close(p.grad, g, "step %d %s: hook vs gloo" % (step, n)))
            worst[1] = max(worst[1], close(p.grad, q.grad, "step %d %s: hook vs local mean" % (step, n), 1e-4, 1e-5))
        opt.step()
        ropt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    every = [torch.empty_like(flat) for _ in range(P)]
    dist.all_gather(every, flat)
    for k in range(P):
        assert torch.equal(every[k], flat), "rank %d's parameters differ from rank %d's after %d steps" % (k, r, STEPS)
    close(flat, torch.cat([p.detach().reshape(-1) for p in ref.parameters()]), "parameters vs local", 1e-4, 1e-5)
    assert hook.buckets > STEPS, "only %d buckets in %d steps went through the hook" % (hook.buckets, STEPS)
    print("rank %d: %d buckets, %d bytes; max |hook - gloo| %.3g, |hook - local| %.3g"
          % (r, hook.buckets, hook.bytes, worst[0], worst[1]))
    hvd.shutdown()
    dist.destroy_process_group()


def ddp_solo():
    """A world of one: every bucket's future is done when the hook returns it, holding DDP's bucket itself (no
    copy), no completion thread starts, and the gradients are the local model's, bit for bit."""
    from syncbench import _core
    dist.init_process_group("gloo")
    assert dist.get_world_size() == 1
    model = nn.parallel.DistributedDataParallel(make_model(7), bucket_cap_mb=0.005)  # several buckets
    hook = allreduce_hook(engine=spec, timeout=30)
    late = []

    def probe(state, bucket):
        fut = hook(state, bucket)
        if not fut.done() or fut.value().data_ptr() != bucket.buffer().data_ptr():
            late.append(bucket.index())
        return fut
    model.register_comm_hook(None, probe)
    twin = make_model(7)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(STEPS):
        x, y = batch(step, 1)
        model.zero_grad()
        loss_fn(model(x), y).backward()
        twin.zero_grad()
        loss_fn(twin(x), y).backward()
        for (n, p), q in zip(model.module.named_parameters(), twin.parameters()):
            assert torch.equal(p.grad, q.grad), "step %d %s: the hook changed the gradient in a world of one" % (step, n)
    assert hook.buckets >= STEPS, "only %d buckets in %d steps went through the hook" % (hook.buckets, STEPS)
    assert not late, "%d of %d buckets were not done (or not DDP's own buffer) when the hook returned" % (
        len(late), hook.buckets)
    assert _core.job().completer is None, "a completion thread started in a world of one"
    print("rank 0: %d buckets done at once" % hook.buckets)
    hvd.shutdown()
    dist.destroy_process_group()


def horovod():
    """Horovod's API: broadcast_parameters / _optimizer_state, DistributedOptimizer against the local mean,
    allreduce's ops, dtypes, async handles and gradient."""
    hvd.init(engine=spec, timeout=30)  # a PS server rank serves here and exits
    r, P = hvd.rank(), hvd.size()
    assert P == int(os.environ["EXPECT_WORKERS"]), (P, os.environ["EXPECT_WORKERS"])
    model = make_model(100 + r)  # different on every rank until the broadcast
    opt = torch.optim.SGD(model.parameters(), lr=0.1 if r == 0 else 0.5, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    ref = make_model(100)
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        assert torch.equal(p, q), "%s is not rank 0's after broadcast_parameters" % n
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.1, opt.param_groups[0]["lr"]
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    assert isinstance(opt, torch.optim.SGD)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(STEPS):
        x, y = batch(step, P)
        opt.zero_grad()
        loss_fn(model(x[r * B:(r + 1) * B]), y[r * B:(r + 1) * B]).backward()
        opt.step()
        ropt.zero_grad()
        loss_fn(ref(x), y).backward()
        ropt.step()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p.detach(), q.detach(), "%s after %d steps vs the local mean" % (n, STEPS), 1e-4, 1e-5)
    # allreduce: Horovod's default is the average; exact on small integers in every dtype
    v = hvd.allreduce(torch.tensor(float(r + 1)))
    assert v.item() == (P + 1) / 2, v
    s = hvd.allreduce(torch.full((1001,), float(r + 1)), op=hvd.Sum)
    assert torch.all(s == P * (P + 1) / 2), s[:4]
    for dt in (torch.float16, torch.bfloat16):
        t = torch.arange(7, dtype=dt) + r
        assert hvd.allreduce_(t, op=hvd.Sum) is t
        assert torch.equal(t, (P * torch.arange(7) + P * (P - 1) // 2).to(dt)), (dt, t)
    hs = [hvd.allreduce_async_(torch.full((3000 + k,), float(k + r)), op=hvd.Sum) for k in range(3)]
    for k, h in enumerate(hs):
        out = hvd.synchronize(h)
        assert out.numel() == 3000 + k and torch.all(out == P * k + P * (P - 1) / 2), (k, out[:4])
        assert hvd.poll(h)
    w = torch.full((4,), float(r + 1), requires_grad=True)
    (hvd.allreduce(w, op=hvd.Sum) * (r + 1)).sum().backward()  # d/dw: the sum over ranks of (rank + 1)
    assert torch.all(w.grad == P * (P + 1) / 2), w.grad
    obj = hvd.broadcast_object({"epoch": 3, "rank": r} if r == 0 else None, root_rank=0)
    assert obj == {"epoch": 3, "rank": 0}, obj
    print("rank %d: ok" % r)
    hvd.shutdown()


def bad_input():
    hvd.init(engine=spec, timeout=30)
    checks = [
        (lambda: hvd.allreduce(torch.zeros(4, device="meta")), TypeError, "meta"),
        (lambda: hvd.allreduce(torch.zeros(4, dtype=torch.float64)), TypeError, "float64"),
        (lambda: hvd.allreduce_(torch.zeros(4, dtype=torch.int32)), TypeError, "int32"),
        (lambda: hvd.allreduce_(torch.zeros(4, 4)[:, 1]), ValueError, "contiguous"),
        (lambda: hvd.allreduce([1.0, 2.0]), TypeError, "torch.Tensor"),
        (lambda: hvd.allreduce(torch.zeros(4), op=hvd.Adasum), ValueError, "Adasum"),
        (lambda: hvd.allreduce(torch.zeros(4), op="max"), ValueError, "op"),
        (lambda: hvd.allreduce(torch.zeros(4), timeout=-1), ValueError, "timeout"),
        (lambda: hvd.broadcast_(torch.zeros(4), root_rank=99), hvd.InvalidError, "root 99"),
        (lambda: hvd.DistributedOptimizer(object()), TypeError, "torch.optim.Optimizer"),
        (lambda: allreduce_hook(timeout=0), ValueError, "timeout"),
        (lambda: hvd.synchronize(3), TypeError, "handle"),
    ]
    for f, exc, word in checks:
        try:
            f()
        except exc as e:
            assert word in str(e), (word, str(e))
        else:
            raise AssertionError("no %s for %s" % (exc.__name__, word))
    x = torch.ones(10)
    hvd.allreduce_(x, op=hvd.Sum)  # still works after refused input
    assert torch.all(x == hvd.size()), x
    hvd.shutdown()


def dead_rank():
    """DDP with the hook on 3 ranks; the last one dies after 2 steps: the others' next backward must raise,
    naming it, within the hook's timeout."""
    dist.init_process_group("gloo")
    r, P = dist.get_rank(), dist.get_world_size()
    model = nn.parallel.DistributedDataParallel(make_model(7))
    tmo = 8
    model.register_comm_hook(None, allreduce_hook(engine=spec, timeout=tmo))
    loss_fn = nn.CrossEntropyLoss()
    for step in range(2):
        x, y = batch(step, P)
        model.zero_grad()
        loss_fn(model(x[r * B:(r + 1) * B]), y[r * B:(r + 1) * B]).backward()
    if r == P - 1:
        os._exit(0)  # gone without a word
    t = time.monotonic()
    try:
        for step in range(2, 6):
            x, y = batch(step, P)
            model.zero_grad()
            loss_fn(model(x[r * B:(r + 1) * B]), y[r * B:(r + 1) * B]).backward()
    except Exception as e:
        took = time.monotonic() - t
        msg = str(e)
        print("rank %d: %s after %.1f s: %s" % (r, type(e).__name__, took, msg.splitlines()[0] if msg else ""))
        sys.stdout.flush()
        assert took < tmo + 5, "the error came after %.1f s (timeout %d s)" % (took, tmo)
        os._exit(0 if ("rank %d" % (P - 1)) in msg else 3)
    raise AssertionError("no error in backward with rank %d dead" % (P - 1))


{"ddp": ddp, "ddp_solo": ddp_solo, "horovod": horovod, "bad_input": bad_input, "dead_rank": dead_rank}[scenario]()
