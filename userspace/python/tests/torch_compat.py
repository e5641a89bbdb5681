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

MERCURY_TEST_DEVICE=cuda runs the same cases with the models and batches
on the GPU (every rank on the first one; gloo all-reduces CUDA tensors),
deterministic kernels, and adds CUDA_CASES: torch's own GradScaler with
fp16 autocast, and fused Adam under it.
"""
import copy
import functools
import importlib.util
import inspect
import os
import time
import traceback
import weakref

import torch
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
import torchvision

import mercury.torch

LAG = 0.03
CHANNELS = 2
TIMEOUT = 20
DEVICE = torch.device(os.environ.get("MERCURY_TEST_DEVICE", "cpu"))
if DEVICE.type == "cuda":
    # the DDP and mercury runs of a case must compute the same gradients
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)


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
    return (torch.randn(8, 12, generator=g).to(DEVICE),
            torch.randint(0, 4, (8,), generator=g).to(DEVICE))


def sgd(model):
    # every model whose optimizer this builds goes to DEVICE here
    model.to(DEVICE)
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
    tok = torch.randint(0, 32, (4, 9), generator=gen(rank, it)).to(DEVICE)
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
        hidden_dim=32, mlp_dim=64, num_classes=10).to(DEVICE)
    return m, torch.optim.SGD(m.parameters(), lr=0.02, momentum=0.9)


def step_vit(rank, it, net, opt, ctx):
    g = gen(rank, it)
    x = torch.randn(4, 3, 32, 32, generator=g).to(DEVICE)
    y = torch.randint(0, 10, (4,), generator=g).to(DEVICE)
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
    with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
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
        out = net(torch.randn(6, 12, generator=gen(0, 99)).to(DEVICE))
    model.train()
    return out


def lambda_warmup(opt):
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / 6)


def lambda_alternate(opt):
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 1.0 if s % 2 == 0 else 0.1)


# ---- torch 2.x's protocols, emulated on 1.13 (Documentation/torch.md,
# "What was run and what was only read") --------------------------------


class AmpSGD(torch.optim.SGD):
    """An optimizer that, like torch 2.x's fused Adam/AdamW/SGD, sets
    _step_supports_amp_scaling: GradScaler.step() then puts grad_scale and
    found_inf on it for the length of its step() call only, and its
    step unscales by grad_scale and skips the update where found_inf is
    set (no momentum here: the update is lr * grad / grad_scale)."""
    _step_supports_amp_scaling = True

    @torch.no_grad()
    def step(self, closure=None):
        scale = getattr(self, "grad_scale", None)
        found = getattr(self, "found_inf", None)
        if found is not None and found.item():
            return None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad if scale is None else p.grad / scale
                p.add_(g, alpha=-group["lr"])
        return None


class OldContractSGD(AmpSGD):
    """The contract GradScaler deprecated: step takes grad_scaler=."""

    def step(self, closure=None, grad_scaler=None):
        return super().step(closure)


class FakeScaler:
    """GradScaler.step()'s attribute path for an optimizer with
    _step_supports_amp_scaling, without its inf check (which reads every
    gradient and so would wait for every all-reduce): the step is
    deferred, and the attributes are gone and the scale has changed (in
    place) by the time it runs."""

    def __init__(self):
        self.scale_t = torch.tensor(16.0)

    def scale(self, loss):
        return loss * self.scale_t

    def step(self, opt):
        opt.grad_scale = self.scale_t
        opt.found_inf = torch.zeros(())
        opt.step()
        del opt.grad_scale
        del opt.found_inf

    def update(self):
        self.scale_t.mul_(2.0)


def build_foreach(rank):
    # foreach=True: zero_grad(set_to_none=False) zeroes every .grad in
    # one torch._foreach_zero_ (1.13 and 2.x alike), the step is the
    # multi-tensor one
    torch.manual_seed(rank)
    m = Mlp().to(DEVICE)
    return m, torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9,
                              weight_decay=1e-3, foreach=True)


def build_amp(rank):
    torch.manual_seed(rank)
    m = Mlp().to(DEVICE)
    return m, AmpSGD(m.parameters(), lr=0.05)


def step_amp(rank, it, net, opt, ctx):
    scaler = ctx.setdefault("scaler", FakeScaler())
    x, y = mlp_batch(rank, it)
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    lag(rank)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss.item()


def step_skip(rank, it, net, opt, ctx):
    """GradScaler's other path: unscale the gradients in place (reading
    them), skip step() where one is not finite (iteration 1: an inf
    loss). Iteration 3 skips step() with finite gradients, and 4 skips
    zero_grad(): its gradients add to 3's, as under DDP. The last
    iteration skips step() too: synchronize() then finds gradients that
    no step() will apply."""
    x, y = mlp_batch(rank, it)
    if it != 4:
        opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    if it == 1:
        loss = loss * float("inf")
    lag(rank)
    (loss * 8.0).backward()
    grads = [p.grad for p in ctx["model"].parameters()
             if p.grad is not None]
    torch._foreach_mul_(grads, 1.0 / 8.0)
    finite = all(bool(torch.isfinite(g).all()) for g in grads)
    if finite and it not in (3, 5):
        opt.step()
    return loss.item() if finite else 0.0


def step_clip_foreach(rank, it, net, opt, ctx):
    """clip_grad_norm_(foreach=True) as torch 2.x computes it: one
    torch._foreach_norm and one torch._foreach_mul_ over the list of
    .grad tensors."""
    x, y = mlp_batch(rank, it)
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    lag(rank)
    loss.backward()
    grads = [p.grad for p in ctx["model"].parameters()
             if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    coef = min(0.1 / (total.item() + 1e-6), 1.0)
    torch._foreach_mul_(grads, coef)
    opt.step()
    return total.item()


class Sched2x:
    """An LR schedule that patches optimizer.step as torch 2.x's
    LRScheduler.__init__ does (patch_track_step_called): a function on the
    instance, functools.wraps of the class's step, holding it in a closure
    cell and binding it to the optimizer (held by a weak reference) at
    each call, after setting optimizer._opt_called. The rate alternates
    1, 0.1, 1, ... times the initial one."""

    def __init__(self, opt):
        if not hasattr(opt.step, "_wrapped_by_lr_sched"):
            ref = weakref.ref(opt)
            func = opt.step.__func__

            @functools.wraps(func)
            def wrapper(*args, **kwargs):
                o = ref()
                o._opt_called = True
                return func.__get__(o, o.__class__)(*args, **kwargs)

            wrapper._wrapped_by_lr_sched = True
            opt.step = wrapper
        self.opt = opt
        self.base = [g["lr"] for g in opt.param_groups]
        self.count = 0

    def step(self):
        self.count += 1
        for g, lr in zip(self.opt.param_groups, self.base):
            g["lr"] = lr * (1.0 if self.count % 2 == 0 else 0.1)


def sched_flags(rank, net, model, opt):
    # the same under DDP: the wrapper stayed, step() went through it, and
    # GradScaler's signature probe finds no grad_scaler
    return [float(getattr(opt, "_opt_called", False)),
            float(hasattr(opt.step, "_wrapped_by_lr_sched")),
            float("grad_scaler" in inspect.signature(opt.step).parameters)]


def step_restore(rank, it, net, opt, ctx):
    """A checkpoint restored right after step() (rank 1 late, so rank
    0's step is still pending): the step is that of the state it was
    taken with, then the state is replaced, as under DDP."""
    loss = step_late(rank, it, net, opt, ctx)
    if it == 0:
        ctx["saved"] = copy.deepcopy(opt.state_dict())
    elif it == 2:
        opt.load_state_dict(ctx["saved"])
    return loss


def amp_contract(rank):
    """What mercury.torch refuses, and that load_state_dict() leaves its
    step unwrapped (torch 2.x's wrapper would run the step hooks around
    it too)."""
    torch.manual_seed(0)
    m = Mlp().to(DEVICE)
    opt = OldContractSGD(m.parameters(), lr=0.05)
    Sched2x(opt)                                # before distribute()
    model, opt = mercury.torch.distribute(m, opt, channels=CHANNELS,
                                          timeout=TIMEOUT)
    res = {"sig": "grad_scaler" in inspect.signature(opt.step).parameters}
    x, y = mlp_batch(rank, 0)
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    for name, call in (
            ("kwarg", lambda: opt.step(grad_scaler=object())),
            ("attrs", lambda: FakeScaler().step(opt))):
        try:
            call()
            res[name] = None
        except mercury.torch.MercuryTorchError as e:
            res[name] = str(e)
        for k in ("grad_scale", "found_inf"):
            opt.__dict__.pop(k, None)
    opt.step()
    opt.load_state_dict(opt.state_dict())
    res["bare"] = type(opt).step is mercury.torch._overlap._MercuryOptimizer.step
    opt.synchronize()
    opt.close()
    return res


def _to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(_to_cpu(t) for t in x)
    return x


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
            r["after"] = _to_cpu(after(rank, net, model, opt))
        if kind == "mercury":
            r["eager"] = getattr(opt.mercury, "eager_parameters",
                                 lambda: None)()
            opt.synchronize()
        r["params"] = {n: p.detach().cpu().clone()
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
            x = torch.randn(2, 3, 32, 32, generator=g).to(DEVICE)
            y = torch.randint(0, 10, (2,), generator=g).to(DEVICE)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        eager[name] = opt.mercury.eager_parameters()
        opt.close()
    return {"eager": eager}


# ---- CUDA only (MERCURY_TEST_DEVICE=cuda) --------------------------------


def grad_scaler():
    # torch.amp.GradScaler(device) in newer 2.x, torch.cuda.amp's before
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(DEVICE.type, init_scale=2.0 ** 10)
    return torch.cuda.amp.GradScaler(init_scale=2.0 ** 10)


def build_fused(rank):
    torch.manual_seed(rank)
    m = Mlp().to(DEVICE)
    return m, torch.optim.Adam(m.parameters(), lr=1e-2, fused=True)


def step_scaler(clip):
    """torch's GradScaler with fp16 autocast, as its documentation writes
    the loop (with clip: unscale_, then clip_grad_norm_). Iteration 1's
    loss is inf: GradScaler skips that step and halves the scale, which
    is what the loop returns."""
    def step(rank, it, net, opt, ctx):
        scaler = ctx.setdefault("scaler", grad_scaler())
        x, y = mlp_batch(rank, it)
        opt.zero_grad()
        with torch.autocast(DEVICE.type, dtype=torch.float16):
            loss = F.cross_entropy(net(x), y)
        if it == 1:
            loss = loss * float("inf")
        lag(rank)
        scaler.scale(loss).backward()
        if clip:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(ctx["model"].parameters(), 0.1)
        scaler.step(opt)
        scaler.update()
        return scaler.get_scale()
    return step


CUDA_CASES = {
    "cuda_scaler": lambda r: compare(r, build_mlp, step_scaler(False), 5),
    "cuda_scaler_clip": lambda r: compare(r, build_mlp, step_scaler(True),
                                          5),
    # fused Adam sets _step_supports_amp_scaling: GradScaler's attribute
    # path, for real
    "cuda_fused_scaler": lambda r: compare(r, build_fused,
                                           step_scaler(False), 5),
    # fused Adam's deferred partial steps, without a scaler
    "cuda_fused": lambda r: compare(r, build_fused, step_plain, 5),
}


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
    "mismatch_job": lambda r: expect_error(r, build_mlp, channels=CHANNELS,
                                           timeout=TIMEOUT, job=r),
    # 2 channels take 2 bits: job 16's channel 2 would be tag 66, and the
    # DSCP holds 6 bits
    "job_range": lambda r: expect_error(r, build_mlp, channels=CHANNELS,
                                        timeout=TIMEOUT, job=16),
    "amp_attrs": lambda r: compare(r, build_amp, step_amp, 4),
    "amp_skip": lambda r: compare(r, build_mlp, step_skip, 6),
    "amp_contract": amp_contract,
    "zero_foreach": lambda r: compare(r, build_foreach, step_unused(False),
                                      6, ddp_kw={"find_unused_parameters":
                                                 True}),
    "clip_foreach": lambda r: compare(r, build_mlp, step_clip_foreach, 4),
    "sched_2x_before": lambda r: compare(r, build_mlp, step_plain, 5,
                                         sched=Sched2x, sched_before=True,
                                         after=sched_flags),
    "sched_2x_after": lambda r: compare(r, build_mlp, step_plain, 5,
                                        sched=Sched2x, after=sched_flags),
    "restore": lambda r: compare(r, build_mlp, step_restore, 4),
    "bench_models": bench_models,
    "branch_by_rank": branch_by_rank,
    # Last: rank 1 does not call distribute() at all.
    "absent": lambda r: (expect_error(r, build_mlp, channels=CHANNELS,
                                      timeout=3) if r != 1 else {}),
}


if DEVICE.type == "cuda":
    # before "absent", which must stay last
    _absent = CASES.pop("absent")
    CASES.update(CUDA_CASES)
    CASES["absent"] = _absent


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
