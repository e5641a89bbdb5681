#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Render the qdisc cost benchmark: tables with ratios, plots, and
Documentation/results/performance.md, from OUT/core.json (bench/core) and
OUT/pktgen.json (bench/pktgen/guest.sh). Nothing in the document is typed
by hand: every figure and every target verdict comes from those files."""

import argparse
import datetime
import json
import os
import re
import platform
import shutil
import statistics
import subprocess
import sys

PROG = "report"


def die(msg, code=1):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        die(f"cannot read {path}: {e}")


def host_machine():
    model, cores = "unknown", os.cpu_count()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "Model name":
                model = v.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return model, cores, platform.release()


def table(head, rows, align=None):
    """A markdown table; numbers right-aligned."""
    align = align or ["l"] + ["r"] * (len(head) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def fmt_int(v):
    return f"{v:,.0f}".replace(",", " ")


def fmt_bytes(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


# ---- the pktgen part -----------------------------------------------------

class Pktgen:
    def __init__(self, data):
        self.data = data
        self.reps = data["reps"]
        self.by_name = {r["name"]: r for r in data["results"]}

    def pps(self, name):
        r = self.by_name.get(name)
        if not r or not r["runs"]:
            return None
        return [run["pps"] for run in r["runs"]]

    def median(self, name):
        p = self.pps(name)
        return statistics.median(p) if p else None

    def ratio(self, name, base):
        """Median over rounds of pps(name)/pps(base) measured in the same
        round: both saw the same host load, so the ratio drifts less than
        either figure."""
        a, b = self.pps(name), self.pps(base)
        if not a or not b or len(a) != len(b):
            return None
        return statistics.median(x / y for x, y in zip(a, b))

    def best_ratio(self, name, base):
        """Best rate over best rate: the run least disturbed by the host
        against the same for the base, robust when the host is busy."""
        a, b = self.pps(name), self.pps(base)
        if not a or not b:
            return None
        return max(a) / max(b)

    def base_of(self, r):
        """pfifo_fast with the same flows on the same device."""
        txq = " txq4" if r.get("txqs", 1) == 4 else ""
        return f"pfifo_fast f{r['flows']}{txq}"

    def fq_bands(self):
        """Does the guest's fq sort packets into priority bands? Linux 6.7
        gave fq three bands chosen by skb->priority through a priomap (the
        default: 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1, served in weighted round
        robin); Debian 12's tc (iproute2 6.1) cannot change them, so what is
        measured is fq as that tc configures it."""
        m = re.match(r"(\d+)\.(\d+)", self.data.get("kernel", ""))
        return bool(m) and (int(m.group(1)), int(m.group(2))) >= (6, 7)

    def qdisc_label(self, r):
        if r["qdisc"] == "fq" and self.fq_bands():
            return r["args"] + " (3 priority bands, the default priomap)"
        return r["args"]

    @staticmethod
    def queues_all(r):
        """Does the qdisc enqueue and dequeue every packet here? Those with
        TCQ_F_CAN_BYPASS do not: the dummy device never stalls, so they
        always find their queue empty."""
        if r["qdisc"] in ("pfifo_fast", "fq_codel"):
            return False
        if r["qdisc"] == "mercury":
            return "bypass off" in r["args"]
        return True

    def rows(self):
        out = []
        for r in self.data["results"]:
            p = self.pps(r["name"])
            base = self.base_of(r)
            rat = self.ratio(r["name"], base)
            best = self.best_ratio(r["name"], base)
            out.append([
                r["name"], self.qdisc_label(r), r.get("txqs", 1), r["flows"],
                "yes" if self.queues_all(r) else "no (bypass)",
                fmt_int(statistics.median(p)) if p else "failed",
                f"{fmt_int(min(p))} .. {fmt_int(max(p))}" if p else "",
                f"{rat:.2f}" if rat is not None else "",
                f"{best:.2f}" if best is not None else "",
            ])
        return out


def pktgen_plot(pg, out):
    """Ratios to pfifo_fast as a bar chart."""
    dat = os.path.join(out, "pktgen-ratio.dat")
    names = []
    with open(dat, "w") as f:
        f.write("# name ratio_to_pfifo_fast median_pps\n")
        for r in pg.data["results"]:
            rat = pg.ratio(r["name"], pg.base_of(r))
            if rat is None:
                continue
            names.append(r["name"])
            f.write(f"\"{r['name']}\" {rat:.4f} {pg.median(r['name']):.0f}\n")
    gp = f"""
