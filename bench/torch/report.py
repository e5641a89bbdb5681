#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""The table and plot of bench/torch/run.sh, from what a run recorded.

    report.py --out OUTDIR [--rate RATE] [--no-plot] [--quick] [DIR...]
    report.py --balance PROFILE --size PIXELS --rate RATE
              [--prev PROFILE0 --prev-size PIXELS0]

Reads OUTDIR/runs/index ("TAG REQ" per run, TAG = model.scheme.repeat),
OUTDIR/runs/TAG.r{0,1}.json (worker.py), OUTDIR/runs/sim-MODEL-SCHEME.json
(mercury-sim --json) and OUTDIR/profile-MODEL.json; writes
OUTDIR/bench-torch.txt (printed too), bench-torch.json, bench-torch.png
(iteration times and losses) and bench-torch-ratios.png (every scheme's
it/s over stock DDP with its interval, per model).
An OUTDIR without runs/ but with boot-1, boot-2, ... (run.sh with
BT_BOOTS > 1) pools those boots' runs. Further DIRs (or --also DIR),
each a run directory or an OUTDIR of boots, are pooled with OUTDIR's:
other boots of the same models, or another model's run (one model a
session). Each model's simulator input, profiles and ddp-tuned sweep
come from the first directory that ran it; the report is written to
OUTDIR, which may hold no runs of its own.

The report opens with the headline table: per model, every scheme's it/s
over stock DDP (median [95% interval], how many runs and boots it rests
on, "no difference" where the interval holds 1.0) and the issue's
targets, met or missed, with the measured quantities that explain a miss.

Every ratio between two schemes is computed from runs measured side by
side: the same repetition of the same boot (run.sh runs every scheme in
turn within a repetition), never from absolute times of different
repetitions or boots. It is reported as the median of those per-repetition
ratios with a 95% percentile-bootstrap interval (BOOT_RESAMPLES resamples,
random.Random(BOOT_SEED)): with one boot, the ratios are resampled with
replacement; with several, the boots are resampled first, then each drawn
boot's ratios (a two-stage bootstrap, so that the spread between boots
counts). An interval that holds 1.0 is printed "no difference"; one ratio
alone has no interval.
With --balance, prints the input size at which the profile's compute
equals its gradients' wire time at RATE, then that compute and wire time
in seconds (run.sh chooses each model's size with it); with --prev, a
profile of the same model at another size, from how compute grew between
the two; with --plus-forward, where the wire time equals the compute
plus one more forward (make demo); --step N rounds to N pixels (32),
--down rounds down, to the communication-bound side (make demo).
Standard library only (the tests run it with any python3).
"""
import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys

SCHEMES = ["ddp", "ddp-tuned", "ddp-fp16", "ddp-bf16", "ddp-powersgd",
           "fifo", "fifo1", "prio", "mercury", "fifo1-fp16", "mercury-fp16"]
LABEL = {"ddp": "stock DDP", "ddp-tuned": "DDP tuned buckets",
         "ddp-fp16": "DDP fp16_compress_hook",
         "ddp-bf16": "DDP bf16_compress_hook",
         "ddp-powersgd": "DDP PowerSGD",
         "fifo": "mercury.torch, pfifo",
         "fifo1": "mercury.torch, pfifo, 1 chan",
         "prio": "mercury.torch, prio 16", "mercury": "mercury.torch, sch_mercury",
         "fifo1-fp16": "mercury.torch fp16, pfifo, 1 chan",
         "mercury-fp16": "mercury.torch fp16, sch_mercury"}
# the schemes whose arithmetic is stock DDP's (fp32 all-reduce of the
# averaged gradient): the best of them is what mercury.torch must beat
DDP_FP32 = ["ddp", "ddp-tuned"]
MERCURY_FP32 = ["fifo", "fifo1", "prio", "mercury"]
MERCURY_FP16 = ["fifo1-fp16", "mercury-fp16"]
BOOT_RESAMPLES = 10000
BOOT_SEED = 1
LEVEL = 0.95
# The prediction compared with the measurements: mercury.torch's
# per-tensor all-reduce with gated forwards is the simulator's streaming
# model; a FIFO queue is fifo-stream, strict priority per packet is
# mercury (prio's bands are per packet too; the simulator's "prio" is per
# message, which no qdisc here does, and is shown for reference only).
# fifo1 (one channel: one connection per peer) is the simulator's FIFO;
# fifo (8 channels) lets TCP share the link among 8 connections, between
# a FIFO and fair queueing, and is compared with fifo-stream too.


def boot_dirs(d):
    """The run directories of d: d itself if it holds runs/, else its
    boot-K directories (run.sh's BT_BOOTS) in boot order; [] if neither."""
    if os.path.exists(os.path.join(d, "runs", "index")):
        return [d]
    boots = []
    try:
        names = os.listdir(d)
    except OSError:
        names = []
    for name in names:
        k = name[len("boot-"):]
        if (name.startswith("boot-") and k.isdigit() and
                os.path.exists(os.path.join(d, name, "runs", "index"))):
            boots.append((int(k), os.path.join(d, name)))
    return [b for _, b in sorted(boots)]


def run_dirs(out, also=()):
    """The run directories a report pools: OUTDIR's (boot_dirs), then
    those of each of also, which may be run directories or OUTDIRs of
    boots, such as another model's run."""
    dirs = boot_dirs(out) + [b for d in also for b in (boot_dirs(d) or [d])]
    return dirs or [out]


def model_boots(runs, model):
    """The indices (into the pooled directories) of the boots that ran
    model, in order."""
    return sorted({r["boot"] for rs in runs[model].values() for r in rs})


def load_runs(outs, rate="?"):
    """The runs of every directory of outs (several boots' runs pooled)."""
    runs = {}
    for boot, out in enumerate(outs):
        with open(os.path.join(out, "runs", "index")) as f:
            for line in f:
                if not line.split():
                    continue
                tag = line.split()[0]
                req = int(line.split()[1]) - 1 if len(line.split()) > 1 else -1
                model, scheme, rep = tag.rsplit(".", 2)
                ranks = []
                for r in (0, 1):
                    p = os.path.join(out, "runs", "%s.r%d.json" % (tag, r))
                    if os.path.exists(p):
                        with open(p) as g:
                            ranks.append(json.load(g))
                net = dict(tcp_delta(out, tag) or {})
                net.update(guest_queue(out, req) or {})
                net.update(link_use(out, req, rate) or {})
                hc = host_cpu(out, tag)
                if hc is not None:
                    net["host_cpu"] = hc
                runs.setdefault(model, {}).setdefault(scheme, []).append(
                    {"rep": int(rep), "boot": boot, "ranks": ranks,
                     "ok": len(ranks) == 2, "net": net})
    return runs


def read_netstat(path):
    """/proc/net/snmp + /proc/net/netstat as {"Tcp.RetransSegs": n, ...}:
    each group is a line of names followed by a line of values."""
    out = {}
    try:
        with open(path) as f:
            lines = [l.split() for l in f if l.strip()]
    except OSError:
        return None
    for names, vals in zip(lines[::2], lines[1::2]):
        if names[0] != vals[0]:
            return None
        for k, v in zip(names[1:], vals[1:]):
            try:
                out[names[0].rstrip(":") + "." + k] = int(v)
            except ValueError:
                pass
    return out


# The counters that say what the bottleneck queue did to the senders.
TCP_COUNTERS = [("retrans", "Tcp.RetransSegs"), ("rto", "TcpExt.TCPTimeouts"),
                ("spurious_rto", "TcpExt.TCPSpuriousRTOs")]


def tcp_delta(out, tag):
    """Both ranks' TCP counters over one run, summed; None if not recorded."""
    tot = {}
    for r in (0, 1):
        base = os.path.join(out, "runs", "%s.r%d.net" % (tag, r))
        a, b = read_netstat(base + "0"), read_netstat(base + "1")
        if a is None or b is None:
            return None
        for key, name in TCP_COUNTERS:
            tot[key] = tot.get(key, 0) + b.get(name, 0) - a.get(name, 0)
    return tot


def cpu_busy(a, b):
    """The share of CPU time not idle between two /proc/stat cpu lines'
    tick lists (user nice system idle iowait irq softirq steal ...);
    None if no time passed."""
    total = sum(b[:8]) - sum(a[:8])
    idle = (b[3] + b[4]) - (a[3] + a[4])
    return (total - idle) / total if total > 0 else None


def host_cpu(out, tag):
    """The host's CPU busy share over one run (run.sh's TAG.cpu0/cpu1)."""
    try:
        ticks = []
        for k in (0, 1):
            with open(os.path.join(out, "runs", "%s.cpu%d" % (tag, k))) as f:
                ticks.append([float(x) for x in f.read().split()[1:]])
    except (OSError, ValueError):
        return None
    if min(len(t) for t in ticks) < 8:
        return None
    return cpu_busy(*ticks)


def guest_queue(out, req):
    """Bytes sent and packets dropped by every port's root qdisc (tbf,
    which counts its child's drops) during request req's runs."""
    p = os.path.join(out, "stats.%d" % req)
    sent = dropped = 0
    try:
        with open(p) as f:
            text = f.read().split("\n")
    except OSError:
        return None
    for i, line in enumerate(text):
        if line.startswith("qdisc tbf") and i + 1 < len(text):
            # " Sent B bytes P pkt (dropped D, overlimits ..."
            w = text[i + 1].split()
            if len(w) < 7 or w[0] != "Sent" or w[5] != "(dropped":
                return None
            sent += int(w[1])
            dropped += int(w[6].rstrip(","))
    return {"wire_bytes": sent, "drops": dropped}


def rate_bytes(rate):
    """Bytes per second of a tc rate ("30mbit", "1gbit", "500kbit",
    "2000bit"); None if it is none of these."""
    for unit, mult in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1)):
        if rate.endswith(unit):
            try:
                return float(rate[:-len(unit)]) * mult / 8
            except ValueError:
                return None
    return None


