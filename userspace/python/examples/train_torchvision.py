# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""A stock torchvision training loop, data-parallel, with Mercury on.

    /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 \\
        --redirects 1 --tee 1 userspace/python/examples/train_torchvision.py --mercury

(--redirects 1 --tee 1: Debian's torch 1.13 launcher fails on Python 3.11
with its default "0", AttributeError in to_map; "1" sends each rank's
stdout to a log file and to the console.)

Without --mercury the same loop runs under DistributedDataParallel, for
comparison. The data is torchvision's FakeData (generated images), read by
a DataLoader with worker processes. The two lines that turn Mercury on are
marked "Mercury" below; nothing else in the loop changes.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torchvision
from torch.utils.data import DataLoader, DistributedSampler

try:
    import mercury.torch        # Mercury
except ImportError:     # running from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), ".."))
    import mercury.torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18",
                    help="a torchvision.models constructor (default resnet18)")
    ap.add_argument("--mercury", action="store_true",
                    help="mercury.torch instead of DistributedDataParallel")
    ap.add_argument("--plan", help="Mercury plan or profile JSON (default: "
                    "the forward order measured on the first iteration)")
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=64, help="image side, px")
    ap.add_argument("--workers", type=int, default=2,
                    help="DataLoader worker processes")
    ap.add_argument("--lr", type=float, default=0.01)
    a = ap.parse_args()

    dist.init_process_group("gloo")     # torch.distributed.run's env://
    rank = dist.get_rank()
    torch.manual_seed(0)
    data = torchvision.datasets.FakeData(
        size=a.iters * a.batch * dist.get_world_size(),
        image_size=(3, a.size, a.size), num_classes=10,
        transform=torchvision.transforms.ToTensor())
    loader = DataLoader(data, batch_size=a.batch, num_workers=a.workers,
                        sampler=DistributedSampler(data, seed=0),
                        persistent_workers=a.workers > 0)
    model = getattr(torchvision.models, a.model)(num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)

    if a.mercury:
        # Mercury: instead of DistributedDataParallel(model).
        model, optimizer = mercury.torch.distribute(
            model, optimizer, plan=a.plan, channels=a.channels)
        net = model
    else:
        net = torch.nn.parallel.DistributedDataParallel(model)

    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.perf_counter()
    for it, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        optimizer.step()
        if rank == 0 and (it % 5 == 0 or it == a.iters - 1):
            print("iteration %d loss %.4f" % (it, loss.item()), flush=True)

    if a.mercury:
        optimizer.synchronize()     # the last step lands; then shut down
        optimizer.close()
    took = time.perf_counter() - start
    if rank == 0:
        print("%s %s: %d iterations in %.1f s (%.2f it/s)"
              % (a.model, "mercury.torch" if a.mercury else "DDP",
                 it + 1, took, (it + 1) / took))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
