#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""The tables of make bench-shared. Scenario 1 of issue 34 (background
bulk): for every scheme, training it/s alone on the link and beside an
untagged bulk TCP transfer (a checkpoint upload) over the same egress,
and the bulk's throughput per 5 s window while the training ran.
Scenario 2 (shallow shared buffer, torch.env's SCENARIO=shallow):
training it/s with every scheme holding the same total bytes, sch_mercury
over each scheme paired per repetition, and the drops per channel
(report_shallow below). Scenario 3 (SCENARIO=twojobs): two jobs training
at once, each job's it/s and the mean of their iteration times against
pfifo's, paired per repetition (report_twojobs).

    report.py --out OUTDIR [--quick] [DIR...]

Reads what bench/torch/run.sh wrote with BT_BULK=1 (runs/index, the
ranks' records, runs/TAG.bulk from bench/shared/bulk.py, the guest's
stats.N and tc-SCHEME.txt); the loading, paired ratios and bootstrap
intervals are bench/torch/report.py's (ratios only within one
repetition of one boot; several DIRs are several boots). Writes
OUTDIR/bench-shared.txt (printed too) and bench-shared.json.

A bulk window counts when it lies inside the training run: from the
first forward of rank 0 to the end of its record (the record's mtime
is the end; worker.py's "end" is seconds after the first forward). A
run whose ranks did not finish (starved, or killed at BT_RUN_TIMEOUT)
has no such span: all the bulk's whole windows count then. Shares are
of the link's rate in payload bytes received (TCP/IP and Ethernet
headers, about 4.4% at MTU 1500, are counted against the bulk).
Standard library only.
"""
import argparse
import json
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "torch"))
import report as torch_report     # noqa: E402  (bench/torch/report.py)

SCHEMES = ["ddp", "fifo", "prio", "prio-last", "ets-strict", "ets-quanta",
           "mercury-share", "mercury-fl", "mercury", "fq"]
LABEL = {"ddp": "stock DDP, pfifo",
         "fifo": "mercury.torch, pfifo",
         "prio": "prio 16, untagged first",
         "prio-last": "prio 16, untagged last",
         "ets-strict": "ets 16 strict, untagged last",
         "ets-quanta": "ets 2 DRR (quanta) + prio 16",
         "mercury-share": "sch_mercury, untagged last, share",
         "mercury-fl": "sch_mercury, share, flow_limit",
         "mercury": "sch_mercury, untagged first",
         "fq": "fq (default bands)"}
TARGET = "mercury-share"
TRAIN_TARGET = 0.90      # with the bulk / alone, at least
BULK_TARGET = 0.9        # x SHARE% of the link in every window


def read_windows(path):
    """bulk.py's windows: [(start, end, bytes)], [] without a file."""
    res = []
    try:
        with open(path) as f:
            for line in f:
                w = line.split()
                if len(w) >= 3:
                    res.append((float(w[0]), float(w[1]), int(w[2])))
    except (OSError, ValueError):
        return []
    return res


def train_span(out, tag):
    """(start, end) in epoch seconds of the training of run TAG, from
    rank 0's record; None if it has none."""
    p = os.path.join(out, "runs", "%s.r0.json" % tag)
    try:
        with open(p) as f:
            rk = json.load(f)
        end = os.stat(p).st_mtime
    except (OSError, ValueError):
        return None
    return end - rk["end"], end


def windows_in(wins, span):
    """The windows of wins that lie inside span (start, end); all of
    them when span is None."""
    if span is None:
        return list(wins)
    return [w for w in wins if w[0] >= span[0] and w[1] <= span[1]]


def shares(wins, rate_bps):
    """Each window's bytes as a percentage of what the link carries in it."""
    return [100.0 * b / ((e - s) * rate_bps) for s, e, b in wins if e > s]


def tap_drops(out, tag):
    """Packets the host's taps dropped during bulk run TAG, before the
    guest's queue (runs/TAG.tapdrops: each tap's tx_dropped before, then
    after); None without the record."""
    try:
        with open(os.path.join(out, "runs", tag + ".tapdrops")) as f:
            v = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return None
    return sum(v[2:4]) - sum(v[0:2]) if len(v) >= 4 else None


def unfinished_bound(out, tag, iters):
    """An unfinished run's training it/s is below ITERS over the seconds
    from its first barrier (runs/TAG.ready, worker.py) to its end
    (runs/TAG.cpu1's mtime); None without both."""
    try:
        with open(os.path.join(out, "runs", tag + ".ready")) as f:
            t0 = float(f.read().split()[0])
        t1 = os.stat(os.path.join(out, "runs", tag + ".cpu1")).st_mtime
    except (OSError, ValueError, IndexError):
        return None
    return iters / (t1 - t0) if t1 > t0 else None


