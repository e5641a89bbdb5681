# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""The TAP output of the benches' own tests (bench/torch, bench/shared):
one "ok N name" or "not ok N name" line a check, the detail of a failure
as comments, and the plan at the end."""
import sys

_n = 0
_fails = 0


def check(name, cond, detail=""):
    global _n, _fails
    _n += 1
    if not cond:
        _fails += 1
    print("%s %d %s" % ("ok" if cond else "not ok", _n, name))
    if not cond and detail:
        print("# " + str(detail).replace("\n", "\n# "))


def finish():
    """Print the plan and exit: 1 if a check failed."""
    print("1..%d" % _n)
    sys.exit(1 if _fails else 0)
