#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""TAP test of bench/torch/report.py on a hand-made run directory whose
ratios are known: medians, spreads, the ratios against DDP and pfifo
(per repetition, with their bootstrap intervals), the comparison with
mercury-sim's prediction, the loss checks. The benchmark itself (a guest
boot, tens of minutes) stays out of make test."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from tap import check, finish

here = os.path.dirname(os.path.abspath(__file__))

# worker.py's phases per iteration (forward, blocked, backward, step) of
# rank 0 and rank 1 of every mercury run: the first iteration is left
# out, so the medians are 2.0 (0.5) 2.0 0.2; fifo's records have none
PHASES = {"mercury": ([[9, 9, 9, 9], [1.0, 0.4, 2.0, 0.1]],
                      [[9, 9, 9, 9], [3.0, 0.6, 2.0, 0.3]])}


def rank(scheme, rank, ips, losses):
    # it/s is all iterations over first forward to end; worker.py's own
    # it_per_s (after the warm-up) is set wrong on purpose: unused
    iters = len(losses)
    end = iters / ips
    r = {"rank": rank, "world": 2, "scheme": scheme, "model": "toy",
         "batch": 4, "size": 32, "iters": iters, "warmup": 1,
         "params": 1000000,
         "starts": [end * i / iters for i in range(iters)],
         "end": end, "losses": losses, "param_sum": 12.5,
         "it_per_s": 99.0}
    if scheme in PHASES:
        r["phases"] = PHASES[scheme][rank]
    return r


def make(d, mercury_loss_b=2.0):
    os.makedirs(os.path.join(d, "runs"))
    # it/s per run (rank 0, rank 1); a run counts its slower rank
    table = {"ddp": [(1.0, 1.1), (0.9, 0.95), (1.1, 1.2)],
             "fifo": [(1.2, 1.2), (1.0, 1.0), (1.1, 1.3)],
             "fifo1": [(0.8, 0.9), (0.7, 0.75), (0.9, 1.0)],
             "prio": [(1.3, 1.3), (1.3, 1.4), (1.2, 1.2)],
             "mercury": [(1.4, 1.5), (1.32, 1.32), (1.5, 1.5)]}
    with open(os.path.join(d, "runs", "index"), "w") as idx:
        for s, reps in table.items():
            for r, pair in enumerate(reps, 1):
                tag = "toy.%s.%d" % (s, r)
                idx.write("%s %d\n" % (tag, r))
                for k, ips in enumerate(pair):
                    # rank k's loss; the mean of ranks is what is compared
                    b = mercury_loss_b if (s == "mercury" and r == 2) else 2.0
                    loss = [3.0, b] if k == 0 else [1.0, 2.0]
                    if s == "ddp":
                        loss = [3.0, 2.0000001] if k == 0 else [1.0, 2.0]
                    with open(os.path.join(d, "runs", "%s.r%d.json" % (tag, k)), "w") as f:
                        json.dump(rank(s, k, ips, loss), f)
    for s, ms in (("fifo-stream", 1000.0), ("prio", 900.0), ("mercury", 880.0)):
        with open(os.path.join(d, "runs", "sim-toy-%s.json" % s), "w") as f:
            json.dump({"compute_ms": 500.0, "gradient_bytes": 4000000,
                       "results": [{"scheme": s, "iteration_ms": ms}]}, f)


def run(d):
    p = subprocess.run([sys.executable, os.path.join(here, "report.py"),
                        "--out", d, "--rate", "10mbit", "--no-plot"],
                       capture_output=True, text=True)
    js = None
    if p.returncode == 0:
        with open(os.path.join(d, "bench-torch.json")) as f:
            js = json.load(f)
    return p, js


with tempfile.TemporaryDirectory() as d:
    make(d)
    p, js = run(d)
    check("report.py runs on a recorded run directory", p.returncode == 0, p.stderr)
    if js:
        m = js["models"]["toy"]
        sc = m["schemes"]
        check("median of the slower ranks (ddp 1.0, fifo 1.1, mercury 1.4)",
              abs(sc["ddp"]["median"] - 1.0) < 1e-12 and
              abs(sc["fifo"]["median"] - 1.1) < 1e-12 and
              abs(sc["mercury"]["median"] - 1.4) < 1e-12, json.dumps(sc))
        check("spread is min..max (mercury 1.32..1.5)",
              sc["mercury"]["min"] == 1.32 and sc["mercury"]["max"] == 1.5)
        meas = m["measured"]
        # ratios per repetition, never of medians of different ones:
        # mercury/ddp 1.4/1.0, 1.32/0.9, 1.5/1.1 -> median 1.4;
        # mercury/fifo 1.4/1.2, 1.32/1.0, 1.5/1.1 -> median 1.32 (the
        # medians' ratio would be 1.4/1.1)
        check("ratios vs DDP and vs pfifo: medians of per-repetition ratios (1.4x, 1.32x)",
              abs(meas["mercury_vs_ddp"] - 1.4) < 1e-12 and
              abs(meas["mercury_vs_fifo"] - 1.32) < 1e-12, json.dumps(meas))
        # 1.4/0.8, 1.32/0.7, 1.5/0.9 -> 1.75; fifo/fifo1 1.5, 1/0.7, 1.1/0.9
        check("ratios vs pfifo with one channel (1.75x; 8 channels over 1: 1/0.7)",
              abs(meas["mercury_vs_fifo1"] - 1.75) < 1e-12 and
              abs(meas["fifo_vs_fifo1"] - 1.0 / 0.7) < 1e-12 and
              abs(meas["vs_prediction_fifo1"] - (1.75 / (1000 / 880) - 1))
              < 1e-12 and "8 channels over 1 on pfifo: 1.429x [1.222-1.500] n=3"
              in p.stdout, json.dumps(meas) + p.stdout)
        # three ratios: the bootstrap median of 3 draws is one of them, and
        # the smallest (largest) comes out with probability 7/27 > 2.5%:
        # the interval is their range
        r = m["ratios"]["mercury_vs_ddp"]
        check("the interval of 3 ratios is their range (1.5/1.1 .. 1.32/0.9)",
              abs(r["lo"] - 1.5 / 1.1) < 1e-12 and abs(r["hi"] - 1.32 / 0.9) < 1e-12
              and r["n"] == 3 and r["verdict"] == "faster", json.dumps(r))
        # fifo/ddp per repetition: 1.2, 1.0/0.9, 1.0 -> [1.0, 1.2] holds 1.0
        check("a ratio whose interval holds 1.0 is printed 'no difference'",
              re.search(r"mercury\.torch, pfifo / stock DDP +1\.111x "
                        r"\[1\.000-1\.200\] n=3  no difference", p.stdout) and
              m["ratios"]["fifo_vs_ddp"]["verdict"] == "no difference" and
              not re.search(r"sch_mercury / stock DDP .*no difference", p.stdout),
              p.stdout)
        check("prediction is fifo-stream over mercury (1000/880)",
              abs(m["predicted"]["mercury_vs_fifo"] - 1000 / 880) < 1e-12)
        check("deviation from the prediction",
              abs(meas["vs_prediction"] - (1.32 / (1000 / 880) - 1)) < 1e-12)
        check("identical mercury.torch losses are reported identical",
              m["mercury_losses_identical"] is True)
        check("DDP's loss deviation is measured (5e-8 on a mean of 2.0)",
              abs(m["ddp_loss_rel_dev"] - 0.0000001 / 2 / 2.0) < 1e-12,
              str(m["ddp_loss_rel_dev"]))
        check("phases: medians after the first iteration, both ranks",
              re.search(r"sch_mercury +2\.00 \( 0\.50\) +2\.00 +0\.20\n", p.stdout)
              and sc["mercury"]["phases"] == [2.0, 0.5, 2.0, 0.2]
              and sc["fifo"]["phases"] is None, p.stdout)
        check("the table says which targets were met",
              "over the best fp32 DDP variant (stock DDP): 1.400x [1.364-1.467] "
              "n=3 (target 1.15x, lower end 1.05: met)" in p.stdout and
              m["targets"] == {"mercury_vs_ddp": True} and
              "NOT within 10%" in p.stdout, p.stdout)
