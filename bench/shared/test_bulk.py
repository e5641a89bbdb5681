#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""TAP test of bench/shared: bulk.py's window accounting (bytes per 5 s
window, empty windows written, the open one never), and report.py's
choice of windows, shares of the link and verdict on a hand-made run
directory. The benchmark itself (a guest boot) stays out of make test."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import bulk                      # noqa: E402
import report                    # noqa: E402  (bench/shared/report.py)
from tap import check, finish    # noqa: E402  (bench/torch/tap.py)


# --- bulk.Windows ---
w = bulk.Windows(100.0, 5.0)
got = []
for t, b in ((100.0, 10), (104.999, 5), (105.0, 7), (109.9, 3)):
    got += w.add(t, b)
check("bytes fall in the window of their arrival, [start, end)",
      got == [(100.0, 105.0, 15)] and w.bytes == 10, got)
got = w.add(121.0, 1)
check("windows with no byte are written as 0 (a starved bulk)",
      got == [(105.0, 110.0, 10), (110.0, 115.0, 0), (115.0, 120.0, 0)], got)
check("the open window is never closed early",
      w.advance(124.99) == [] and w.bytes == 1 and len(w.closed) == 4, w.closed)
check("advance closes what ended, with its bytes",
      w.advance(125.0) == [(120.0, 125.0, 1)] and w.bytes == 0, w.closed)
w2 = bulk.Windows(0.0, 2.5)
for i in range(1000):
    w2.add(i * 0.01, 100)
check("every byte of a steady stream is in exactly one window",
      sum(b for _, _, b in w2.closed) + w2.bytes == 100000 and
      [b for _, _, b in w2.closed] == [25000, 25000, 25000], w2.closed)
try:
    bulk.Windows(0.0, 0)
    check("a zero window width is refused", False)
except ValueError:
    check("a zero window width is refused", True)

# --- report.py's windows, shares and table ---
wins = [(10.0, 15.0, 1), (15.0, 20.0, 2), (20.0, 25.0, 3), (25.0, 30.0, 4)]
check("only windows inside the training span count",
      report.windows_in(wins, (14.0, 26.0)) == [(15.0, 20.0, 2), (20.0, 25.0, 3)])
check("every window counts without a span (a starved run)",
      report.windows_in(wins, None) == wins)
check("a window's share is its bytes over what the link carries in it",
      report.shares([(0.0, 5.0, 1875000)], 3750000.0) == [10.0])


def rank_rec(ips, iters=100):
    end = iters / ips
    return {"rank": 0, "iters": iters, "starts": [end * i / iters for i in range(iters)],
            "end": end, "losses": [1.0] * iters}


