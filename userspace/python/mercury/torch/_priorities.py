# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Which channel each parameter's gradient travels on.

Tags come from a Mercury plan (tensor name -> tag, 1 most urgent) or, with
no plan, from the order the model's modules first run in forward. Either
way libmercury's tag rule (mercury_plan_wire_tag()) puts them on the K
channels: tags that fit go as they are, wider ones are squeezed keeping
their order.
"""
import json
import os

import mercury

from ._errors import MercuryTorchError

# Wrappers that prefix every parameter name: DistributedDataParallel and
# DataParallel ("module."), torch.compile ("_orig_mod.").
WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def strip_prefixes(name):
    """conv1.weight for module._orig_mod.conv1.weight."""
    changed = True
    while changed:
        changed = False
        for p in WRAPPER_PREFIXES:
            if name.startswith(p):
                name = name[len(p):]
                changed = True
    return name


def load_plan(plan):
    """{tensor name: tag} from a mercury.Plan, a dict, or a file (a plan
    JSON, or an h200-schema profile, whose default plan libmercury builds)."""
    if isinstance(plan, mercury.Plan):
        return {name: tag for name, tag, *_ in plan.entries()}
    if isinstance(plan, dict):
        return dict(plan)
    if isinstance(plan, (str, os.PathLike)):
        try:
            with open(plan) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise MercuryTorchError("plan %s: %s" % (plan, e)) from None
        try:
            if isinstance(doc, dict) and "grad_ready" in doc:
                p = mercury.Plan.from_profile(plan)
            else:
                p = mercury.Plan.load(plan)
        except mercury.MercuryError as e:
            raise MercuryTorchError("plan %s: %s" % (plan, e)) from None
        return load_plan(p)
    raise MercuryTorchError("plan must be a mercury.Plan, a dict or a path, "
                            "not %s" % type(plan).__name__)


def squeeze(tags, channels):
    """{key: tag} -> {key: channel 1..channels}, by libmercury's rule."""
    try:
        plan = mercury.Plan.build(tags.items(), levels=channels)
        return {k: plan.wire_tag(k) for k in tags}
    except mercury.MercuryError as e:
        raise MercuryTorchError("plan: %s" % e) from None


def from_plan(names, plan, channels):
    """names: parameter names of the model (any wrapper prefixes).
    Returns {name: channel}. Every name must be in the plan."""
    table = {}
    for tensor, tag in load_plan(plan).items():
        if tag < 1:
            raise MercuryTorchError("plan: tensor %s has tag %d; tags start "
                                    "at 1 (0 is the untagged class)"
                                    % (tensor, tag))
        table[strip_prefixes(tensor)] = tag
    missing = [name for name in names if strip_prefixes(name) not in table]
    if missing:
        more = len(missing) - 5
        raise MercuryTorchError(
            "plan has no tag for parameter %s%s (would be tag 0, the "
            "untagged class); make the plan from this model's profile "
            "(python3 -m mercury.torch profile)"
            % (", ".join(repr(m) for m in missing[:5]),
               " and %d more" % more if more > 0 else ""))
    # the whole plan is squeezed, as the tagger and mercury-ps squeeze it
    wire = squeeze(table, channels)
    return {name: wire[strip_prefixes(name)] for name in names}


def from_forward_order(names, first_call, channels):
    """first_call: {name: index of the first forward call of any module
    owning it, or None if none ran}. Parameters nobody used go last."""
    big = len(names) + 1
    order = sorted(range(len(names)), key=lambda i: (
        first_call.get(names[i]) if first_call.get(names[i]) is not None
        else big, i))
    return squeeze({names[i]: pos + 1 for pos, i in enumerate(order)},
                   channels)
