#!/usr/bin/env python3
"""ddp_train.py: the DDP demo users start from (a small classifier on MNIST-shaped synthetic data, a
DistributedSampler, SGD), runnable over gloo or, with one added line, over a syncbench engine:

    torchrun --nproc-per-node 2 examples/ddp_train.py --comm gloo
    torchrun --nproc-per-node 2 examples/ddp_train.py --comm syncbench --engine ring   # or tree, ps:colocate

The one line (see below): model.register_comm_hook(None, syncbench.torch.allreduce_hook(engine="ring")).
DDP keeps its gloo process group for its set-up broadcasts; only the gradient allreduce moves to our engine.
Same seed, same data order: both print the same losses up to float rounding. Without torchrun, any launcher
that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT works (syncbench listens on MASTER_PORT + 1)."""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))  # the checkout's

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--comm", choices=["gloo", "syncbench"], default="syncbench")
p.add_argument("--engine", default="ring", help="syncbench engine: ring, tree, ps:colocate, ...")
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--batch", type=int, default=32, help="samples a rank a step")
p.add_argument("--samples", type=int, default=2048)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()
if "RANK" not in os.environ:
    sys.exit("ddp_train.py: start it with torchrun (torchrun --nproc-per-node 2 %s ...)" % sys.argv[0])

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()

g = torch.Generator().manual_seed(1234)  # the data set: MNIST-shaped inputs, labels from a fixed teacher
x = torch.randn(a.samples, 1, 28, 28, generator=g)
teacher = torch.randn(784, 10, generator=g)
y = (x.reshape(a.samples, -1) @ teacher).argmax(dim=1)
data = TensorDataset(x, y)
sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=a.seed)
loader = DataLoader(data, batch_size=a.batch, sampler=sampler)

torch.manual_seed(a.seed)
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
model = nn.parallel.DistributedDataParallel(model)
if a.comm == "syncbench":
    import syncbench.torch
    model.register_comm_hook(None, syncbench.torch.allreduce_hook(engine=a.engine))  # the one added line
opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()

for epoch in range(a.epochs):
    sampler.set_epoch(epoch)
    total, n = torch.zeros(2), 0
    for xb, yb in loader:
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        total += torch.tensor([loss.item() * len(yb), len(yb)])
    dist.all_reduce(total)  # the epoch's mean loss over every rank (gloo: bookkeeping, not training)
    if rank == 0:
        print("epoch %d loss %.6f (%s%s, %d ranks)" % (epoch, total[0] / total[1], a.comm,
                                                   " " + a.engine if a.comm == "syncbench" else "", world))
dist.destroy_process_group()
