# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Training loops a DDP user writes, each run under stock DDP and under
mercury.torch with the same seeds and data (torch_worker.py compat).

Every case returns {"ddp": {...}, "mercury": {...}} with the final
parameters ("params") and what the loop observed ("out": losses, norms,
evaluation outputs), or, for the checks of distribute(), the error each
rank got ("error"). A case that raises records its traceback instead, so
one failing case does not hide the others. test_torch.py compares.

Rank 1 sleeps LAG seconds before each backward, so rank 0's step() finds
its all-reduces unfinished: its steps are deferred to the next forward,
the path these cases are about.
"""
import importlib.util
import os
import time
import traceback

import torch
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
import torchvision

import mercury.torch

LAG = 0.03
CHANNELS = 2
TIMEOUT = 20


class TinyLM(torch.nn.Module):
    """A TransformerEncoder language model whose head is the embedding."""

    def __init__(self, vocab=32, d=16):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        layer = torch.nn.TransformerEncoderLayer(
            d, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 2,
                                               enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight      # tied

    def forward(self, tok):
        return self.head(self.enc(self.emb(tok)))


class Mlp(torch.nn.Module):
    """extra runs only when asked (the same on every rank)."""

    def __init__(self, bn=False):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 16)
        self.bn = torch.nn.BatchNorm1d(16) if bn else torch.nn.Identity()
        self.extra = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x, extra=True):
        h = torch.relu(self.bn(self.fc1(x)))
        if extra:
            h = torch.relu(self.extra(h))
        return self.head(h)


def gen(rank, it, salt=0):
    return torch.Generator().manual_seed(100003 * salt + 1000 * it + rank)


def mlp_batch(rank, it, salt=0):
    g = gen(rank, it, salt)
    return (torch.randn(8, 12, generator=g),
            torch.randint(0, 4, (8,), generator=g))


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                           weight_decay=1e-3)


def lag(rank):
    if rank == 1:
        time.sleep(LAG)


def build_lm(rank):
    torch.manual_seed(rank)
    m = TinyLM()
    return m, sgd(m)


def step_lm(rank, it, net, opt, ctx):
    tok = torch.randint(0, 32, (4, 9), generator=gen(rank, it))
    opt.zero_grad()
    logits = net(tok[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 32), tok[:, 1:].reshape(-1))
    lag(rank)
    loss.backward()
    opt.step()
    return loss.item()


def build_vit(rank):
    torch.manual_seed(rank)
    m = torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2,
        hidden_dim=32, mlp_dim=64, num_classes=10)
    return m, torch.optim.SGD(m.parameters(), lr=0.02, momentum=0.9)


def step_vit(rank, it, net, opt, ctx):
    g = gen(rank, it)
    x = torch.randn(4, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (4,), generator=g)
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    lag(rank)
    loss.backward()
    opt.step()
    return loss.item()


def build_mlp(rank, bn=False):
    torch.manual_seed(rank)
    m = Mlp(bn)
    return m, sgd(m)


def step_plain(rank, it, net, opt, ctx):
    x, y = mlp_batch(rank, it)
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    lag(rank)
    loss.backward()
    opt.step()
    return loss.item()


def step_clip(rank, it, net, opt, ctx):
    x, y = mlp_batch(rank, it)
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    lag(rank)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(ctx["model"].parameters(), 0.1)
    opt.step()
    return norm.item()


def step_unused(set_to_none):
    def step(rank, it, net, opt, ctx):
        x, y = mlp_batch(rank, it)
        opt.zero_grad(set_to_none=set_to_none)
        loss = F.cross_entropy(net(x, extra=it % 3 == 0), y)
        lag(rank)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def step_accumulate(rank, it, net, opt, ctx):
    opt.zero_grad()
    sync = ctx["no_sync"]
    with sync():
        x, y = mlp_batch(rank, it, salt=1)
        loss = F.cross_entropy(net(x), y) / 2
        loss.backward()
    x, y = mlp_batch(rank, it, salt=2)
    loss2 = F.cross_entropy(net(x), y) / 2
    lag(rank)
    loss2.backward()
    opt.step()
    return loss.item() + loss2.item()


def step_autocast(rank, it, net, opt, ctx):
    x, y = mlp_batch(rank, it)
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = net(x)
    loss = F.cross_entropy(out.float(), y)
    lag(rank)
    loss.backward()
    opt.step()
    return loss.item()


def step_late(rank, it, net, opt, ctx):
    # rank 1 much later: rank 0's step is still pending when it returns
    if rank == 1:
        time.sleep(10 * LAG)
    return step_plain(rank, it, net, opt, ctx)


def saved_state(rank, net, model, opt):
    # Right after step(), without synchronize(): what a checkpoint holds.
    state = opt.state_dict()["state"]
    return ([t.clone() for t in model.state_dict().values()] +
            [state[i]["momentum_buffer"].clone() for i in sorted(state)])


def eval_bn(rank, net, model, opt):
    # Each rank trained on its own data, so its running statistics differ
    # unless they come from rank 0 (DDP: broadcast before each forward).
    model.eval()
    with torch.no_grad():
        out = net(torch.randn(6, 12, generator=gen(0, 99)))
    model.train()
    return out


def lambda_warmup(opt):
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / 6)


def lambda_alternate(opt):
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 1.0 if s % 2 == 0 else 0.1)


def compare(rank, build, step, iters, ddp_kw=None, sched=None,
            sched_before=False, after=None, ddp_hook=None, mercury_kw=None):
    res = {}
    for kind in ("ddp", "mercury"):
        model, opt = build(rank)
        s = None
        if kind == "ddp":
            net = torch.nn.parallel.DistributedDataParallel(
                model, **(ddp_kw or {}))
            if ddp_hook:
                net.register_comm_hook(None, ddp_hook)
            ctx = {"model": model, "no_sync": net.no_sync}
            if sched:
                s = sched(opt)
        else:
            if sched and sched_before:
                s = sched(opt)
            model, opt = mercury.torch.distribute(
                model, opt, channels=CHANNELS, timeout=TIMEOUT,
                **(mercury_kw or {}))
            if sched and not sched_before:
                s = sched(opt)
            net = model
            ctx = {"model": model, "no_sync": getattr(opt, "no_sync", None)}
        out, deferred = [], []
        for it in range(iters):
            out.append(step(rank, it, net, opt, ctx))
            if kind == "mercury":
                # parameters whose step waits for the next forward
                deferred.append(len(opt.mercury.pending))
            if s:
                s.step()
        r = {"out": out, "deferred": deferred}
        if after:
            r["after"] = after(rank, net, model, opt)
        if kind == "mercury":
            r["eager"] = getattr(opt.mercury, "eager_parameters",
                                 lambda: None)()
            opt.synchronize()
        r["params"] = {n: p.detach().clone()
                       for n, p in model.named_parameters()}
        if kind == "mercury":
            opt.close()
        res[kind] = r
    return res


def expect_error(rank, make, **kw):
    try:
        model, opt = make(rank)
        model, opt = mercury.torch.distribute(model, opt, **kw)
    except mercury.torch.MercuryTorchError as e:
        return {"error": str(e)}
    opt.close()
    return {"error": None}


def mismatched_model(rank):
    torch.manual_seed(0)
    m = Mlp()
    if rank == 1:
        m.head = torch.nn.Linear(16, 5)
    return m, sgd(m)


class Branches(torch.nn.Module):
    """Two branches of the same shapes; forward(x, which) takes one."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 16)
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x, which):
        h = torch.relu(self.fc1(x))
        h = torch.relu((self.a if which == 0 else self.b)(h))
        return self.head(h)