def startup(out, tag, run):
    """Seconds of run TAG (finished) outside its training: run.sh's
    wall time (the mtimes of runs/TAG.cpu0 and .cpu1, written before and
    after the ranks) less the slower rank's training; None unknown."""
    try:
        wall = (os.stat(os.path.join(out, "runs", tag + ".cpu1")).st_mtime -
                os.stat(os.path.join(out, "runs", tag + ".cpu0")).st_mtime)
    except OSError:
        return None
    return max(0.0, wall - max(k["end"] for k in run["ranks"]))


def mercury_xstats(out, req):
    """sch_mercury's untagged_bytes and share_forced on the last port in
    stats.REQ (tc -s's xstats line), or {}."""
    res = {}
    try:
        with open(os.path.join(out, "stats.%d" % req)) as f:
            text = f.read()
    except OSError:
        return res
    last = text.split("== ")[-1].split()
    for k in ("untagged_bytes", "share_forced"):
        if k in last:
            try:
                res[k] = int(last[last.index(k) + 1])
            except (IndexError, ValueError):
                pass
    return res


def index_reqs(out):
    """{tag: request number of its stats file} from runs/index."""
    res = {}
    with open(os.path.join(out, "runs", "index")) as f:
        for line in f:
            w = line.split()
            if len(w) >= 2:
                res[w[0]] = int(w[1]) - 1
    return res


def fmt_ci(ci, min_n=3):
    """torch_report.fmt_ratio, with the interval only from min_n ratios."""
    if ci is None:
        return "-"
    if ci["n"] < min_n:
        return "%.3fx (n=%d, no interval)" % (ci["median"], ci["n"])
    return torch_report.fmt_ratio(ci)


def tc_lines(out, scheme, env):
    """The tc lines of scheme: the guest's record for bench/shared's own
    schemes, the lines of bench/torch/guest.sh for pfifo and prio."""
    p = os.path.join(out, "tc-%s.txt" % scheme)
    if scheme == "ddp" and not os.path.exists(p):
        p = os.path.join(out, "tc-fifo.txt")      # stock DDP queues on pfifo
    if os.path.exists(p):
        with open(p) as f:
            return [l.rstrip("\n") for l in f if l.strip()]
    lim = env.get("LIMIT", "LIMIT")
    root = "tc qdisc add dev DEV root handle 1: tbf rate %s burst BURST limit 100000000" % (
        env.get("RATE", "RATE"))
    if scheme in ("ddp", "fifo"):
        return [root, "tc qdisc add dev DEV parent 1:1 handle 10: pfifo limit %s" % lim]
    if scheme == "prio":
        return [root, "tc qdisc add dev DEV parent 1:1 handle 10: prio bands 16 priomap "
                + " ".join(["0"] * 16)] + [
                    "tc filter add dev DEV parent 10: protocol ip prio 1 u32 match ip "
                    "dsfield %d 0xfc flowid 10:%x" % (b << 2, b + 1) for b in range(15)] + [
                    "tc filter add dev DEV parent 10: protocol ip prio 2 u32 match u32 0 0 "
                    "flowid 10:10"] + [
                    "tc qdisc add dev DEV parent 10:%x pfifo limit %s" % (b, lim)
                    for b in range(1, 17)]
    return []


