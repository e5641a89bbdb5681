# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""One rank of bench/torch: a plain training loop under one of the
data-parallel wrappers a PyTorch user can choose, timed; run by
bench/torch/run.sh in the rank's network namespace (torch.distributed
env:// rendezvous).

    worker.py --scheme SCHEME --model resnet18 --batch 16 --size 64 \\
        --iters 12 --warmup 2 -o rank0.json
    worker.py --tune 1,5,25 ...     DDP's bucket_cap_mb sweep (below)
    worker.py --probe SCHEME...     which schemes this torch can run:
                                    each DDP scheme takes steps in a
                                    one-rank group (no other output)

SCHEME is the training code, each configured as its documentation tells
a user to:
  ddp           DistributedDataParallel(model), stock
  ddp-tuned     DDP(model, bucket_cap_mb=--bucket-cap-mb,
                gradient_as_bucket_view=--bucket-view)
  ddp-fp16      DDP + register_comm_hook(None, fp16_compress_hook)
  ddp-bf16      DDP + bf16_compress_hook (where torch has it)
  ddp-powersgd  DDP + powerSGD_hook with PowerSGDState(None,
                matrix_approximation_rank=--powersgd-rank,
                start_powerSGD_iter=--powersgd-start,
                min_compression_rate=0.5), as the hook's own example
  mercury       mercury.torch.distribute(model, optimizer, channels=N,
                tag_source="dscp")
  mercury-fp16  the same with compression="fp16", where distribute()
                takes a compression argument

Writes the per-iteration start times and phases (forward, the part of
it blocked on the network, backward, step), the end (the moment the last step
is applied: mercury.torch after synchronize(), which waits for the last
all-reduces, so every wrapper is charged all its traffic), the local
loss of every iteration and a checksum of the final parameters.
report.py takes the throughput over all iterations, start to end. The
it_per_s written here (after --warmup) is kept for reference only: it
would charge mercury.torch one iteration's traffic more than DDP, whose
first all-reduces are over before its second forward.

--tune CAPS: for each bucket_cap_mb of CAPS, with gradient_as_bucket_view
on and off, in turn, a fresh model (the same seed) under
DDP(bucket_cap_mb=CAP, gradient_as_bucket_view=VIEW) trains --iters
iterations; writes each pair's seconds per iteration after the first
("tune": {"CAP:on" or "CAP:off": s}) for run.sh to choose ddp-tuned's.
"""
import argparse
import inspect
import json
import os
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "userspace", "python"))
sys.path.insert(0, here)

import torch                                    # noqa: E402
import torch.distributed as dist                # noqa: E402

import mercury.torch                            # noqa: E402
from models import MODELS                       # noqa: E402

SCHEMES = ("ddp", "ddp-tuned", "ddp-fp16", "ddp-bf16", "ddp-powersgd",
           "mercury", "mercury-fp16")
# seconds the process group's teardown may take after the record is written
TEARDOWN_S = 30


def comm_hooks():
    """torch's DDP communication hooks module, or None."""
    try:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        return default_hooks
    except ImportError:
        return None


def powersgd():
    try:
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
        return powerSGD_hook
    except ImportError:
        return None


def takes_compression():
    """Whether mercury.torch.distribute() accepts a compression argument:
    its own signature, or, where it passes **kw on, DistributedOptimizer's."""
    for f in (mercury.torch.distribute,
              getattr(mercury.torch, "DistributedOptimizer", None)):
        if f is None:
            continue
        try:
            ps = inspect.signature(f).parameters
        except (TypeError, ValueError):
            continue
        if "compression" in ps:
            return True
        if not any(p.kind is p.VAR_KEYWORD for p in ps.values()):
            return False
    return False


def unavailable(scheme):
    """Why this torch (or mercury.torch) cannot run scheme; None if it can.
    Features are probed, never versions."""
    hooks = comm_hooks()
    if scheme in ("ddp-fp16", "ddp-bf16"):
        name = scheme[4:] + "_compress_hook"
        if hooks is None or not hasattr(hooks, name):
            return "torch has no ddp_comm_hooks.default_hooks.%s" % name
    if scheme == "ddp-powersgd":
        m = powersgd()
        if m is None or not hasattr(m, "powerSGD_hook") or not hasattr(m, "PowerSGDState"):
            return "torch has no ddp_comm_hooks.powerSGD_hook"
    if scheme == "mercury-fp16" and not takes_compression():
        return "mercury.torch.distribute() takes no compression argument yet"
    return None


