#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Turn bench/training.sh's raw TSV into the table (text) and JSON.

Each case's iteration time is the median over its runs (min, max and
every run are kept); speedups are ratios of those (other / this); "sim" is
mercury-sim's prediction for the same scaled case, "agree" the measured
time over the predicted one (the target is within 15 %).
"""
import argparse
import json
import sys

TARGET_FIFO, TARGET_BS, TARGET_IDEAL, AGREE = 1.18, 1.08, 1.05, 0.15


def num(s):
    try:
        return float(s)
    except ValueError:
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
    lines = []
    lines.append("Emulated PS training (" + a.meta + ")")
    cfgw = max([len(k[0]) for k in order] + [6]) if configs else 0
    lines.append(("%-*s " % (cfgw, "config") if configs else "") +
                 "%-13s %-9s %10s %7s %8s %8s %8s %10s %7s %4s  %s" %
                 ("model", "scheme", "iter ms", "spread", "vs fifo", "vs bytes", "vs prio",
                  "sim ms", "meas/sim", "cpu%", "sums"))
    met = {"fifo": 0, "bytesched": 0, "ideal": 0, "agree": 0, "n": 0, "runs": 0}
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
        for s in ("fifo", "prio", "bytesched", "mercury"):
            if s not in sc:
                continue
            v = ms.get(s)
            lo, hi = num(sc[s].get("min_ms", "-")), num(sc[s].get("max_ms", "-"))
            runs = [num(x) for x in sc[s].get("runs_ms", "-").split(",")]
            cpu = [num(x) for x in sc[s].get("cpu_pct", "-").split(",")]
            spread = round((hi - lo) / v, 3) if v and lo is not None and hi is not None else None

            def ratio(base):
                b = ms.get(base)
                return round(b / v, 3) if b and v else None
            agree = round(v / sim[s], 3) if v and sim.get(s) else None
            e = {"scheme": s, "iteration_ms": v, "min_ms": lo, "max_ms": hi,
                 "runs_ms": [x for x in runs if x is not None], "spread": spread,
                 "cpu_pct": [x for x in cpu if x is not None],
                 "speedup_vs_fifo": ratio("fifo"),
                 "speedup_vs_bytesched": ratio("bytesched"), "speedup_vs_prio": ratio("prio"),
                 "sim_ms": sim.get(s), "measured_over_sim": agree,
                 "verified": sc[s]["verified"] == "1"}
            model["schemes"].append(e)
            met["runs"] += 1
            if agree is not None and abs(agree - 1) <= AGREE:
                met["agree"] += 1
            f = lambda x, w=8: ("%*.3f" % (w, x)) if x is not None else "%*s" % (w, "-")
            cpus = [x for x in cpu if x is not None]
            lines.append(("%-*s " % (cfgw, cfg) if configs else "") +
                         "%-13s %-9s %10s %7s %8s %8s %8s %10s %7s %4s   %s" % (
                m, s, f(v, 10), ("%6.1f%%" % (100 * spread)) if spread is not None else "      -",
                f(e["speedup_vs_fifo"]), f(e["speedup_vs_bytesched"]),
                f(e["speedup_vs_prio"]), f(sim.get(s), 10), f(agree, 7),
                ("%d" % round(sum(cpus) / len(cpus))) if cpus else "-",
                "exact" if e["verified"] else "FAILED"))
        mer = next((e for e in model["schemes"] if e["scheme"] == "mercury"), None)
        if mer:
            met["n"] += 1
            met["fifo"] += bool(mer["speedup_vs_fifo"] and mer["speedup_vs_fifo"] >= TARGET_FIFO)
            met["bytesched"] += bool(mer["speedup_vs_bytesched"] and
                                     mer["speedup_vs_bytesched"] >= TARGET_BS)
            if sim.get("mercury") and sim.get("ideal"):
                model["sim_mercury_over_ideal"] = round(sim["mercury"] / sim["ideal"], 4)
                met["ideal"] += model["sim_mercury_over_ideal"] <= TARGET_IDEAL
        out["models"].append(model)
    lines.append("")
    lines.append("spread = (max - min) / median over the runs of a case; cpu% = guest CPU busy "
                 "(both vCPUs) during a run")
    lines.append("Mercury, measured: >= %.2fx fifo on %d/%d models, >= %.2fx bytesched on %d/%d; "
                 "simulated within %d%% of ideal on %d/%d; measured within %d%% of the simulator "
                 "in %d/%d runs" % (TARGET_FIFO, met["fifo"], met["n"], TARGET_BS, met["bytesched"],
                                   met["n"], round((TARGET_IDEAL - 1) * 100), met["ideal"], met["n"],
                                   round(AGREE * 100), met["agree"], met["runs"]))
    out["summary"] = met
    with open(a.text, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