def report(outs, quick=False):
    out = outs[0]
    env = torch_report.read_env(out)
    rate = env.get("RATE", "?")
    bps = torch_report.rate_bytes(rate)
    share = float(env.get("SHARE", "10"))
    runs = torch_report.load_runs(outs, rate)
    reqs = [index_reqs(o) for o in outs]
    text, js = [], {"rate": rate, "share": share, "quick": quick, "models": {}}
    text.extend(preview(env, quick, js))
    text.append("bench-shared, scenario 1 (background bulk): link %s, sch_mercury "
                "untagged_share %g; bulk per 5 s window as %% of the link "
                "(payload bytes); ratios: median with 95%% bootstrap interval "
                "(%d resamples, seed %d) from 3 runs" % (
                    rate, share, torch_report.BOOT_RESAMPLES, torch_report.BOOT_SEED))
    try:
        with open(os.path.join(out, "hostload.txt")) as f:
            text.append("host: " + " | ".join(l.strip() for l in f if "load" in l))
    except OSError:
        pass
    for model in sorted(runs):
        sch = runs[model]
        names = [s for s in SCHEMES if s in sch or s + "+bulk" in sch]
        mj = js["models"][model] = {}
        text.append("")
        text.append("%s:" % model)
        text.append("  %-34s %8s %8s  %-36s %-22s %6s %s" % (
            "scheme", "alone", "w/ bulk", "with bulk / alone", "bulk % of link: min med (n)",
            "drops (qdisc; taps)", "with bulk vs " + TARGET))
        for s in names:
            alone = [torch_report.run_ips(r) for r in sch.get(s, []) if r["ok"]]
            bulk_runs = sch.get(s + "+bulk", [])
            withb = [torch_report.run_ips(r) for r in bulk_runs if r["ok"]]
            # a run killed at RUN_TIMEOUT trained slower than ITERS in
            # what the timeout left after the start-up of its alone runs
            ups = [startup(outs[r["boot"]], "%s.%s.%d" % (model, s, r["rep"]), r)
                   for r in sch.get(s, []) if r["ok"]]
            ups = [u for u in ups if u is not None]
            # (run.sh's BULK_TIMEOUT, where it has one, is charged to
            # the training alone: ITERS in that many seconds at most)
            bound, left = None, None
            if "BULK_TIMEOUT" in env:
                left = float(env["BULK_TIMEOUT"])
            elif ups and "RUN_TIMEOUT" in env:
                left = float(env["RUN_TIMEOUT"]) - statistics.median(ups)
            if len(withb) < len(bulk_runs) and left and left > 0 and "ITERS" in env:
                bound = float(env["ITERS"]) / left
            ci = torch_report.bootstrap(torch_report.paired_ratios(sch, s + "+bulk", s))
            vs = None
            if s != TARGET:
                vs = torch_report.bootstrap(torch_report.paired_ratios(
                    sch, s + "+bulk", TARGET + "+bulk"))
            pct, drops, tapd, xs, spans, run_bounds = [], [], [], [], 0, []
            for r in bulk_runs:
                tag = "%s.%s+bulk.%d" % (model, s, r["rep"])
                o = outs[r["boot"]]
                span = train_span(o, tag) if r["ok"] else None
                spans += span is not None
                wins = windows_in(read_windows(os.path.join(o, "runs", tag + ".bulk")), span)
                pct += shares(wins, bps) if bps else []
                if not r["ok"] and "ITERS" in env:
                    b = unfinished_bound(o, tag, float(env["ITERS"]))
                    if b is not None:
                        run_bounds.append(b)
                drops.append(r["net"].get("drops"))
                tapd.append(tap_drops(o, tag))
                req = reqs[r["boot"]].get(tag)
                if req is not None and s.startswith("mercury"):
                    xs.append(mercury_xstats(o, req))
            # with each run's own start of training recorded, its own bound
            why = ("" if "BULK_TIMEOUT" in env else " left after the alone runs' start-up")
            if run_bounds and len(run_bounds) == len(bulk_runs) - len(withb):
                bound = max(run_bounds)
                why = " of training, from its first barrier to its stop"
            row = {"alone_ips": alone, "bulk_ips": withb, "ratio": ci,
                   "vs_target": vs, "bulk_pct": pct,
                   "bulk_runs": len(bulk_runs),
                   "bulk_ok": sum(r["ok"] for r in bulk_runs),
                   "drops": drops, "tap_drops": tapd, "xstats": xs, "unfinished_ips_below": bound,
                   "tc": tc_lines(out, s, env)}
            mj[s] = row
            med = lambda xs: "%.3f" % statistics.median(xs) if xs else "-"   # noqa: E731
            bw = ("%.1f %.1f (%d)" % (min(pct), statistics.median(pct), len(pct))
                  if pct else "- (no whole window)")
            wb = med(withb)
            if len(withb) < len(bulk_runs):
                wb += " %d/%d" % (len(withb), len(bulk_runs))
            text.append("  %-34s %8s %8s  %-36s %-22s %6s %s" % (
                LABEL.get(s, s), med(alone), wb, fmt_ci(ci), bw,
                ("/".join(str(d) for d in drops if d is not None) or "-") + (
                    "; " + "/".join(str(d) for d in tapd if d is not None)
                    if any(d is not None for d in tapd) else ""),
                fmt_ci(vs) if s != TARGET else ""))
            if len(withb) < len(bulk_runs):
                text.append("  %-34s training did not finish in %d of %d runs with the "
                            "bulk: stopped after %s%s" % (
                                "", len(bulk_runs) - len(withb), len(bulk_runs),
                                env.get("BULK_TIMEOUT", env.get("RUN_TIMEOUT", "?")) + (
                                    " s of training" if "BULK_TIMEOUT" in env else " s"),
                                ", so below %.3f it/s (%s iterations in %.0f s%s), "
                                "below %.3fx alone" % (
                                    bound, env["ITERS"], float(env["ITERS"]) / bound, why,
                                    bound / statistics.median(alone))
                                if bound and alone else ""))
        t = mj.get(TARGET)
        if t:
            ok_train = t["ratio"] is not None and t["ratio"]["median"] >= TRAIN_TARGET
            need = BULK_TARGET * share
            ok_bulk = bool(t["bulk_pct"]) and min(t["bulk_pct"]) >= need
            mj["targets"] = {"training": ok_train, "bulk": ok_bulk}
            text.append("")
            text.append("  targets (%s): training with the bulk >= %.2fx alone: %s "
                        "(%s); bulk >= %.1f%% of the link in every window: %s (min %s)" % (
                            TARGET, TRAIN_TARGET, "met" if ok_train else "NOT met",
                            fmt_ci(t["ratio"]), need, "met" if ok_bulk else "NOT met",
                            "%.1f%%" % min(t["bulk_pct"]) if t["bulk_pct"] else "-"))
            for x in t["xstats"]:
                if x:
                    text.append("  sch_mercury (port 1, with the bulk): %s" % ", ".join(
                        "%s %d" % kv for kv in sorted(x.items())))
    text.extend(tc_section(js))
    return text, js