def try_step(a, scheme):
    """None if scheme's wrapper takes a training step on a small model in
    the current (one-rank) process group; else the error's first line."""
    a = argparse.Namespace(**vars(a))
    a.scheme = scheme
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    try:
        net, opt, _ = wrap(a, model, opt)
        for _ in range(3):
            opt.zero_grad()
            net(torch.randn(8, 64)).sum().backward()
            opt.step()
    except Exception as e:                      # noqa: BLE001 (any refusal)
        return "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    return None


def wrap(a, model, optimizer, bucket_cap_mb=None, bucket_view=None):
    """(net, optimizer, info) of a.scheme around model; info says how the
    scheme was configured (written to the record)."""
    s = a.scheme
    info = {}
    if s.startswith("mercury"):
        kw = {"channels": a.channels, "tag_source": "dscp", "job": a.job}
        if s == "mercury-fp16":
            kw["compression"] = "fp16"
        model, optimizer = mercury.torch.distribute(model, optimizer, **kw)
        info = {k: v for k, v in kw.items()}
        return model, optimizer, info
    kw = {}
    if s == "ddp-tuned" or bucket_cap_mb is not None:
        kw = {"bucket_cap_mb": bucket_cap_mb if bucket_cap_mb is not None
              else a.bucket_cap_mb,
              "gradient_as_bucket_view": bucket_view if bucket_view is not None
              else a.bucket_view == "on"}
    net = torch.nn.parallel.DistributedDataParallel(model, **kw)
    info.update(kw)
    if s in ("ddp-fp16", "ddp-bf16"):
        name = s[4:] + "_compress_hook"
        net.register_comm_hook(None, getattr(comm_hooks(), name))
        info["comm_hook"] = name
    elif s == "ddp-powersgd":
        m = powersgd()
        state = m.PowerSGDState(process_group=None,
                                matrix_approximation_rank=a.powersgd_rank,
                                start_powerSGD_iter=a.powersgd_start,
                                min_compression_rate=0.5)
        net.register_comm_hook(state, m.powerSGD_hook)
        info.update(comm_hook="powerSGD_hook",
                    matrix_approximation_rank=a.powersgd_rank,
                    start_powerSGD_iter=a.powersgd_start,
                    min_compression_rate=0.5)
    return net, optimizer, info


def make_data(a, rank):
    """Each rank its own generated shard, the same in every scheme."""
    g = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(a.batch, 3, a.size, a.size, generator=g),
             torch.randint(0, 10, (a.batch,), generator=g))
            for _ in range(a.iters)]


def new_model(a):
    """Same model on every rank and in every scheme."""
    torch.manual_seed(0)
    model = MODELS[a.model]()
    return model, torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)


def train(net, optimizer, data, mercury_opt):
    """The loop: (starts, end, losses, phases)."""
    loss_fn = torch.nn.CrossEntropyLoss()

    def waited():
        return mercury_opt.mercury.wait_seconds if mercury_opt else 0.0

    dist.barrier()
    # --- BT_BULK (bench/shared): tell run.sh that training starts, so
    # that its bulk transfer runs beside the training, not the start-up ---
    if os.environ.get("BT_READY_FILE"):
        with open(os.environ["BT_READY_FILE"], "w") as f:
            f.write("%.3f\n" % time.time())
    # --- end BT_BULK ---
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
    if mercury_opt:
        optimizer.synchronize()
    end = time.perf_counter()
    return starts, end, losses, phases


