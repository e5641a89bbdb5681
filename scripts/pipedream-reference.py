#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""PipeDream's optimizer as a reference run for `mercury-place pipe`.

usage: scripts/pipedream-reference.py PIPEDREAM_DIR [OUTDIR]

PIPEDREAM_DIR is a checkout (or `git archive`) of msr-fiddle/pipedream
holding optimizer/optimizer_graph_hierarchical.py and graph/graph.py;
nothing of it is copied into this tree.  For every graph in
profiles/pipedream/ and 4 and 8 machines this runs

  1. PipeDream's optimizer from that checkout, as its command line
     `optimizer_graph_hierarchical.py -f GRAPH -n M -b 1250000000
     --activation_compression_ratio 1` (10 Gbit/s, no memory constraint:
     the settings of Documentation/placement.md's comparison), and reads
     its printed speedup, stages and replication;
  2. userspace/place/mercury-place pipe --pipedream-model --bandwidth
     10gbit -j on the same graph (h100x4/h100x8 clusters; PipeDream's
     model has no memory or latency term), and reads its partition;
  3. PipeDream's own `compute_partitioning` (the optimizer's dynamic
     programme, from the same run) on mercury-place's partition: the
     states it is given are the optimizer's own antichain states at
     mercury-place's stage boundaries (a boundary that is none of them,
     a downset its enumeration does not reach, is made a state the way
     the optimizer's main() makes one, with graph.py's
     deaugment_augmented_antichain, augment_antichain and
     all_predecessors; on boundaries that are states this agrees with
     the optimizer's to the last bit, checked), each stage allowed only
     between consecutive boundaries, so the programme can only choose
     the replication of each stage (and leave machines unused, as
     mercury-place may).  Its period is mercury-place's partition priced
     by PipeDream's formulas.  Self-check, every run: the optimizer's own
     partition priced this way gives its printed speedup exactly.

and prints one table.  Per-run output lands in OUTDIR (default
out/pipedream-reference).  A graph whose optimizer run does not finish
in PD_TIMEOUT seconds (default 300) or within PD_MEM_GB of address
space (default 4), or whose antichain DAG has more than PD_MAX_STATES
states (default 20000; its programme fills (states + 1) x states x M
tables in Python: Inception-v3 has 221,564), is listed as such, and not
re-run for 8 machines;
PD_GRAPHS="resnet50 gnmt" runs only those graphs.

Compatibility shims, all here, PipeDream's files untouched (it was
written for Python 2): stub `graphviz` and `numpy` modules (graph.py
imports graphviz for to_dot() only, which runs only with -o; the
optimizer uses numpy only to print its cost matrix), the checkout's
graph/ and optimizer/ directories on sys.path (it expects to be started
from optimizer/), and a higher recursion limit and thread stack (its
graph walks recurse once per node of a path).  PYTHONHASHSEED=0 for
the optimizer: it iterates over sets of node names, so where two
partitions tie, which one it prints (not its speedup) otherwise varies
from run to run (ResNet-101 on 8 machines: 4 or 6 stages, both 5.00x).

A manual reference run (CI has no network and no PipeDream checkout),
not part of `make test`.  Documentation/results/placement.md has its
last output.
"""

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
import types

BW = 1.25e9          # bytes/s: 10 Gbit/s, as in the comparison
MACHINES = (4, 8)
MAX_STATES = int(os.environ.get("PD_MAX_STATES", "20000"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLACE = os.path.join(ROOT, "userspace", "place", "mercury-place")
GRAPHS = os.path.join(ROOT, "profiles", "pipedream")
NEEDED = ("optimizer/optimizer_graph_hierarchical.py", "optimizer/utils.py",
          "graph/graph.py", "graph/__init__.py")


def die(msg):
    sys.stderr.write("pipedream-reference: %s\n" % msg)
    sys.exit(1)


# ---- child: one PipeDream optimizer run, then its pricing of mercury's cut

def shims(pd):
    """Make PipeDream's Python 2 optimizer importable under Python 3."""
    stub = types.ModuleType("graphviz")
    stub.Digraph = None                   # used by Graph.to_dot() only
    sys.modules["graphviz"] = stub
    np = types.ModuleType("numpy")
    np.array = lambda x: "<cost matrix, %d rows: not printed>" % len(x)
    sys.modules["numpy"] = np
    sys.path[:0] = [pd, os.path.join(pd, "optimizer")]
    sys.setrecursionlimit(100000)


