# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""mercury.torch's side of tests/plan.sh: the channel tag the Python
binding gives each parameter, through _priorities.from_plan().

    wire_tags.py NAMES PLAN LEVELS OUT [PLAN LEVELS OUT ...]

NAMES: one tensor name a line; PLAN: a plan, or an h200 profile (its
default plan); writes "name<TAB>tag" lines to OUT. torch is not needed:
_priorities.py is loaded without the package's __init__, which imports it.
"""
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PKG)
import mercury  # noqa: E402

pkg = types.ModuleType("mercury.torch")
pkg.__path__ = [os.path.join(PKG, "mercury", "torch")]
sys.modules["mercury.torch"] = pkg
from mercury.torch import _priorities  # noqa: E402


def main(argv):
    if len(argv) < 4 or (len(argv) - 1) % 3:
        sys.exit("usage: wire_tags.py NAMES PLAN LEVELS OUT [...]")
    with open(argv[0]) as f:
        names = [line.rstrip("\n") for line in f]
    for plan, levels, out in zip(argv[1::3], argv[2::3], argv[3::3]):
        tags = _priorities.from_plan(names, plan, int(levels))
        with open(out, "w") as f:
            for n in names:
                f.write("%s\t%d\n" % (n, tags[n]))


if __name__ == "__main__":
    main(sys.argv[1:])
