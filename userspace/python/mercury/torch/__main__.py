# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""python3 -m mercury.torch profile --model SPEC [options] -o FILE

SPEC is torchvision:NAME (torchvision.models.NAME(num_classes=...)) or
MODULE:CALLABLE, a function returning an nn.Module (MODULE may be a .py
path). The input is random: --input 8x3x64x64 (float) with random class
targets for classifiers.
"""
import argparse
import importlib
import importlib.util
import os
import sys

from ._errors import MercuryTorchError


def _load_model(spec, classes):
    if ":" not in spec:
        raise MercuryTorchError("--model %s: expected torchvision:NAME or "
                                "MODULE:CALLABLE" % spec)
    mod, fn = spec.rsplit(":", 1)
    if mod == "torchvision":
        import torchvision
        f = getattr(torchvision.models, fn, None)
        if f is None:
            raise MercuryTorchError("--model %s: torchvision.models has no "
                                    "%s" % (spec, fn))
        return f(num_classes=classes)
    if mod.endswith(".py"):
        if not os.path.exists(mod):
            raise MercuryTorchError("--model %s: no file %s" % (spec, mod))
        s = importlib.util.spec_from_file_location("_mercury_user", mod)
        m = importlib.util.module_from_spec(s)
        s.loader.exec_module(m)
    else:
        m = importlib.import_module(mod)
    f = getattr(m, fn, None)
    if not callable(f):
        raise MercuryTorchError("--model %s: %s has no callable %s"
                                % (spec, mod, fn))
    return f()


def _shape(text):
    try:
        dims = [int(x) for x in text.lower().split("x")]
    except ValueError:
        dims = []
    if not dims or min(dims) < 1:
        raise argparse.ArgumentTypeError("%r: expected NxCxHxW, e.g. "
                                         "8x3x64x64" % text)
    return dims


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m mercury.torch")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("profile", help="time a few training steps of a "
                       "model and write an h200-schema profile")
    p.add_argument("--model", required=True,
                   help="torchvision:NAME or MODULE:CALLABLE")
    p.add_argument("--input", type=_shape, default=[8, 3, 64, 64],
                   help="input shape (default 8x3x64x64)")
    p.add_argument("--classes", type=int, default=10,
                   help="classes for targets and torchvision models "
                   "(default 10)")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)

    import torch
    from .profile import profile, write_profile
    try:
        torch.manual_seed(a.seed)
        model = _load_model(a.model, a.classes).to(a.device)
        shape = a.input

        def batch():
            x = torch.randn(*shape, device=a.device)
            y = torch.randint(0, a.classes, (shape[0],), device=a.device)
            return x, y
        prof = profile(model, batch, iters=a.iters, warmup=a.warmup,
                       name=a.model.rsplit(":", 1)[1],
                       batch="x".join(map(str, shape)))
        write_profile(prof, a.output)
    except (MercuryTorchError, OSError, RuntimeError) as e:
        print("mercury.torch profile: %s" % e, file=sys.stderr)
        return 1
    it = prof["iteration_ms"]
    print("%s: %d tensors, %.1f MB of gradients, forward %.1f ms, backward "
          "%.1f ms -> %s" % (prof["model"], len(prof["grad_ready"]),
                             4e-6 * prof["total_params"], it["fwd_ms"],
                             it["bwd_ms"], a.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