set terminal pngcairo size 1400,560 font ",10"
set output "{out}/pktgen.png"
set title "pktgen queue_xmit through the root qdisc of dummy0: packets/s relative to pfifo_fast (same flows, same boot, median of {pg.reps} rounds)"
set style data histograms
set style fill solid 0.7 border -1
set boxwidth 0.8
set ylabel "ratio to pfifo_fast"
set xtics rotate by -50 scale 0 font ",9"
set grid ytics
set yrange [0:*]
set key off
plot "{dat}" using 2:xtic(1) lc rgb "#3060a0", 0.9 with lines dt 2 lc rgb "#c03030" title "0.9"
"""
    subprocess.run(["gnuplot"], input=gp, text=True, check=True)
    return names


# ---- the core microbenchmark ---------------------------------------------

class Core:
    def __init__(self, data):
        self.data = data
        self.cells = {}
        for c in data["cells"]:
            key = (c["variant"], c["levels"], c["queued"], c.get("flows"))
            self.cells[key] = c["ns"]

    def ns(self, variant, levels, queued, flows=None):
        if variant in ("heap", "rbtree"):
            flows = None
        return self.cells.get((variant, levels, queued, flows))


def fmt_ns(v):
    return "" if v is None else f"{v:.1f}"


# ---- targets --------------------------------------------------------------

def targets(pg, core, sizes, adv=None):
    """(target, measured, verdict) rows: sch_mercury's targets (the cost
    per packet against the stock qdiscs, flat worst cases, the memory);
    adv, read_adversarial's rows, for the worst cases."""
    rows = []

    def verdict(ok):
        return "**met**" if ok else "**missed**"

    def pg_row(target, name, base, ok, unit):
        """A kernel verdict only when the median of per-round ratios and the
        best/best ratio agree: on a busy host they often do not."""
        r, b = pg.ratio(name, base), pg.best_ratio(name, base)
        if r is None or b is None:
            rows.append([target, "not measured", ""])
            return
        v = verdict(ok(r)) if ok(r) == ok(b) else "**unresolved** (the two estimates disagree: host noise)"
        rows.append([target, f"{unit(r)} (median), {unit(b)} (best/best)", v])

    if pg:
        ge = (lambda r: r >= 1.0)
        pg_row("mercury >= 0.95 x pfifo_fast pps, 64 levels, 64 flows: as configured by default (bypass on)",
               "mercury l64 f64 default", "pfifo_fast f64", lambda r: r >= 0.95, lambda r: f"{r:.2f} x")
        pg_row("the same with every mercury packet queued (bypass off; pfifo_fast still bypasses)",
               "mercury l64 f64 fo-on", "pfifo_fast f64", lambda r: r >= 0.9, lambda r: f"{r:.2f} x")
        pg_row("mercury >= skbprio, 64 levels: default (bypass on)", "mercury l64 f64 default", "skbprio f64",
               ge, lambda r: f"{r:.2f} x skbprio")
        pg_row("mercury >= 0.95 x skbprio, 64 levels: both queue every packet (bypass off)",
               "mercury l64 f64 fo-on", "skbprio f64", lambda r: r >= 0.95, lambda r: f"{r:.2f} x skbprio")
        pg_row("the same on a 4-queue device (the stack hashes each packet before the qdisc)",
               "mercury l64 f64 fo-on txq4", "skbprio f64 txq4", lambda r: r >= 0.95,
               lambda r: f"{r:.2f} x skbprio")
        pg_row("mercury >= sch_prio, 16 levels: default (bypass on)", "mercury l16 f64 default", "prio16 f64",
               ge, lambda r: f"{r:.2f} x prio")
        pg_row("mercury >= sch_prio, 16 levels: both queue every packet (bypass off)", "mercury l16 f64 fo-on",
               "prio16 f64", ge, lambda r: f"{r:.2f} x prio")
        pg_row("the same on a 4-queue device", "mercury l16 f64 fo-on txq4", "prio16 f64 txq4",
               ge, lambda r: f"{r:.2f} x prio")
        pg_row("cost at 65534 levels, 4096 flows within 10% of 64 levels, 64 flows (kernel, pktgen: the empty-queue path)",
               "mercury l64 f64 fo-on", "mercury l65534 f4096 fo-on",
               lambda r: r <= 1.10, lambda r: f"{(r - 1) * 100:+.0f}% cost")
    for variant, what in (("mercury", "uniform over all levels"),
                          ("mercury-16levels", "16 levels in use, spread over the range")):
        worst = None
        for q in core.data["queued"]:
            a = core.ns(variant, 64, q, 64)
            b = core.ns(variant, 65534, q, 4096)
            if a and b:
                worst = max(worst or 0, b / a)
        if worst is not None:
            rows.append([f"the same in the userspace core, worst queue length, levels {what}",
                         f"worst {(worst - 1) * 100:+.0f}% cost", verdict(worst <= 1.10)])
    ends = adversarial_ends(adv) if adv else None
    if ends:
        lo, hi, patterns = ends
        for pat in patterns:
            a, b = adv[(pat, lo, "mercury")], adv[(pat, hi, "mercury")]
            g = b[1] / max(a[1], 1)
            rows.append([f"adversarial *{pat}*: 99.9th percentile at most 1.5x from {lo:,} to {hi:,} queued",
                         f"{fmt_ns(a[1])} to {fmt_ns(b[1])} ns: {g:.1f}x", verdict(g <= 1.5)])
    rows.append(["per-queued-packet memory beyond the skb: zero",
                 f"mercury_skb_cb {sizes['mercury_skb_cb']} B in the qdisc's {sizes['qdisc_cb_priv']} B of skb->cb, no allocation per packet",
                 verdict(sizes["mercury_skb_cb"] <= sizes["qdisc_cb_priv"])])
    rows.append(["per-flow and per-level state sized and reported",
                 f"{sizes['mercury_flow']} B per flow bucket, {sizes['mercury_level']} B per level", "**met**"])
    return rows