def netstat(retrans, rto, spurious):
    """/proc/net/snmp + netstat as a namespace shows them (groups of a
    names line and a values line; other counters around the ones read)."""
    return ("Ip: Forwarding DefaultTTL\nIp: 1 64\n"
            "Tcp: RtoAlgorithm OutSegs RetransSegs\nTcp: 1 5000 %d\n"
            "TcpExt: SyncookiesSent TCPTimeouts TCPSpuriousRTOs\nTcpExt: 0 %d %d\n"
            % (retrans, rto, spurious))


def tbf_stats(sent, dropped):
    return ("qdisc tbf 1: root refcnt 2 rate 10Mbit burst 15000b lat 40s\n"
            " Sent %d bytes 100 pkt (dropped %d, overlimits 7 requeues 0)\n"
            " backlog 0b 0p requeues 0\n"
            "qdisc pfifo 10: parent 1:1 limit 2000p\n"
            " Sent %d bytes 100 pkt (dropped %d, overlimits 0 requeues 0)\n"
            % (sent, dropped, sent, dropped))


with tempfile.TemporaryDirectory() as d:
    make(d)
    # fifo run 1 (index request 1, so the guest's stats.0): rank 0 went
    # from 10 to 110 retransmissions, 1 to 4 timeouts; rank 1 from 0 to
    # 20, 0 to 1; two ports sent 3000 + 4000 bytes, dropping 5 + 6
    for r, (a, b) in enumerate([((10, 1, 0), (110, 4, 1)), ((0, 0, 0), (20, 1, 0))]):
        for k, v in (("net0", a), ("net1", b)):
            with open(os.path.join(d, "runs", "toy.fifo.1.r%d.%s" % (r, k)), "w") as f:
                f.write(netstat(*v))
    with open(os.path.join(d, "stats.0"), "w") as f:
        f.write("== eth0\n" + tbf_stats(3000, 5) + "== eth1\n" + tbf_stats(4000, 6))
    sys.path.insert(0, here)
    import report
    runs = report.load_runs([d])
    net = runs["toy"]["fifo"][0]["net"]
    check("a run's TCP counters are both ranks' differences, summed",
          net.get("retrans") == 120 and net.get("rto") == 4 and
          net.get("spurious_rto") == 1, json.dumps(net))
    check("the guest's drops and wire bytes are the ports' root tbf counters",
          net.get("drops") == 11 and net.get("wire_bytes") == 7000, json.dumps(net))
    check("a run without recorded counters has none",
          runs["toy"]["fifo"][1]["net"] == {}, json.dumps(runs["toy"]["fifo"][1]["net"]))
    with open(os.path.join(d, "stats.0"), "w") as f:
        f.write("== eth0\nqdisc tbf 1: root\n garbage\n")
    check("a malformed stats file gives no counters, not a crash",
          "drops" not in report.load_runs([d])["toy"]["fifo"][0]["net"])
# steady state: from the start of iteration 2 to the start of the last,
# per iteration; the slower rank of a run, the median of runs
sys.path.insert(0, here)
import report  # noqa: E402
check("steady interval: (5 - 1) / 2 iterations; none with 2 iterations",
      report.steady_interval({"starts": [0, 1, 3, 5]}) == 2.0 and
      report.steady_interval({"starts": [0, 1]}) is None)


def steady_run(*starts):
    return {"ok": True, "net": {}, "ranks": [
        {"starts": list(st), "end": st[-1] + 9, "iters": len(st), "warmup": 1,
         "batch": 4, "size": 32, "params": 1, "losses": [1.0] * len(st),
         "param_sum": 1.0} for st in starts]}