# --- scenario 2: shallow shared buffer ---
SHALLOW_LABEL = {"ddp": "stock DDP, pfifo",
                 "fifo": "mercury.torch, pfifo",
                 "prio-last": "prio 16 + u32 DSCP filters",
                 "ets-strict": "ets 16 strict + u32 filters",
                 "mercury-share": "sch_mercury, tag dscp",
                 "mercury-fl": "sch_mercury, flow_limit",
                 "mercury": "sch_mercury, untagged first",
                 "fq": "fq (default bands)"}
SHALLOW_SCHEMES = ["ddp", "fifo", "prio-last", "ets-strict", "mercury-share", "mercury-fl",
                   "mercury", "fq"]
# The sch_mercury the shallow targets judge: as configured for a shallow
# buffer (flow_limit) where the run has it, else the plain one.
SHALLOW_TARGETS = ("mercury-fl", "mercury-share")
UNTAGGED = 0          # the channel of DSCP 0 (and, in prio's catch-all band, 16..63)


def parse_stats(text):
    """guest.sh's stats: {port: [(what, kind, id, parent, sent_pkts,
    drops)]} for every qdisc and class (what "qdisc" or "class") of
    each "== PORT" section, with the counters of its " Sent" line."""
    res, port, cur = {}, None, None
    for line in text.split("\n"):
        w = line.split()
        if line.startswith("== "):
            port = line[3:].strip()
            res[port] = []
            cur = None
        elif port is not None and w and w[0] in ("qdisc", "class") and len(w) >= 3:
            parent = w[w.index("parent") + 1] if "parent" in w[:-1] else "root"
            cur = [w[0], w[1], w[2], parent]
        elif cur is not None and len(w) >= 7 and w[0] == "Sent" and w[5] == "(dropped":
            try:
                res[port].append(tuple(cur) + (int(w[3]), int(w[6].rstrip(","))))
            except ValueError:
                pass
            cur = None
    return res


def band_map(tc):
    """The tags of each band of a prio or ets at 10: from its tc lines:
    ({minor: [tags]}, the catch-all band's minor or None); tags are
    DSCPs (u32 dsfield matches); the catch-all band holds DSCP 0."""
    bands, rest = {}, None
    for line in tc:
        w = line.split()
        if "filter" not in w or "parent" not in w or w[w.index("parent") + 1] != "10:" \
           or "flowid" not in w:
            continue
        minor = int(w[w.index("flowid") + 1].split(":")[1], 16)
        if "dsfield" in w:
            bands.setdefault(minor, []).append(int(w[w.index("dsfield") + 1]) >> 2)
        elif " match u32 0 0 " in line:
            rest = minor
    return bands, rest


def untagged_last(tc):
    """Whether tc's scheme serves untagged traffic (DSCP 0) after every
    tag: sch_mercury's "untagged last", or a prio/ets whose catch-all
    band comes after every tag's."""
    if any(" mercury " in l for l in tc):
        return any("untagged last" in l for l in tc)
    bands, rest = band_map(tc)
    return rest is not None and bool(bands) and rest > max(bands)


def channel_counts(stats, tc):
    """{port: {channel: {"sent": packets, "drops": packets}}} of one run
    (stats: parse_stats's), channel = tag = DSCP, 0 untagged; None when
    the scheme keeps no queue per channel (pfifo, fq). sch_mercury: its
    classes (minor = tag, ffff the untagged class); prio and ets: each
    band's child qdisc, the band's tags from band_map (a band of several
    tags counts as its most urgent one; the catch-all band as untagged)."""
    merc = any(" mercury " in l for l in tc)
    bands, rest = band_map(tc)
    if not merc and not bands:
        return None
    res = {}
    for port, objs in stats.items():
        ch = res[port] = {}
        for what, kind, oid, parent, sent, drops in objs:
            if merc and what == "class" and kind == "mercury":
                minor = oid.split(":")[1]
                tag = UNTAGGED if minor == "ffff" else int(minor, 16)
            elif not merc and what == "qdisc" and parent.startswith("10:"):
                minor = int(parent.split(":")[1] or "0", 16)
                if minor in bands:
                    tag = min(bands[minor])
                elif minor == rest:
                    tag = UNTAGGED
                else:
                    continue
            else:
                continue
            c = ch.setdefault(tag, {"sent": 0, "drops": 0})
            c["sent"] += sent
            c["drops"] += drops
    return res


def urgency(tag, last):
    """Sort key: the more urgent first (tag 1 first; untagged first or
    last)."""
    if tag == UNTAGGED:
        return float("inf") if last else -1
    return tag


