#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Every local link and image in the tracked Markdown files resolves in a
clone: its target is a tracked file (or a folder holding one), not a
build output that only the machine that ran a benchmark has.

    scripts/check-links.py [FILE.md...]   (default: every tracked *.md)

Prints one line per broken link, "FILE:LINE: TARGET: why", and exits 1
if there is any.
"""
import os
import re
import subprocess
import sys

# [text](target) and ![alt](target), the target up to a blank or ')';
# <img src="target">.
LINK = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
IMG = re.compile(r'<img[^>]*\bsrc="([^"]+)"', re.I)
FENCE = re.compile(r'^\s*(```|~~~)')


def tracked(top):
    out = subprocess.run(["git", "-C", top, "ls-files", "-z"],
                         capture_output=True, check=True).stdout
    files = set(out.decode().split("\0")) - {""}
    dirs = set()
    for f in files:
        d = os.path.dirname(f)
        while d and d not in dirs:
            dirs.add(d)
            d = os.path.dirname(d)
    return files, dirs


def check(top, md, files, dirs):
    bad = []
    fence = False
    with open(os.path.join(top, md), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fence = not fence
                continue
            if fence:
                continue
            line = re.sub(r"`[^`]*`", "", line)    # inline code
            for m in list(LINK.finditer(line)) + list(IMG.finditer(line)):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or \
                        target.startswith("#"):
                    continue        # a URL, mailto:, or an anchor here
                path = target.split("#", 1)[0]
                rel = os.path.normpath(os.path.join(os.path.dirname(md),
                                                    path))
                if rel.startswith(".."):
                    why = "outside the tree"
                elif rel in files or rel in dirs:
                    continue
                elif os.path.exists(os.path.join(top, rel)):
                    why = "not tracked (a build output?)"
                else:
                    why = "no such file"
                bad.append("%s:%d: %s: %s" % (md, n, target, why))
    return bad


def main(argv):
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True,
                         check=True).stdout.strip()
    files, dirs = tracked(top)
    mds = argv or sorted(f for f in files if f.endswith(".md"))
    bad = []
    for md in mds:
        bad += check(top, os.path.relpath(os.path.abspath(md), top)
                     if argv else md, files, dirs)
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