# link use from guest.sh's samples (uptime, tx bytes of each port), at
# 8000bit = 1000 bytes/s: the window is the three half-seconds in which
# a port moved; 760 bytes over 1.5 s and 2 ports is 760/3000 of the link;
# one of the three samples (10 bytes) is under a tenth of it
with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "util.0"), "w") as f:
        f.write("0.0 0 0\n0.5 0 0\n1.0 500 0\n1.5 500 250\n2.0 510 250\n2.5 510 250\n")
    u = report.link_use(d, 0, "8000bit")
    check("link use: busy share over the moving window, idle samples",
          u is not None and abs(u["link_busy"] - 760 / 3000) < 1e-12 and
          abs(u["link_idle"] - 1 / 3) < 1e-12 and u["window_s"] == 1.5, json.dumps(u))
    # full: every port at 90% of the rate (450 of 500 bytes a half
    # second) in the first and third samples, not in the second
    with open(os.path.join(d, "util.2"), "w") as f:
        f.write("0.0 0 0\n0.5 480 450\n1.0 960 700\n1.5 1460 1200\n")
    u = report.link_use(d, 2, "8000bit")
    check("link use: full, the samples in which every port used 90% of the rate",
          u is not None and abs(u["link_full"] - 2 / 3) < 1e-12 and
          abs(u["link_idle"]) < 1e-12, json.dumps(u))
    # guest CPU over the same window (uptime 0.5-2.0): all vCPUs, then
    # vCPU 0 and 1, 10 ticks each (user nice system idle iowait irq
    # softirq steal guest guest_nice); all: 300 ticks pass, 90 idle or
    # iowait: 70% busy; vCPU 0 150 of 150 busy, vCPU 1 60 of 150;
    # samples outside the window ignored
    z = " 0 0 0"
    with open(os.path.join(d, "util.0.cpu"), "w") as f:
        for t, al, c0, c1 in (
                ("0.0", "0 0 0 0 0 0 0", "0 0 0 0 0 0 0", "0 0 0 0 0 0 0"),
                ("0.5", "10 0 10 50 0 0 30", "10 0 0 0 0 0 20", "0 0 10 50 0 0 10"),
                ("2.0", "100 0 50 120 20 0 110", "60 0 20 0 0 0 100",
                 "40 0 30 120 20 0 10"),
                ("2.5", "300 0 300 120 20 0 110", "0 0 0 0 0 0 0", "0 0 0 0 0 0 0")):
            f.write(" ".join([t, al + z, c0 + z, c1 + z]) + "\n")
    u = report.link_use(d, 0, "8000bit")
    check("guest CPU: the share of ticks not idle or iowait within the window, "
          "and the busiest vCPU's",
          u is not None and abs(u["guest_cpu"] - 210 / 300) < 1e-12 and
          abs(u["guest_cpu_max"] - 1.0) < 1e-12, json.dumps(u))
    # the host's ticks before and after a run (run.sh's TAG.cpu0/cpu1)
    os.makedirs(os.path.join(d, "runs"))
    with open(os.path.join(d, "runs", "t.cpu0"), "w") as f:
        f.write("cpu  100 0 100 700 100 0 0 0 0 0\n")
    with open(os.path.join(d, "runs", "t.cpu1"), "w") as f:
        f.write("cpu  400 0 200 800 100 0 100 0 0 0\n")
    check("host CPU: 500 of 600 ticks not idle over the run",
          abs(report.host_cpu(d, "t") - 500 / 600) < 1e-12 and
          report.host_cpu(d, "none") is None)
    check("link use: none without samples or with an unknown rate",
          report.link_use(d, 1, "8000bit") is None and report.link_use(d, 0, "?") is None)
    check("rates: 30mbit, 1gbit, 500kbit in bytes per second",
          report.rate_bytes("30mbit") == 3.75e6 and report.rate_bytes("1gbit") == 1.25e8
          and report.rate_bytes("500kbit") == 62500 and report.rate_bytes("x") is None)

rows = report.summarize("toy", {"mercury": [
    steady_run((0, 1, 3, 5), (0, 1, 5, 9)),     # slower rank: 4 s -> 0.25
    steady_run((0, 2, 4, 6), (0, 2, 4, 6)),     # 2 s -> 0.5
    steady_run((0, 1, 2, 3), (0, 1, 2, 3))]})   # 1 s -> 1.0
check("steady it/s: the slower rank per run, median of runs (0.5)",
      rows["mercury"]["steady"] == 0.5, json.dumps(rows["mercury"]["steady"]))

with tempfile.TemporaryDirectory() as d:
    make(d, mercury_loss_b=2.5)
    p, js = run(d)
    check("a differing mercury.torch loss is reported",
          js is not None and js["models"]["toy"]["mercury_losses_identical"] is False
          and "NOT identical" in p.stdout, p.stdout + p.stderr)
# the prediction at the carried rate: every run's samples give a busy
# share of 0.5 of 10mbit (625000 bytes/s on each of 2 ports over 2 s), so
# the simulator is run again at 5 Mbit/s on the run's profile (a shipped
# one) and MTU; its ratio must be what mercury-sim itself gives there
sim = os.path.join(here, "..", "..", "userspace", "sim", "mercury-sim")
with tempfile.TemporaryDirectory() as d:
    make(d)
    shutil.copy(os.path.join(here, "..", "..", "profiles", "h200", "resnet50.json"),
                os.path.join(d, "profile-toy.json"))
    with open(os.path.join(d, "torch.env"), "w") as f:
        f.write("RATE=10mbit\nMTU=9000\n")
    for req in range(3):
        with open(os.path.join(d, "util.%d" % req), "w") as f:
            f.write("0.0 0 0\n1.0 625000 625000\n2.0 1250000 1250000\n")
    p, js = run(d)
    want = {}
    for sch in ("fifo-stream", "mercury"):
        q = subprocess.run([sim, "--profile", os.path.join(d, "profile-toy.json"),
                            "--workers", "2", "--servers", "2", "--bandwidth", "5mbit",
                            "--mtu", "9000", "--scheme", sch, "--json"],
                           capture_output=True, text=True)
        want[sch] = json.loads(q.stdout)["results"][0]["iteration_ms"] if q.returncode == 0 else None
    pr = js["models"]["toy"]["predicted"] if js else {}
    check("prediction at the carried rate: mercury-sim at busy share x rate",
          None not in want.values() and pr.get("carried_bps") == 5e6 and
          abs(pr.get("mercury_vs_fifo_carried", 0) - want["fifo-stream"] / want["mercury"])
          < 1e-9 and "at the rate the link carried (median busy share of the "
          "mercury.torch runs 50%: 5.0 Mbit/s)" in p.stdout, p.stdout + p.stderr)

# BT_SCHEMES without the 8-channel pfifo (ddp fifo1 prio mercury): the
# report is made, compares with the one channel, and omits 8 over 1
with tempfile.TemporaryDirectory() as d:
    make(d)
    for f in os.listdir(os.path.join(d, "runs")):
        if ".fifo." in f:
            os.remove(os.path.join(d, "runs", f))
    with open(os.path.join(d, "runs", "index")) as f:
        kept = [line for line in f if ".fifo." not in line]
    with open(os.path.join(d, "runs", "index"), "w") as f:
        f.writelines(kept)
    p, js = run(d)
    check("a run without pfifo's 8 channels is reported against 1 channel",
          p.returncode == 0 and "with 1 channel (a true FIFO): measured 1.750x" in p.stdout
          and "8 channels over 1" not in p.stdout
          and "fifo" not in js["models"]["toy"]["schemes"], p.stdout + p.stderr)


