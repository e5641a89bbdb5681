#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""TAP tests of capture.py (make demo's picture and table) on a hand-made
run: a synthetic capture of a FIFO and of sch_mercury, rank records and a
report.py-style bench-torch.json. No root, no guest: the parser, the
window of the last iteration, the per-channel series, the summary's
verdicts, and the plot where gnuplot is installed."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import capture  # noqa: E402

n = 0
failed = 0


def ok(cond, what):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print("%sok %d - %s" % ("" if cond else "not ", n, what))


def write_capture(path, pkts, drops=0):
    with open(path, "w") as f:
        f.write("# capture tap\n")
        for t, d, b in pkts:
            f.write("%.6f %d %d\n" % (t, d, b))
        f.write("# packets %d drops %d\n" % (len(pkts), drops))


def run(out):
    # One iteration of 2 s ending at 102.0: a FIFO sends channel 3 (the
    # last layers, 10 packets) before channel 1 (the first, 2 packets);
    # sch_mercury lets channel 1 overtake. ACKs (52 bytes) on DSCP 0
    # after the end are not data and do not move the window.
    base = 100.0
    fifo = [(base - 0.5, 3, 1500)]          # before the window: left out
    fifo += [(base + 0.1 * i, 3, 1500) for i in range(1, 11)]
    fifo += [(base + 1.5, 1, 1500), (base + 2.0, 1, 800), (base + 2.1, 0, 52)]
    merc = [(base + 0.1 * i, 3, 1500) for i in range(1, 6)]
    merc += [(base + 0.6, 1, 1500), (base + 0.7, 1, 800)]
    merc += [(base + 0.7 + 0.1 * i, 3, 1500) for i in range(1, 6)]
    merc[-1] = (base + 1.5, 3, 1500)
    write_capture(os.path.join(out, "capture-tiny-fifo.txt"), fifo, drops=2)
    write_capture(os.path.join(out, "capture-tiny-mercury.txt"), merc)
    os.makedirs(os.path.join(out, "runs"))
    for q, end in (("fifo", 8.0), ("mercury", 6.5)):
        with open(os.path.join(out, "runs", "capture-tiny-%s.r1.json" % q), "w") as f:
            json.dump({"starts": [0.0, 2.0, 4.0, 6.0 if q == "fifo" else 5.0],
                       "end": end}, f)
    return fifo, merc


def report_json(out, lo_fifo):
    ci = lambda m, lo, hi: {"median": m, "lo": lo, "hi": hi, "n": 4, "boots": 1}  # noqa: E731
    row = lambda m: {"runs": 4, "failed": 0, "median": m, "batch": 16,  # noqa: E731
                     "size": 96, "params": 138986, "iters": 8, "net": {"drops": 0}}
    js = {"models": {"tiny": {
        "schemes": {"ddp": row(0.5), "ddp-fp16": row(0.7), "fifo1-fp16": row(0.8),
                    "mercury-fp16": row(1.0)},
        "ratios": {"ddp-fp16_vs_ddp": ci(1.4, 1.3, 1.5),
                   "fifo1-fp16_vs_ddp": ci(1.6, 1.5, 1.7),
                   "mercury-fp16_vs_ddp": ci(2.0, 1.9, 2.1),
                   "mercury-fp16_vs_ddp-fp16": ci(1.43, 1.3, 1.5),
                   "mercury-fp16_vs_fifo1-fp16": ci(1.25, lo_fifo, 1.4)}}}}
    with open(os.path.join(out, "bench-torch.json"), "w") as f:
        json.dump(js, f)


def main():
    out = tempfile.mkdtemp(prefix="test_capture.")
    try:
        fifo, merc = run(out)
        pkts, drops = capture.read_capture(os.path.join(out, "capture-tiny-fifo.txt"))
        ok(len(pkts) == len(fifo) and drops == 2, "read_capture: every packet and the drops")
        ok(pkts[1] == (100.1, 3, 1500), "read_capture: time, DSCP, bytes")
        win = capture.last_iterations(pkts, {"starts": [0, 2, 4, 6], "end": 8}, 1)
        ok(win is not None and abs(win[0] - 100.0) < 1e-9 and abs(win[1] - 102.0) < 1e-9,
           "last_iterations: end at the last data packet, not the ACK after it")
        w3 = capture.last_iterations(pkts, {"starts": [0, 2, 4, 6], "end": 8})
        ok([round(x, 6) for x in w3[2]] == [96.0, 98.0, 100.0] and w3[0] == w3[2][0],
           "last_iterations: the last 3 iterations' starts in the capture's clock")
        ok(capture.last_iterations([(1.0, 0, 52)], {"starts": [0], "end": 1}) is None,
           "last_iterations: None without data packets")
        series, total = capture.per_class(pkts, win[0], win[1])
        ok(total == {3: 15000, 1: 2300}, "per_class: bytes per DSCP in the window only")
        ok(series[1][-1] == (2.0, 800) and abs(series[3][0][0] - 0.1) < 1e-9 and series[3][0][1] == 1500,
           "per_class: each packet's time from the window's start and its bytes")
        mp, _ = capture.read_capture(os.path.join(out, "capture-tiny-mercury.txt"))
        mw = capture.last_iterations(mp, {"starts": [0, 2, 4, 5], "end": 6.5}, 1)
        ms, mt = capture.per_class(mp, mw[0], mw[1])
        ok(ms[1][-1][0] < ms[3][-1][0] and series[1][-1][0] > series[3][-1][0],
           "channel 1 completes before channel 3 through sch_mercury, after it through the FIFO")
        ok(capture.class_label(1, [1, 2, 3]).endswith("first layers")
           and capture.class_label(3, [1, 2, 3]).endswith("last layers")
           and capture.class_label(0, [1, 3]).startswith("untagged"),
           "class_label: the first and last channels named")

        report_json(out, 1.1)
        lines, met = capture.summary(out, "tiny", "5mbit")
        ok(met, "summary: every target met when every lower end is above 1")
        ok(any("true FIFO" in l and "1.25x [1.10-1.40]" in l and l.rstrip().endswith("met")
               for l in lines), "summary: the ratio over the true FIFO with its interval")
        ok(len(lines) <= 14, "summary: at most 14 lines (%d)" % len(lines))
        report_json(out, 0.95)
        lines, met = capture.summary(out, "tiny", "5mbit")
        ok(not met and any("NOT MET" in l for l in lines),
           "summary: a lower end at or below 1 is NOT MET, said plainly")
        rc = subprocess.run([sys.executable, os.path.join(here, "capture.py"), "summary",
                             "--out", out, "--model", "tiny", "--rate", "5mbit"],
                            capture_output=True, text=True).returncode
        ok(rc == 3, "capture.py summary exits 3 when a target is not met")
        rows = capture.ratio_rows(json.load(open(os.path.join(out, "bench-torch.json"))), "tiny")
        ok([r[0] for r in rows] == ["stock DDP", "DDP fp16 hook", "true FIFO"],
           "ratio_rows: the three comparisons in order")

        if shutil.which("gnuplot"):
            png = capture.plot(out, "tiny")
            ok(os.path.getsize(png) > 10000, "plot: demo.png written")
        else:
            print("ok %d - plot # SKIP no gnuplot" % (n + 1))
            globals()["n"] += 1
        os.remove(os.path.join(out, "capture-tiny-mercury.txt"))
        try:
            capture.plot(out, "tiny")
            ok(False, "plot: refuses a missing capture")
        except ValueError:
            ok(True, "plot: refuses a missing capture")
    finally:
        shutil.rmtree(out)
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