def profile_times(profile, rate):
    """(compute, wire) of a profile in seconds: one step's forward and
    backward, and its gradients' time on a link of rate. Each of 2 ranks
    sends every gradient byte once a step (half in the reduce-scatter,
    half in the all-gather), so the wire time is the gradient bytes over
    the rate. Raises ValueError on a profile or rate it cannot use."""
    bps = rate_bytes(rate)
    if not bps or bps <= 0:
        raise ValueError("not a rate: %r" % rate)
    with open(profile) as f:
        try:
            d = json.load(f)
        except ValueError as e:
            raise ValueError("%s: not a profile (%s)" % (profile, e)) from None
    try:
        it = d["iteration_ms"]
        compute = (float(it["fwd_ms"]) + float(it["bwd_ms"])) / 1000
        wire = int(d["total_params"]) * 4 / bps
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError("%s: no iteration_ms.fwd_ms/bwd_ms or total_params (%s)"
                         % (profile, e)) from None
    if not compute > 0 or not wire > 0 or math.isinf(compute):
        raise ValueError("%s: compute %.3f s, wire %.3f s" % (profile, compute, wire))
    return compute, wire


def forward_time(profile):
    """One step's forward in seconds (profile_times has checked it)."""
    with open(profile) as f:
        return float(json.load(f)["iteration_ms"]["fwd_ms"]) / 1000


def balanced_size(profile, rate, size, prev=None, prev_size=0,
                  step=32, lo=32, hi=512, near=1.2, plus_forward=False,
                  down=False):
    """The input size (pixels a side) at which one step's compute equals
    the time its gradients take on a link of rate (profile_times): what
    makes a setting communication-bound without leaving nothing to
    overlap. From one profile, measured at size, compute is taken to
    grow with the pixels (the side squared). Compute grows faster than
    that on a CPU whose caches the larger activations outgrow (measured:
    resnet18 1.22 s at 128 px, 16.2 s at 384 px, 13x for 9x the
    pixels), so with prev, a profile of the same model at prev_size, the
    exponent is the one the two measured instead, and a profile already
    within a factor near of the balance keeps its size. Rounded to step,
    within [lo, hi]. Returns (size, compute, wire) of profile.

    plus_forward: balance the wire time against a step's compute plus
    one more forward instead: the size at which the order of the
    gradients has the most to gain, all of the next forward's compute
    able to run while the last gradients are still on the link (make
    demo's rule). compute and wire are returned as measured.

    down: round down to step, never to the nearest, and keep a size
    within near of the balance only when it is on the
    communication-bound side (make demo). On a loaded host a profile of
    a few iterations wanders (the demo's model at 96 px measured 0.36 to
    0.70 s of compute in four runs): rounding down makes an error in the
    measured compute land where the order still has something to gain,
    not where the backward pass hides it."""
    compute, wire = profile_times(profile, rate)
    measured = compute
    if plus_forward:
        compute += forward_time(profile)
    k = 2.0
    if prev is not None:
        if prev_size <= 0 or prev_size == size:
            raise ValueError("--prev needs the other profile's size, not %d" % prev_size)
        if max(compute, wire) / min(compute, wire) <= near and \
                not (down and compute > wire):
            return size, measured, wire
        c0, _ = profile_times(prev, rate)
        if plus_forward:
            c0 += forward_time(prev)
        # Timing noise can make the fit absurd; between linear in the
        # side and its fourth power covers what a CPU or GPU shows.
        k = max(1.0, min(4.0, math.log(compute / c0) / math.log(size / prev_size)))
    x = size * (wire / compute) ** (1 / k) / step
    s = step * (math.floor(x + 1e-9) if down else round(x))
    return max(lo, min(hi, s)), measured, wire