def one(pd, graph, machines, mercury_json):
    import runpy
    shims(pd)
    import graph as pdgraph                          # PipeDream's graph/
    seen = {}
    topo = pdgraph.Graph.topological_sort
    antichain_dag = pdgraph.Graph.antichain_dag

    def rec_topo(self):
        res = topo(self)
        if res and hasattr(res[0], "antichain"):
            seen["states"] = res                     # the optimizer's states
            if len(res) > MAX_STATES:
                # its DP fills (states + 1) x states x M tables in Python
                sys.__stdout__.write("TOO-MANY-STATES %d\n" % len(res))
                sys.__stdout__.flush()
                os._exit(3)
        return res

    def rec_adag(self):
        seen["gr"] = self                            # the operator graph
        return antichain_dag(self)

    pdgraph.Graph.topological_sort = rec_topo
    pdgraph.Graph.antichain_dag = rec_adag

    script = os.path.join(pd, "optimizer", "optimizer_graph_hierarchical.py")
    sys.argv = [script, "-f", graph, "-n", str(machines),
                "-b", "%d" % BW, "--activation_compression_ratio", "1"]
    t0 = time.time()
    buf = io.StringIO()

    class Tee:                          # its output, kept and passed on
        def write(self, x):
            buf.write(x)
            return sys.__stdout__.write(x)

        def flush(self):
            sys.__stdout__.flush()
    with contextlib.redirect_stdout(Tee()):
        glob = runpy.run_path(script, run_name="__main__")
    text = buf.getvalue()
    t_pd = time.time() - t0

    states, gr = seen["states"], seen["gr"]
    cp = glob["compute_partitioning"]
    # the optimizer dropped the Input sources and the __getitem__ sinks (the
    # latter are gone from gr; it put the Inputs back after solving)
    skip = set(n for n, v in gr.nodes.items() if v.node_desc.startswith("Input"))
    index = {}
    for i, s in enumerate(states):
        key = frozenset(p.node_id for p in gr.all_predecessors(s.antichain)) - skip
        index.setdefault(key, i)

    def state_of(keyset):
        """A prefix as the optimizer's main() makes a state of it: its
        antichain (the prefix's maximal nodes, by graph.py's
        deaugment_augmented_antichain) augmented by graph.py's
        augment_antichain; the output bytes are those of the augmented
        antichain, compute (fwd + bwd, in s), stashed activations and
        parameters the sums over graph.py's all_predecessors."""
        anti = gr.augment_antichain(gr.deaugment_augmented_antichain(sorted(keyset)))
        s = types.SimpleNamespace(antichain=anti, compute_time=0.0,
                                  activation_size=0.0, parameter_size=0.0)
        s.output_activation_size = sum(gr.nodes[n].activation_size for n in anti)
        for p in gr.all_predecessors(anti):
            s.compute_time += (p.forward_compute_time + p.backward_compute_time) / 1000.0
            s.activation_size += p.activation_size
            s.parameter_size += p.parameter_size
        return s

    def price(st):
        """PipeDream's compute_partitioning over these states only: a
        stage may run from one boundary to the next, nothing else, so the
        programme can choose each stage's replication (and leave machines
        unused) but cannot merge stages or move a cut."""
        S = len(st)

        def diff(attr, i, j):
            return getattr(st[j], attr) - (getattr(st[i - 1], attr) if i else 0.0)
        ct = [[None] * S for _ in range(S + 1)]
        act = [[None] * S for _ in range(S + 1)]
        par = [[None] * S for _ in range(S + 1)]
        for i in range(S + 1):
            for j in range(i, S):
                act[i][j] = diff("activation_size", i, j)
                par[i][j] = diff("parameter_size", i, j)
        # ct[i][j]: a stage after boundary i-1 up to boundary j
        ct[0][0] = diff("compute_time", 0, 0)
        for t in range(1, S):
            ct[t][t] = diff("compute_time", t, t)
        outs = [s.output_activation_size for s in st]
        preds = [[t - 1] if t else [] for t in range(S)]
        cp.__globals__["use_fewer_machines"] = True
        try:
            A = cp(ct, act, par, outs, preds, machines, 1, BW, final_level=True)
        finally:
            cp.__globals__["use_fewer_machines"] = False
        reps, meta = [], A[0][S - 1][machines - 1]
        period = meta[0]
        while meta[1] is not None:
            reps.append(meta[2])
            meta = A[0][meta[1][0]][meta[1][1]]
        reps.append(meta[2])
        reps.reverse()
        return states[-1].compute_time / period, reps, outs[:-1]

    # self-check: the optimizer's own partition (its printed "(start, end)"
    # stages end at state end - 1) priced this way gives its own speedup
    own = [int(e) for (_, e, _) in
           re.findall(r"^\((\d+), (\d+)\) \S+ (\d+)$", text, re.M)]
    pd_sp = float(re.search(r"Throughput increase \(compared to single "
                            r"machine\): (\S+)", text).group(1))
    self_sp = price([states[e - 1] for e in own])[0]
    if abs(self_sp / pd_sp - 1) > 1e-9:
        raise SystemExit("pricing its own partition gives %.6f, its output %.6f"
                         % (self_sp, pd_sp))

    # mercury-place's partition: its stage boundaries as states
    with open(mercury_json) as f:
        mp = json.load(f)
    prefix, st, missing, worst = set(), [], 0, 0.0
    for stage in mp["pipeline"]:
        prefix |= set(stage["members"])
        key = frozenset(n for n in prefix if n in gr.nodes) - skip
        mine = state_of(key)
        if key in index:
            # the same prefix as one of the optimizer's states: check state_of()
            ref = states[index[key]]
            for a in ("compute_time", "activation_size", "parameter_size",
                      "output_activation_size"):
                x, y = getattr(mine, a), getattr(ref, a)
                worst = max(worst, abs(x - y) / max(abs(y), 1e-300))
            st.append(ref)
        else:
            missing += 1
            st.append(mine)
    if worst > 1e-9:
        raise SystemExit("state_of() differs from the optimizer's states by %g" % worst)
    sp, reps, cuts = price(st)
    print("REFERENCE-JSON " + json.dumps({
        "pd_seconds": t_pd, "states": len(states), "self_check": self_sp,
        "mercury_stages": len(mp["pipeline"]),
        "mercury_replicas": [len(s["devices"]) for s in mp["pipeline"]],
        "not_states": missing, "priced": sp, "priced_replicas": reps,
        "cut_bytes": cuts,
        "cut_antichains": [sorted(s.antichain) for s in st[:-1]]}))