def least_urgent_only(chans, last):
    """The target's test on one queue's channels ({channel: {"sent",
    "drops"}}): every channel with drops is less urgent than every
    channel that carried packets without a drop. True when nothing
    dropped."""
    used = {t: c for t, c in chans.items() if c["sent"] + c["drops"] > 0}
    dropped = [t for t, c in used.items() if c["drops"] > 0]
    clean = [t for t, c in used.items() if c["drops"] == 0]
    if not dropped or not clean:
        return True
    return min(urgency(t, last) for t in dropped) > max(urgency(t, last) for t in clean)


def read_rtt(out):
    """bulk.py rtt's line in runs/rtt.txt as {"min", "median", "max", "n"}
    (ms; n a count), or None."""
    try:
        with open(os.path.join(out, "runs", "rtt.txt")) as f:
            w = f.read().split()
        i = w.index("rtt_ms")
        return {k: float(w[w.index(k, i) + 1]) for k in ("min", "median", "max", "n")}
    except (OSError, ValueError, IndexError):
        return None


def tc_section(js):
    """Every scheme's tc lines, once each, as the report ends with them."""
    text = ["", "tc lines (DEV: the guest's egress port; every port alike):"]
    seen = set()
    for m in js["models"].values():
        for s, row in m.items():
            if s in seen or not isinstance(row, dict) or "tc" not in row:
                continue
            seen.add(s)
            text.append("  %s:" % s)
            text.extend("    " + l for l in row["tc"])
    return text


def limits_summary(tc):
    """How a scheme's tc lines split the buffer: "pfifo limit 85",
    "16 x pfifo limit 9", ... (every qdisc line below the root that
    sets a limit, identical ones counted)."""
    seen = []
    for line in tc:
        w = line.split()
        if "qdisc" not in w or "root" in w or "limit" not in w:
            continue
        kind = w[w.index("limit") - 1] if w[w.index("limit") - 1] in ("pfifo", "bfifo") else None
        if kind is None:
            for k in ("mercury", "fq", "pfifo", "bfifo", "prio", "ets"):
                if k in w:
                    kind = k
                    break
        item = kind + " " + " ".join(w[w.index("limit"):])
        for e in seen:
            if e[0] == item:
                e[1] += 1
                break
        else:
            seen.append([item, 1])
    return ", ".join(("%d x %s" % (n, i)) if n > 1 else i for i, n in seen)


def fmt_channels(tot, last):
    """"1:0 2:0 ... u:12" (drops per channel, most urgent first; channels
    that carried nothing left out)."""
    return " ".join("%s:%d" % ("u" if t == UNTAGGED else t, tot[t]["drops"])
                    for t in sorted(tot, key=lambda t: urgency(t, last))
                    if tot[t]["sent"] + tot[t]["drops"] > 0)


def fmt_spread(xs):
    """"median (min-max)" of the known values of xs, "-" without any."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    if len(xs) == 1:
        return "%d" % xs[0]
    return "%g (%d-%d)" % (statistics.median(xs), min(xs), max(xs))


def preview(env, quick, js):
    """The preview line of a BS_QUICK=1 run (marked in js too), or none."""
    if quick or env.get("QUICK") == "1":
        js["quick"] = True
        return ["PREVIEW (BS_QUICK=1: a plumbing check, not a result)"]
    return []


def host_loads(outs):
    """A line per boot: the host's load averages run.sh recorded."""
    text = []
    for k, o in enumerate(outs):
        try:
            with open(os.path.join(o, "hostload.txt")) as f:
                text.append("host%s: " % (" (boot %d)" % (k + 1) if len(outs) > 1 else "") +
                            " | ".join(l.strip().replace("bench-torch: ", "") for l in f
                                       if "load" in l))
        except OSError:
            pass
    return text