# --balance: the size at which a step's compute equals its gradients'
# wire time. A profile of 2 s compute (0.5 forward, 1.5 backward) and
# 1 M parameters (4 MB) on 8 Mbit/s (1 MB/s: 4 s of wire) at 64 px wants
# twice the pixels: 64 * sqrt(2) = 90.5, rounded to 32: 96.
def balance(prof, size, rate, prev=None, prev_size=None, extra=()):
    with tempfile.TemporaryDirectory() as d:
        args = []
        for name, what in (("profile", prof), ("prev", prev)):
            if what is None:
                continue
            path = os.path.join(d, name + ".json")
            with open(path, "w") as f:
                f.write(what if isinstance(what, str) else json.dumps(what))
            args += ["--balance" if name == "profile" else "--prev", path]
        if prev_size is not None:
            args += ["--prev-size", str(prev_size)]
        return subprocess.run([sys.executable, os.path.join(here, "report.py"),
                               "--size", str(size), "--rate", rate] + args + list(extra),
                              capture_output=True, text=True)


prof = {"iteration_ms": {"fwd_ms": 500.0, "bwd_ms": 1500.0, "step_ms": 3.0},
        "total_params": 1000000}
p = balance(prof, 64, "8mbit")
check("--balance: 2 s of compute against 4 s of wire at 64 px gives 96 px",
      p.returncode == 0 and p.stdout.split() == ["96", "2.00", "4.00"], p.stdout + p.stderr)
p = balance(prof, 64, "1gbit")
check("--balance: compute-bound (0.032 s of wire) stays within the smallest size, 32",
      p.returncode == 0 and p.stdout.split()[0] == "32", p.stdout + p.stderr)
p = balance(prof, 256, "100kbit")
check("--balance: 320 s of wire is capped at the largest size, 512",
      p.returncode == 0 and p.stdout.split()[0] == "512", p.stdout + p.stderr)
for what, bad, rate in (("truncated JSON", '{"iteration_ms": {', "8mbit"),
                        ("no total_params", {"iteration_ms": prof["iteration_ms"]}, "8mbit"),
                        ("zero compute", dict(prof, iteration_ms={"fwd_ms": 0, "bwd_ms": 0}), "8mbit"),
                        ("a rate without a unit", prof, "8")):
    p = balance(bad, 64, rate)
    check("--balance: %s is an error that says what is wrong, exit 1" % what,
          p.returncode == 1 and not p.stdout and "report.py: " in p.stderr and
          "Traceback" not in p.stderr, p.stdout + p.stderr)


# --prev: the growth of compute measured between two sizes replaces the
# pixels'. 1 s at 64 px, 8 s at 128 px: compute grows with the side
# cubed; 2 s of wire (16 Mbit/s) then wants 128 * (2/8)^(1/3) = 80.6,
# rounded to 96, where the pixels' rule (k = 2) would give 64.
def prof_ms(ms):
    return {"iteration_ms": {"fwd_ms": ms / 4, "bwd_ms": ms * 3 / 4, "step_ms": 3.0},
            "total_params": 1000000}


p = balance(prof_ms(8000), 128, "16mbit", prof_ms(1000), 64)
check("--balance --prev: compute growing with the side cubed, 8 s of it "
      "against 2 s of wire at 128 px, gives 96 px",
      p.returncode == 0 and p.stdout.split() == ["96", "8.00", "2.00"], p.stdout + p.stderr)
p = balance(prof_ms(8000), 128, "16mbit")
check("--balance without --prev: the same profile by the pixels gives 64 px",
      p.returncode == 0 and p.stdout.split()[0] == "64", p.stdout + p.stderr)
p = balance(prof_ms(4400), 128, "8mbit", prof_ms(1000), 64)
check("--balance --prev: 4.4 s of compute against 4 s of wire is within 20%: "
      "the size stays 128",
      p.returncode == 0 and p.stdout.split()[0] == "128", p.stdout + p.stderr)
# Noise: compute measured smaller at the larger size. The exponent is
# clamped to 1 (linear in the side): 128 * 2 / 8 = 32.
p = balance(prof_ms(8000), 128, "16mbit", prof_ms(9000), 64)
check("--balance --prev: compute that shrank with the size is taken as "
      "linear in the side, 32 px",
      p.returncode == 0 and p.stdout.split()[0] == "32", p.stdout + p.stderr)
for what, prev_size in (("no --prev-size", None), ("--prev-size equal to --size", 128)):
    p = balance(prof_ms(8000), 128, "16mbit", prof_ms(1000), prev_size)
    check("--balance --prev with %s is an error, exit 1" % what,
          p.returncode == 1 and not p.stdout and "report.py: " in p.stderr and
          "Traceback" not in p.stderr, p.stdout + p.stderr)
# make demo's case (a run on a loaded host): 0.70 s at 96 px, 0.24 s at
# 64 px, 0.44 s of wire: the exponent 2.64 wants 80.5 px; rounded to 32
# that is 96 (0.70 s of compute, far from the balance), to 16 it is 80.
p = balance(prof_ms(240), 64, "72727kbit", prof_ms(700), 96)
p16 = balance(prof_ms(240), 64, "72727kbit", prof_ms(700), 96, ("--step", "16"))
check("--balance --step 16: make demo's loaded-host case gives 80 px, 96 at the default 32",
      p.returncode == 0 and p.stdout.split() == ["96", "0.24", "0.44"] and
      p16.returncode == 0 and p16.stdout.split() == ["80", "0.24", "0.44"],
      p.stdout + p.stderr + p16.stdout + p16.stderr)
# --plus-forward (make demo): the wire time against the compute plus one
# more forward. 0.5 s forward + 1.5 s backward + 0.5 s forward = 2.5 s
# against 4 s of wire at 64 px: 64 * sqrt(4 / 2.5) = 81 px, 80 at 16 px
# steps (without it 64 * sqrt(2) = 90.5: 96); compute is printed as
# measured, 2 s.
p = balance(prof, 64, "8mbit", extra=("--step", "16", "--plus-forward"))
p0 = balance(prof, 64, "8mbit", extra=("--step", "16"))
check("--balance --plus-forward: 2 s of compute and a 0.5 s forward against 4 s "
      "of wire give 80 px (96 without)",
      p.returncode == 0 and p.stdout.split() == ["80", "2.00", "4.00"] and
      p0.returncode == 0 and p0.stdout.split()[0] == "96", p.stdout + p.stderr + p0.stdout)