# ---- parent: every graph and setting, one table

def parse_pd(text):
    m = re.search(r"Throughput increase \(compared to single machine\): (\S+)", text)
    d = re.search(r"Throughput increase of \(\d+\)-machine DP compared to single machine: (\S+)", text)
    s = re.findall(r"Total number of stages: (\d+)", text)
    # the final configuration: "(start, end) time replication" lines
    conf = re.findall(r"^\((\d+), (\d+)\) \S+ (\d+)$", text, re.M)
    return (float(m.group(1)) if m else None, float(d.group(1)) if d else None,
            int(s[-1]) if s else None, [int(r) for (_, _, r) in conf])


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--one":
        return one(*sys.argv[2:4], int(sys.argv[4].split(":")[0]),
                   sys.argv[4].split(":", 1)[1])
    if len(sys.argv) not in (2, 3) or sys.argv[1].startswith("-"):
        sys.stderr.write("usage: scripts/pipedream-reference.py PIPEDREAM_DIR [OUTDIR]\n")
        sys.exit(2)
    pd = os.path.abspath(sys.argv[1])
    if not os.path.isdir(pd):
        die("%s: no such directory (a checkout of msr-fiddle/pipedream)" % pd)
    lack = [f for f in NEEDED if not os.path.isfile(os.path.join(pd, f))]
    if lack:
        die("%s: not a PipeDream checkout, lacks %s" % (pd, " ".join(lack)))
    if not os.access(PLACE, os.X_OK):
        die("%s: not built (make -C userspace/place)" % PLACE)
    outdir = os.path.abspath(sys.argv[2] if len(sys.argv) == 3 else
                             os.path.join(ROOT, "out", "pipedream-reference"))
    os.makedirs(outdir, exist_ok=True)
    timeout = float(os.environ.get("PD_TIMEOUT", "300"))
    only = os.environ.get("PD_GRAPHS", "").split()
    graphs = sorted(f[:-len(".graph.txt")] for f in os.listdir(GRAPHS)
                    if f.endswith(".graph.txt"))
    if only:
        graphs = [g for g in graphs if g in only]
    clusters = {M: os.path.join(ROOT, "userspace", "place", "clusters",
                                "h100x%d.json" % M) for M in MACHINES}
    head = ("%-14s %2s | %-26s %6s | %-26s %6s | %-27s | %9s %9s" %
            ("graph", "M", "PipeDream's optimizer", "its DP",
             "mercury-place", "its DP", "mercury's cuts, PD-priced",
             "priced/PD", "mp/priced"))
    def rev(d):
        r = subprocess.run(["git", "-C", d, "describe", "--always", "--dirty",
                            "--abbrev=12"], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else "(not a git checkout)"
    rows = ["PipeDream %s %s: optimizer_graph_hierarchical.py -n M -b %d "
            "--activation_compression_ratio 1, %s" % (pd, rev(pd), BW, sys.version.split()[0]),
            "mercury-place %s: pipe --pipedream-model --bandwidth 10gbit, "
            "clusters/h100xM.json" % rev(ROOT), "", head, "-" * len(head)]

    def cell(sp, reps):
        return "%5.2fx %d: %s" % (sp, len(reps), ",".join(map(str, reps)))
    mem = float(os.environ.get("PD_MEM_GB", "4"))

    def limit():
        import resource
        b = int(mem * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (b, b))
    t_all = time.time()
    slow = set()
    for gname in graphs:
        gpath = os.path.join(GRAPHS, gname + ".graph.txt")
        for M in MACHINES:
            tag = "%s-%d" % (gname, M)
            mjson = os.path.join(outdir, tag + ".mercury.json")
            r = subprocess.run([PLACE, "pipe", "--profile", gpath, "--cluster",
                                clusters[M], "--pipedream-model", "--bandwidth",
                                "10gbit", "-j"], capture_output=True, text=True)
            if r.returncode:
                die("mercury-place failed on %s: %s" % (tag, r.stderr.strip()))
            with open(mjson, "w") as f:
                f.write(r.stdout)
            mp = json.loads(r.stdout)
            t0 = time.time()
            log = os.path.join(outdir, tag + ".pipedream.txt")
            mreps = [len(x["devices"]) for x in mp["pipeline"]]
            if gname in slow:
                # the antichain enumeration does not depend on M
                rows.append("%-14s %2d | %-33s | %-26s %5.2fx | %-27s |" %
                            (gname, M, "not run (see above)",
                             cell(mp["speedup"], mreps),
                             mp["data_parallel_speedup"], "-"))
                continue
            try:
                c = subprocess.run([sys.executable, os.path.abspath(__file__),
                                    "--one", pd, gpath, "%d:%s" % (M, mjson)],
                                   capture_output=True, text=True,
                                   timeout=timeout, preexec_fn=limit,
                                   env=dict(os.environ, PYTHONHASHSEED="0"))
                text, rc = c.stdout + c.stderr, c.returncode
            except subprocess.TimeoutExpired as e:
                text = e.stdout or ""
                if isinstance(text, bytes):
                    text = text.decode(errors="replace")
                text += "\n[did not finish in %.0f s]\n" % timeout
                rc = None
            with open(log, "w") as f:
                f.write(text)
            dt = time.time() - t0
            sys.stderr.write("pipedream-reference: %s: %.1f s\n" % (tag, dt))
            if rc != 0:
                many = re.search(r"TOO-MANY-STATES (\d+)", text)
                if rc is None:
                    why = "did not finish in %.0f s" % timeout
                elif many:
                    why = "%s states: too many" % many.group(1)
                elif "MemoryError" in text:
                    why = "out of memory (%g GB)" % mem
                else:
                    why = "failed (rc %d, %s)" % (rc, os.path.basename(log))
                if rc is None or many or "MemoryError" in text:
                    slow.add(gname)
                rows.append("%-14s %2d | %-33s | %-26s %5.2fx | %-27s |" %
                            (gname, M, why, cell(mp["speedup"], mreps),
                             mp["data_parallel_speedup"], "-"))
                continue
            sp, dp, nst, reps = parse_pd(text)
            ref = json.loads(text.split("REFERENCE-JSON ", 1)[1].splitlines()[0])
            mark = "+" if ref["not_states"] else " "
            rows.append("%-14s %2d | %-26s %5.2fx | %-26s %5.2fx | %-26s%s | %9.3f %9.3f" %
                        (gname, M, cell(sp, reps), dp, cell(mp["speedup"], mreps),
                         mp["data_parallel_speedup"],
                         cell(ref["priced"], ref["priced_replicas"]), mark,
                         ref["priced"] / sp, mp["speedup"] / ref["priced"]))
    rows.append("")
    rows.append("PipeDream's optimizer: its printed speedup over one machine, stages: replication of each; its DP: its data-parallel speedup.")
    rows.append("mercury-place: `pipe --pipedream-model` speedup, stages: replicas; its DP: its data-parallel figure. mercury's cuts, PD-priced: mercury-place's stage")
    rows.append("boundaries through PipeDream's compute_partitioning, which re-chooses the replication (+: a boundary that is not one of")
    rows.append("the optimizer's antichain states, made a state by its graph code). mp/priced: mercury-place's own figure over that price.")
    rows.append("Total %.0f s." % (time.time() - t_all))
    table = "\n".join(rows)
    print(table)
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write(table + "\n")


def run():
    rc = [1]

    def body():
        try:
            main()
            rc[0] = 0
        except SystemExit as e:
            rc[0] = e.code if isinstance(e.code, int) else 1
        except BaseException:
            import traceback
            traceback.print_exc()
    # PipeDream's recursive graph walks need a deeper C stack than the
    # main thread has on long chains
    import threading
    threading.stack_size(256 * 1024 * 1024)
    t = threading.Thread(target=body)
    t.start()
    t.join()
    sys.stdout.flush()
    sys.exit(rc[0])


if __name__ == "__main__":
    run()
