# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""One rank of the mercury.torch tests (run by test_torch.py).

    torch_worker.py RANK WORLD PORT OUT SCENARIO

train: the same small model, seeds and data under stock DDP and under
mercury.torch, with SGD+momentum and with Adam; saves losses, final
parameters, every channel socket's TOS byte (read with getsockopt) and
the seconds mercury.torch blocked on the network.
kill / stall: mercury.torch with a short timeout; rank 1 dies (SIGKILL) or
stops (SIGSTOP) in the middle of iteration 5.
compat[:CASE,...]: the training loops of torch_compat.py (transformers, LR
schedulers, clipping, accumulation, zero_grad modes, BatchNorm at eval, and
the checks of distribute()), each under DDP and under mercury.torch.
"""
import datetime
import faulthandler
import os
import signal
import socket
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import mercury.torch  # noqa: E402
# .grad's stand-in while a gradient is in flight
IN_FLIGHT = getattr(mercury.torch._overlap, "_InFlight", ())

ITERS = 20
BATCH = 16
# train: rank 1 sleeps this long between forward and backward of this
# iteration (opt.mercury.wait_seconds of the others must see it)
LAG_ITER = 3
LAG_SECONDS = 0.5


class Net(torch.nn.Module):
    """Small, but with a conv, several linear layers and a tied tensor."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.fc1 = torch.nn.Linear(8 * 6 * 6, 32)
        self.fc2 = torch.nn.Linear(32, 32)
        self.fc3 = torch.nn.Linear(32, 32)
        self.fc3.weight = self.fc2.weight       # tied
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.conv(x)).flatten(1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        x = torch.relu(self.fc3(x))
        return self.head(x)


def batch(rank, it):
    g = torch.Generator().manual_seed(1000 * it + rank)
    return (torch.randn(BATCH, 3, 8, 8, generator=g),
            torch.randint(0, 10, (BATCH,), generator=g))


def make(rank, opt_name):
    torch.manual_seed(rank)     # different on each rank: the start is
    model = Net()               # rank 0's, by broadcast
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                              weight_decay=1e-4)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, opt


def train(rank, model, opt, wrapped, hook=None, deferred=None, waits=None):
    losses = []
    for it in range(ITERS):
        x, y = batch(rank, it)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(wrapped(x), y)
        if hook:
            hook(it)
        loss.backward()
        if deferred is not None:
            # backward() returned without waiting: every gradient is
            # still ours (in flight or reduced), none stepped yet, and
            # .grad holds the stand-in that waits for it if read.
            deferred.append((len(opt.mercury.pending),
                             sum(isinstance(p.grad, IN_FLIGHT)
                                 for p in model.parameters())))
        opt.step()
        losses.append(loss.item())
        if waits is not None:
            waits.append(opt.mercury.wait_seconds)
    return losses


def train_job(world):
    """The job the train scenario's mercury.torch runs as: the 3-rank one
    as job 1 (its sockets' DSCP job_tag(1, 4, c) = 8 + c), the other 0."""
    return 1 if world == 3 else 0


def run_train(rank, world, out):
    res = {}
    for opt_name in ("sgd", "adam"):
        model, opt = make(rank, opt_name)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        res["ddp", opt_name, "loss"] = train(rank, model, opt, ddp)
        res["ddp", opt_name, "params"] = {
            n: p.detach().clone() for n, p in model.named_parameters()}

        model, opt = make(rank, opt_name)
        model, opt = mercury.torch.distribute(model, opt, channels=4,
                                              timeout=30, job=train_job(world))
        deferred = []

        def lag(it):
            # rank 1 holds back its gradients of one iteration: the next
            # forward of every other rank is blocked on them
            if rank == 1 and it == LAG_ITER:
                time.sleep(LAG_SECONDS)
        waits = []
        res["mercury", opt_name, "loss"] = train(rank, model, opt, model,
                                                 hook=lag, deferred=deferred,
                                                 waits=waits)
        res["mercury", opt_name, "waited"] = waits
        res["mercury", opt_name, "deferred"] = deferred
        opt.synchronize()
        res["mercury", opt_name, "params"] = {
            n: p.detach().clone() for n, p in model.named_parameters()}
        res["mercury", opt_name, "assignment"] = opt.mercury.assignment()
        socks = []
        for tag, peer, fd in opt.mercury.channel_sockets():
            ch = opt.mercury.channels[tag - 1]
            try:
                link = os.readlink("/proc/self/fd/%d" % fd)
            except OSError as e:
                link = str(e)
            if link != ch.links[peer]:
                print("rank %d channel %d peer %d fd %d: was %s now %s; "
                      "sockets %s" % (rank, tag, peer, fd, ch.links[peer],
                                      link, mercury.torch._channels
                                      ._sockets()), file=sys.stderr)
            s = socket.socket(fileno=fd)
            try:
                lvl, name = ((socket.IPPROTO_IP, socket.IP_TOS)
                             if s.family == socket.AF_INET else
                             (socket.IPPROTO_IPV6, socket.IPV6_TCLASS))
                socks.append((tag, peer, s.getsockopt(lvl, name),
                              s.getpeername()))
            finally:
                s.detach()
        res["mercury", opt_name, "sockets"] = socks
        opt.close()     # collective: the others have read theirs too
    torch.save(res, out)


def run_fault(rank, world, out, how):
    model, opt = make(rank, "sgd")
    model, opt = mercury.torch.distribute(model, opt, channels=2,
                                          timeout=5)

    def hook(it):
        if rank == 1 and it == 5:
            with open(out, "w") as f:       # the test checks we got here
                f.write("%s at iteration %d\n" % (how, it))
            os.kill(os.getpid(), signal.SIGKILL if how == "kill"
                    else signal.SIGSTOP)
    # What a user sees: the PeerError ends the program (traceback, exit 1).
    train(rank, model, opt, model, hook)
    opt.synchronize()
    print("rank %d finished without error" % rank, file=sys.stderr)


def main():
    rank, world, port = map(int, sys.argv[1:4])
    out, scenario = sys.argv[4], sys.argv[5]
    # MERCURY_TEST_STACKS=S: every thread's stack on stderr after S
    # seconds, to see where a hung job waits
    if os.environ.get("MERCURY_TEST_STACKS"):
        faulthandler.dump_traceback_later(
            float(os.environ["MERCURY_TEST_STACKS"]), exit=False)
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0,
                          timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    if scenario == "train":
        run_train(rank, world, out)
        dist.destroy_process_group()
    elif scenario.split(":")[0] == "compat":
        import torch_compat
        cases = scenario.split(":")[1].split(",") if ":" in scenario else None
        torch_compat.run(rank, world, out, cases)
        dist.destroy_process_group()
    else:
        run_fault(rank, world, out, scenario)


if __name__ == "__main__":
    main()