def link_use(out, req, rate):
    """How busy the guest's ports were during request req's run, from
    guest.sh's samples (uptime, then each port's tx bytes, every 0.5 s):
    over the training window (first to last sample in which a port sent
    anything), the mean share of the link rate used, the share of
    half-second samples in which the busier port used under a tenth of
    it (idle), and the share in which every port used at least 90% of it
    (full: a run whose link had data waiting all along but is seldom
    full was held back by the path to the link, not by the rate). None
    without samples."""
    bps = rate_bytes(rate)
    try:
        with open(os.path.join(out, "util.%d" % req)) as f:
            rows = [[float(x) for x in line.split()] for line in f if line.strip()]
    except (OSError, ValueError):
        return None
    rows = [r for r in rows if len(r) == len(rows[0])] if rows else []
    if not bps or len(rows) < 3 or len(rows[0]) < 2:
        return None
    steps = [(b[0] - a[0], [y - x for x, y in zip(a[1:], b[1:])])
             for a, b in zip(rows, rows[1:]) if b[0] > a[0]]
    moving = [i for i, (_, d) in enumerate(steps) if max(d) > 0]
    if not moving:
        return None
    win = steps[moving[0]:moving[-1] + 1]
    secs = sum(dt for dt, _ in win)
    nports = len(win[0][1])
    busy = sum(sum(d) for _, d in win) / (bps * secs * nports)
    idle = sum(1 for dt, d in win if max(d) < 0.1 * bps * dt) / len(win)
    full = sum(1 for dt, d in win if min(d) >= 0.9 * bps * dt) / len(win)
    res = {"link_busy": busy, "link_idle": idle, "link_full": full, "window_s": secs}
    res.update(guest_cpu(out, req, rows[moving[0]][0], rows[moving[-1] + 1][0]))
    return res