def report_shallow(outs, quick=False):
    out = outs[0]
    env = torch_report.read_env(out)
    rate = env.get("RATE", "?")
    bps = torch_report.rate_bytes(rate)
    mtu = int(env.get("MTU", "1500"))
    nbytes = int(env.get("BYTES", "0"))
    chans = int(env.get("CHANNELS", "8"))
    runs = torch_report.load_runs(outs, rate)
    reqs = [index_reqs(o) for o in outs]
    text, js = [], {"scenario": "shallow", "rate": rate, "bytes": nbytes, "channels": chans,
                    "quick": quick, "models": {}}
    text.extend(preview(env, quick, js))
    rtts = [read_rtt(o) for o in outs]
    js["rtt_ms"] = rtts
    text.append("bench-shared, scenario 2 (shallow shared buffer): link %s, every scheme "
                "%d bytes = %d frames of %d B; ratios sch_mercury / scheme: median with 95%% "
                "bootstrap interval (%d resamples, seed %d), paired per repetition" % (
                    rate, nbytes, nbytes // (mtu + 14), mtu + 14,
                    torch_report.BOOT_RESAMPLES, torch_report.BOOT_SEED))
    have = [r for r in rtts if r]
    if have and bps:
        lo = min(r["min"] for r in have)
        text.append("the idle link's round trip (bulk.py rtt, per boot): %s ms min/median; "
                    "BDP at the smallest %.0f bytes; %d channels x 10 initial-window frames "
                    "%d bytes" % (", ".join("%.2f/%.2f" % (r["min"], r["median"]) for r in have),
                                  bps * lo / 1000, chans, chans * 10 * (mtu + 14)))
    text.extend(host_loads(outs))
    for model in sorted(runs):
        sch = runs[model]
        names = [s for s in SHALLOW_SCHEMES if s in sch] + sorted(
            s for s in sch if s not in SHALLOW_SCHEMES)
        mj = js["models"][model] = {}
        target = next((t for t in SHALLOW_TARGETS if t in sch), TARGET)
        js.setdefault("reference", {})[model] = target
        text.append("")
        text.append("%s:" % model)
        text.append("  %-30s %-9s %-38s %-18s %-13s %-5s %s" % (
            "scheme", "it/s", "sch_mercury / this", "drops/run", "RTOs/run", "taps",
            "drops per channel, all runs and ports (most urgent first; u untagged)"))
        text.append("  %-30s %-9s %-38s %-18s %-13s %-5s" % (
            "", "median", "median [95% interval] n", "median (min-max)", "median (min-max)",
            "all"))
        for s in names:
            tc = tc_lines(out, s, env)
            last = untagged_last(tc)
            ok = [torch_report.run_ips(r) for r in sch[s] if r["ok"]]
            vs = None
            if s != target:
                vs = torch_report.bootstrap(torch_report.paired_ratios(sch, target, s))
            drops, tapd, tot, queues, per_run, rtos, missed = [], [], {}, [], [], [], []
            for r in sch[s]:
                tag = "%s.%s.%d" % (model, s, r["rep"])
                o = outs[r["boot"]]
                drops.append(r["net"].get("drops"))
                rtos.append(r["net"].get("rto"))
                tapd.append(tap_drops(o, tag))
                req = reqs[r["boot"]].get(tag)
                cc = None
                if req is not None:
                    try:
                        with open(os.path.join(o, "stats.%d" % req)) as f:
                            cc = channel_counts(parse_stats(f.read()), tc)
                    except OSError:
                        cc = None
                per_run.append(cc)
                for port, ch in sorted((cc or {}).items()):
                    queues.append(least_urgent_only(ch, last))
                    if not queues[-1]:
                        missed.append("boot %d run %d %s: drops on %s; none on %s" % (
                            r["boot"] + 1, r["rep"], port,
                            fmt_channels({t: c for t, c in ch.items() if c["drops"]}, last),
                            " ".join("u" if t == UNTAGGED else str(t) for t in sorted(
                                (t for t, c in ch.items() if c["sent"] and not c["drops"]),
                                key=lambda t: urgency(t, last)))))
                    for t, c in ch.items():
                        e = tot.setdefault(t, {"sent": 0, "drops": 0})
                        e["sent"] += c["sent"]
                        e["drops"] += c["drops"]
            row = {"ips": ok, "runs": len(sch[s]), "vs_target": vs, "drops": drops,
                   "rto": rtos, "missed": missed,
                   "tap_drops": tapd, "channels": per_run, "channel_totals": tot,
                   "untagged_last": last, "least_urgent_only": queues,
                   "limits": limits_summary(tc), "tc": tc}
            mj[s] = row
            ips = "%.3f" % statistics.median(ok) if ok else "-"
            if len(ok) < len(sch[s]):
                ips += " %d/%d" % (len(ok), len(sch[s]))
            text.append("  %-30s %-9s %-38s %-18s %-13s %-5s %s" % (
                SHALLOW_LABEL.get(s, s), ips, fmt_ci(vs) if s != target else "",
                fmt_spread(drops), fmt_spread(rtos),
                "%d" % sum(d for d in tapd if d is not None)
                if any(d is not None for d in tapd) else "-",
                fmt_channels(tot, last) if tot else "total only"))
        text.append("")
        text.append("  buffer split (%d bytes):" % nbytes)
        for s in names:
            text.append("    %-28s %s" % (SHALLOW_LABEL.get(s, s), mj[s]["limits"]))
        t = mj.get(target)
        if t:
            q = t["least_urgent_only"]
            ok_drop = bool(q) and all(q)
            others = {s: r["vs_target"] for s, r in mj.items() if s != target}
            beats = {s: ci is not None and ci["lo"] is not None and ci["lo"] > 1.0
                     for s, ci in others.items()}
            ok_ips = bool(beats) and all(beats.values())
            mj["targets"] = {"least_urgent_only": ok_drop, "beats_all": ok_ips}
            text.append("")
            text.append("  targets (%s):" % target)
            text.append("    drops only on the least urgent channels (in each run's queue on "
                        "each port, every channel with drops less urgent than every channel "
                        "that sent without a drop): %s (%d of %d queues)" % (
                            "met" if ok_drop else "NOT met", sum(q), len(q)))
            for m in t["missed"]:
                text.append("      not in %s" % m)
            text.append("    its it/s beats every other scheme's (sch_mercury / scheme, "
                        "interval above 1.0): %s%s" % (
                            "met" if ok_ips else "NOT met",
                            "" if ok_ips else " (not above 1.0: %s)" % ", ".join(
                                "%s %s" % (s, fmt_ci(others[s])) for s in others
                                if not beats[s])))
    text.extend(tc_section(js))
    return text, js