tmp = tempfile.mkdtemp()
try:
    runs = os.path.join(tmp, "runs")
    os.makedirs(runs)
    with open(os.path.join(tmp, "torch.env"), "w") as f:
        f.write('RATE=30mbit\nSHARE=10\nQUICK=0\nSCHEMES="fifo prio-last mercury-share"\n'
                'ITERS=100\nRUN_TIMEOUT=60\n')
    with open(os.path.join(tmp, "tc-mercury-share.txt"), "w") as f:
        f.write("tc qdisc add dev DEV parent 1:1 handle 10: mercury tag dscp untagged last "
                "untagged_share 10\n")
    link = 30e6 / 8 * 5          # bytes in a 5 s window at 30 Mbit/s
    idx = []
    req = 0
    # alone 2.0 it/s in every repetition; with the bulk: sch_mercury
    # 1.9, 1.8, 1.9 (ratios 0.95 0.90 0.95), the bulk 12% 20% 11% of
    # the link in its windows; prio-last 2.0 and a starved bulk (0%);
    # fifo's training with the bulk never ends (killed at RUN_TIMEOUT
    # 60 s, after 10 s of start-up in its alone runs: below 100 / 50 it/s)
    for rep in (1, 2, 3):
        for s, ips_b, pcts in (("mercury-share", (1.9, 1.8, 1.9)[rep - 1], (12, 20, 11)),
                               ("prio-last", 2.0, (0, 0, 0)), ("fifo", None, (90, 90, 90))):
            for tag, ips in (("tiny.%s.%d" % (s, rep), 2.0),
                             ("tiny.%s+bulk.%d" % (s, rep), ips_b)):
                req += 1
                idx.append("%s %d" % (tag, req))
                for k, t in ((0, 990 + 100 * req - 100 / (ips or 1)), (1, 1000 + 100 * req)):
                    p = os.path.join(runs, "%s.cpu%d" % (tag, k))
                    with open(p, "w") as f:
                        f.write("cpu 1 1 1 1 1 1 1 1\n")
                    os.utime(p, (t, t))
                for r in (0, 1) if ips else ():
                    p = os.path.join(runs, "%s.r%d.json" % (tag, r))
                    with open(p, "w") as f:
                        json.dump(rank_rec(ips), f)
                    # the record ends at 1000 + 100 * req: the span is
                    # [1000 + 100 * req - 100 / ips, 1000 + 100 * req]
                    os.utime(p, (1000 + 100 * req, 1000 + 100 * req))
                if "+bulk" in tag:
                    with open(os.path.join(runs, tag + ".tapdrops"), "w") as f:
                        f.write("5\n0\n%d\n0\n" % (5 + 7 * rep))   # 7, 14, 21 dropped
                    end = 1000 + 100 * req
                    t0 = end - 100 / (ips or 2) - 2      # the bulk starts first
                    with open(os.path.join(runs, tag + ".bulk"), "w") as f:
                        # a window before the span (100%), whole windows
                        # inside it, and one across its end
                        f.write("%.3f %.3f %d\n" % (t0, t0 + 5, link))
                        k = 0
                        while t0 + 5 * (k + 2) <= end:
                            f.write("%.3f %.3f %d\n" % (t0 + 5 * (k + 1), t0 + 5 * (k + 2),
                                                        link * pcts[k % 3] / 100))
                            k += 1
                        f.write("%.3f %.3f %d\n" % (t0 + 5 * (k + 1), t0 + 5 * (k + 2), link))
    with open(os.path.join(runs, "index"), "w") as f:
        f.write("\n".join(idx) + "\n")
    p = subprocess.run([sys.executable, os.path.join(here, "report.py"), "--out", tmp],
                       capture_output=True, text=True)
    check("report.py runs on a hand-made run", p.returncode == 0, p.stdout + p.stderr)
    with open(os.path.join(tmp, "bench-shared.json")) as f:
        js = json.load(f)
    m = js["models"]["tiny"]
    ms = m["mercury-share"]
    check("with the bulk over alone: the median of the paired ratios (0.95)",
          abs(ms["ratio"]["median"] - 0.95) < 1e-9 and ms["ratio"]["n"] == 3, ms["ratio"])
    check("the bulk's windows outside the training are left out (min 11%, no 100%)",
          abs(min(ms["bulk_pct"]) - 11) < 1e-6 and max(ms["bulk_pct"]) < 20.5,
          ms["bulk_pct"])
    check("targets: training within 10% met, bulk >= 9% in every window met",
          m["targets"] == {"training": True, "bulk": True}, m.get("targets"))
    check("a starved bulk shows as 0% windows",
          m["prio-last"]["bulk_pct"] and max(m["prio-last"]["bulk_pct"]) == 0,
          m["prio-last"]["bulk_pct"])
    f = m["fifo"]
    check("a starved training: the bound on its it/s from RUN_TIMEOUT and the start-up",
          f["bulk_ok"] == 0 and f["bulk_runs"] == 3 and
          abs(f["unfinished_ips_below"] - 2.0) < 1e-6 and "below 2.000 it/s" in p.stdout and
          "below 1.000x alone" in p.stdout and f["bulk_pct"] and min(f["bulk_pct"]) > 85,
          p.stdout)
    with open(os.path.join(tmp, "torch.env"), "a") as f:
        f.write("BULK_TIMEOUT=25\n")
    p2 = subprocess.run([sys.executable, os.path.join(here, "report.py"), "--out", tmp],
                        capture_output=True, text=True)
    check("with run.sh's BULK_TIMEOUT (training only) the bound is ITERS over it",
          "stopped after 25 s of training, so below 4.000 it/s (100 iterations in 25 s)"
          in p2.stdout, p2.stdout + p2.stderr)
    check("the taps' drops before the guest are counted per bulk run",
          ms["tap_drops"] == [7, 14, 21] and "-; 7/14/21" in p.stdout, p.stdout)
    check("the table prints the scheme's tc lines and the verdict",
          "untagged_share 10" in p.stdout and "targets (mercury-share)" in p.stdout and
          "sch_mercury, untagged last, share" in p.stdout, p.stdout)
finally:
    shutil.rmtree(tmp)

finish()