# with --prev the forward is added to both profiles: 2.5 s at 64 px and
# 10 s at 128 px (k = 2) against 4 s: 64 * sqrt(1.6) = 81, 80
p = balance(prof, 64, "8mbit", prof_ms(8000), 128, ("--step", "16", "--plus-forward"))
check("--balance --plus-forward --prev: the forward counted in both profiles, 80 px",
      p.returncode == 0 and p.stdout.split() == ["80", "2.00", "4.00"], p.stdout + p.stderr)
# --down (make demo): the size rounds down, and a size within 20% of the
# balance is kept only on the communication-bound side. The demo's two
# loaded-host runs that landed on 96 px: (1) 0.45 s at 96 px (forward a
# quarter, so 0.5625 s with one more) against 0.44 s of wire gives
# 96 * sqrt(0.44 / 0.5625) = 84.9: 80 rounded to 16, and 80 down;
# (2) 0.36 s at 96 px, 0.45 s with the forward, within 20% of 0.44 s but
# on the compute-bound side: kept at 96 by the nearest rule with
# --prev, 80 with --down (96 * sqrt(0.44 / 0.45) = 94.9).
p = balance(prof_ms(450), 96, "72727kbit", extra=("--step", "16", "--plus-forward", "--down"))
check("--balance --down --plus-forward: 0.45 s at 96 px against 0.44 s of wire gives 80 px",
      p.returncode == 0 and p.stdout.split() == ["80", "0.45", "0.44"], p.stdout + p.stderr)
p = balance(prof_ms(360), 96, "72727kbit", prof_ms(220), 80, ("--step", "16", "--plus-forward"))
pd = balance(prof_ms(360), 96, "72727kbit", prof_ms(220), 80,
             ("--step", "16", "--plus-forward", "--down"))
check("--balance --down --prev: 0.45 s (with the forward) against 0.44 s of wire, "
      "compute-bound within 20%, goes down to 80 px; kept at 96 without --down",
      p.returncode == 0 and p.stdout.split()[0] == "96" and
      pd.returncode == 0 and pd.stdout.split()[0] == "80",
      p.stdout + p.stderr + pd.stdout + pd.stderr)
# the demo's run 3 of 8838b9d: 0.22 s at 80 px after 0.45 s at 96 px;
# the fitted exponent (clamped to 4) wants 80 * (0.44 / 0.275)^(1/4) =
# 90: 96 to the nearest 16, 80 down; communication-bound within 20%
# (0.275 s is 1.6x under the wire), so no shortcut either way.
p = balance(prof_ms(220), 80, "72727kbit", prof_ms(450), 96, ("--step", "16", "--plus-forward"))
pd = balance(prof_ms(220), 80, "72727kbit", prof_ms(450), 96,
             ("--step", "16", "--plus-forward", "--down"))
check("--balance --down: 0.22 s at 80 px after 0.45 s at 96 stays at 80 (96 to the nearest)",
      p.returncode == 0 and p.stdout.split()[0] == "96" and
      pd.returncode == 0 and pd.stdout.split()[0] == "80",
      p.stdout + p.stderr + pd.stdout + pd.stderr)
# a size whose formula lands exactly on a step stays there
p = balance(prof_ms(1000), 64, "8mbit", extra=("--step", "16", "--down"))
check("--balance --down: an exact 128 px (4x the wire of the compute at 64) stays 128",
      p.returncode == 0 and p.stdout.split()[0] == "128", p.stdout + p.stderr)
p = balance(prof_ms(240), 64, "72727kbit", extra=("--step", "0"))
check("--balance --step 0 is an error, exit 1",
      p.returncode == 1 and "--step must be positive" in p.stderr and
      "Traceback" not in p.stderr, p.stdout + p.stderr)
p = balance(prof_ms(8000), 128, "16mbit", '{"iteration_ms": ', 64)
check("--balance --prev with a truncated profile is an error, exit 1",
      p.returncode == 1 and "Traceback" not in p.stderr, p.stdout + p.stderr)


# The interval (report.bootstrap): a percentile bootstrap of the median,
# seeded, so that known inputs give known intervals.
ci = report.bootstrap({0: [1.0, 2.0]})
check("two ratios 1 and 2: median 1.5, interval [1, 2] (a resample's median "
      "is 1, 1.5 or 2), which holds 1.0: 'no difference'",
      ci["median"] == 1.5 and ci["lo"] == 1.0 and ci["hi"] == 2.0 and
      report.verdict(ci) == "no difference" and
      report.fmt_ratio(ci) == "1.500x [1.000-2.000] n=2  no difference",
      json.dumps(ci))
# Nine distinct ratios x1 < ... < x9: the bootstrap median is x(k) or
# less with probability P(Binomial(9, k/9) >= 5): 0.0014 for k = 1,
# 0.0304 for k = 2, 0.9696 for k = 7, 0.9986 for k = 8; the 2.5% and
# 97.5% quantiles are x(2) and x(8).
nine = [1.01 + 0.01 * i for i in range(9)]
ci = report.bootstrap({0: nine[::-1]})
check("nine ratios 1.01..1.09: interval [1.02, 1.08], the exact bootstrap "
      "distribution's 2.5% and 97.5% quantiles; above 1.0: 'faster'",
      ci["median"] == nine[4] and ci["lo"] == nine[1] and ci["hi"] == nine[7]
      and report.verdict(ci) == "faster" and
      "no difference" not in report.fmt_ratio(ci), json.dumps(ci))
ci = report.bootstrap({0: [0.8, 0.85, 0.9]})
check("three ratios below 1: interval [0.8, 0.9], 'slower'",
      ci["lo"] == 0.8 and ci["hi"] == 0.9 and report.verdict(ci) == "slower",
      json.dumps(ci))
ci = report.bootstrap({0: [1.0] * 4})
check("equal ratios of 1.0: interval [1, 1], 'no difference'",
      ci["lo"] == ci["hi"] == 1.0 and report.verdict(ci) == "no difference")
ci = report.bootstrap({0: [1.3]})
check("one ratio: no interval, and none claimed",
      ci["lo"] is None and report.verdict(ci) == "no interval" and
      report.fmt_ratio(ci) == "1.300x (1 run, no interval)" and
      report.bootstrap({}) is None)
check("the same seed gives the same interval; resamples are the stated number",
      report.bootstrap({0: nine, 1: nine[:4]}) == report.bootstrap({0: nine, 1: nine[:4]})
      and report.BOOT_RESAMPLES == 10000)
