#!/usr/bin/env python3
"""horovod_train.py: Horovod's PyTorch MNIST example in its usual shape (init, a DistributedSampler on rank and
size, broadcast_parameters, broadcast_optimizer_state, DistributedOptimizer, metric_average by allreduce), on
MNIST-shaped synthetic data, with syncbench in place of Horovod by the import line alone:

    torchrun --nproc-per-node 2 examples/horovod_train.py --engine ring     # or tree, ps:colocate
    import syncbench.torch as hvd        # the one changed line (was: import horovod.torch as hvd)

hvd.init() reads torchrun's environment (any launcher setting RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT);
with --engine ps (a dedicated server) start one process more: it serves and exits when the workers are done."""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))  # the checkout's
import syncbench.torch as hvd  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--engine", default=None, help="ring (default), tree, ps:colocate, ps, ...")
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--samples", type=int, default=2048)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--seed", type=int, default=42)
a = p.parse_args()

hvd.init(engine=a.engine)
torch.manual_seed(a.seed)
torch.set_num_threads(1)

g = torch.Generator().manual_seed(1234)
x = torch.randn(a.samples, 1, 28, 28, generator=g)
y = (x.reshape(a.samples, -1) @ torch.randn(784, 10, generator=g)).argmax(dim=1)
train = TensorDataset(x, y)
sampler = DistributedSampler(train, num_replicas=hvd.size(), rank=hvd.rank())
loader = DataLoader(train, batch_size=a.batch, sampler=sampler)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(x.view(-1, 320)))
        return F.log_softmax(self.fc2(x), dim=1)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=a.lr * hvd.size(), momentum=0.5)  # lr scaled by workers
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


def metric_average(val, name):
    return hvd.allreduce(torch.tensor(val), name=name).item()


for epoch in range(a.epochs):
    model.train()
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = F.nll_loss(model(xb), yb)
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        out = model(x[: a.samples // 4])
        test_loss = F.nll_loss(out, y[: a.samples // 4]).item()
        acc = (out.argmax(dim=1) == y[: a.samples // 4]).float().mean().item()
    test_loss, acc = metric_average(test_loss, "avg_loss"), metric_average(acc, "avg_accuracy")
    if hvd.rank() == 0:
        print("epoch %d loss %.6f accuracy %.3f (%d workers)" % (epoch, test_loss, acc, hvd.size()))
hvd.shutdown()