def branch_by_rank(rank):
    """Control flow that differs by rank (rank 1 takes branch b, the
    others a): the channels' all-reduces pair a's gradients with b's,
    whose shapes match, so nothing in gloo notices; the per-iteration
    check must raise, naming the parameter, on every rank."""
    torch.manual_seed(0)
    m = Branches()
    model, opt = mercury.torch.distribute(m, sgd(m), channels=CHANNELS,
                                          timeout=TIMEOUT)
    err = None
    try:
        for it in range(3):
            x, y = mlp_batch(rank, it)
            opt.zero_grad()
            F.cross_entropy(model(x, 1 if rank == 1 else 0), y).backward()
            opt.step()
        opt.synchronize()
    except mercury.torch.MercuryTorchError as e:
        err = str(e)
    opt.close()
    return {"error": err, "iteration": it}


def bench_models(rank):
    """The parameters stepped when a forward starts, rather than by their
    module's pre-hook, in bench/torch's models: none, so their overlap is
    that of the module-by-module schedule the benchmark measured."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "..", "..", "bench", "torch", "models.py")
    spec = importlib.util.spec_from_file_location("bench_models", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    eager = {}
    for name in ("resnet18", "vgg11"):
        torch.manual_seed(0)
        model = mod.MODELS[name]()
        model, opt = mercury.torch.distribute(model, sgd(model),
                                              channels=CHANNELS,
                                              timeout=TIMEOUT)
        for it in range(2):
            g = gen(rank, it)
            x = torch.randn(2, 3, 32, 32, generator=g)
            y = torch.randint(0, 10, (2,), generator=g)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        eager[name] = opt.mercury.eager_parameters()
        opt.close()
    return {"eager": eager}


CASES = {
    "lm": lambda r: compare(r, build_lm, step_lm, 4),
    "vit": lambda r: compare(r, build_vit, step_vit, 3),
    "sched_after": lambda r: compare(r, build_mlp, step_plain, 6,
                                     sched=lambda_warmup),
    "sched_before": lambda r: compare(r, build_mlp, step_plain, 6,
                                      sched=lambda_alternate,
                                      sched_before=True),
    "clip": lambda r: compare(r, build_mlp, step_clip, 5),
    "zero_keep": lambda r: compare(r, build_mlp, step_unused(False), 6,
                                   ddp_kw={"find_unused_parameters": True}),
    "zero_none": lambda r: compare(r, build_mlp, step_unused(True), 6,
                                   ddp_kw={"find_unused_parameters": True}),
    "bn_eval": lambda r: compare(r, lambda k: build_mlp(k, bn=True),
                                 step_plain, 3, after=eval_bn),
    "no_sync": lambda r: compare(r, build_mlp, step_accumulate, 4),
    "autocast": lambda r: compare(r, build_mlp, step_autocast, 4),
    "state_dict": lambda r: compare(r, build_mlp, step_late, 3,
                                    after=saved_state),
    "fp16": lambda r: compare(r, build_mlp, step_plain, 4,
                              ddp_hook=default_hooks.fp16_compress_hook,
                              mercury_kw={"compression": "fp16"}),
    "bf16": lambda r: expect_error(r, build_mlp, channels=CHANNELS,
                                   timeout=TIMEOUT, compression="bf16"),
    "compression_bad": lambda r: expect_error(r, build_mlp,
                                              channels=CHANNELS,
                                              timeout=TIMEOUT,
                                              compression="int8"),
    "mismatch_shape": lambda r: expect_error(r, mismatched_model,
                                             channels=CHANNELS,
                                             timeout=TIMEOUT),
    "mismatch_channels": lambda r: expect_error(r, build_mlp,
                                                channels=2 + r,
                                                timeout=TIMEOUT),
    "bench_models": bench_models,
    "branch_by_rank": branch_by_rank,
    # Last: rank 1 does not call distribute() at all.
    "absent": lambda r: (expect_error(r, build_mlp, channels=CHANNELS,
                                      timeout=3) if r != 1 else {}),
}


def run(rank, world, out, cases=None):
    res = {}
    for name in cases or CASES:
        t0 = time.perf_counter()
        try:
            res[name] = CASES[name](rank)
        except Exception:
            res[name] = {"traceback": traceback.format_exc()}
        res[name]["seconds"] = time.perf_counter() - t0
    torch.save(res, out)
