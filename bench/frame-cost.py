#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""What one data-plane frame costs mercury-ps, measured where it runs.

    bench/frame-cost.py [--bytes N] [--repeat R]

One worker and one server over 127.0.0.1, no compute (--time-scale 0),
resnet50 scaled to N gradient bytes per iteration (default 4000000):

1. fifo-stream at four frame sizes: the same bytes in more or fewer
   frames. The slope of the CPU time against the frames is what a frame
   costs beyond its bytes. CPU time (user + system, from wait4) rather
   than wall time, because the machine is shared: another tenant's load
   stretches the wall clock but not the work a frame takes. Each process
   handles every frame twice (the worker sends it and receives its pull,
   the server receives, sums and sends it); the two run concurrently, so
   the busier one's CPU per frame is the least time a frame holds its
   path: the simulator's --frame-cost.
2. bytesched with as many frames (partition = the chunk, a window that
   never fills): what a partition costs beyond a frame (CPU, likewise).
3. bytesched with one partition in flight: wall iteration / partitions is
   one partition's round trip (two frame costs and the latency both
   ways), so LATENCY_US = (round trip - 2 * frame cost) / 2 is the
   simulator's --latency for this data plane.

Every point is the fastest of R runs (default 3). The last lines are shell
assignments: FRAME_COST_US, PART_EXTRA_US, PART_RTT_US, LATENCY_US.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PS = os.path.join(TOP, "userspace/ps/mercury-ps")
SIM = os.path.join(TOP, "userspace/sim/mercury-sim")
PROF = os.path.join(TOP, "profiles/h200/resnet50.json")
ITER = 6


def run(scheme, scale, extra, tmp):
    """One job: (wall ms per iteration, cpu ms per iteration of the busier
    process, frames per iteration, partitions per iteration)."""
    port = random.randint(20000, 40000)
    args = ["--profile", PROF, "--servers", "127.0.0.1:%d" % port, "--workers", "1",
            "--scheme", scheme, "--iterations", str(ITER), "--time-scale", "0",
            "--bytes-scale", "%.6g" % scale, "--timeout", "20"] + extra
    with open(os.path.join(tmp, "s.err"), "w") as se, \
            open(os.path.join(tmp, "w.err"), "w") as we, \
            open(os.path.join(tmp, "w.json"), "w") as wo:
        srv = subprocess.Popen([PS, "server", "--server-id", "0"] + args,
                               stdout=subprocess.DEVNULL, stderr=se)
        wrk = subprocess.Popen([PS, "worker", "--worker-id", "0", "-j"] + args,
                               stdout=wo, stderr=we)
        cpu = {}
        for p in (srv, wrk):
            _, st, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(st)
            cpu[p.pid] = ru.ru_utime + ru.ru_stime
    if srv.returncode or wrk.returncode:
        for f in ("s.err", "w.err"):
            sys.stderr.write(open(os.path.join(tmp, f)).read())
        sys.exit("frame-cost: mercury-ps failed")
    d = json.load(open(os.path.join(tmp, "w.json")))
    it = d["iteration_ms"][1:]		# the first includes slow start
    return (sum(it) / len(it), max(cpu.values()) * 1e3 / ITER, d["frames"],
            d.get("bytesched", {}).get("partitions", 0) / ITER)


def best(scheme, scale, extra, tmp, repeat, key):
    return min((run(scheme, scale, extra, tmp) for _ in range(repeat)), key=key)


def fit(pts):
    n = len(pts)
    sx = sum(x for x, _ in pts)
    sy = sum(y for _, y in pts)
    sxx = sum(x * x for x, _ in pts)
    sxy = sum(x * y for x, y in pts)
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return (sy - b * sx) / n, b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bytes", type=int, default=4000000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    for b in (PS, SIM):
        if not os.access(b, os.X_OK):
            sys.exit("frame-cost: build userspace/ps and userspace/sim first (%s)" % b)
    full = json.loads(subprocess.check_output(
        [SIM, "--profile", PROF, "--scheme", "vanilla", "-j"]))["gradient_bytes"]
    scale = a.bytes / full
    print("# frame-cost: resnet50 x%.6g (%d bytes per iteration), 1 worker, 1 server, "
          "127.0.0.1, no compute, fastest of %d" % (scale, a.bytes, a.repeat))
    print("# %-22s %7s %7s %10s %8s %8s" % ("scheme", "frame_B", "frames", "partitions",
                                            "wall_ms", "cpu_ms"))
    pts = []
    with tempfile.TemporaryDirectory(prefix="frame-cost.") as tmp:
        for frame in (1024, 4096, 16384, 65536):
            chunk = 4 * int(frame / 4 / scale + 0.5)
            wall, cpu, fr, _ = best("fifo-stream", scale, ["--chunk", str(chunk)], tmp,
                                    a.repeat, key=lambda r: r[1])
            print("  %-22s %7d %7d %10s %8.3f %8.3f" % ("fifo-stream", frame, fr, "-", wall, cpu))
            pts.append((fr, cpu))
            if frame == 4096:
                ref, ref_chunk = (wall, cpu, fr), chunk
        bw, bc, bf, bp = best("bytesched", scale, ["--partition", str(ref_chunk), "--credit",
                                                   "1gib"], tmp, a.repeat, key=lambda r: r[1])
        print("  %-22s %7d %7d %10d %8.3f %8.3f" % ("bytesched, full window", 4096, bf, bp, bw, bc))
        ow, oc, of, op = best("bytesched", scale, ["--partition", str(ref_chunk), "--credit",
                                                   "4"], tmp, a.repeat, key=lambda r: r[0])
        print("  %-22s %7d %7d %10d %8.3f %8.3f" % ("bytesched, 1 in flight", 4096, of, op, ow, oc))
    a0, b = fit(pts)
    fc = b * 1e3
    print("# least squares over %d points: cpu = %.3f ms + frames x %.3f us (busier process)"
          % (len(pts), a0, fc))
    rtt = ow / op * 1e3 if op else 0
    print("FRAME_COST_US=%.2f" % fc)
    print("PART_EXTRA_US=%.2f" % ((bc - ref[1]) / bp * 1e3 if bp else 0))
    print("PART_RTT_US=%.1f" % rtt)
    print("LATENCY_US=%.1f" % max(0.0, (rtt - 2 * fc) / 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