# Two boots: boot 0's ratios all 1.2, boot 1's all 0.9. Resampling the
# boots gives boot 0 twice (median 1.2), boot 1 twice (0.9) or one of
# each (1.05), each pair with probability 1/4: the interval is [0.9, 1.2].
ci = report.bootstrap({0: [1.2] * 3, 1: [0.9] * 3})
check("two boots that disagree: the boots are resampled, [0.9, 1.2], "
      "'no difference'",
      ci["lo"] == 0.9 and ci["hi"] == 1.2 and ci["boots"] == 2 and
      report.verdict(ci) == "no difference" and "2 boots" in report.fmt_ratio(ci),
      json.dumps(ci))


def boot_dir(d, table, extra=None, model="toy"):
    """A run directory of model from {scheme: [it/s per repetition]}
    (None: that repetition did not run); both ranks alike."""
    os.makedirs(os.path.join(d, "runs"))
    with open(os.path.join(d, "runs", "index"), "w") as idx:
        for sch, reps in table.items():
            for r, ips in enumerate(reps, 1):
                if ips is None:
                    continue
                tag = "%s.%s.%d" % (model, sch, r)
                idx.write("%s %d\n" % (tag, r))
                for k in (0, 1):
                    rk = rank(sch, k, ips, [2.0, 1.5, 1.0])
                    rk["model"] = model
                    rk["config"] = (extra or {}).get(sch, {})
                    with open(os.path.join(d, "runs", "%s.r%d.json" % (tag, k)), "w") as f:
                        json.dump(rk, f)


def run_dirs(*dirs):
    p = subprocess.run([sys.executable, os.path.join(here, "report.py"),
                        "--out", dirs[0], "--rate", "10mbit", "--no-plot"]
                       + list(dirs[1:]), capture_output=True, text=True)
    js = None
    if p.returncode == 0:
        with open(os.path.join(dirs[0], "bench-torch.json")) as f:
            js = json.load(f)
    return p, js


# Pairs only within one repetition of one boot: boot A ran ddp in
# repetitions 1-2 and mercury in 2-3; boot B mercury in 1 only. Only
# repetition 2 of boot A has both: one ratio, 2.0 / 1.0.
with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
    boot_dir(a, {"ddp": [1.0, 1.0, None], "mercury": [None, 2.0, 4.0]})
    boot_dir(b, {"ddp": [None], "mercury": [8.0]})
    p, js = run_dirs(a, b)
    r = js["models"]["toy"]["ratios"].get("mercury_vs_ddp") if js else None
    check("ratios only of schemes run in the same repetition of the same boot",
          r is not None and r["n"] == 1 and r["median"] == 2.0 and
          r["lo"] is None and "2.000x (1 run, no interval)" in p.stdout,
          p.stdout + p.stderr)

# Several run directories (boots) as arguments: boot A's ratios are
# 1.2 (x3), boot B's 1.25 (x3); the interval spans both boots' values
# and the pooled median is 1.225.
with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
    boot_dir(a, {"ddp": [1.0, 2.0, 1.5], "mercury": [1.2, 2.4, 1.8]})
    boot_dir(b, {"ddp": [1.0, 2.0, 4.0], "mercury": [1.25, 2.5, 5.0]})
    p, js = run_dirs(a, b)
    r = js["models"]["toy"]["ratios"].get("mercury_vs_ddp") if js else None
    check("two boots given as directories: 6 ratios in 2 boots, median 1.225, "
          "interval [1.2, 1.25]",
          r is not None and r["n"] == 6 and r["boots"] == 2 and
          abs(r["median"] - 1.225) < 1e-12 and abs(r["lo"] - 1.2) < 1e-12 and
          abs(r["hi"] - 1.25) < 1e-12 and "n=6, 2 boots" in p.stdout and
          "two-stage over 2 boots" in js["interval"], p.stdout + p.stderr)

# Models measured in separate runs (one a session) pooled into one
# table written to an empty OUTDIR: DIR A, an OUTDIR of boots, holds toy
# in two boots, run directory B toy2 in one, with its own sweep and
# simulation, which the report must find in B.
with tempfile.TemporaryDirectory() as top, tempfile.TemporaryDirectory() as a, \
        tempfile.TemporaryDirectory() as b:
    for k in (1, 2):
        boot_dir(os.path.join(a, "boot-%d" % k), {"ddp": [1.0] * 2, "mercury": [1.2] * 2})
    with open(os.path.join(a, "boot-1", "tune-toy.txt"), "w") as f:
        f.write("5\n5 0.400\n25 0.450\n")
    boot_dir(b, {"ddp": [1.0] * 2, "mercury": [1.5] * 2}, model="toy2")
    with open(os.path.join(b, "skipped.txt"), "w") as f:
        f.write("bench-torch: leaving out ddp-powersgd for toy2 from here on: "
                "run 1 hung for 900 s\n")
    with open(os.path.join(b, "tune-toy2.txt"), "w") as f:
        f.write("1\n1 0.300\n25 0.350\n")
    for s, ms in (("fifo-stream", 1000.0), ("mercury", 800.0)):
        with open(os.path.join(b, "runs", "sim-toy2-%s.json" % s), "w") as f:
            json.dump({"compute_ms": 500.0, "gradient_bytes": 4000000,
                       "results": [{"scheme": s, "iteration_ms": ms}]}, f)
    p, js = run_dirs(top, a, b)
    ms = (js or {}).get("models", {})
    check("models from separate runs pooled: one headline column each, each "
          "model's sweep and simulation from the directory that ran it, "
          "the boots counted per model",
          p.returncode == 0 and set(ms) == {"toy", "toy2"} and
          ms["toy"]["ratios"]["mercury_vs_ddp"]["boots"] == 2 and
          ms["toy2"]["ratios"]["mercury_vs_ddp"]["boots"] == 1 and
          abs(ms["toy2"]["ratios"]["mercury_vs_ddp"]["median"] - 1.5) < 1e-12 and
          (ms["toy"]["tune"] or "-")[0] == "5" and (ms["toy2"]["tune"] or "-")[0] == "1" and
          ms["toy2"]["sim_ms"].get("mercury") == 800.0 and
          not ms["toy"]["sim_ms"] and
          "(boots: toy 2, toy2 1)" in p.stdout.split("\n")[1] and
          p.stdout.startswith("leaving out ddp-powersgd for toy2 from here on"),
          p.stdout + p.stderr)

