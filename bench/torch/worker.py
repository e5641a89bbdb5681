# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""One rank of bench/torch: a plain training loop under stock
DistributedDataParallel or mercury.torch, timed; run by bench/torch/run.sh
in the rank's network namespace (torch.distributed env:// rendezvous).

    worker.py --scheme ddp|mercury --model resnet18 --batch 16 --size 64 \\
        --iters 12 --warmup 2 -o rank0.json

Writes the per-iteration start times and phases (forward, the part of
it blocked on the network, backward, step), the end (the moment the last step
is applied: mercury.torch after synchronize(), which waits for the last
all-reduces, so both wrappers are charged all their traffic), the local
loss of every iteration and a checksum of the final parameters.
report.py takes the throughput over all iterations, start to end. The
it_per_s written here (after --warmup) is kept for reference only: it
would charge mercury.torch one iteration's traffic more than DDP, whose
first all-reduces are over before its second forward.
"""
import argparse
import json
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "userspace", "python"))
sys.path.insert(0, here)

import torch                                    # noqa: E402
import torch.distributed as dist                # noqa: E402

import mercury.torch                            # noqa: E402
from models import MODELS                       # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scheme", choices=("ddp", "mercury"), required=True)
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()

    # Each rank gets its share of the host's cores, as one rank per node
    # would have its node's.
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    # Same model on every rank and in every scheme; each rank its own
    # generated shard, the same in every scheme.
    torch.manual_seed(0)
    model = MODELS[a.model]()
    g = torch.Generator().manual_seed(1000 + rank)
    data = [(torch.randn(a.batch, 3, a.size, a.size, generator=g),
             torch.randint(0, 10, (a.batch,), generator=g))
            for _ in range(a.iters)]
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    if a.scheme == "mercury":
        model, optimizer = mercury.torch.distribute(
            model, optimizer, channels=a.channels, tag_source="dscp")
        net = model
    else:
        net = torch.nn.parallel.DistributedDataParallel(model)
    loss_fn = torch.nn.CrossEntropyLoss()

    def waited():
        return (optimizer.mercury.wait_seconds if a.scheme == "mercury"
                else 0.0)

    dist.barrier()
    starts, losses, phases = [], [], []
    for x, y in data:
        starts.append(time.perf_counter())
        w0 = waited()
        optimizer.zero_grad()
        loss = loss_fn(net(x), y)
        t_fwd, w_fwd = time.perf_counter(), waited()
        loss.backward()
        t_bwd = time.perf_counter()
        optimizer.step()
        t_step = time.perf_counter()
        losses.append(loss.item())
        # seconds of this iteration: forward (of which blocked on the
        # network: mercury.torch's pre-hooks), backward (DDP: with its
        # all-reduces), step
        phases.append([t_fwd - starts[-1], w_fwd - w0, t_bwd - t_fwd,
                       t_step - t_bwd])
    if a.scheme == "mercury":
        optimizer.synchronize()
    end = time.perf_counter()
    # Everything measured is over on this rank; a checksum of the final
    # parameters shows every rank (and scheme) ended in the same place.
    with torch.no_grad():
        csum = float(sum(p.double().sum() for p in model.parameters()))
    res = {
        "rank": rank, "world": world, "scheme": a.scheme, "model": a.model,
        "batch": a.batch, "size": a.size, "iters": a.iters,
        "warmup": a.warmup,
        "params": sum(p.numel() for p in model.parameters()),
        "starts": [t - starts[0] for t in starts], "end": end - starts[0],
        "losses": losses, "param_sum": csum, "phases": phases,
        "it_per_s": (a.iters - a.warmup) / (end - starts[a.warmup]),
    }
    if a.scheme == "mercury":
        res["channels"] = [[t, r] for t, r, _ in
                           optimizer.mercury.channel_sockets()]
        optimizer.close()
    with open(a.output + ".tmp", "w") as f:
        json.dump(res, f)
    os.rename(a.output + ".tmp", a.output)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
