#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""The table of make bench-shared, scenario 1 of issue 34 (background
bulk): for every scheme, training it/s alone on the link and beside an
untagged bulk TCP transfer (a checkpoint upload) over the same egress,
and the bulk's throughput per 5 s window while the training ran.

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
           "mercury-share", "mercury", "fq"]
LABEL = {"ddp": "stock DDP, pfifo",
         "fifo": "mercury.torch, pfifo",
         "prio": "prio 16, untagged first",
         "prio-last": "prio 16, untagged last",
         "ets-strict": "ets 16 strict, untagged last",
         "ets-quanta": "ets 2 DRR (quanta) + prio 16",
         "mercury-share": "sch_mercury, untagged last, share",
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
    if quick or env.get("QUICK") == "1":
        js["quick"] = True
        text.append("PREVIEW (BS_QUICK=1: a plumbing check, not a result)")
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
    text.append("")
    text.append("tc lines (DEV: the guest's egress port; every port alike):")
    seen = set()
    for m in js["models"].values():
        for s, row in m.items():
            if s in seen or not isinstance(row, dict) or "tc" not in row:
                continue
            seen.add(s)
            text.append("  %s:" % s)
            text.extend("    " + l for l in row["tc"])
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
    text, js = report(dirs, a.quick)
    print("\n".join(text))
    with open(os.path.join(a.out, "bench-shared.txt"), "w") as f:
        f.write("\n".join(text) + "\n")
    with open(os.path.join(a.out, "bench-shared.json"), "w") as f:
        json.dump(js, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