# The DDP variants: their configuration is printed (ddp-tuned's sweep
# from run.sh's tune-MODEL.txt, PowerSGD's rank), the best fp32 DDP
# variant is the one faster than stock DDP, and mercury.torch is held
# against it; a lossy scheme's loss difference is printed.
with tempfile.TemporaryDirectory() as d:
    boot_dir(d, {"ddp": [1.0, 1.0, 1.0], "ddp-tuned": [1.1, 1.1, 1.1],
                 "ddp-fp16": [1.3, 1.3, 1.3], "ddp-powersgd": [2.0, 2.0, 2.0],
                 "mercury": [1.21, 1.21, 1.21]},
             {"ddp-tuned": {"bucket_cap_mb": 5.0, "gradient_as_bucket_view": True},
              "ddp-fp16": {"comm_hook": "fp16_compress_hook"},
              "ddp-powersgd": {"comm_hook": "powerSGD_hook",
                               "matrix_approximation_rank": 2,
                               "start_powerSGD_iter": 2, "min_compression_rate": 0.5}})
    # PowerSGD's losses differ from the fp32 reduction's by 10%
    for r in (1, 2, 3):
        for k in (0, 1):
            f = os.path.join(d, "runs", "toy.ddp-powersgd.%d.r%d.json" % (r, k))
            with open(f) as g:
                rk = json.load(g)
            rk["losses"] = [2.0, 1.5, 1.1]
            with open(f, "w") as g:
                json.dump(rk, g)
    with open(os.path.join(d, "tune-toy.txt"), "w") as f:
        f.write("5\n1 0.500\n5 0.400\n25 0.450\n")
    with open(os.path.join(d, "torch.env"), "w") as f:
        f.write('QUICK=1\nSCHEMES="ddp ddp-tuned"\n')
    with open(os.path.join(d, "skipped.txt"), "w") as f:
        f.write("bench-torch: leaving out mercury-fp16: no compression yet\n")
    p, js = run_dirs(d)
    m = js["models"]["toy"] if js else {}
    check("DDP variants: configuration and the bucket_cap_mb sweep printed",
          "DDP tuned: bucket_cap_mb 5, gradient_as_bucket_view True (the sweep's "
          "fastest, s/iter: 1 MB 0.500, 5 MB 0.400, 25 MB 0.450)" in p.stdout and
          "matrix_approximation_rank 2, start_powerSGD_iter 2" in p.stdout and
          "DDP fp16_compress_hook: fp16_compress_hook" in p.stdout,
          p.stdout + p.stderr)
    # the sweep over gradient_as_bucket_view as well (run.sh's keys
    # CAP:on and CAP:off), the view off chosen
    with open(os.path.join(d, "tune-toy.txt"), "w") as f:
        f.write("5:off\n1:on 0.500\n1:off 0.520\n5:on 0.410\n5:off 0.400\n")
    p2, _ = run_dirs(d)
    check("DDP variants: the sweep over bucket_cap_mb and gradient_as_bucket_view printed",
          "(the sweep's fastest, s/iter: 1 MB view on 0.500, 1 MB view off 0.520, "
          "5 MB view on 0.410, 5 MB view off 0.400)" in p2.stdout, p2.stdout + p2.stderr)
    check("mercury.torch against the best fp32 DDP variant (tuned, 1.1x): "
          "1.1x, target NOT met",
          abs(m.get("ratios", {}).get("mercury_vs_ddp-tuned", {}).get("median", 0) - 1.1)
          < 1e-12 and "(DDP tuned buckets): 1.100x [1.100-1.100] n=3 (target 1.15x, "
          "lower end 1.05: NOT met)" in p.stdout and
          m.get("targets") == {"mercury_vs_ddp-tuned": False}, p.stdout)
    check("every scheme against stock DDP, PowerSGD against mercury.torch",
          all(k in m.get("ratios", {}) for k in (
              "ddp-tuned_vs_ddp", "ddp-fp16_vs_ddp", "ddp-powersgd_vs_ddp",
              "mercury_vs_ddp-powersgd", "mercury_vs_ddp-fp16")) and
          abs(m["ratios"]["mercury_vs_ddp-powersgd"]["median"] - 0.605) < 1e-12 and
          m["ratios"]["mercury_vs_ddp-powersgd"]["verdict"] == "slower", p.stdout)
    check("a lossy scheme's loss difference is printed (PowerSGD 10%)",
          "DDP PowerSGD 1.0e-01 (0.0e+00)" in p.stdout and
          abs(m.get("lossy_rel_dev", {}).get("ddp-powersgd", 0) - 0.1) < 1e-12,
          p.stdout)
    check("a quick run is labelled a preview; the schemes left out are listed",
          p.stdout.startswith("PREVIEW (BT_QUICK=1") and js["quick"] is True and
          "leaving out mercury-fp16: no compression yet" in p.stdout, p.stdout)

# The headline table, from an OUTDIR of boots as run.sh's BT_BOOTS
# leaves it (boot-1, boot-2; the report pools them and is written to
# OUTDIR). Stock DDP runs at 1.0 it/s everywhere; per boot:
#   ddp-tuned     1.0 / 1.1        -> 1.05x [1.0-1.1] over DDP: no difference
#   mercury       1.3 / 1.4        -> 1.35x [1.3-1.4]; over ddp-tuned, the
#                                     best fp32 variant (1.05x): 1.3 and
#                                     1.4/1.1, median 1.286: target met
#   ddp-fp16      1.2 / 1.2
#   mercury-fp16  1.26 / 1.26      -> 1.05x over DDP fp16: target missed,
#                                     its forward blocked 0.9 of 2.1 s and
#                                     the host's CPU 97% busy
#   prio          boot 2 only: 0.9, 1.0, 1.1 -> 1.0x [0.9-1.1], 3 runs, 1 boot
# The interval of two boots whose ratios are each constant: resampling
# the boots gives both from one boot or one from each, so its ends are
# the two boots' values (two-stage bootstrap, above).
def headline_dirs(top):
    for k, (tuned, merc, prio) in enumerate(((1.0, 1.3, None), (1.1, 1.4, [0.9, 1.0, 1.1])), 1):
        d = os.path.join(top, "boot-%d" % k)
        table = {"ddp": [1.0] * 3, "ddp-tuned": [tuned] * 3, "ddp-fp16": [1.2] * 3,
                 "mercury": [merc] * 3, "mercury-fp16": [1.26] * 3}
        if prio:
            table["prio"] = prio
        boot_dir(d, table, {"ddp-tuned": {"bucket_cap_mb": 5.0,
                                          "gradient_as_bucket_view": True}})
        for r in (1, 2, 3):
            tag = "toy.mercury-fp16.%d" % r
            for k2 in (0, 1):
                f = os.path.join(d, "runs", "%s.r%d.json" % (tag, k2))
                with open(f) as g:
                    rk = json.load(g)
                rk["phases"] = [[9, 9, 9, 9], [1.0, 0.9, 1.0, 0.1]]
                with open(f, "w") as g:
                    json.dump(rk, g)
            # the host's ticks: 97 of 100 not idle
            for c, line in (("cpu0", "cpu  0 0 0 100 0 0 0 0 0 0\n"),
                            ("cpu1", "cpu  97 0 0 103 0 0 0 0 0 0\n")):
                with open(os.path.join(d, "runs", "%s.%s" % (tag, c)), "w") as g:
                    g.write(line)
    # the first boot's sweep is the one the report prints
    with open(os.path.join(top, "boot-1", "tune-toy.txt"), "w") as f:
        f.write("5\n1 0.500\n5 0.400\n25 0.450\n")


