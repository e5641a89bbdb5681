#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Turn bench/training.sh's raw TSV into the table (text) and JSON.

Speedups are ratios of iteration times (other / this); "sim" is
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
            if r["model"] not in rows:
                rows[r["model"]] = {}
                order.append(r["model"])
            rows[r["model"]][r["scheme"]] = r
    out = {"meta": a.meta, "models": []}
    lines = []
    hdr = ("%-13s %-9s %10s %8s %8s %8s %10s %7s  %s" %
           ("model", "scheme", "iter ms", "vs fifo", "vs bytes", "vs prio",
            "sim ms", "meas/sim", "sums"))
    lines.append("Emulated PS training (" + a.meta + ")")
    lines.append(hdr)
    met = {"fifo": 0, "bytesched": 0, "ideal": 0, "agree": 0, "n": 0, "runs": 0}
    for m in order:
        sc = rows[m]
        ms = {k: num(v["measured_ms"]) for k, v in sc.items()}
        sim = {k: num(v["sim_ms"]) for k, v in sc.items()}
        model = {"model": m, "bytes_scale": num(next(iter(sc.values()))["bytes_scale"]),
                 "time_scale": num(next(iter(sc.values()))["time_scale"]),
                 "compute_ms": num(next(iter(sc.values()))["compute_ms"]),
                 "gradient_bytes": int(float(next(iter(sc.values()))["gradient_bytes"])),
                 "ideal_sim_ms": sim.get("ideal"), "schemes": []}
        for s in ("fifo", "prio", "bytesched", "mercury"):
            if s not in sc:
                continue
            v = ms.get(s)

            def ratio(base):
                b = ms.get(base)
                return round(b / v, 3) if b and v else None
            agree = round(v / sim[s], 3) if v and sim.get(s) else None
            e = {"scheme": s, "iteration_ms": v, "speedup_vs_fifo": ratio("fifo"),
                 "speedup_vs_bytesched": ratio("bytesched"), "speedup_vs_prio": ratio("prio"),
                 "sim_ms": sim.get(s), "measured_over_sim": agree,
                 "verified": sc[s]["verified"] == "1"}
            model["schemes"].append(e)
            met["runs"] += 1
            if agree is not None and abs(agree - 1) <= AGREE:
                met["agree"] += 1
            f = lambda x, w=8: ("%*.3f" % (w, x)) if x is not None else "%*s" % (w, "-")
            lines.append("%-13s %-9s %10s %8s %8s %8s %10s %7s   %s" % (
                m, s, f(v, 10), f(e["speedup_vs_fifo"]), f(e["speedup_vs_bytesched"]),
                f(e["speedup_vs_prio"]), f(sim.get(s), 10), f(agree, 7),
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