# --- scenario 3: two jobs on one link ---
TWOJOBS_SCHEMES = ["ddp", "fifo", "prio", "ets-strict", "fq", "mercury"]
TWOJOBS_LABEL = {"ddp": "stock DDP, pfifo",
                 "fifo": "mercury.torch, pfifo",
                 "prio": "mercury.torch, prio 16 + u32 DSCP filters",
                 "ets-strict": "mercury.torch, ets 16 strict + u32 filters",
                 "fq": "mercury.torch, fq (default bands)",
                 "mercury": "mercury.torch, sch_mercury (tag dscp)"}
TWOJOBS_REF = "fifo"        # pfifo, under the same training code
TWOJOBS_TARGET = "mercury"
MEAN_TARGET = 1.2           # the mean iteration time, pfifo's / the scheme's
JOB_TARGET = 0.95           # each job's it/s, the scheme's / pfifo's


def iteration_bounds(out, tag, rank, rec):
    """A rank's iteration boundaries in wall-clock seconds: its "starts"
    and "end" are seconds after its first forward, whose wall-clock time
    is "start_wall" (worker.py), or in older records the record's mtime
    (written when training ended) less "end"."""
    t0 = rec.get("start_wall")
    if t0 is None:
        t0 = os.path.getmtime(os.path.join(out, "runs", "%s.r%d.json" % (tag, rank))) - \
            rec["end"]
    return [t0 + x for x in rec["starts"]] + [t0 + rec["end"]]


def window_ips(bounds, lo, hi):
    """Iterations per second over the iterations (after the first, which
    fills mercury.torch's pipeline) that lie wholly in [lo, hi]; None
    with fewer than 2 of them."""
    idx = [i for i in range(1, len(bounds) - 1) if bounds[i] >= lo and bounds[i + 1] <= hi]
    if len(idx) < 2:
        return None
    return len(idx) / (bounds[idx[-1] + 1] - bounds[idx[0]])


def pair_jobs(outs, model, sch, s):
    """The runs of scheme s in which both jobs finished, one per
    repetition of a boot, measured while both trained: the jobs run a
    fixed number of iterations, so the one that finishes first leaves the
    other the link alone, which a whole-run it/s would credit to the
    scheme. Each job's it/s is taken over the window from the later
    job's second iteration to the earlier job's end (window_ips, the
    slower rank's). {"boot", "rep", "ok", "ips": [job 0, job 1],
    "window": seconds, "mean_s": the mean of the two jobs' seconds per
    iteration}; a pair whose window holds fewer than 2 iterations of a
    job is left out."""
    jobs = [{(r["boot"], r["rep"]): r for r in sch.get("%s+job%d" % (s, j), [])
             if r["ok"]} for j in (0, 1)]
    res = []
    for key in sorted(set(jobs[0]) & set(jobs[1])):
        out = outs[key[0]]
        bounds = [[iteration_bounds(out, "%s.%s+job%d.%d" % (model, s, j, key[1]), r, rec)
                   for r, rec in enumerate(jobs[j][key]["ranks"])] for j in (0, 1)]
        lo = max(b[1] for job in bounds for b in job if len(b) > 2)
        hi = min(b[-1] for job in bounds for b in job)
        ips = []
        for job in bounds:
            v = [window_ips(b, lo, hi) for b in job]
            ips.append(None if None in v else min(v))
        if None in ips:
            continue
        res.append({"boot": key[0], "rep": key[1], "ok": True, "ips": ips,
                    "window": hi - lo, "mean_s": (1 / ips[0] + 1 / ips[1]) / 2})
    return res


