# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Profile a model in the schema of profiles/h200/*.json.

One training step is timed per iteration: forward hooks on every leaf
module give forward_calls (start, duration, output bytes), a hook on each
parameter's AccumulateGrad node gives grad_ready (the time its gradient was
complete, from the start of backward), and the step is timed whole. After
warm-up, every figure is the median over the measured iterations, as in
the shipped profiles. A tied tensor is listed once in grad_ready, under the
owner that forward calls first, with shared_with naming the other owners
(profiles/README.md).
"""
import json
import os
import statistics
import tempfile
import time

import torch

from ._errors import MercuryTorchError
from ._overlap import _owners


def _bytes(out):
    if isinstance(out, torch.Tensor):
        return out.numel() * out.element_size()
    if isinstance(out, (list, tuple)):
        return sum(_bytes(o) for o in out)
    if isinstance(out, dict):
        return sum(_bytes(o) for o in out.values())
    return 0


def _default_loss(out, target):
    if target is not None and out.dim() == 2:
        return torch.nn.functional.cross_entropy(out, target)
    return out.float().square().mean()


def profile(model, make_batch, loss_fn=None, optimizer=None, iters=5,
            warmup=2, name=None, batch=None):
    """Run warmup + iters training steps of model and return the profile.

    make_batch() -> (inputs, target): inputs a tensor or a tuple of them
    (passed as model(*inputs)), target anything loss_fn takes, or None.
    loss_fn(output, target) defaults to cross-entropy for (N, C) outputs
    with a target, else the mean square of the output. optimizer defaults
    to SGD (lr 1e-3) over the model's parameters.
    """
    if iters < 1 or warmup < 0:
        raise MercuryTorchError("profile: iters >= 1 and warmup >= 0")
    loss_fn = loss_fn or _default_loss
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not params:
        raise MercuryTorchError("profile: the model has no trainable "
                                "parameters")
    optimizer = optimizer or torch.optim.SGD([p for _, p in params], lr=1e-3)
    dev = params[0][1].device
    sync = (torch.cuda.synchronize if dev.type == "cuda"
            else (lambda: None))
    leaves = [(n, m) for n, m in model.named_modules()
              if not any(True for _ in m.children())]
    leaf_names = {id(m): n for n, m in leaves}
    calls, ready = [], {}
    t0 = [0.0]
    handles = []

    def pre(m, args):
        sync()
        calls.append([leaf_names[id(m)], time.perf_counter(), 0.0, 0])

    def post(m, args, out):
        sync()
        c = calls[-1] if calls and calls[-1][0] == leaf_names[id(m)] else \
            next(c for c in reversed(calls) if c[0] == leaf_names[id(m)])
        c[2] = time.perf_counter()
        c[3] = _bytes(out)

    for _, m in leaves:
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    accs = []
    for n, p in params:
        acc = p.expand_as(p).grad_fn.next_functions[0][0]

        def hook(*unused, n=n):
            sync()
            ready[n] = time.perf_counter() - t0[0]
        handles.append(acc.register_hook(hook))
        accs.append(acc)

    runs = []
    model.train()
    try:
        for it in range(warmup + iters):
            inputs, target = make_batch()
            if not isinstance(inputs, (tuple, list)):
                inputs = (inputs,)
            calls.clear()
            ready.clear()
            optimizer.zero_grad()
            sync()
            start = time.perf_counter()
            out = model(*inputs)
            loss = loss_fn(out, target)
            sync()
            t_fwd = time.perf_counter()
            t0[0] = t_fwd
            loss.backward()
            sync()
            t_bwd = time.perf_counter()
            optimizer.step()
            sync()
            t_step = time.perf_counter()
            if it >= warmup:
                runs.append({
                    "fwd": t_fwd - start, "bwd": t_bwd - t_fwd,
                    "step": t_step - t_bwd,
                    "calls": [(c[0], c[1] - start, c[2] - c[1], c[3])
                              for c in calls],
                    "ready": dict(ready)})
    finally:
        for h in handles:
            h.remove()

    seq = [c[0] for c in runs[0]["calls"]]
    for r in runs[1:]:
        if [c[0] for c in r["calls"]] != seq:
            raise MercuryTorchError("profile: the forward pass calls "
                                    "different modules from one iteration "
                                    "to the next")

    def ms(xs):
        return round(statistics.median(xs) * 1e3, 4)

    forward_calls = []
    for i, mname in enumerate(seq):
        forward_calls.append({
            "call": i, "module": mname,
            "start_ms": ms([r["calls"][i][1] for r in runs]),
            "fwd_ms": ms([r["calls"][i][2] for r in runs]),
            "out_bytes": runs[0]["calls"][i][3]})
    first_call = {}
    for i, mname in enumerate(seq):
        first_call.setdefault(mname, i)

    owners = _owners(model)
    leafset = set(leaf_names.values())
    grad_ready = []
    for n, p in params:
        if any(n not in r["ready"] for r in runs):
            continue    # unused in this forward: no gradient to send
        own = owners.get(id(p), [])
        leaf_own = [o for o in own if o in leafset]
        # The owner forward calls first; a non-leaf owner is null, as in
        # the reference files (readers then use the name's parent path).
        leaf_own.sort(key=lambda o: (first_call.get(o, len(seq)),
                                     own.index(o)))
        e = {"param": n, "module": leaf_own[0] if leaf_own else None,
             "numel": p.numel(), "shape": list(p.shape),
             "ready_ms": ms([r["ready"][n] for r in runs])}
        others = [o for o in own if o != e["module"]]
        if e["module"] is None:
            # its parent path names it (the root "" for a parameter of
            # the model itself, such as a ViT's class_token)
            parent = n.rsplit(".", 1)[0] if "." in n else ""
            others = [o for o in others if o != parent]
        if others:
            e["shared_with"] = others
        grad_ready.append(e)
    grad_ready.sort(key=lambda e: e["ready_ms"])

    modules = [{"module": n, "type": type(m).__name__,
                "params": sum(p.numel() for p in m._parameters.values()
                              if p is not None)}
               for n, m in leaves]
    if dev.type == "cuda":
        device = torch.cuda.get_device_name(dev)
    else:
        device = "cpu (%d threads)" % torch.get_num_threads()
    return {
        "model": name or type(model).__name__,
        "batch": batch or "",
        "device": device,
        "torch": torch.__version__,
        "precision": "fp32 params and grads",
        "iters_measured": iters,
        "warmup": warmup,
        "iteration_ms": {"fwd_ms": ms([r["fwd"] for r in runs]),
                         "bwd_ms": ms([r["bwd"] for r in runs]),
                         "step_ms": ms([r["step"] for r in runs])},
        "total_params": sum(p.numel() for _, p in params),
        "modules": modules,
        "forward_calls": forward_calls,
        "grad_ready": grad_ready,
        "edges": None,
        "edges_note": "mercury.torch profile does not trace module edges; "
                      "forward_calls order is the chain",
    }


def write_profile(prof, path):
    """Write prof to path as JSON, whole or not at all: a failed write
    (a full disk, a NaN timing, which JSON cannot hold) leaves any file
    already at path as it was and no temporary beside it."""
    try:
        text = json.dumps(prof, indent=1, allow_nan=False) + "\n"
    except ValueError:
        raise MercuryTorchError("%s: the profile holds a NaN or infinite "
                                "value; not written" % path) from None
    # Through a link to its target; a device or pipe (/dev/stdout) is
    # written as it is: a rename would replace the node itself.
    path = os.path.realpath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        with open(path, "w") as f:
            f.write(text)
        return
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".",
                               dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file 0600; give it what open() would have.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