# ---- the document ----------------------------------------------------------

def read_adversarial(path):
    """bench/core/adv's table: {(pattern, queued, queue): (median, p999, worst)}."""
    rows = {}
    with open(path) as f:
        for line in f:
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            if len(c) != 7 or not c[1].isdigit():
                continue
            try:
                rows[(c[0], int(c[1]), c[2])] = tuple(float(x) for x in c[3:6])
            except ValueError:
                continue
    return rows


def adversarial_ends(rows):
    """(lo, hi, patterns): the smallest and largest queue lengths of
    read_adversarial's rows and the patterns mercury ran at both, or
    None with fewer than two lengths."""
    sizes = sorted({k[1] for k in rows})
    if len(sizes) < 2:
        return None
    lo, hi = sizes[0], sizes[-1]
    return lo, hi, [pat for pat in dict.fromkeys(k[0] for k in rows)
                    if rows.get((pat, lo, "mercury")) and rows.get((pat, hi, "mercury"))]


def adversarial(out, w, rows):
    """The worst-case section, from OUT/adversarial.md (bench/core/adv.c),
    rows its read_adversarial table (None: not run)."""
    path = os.path.join(out, "adversarial.md")
    if rows is None:
        w("## Adversarial worst cases\n")
        w("Not run (no adversarial.md in the results).\n")
        return
    w("## Adversarial worst cases\n")
    w("`make -C bench/core run` ends with `adv` (bench/core/adv.c), which times every single operation of "
      "five adversarial patterns on the userspace build of `kmod/sch_mercury.c` (*mercury*), "
      "of the first core kept as `bench/core/mercury_core_v1.h` (*v1*), of skbprio's algorithm (a FIFO per "
      "priority, the most and least urgent non-empty priority found by scanning), of a binary heap and of a "
      "red-black tree (libbsd) of (rank, arrival):\n")
    w("- *growing*: one flow whose tags grow more urgent holds the queue; each operation is an urgent arrival "
      "of another flow that evicts the first flow's newest packet, plus one dequeue (v1 re-threads the flow's "
      "min chain on every such drop);")
    w("- *collide*: 1024 flows all in one lookup bucket (v1: one bucket, so one FIFO; mercury: a table of two "
      "buckets, each a tree of flows); dequeue, then enqueue to the same flow;")
    w("- *drr*: min(queued, 65536) flows of 64 KB packets at one level, quantum 256 (v1 loops over the flows "
      "crediting 256 bytes at a time);")
    w("- *storm*: a full queue; each operation is one arrival of a random rank and flow and exactly one drop "
      "(a victim or the arrival);")
    w("- *lower*: the *growing* queue, then the limit lowered to 0 as by `tc qdisc change`: one drop per "
      "operation (v1: O(n) per drop).\n")
    w("Every pattern runs 5 times from the same state and each operation keeps its fastest timing (a "
      "preemption rarely hits the same operation in all five runs); the table gives the median, the 99.9th "
      "percentile and the maximum of those per-operation times, in ns, and the worst case relative to "
      "mercury's in the same row group. The heap has no O(log n) access to its least urgent packet and takes "
      "part only in the patterns that do not drop. The worst cases of every queue carry the noise of this "
      "shared machine; the orders of magnitude do not.\n")
    with open(path) as f:
        w(f.read().rstrip("\n") + "\n")
    ends = adversarial_ends(rows)
    if ends is None:
        return
    lo, hi, patterns = ends
    summary = []
    for pat in patterns:
        m_lo, m_hi = rows[(pat, lo, "mercury")], rows[(pat, hi, "mercury")]
        v_lo, v_hi = rows.get((pat, lo, "v1")), rows.get((pat, hi, "v1"))
        summary.append([pat, fmt_ns(m_lo[1]), fmt_ns(m_hi[1]), f"{m_hi[1] / max(m_lo[1], 1):.1f}",
                        fmt_ns(m_hi[2]),
                        fmt_ns(v_hi[2]) if v_hi else "-",
                        f"{v_hi[2] / max(v_lo[2], 1):.1f}" if v_lo and v_hi else "-"])
    w(f"From {lo:,} to {hi:,} queued, per pattern: mercury's 99.9th percentile at both sizes and their "
      "ratio (mercury's operations are O(1) but for the lookup in a bucket's tree of flows: what grows is "
      "cache misses, as the flows and packets touched outgrow the caches), its worst "
      f"operation at {hi:,}, and v1's worst at {hi:,} with its growth over the same range.\n")
    w(table(["pattern", f"mercury 99.9% at {lo:,}", f"at {hi:,}", "growth", f"mercury worst at {hi:,}",
             f"v1 worst at {hi:,}", "v1 growth"], summary))
    w("")