def guest_cpu(out, req, t0, t1):
    """How busy the guest was between uptimes t0 and t1, from guest.sh's
    FILE.cpu samples (uptime, then /proc/stat's cpu lines, 10 ticks each:
    all vCPUs, then each): guest_cpu, the share of all vCPUs' time not
    idle; guest_cpu_max, the busiest vCPU's. {} without two samples in
    the window."""
    try:
        with open(os.path.join(out, "util.%d.cpu" % req)) as f:
            rows = [[float(x) for x in line.split()] for line in f if line.strip()]
    except (OSError, ValueError):
        return {}
    rows = [r for r in rows if len(r) == 11 or (len(r) > 11 and (len(r) - 1) % 10 == 0)]
    rows = [r for r in rows if t0 <= r[0] <= t1 and len(r) == len(rows[0])]
    if len(rows) < 2:
        return {}
    a, b = rows[0], rows[-1]
    groups = [cpu_busy(a[1 + 10 * g:11 + 10 * g], b[1 + 10 * g:11 + 10 * g])
              for g in range((len(a) - 1) // 10)]
    res = {"guest_cpu": groups[0]} if groups[0] is not None else {}
    per = [g for g in groups[1:] if g is not None]
    if per:
        res["guest_cpu_max"] = max(per)
    return res


def iter_times(rk):
    """Per-iteration wall time of one rank: start to next start; the last
    iteration ends when its step has been applied (worker.py's end)."""
    t = rk["starts"] + [rk["end"]]
    return [b - a for a, b in zip(t, t[1:])]


def steady_interval(rk):
    """A rank's mean time per iteration in steady state, what a long job
    sees: from the start of the second iteration to the start of the last
    (the first fills mercury.torch's pipeline, with no gradients to wait
    for; the last drains it, synchronize() waiting for its traffic).
    None with fewer than 3 iterations."""
    st = rk["starts"]
    return (st[-1] - st[1]) / (len(st) - 2) if len(st) >= 3 else None


def run_ips(r):
    """A run's throughput: all its iterations over the time from the
    first forward to the last step applied, the slower rank's."""
    return min(k["iters"] / (k["end"] - k["starts"][0]) for k in r["ranks"])


def run_steady(r):
    """A run's steady it/s (steady_interval), the slower rank's; None
    with fewer than 3 iterations."""
    t = [steady_interval(k) for k in r["ranks"]]
    return 1 / max(t) if None not in t and max(t) > 0 else None


def paired_ratios(schemes, a, b, metric=run_ips):
    """metric(a) / metric(b) of every repetition in which both a and b
    finished, grouped by boot: {boot: [ratio, ...]}. Only runs of one
    repetition of one boot are divided, never runs of different ones."""
    def by_key(s):
        return {(r["boot"], r["rep"]): r for r in schemes.get(s, []) if r["ok"]}
    ra, rb = by_key(a), by_key(b)
    groups = {}
    for key in sorted(set(ra) & set(rb)):
        x, y = metric(ra[key]), metric(rb[key])
        if x is not None and y:
            groups.setdefault(key[0], []).append(x / y)
    return groups


def quantile_sorted(xs, q):
    """The order statistic of sorted xs at q: xs[floor(q * n)] for the
    lower tail, xs[ceil(q * n) - 1] for the upper, clamped."""
    n = len(xs)
    i = math.floor(q * n) if q < 0.5 else math.ceil(q * n) - 1
    return xs[max(0, min(n - 1, i))]


def bootstrap(groups, reps=BOOT_RESAMPLES, seed=BOOT_SEED, level=LEVEL):
    """The median of the ratios of groups ({boot: [ratio, ...]}) and its
    percentile-bootstrap interval at level: {"median", "lo", "hi", "n",
    "boots"}. One boot: the ratios are resampled with replacement; several:
    the boots are resampled with replacement, then the ratios of each
    boot drawn (two stages, so that between-boot spread widens the
    interval). lo and hi are None with fewer than 2 ratios. None without
    any ratio."""
    gs = [list(g) for g in (groups.values() if isinstance(groups, dict)
                            else groups) if g]
    pooled = [x for g in gs for x in g]
    if not pooled:
        return None
    res = {"median": statistics.median(pooled), "lo": None, "hi": None,
           "n": len(pooled), "boots": len(gs)}
    if len(pooled) < 2:
        return res
    rng = random.Random(seed)
    meds = []
    for _ in range(reps):
        if len(gs) == 1:
            sample = rng.choices(gs[0], k=len(gs[0]))
        else:
            sample = [x for g in rng.choices(gs, k=len(gs))
                      for x in rng.choices(g, k=len(g))]
        meds.append(statistics.median(sample))
    meds.sort()
    res["lo"] = quantile_sorted(meds, (1 - level) / 2)
    res["hi"] = quantile_sorted(meds, 1 - (1 - level) / 2)
    return res


def verdict(ci):
    """"no difference" when the interval holds 1.0, "faster" or "slower"
    when it lies above or below it, "no interval" without one."""
    if ci is None or ci["lo"] is None:
        return "no interval"
    if ci["lo"] <= 1.0 <= ci["hi"]:
        return "no difference"
    return "faster" if ci["lo"] > 1.0 else "slower"


def fmt_ratio(ci):
    """"1.231x [1.203-1.260]", with "no difference" where the interval
    holds 1.0 and the number of ratios, "-" without any."""
    if ci is None:
        return "-"
    if ci["lo"] is None:
        return "%.3fx (1 run, no interval)" % ci["median"]
    v = verdict(ci)
    return "%.3fx [%.3f-%.3f] n=%d%s%s" % (
        ci["median"], ci["lo"], ci["hi"], ci["n"],
        ", %d boots" % ci["boots"] if ci["boots"] > 1 else "",
        "  no difference" if v == "no difference" else "")


def summarize(model, schemes):
    rows = {}
    for s in SCHEMES:
        ok = [r for r in schemes.get(s, []) if r["ok"]]
        if not ok:
            continue
        # A run's throughput: all its iterations over the time from the
        # first forward to the last step applied, the slower rank's. Not
        # worker.py's it_per_s (after the warm-up): mercury.torch's first
        # backward returns with its gradients still in flight, so a window
        # opening at the second forward would charge it one iteration's
        # traffic more than DDP, whose first iteration is over by then.
        ips = [run_ips(r) for r in ok]
        # steady state: the slower rank's, per run
        sts = [[steady_interval(k) for k in r["ranks"]] for r in ok]
        steady = (statistics.median(1 / max(t) for t in sts)
                  if all(None not in t for t in sts) else None)
        losses = [[statistics.fmean(v) for v in zip(*(k["losses"] for k in r["ranks"]))]
                  for r in ok]
        times = [[statistics.fmean(v) for v in zip(*(iter_times(k) for k in r["ranks"]))]
                 for r in ok]
        sums = [[k["param_sum"] for k in r["ranks"]] for r in ok]
        rk = ok[0]["ranks"][0]
        net = {k: statistics.median(r["net"][k] for r in ok)
               for k in ("retrans", "rto", "spurious_rto", "drops", "wire_bytes",
                         "link_busy", "link_idle", "link_full", "guest_cpu",
                         "guest_cpu_max", "host_cpu")
               if all(k in r["net"] for r in ok)}
        # Phases of every iteration after the first (worker.py), both
        # ranks: forward, the part of it blocked on the network,
        # backward, step; medians. Older records have none.
        ph = [it for r in ok for k in r["ranks"] for it in k.get("phases", [])[1:]]
        phases = ([statistics.median(v) for v in zip(*ph)] if ph else None)
        rows[s] = {
            "net": net, "phases": phases,
            "runs": len(ok), "failed": len(schemes.get(s, [])) - len(ok),
            "it_per_s": ips, "median": statistics.median(ips),
            "min": min(ips), "max": max(ips), "steady": steady,
            "losses": losses, "times": times, "param_sums": sums,
            "final_loss": losses[0][-1], "iters": rk["iters"],
            "warmup": rk["warmup"], "batch": rk["batch"], "size": rk["size"],
            "params": rk["params"], "config": rk.get("config", {}),
        }
    return rows


def load_sim(out, model):
    sim = {}
    for s in ("fifo-stream", "prio", "mercury"):
        p = os.path.join(out, "runs", "sim-%s-%s.json" % (model, s))
        if os.path.exists(p):
            with open(p) as f:
                d = json.load(f)
            sim[s] = d["results"][0]["iteration_ms"]
            sim["compute_ms"] = d["compute_ms"]
            sim["gradient_bytes"] = d["gradient_bytes"]
    return sim


def carried_sim(out, model, runs, rate):
    """mercury-sim at the rate the link carried. The simulator's link
    sends at its full rate whenever data waits; the guest's link did not
    (TCP through the emulated router, its drops and timeouts, the CPU
    the guest shares): its busy share is the fraction of the rate that
    the transport carried. The median busy share of the mercury.torch
    runs (all comm-bound here) times the rate is fed to the simulator
    again, with the profile and MTU of the run. None without samples, a
    profile or the simulator."""
    bps = rate_bytes(rate)
    busy = [r["net"]["link_busy"] for s in ("fifo", "fifo1", "prio", "mercury")
            for r in runs.get(s, []) if r["ok"] and "link_busy" in r["net"]]
    prof = os.path.join(out, "profile-%s.json" % model)
    sim = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                       "userspace", "sim", "mercury-sim")
    if not bps or not busy or not os.path.exists(prof) or not os.access(sim, os.X_OK):
        return None
    mtu = "1500"
    try:
        with open(os.path.join(out, "torch.env")) as f:
            for line in f:
                if line.startswith("MTU="):
                    mtu = line.strip().split("=", 1)[1]
    except OSError:
        pass
    share = statistics.median(busy)
    res = {"share": share, "bps": 8 * bps * share}
    for s in ("fifo-stream", "mercury"):
        p = subprocess.run([sim, "--profile", prof, "--workers", "2", "--servers", "2",
                            "--bandwidth", "%.0f" % res["bps"], "--mtu", mtu,
                            "--scheme", s, "--json"], capture_output=True, text=True)
        if p.returncode != 0:
            return None
        res[s] = json.loads(p.stdout)["results"][0]["iteration_ms"]
    return res


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def read_env(out):
    """run.sh's OUTDIR/torch.env as a dict ({} without one)."""
    env = {}
    try:
        with open(os.path.join(out, "torch.env")) as f:
            for line in f:
                if "=" in line:
                    k, v = line.strip().split("=", 1)
                    env[k] = v.strip('"')
    except OSError:
        pass
    return env


def read_tune(out, model):
    """ddp-tuned's sweep (run.sh's OUTDIR/tune-MODEL.txt: the chosen
    setting, then "SETTING SECONDS" per setting tried, a setting being
    "CAP:on" or "CAP:off", bucket_cap_mb and gradient_as_bucket_view, or
    "CAP" alone in older runs, which tried the view on only): (setting,
    [(setting, s/iter)]), or None."""
    try:
        with open(os.path.join(out, "tune-%s.txt" % model)) as f:
            lines = [l.split() for l in f if l.strip()]
        return lines[0][0], [(c, float(t)) for c, t in lines[1:]]
    except (OSError, IndexError, ValueError):
        return None


def tune_label(setting):
    """"5:off" -> "5 MB view off"; "5" (an older run) -> "5 MB"."""
    cap, _, view = setting.partition(":")
    return "%s MB%s" % (cap, " view " + view if view else "")


def comparisons(schemes):
    """The ratios the report claims, (numerator, denominator), in order:
    every scheme against stock DDP; mercury.torch against the best fp32
    DDP variant, PowerSGD and DDP fp16; mercury.torch fp16 against DDP
    fp16; the queues against each other. Only pairs both run."""
    have = [s for s in SCHEMES if s in schemes]
    pairs = [(s, "ddp") for s in have if s != "ddp" and "ddp" in have]
    for a, b in (("mercury", "ddp-tuned"), ("mercury", "ddp-powersgd"),
                 ("mercury", "ddp-fp16"), ("mercury-fp16", "ddp-fp16"),
                 ("fifo1-fp16", "ddp-fp16"), ("mercury-fp16", "ddp-powersgd"),
                 ("mercury-fp16", "fifo1-fp16"), ("mercury", "fifo1"),
                 ("mercury", "fifo"), ("prio", "fifo"), ("mercury", "prio"),
                 ("fifo", "fifo1")):
        if a in have and b in have:
            pairs.append((a, b))
    return pairs


def report(out, rate, also=(), quick=False):
    dirs = run_dirs(out, also)
    runs = load_runs(dirs, rate)
    # the first boot's directory: its settings
    out = dirs[0]
    text, js = [], {"rate": rate, "models": {}, "boots": len(dirs),
                    "interval": "median of per-repetition ratios, %d%% "
                    "percentile bootstrap, %d resamples, seed %d%s" % (
                        100 * LEVEL, BOOT_RESAMPLES, BOOT_SEED,
                        ", two-stage over %d boots" % len(dirs)
                        if len(dirs) > 1 else "")}
    env = read_env(out)
    quick = quick or env.get("QUICK") == "1"
    js["quick"] = quick
    if quick:
        text.append("PREVIEW (BT_QUICK=1: one repetition of a few iterations "
                    "of a small model): it shows that every scheme runs end "
                    "to end; its numbers are not results.")
    # what each pooled directory left out (another model's run may have
    # left out other schemes), each line once
    for d in dirs:
        try:
            with open(os.path.join(d, "skipped.txt")) as f:
                for line in f:
                    line = line.strip().replace("bench-torch: ", "")
                    if line and line not in text:
                        text.append(line)
        except OSError:
            pass
    head = len(text)
    for model in sorted(runs):
        # The model's profiles, simulations and sweep are in the first
        # directory that ran it: models measured in separate runs (one
        # model a session) are pooled into one table.
        mout = dirs[model_boots(runs, model)[0]]
        rows = summarize(model, runs[model])
        sim = load_sim(mout, model)
        any_row = next(iter(rows.values()), None)
        if any_row is None:
            text.append("%s: no run finished" % model)
            continue
        text.append("%s: batch %d x %dpx per rank, %.1f M parameters (%.1f MB "
                    "of gradients), 2 ranks, link %s, it/s over all %d "
                    "iterations" % (model, any_row["batch"], any_row["size"],
                                    any_row["params"] / 1e6,
                                    4e-6 * any_row["params"], rate,
                                    any_row["iters"]))
        text.append("  %-32s %4s %8s %17s %10s %9s %9s" % (
            "scheme", "runs", "it/s", "spread (min-max)", "s/iter",
            "loss@%d" % any_row["iters"], "steady"))
        for s in SCHEMES:
            if s not in rows:
                continue
            r = rows[s]
            text.append("  %-32s %4d %8.4f %8.4f-%-8.4f %10.2f %9.6f %9s%s" % (
                LABEL[s], r["runs"], r["median"], r["min"], r["max"],
                1 / r["median"], r["final_loss"],
                "%.4f" % r["steady"] if r["steady"] else "-",
                "  (%d failed)" % r["failed"] if r["failed"] else ""))
        text.append("  (it/s: all %d iterations, first forward to the last step "
                    "applied, the slower rank's, median of runs; steady: it/s "
                    "from the start of iteration 2 to the start of the last, "
                    "what a long job sees)" % any_row["iters"])
        conf = []
        tn = read_tune(mout, model)
        if "ddp-tuned" in rows:
            c = rows["ddp-tuned"]["config"]
            conf.append("DDP tuned: bucket_cap_mb %s, gradient_as_bucket_view %s%s" % (
                "%g" % c["bucket_cap_mb"] if "bucket_cap_mb" in c else "?",
                c.get("gradient_as_bucket_view", "?"),
                " (the sweep's fastest, s/iter: %s)" % ", ".join(
                    "%s %.3f" % (tune_label(k), t) for k, t in tn[1]) if tn else ""))
        if "ddp-powersgd" in rows:
            c = rows["ddp-powersgd"]["config"]
            conf.append("DDP PowerSGD: matrix_approximation_rank %s, "
                        "start_powerSGD_iter %s, min_compression_rate %s "
                        "(lossy: its loss differs)" % (
                            c.get("matrix_approximation_rank", "?"),
                            c.get("start_powerSGD_iter", "?"),
                            c.get("min_compression_rate", "?")))
        for s in ("ddp-fp16", "ddp-bf16"):
            if s in rows:
                conf.append("%s: %s" % (LABEL[s], rows[s]["config"].get(
                    "comm_hook", "?")))
        for s in MERCURY_FP16:
            if s in rows:
                conf.append("%s: compression=%r" % (LABEL[s], rows[s]["config"].get(
                    "compression", "?")))
        if conf:
            text.append("  configured: " + "; ".join(conf))
        # Ratios: per repetition, of runs made side by side
        ratios, meas = {}, {}
        text.append("  ratios of it/s, A over B (median of the per-repetition "
                    "ratios, 95% bootstrap interval; n ratios)")
        text.append("    %-64s %-40s %s" % ("", "all %d iterations" % any_row["iters"],
                                            "steady"))
        for a, b in comparisons(rows):
            cis = []
            for prefix, metric in (("", run_ips), ("steady_", run_steady)):
                ci = bootstrap(paired_ratios(runs[model], a, b, metric))
                if ci is None:
                    cis.append("-")
                    continue
                key = "%s%s_vs_%s" % (prefix, a, b)
                ci["verdict"] = verdict(ci)
                ratios[key] = ci
                meas[key] = ci["median"]
                cis.append(fmt_ratio(ci))
            text.append("    %-64s %-40s %s" % (
                "%s / %s" % (LABEL[a], LABEL[b]), cis[0], cis[1]))
        nets = [s for s in SCHEMES if s in rows and rows[s]["net"]]
        if nets:
            text.append("  network per run (median): %-13s %9s %6s %8s %8s %9s %6s %6s %6s %6s %6s %6s" % (
                "", "retrans", "RTOs", "spurious", "drops", "wire MB", "busy", "idle",
                "full", "gCPU", "gMax", "hCPU"))
            for s in nets:
                n = rows[s]["net"]
                text.append("    %-36s %9s %6s %8s %8s %9s %6s %6s %6s %6s %6s %6s" % (LABEL[s], *(
                    "%d" % n[k] if k in n else "-"
                    for k in ("retrans", "rto", "spurious_rto", "drops")),
                    "%.1f" % (n["wire_bytes"] / 1e6) if "wire_bytes" in n else "-",
                    *("%.0f%%" % (100 * n[k]) if k in n else "-"
                      for k in ("link_busy", "link_idle", "link_full", "guest_cpu",
                                "guest_cpu_max", "host_cpu"))))
            if any("link_busy" in rows[s]["net"] for s in nets):
                text.append("    (busy: the ports' mean share of the link rate over "
                            "the run; idle: half-seconds in which both ports used "
                            "under a tenth of it; full: half-seconds in which both "
                            "used at least 90% of it; gCPU: the guest's vCPUs' share "
                            "not idle over the same window, gMax: the busiest "
                            "vCPU's; hCPU: the host's cores' over the run)")
        phs = [s for s in SCHEMES if s in rows and rows[s]["phases"]]
        if phs:
            # Compute that the network slows (a CPU it shares: here the
            # ranks and the emulated guest share 2 cores) shows as forward
            # time not spent blocked, above the profile's forward.
            text.append("  seconds per iteration (median, iterations after "
                        "the first, both ranks): forward (blocked on the "
                        "network) backward step")
            for s in phs:
                f, w, b, st = rows[s]["phases"]
                text.append("    %-36s %6.2f (%5.2f) %7.2f %6.2f" % (
                    LABEL[s], f, w, b, st))
        # losses: the mercury.torch schemes must agree exactly (same
        # reductions, only the packet order differs); DDP to rounding.
        m_losses = [l for s in MERCURY_FP32 if s in rows
                    for l in rows[s]["losses"]]
        exact = all(l == m_losses[0] for l in m_losses) if m_losses else None
        ddp_dev = None
        if "ddp" in rows and m_losses:
            ddp_dev = max(rel(a, b) for l in rows["ddp"]["losses"]
                          for a, b in zip(l, m_losses[0]))
        exact_sums = [x for s in DDP_FP32 + MERCURY_FP32 if s in rows
                      for p in rows[s]["param_sums"] for x in p]
        sum_dev = (max(rel(x, exact_sums[0]) for x in exact_sums)
                   if exact_sums else None)
        text.append("  losses: mercury.torch schemes %s over all %d iterations "
                    "and runs; DDP's differ by at most %s (relative); final "
                    "parameter sums of every rank and run of the fp32 schemes "
                    "within %s" % (
                        "identical" if exact else "NOT identical",
                        any_row["iters"],
                        "%.1e" % ddp_dev if ddp_dev is not None else "-",
                        "%.1e" % sum_dev if sum_dev is not None else "-"))
        # the compressing schemes: how far their losses moved from the
        # fp32 reduction's (mercury.torch's, else stock DDP's)
        ref = m_losses[0] if m_losses else (rows["ddp"]["losses"][0]
                                            if "ddp" in rows else None)
        # (and their final parameters': a compression that starts late,
        # as PowerSGD's start_powerSGD_iter does, changes no loss of a
        # short run, only the last steps)
        lossy, lossy_sum = {}, {}
        for s in ("ddp-fp16", "ddp-bf16", "ddp-powersgd") + tuple(MERCURY_FP16):
            if s in rows and ref:
                lossy[s] = max(rel(a, b) for l in rows[s]["losses"]
                               for a, b in zip(l, ref))
                if exact_sums:
                    lossy_sum[s] = max(rel(x, exact_sums[0])
                                       for p in rows[s]["param_sums"] for x in p)
        if lossy:
            text.append("  compressing schemes, largest relative difference "
                        "from the fp32 reduction's loss (final parameter "
                        "sum): " + ", ".join(
                            "%s %.1e (%s)" % (LABEL[s], d, "%.1e" % lossy_sum[s]
                                              if s in lossy_sum else "-")
                            for s, d in lossy.items()))
        pred = {}
        if sim:
            text.append("  mercury-sim on this run's profile (compute %.0f ms, "
                        "%d workers = servers 2, %s): fifo-stream %.0f ms, "
                        "mercury %.0f ms, prio (per message) %.0f ms per "
                        "iteration" % (sim["compute_ms"], 2, rate,
                                       sim.get("fifo-stream", float("nan")),
                                       sim.get("mercury", float("nan")),
                                       sim.get("prio", float("nan"))))
            if "fifo-stream" in sim and "mercury" in sim:
                pred["mercury_vs_fifo"] = sim["fifo-stream"] / sim["mercury"]
        if "mercury_vs_fifo" in pred and "mercury_vs_fifo" in meas:
            d = meas["mercury_vs_fifo"] / pred["mercury_vs_fifo"] - 1
            text.append("  sch_mercury over pfifo: measured %s, predicted "
                        "%.3fx (%+.1f%%): %s" % (
                            fmt_ratio(ratios["mercury_vs_fifo"]), pred["mercury_vs_fifo"],
                            100 * d, ("within 10%" if abs(d) <= 0.10
                                      else "NOT within 10%") +
                            ("" if meas["mercury_vs_fifo"] > 1
                             else ", but NOT faster than pfifo")))
            meas["vs_prediction"] = d
        if "mercury_vs_fifo" in pred and "mercury_vs_fifo1" in meas:
            d1 = meas["mercury_vs_fifo1"] / pred["mercury_vs_fifo"] - 1
            text.append("  sch_mercury over pfifo with 1 channel (a true FIFO): "
                        "measured %s, predicted %.3fx (%+.1f%%): %s%s" % (
                            fmt_ratio(ratios["mercury_vs_fifo1"]), pred["mercury_vs_fifo"],
                            100 * d1, "within 10%" if abs(d1) <= 0.10
                            else "NOT within 10%",
                            "; 8 channels over 1 on pfifo: %s" %
                            fmt_ratio(ratios["fifo_vs_fifo1"]) if "fifo_vs_fifo1" in meas
                            else ""))
            meas["vs_prediction_fifo1"] = d1
        for k, what in (("fifo1", "pfifo with 1 channel"), ("fifo", "pfifo")):
            key = "steady_mercury_vs_" + k
            if key in meas and "mercury_vs_fifo" in pred:
                d = meas[key] / pred["mercury_vs_fifo"] - 1
                text.append("  steady state, sch_mercury over %s: measured %s, "
                            "predicted %.3fx (%+.1f%%): %s" % (
                                what, fmt_ratio(ratios[key]), pred["mercury_vs_fifo"], 100 * d,
                                "within 10%" if abs(d) <= 0.10 else "NOT within 10%"))
        car = carried_sim(mout, model, runs[model], rate)
        if car:
            pred["carried_bps"] = car["bps"]
            pred["mercury_vs_fifo_carried"] = car["fifo-stream"] / car["mercury"]
            text.append("  mercury-sim at the rate the link carried (median busy "
                        "share of the mercury.torch runs %.0f%%: %.1f Mbit/s): "
                        "fifo-stream %.0f ms, mercury %.0f ms, mercury over "
                        "fifo-stream %.3fx" % (
                            100 * car["share"], car["bps"] / 1e6, car["fifo-stream"],
                            car["mercury"], pred["mercury_vs_fifo_carried"]))
            for k, what in (("mercury_vs_fifo1", "with 1 channel"),
                            ("steady_mercury_vs_fifo1", "with 1 channel, steady state"),
                            ("mercury_vs_fifo", "(8 channels)"),
                            ("steady_mercury_vs_fifo", "(8 channels), steady state")):
                if k in meas:
                    d = meas[k] / pred["mercury_vs_fifo_carried"] - 1
                    text.append("    sch_mercury over pfifo %s: measured %s, "
                                "predicted at the carried rate %.3fx (%+.1f%%): %s" % (
                                    what, fmt_ratio(ratios[k]), pred["mercury_vs_fifo_carried"],
                                    100 * d, "within 10%" if abs(d) <= 0.10
                                    else "NOT within 10%"))
        # Targets (issue 36, TARGET): mercury.torch against the best
        # fp32 DDP variant, and fp16 against DDP's fp16 hook.
        best = None
        fp32 = [d for d in DDP_FP32 if d in rows]
        if fp32:
            best = max(fp32, key=lambda d: 1.0 if d == "ddp"
                       else meas.get("%s_vs_ddp" % d, 0.0))
        js_targets, goals = {}, []
        for a, b, what in (("mercury", best, "the best fp32 DDP variant"),
                           ("mercury-fp16", "ddp-fp16", "DDP fp16")):
            key = "%s_vs_%s" % (a, b)
            if b is None or key not in ratios:
                continue
            ci = ratios[key]
            ok = target_met(ci)
            js_targets[key] = ok
            goals.append({"a": a, "b": b, "what": what, "key": key, "met": ok,
                          "why": None if ok else explain(rows, a, b)})
            text.append("  %s over %s (%s): %s (target 1.15x, lower end "
                        "1.05: %s)" % (LABEL[a], what, LABEL[b], fmt_ratio(ci),
                                       "met" if ok else "NOT met"))
        text.append("")
        js["models"][model] = {
            "schemes": {s: {k: v for k, v in r.items()
                            if k not in ("losses", "times", "param_sums")}
                        for s, r in rows.items()},
            "final_losses": {s: [l[-1] for l in r["losses"]]
                             for s, r in rows.items()},
            "mercury_losses_identical": exact, "ddp_loss_rel_dev": ddp_dev,
            "sim_ms": sim, "predicted": pred, "measured": meas,
            "ratios": ratios, "targets": js_targets,
            "lossy_rel_dev": lossy, "lossy_sum_rel_dev": lossy_sum,
            "tune": tn, "goals": goals,
        }
        js["models"][model]["_rows"] = rows
    text[head:head] = headline(js, runs)
    return text, js


# Targets (issue 36): at least 1.15x with the interval's lower end at
# 1.05 or more, over all iterations.
TARGET = 1.15
TARGET_LO = 1.05


def target_met(ci):
    return (ci is not None and ci["median"] >= TARGET and ci["lo"] is not None
            and ci["lo"] >= TARGET_LO)


def explain(rows, a, b):
    """What the report measured that bears on a missed target of a over
    b: a's and b's link busy share, a's forward time blocked on the
    network, the host's and the guest's CPU; the first clause names the
    quantity that stands out (the link full all along: the wire sets
    the pace whatever the order; a busy CPU: compute, or the emulated
    router, slowed by sharing cores; much of a's forward blocked: its
    parameters came late), or says none did."""
    na, nb = rows[a]["net"], rows[b]["net"]
    facts, lead = [], []

    def pct(x):
        return "%.0f%%" % (100 * x)
    if "link_busy" in na:
        facts.append("link busy %s%s" % (pct(na["link_busy"]),
                                          " (%s %s)" % (LABEL[b], pct(nb["link_busy"]))
                                          if "link_busy" in nb else ""))
        if na["link_busy"] >= 0.85:
            lead.append("the link was busy %s of %s's run: the wire, "
                        "not the order, set the pace" % (pct(na["link_busy"]), LABEL[a]))
        elif na["link_busy"] < 0.5 and nb.get("link_busy", 1) < 0.5:
            lead.append("the link was busy under half the time in both: "
                        "the transport, not the link, set the pace")
    ph = rows[a]["phases"]
    if ph:
        f, w, bw, st = ph
        it = f + bw + st
        facts.append("forward blocked %.2f s of a %.2f s iteration" % (w, it))
        if it > 0 and w / it >= 0.3:
            lead.append("%s's forward waited %.2f s of each %.2f s "
                        "iteration for its parameters" % (LABEL[a], w, it))
    for k, what in (("host_cpu", "host CPU"), ("guest_cpu_max", "busiest guest vCPU")):
        if k in na:
            facts.append("%s %s" % (what, pct(na[k])))
            if na[k] >= 0.95:
                lead.append("the %s was %s busy: compute (or the emulated "
                            "router) was slowed by sharing cores" % (what, pct(na[k])))
    if not facts:
        return "nothing measured to explain it (no link, phase or CPU samples)"
    return "%s; measured: %s" % (
        "; ".join(lead) if lead else "none of link, blocked time or CPU stands out",
        ", ".join(facts))


def fmt_cell(ci):
    """A headline cell: "1.231x [1.203-1.260] 6/3", "no difference"
    where the interval holds 1.0; "-" without a ratio."""
    if ci is None:
        return "-"
    if ci["lo"] is None:
        return "%.3fx (1 run)" % ci["median"]
    return "%.3fx [%.3f-%.3f] %d/%d%s" % (
        ci["median"], ci["lo"], ci["hi"], ci["n"], ci["boots"],
        " no difference" if verdict(ci) == "no difference" else "")


def boots_label(runs, models):
    """How many boots each model's runs come from: "3 boots", or per
    model where directories of separate runs are pooled."""
    nb = {m: len(model_boots(runs, m)) for m in models}
    if len(set(nb.values())) == 1:
        n = nb[models[0]]
        return "%d boot%s" % (n, "s" if n > 1 else "")
    return "boots: " + ", ".join("%s %d" % (m, n) for m, n in nb.items())


def headline(js, runs):
    """The table a reader looks at first: rows the schemes, a column per
    model of it/s over stock DDP; then the targets. Also js["headline"]."""
    models = [m for m in sorted(js["models"]) if "ratios" in js["models"][m]]
    if not models:
        return []
    width = 40
    text = ["headline: it/s over stock DDP, median of the per-repetition ratios "
            "[95%% bootstrap interval] runs/boots paired, \"no difference\" "
            "where the interval holds 1.0 (%s)" % boots_label(runs, models),
            ("  %-36s %s" % ("scheme", " ".join("%-*s" % (width, m)
                                                for m in models))).rstrip()]
    hl = {m: {} for m in models}
    for s in SCHEMES:
        if not any(s in runs.get(m, {}) for m in models):
            continue
        cells = []
        for m in models:
            if s == "ddp":
                rs = js["models"][m]["schemes"].get("ddp")
                cells.append("1 (%d run%s)" % (rs["runs"], "s" if rs["runs"] > 1 else "")
                             if rs else "-")
                continue
            ci = js["models"][m]["ratios"].get("%s_vs_ddp" % s)
            hl[m][s] = ci
            cells.append(fmt_cell(ci))
        text.append(("  %-36s %s" % (LABEL[s], " ".join(
            "%-*s" % (width, c) for c in cells))).rstrip())
    js["headline"] = hl
    for m in models:
        for g in js["models"][m]["goals"]:
            ci = js["models"][m]["ratios"][g["key"]]
            text.append("  %s: %s over %s (%s): %s: %s" % (
                m, LABEL[g["a"]], g["what"], LABEL[g["b"]], fmt_ratio(ci),
                "met" if g["met"] else "missed"))
            if not g["met"]:
                text.append("    why: %s" % g["why"])
    text.append("  (targets: %.2fx with the interval's lower end at %.2f or "
                "more; runs/boots: the paired runs and the boots they come "
                "from)" % (TARGET, TARGET_LO))
    text.append("")
    return text


def plot(out, js):
    models = sorted(js["models"])
    if not models:
        return
    for m in models:
        rows = js["models"][m]["_rows"]
        for s, r in rows.items():
            # per iteration: median over runs of the time, first run's loss
            with open(os.path.join(out, "plot-%s-%s.dat" % (m, s)), "w") as f:
                for i in range(len(r["times"][0])):
                    f.write("%d %.6f %.6f\n" % (
                        i, statistics.median(t[i] for t in r["times"]),
                        r["losses"][0][i]))
    gp = ['set terminal pngcairo size 1200,%d font ",10"' % (400 * len(models)),
          'set output "%s"' % os.path.join(out, "bench-torch.png"),
          "set termoption noenhanced",
          "set multiplot layout %d,2" % len(models), "set grid",
          "set key top left", "set xtics 1"]
    for m in models:
        rows = js["models"][m]["_rows"]
        for col, ylab in ((2, "iteration time (s), median of runs; the last "
                           "one lasts until its step is applied"),
                          (3, "training loss (mean of ranks)")):
            gp.append('set title "%s: %s"' % (m, ylab))
            gp.append('set xlabel "iteration"')
            gp.append("plot " + ", ".join(
                '"%s" using 1:%d with linespoints title "%s"' % (
                    os.path.join(out, "plot-%s-%s.dat" % (m, s)), col,
                    LABEL[s]) for s in SCHEMES if s in rows))
    gp.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(gp) + "\n", text=True,
                   check=True)


