#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""TAP test of bench/shared: bulk.py's window accounting (bytes per 5 s
window, empty windows written, the open one never), and report.py's
choice of windows, shares of the link and verdict on a hand-made run
directory; for scenario 2 (shallow buffer) its reading of the guest's
counters per channel, the "least urgent only" test and its table; for
scenario 3 (two jobs) the paired mean iteration time and each job's
ratio. The benchmark itself (a guest boot) stays out of make test."""
import json
import os
import re
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

# --- scenario 2 (shallow buffer): the guest's counters per channel ---
STATS_MERCURY = """== eth0
qdisc tbf 1: root refcnt 2 rate 30Mbit burst 14996b lat 26.7s
 Sent 2029691 bytes 29593 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
qdisc mercury 10: parent 1:1 tag dscp untagged last limit 85
 Sent 2029691 bytes 29593 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
  flows 0 levels_active 0 untagged_bytes 0 share_forced 0
class tbf 1:1 parent 1: leaf 10:
 Sent 2029691 bytes 29593 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
class mercury 10:1 parent 10:
 Sent 4000 bytes 40 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
  tag 1 flows 0
2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc tbf state UP mode DEFAULT
    RX:  bytes packets errors dropped  missed   mcast
    1000 10 0 3 0 0
== eth1
qdisc tbf 1: root refcnt 2 rate 30Mbit burst 14996b lat 26.7s
 Sent 900 bytes 9 pkt (dropped %(total)d, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
class mercury 10:1 parent 10:
 Sent 400 bytes 4 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
  tag 1 flows 0
class mercury 10:2 parent 10:
 Sent 400 bytes 4 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
  tag 2 flows 0
class mercury 10:8 parent 10:
 Sent 100 bytes 1 pkt (dropped %(d8)d, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
  tag 8 flows 0
class mercury 10:ffff parent 10:
 Sent 0 bytes 0 pkt (dropped %(du)d, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
  tag 0 flows 0
"""
st = report.parse_stats(STATS_MERCURY % {"total": 7, "d8": 5, "du": 2})
check("parse_stats: each port's qdiscs and classes with sent packets and drops",
      sorted(st) == ["eth0", "eth1"] and
      ("class", "mercury", "10:8", "10:", 1, 5) in st["eth1"] and
      ("qdisc", "tbf", "1:", "root", 9, 7) in st["eth1"] and
      not any(o[1] == "eth0:" for o in st["eth0"]), st)
MERC_TC = ["tc qdisc add dev DEV root handle 1: tbf rate 30mbit burst 15000 limit 100000000",
           "tc qdisc add dev DEV parent 1:1 handle 10: mercury tag dscp untagged last limit 85 "
           "memory_limit 33554432"]
cc = report.channel_counts(st, MERC_TC)
check("sch_mercury: class minor = tag, ffff the untagged class (channel 0)",
      cc["eth1"] == {1: {"sent": 4, "drops": 0}, 2: {"sent": 4, "drops": 0},
                     8: {"sent": 1, "drops": 5}, 0: {"sent": 0, "drops": 2}} and
      cc["eth0"] == {1: {"sent": 40, "drops": 0}}, cc)
PRIO_TC = ["tc qdisc add dev DEV root handle 1: tbf rate 30mbit burst 15000 limit 100000000",
           "tc qdisc add dev DEV parent 1:1 handle 10: prio bands 16 priomap " + " ".join(["15"] * 16)] + [
    "tc filter add dev DEV parent 10: protocol ip prio 1 u32 match ip dsfield %d 0xfc flowid 10:%x"
    % (b << 2, b) for b in range(1, 16)] + [
    "tc filter add dev DEV parent 10: protocol ip prio 2 u32 match u32 0 0 flowid 10:10"] + [
    "tc qdisc add dev DEV parent 10:%x pfifo limit 9" % b for b in range(1, 17)]
check("band_map: tag t in band 10:t, the catch-all band 10:10",
      report.band_map(PRIO_TC) == ({b: [b] for b in range(1, 16)}, 16), report.band_map(PRIO_TC))
check("untagged last: sch_mercury's option, prio's catch-all band after the tags",
      report.untagged_last(MERC_TC) and report.untagged_last(PRIO_TC) and
      not report.untagged_last(MERC_TC[:1] + ["tc qdisc add dev DEV parent 1:1 handle 10: "
                                               "mercury tag dscp limit 85"]))
STATS_PRIO = "== eth1\n" + "".join(
    "qdisc pfifo 80%02x: parent 10:%x limit 9p\n Sent %d bytes %d pkt (dropped %d, overlimits 0 "
    "requeues 0)\n backlog 0b 0p requeues 0\n" % (b, b, 100 * n, n, d)
    for b, n, d in ((1, 10, 0), (2, 10, 4), (3, 10, 0), (0x10, 3, 0), (5, 0, 0)))
cp = report.channel_counts(report.parse_stats(STATS_PRIO), PRIO_TC)
check("prio: each band's child qdisc is its tag's channel, the catch-all untagged",
      cp == {"eth1": {1: {"sent": 10, "drops": 0}, 2: {"sent": 10, "drops": 4},
                      3: {"sent": 10, "drops": 0}, 0: {"sent": 3, "drops": 0},
                      5: {"sent": 0, "drops": 0}}}, cp)
check("pfifo and fq: no per-channel counts",
      report.channel_counts(st, MERC_TC[:1] + ["tc qdisc add dev DEV parent 1:1 handle 10: "
                                                "pfifo limit 85"]) is None)
check("least urgent only: drops on 8 and untagged (last) with 1, 2 clean",
      report.least_urgent_only(cc["eth1"], True))
check("... but not with untagged first (untagged more urgent than 1, 2)",
      not report.least_urgent_only(cc["eth1"], False))
check("... nor prio's drops on 2 with 3 clean; an unused channel does not count",
      not report.least_urgent_only(cp["eth1"], True) and
      report.least_urgent_only({1: {"sent": 5, "drops": 0}, 3: {"sent": 5, "drops": 2},
                                2: {"sent": 0, "drops": 0}}, True))
check("limits_summary: identical bands counted",
      report.limits_summary(PRIO_TC) == "16 x pfifo limit 9" and
      report.limits_summary(MERC_TC) == "mercury limit 85 memory_limit 33554432",
      report.limits_summary(PRIO_TC))

# --- scenario 2's table on a hand-made run: sch_mercury 2.0 it/s, prio
# 1.6 1.6 1.7 (ratios 1.25 1.25 1.18), stock DDP on pfifo 2.0 2.1 1.9 ---
tmp = tempfile.mkdtemp()
try:
    runs = os.path.join(tmp, "runs")
    os.makedirs(runs)
    with open(os.path.join(tmp, "torch.env"), "w") as f:
        f.write('RATE=30mbit\nMTU=1500\nQUICK=0\nSCENARIO=shallow\nBYTES=128620\nCHANNELS=8\n'
                'SCHEMES="ddp prio-last mercury-share"\nITERS=100\n')
    for name, lines in (("mercury-share", MERC_TC), ("prio-last", PRIO_TC),
                        ("fifo", MERC_TC[:1] + ["tc qdisc add dev DEV parent 1:1 handle 10: "
                                                "pfifo limit 84"])):
        with open(os.path.join(tmp, "tc-%s.txt" % name), "w") as f:
            f.write("\n".join(lines) + "\n")
    with open(os.path.join(runs, "rtt.txt"), "w") as f:
        f.write("rtt_ms min 1.500 median 2.000 max 9.000 n 50\n")
    idx, req = [], 0
    for rep in (1, 2, 3):
        for sch, ips, stats in (
                ("ddp", (2.0, 2.1, 1.9)[rep - 1], "== eth1\nqdisc tbf 1: root\n Sent 1 bytes 1 pkt "
                 "(dropped 30, overlimits 0 requeues 0)\n"),
                ("prio-last", (1.6, 1.6, 1.7)[rep - 1], STATS_PRIO),
                ("mercury-share", 2.0, STATS_MERCURY % {"total": 7, "d8": 5, "du": 2})):
            tag = "tiny.%s.%d" % (sch, rep)
            idx.append("%s %d" % (tag, req + 1))
            with open(os.path.join(tmp, "stats.%d" % req), "w") as f:
                f.write(stats)
            req += 1
            for r in (0, 1):
                with open(os.path.join(runs, "%s.r%d.json" % (tag, r)), "w") as f:
                    json.dump(rank_rec(ips), f)
            with open(os.path.join(runs, tag + ".tapdrops"), "w") as f:
                f.write("0\n0\n1\n0\n")
    with open(os.path.join(runs, "index"), "w") as f:
        f.write("\n".join(idx) + "\n")
    p = subprocess.run([sys.executable, os.path.join(here, "report.py"), "--out", tmp],
                       capture_output=True, text=True)
    check("report.py prints scenario 2's table (SCENARIO=shallow)",
          p.returncode == 0 and "scenario 2 (shallow shared buffer)" in p.stdout, p.stdout + p.stderr)
    with open(os.path.join(tmp, "bench-shared.json")) as f:
        m = json.load(f)["models"]["tiny"]
    pr = m["prio-last"]["vs_target"]
    check("sch_mercury / prio paired per repetition: median 1.25",
          abs(pr["median"] - 1.25) < 1e-9 and pr["n"] == 3, pr)
    check("sch_mercury / stock DDP: 1.0, so no difference",
          abs(m["ddp"]["vs_target"]["median"] - 1.0) < 1e-9 and "no difference" in p.stdout,
          p.stdout)
    check("drops per channel over runs and ports, most urgent first, untagged last",
          "1:0 2:0 8:15 u:6" in p.stdout and "1:0 2:12 3:0 u:0" in p.stdout, p.stdout)
    check("stock DDP on pfifo: drops per run (median, min-max), the taps' sum, a total only",
          re.search(r"stock DDP, pfifo .* 30 \(30-30\) +- +3 +total only", p.stdout), p.stdout)
    check("targets: drops least urgent only met (6 queues), beats every scheme NOT met (DDP)",
          m["targets"] == {"least_urgent_only": True, "beats_all": False} and
          "met (6 of 6 queues)" in p.stdout and "NOT met (not above 1.0: ddp" in p.stdout,
          p.stdout)
    with open(os.path.join(tmp, "stats.2"), "w") as f:      # run 1 of sch_mercury: 2 drops on 1
        f.write(STATS_MERCURY.replace("10:1 parent 10:\n Sent 400 bytes 4 pkt (dropped 0",
                                      "10:1 parent 10:\n Sent 400 bytes 4 pkt (dropped 2")
                % {"total": 9, "d8": 5, "du": 2})
    p3 = subprocess.run([sys.executable, os.path.join(here, "report.py"), "--out", tmp],
                        capture_output=True, text=True)
    check("a queue whose most urgent channel dropped while 2 did not misses the target, named",
          "NOT met (5 of 6 queues)" in p3.stdout and
          "not in boot 1 run 1 eth1: drops on 1:2 8:5 u:2; none on 2" in p3.stdout, p3.stdout)
    check("the buffer's split and the round trip are printed",
          "16 x pfifo limit 9" in p.stdout and "pfifo limit 84" in p.stdout and
          "1.50/2.00" in p.stdout and "BDP at the smallest 5625 bytes" in p.stdout, p.stdout)
    # sch_mercury with flow_limit (mercury-fl) at 2.4 it/s: where a run has
    # it, the targets judge it, and the plain sch_mercury is one more scheme
    with open(os.path.join(tmp, "tc-mercury-fl.txt"), "w") as f:
        f.write("\n".join(MERC_TC[:-1] + [MERC_TC[-1] + " flow_limit 9"]) + "\n")
    with open(os.path.join(runs, "index"), "a") as f:
        for rep in (1, 2, 3):
            tag = "tiny.mercury-fl.%d" % rep
            f.write("%s %d\n" % (tag, req + 1))
            with open(os.path.join(tmp, "stats.%d" % req), "w") as g:
                g.write(STATS_MERCURY % {"total": 7, "d8": 5, "du": 2})
            req += 1
            for r in (0, 1):
                with open(os.path.join(runs, "%s.r%d.json" % (tag, r)), "w") as g:
                    json.dump(rank_rec(2.4), g)
            with open(os.path.join(runs, tag + ".tapdrops"), "w") as g:
                g.write("0\n0\n0\n0\n")
    p4 = subprocess.run([sys.executable, os.path.join(here, "report.py"), "--out", tmp],
                        capture_output=True, text=True)
    with open(os.path.join(tmp, "bench-shared.json")) as f:
        j4 = json.load(f)
    m4 = j4["models"]["tiny"]
    check("with a flow_limit run, the targets judge it: sch_mercury flow_limit / plain 1.2",
          p4.returncode == 0 and j4["reference"]["tiny"] == "mercury-fl" and
          "targets (mercury-fl)" in p4.stdout and
          abs(m4["mercury-share"]["vs_target"]["median"] - 1.2) < 1e-9 and
          abs(m4["prio-last"]["vs_target"]["median"] - 1.5) < 1e-9, p4.stdout + p4.stderr)
finally:
    shutil.rmtree(tmp)

# --- scenario 3 (two jobs): each job measured while both trained ---
def write_job(runs, tag, bounds, wall=True):
    """Both ranks' records of a job whose iterations start at bounds[:-1]
    and end at bounds[-1], wall-clock seconds: the record's start_wall,
    or without it (wall=False: an older worker.py) the record's mtime."""
    for r in (0, 1):
        p = os.path.join(runs, "%s.r%d.json" % (tag, r))
        rec = {"rank": r, "iters": len(bounds) - 1,
               "starts": [t - bounds[0] for t in bounds[:-1]],
               "end": bounds[-1] - bounds[0], "losses": [1.0]}
        if wall:
            rec["start_wall"] = bounds[0]
        with open(p, "w") as f:
            json.dump(rec, f)
        os.utime(p, (bounds[-1], bounds[-1]) if not wall else (5.0, 5.0))


def steady(t0, rate, n):
    return [t0 + i / rate for i in range(n + 1)]


tmp = tempfile.mkdtemp()
try:
    runs = os.path.join(tmp, "runs")
    os.makedirs(runs)
    with open(os.path.join(tmp, "torch.env"), "w") as f:
        f.write('RATE=30mbit\nQUICK=0\nSCHEMES="fifo prio mercury"\nSCENARIO=twojobs\n')
    # 20 iterations each, both jobs starting at T (1000 s per repetition
    # apart). pfifo: both 1 it/s. sch_mercury: job 0 2 it/s (ends at
    # T+10); job 1 1 it/s while job 0 trains, then 4 it/s alone (its
    # whole-run rate, 20 in 12.5 s = 1.6 it/s, would credit the scheme
    # with the link job 0 left): in the window [T+1, T+10] job 0 2.0,
    # job 1 1.0 it/s, mean 0.75 s against pfifo's 1 s: 1.333x. prio:
    # job 0 2 it/s, job 1 0.5 it/s; in repetition 3 its job 1 did not
    # finish: no pair.
    idx = []
    req = 0
    for rep in (1, 2, 3):
        t = 1000.0 * rep
        jobs = {"fifo": (steady(t, 1.0, 20), steady(t, 1.0, 20)),
                "mercury": (steady(t, 2.0, 20),
                            steady(t, 1.0, 10)[:-1] + steady(t + 10, 4.0, 10)),
                "prio": (steady(t, 2.0, 20), steady(t, 0.5, 20) if rep < 3 else None)}
        for s in ("fifo", "prio", "mercury"):
            req += 1
            for j in (0, 1):
                tag = "tiny.%s+job%d.%d" % (s, j, rep)
                idx.append("%s %d" % (tag, req))
                if jobs[s][j]:
                    # repetition 2's records as an older worker.py wrote
                    # them: the mtime is the end
                    write_job(runs, tag, jobs[s][j], wall=rep != 2)
    with open(os.path.join(runs, "index"), "w") as f:
        f.write("\n".join(idx) + "\n")
    p = subprocess.run([sys.executable, os.path.join(here, "report.py"), "--out", tmp],
                       capture_output=True, text=True)
    check("scenario 3: report.py runs on a hand-made two-job run", p.returncode == 0,
          p.stdout + p.stderr)
    with open(os.path.join(tmp, "bench-shared.json")) as f:
        m = json.load(f)["models"]["tiny"]
    mer = m["mercury"]
    check("each job's it/s is taken while both trained: job 0 2.0, job 1 1.0 (not 1.6)",
          all(abs(x - 2.0) < 1e-9 for x in mer["ips"][0]) and
          all(abs(x - 1.0) < 1e-9 for x in mer["ips"][1]) and
          all(abs(w - 9.0) < 1e-6 for w in mer["window_s"]), mer)
    check("the mean iteration time, pfifo's over the scheme's, paired: 1.333x of 3",
          abs(mer["mean_vs_ref"]["median"] - 4 / 3) < 1e-9 and mer["mean_vs_ref"]["n"] == 3,
          mer["mean_vs_ref"])
    check("each job against its own pfifo runs: job 0 2.0x, job 1 1.0x",
          abs(mer["job_vs_ref"][0]["median"] - 2.0) < 1e-9 and
          abs(mer["job_vs_ref"][1]["median"] - 1.0) < 1e-9, mer["job_vs_ref"])
    pr = m["prio"]
    check("a repetition where one job did not finish gives no pair (prio: 2 of 3, 0.8x)",
          pr["pairs"] == 2 and pr["runs"] == 3 and
          abs(pr["mean_vs_ref"]["median"] - 0.8) < 1e-9 and "0.500 2/3" in p.stdout, pr)
    check("targets: mean at least 1.2x met; job 1 at 1.0x of pfifo met",
          m["targets"] == {"mean": True, "jobs": [True, True]} and
          "job 1 no more than 5% slower" in p.stdout, p.stdout)
finally:
    shutil.rmtree(tmp)

finish()