def report_twojobs(outs, quick=False):
    out = outs[0]
    env = torch_report.read_env(out)
    rate = env.get("RATE", "?")
    runs = torch_report.load_runs(outs, rate)
    text, js = [], {"scenario": "twojobs", "rate": rate, "quick": quick, "models": {}}
    text.extend(preview(env, quick, js))
    text.append("bench-shared, scenario 3 (two jobs on one link): link %s, two jobs of "
                "2 ranks each at once; mercury.torch tags job J's channel c J << 3 | c. "
                "Each job's it/s while both trained (both s: that window's seconds), "
                "ratios against mercury.torch on pfifo, paired per repetition: median "
                "with 95%% bootstrap interval (%d resamples, seed %d)" % (
                    rate, torch_report.BOOT_RESAMPLES, torch_report.BOOT_SEED))
    text.extend(host_loads(outs))
    inverse = lambda r: 1 / r["mean_s"]     # noqa: E731  (pfifo's time / the scheme's)
    for model in sorted(runs):
        sch = runs[model]
        base = sorted({t.rsplit("+job", 1)[0] for t in sch if "+job" in t})
        names = [s for s in TWOJOBS_SCHEMES if s in base] + [
            s for s in base if s not in TWOJOBS_SCHEMES]
        pairs = {s: pair_jobs(outs, model, sch, s) for s in names}
        mj = js["models"][model] = {}
        text.append("")
        text.append("%s:" % model)
        text.append("  %-44s %-11s %-11s %-7s %-8s %-40s %-36s %-36s %s" % (
            "scheme", "job 0 it/s", "job 1 it/s", "both s", "mean s",
            "mean iteration: pfifo / this", "job 0: this / pfifo", "job 1: this / pfifo",
            "RTOs/run"))
        for s in names:
            n = len(sch.get(s + "+job0", []))
            ips = [[p["ips"][j] for p in pairs[s]] for j in (0, 1)]
            mean = None
            per_job = [None, None]
            if s != TWOJOBS_REF:
                mean = torch_report.bootstrap(torch_report.paired_ratios(
                    pairs, s, TWOJOBS_REF, metric=inverse))
                # each job's it/s while both trained, from the same pairs
                per_job = [torch_report.bootstrap(torch_report.paired_ratios(
                    pairs, s, TWOJOBS_REF, metric=lambda r, j=j: r["ips"][j]))
                    for j in (0, 1)]
            rtos = [r["net"].get("rto") for r in sch.get(s + "+job0", [])]
            ms = [p["mean_s"] for p in pairs[s]]
            win = [p["window"] for p in pairs[s]]
            mj[s] = {"ips": ips, "runs": n, "pairs": len(pairs[s]), "window_s": win,
                     "mean_s": ms, "mean_vs_ref": mean, "job_vs_ref": per_job,
                     "rto": rtos, "tc": tc_lines(out, s, env)}

            def cell(ok):
                c = "%.3f" % statistics.median(ok) if ok else "-"
                return c + (" %d/%d" % (len(ok), n) if len(ok) < n else "")
            text.append("  %-44s %-11s %-11s %-7s %-8s %-40s %-36s %-36s %s" % (
                TWOJOBS_LABEL.get(s, s), cell(ips[0]), cell(ips[1]),
                "%.1f" % statistics.median(win) if win else "-",
                "%.3f" % statistics.median(ms) if ms else "-",
                fmt_ci(mean) if s != TWOJOBS_REF else "(reference)",
                fmt_ci(per_job[0]) if s != TWOJOBS_REF else "",
                fmt_ci(per_job[1]) if s != TWOJOBS_REF else "",
                fmt_spread(rtos)))
        t = mj.get(TWOJOBS_TARGET)
        if t and TWOJOBS_REF in mj:
            m = t["mean_vs_ref"]
            ok_mean = bool(m) and m["median"] >= MEAN_TARGET and m["lo"] is not None \
                and m["lo"] > 1.0
            ok_jobs = [bool(c) and c["median"] >= JOB_TARGET for c in t["job_vs_ref"]]
            mj["targets"] = {"mean": ok_mean, "jobs": ok_jobs}
            text.append("")
            text.append("  targets (%s against %s):" % (TWOJOBS_LABEL[TWOJOBS_TARGET],
                                                        TWOJOBS_LABEL[TWOJOBS_REF]))
            text.append("    the mean of the two jobs' iteration times at least %.1fx better "
                        "(median, interval above 1.0): %s, %s" % (
                            MEAN_TARGET, "met" if ok_mean else "NOT met", fmt_ci(m)))
            for j in (0, 1):
                text.append("    job %d no more than %d%% slower (median it/s ratio at least "
                            "%.2f): %s, %s" % (j, round(100 * (1 - JOB_TARGET)), JOB_TARGET,
                                               "met" if ok_jobs[j] else "NOT met",
                                               fmt_ci(t["job_vs_ref"][j])))
    text.extend(tc_section(js))
    return text, js


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("dirs", nargs="*", metavar="DIR",
                    help="other boots' run directories, pooled with OUTDIR's "
                    "(OUTDIR itself may hold no runs: bench/torch/run.sh "
                    "pools OUTDIR/boot-K this way)")
    a = ap.parse_args()
    # OUTDIR of several boots holds only their boot-K directories
    dirs = [d for d in [a.out] + a.dirs
            if os.path.exists(os.path.join(d, "runs", "index"))]
    if not dirs:
        sys.exit("report.py: no runs/index under %s" % " ".join([a.out] + a.dirs))
    scenario = torch_report.read_env(dirs[0]).get("SCENARIO")
    if scenario == "shallow":
        text, js = report_shallow(dirs, a.quick)
    elif scenario == "twojobs":
        text, js = report_twojobs(dirs, a.quick)
    else:
        text, js = report(dirs, a.quick)
    print("\n".join(text))
    with open(os.path.join(a.out, "bench-shared.txt"), "w") as f:
        f.write("\n".join(text) + "\n")
    with open(os.path.join(a.out, "bench-shared.json"), "w") as f:
        json.dump(js, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
