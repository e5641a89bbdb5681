#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Turn bench/training.sh's raw TSV into the table (text) and JSON.

Each case's iteration time is the median over its runs (min, max and
every run are kept); speedups are ratios of those (other / this); "sim" is
mercury-sim's prediction for the same scaled case with the start-up costs
measured in the same guest, "meas/sim" the measured time over the
predicted one (target: within 10 %, with a spread below 10 %). The last
lines say in plain words what Mercury gained over each baseline.
"""
import argparse
import json
import sys

AGREE, SPREAD = 0.10, 0.10
SCHEMES = ("vanilla", "fifo-stream", "prio", "bytesched", "mercury")
PLAIN = {"vanilla": "a stock parameter server",
         "fifo-stream": "FIFO with streaming aggregation",
         "bytesched": "ByteScheduler-style partitioning"}


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--meta", default="")
    a = ap.parse_args()
    rows = {}
    order = []
    with open(a.raw) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(head, line.rstrip("\n").split("\t")))
            key = (r.get("config", ""), r["model"])
            if key not in rows:
                rows[key] = {}
                order.append(key)
            rows[key][r["scheme"]] = r
    configs = any(k[0] for k in order)
    out = {"meta": a.meta, "models": []}
    lines = ["Emulated PS training (" + a.meta + ")"]
    cfgw = max([len(k[0]) for k in order] + [6]) if configs else 0
    lines.append(("%-*s " % (cfgw, "config") if configs else "") +
                 "%-13s %-11s %9s %7s %8s %8s %8s %9s %8s %4s  %-6s %s" %
                 ("model", "scheme", "iter ms", "spread", "vs van.", "vs fifoS", "vs bytes",
                  "sim ms", "meas/sim", "cpu%", "sums", "note"))
    met = {"agree": 0, "steady": 0, "runs": 0}
    plain = []
    for key in order:
        cfg, m = key
        sc = rows[key]
        ms = {k: num(v["measured_ms"]) for k, v in sc.items()}
        sim = {k: num(v["sim_ms"]) for k, v in sc.items()}
        first = next(iter(sc.values()))
        model = {"model": m, "bytes_scale": num(first["bytes_scale"]),
                 "time_scale": num(first["time_scale"]),
                 "compute_ms": num(first["compute_ms"]),
                 "gradient_bytes": int(float(first["gradient_bytes"])),
                 "ideal_sim_ms": sim.get("ideal"), "schemes": []}
        if configs:
            model["config"] = cfg
        for s in SCHEMES:
            if s not in sc:
                continue
            v = ms.get(s)
            lo, hi = num(sc[s].get("min_ms", "-")), num(sc[s].get("max_ms", "-"))
            runs = [num(x) for x in sc[s].get("runs_ms", "-").split(",")]
            cpu = [num(x) for x in sc[s].get("cpu_pct", "-").split(",")]
            spread = round((hi - lo) / v, 3) if v and lo is not None and hi is not None else None

            def ratio(base, tab=ms):
                b = tab.get(base)
                return round(b / tab[s], 3) if b and tab.get(s) else None
            agree = round(v / sim[s], 3) if v and sim.get(s) else None
            note = sc[s].get("note", "") or ""
            e = {"scheme": s, "iteration_ms": v, "min_ms": lo, "max_ms": hi,
                 "runs_ms": [x for x in runs if x is not None], "spread": spread,
                 "cpu_pct": [x for x in cpu if x is not None],
                 "speedup_vs_vanilla": ratio("vanilla"),
                 "speedup_vs_fifo_stream": ratio("fifo-stream"),
                 "speedup_vs_bytesched": ratio("bytesched"), "speedup_vs_prio": ratio("prio"),
                 "sim_ms": sim.get(s), "measured_over_sim": agree,
                 "sim_speedup_vs_vanilla": ratio("vanilla", sim),
                 "sim_speedup_vs_fifo_stream": ratio("fifo-stream", sim),
                 "sim_speedup_vs_bytesched": ratio("bytesched", sim),
                 "verified": sc[s]["verified"] == "1", "note": note}
            model["schemes"].append(e)
            met["runs"] += 1
            if agree is not None and abs(agree - 1) <= AGREE:
                met["agree"] += 1
            if spread is not None and spread < SPREAD:
                met["steady"] += 1
            f = lambda x, w=8: ("%*.3f" % (w, x)) if x is not None else "%*s" % (w, "-")
            cpus = [x for x in cpu if x is not None]
            lines.append(("%-*s " % (cfgw, cfg) if configs else "") +
                         "%-13s %-11s %9s %7s %8s %8s %8s %9s %8s %4s  %-6s %s" % (
                m, s, f(v, 9), ("%6.1f%%" % (100 * spread)) if spread is not None else "      -",
                f(e["speedup_vs_vanilla"]), f(e["speedup_vs_fifo_stream"]),
                f(e["speedup_vs_bytesched"]), f(sim.get(s), 9), f(agree, 8),
                ("%d" % round(sum(cpus) / len(cpus))) if cpus else "-",
                "exact" if e["verified"] else "FAILED", note))
        mer = next((e for e in model["schemes"] if e["scheme"] == "mercury"), None)
        if mer:
            parts = []
            for base in ("vanilla", "fifo-stream", "bytesched"):
                k = "speedup_vs_" + base.replace("-", "_")
                if mer.get(k):
                    parts.append("%.2fx %s %s (simulated %.2fx)" % (
                        mer[k], "faster than" if not parts else "than", PLAIN[base],
                        mer["sim_" + k] or float("nan")))
            if parts:
                plain.append("%s: Mercury %s" % (m, ", ".join(parts)))
            if sim.get("mercury") and sim.get("ideal"):
                model["sim_mercury_over_ideal"] = round(sim["mercury"] / sim["ideal"], 4)
        out["models"].append(model)
    lines.append("")
    lines.append("spread = (max - min) / median over the runs of a case; cpu% = guest CPU busy "
                 "(both vCPUs) during a run; meas/sim = measured / simulated")
    lines.append("measured within %d%% of the simulator in %d/%d cases; spread below %d%% in %d/%d"
                 % (round(AGREE * 100), met["agree"], met["runs"], round(SPREAD * 100),
                    met["steady"], met["runs"]))
    if any(s in rows[k] for k in order for s in ("bytesched",)):
        lines.append("bytesched: not run faithfully by this emulation: its credit window covers a few "
                     "of the guest's partition round trips, not hundreds as on a cluster (note = share "
                     "of the iteration the window was full; Documentation/benchmark.md)")
    lines.append("")
    lines.append("In plain words (measured in the emulation, ratios of iteration times):")
    lines.extend(plain)
    out["summary"] = met
    out["plain"] = plain
    with open(a.text, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
