#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""The link's bytes over one iteration, by priority channel: the picture
of make demo (scripts/demo.sh), from bench/torch/run.sh's BT_CAPTURE=1
runs.

    capture.py sniff DEV FILE [--ready PATH]
        record (time, DSCP, length) of every IPv4 packet DEV receives
        until SIGTERM or SIGINT; run.sh runs it in rank 1's namespace on
        rank 1's tap, where the packets the guest's port 1 sends arrive
        (the port whose queue stands in for rank 0's NIC queue). Kernel
        receive timestamps (SO_TIMESTAMPNS), so a busy host delays the
        reading, not the times. FILE: "# capture DEV" then
        "SECONDS DSCP BYTES" per packet, then "# packets N drops D"
        (the socket's own count of what it lost).
    capture.py summary --out DIR --model MODEL --rate RATE [--sim MERCURY_SIM]
        the table make demo prints (from report.py's bench-torch.json)
        and the simulator's prediction; exits 3 when a target is not met
    capture.py plot --out DIR --model MODEL [-o PNG]
        DIR/capture-MODEL-fifo.txt and -mercury.txt (the same mercury.torch
        schemes' traffic through pfifo and sch_mercury), the last
        iterations of each (rank 1's runs/capture-MODEL-QUEUE.r1.json), the it/s
        ratios of DIR/bench-torch.json (report.py): DIR/demo.png, every
        packet of the last LAST iterations a mark on its channel's row.

The iterations' window: rank 1 applies its last step as soon as the
last gradient bytes it waits for have arrived, so the run's last data
packet (over 200 bytes) marks rank 1's "end", and each iteration's start
is "end" minus its time before the end (worker.py records times
relative to the run's first forward only). Standard library only, but
gnuplot for the picture.
"""
import argparse
import json
import os
import signal
import socket
import struct
import subprocess
import sys

ETH_P_IP = 0x0800
PACKET_OUTGOING = 4
SO_TIMESTAMPNS = 35
SOL_PACKET = 263
PACKET_STATISTICS = 6
DATA_BYTES = 200        # a packet longer than this carries data, not an ACK
LAST = 3                # iterations the picture shows, the run's last
QUEUES = (("fifo", "pfifo (a FIFO)"), ("mercury", "sch_mercury"))
# Up to 9 classes: colour, dash type and point type, so that each line
# reads on white and in grey (black and dark hues, distinct dashes and
# marks; no pale yellow)
STYLES = [("#000000", 1, 7), ("#0072B2", 2, 5), ("#D55E00", 3, 9),
          ("#009E73", 4, 11), ("#CC79A7", 5, 13), ("#555555", 6, 4),
          ("#8B4513", 7, 6), ("#56B4E9", 8, 8), ("#E69F00", 9, 10)]


class Stop(Exception):
    pass


def _stop(signum, frame):
    raise Stop()


def sniff(dev, path, ready=None):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((dev, ETH_P_IP))
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    n = 0
    with open(path, "w") as f:
        f.write("# capture %s\n" % dev)
        if ready:
            open(ready, "w").close()
        try:
            while True:
                data, anc, _, addr = s.recvmsg(64, 64)
                if addr[2] == PACKET_OUTGOING or len(data) < 4:
                    continue
                t = None
                for level, kind, val in anc:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        sec, ns = struct.unpack("qq", val[:16])
                        t = sec + ns * 1e-9
                if t is None:
                    continue
                f.write("%.6f %d %d\n" % (t, data[1] >> 2,
                                          struct.unpack("!H", data[2:4])[0]))
                n += 1
        except Stop:
            pass
        try:
            dr = struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))[1]
        except OSError:
            dr = -1
        f.write("# packets %d drops %d\n" % (n, dr))
    return 0


def read_capture(path):
    """[(seconds, dscp, bytes)] and the socket's drops (None if unknown)."""
    pkts, drops = [], None
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "#":
                if len(w) >= 5 and w[1] == "packets" and w[3] == "drops":
                    drops = int(w[4])
                continue
            pkts.append((float(w[0]), int(w[1]), int(w[2])))
    return pkts, drops


def last_iterations(pkts, rank, count=LAST):
    """The window (t0, t1) of the run's last count iterations in the
    capture's clock, and the iterations' starts in it: t1 is the last data
    packet (rank 1's "end"), each start end - its time before the end in
    rank's record (worker.py). None without data packets or starts."""
    data = [t for t, _, n in pkts if n > DATA_BYTES]
    st = rank.get("starts") or []
    if not data or not st:
        return None
    t1 = max(data)
    starts = [t1 - (rank["end"] - x) for x in st[-count:]]
    return starts[0], t1, starts


def per_class(pkts, t0, t1, least=0):
    """{dscp: [(seconds from t0, bytes)]} of the packets in [t0, t1] of
    more than least bytes, and {dscp: total bytes}."""
    series, total = {}, {}
    for t, d, n in sorted(pkts):
        if t0 <= t <= t1 and n > least:
            total[d] = total.get(d, 0) + n
            series.setdefault(d, []).append((t - t0, n))
    return series, total


def class_label(d, tagged):
    if d == 0:
        return "untagged (rendezvous, barriers)"
    if tagged and d == min(tagged) and len(tagged) > 1:
        return "channel %d: the first layers" % d
    if tagged and d == max(tagged) and len(tagged) > 1:
        return "channel %d: the last layers" % d
    return "channel %d" % d


def fmt_kb(n):
    return "%.0f KB" % (n / 1e3) if n < 1e6 else "%.1f MB" % (n / 1e6)


RATIOS = (("ddp", "stock DDP"), ("ddp-fp16", "DDP fp16 hook"),
          ("fifo1-fp16", "true FIFO"))


def ratio_rows(js, model, scheme="mercury-fp16"):
    """[(label, median, lo, hi)] of scheme's it/s over each of RATIOS'
    from report.py's bench-torch.json (lo, hi None without an interval)."""
    rows = []
    r = js.get("models", {}).get(model, {}).get("ratios", {})
    for b, label in RATIOS:
        ci = r.get("%s_vs_%s" % (scheme, b))
        if ci:
            rows.append((label, ci["median"], ci.get("lo"), ci.get("hi")))
    return rows


def plot(out, model, png=None, scheme="mercury-fp16"):
    """Write demo.png (or png) from DIR's captures and report; returns
    the path, or raises ValueError saying what is missing. Each packet
    of the last LAST iterations is a mark on its channel's row (channel 1,
    the first layers, on top), FIFO beside sch_mercury on one time scale,
    the iterations' starts as vertical lines; then the it/s ratios."""
    png = png or os.path.join(out, "demo.png")
    panels = []
    for q, what in QUEUES:
        cap = os.path.join(out, "capture-%s-%s.txt" % (model, q))
        rk = os.path.join(out, "runs", "capture-%s-%s.r1.json" % (model, q))
        if not os.path.exists(cap) or not os.path.exists(rk):
            raise ValueError("no capture of %s on %s (%s, %s)" % (model, q, cap, rk))
        pkts, drops = read_capture(cap)
        with open(rk) as f:
            rank = json.load(f)
        win = last_iterations(pkts, rank)
        if win is None:
            raise ValueError("%s: no data packets" % cap)
        t0, t1, starts = win
        series, total = per_class(pkts, t0, t1, DATA_BYTES)
        panels.append((q, what, t1 - t0, [x - t0 for x in starts], series, total, drops))
    ratios = []
    try:
        with open(os.path.join(out, "bench-torch.json")) as f:
            ratios = ratio_rows(json.load(f), model, scheme)
    except (OSError, ValueError):
        pass
    classes = sorted({d for p in panels for d in p[4]})
    tagged = [d for d in classes if d > 0]
    style = {d: STYLES[i % len(STYLES)] for i, d in enumerate(tagged)}
    style[0] = ("#777777", 1, 1)
    # rows: channel 1 on top, untagged at the bottom
    row = {d: -(tagged.index(d) + 1) if d > 0 else -(len(tagged) + 1) for d in classes}
    big = {}
    for p in panels:
        for d, n in p[5].items():
            big[d] = max(big.get(d, 0), n)
    xmax = max(p[2] for p in panels)
    for q, _, _, _, series, _, _ in panels:
        for d, pts in series.items():
            with open(os.path.join(out, "demo-%s-%s-%d.dat" % (model, q, d)), "w") as f:
                for x, n in pts:
                    f.write("%.6f %d %d\n" % (x, row[d], n))
    with open(os.path.join(out, "demo-%s-ratios.dat" % model), "w") as f:
        for i, (label, med, lo, hi) in enumerate(ratios):
            f.write("%d %.4f %.4f %.4f\n" % (i, med, lo if lo is not None else med,
                                             hi if hi is not None else med))
    ytics = ", ".join('"%s (%s)" %d' % (
        ("untagged" if d == 0 else "ch %d%s" % (d, ": first layers" if d == min(tagged)
                                               else ": last layers" if d == max(tagged)
                                               else "")),
        fmt_kb(big[d] / LAST), row[d]) for d in classes)
    gp = ['set terminal pngcairo size 1600,620 font ",11"',
          'set output "%s"' % os.path.basename(png) if os.path.dirname(
              os.path.abspath(png)) == os.path.abspath(out)
          else 'set output "%s"' % png.replace('"', ""),
          "set termoption noenhanced",
          'set multiplot layout 1,3 title "%s, %s: every data packet the link carried '
          'in the last %d iterations, on the row of its priority channel (DSCP; bytes '
          'per iteration), the same %d tagged channels\\nthrough a FIFO and through '
          'sch_mercury: the first layers\' bytes wait behind the last layers\' in the '
          'FIFO, overtake them in sch_mercury.  Dashed lines: iteration starts"' % (
              model, scheme, LAST, len(tagged)),
          "set grid xtics", "set key off",
          "set yrange [%.1f:-0.3]" % (-(len(tagged) + 1.7) if 0 in classes
                                     else -(len(tagged) + 0.7)),
          "set ytics (%s)" % ytics,
          "set xrange [0:%.3f]" % (1.02 * xmax),
          'set xlabel "seconds"']
    for q, what, dur, starts, series, total, drops in panels:
        gp.append('set title "%s: %d iterations in %.2f s%s"' % (
            what, len(starts), dur, ", capture lost %d packets" % drops if drops else ""))
        for i, x in enumerate(starts):
            gp.append('set arrow %d from %.4f, graph 0 to %.4f, graph 1 nohead '
                      'lw 1.5 dt 2 lc rgb "#444444"' % (i + 1, x, x))
        gp.append("plot " + ", ".join(
            '"demo-%s-%s-%d.dat" using 1:2 with points pt %d ps %.1f lc rgb "%s"' % (
                model, q, d, style[d][2], 0.5 if big[d] == max(big.values()) else 1.3,
                style[d][0]) for d in sorted(series)))
        gp.append("unset arrow")
    gp += ['set title "it/s of %s over ... (median, 95%% interval)"' % scheme,
           "set grid", "set xrange [*:*]", "set autoscale x",
           'set xlabel "ratio of it/s (1: no difference)"',
           "set yrange [-0.6:%.1f]" % (len(ratios) - 0.4 if ratios else 0.6),
           "set ytics (%s)" % ", ".join('"%s" %d' % (l, i) for i, (l, *_) in
                                        enumerate(ratios)) if ratios else "unset ytics",
           'set arrow 1 from 1, graph 0 to 1, graph 1 nohead dt 2 lc rgb "#555555"']
    if ratios:
        lo = min(min(r[1], r[2] or r[1]) for r in ratios)
        hi = max(max(r[1], r[3] or r[1]) for r in ratios)
        gp.append("set xrange [%.3f:%.3f]" % (min(0.9, lo - 0.05), hi + 0.15))
        gp.append('plot "demo-%s-ratios.dat" using 2:1:3:4 with xerrorbars '
                  'lw 2.5 pt 7 ps 1.8 lc rgb "#000000", '
                  '"" using 2:1:(sprintf("%%.2fx", $2)) with labels offset 0,1.2'
                  % model)
    else:
        gp.append('set label 2 "no ratios (bench-torch.json)" at graph 0.2, graph 0.5')
        gp.append("plot [0:1] NaN notitle")
    gp.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(gp) + "\n", text=True,
                   check=True, cwd=out, capture_output=True)
    return png


SUMMARY = (("ddp", "stock DDP"), ("ddp-fp16", "DDP fp16_compress_hook"),
           ("fifo1-fp16", "mercury.torch fp16, true FIFO (1 chan, pfifo)"),
           ("mercury-fp16", "mercury.torch fp16, sch_mercury"))


def fmt_ci(ci):
    if not ci:
        return "-"
    if ci.get("lo") is None:
        return "%.2fx (no interval)" % ci["median"]
    return "%.2fx [%.2f-%.2f]" % (ci["median"], ci["lo"], ci["hi"])


def sim_ratio(sim, profile, rate, mtu="1500"):
    """mercury-sim's fifo-stream / mercury iteration time on profile at
    rate (2 workers, 2 servers); None if it cannot."""
    t = {}
    for s in ("fifo-stream", "mercury"):
        try:
            p = subprocess.run([sim, "--profile", profile, "--workers", "2",
                                "--servers", "2", "--bandwidth", rate, "--mtu", mtu,
                                "--scheme", s, "--json"], capture_output=True,
                               text=True)
            t[s] = json.loads(p.stdout)["results"][0]["iteration_ms"]
        except (OSError, ValueError, KeyError, IndexError):
            return None
    return t["fifo-stream"] / t["mercury"], t


def summary(out, model, rate, sim=None, scheme="mercury-fp16"):
    """The demo's result: lines to print and whether every target was
    met (scheme faster than each other scheme beyond the 95% interval)."""
    with open(os.path.join(out, "bench-torch.json")) as f:
        js = json.load(f)
    m = js.get("models", {}).get(model)
    if not m:
        return ["result: no run of %s finished" % model], False
    rows, ratios = m["schemes"], m["ratios"]
    any_row = next(iter(rows.values()))
    lines = ["result: %s, batch %d x %dpx per rank, %.2f M parameters, 2 ranks, "
             "link %s; it/s over all %d iterations, median of runs" % (
                 model, any_row["batch"], any_row["size"], any_row["params"] / 1e6,
                 rate, any_row["iters"]),
             "  %-48s %4s %8s  %s" % ("scheme", "runs", "it/s",
                                      "vs stock DDP (95% interval)")]
    for s, label in SUMMARY:
        if s not in rows:
            lines.append("  %-48s  did not run" % label)
            continue
        r = rows[s]
        lines.append("  %-48s %4d %8.3f  %s%s" % (
            label, r["runs"], r["median"],
            "1" if s == "ddp" else fmt_ci(ratios.get("%s_vs_ddp" % s)),
            "  (%d FAILED)" % r["failed"] if r.get("failed") else ""))
    ok = True
    lines.append("Mercury (%s) against each, targets: faster beyond the interval" % scheme)
    for b, label in SUMMARY[:-1]:
        ci = ratios.get("%s_vs_%s" % (scheme, b))
        met = bool(ci and ci.get("lo") is not None and ci["lo"] > 1.0)
        ok = ok and met
        lines.append("  over %-24s %-26s %s" % (
            label.split(" (")[0] if b != "fifo1-fp16" else "the true FIFO",
            fmt_ci(ci), "met" if met else
            "NOT MET: %s" % (ci.get("verdict", "no interval") if ci else "no ratio")))
    prof = os.path.join(out, "profile-%s.json" % model)
    sr = None
    if sim and os.path.exists(prof):
        # fp16 halves the bytes: the fp32 profile at twice the rate
        bps = None
        for unit, mult in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1)):
            if rate.endswith(unit):
                bps = float(rate[:-len(unit)]) * mult
                break
        if bps:
            sr = sim_ratio(sim, prof, "%.0f" % (2 * bps))
    meas = ratios.get("%s_vs_fifo1-fp16" % scheme)
    if sr:
        lines.append("simulator (mercury-sim, this run's profile, fp16 bytes): "
                     "Mercury over FIFO %.2fx predicted, %s measured%s" % (
                         sr[0], fmt_ci(meas),
                         " (%+.0f%%)" % (100 * (meas["median"] / sr[0] - 1))
                         if meas else ""))
    else:
        lines.append("simulator: no prediction (no profile or mercury-sim)")
    drops = [s for s in rows if rows[s].get("net", {}).get("drops")]
    if drops:
        lines.append("note: the guest's queues dropped packets in: " + ", ".join(drops))
    return lines, ok


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sn = sub.add_parser("sniff")
    sn.add_argument("dev")
    sn.add_argument("file")
    sn.add_argument("--ready")
    pl = sub.add_parser("plot")
    pl.add_argument("--out", required=True)
    pl.add_argument("--model", required=True)
    pl.add_argument("--scheme", default="mercury-fp16")
    pl.add_argument("-o", dest="png")
    su = sub.add_parser("summary")
    su.add_argument("--out", required=True)
    su.add_argument("--model", required=True)
    su.add_argument("--rate", required=True)
    su.add_argument("--sim")
    su.add_argument("--scheme", default="mercury-fp16")
    a = ap.parse_args()
    if a.cmd == "sniff":
        return sniff(a.dev, a.file, a.ready)
    if a.cmd == "summary":
        try:
            lines, ok = summary(a.out, a.model, a.rate, a.sim, a.scheme)
        except (OSError, ValueError, KeyError, StopIteration) as e:
            print("capture.py: %s" % e, file=sys.stderr)
            return 1
        print("\n".join(lines))
        return 0 if ok else 3
    try:
        print(plot(a.out, a.model, a.png, a.scheme))
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        print("capture.py: %s" % (e.stderr.strip() if getattr(e, "stderr", None) else e),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