def tune(a, rank):
    """DDP's sweep: seconds per iteration after the first, for each cap
    of a.tune with gradient_as_bucket_view on and off ("CAP:on",
    "CAP:off")."""
    res = {}
    data = make_data(a, rank)
    for cap in [float(c) for c in a.tune.split(",")]:
        for view in (True, False):
            model, opt = new_model(a)
            net, opt, _ = wrap(a, model, opt, bucket_cap_mb=cap, bucket_view=view)
            starts, end, _, _ = train(net, opt, data, None)
            res["%g:%s" % (cap, "on" if view else "off")] = (
                (end - starts[1]) / (len(starts) - 1)
                if len(starts) > 1 else end - starts[0])
            del net
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scheme", choices=SCHEMES, default="ddp")
    ap.add_argument("--probe", nargs="+", metavar="SCHEME",
                    help="print 'SCHEME ok' or 'SCHEME no: why' for each, "
                    "and nothing else (no process group)")
    ap.add_argument("--tune", metavar="CAPS",
                    help="comma-separated bucket_cap_mb values to time")
    ap.add_argument("--model", choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--job", type=int, default=0,
                    help="mercury.torch's job priority (0 most urgent)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--bucket-view", choices=("on", "off"), default="on",
                    help="ddp-tuned's gradient_as_bucket_view")
    ap.add_argument("--powersgd-rank", type=int, default=2)
    ap.add_argument("--powersgd-start", type=int, default=2)
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    if a.probe:
        # hasattr is not enough: DDP refuses some hooks when they are
        # registered (1.13's bf16_compress_hook wants CUDA and NCCL), so
        # each DDP scheme also takes one step in a one-rank gloo group.
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0,
                                world_size=1)
        for s in a.probe:
            why = unavailable(s) if s in SCHEMES else "not a scheme of worker.py"
            if why is None and s.startswith("ddp"):
                why = try_step(a, s)
            print("%s %s" % (s, "ok" if why is None else "no: " + why))
        dist.destroy_process_group()
        return 0
    if not a.model or not a.output:
        ap.error("--model and -o are required")
    why = unavailable(a.scheme)
    if why:
        print("worker.py: %s: %s" % (a.scheme, why), file=sys.stderr)
        return 3

    # Each rank gets its share of the host's cores, as one rank per node
    # would have its node's.
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.tune:
        a.scheme = "ddp-tuned"
        res = {"rank": rank, "model": a.model, "iters": a.iters,
               "tune": tune(a, rank)}
    else:
        model, optimizer = new_model(a)
        data = make_data(a, rank)
        net, optimizer, info = wrap(a, model, optimizer)
        merc = optimizer if a.scheme.startswith("mercury") else None
        starts, end, losses, phases = train(net, optimizer, data, merc)
        # the wall-clock time of the first forward: runs of two jobs at
        # once are compared over the seconds both trained
        start_wall = time.time() - (time.perf_counter() - starts[0])
        # Everything measured is over on this rank; a checksum of the
        # final parameters shows every rank (and scheme) ended in the
        # same place.
        with torch.no_grad():
            csum = float(sum(p.double().sum() for p in model.parameters()))
        res = {
            "rank": rank, "world": world, "scheme": a.scheme,
            "model": a.model, "config": info,
            "batch": a.batch, "size": a.size, "iters": a.iters,
            "warmup": a.warmup,
            "params": sum(p.numel() for p in model.parameters()),
            "starts": [t - starts[0] for t in starts], "end": end - starts[0],
            "start_wall": start_wall,
            "losses": losses, "param_sum": csum, "phases": phases,
            "it_per_s": (a.iters - a.warmup) / (end - starts[a.warmup]),
        }
        if merc:
            res["channels"] = [[t, r] for t, r, _ in
                               optimizer.mercury.channel_sockets()]
            optimizer.close()
    with open(a.output + ".tmp", "w") as f:
        json.dump(res, f)
    os.rename(a.output + ".tmp", a.output)
    # The record is written. torch 1.13's gloo teardown can hang once the
    # peer holding the rendezvous store has exited (seen: a rank blocked
    # in destroy_process_group until run.sh's timeout, 15 min lost); wait
    # for it a while, then leave without the finalizers that would hang too.
    t = threading.Thread(target=dist.destroy_process_group, daemon=True)
    t.start()
    t.join(TEARDOWN_S)
    if t.is_alive():
        print("worker.py: destroy_process_group did not return in %d s; the "
              "record is written, exiting" % TEARDOWN_S, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