def render(args):
    core_data = load(os.path.join(args.out, "core.json"))
    pg_path = os.path.join(args.out, "pktgen.json")
    pg = Pktgen(load(pg_path)) if os.path.exists(pg_path) else None
    core = Core(core_data)
    sizes = core_data["sizes"]
    model, cores, hkernel = host_machine()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "unknown"
    if pg:
        pktgen_plot(pg, args.out)

    L, Q, F = core_data["levels"], core_data["queued"], core_data["flows"]
    doc = []
    w = doc.append
    w("<!-- Generated by bench/pktgen/report.py from out/perf/*.json: do not edit; run `make perf`. -->")
    w("# Performance: what the qdisc costs per packet\n")
    w(f"Generated {now} from commit {rev} by `make perf` (bench/core and bench/pktgen).\n")
    w("## Machine\n")
    w(table(["", "value"], [
        ["host CPU (lscpu)", model],
        ["host cores", cores],
        ["host kernel", hkernel],
        ["guest kernel (uname -r)", pg.data["kernel"] if pg else "not run"],
        ["guest CPU", f"{pg.data['cpu']}, {pg.data['cpus']} vCPUs, qemu TCG (emulated)" if pg else ""],
        ["guest clocksource", pg.data.get("clocksource", "unknown") if pg else ""],
        ["compiler (core)", core_data["machine"]["compiler"]],
    ]))
    w("")
    w("The guest is emulated (TCG, about 10 to 15 times slower than the host) and shares the host with "
      "whatever else runs: its absolute packet rates mean little. Hence the ratios are taken per round (each "
      "round measures every configuration once, back to back) and their median is reported, next to the "
      "spread of the rates. The guest boots with `clocksource=tsc tsc=reliable`: pktgen reads the clock for "
      "every packet, and the default HPET is an emulated device whose reads cost more than any qdisc, which "
      "buried the differences between qdiscs in noise (an earlier run on HPET: pfifo_fast alone spread "
      "2.7 x over five rounds).\n")

    if pg:
        d = pg.data
        w("## Kernel: pktgen through the root qdisc\n")
        w(f"pktgen (`xmit_mode queue_xmit`) sends {d['pkts']} packets of {d['pkt_size']} bytes per run through "
          f"the root qdisc of a dummy device (txqueuelen 1000), from one pktgen thread serving {d['entries']} entries "
          "of the device (`dummy0@0` .. `dummy0@15`), each with its own `skb_priority`: packets alternate over 16 levels "
          "without a classifier. mercury reads the tag from the priority (`tag priority`), tags `1 + K * levels / 16`; "
          "skbprio gets priorities `4K`; prio (16 bands, identity priomap) and pfifo_fast get `K`. "
          "The UDP source port is random over *flows* ports (`flag UDPSRC_RND`): that many flows, each its own hash. "
          "mercury has 4096 flow buckets in every configuration. After each run the guest checks that the qdisc "
          "sent exactly the packets pktgen sent, and for mercury that all 16 levels saw packets.\n")
        w("pfifo_fast is the floor: it has `TCQ_F_CAN_BYPASS`, so with its queue empty (the dummy device "
          "never stalls) the kernel sends the packet directly, skipping enqueue and dequeue. fq_codel has the "
          "flag too, and so has mercury unless `bypass off`: the configurations named *default* run mercury as "
          "it is configured by default; all other mercury configurations set `bypass off`, so that every packet "
          "takes enqueue and dequeue, as with skbprio, prio and fq (column *every packet queued*).\n")
        if pg.fq_bands():
            w(f"On this guest's kernel ({d['kernel']}, Linux 6.7 or later) fq has priority bands: three, chosen by "
              "`skb->priority` through a priomap (by default 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1, so pktgen's "
              "priorities 0-15 fill all three), served in weighted round robin (weights 589824, 196608 and "
              "65536), each band with its own flows. Debian 12's tc (iproute2 6.1) can neither set nor show "
              "them: the fq rows are fq with its bands as that tc configures it, the stock qdisc nearest to "
              "a priority scheduler that also keeps flows apart.\n")
        w("Configurations named *txq4* run on a dummy device with 4 tx queues: the kernel hashes every "
          "packet to choose its queue before the qdisc sees it, as on a multiqueue NIC (and a TCP skb carries "
          "its socket's hash anyway). On the single-queue device a flow qdisc (mercury, fq_codel when it "
          "queues) computes the hash of pktgen's hashless skbs itself.\n")
        w(f"Rates are the median of {d['reps']} rounds; the ratio is the median of the per-round ratios to "
          "pfifo_fast with the same number of flows.\n")
        w("The last column divides the best rate of the configuration by the best rate of pfifo_fast: "
          "the runs least disturbed by the host, a cross-check when the medians scatter.\n")
        w(table(["configuration", "qdisc", "tx queues", "flows", "every packet queued", "median pps", "range pps",
                 "ratio to pfifo_fast (median)", "best / best"],
                pg.rows(), ["l", "l", "r", "r", "l", "r", "r", "r", "r"]))
        w("\n![pktgen ratios](%s)\n" % image(args, "pktgen.png"))
        w("(Regenerated by `make perf`.)\n")

    w("## Userspace: the core data structure\n")
    w("bench/core compiles kmod/sch_mercury.c, the code enqueue and dequeue run, against a small shim "
      "(bench/core/shim.h) and times insert + pick at a steady queue length (each operation dequeues the next "
      "packet and enqueues it again with a fresh random level, uniform over the levels), against a binary heap and "
      "libbsd's red-black tree (cached minimum) keyed by (level, sequence). "
      f"Median of {core_data['reps']} runs of {core_data['ops']} operations; ns per packet (one enqueue plus one "
      f"dequeue). Host: {core_data['machine']['cpu']}, {core_data['machine']['cpus']} CPUs.\n")
    fq = 10000 if 10000 in Q else Q[-1]
    fl = 1024 if 1024 in L else L[-1]
    w(f"### Versus queued packets ({fl} levels, 64 flows)\n")
    rows = []
    for q in Q:
        rows.append([fmt_int(q)] + [fmt_ns(core.ns(v, fl, q, 64)) for v in
                                    ("mercury", "mercury-noflow", "heap", "rbtree")]
                    + [fmt_ns(core.ns("mercury", 65534, q, 4096))])
    w(table(["queued", "mercury", "mercury, flow order off", "binary heap", "red-black tree",
             "mercury 65534 levels, 4096 flows"], rows))
    w(f"\n### Versus levels ({fmt_int(fq)} queued, 64 flows)\n")
    rows = []
    for l in L:
        rows.append([l] + [fmt_ns(core.ns(v, l, fq, 64)) for v in
                           ("mercury", "mercury-noflow", "heap", "rbtree", "mercury-16levels")])
    w(table(["levels", "mercury", "mercury, flow order off", "binary heap", "red-black tree",
             "mercury, 16 levels in use"], rows))
    w(f"\n### mercury versus levels and flows ({fmt_int(fq)} queued, flow order on / off)\n")
    rows = []
    for l in L:
        rows.append([l] + [f"{fmt_ns(core.ns('mercury', l, fq, f))} / {fmt_ns(core.ns('mercury-noflow', l, fq, f))}"
                           for f in F])
    w(table(["levels"] + [f"{f} flows" for f in F], rows))
    w("\n### Cost at 65534 levels and 4096 flows relative to 64 levels and 64 flows\n")
    w("Uniform: every packet's level drawn uniformly from all levels (the worst case for the caches). "
      "16 in use: drawn from 16 levels spread over the range, as the pktgen runs do.\n")
    rows = []
    for q in Q:
        a, b = core.ns("mercury", 64, q, 64), core.ns("mercury", 65534, q, 4096)
        c, d = core.ns("mercury-16levels", 64, q, 64), core.ns("mercury-16levels", 65534, q, 4096)
        if a and b:
            rows.append([fmt_int(q), fmt_ns(a), fmt_ns(b), f"{b / a:.2f}",
                         fmt_ns(c), fmt_ns(d), f"{d / c:.2f}" if c and d else ""])
    w(table(["queued", "uniform: 64 levels, 64 flows", "65534 levels, 4096 flows", "ratio",
             "16 in use: 64 levels, 64 flows", "65534 levels, 4096 flows", "ratio"], rows))
    w("\n![core benchmark](%s)\n" % image(args, "core.png"))
    w("(Regenerated by `make perf`.)\n")

    adv_path = os.path.join(args.out, "adversarial.md")
    adv = read_adversarial(adv_path) if os.path.exists(adv_path) else None
    adversarial(args.out, w, adv)

    w("## Memory\n")
    w(table(["state", "bytes", "note"], [
        ["per queued packet", 0, f"mercury_skb_cb ({sizes['mercury_skb_cb']} B: the rank) lives in the "
         f"{sizes['qdisc_cb_priv']} bytes of skb->cb every skb has for its "
         "qdisc; the packet is linked into its flow's list through skb->next and skb->prev"],
        ["per active flow (struct mercury_flow)", sizes["mercury_flow"], "from a kmem_cache when a flow's first "
         "packet arrives (GFP_ATOMIC), kept idle in the table when its last one leaves (at most `flows` idle "
         "flows; beyond, the oldest is reused or freed): one per socket (or hash) with packets queued, plus "
         "the idle ones"],
        ["per bucket", 8, "an rb_root of the flows whose key lands in it, allocated at configuration"],
        ["per level (struct mercury_level)", sizes["mercury_level"], "allocated at configuration, levels + 1 of them "
         "(the untagged class); includes per-level byte/packet counters"],
        ["rank sets", "2 x (levels/8 + 136)", "two: the ranks flows are served at, the ranks of flows' newest "
         "packets; one bit per level each, plus a 16-word middle and one top word"],
        ["struct mercury_core", sizes["mercury_core"], "in the qdisc's private data"],
    ], ["l", "r", "l"]))
    w("\nTables allocated per qdisc (levels + 1 levels, the buckets, the two leaf bitmaps):\n")
    rows = []
    for t in sizes["tables"]:
        row = [t["levels"], t["buckets"], fmt_bytes(t["bytes"])]
        if row not in rows:
            rows.append(row)
    w(table(["levels", "buckets", "tables"], rows))
    w("")

    w("## Targets\n")
    w(table(["target", "measured", "verdict"], targets(pg, core, sizes, adv), ["l", "l", "l"]))
    w("")
    w(findings(pg, core, core_data, args.out))
    text = "\n".join(doc) + "\n"
    with open(args.doc, "w") as f:
        f.write(text)
    return text, pg, core, sizes


