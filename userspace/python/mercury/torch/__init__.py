# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""mercury.torch: data-parallel PyTorch training whose gradients travel in
Mercury's order (Documentation/torch.md).

Two lines turn it on in a stock torch.distributed (gloo) training loop::

    import mercury.torch
    model, optimizer = mercury.torch.distribute(model, optimizer)

instead of wrapping the model in DistributedDataParallel. Each gradient is
all-reduced as soon as backward produces it, on one of K gloo process
groups whose sockets carry the class's tag (DSCP by default), and each
module's next forward waits only for its own parameters.

Profile a model for the planner and the simulator::

    python3 -m mercury.torch profile --model torchvision:resnet18 \\
        --input 8x3x64x64 -o resnet18.json
"""
from ._errors import MercuryTorchError, PeerError
from ._overlap import DistributedOptimizer, distribute
from ._priorities import WRAPPER_PREFIXES, strip_prefixes
from .profile import profile, write_profile

__all__ = ["distribute", "DistributedOptimizer", "MercuryTorchError",
           "PeerError", "profile", "write_profile", "strip_prefixes",
           "WRAPPER_PREFIXES"]