# The ratio plot's series: Mercury (sch_mercury) in a strong colour
# with filled points; mercury.torch on stock qdiscs and the DDP variants
# in two greys with open points of other shapes, told apart in greyscale
# by lightness and shape.
RATIO_SERIES = [
    ("Mercury: mercury.torch on sch_mercury", ["mercury", "mercury-fp16"],
     'lc rgb "#08306b" pt 7 ps 1.8 lw 2'),
    ("mercury.torch on a stock qdisc", MERCURY_FP32[:3] + ["fifo1-fp16"],
     'lc rgb "#555555" pt 4 ps 1.4 lw 1.5'),
    ("PyTorch DDP variants", ["ddp-tuned", "ddp-fp16", "ddp-bf16", "ddp-powersgd"],
     'lc rgb "#a0a0a0" pt 8 ps 1.4 lw 1.5'),
]


def plot_ratios(out, js):
    """bench-torch-ratios.png: a panel per model, every scheme's it/s over
    stock DDP as a point with its 95% interval as an error bar, a line at
    1.0 (stock DDP). The numbers go through data files; the labels are
    this file's own (LABEL) and the models' names run.sh's."""
    models = [m for m in sorted(js["models"]) if js.get("headline", {}).get(m)]
    if not models:
        return
    gp = ['set terminal pngcairo size %d,640 font ",10"' % (560 * len(models)),
          'set output "%s"' % os.path.join(out, "bench-torch-ratios.png"),
          "set termoption noenhanced",
          "set multiplot layout 1,%d title \"it/s over stock DDP (1.0): median "
          "of paired runs, bar: 95%% bootstrap interval\"" % len(models),
          "set grid ytics", "set key tmargin center horizontal",
          "set lmargin 12", "set tmargin 7",
          "set xtics rotate by 60 right nomirror",
          "set ylabel \"it/s over stock DDP\""]
    for m in models:
        hl = js["headline"][m]
        order = [s for s in SCHEMES if s in hl and hl[s] is not None]
        if not order:
            continue
        plots = []
        for i, (title, members, style) in enumerate(RATIO_SERIES):
            path = os.path.join(out, "ratios-%s-%d.dat" % (m, i))
            with open(path, "w") as f:
                for x, sch in enumerate(order):
                    if sch in members:
                        ci = hl[sch]
                        lo = ci["lo"] if ci["lo"] is not None else ci["median"]
                        hi = ci["hi"] if ci["hi"] is not None else ci["median"]
                        f.write("%d %.6f %.6f %.6f\n" % (x, ci["median"], lo, hi))
            if any(sch in members for sch in order):
                plots.append('"%s" using 1:2:3:4 with yerrorbars %s title "%s"' % (
                    path, style, title))
        lo = min([hl[s]["lo"] or hl[s]["median"] for s in order] + [1.0])
        hi = max([hl[s]["hi"] or hl[s]["median"] for s in order] + [1.0])
        pad = 0.08 * (hi - lo) + 0.02
        gp += ['set title "%s"' % m,
               "set xrange [-0.6:%f]" % (len(order) - 0.4),
               "set yrange [%f:%f]" % (lo - pad, hi + pad),
               "set xtics (%s)" % ", ".join('"%s" %d' % (LABEL[s], x)
                                            for x, s in enumerate(order)),
               "plot 1 with lines lc rgb \"black\" dt 2 lw 1.5 title \"stock DDP\", "
               + ", ".join(plots),
               "unset key"]         # one legend, over the first panel
    gp.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(gp) + "\n", text=True,
                   check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--rate", default="?",
                    help="the guest's link rate (default: OUTDIR/torch.env's)")
    ap.add_argument("--balance", metavar="PROFILE",
                    help="print the input size at which PROFILE's compute "
                    "equals its gradients' time at --rate (see --size), "
                    "and nothing else")
    ap.add_argument("--size", type=int, default=0,
                    help="the input size PROFILE was measured at")
    ap.add_argument("--prev", metavar="PROFILE0",
                    help="with --balance: a profile of the same model at "
                    "--prev-size; compute's growth between the two is "
                    "extrapolated instead of taking it as the pixels'")
    ap.add_argument("--prev-size", type=int, default=0)
    ap.add_argument("--plus-forward", action="store_true",
                    help="with --balance: balance the wire time against a "
                    "step's compute plus one more forward")
    ap.add_argument("--down", action="store_true",
                    help="with --balance: round the size down, to the "
                    "communication-bound side of the balance")
    ap.add_argument("--step", type=int, default=32,
                    help="with --balance: round the size to this many "
                    "pixels (default 32)")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--also", action="append", default=[], metavar="DIR",
                    help="pool the runs of another run directory or "
                    "OUTDIR of boots (another boot, another model's run) "
                    "with OUTDIR's")
    ap.add_argument("dirs", nargs="*", metavar="DIR",
                    help="more run directories or OUTDIRs of boots, as --also")
    ap.add_argument("--quick", action="store_true",
                    help="label the report a preview (BT_QUICK=1; also "
                    "taken from OUTDIR/torch.env)")
    a = ap.parse_args()
    if a.balance:
        try:
            if a.size <= 0:
                raise ValueError("--size must be the profile's input size (> 0)")
            if a.step <= 0:
                raise ValueError("--step must be positive, not %d" % a.step)
            size, compute, wire = balanced_size(a.balance, a.rate, a.size,
                                                a.prev, a.prev_size,
                                                step=a.step, lo=a.step,
                                                plus_forward=a.plus_forward,
                                                down=a.down)
        except (OSError, ValueError) as e:
            print("report.py: %s" % e, file=sys.stderr)
            return 1
        print("%d %.2f %.2f" % (size, compute, wire))
        return 0
    if not a.out:
        ap.error("--out is required")
    dirs = run_dirs(a.out, a.also + a.dirs)
    missing = [d for d in dirs if not os.path.exists(os.path.join(d, "runs", "index"))]
    if missing:
        print("report.py: no runs/index in %s (nor boot-1, boot-2, ... with "
              "one)" % ", ".join(missing), file=sys.stderr)
        return 1
    rate = a.rate if a.rate != "?" else read_env(dirs[0]).get("RATE", "?")
    text, js = report(a.out, rate, a.also + a.dirs, a.quick)
    print("\n".join(text))
    with open(os.path.join(a.out, "bench-torch.txt"), "w") as f:
        f.write("\n".join(text) + "\n")
    if not a.no_plot:
        plot(a.out, js)
        plot_ratios(a.out, js)
    for m in js["models"].values():
        m.pop("_rows")
    with open(os.path.join(a.out, "bench-torch.json"), "w") as f:
        json.dump(js, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