with tempfile.TemporaryDirectory() as top:
    headline_dirs(top)
    p, js = run_dirs(top)
    out = p.stdout
    hl = (js or {}).get("headline", {}).get("toy", {})
    check("an OUTDIR of boots: the report pools boot-1 and boot-2 and is "
          "written to OUTDIR",
          p.returncode == 0 and js["boots"] == 2 and
          os.path.exists(os.path.join(top, "bench-torch.txt")) and
          not os.path.exists(os.path.join(top, "boot-1", "bench-torch.txt")) and
          "two-stage over 2 boots" in js["interval"] and
          "5 MB 0.400" in out, out + p.stderr)
    check("the headline table comes first: a row per scheme, it/s over "
          "stock DDP with its interval and runs/boots",
          out.startswith("headline: it/s over stock DDP") and
          re.search(r"\n  stock DDP +1 \(6 runs\)", out) and
          re.search(r"\n  mercury\.torch, sch_mercury +1\.350x \[1\.300-1\.400\] 6/2 *\n", out)
          and hl.get("mercury", {}).get("n") == 6 and hl["mercury"]["boots"] == 2 and
          "mercury.torch, pfifo, 1 chan" not in out.split("\n\n")[0], out)
    check("headline verdicts: an interval holding 1.0 is 'no difference', "
          "a scheme run in one boot says so",
          re.search(r"\n  DDP tuned buckets +1\.050x \[1\.000-1\.100\] 6/2 no difference", out)
          and re.search(r"\n  mercury\.torch, prio 16 +1\.000x \[0\.900-1\.100\] 3/1 "
                        r"no difference", out) and
          hl.get("prio", {}).get("verdict") == "no difference", out)
    check("headline targets: mercury.torch over the best fp32 DDP variant "
          "(tuned) met",
          "toy: mercury.torch, sch_mercury over the best fp32 DDP variant (DDP "
          "tuned buckets): 1.286x [1.273-1.300] n=6, 2 boots: met" in out and
          js["models"]["toy"]["targets"].get("mercury_vs_ddp-tuned") is True, out)
    check("headline targets: fp16 over DDP fp16 missed, with the measured "
          "blocked forward and host CPU that explain it",
          re.search(r"toy: mercury\.torch fp16, sch_mercury over DDP fp16 \(DDP "
                    r"fp16_compress_hook\): 1\.050x \[1\.050-1\.050\] n=6, 2 boots: "
                    r"missed\n    why: .*forward waited 0\.90 s of each 2\.10 s iteration.*"
                    r"host CPU was 97% busy.*; measured: .*host CPU 97%", out) and
          js["models"]["toy"]["targets"].get("mercury-fp16_vs_ddp-fp16") is False, out)
    # the ratio plot's data and script (gnuplot itself is not needed)
    text, js = report.report(top, "10mbit")
    scripts = []
    real_run = report.subprocess.run
    report.subprocess.run = lambda args, input=None, **kw: scripts.append(input)
    try:
        report.plot_ratios(top, js)
    finally:
        report.subprocess.run = real_run
    with open(os.path.join(top, "ratios-toy-0.dat")) as f:
        merc = f.read().split("\n")
    gp = scripts[0] if scripts else ""
    # x positions follow the table's order: ddp-tuned 0, ddp-fp16 1,
    # prio 2, mercury 3, mercury-fp16 4
    check("ratio plot: Mercury's points and intervals in their own series, "
          "dark blue, a line at 1.0, every scheme a labelled tick",
          merc[:2] == ["3 1.350000 1.300000 1.400000", "4 1.260000 1.260000 1.260000"]
          and 'lc rgb "#08306b"' in gp and "plot 1 with lines" in gp and
          "with yerrorbars" in gp and '"mercury.torch, prio 16" 2' in gp and
          '"DDP tuned buckets" 0' in gp and "bench-torch-ratios.png" in gp, gp)

with tempfile.TemporaryDirectory() as top:
    os.makedirs(os.path.join(top, "boot-1"))
    p, js = run_dirs(top)
    check("an OUTDIR with neither runs/ nor a boot that has runs is an error "
          "that says so, exit 1",
          p.returncode == 1 and "no runs/index in" in p.stderr and
          "Traceback" not in p.stderr, p.stdout + p.stderr)

# vit: a size the rule picks is a multiple of 32 (balanced_size's step),
# so the patch must divide 32, and the probe must be a multiple of it.
with open(os.path.join(here, "models.py")) as f:
    m = re.search(r"^VIT_PATCH = (\d+)", f.read(), re.M)
with open(os.path.join(here, "run.sh")) as f:
    probe = re.search(r"\bvit_probe=(\d+)", f.read())
step = report.balanced_size.__defaults__[1:3]   # (step, lo)
check("vit: its patch divides the size rule's step and smallest size, "
      "and its probe size",
      m and probe and step[0] % int(m.group(1)) == 0 and step[1] % int(m.group(1)) == 0
      and int(probe.group(1)) % int(m.group(1)) == 0,
      "%s %s %s" % (m and m.group(1), probe and probe.group(1), step))

with open(os.path.join(here, "run.sh")) as f:
    m = re.search(r'^ALL_SCHEMES="([^"]*)"', f.read(), re.M)
check("run.sh runs the schemes the report knows, in its order",
      m is not None and m.group(1).split() == report.SCHEMES and
      all(s in report.LABEL for s in report.SCHEMES), m.group(1) if m else "")
finish()