def profile_lines(out, name):
    """The sample lines of the guest's perf report of @name (CPU 0, where
    pktgen transmits), or None without a profile."""
    path = os.path.join(out, "profiles", name.replace(" ", "_") + ".txt")
    try:
        with open(path) as f:
            return [l.rstrip() for l in f if "%" in l and not l.startswith("#")]
    except OSError:
        return None


def profile_share(lines, match):
    """Percent of the non-idle samples in the symbols for which
    match(symbol) holds; None without a profile."""
    if lines is None:
        return None
    total = idle = 0.0
    for line in lines:
        parts = line.split()
        if len(parts) < 3 or not parts[0].endswith("%"):
            continue
        try:
            pct = float(parts[0].rstrip("%"))
        except ValueError:
            return None
        sym = parts[-1]
        if "safe_halt" in sym or sym.endswith("_idle"):
            idle += pct
        elif match(sym):
            total += pct
    busy = 100.0 - idle
    return 100.0 * total / busy if busy > 0 else None


def is_hash(sym):
    return sym in ("__skb_flow_dissect", "__skb_get_hash", "__skb_get_hash_net") or "siphash" in sym


def is_list_debug(sym):
    return sym in ("__list_add_valid", "__list_del_entry_valid")


def findings(pg, core, core_data, out):
    """The analysis: which figures explain which verdict. Generated from the
    results, so that it cannot disagree with them."""
    w = []
    w.append("## Findings\n")
    a64 = core.ns("mercury", 64, 10000, 64)
    a65 = core.ns("mercury", 65534, 10000, 64)
    q_small = core_data["queued"][0]
    s64 = core.ns("mercury", 64, q_small, 64)
    s65 = core.ns("mercury", 65534, q_small, 64)
    big = core_data["queued"][-1]
    w.append("- **Operations are O(1), but for the flow lookup.** mercury keeps each flow's packets in a list "
             "and its served rank as at most 8 rank runs, finds the most urgent level and the drop victim's "
             "level in two three-level bitmaps, and keeps empty flows for reuse, so only the lookup walks a "
             "tree (one bucket's flows) and no tree is written while the flows' keys stay known; beyond the "
             "caches each flow and packet touched is a miss: at "
             f"{fmt_int(big)} queued, mercury {fmt_ns(core.ns('mercury', 1024, big, 64))} ns, heap "
             f"{fmt_ns(core.ns('heap', 1024, big, 64))} ns, red-black tree "
             f"{fmt_ns(core.ns('rbtree', 1024, big, 64))} ns (1024 levels, 64 flows). What it buys is the worst "
             "case (section *Adversarial worst cases*): no operation scales with the queue, where the first "
             "version's O(1) median came with O(n) drops and an unbounded DRR loop.")
    if a64 and a65:
        w.append(f"- **Levels cost cache.** From 64 to 65534 levels the work per packet is the same (three "
                 f"find-first-set words and the flow's list), but with levels drawn uniformly at random each "
                 f"enqueue touches a random entry of a {fmt_bytes(65537 * core_data['sizes']['mercury_level'])} "
                 f"level array and a random word of an 8 KiB bitmap: {fmt_ns(s64)} vs {fmt_ns(s65)} ns at "
                 f"{q_small} queued, {fmt_ns(a64)} vs {fmt_ns(a65)} ns at 10 000 queued. That is a cache-footprint "
                 "effect of the configured level count (it also hits any per-level array, as sch_skbprio's 64 lists "
                 "would at 65536), and it is the worst case: gradient traffic uses a handful of levels at a time, "
                 "which stay in cache, as in the pktgen runs (16 levels in use), where the kernel target is judged.")
    if not pg:
        w.append("")
        return "\n".join(w)

    def ratio(a, b):
        r = pg.ratio(a, b)
        return "n/a" if r is None else f"{r:.2f}"

    w.append("- **Against pfifo_fast, the gap was the bypass.** pfifo_fast and fq_codel set `TCQ_F_CAN_BYPASS`: "
             "while their queue is empty the kernel hands the packet to the driver without enqueue or dequeue, "
             "and on an idle device the queue is always empty. mercury used to queue every packet, as it still "
             f"does with `bypass off`: {ratio('mercury l64 f64 fo-on', 'pfifo_fast f64')} x pfifo_fast. It now sets the "
             "flag too (option `bypass`, on by default; with nothing queued there is nothing to order): "
             f"{ratio('mercury l64 f64 default', 'pfifo_fast f64')} x pfifo_fast, "
             f"{ratio('mercury l64 f64 default', 'skbprio f64')} x skbprio and "
             f"{ratio('mercury l16 f64 default', 'prio16 f64')} x prio at 16 levels. The bypass only applies where "
             "mercury is the root of a tx queue and its queue is empty. Elsewhere (under tbf or htb, or with "
             "`bypass off`) a packet that finds the qdisc empty takes the path below; on a saturated link packets "
             "wait in the flow table, whose cost the userspace core benchmark measures.")
    m, sk, m4 = "mercury l64 f64 fo-on", "skbprio f64", "mercury l64 f64 fo-on txq4"
    # the configurations bench/pktgen/guest.sh profiles
    prof = {n: profile_lines(out, n) for n in (sk, m, "mercury l64 f64 default", m4)}
    h, ld = profile_share(prof[m], is_hash), profile_share(prof[m], is_list_debug)
    own = profile_share(prof[m], lambda s: "mercury" in s)
    skown = profile_share(prof[sk], lambda s: "skbprio" in s)
    matrix = [pg.median(r["name"]) for r in pg.data["results"]
              if r["qdisc"] == "mercury" and "bypass off" in r["args"] and r.get("txqs", 1) == 1
              and r["flows"] == 64 and pg.median(r["name"])]
    if None not in (h, ld, own, skown):
        w.append(f"- **The empty-queue path.** With one pktgen sender and a device that never stalls, every packet "
                 "finds the qdisc empty. With `bypass off`, mercury still takes its whole path for it: the flow "
                 "lookup (pktgen's skbs have no socket, so by hash), its idle flow, the flow's list and runs, the level's "
                 "list and bitmap, and the same in reverse at dequeue. Of the busy samples of the transmitting "
                 f"CPU, mercury spends {own:.1f}% in its own enqueue and dequeue, {h:.1f}% hashing and {ld:.1f}% "
                 f"in the list checks of Debian's `CONFIG_DEBUG_LIST`; skbprio, one list per priority and no "
                 f"flows, spends {skown:.1f}% in its own. mercury reaches {ratio(m, sk)} x skbprio and "
                 f"{ratio('mercury l16 f64 fo-on', 'prio16 f64')} x prio here; by default the bypass skips all of "
                 "it.")
        if matrix:
            w.append(f"- **Levels and flows barely enter that path**: the queue holds one packet, so every list "
                     f"holds one (median rates of the 64-flow configurations within "
                     f"{(max(matrix) / min(matrix) - 1) * 100:.0f}% of each other, mostly noise). A standing "
                     "queue, where the lists grow, is what the userspace core benchmark measures: a device that "
                     "stalls would make itself, not the qdisc, the bottleneck of a packet rate.")
    h4 = profile_share(prof[m4], is_hash)
    if h4 is not None:
        w.append(f"- **On the 4-queue device** the kernel hashes every packet to pick its tx queue, before any "
                 f"qdisc ({h4:.1f}% of the busy samples, paid by every qdisc alike), as on a multiqueue NIC. "
                 f"There mercury, queueing every packet, reaches {ratio(m4, 'skbprio f64 txq4')} x skbprio and "
                 f"{ratio('mercury l16 f64 fo-on txq4', 'prio16 f64 txq4')} x prio, and by default "
                 f"{ratio('mercury l64 f64 default txq4', 'pfifo_fast f64 txq4')} x pfifo_fast.")
    base = pg.pps("pfifo_fast f64")
    if base:
        w.append(f"- **Noise.** pfifo_fast alone ranged {fmt_int(min(base))} .. {fmt_int(max(base))} pps over "
                 f"{len(base)} rounds ({(max(base) / min(base) - 1) * 100:.0f}% spread); a kernel verdict above is "
                 "given only when the median of per-round ratios and the best/best ratio agree.")
    for n in (sk, m, "mercury l64 f64 default"):
        if prof[n]:
            ex = "\n".join(prof[n][:12])
            w.append(f"\nKernel profile of CPU 0 (perf in the guest, cpu-clock), {n}:\n\n```\n{ex}\n```")
    w.append("")
    return "\n".join(w)


def image(args, name):
    """The link from the document to the plot OUT/name: with --images,
    a copy there (perf-name), committed with the document so that the
    link resolves in a clone; else the plot where it is."""
    src = os.path.join(args.out, name)
    if args.images:
        dst = os.path.join(args.images, "perf-" + name)
        if os.path.exists(src):
            shutil.copyfile(src, dst)
        src = dst
    return os.path.relpath(os.path.abspath(src), os.path.dirname(os.path.abspath(args.doc)))


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__)
    ap.add_argument("--out", required=True, help="results directory (core.json, pktgen.json)")
    ap.add_argument("--doc", required=True, help="markdown file to write")
    ap.add_argument("--images", help="copy the plots into this directory and link the copies")
    args = ap.parse_args()
    text, pg, core, sizes = render(args)
    # The tables on stdout: the benchmark's console report.
    start = text.find("## Kernel")
    if start < 0:
        start = text.find("## Userspace")
    print(text[start:text.find("## Findings")])
    print(f"{PROG}: wrote {args.doc}, plots in {args.out}")


if __name__ == "__main__":
    main()
